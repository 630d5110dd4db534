// The reference lowering: seq ops become sequential scf.for nests over
// tensors; dynamic dimensions get seq_rt.check run-time checks derived from the
// shape signature, static ones none.
// RUN: seqc-opt %s --seq-lower-to-reference --canonicalize | FileCheck %s

// CHECK-LABEL: func @static_scan
// CHECK-NOT: seq_rt.check
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     %{{.*}}:2 = scf.for %{{.*}} = %c0 to %c16 step %c1 iter_args(
// CHECK:       tensor.extract
// CHECK:       arith.mulf
// CHECK:       arith.addf
// CHECK:       tensor.insert
// CHECK-NOT: seq.
func.func @static_scan(%a: tensor<2x16x8xf32>, %b: tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>) {
  %h, %l = seq.linear_scan %a, %b : (tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
  return %h, %l : tensor<2x16x8xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: func @dynamic_ssd
// CHECK-DAG: seq_rt.check %{{.*}}, "seq.{{[a-z_]+}} at {{[^:]+}}:{{[0-9]+}}:{{[0-9]+}}: dimension 1 (T) of dt is {0} but x has {1}"
// CHECK-DAG: seq_rt.check %{{.*}}, "seq.{{[a-z_]+}} at {{[^:]+}}:{{[0-9]+}}:{{[0-9]+}}: dimension 0 (H) of A is {0} but x has {1}"
// CHECK-DAG: seq_rt.check %{{.*}}, "seq.{{[a-z_]+}} at {{[^:]+}}:{{[0-9]+}}:{{[0-9]+}}: G must be at least 1, but is {0}"
// CHECK-DAG: seq_rt.check %{{.*}}, "seq.{{[a-z_]+}} at {{[^:]+}}:{{[0-9]+}}:{{[0-9]+}}: H = {0} is not a multiple of G = {1}"
// The result's static N must match what B says at run time.
// CHECK-DAG: seq_rt.check %{{.*}}, "seq.{{[a-z_]+}} at {{[^:]+}}:{{[0-9]+}}:{{[0-9]+}}: dimension 3 (N) of last is {0} but B has {1}"
// CHECK: math.exp
// CHECK-NOT: seq.ssd
func.func @dynamic_ssd(%x: tensor<?x?x?x?xf32>, %dt: tensor<?x?x?xf32>, %A: tensor<?xf32>,
                       %B: tensor<?x?x?x?xf32>, %C: tensor<?x?x?x?xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x16xf32>) {
  %y, %l = seq.ssd %x, %dt, %A, %B, %C
    : (tensor<?x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
      -> (tensor<?x?x?x?xf32>, tensor<?x?x?x16xf32>)
  return %y, %l : tensor<?x?x?x?xf32>, tensor<?x?x?x16xf32>
}

// Expert indices are validated in a loop of their own before any is used.
// CHECK-LABEL: func @moe
// CHECK: scf.for
// CHECK-DAG: arith.cmpi slt
// CHECK-DAG: arith.cmpi sge
// CHECK: seq_rt.check %{{.*}}, "seq.{{[a-z_]+}} at {{[^:]+}}:{{[0-9]+}}:{{[0-9]+}}: expert index {2} at indices[{0}, {1}] is outside [0, {3})"
// The capacity, ceil(1.5 * 2 * 8 / 3) = 8 slots, folds to a constant.
// CHECK: arith.cmpi slt, %{{.*}}, %c8
func.func @moe(%x: tensor<8x4xf32>, %w: tensor<8x2xf32>, %i: tensor<8x2xi32>, %wu: tensor<3x4x6xf32>,
               %wd: tensor<3x6x4xf32>) -> (tensor<8x4xf32>, tensor<3xi64>) {
  %y, %load = seq.moe_ffn %x, %w, %i, %wu, %wd {capacity_factor = 1.5 : f32}
    : (tensor<8x4xf32>, tensor<8x2xf32>, tensor<8x2xi32>, tensor<3x4x6xf32>, tensor<3x6x4xf32>)
      -> (tensor<8x4xf32>, tensor<3xi64>)
  return %y, %load : tensor<8x4xf32>, tensor<3xi64>
}

// Exact ZOH keeps expm1 (lowered to libm later), and the A = 0 limit.
// Checks that hold statically fold away.
// CHECK-LABEL: func @zoh
// CHECK-NOT: seq_rt.check
// CHECK: arith.cmpf oeq
// CHECK: math.expm1
func.func @zoh(%u: tensor<1x4x2xf32>, %A: tensor<2x3xf32>, %B: tensor<1x4x1x3xf32>) -> (tensor<1x4x2xf32>, tensor<1x2x3xf32>) {
  %y, %l = seq.selective_scan %u, %u, %A, %B, %B {discretization = #seq.discretization<zoh>}
    : (tensor<1x4x2xf32>, tensor<1x4x2xf32>, tensor<2x3xf32>, tensor<1x4x1x3xf32>, tensor<1x4x1x3xf32>)
      -> (tensor<1x4x2xf32>, tensor<1x2x3xf32>)
  return %y, %l : tensor<1x4x2xf32>, tensor<1x2x3xf32>
}
