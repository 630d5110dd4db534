// A matmul whose B is a function constant reads B's panels from a constant
// global packed when the module is compiled (packConstantPanels): no kernel
// packs B in a call. With 16 lanes a panel is 32 columns: B's 20 columns,
// then zeros; in f32 each panel row is a step, with bf16 pairs a row holds
// steps 2r and 2r + 1 of each column side by side. moe_ffn's constant
// expert weights are packed the same way, one batch of panels per expert.
// RUN: seqc-opt %s --seq-lower-to-cpu="vector-width=16 bf16-products=widen" --mlir-print-elementsattrs-with-hex-if-larger=100000 --split-input-file | FileCheck %s
// RUN: seqc-opt %s --seq-lower-to-cpu="vector-width=16 bf16-products=dot" --mlir-print-elementsattrs-with-hex-if-larger=100000 --split-input-file | FileCheck %s --check-prefix=DOT

// CHECK: memref.global "private" constant @__seqc_packed_weight : memref<1x1x1x{{[0-9]+}}x32xf32> = dense<{{\[\[\[\[\[}}1.000000e+00, 2.000000e+00, {{.*}}, 2.000000e+01, 0.000000e+00, {{.*}}, 0.000000e+00], [1.010000e+02, 1.020000e+02,
// CHECK-SAME: {{alignment = 64}}
// CHECK-LABEL: func.func @constant_weight(
// CHECK-NOT: pack_b
// CHECK: memref.get_global @__seqc_packed_weight
// CHECK-NOT: pack_b
// CHECK: seq_rt.parallel_for
// CHECK-NOT: pack_b
func.func @constant_weight(%a: tensor<?x3xf32>) -> tensor<?x20xf32> {
  %c0 = arith.constant 0 : index
  %w = arith.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0], [101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0, 111.0, 112.0, 113.0, 114.0, 115.0, 116.0, 117.0, 118.0, 119.0, 120.0], [201.0, 202.0, 203.0, 204.0, 205.0, 206.0, 207.0, 208.0, 209.0, 210.0, 211.0, 212.0, 213.0, 214.0, 215.0, 216.0, 217.0, 218.0, 219.0, 220.0]]> : tensor<3x20xf32>
  %m = tensor.dim %a, %c0 : tensor<?x3xf32>
  %e = tensor.empty(%m) : tensor<?x20xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x20xf32>) -> tensor<?x20xf32>
  %r = linalg.matmul ins(%a, %w : tensor<?x3xf32>, tensor<3x20xf32>) outs(%f : tensor<?x20xf32>) -> tensor<?x20xf32>
  return %r : tensor<?x20xf32>
}

// -----

// DOT: memref.global "private" constant @__seqc_packed_weight : memref<1x1x1x{{[0-9]+}}x64xbf16> = dense<{{\[\[\[\[\[}}1.000000e+00, 1.010000e+02, 2.000000e+00, 1.020000e+02,
// DOT-SAME: 2.000000e+01, 1.200000e+02, 0.000000e+00,
// DOT-SAME: [2.010000e+02, 0.000000e+00, 2.020000e+02, 0.000000e+00,
// DOT-LABEL: func.func @constant_bf16_weight(
// DOT-NOT: pack_b
// DOT: x86vector.avx512.dot
func.func @constant_bf16_weight(%a: tensor<?x3xbf16>) -> tensor<?x20xf32> {
  %c0 = arith.constant 0 : index
  %w = arith.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0], [101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0, 111.0, 112.0, 113.0, 114.0, 115.0, 116.0, 117.0, 118.0, 119.0, 120.0], [201.0, 202.0, 203.0, 204.0, 205.0, 206.0, 207.0, 208.0, 209.0, 210.0, 211.0, 212.0, 213.0, 214.0, 215.0, 216.0, 217.0, 218.0, 219.0, 220.0]]> : tensor<3x20xbf16>
  %m = tensor.dim %a, %c0 : tensor<?x3xbf16>
  %e = tensor.empty(%m) : tensor<?x20xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x20xf32>) -> tensor<?x20xf32>
  %r = linalg.matmul ins(%a, %w : tensor<?x3xbf16>, tensor<3x20xbf16>) outs(%f : tensor<?x20xf32>) -> tensor<?x20xf32>
  return %r : tensor<?x20xf32>
}

// -----

// moe_ffn's constant expert weights: each packed when compiled, as a batch
// of E panels; the up and down kernels read them.
// CHECK-LABEL: func.func @constant_experts(
// CHECK: %[[UP:.*]] = memref.get_global @__seqc_packed_weight{{.*}} : memref<2x1x1x{{[0-9]+}}x32xf32>
// CHECK: %[[GATE:.*]] = memref.get_global @__seqc_packed_weight{{.*}} : memref<2x1x1x{{[0-9]+}}x32xf32>
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_moe_up({{.*}}, %[[UP]], {{.*}}, %[[GATE]])
// CHECK: %[[DOWN:.*]] = memref.get_global @__seqc_packed_weight{{.*}} : memref<2x1x1x{{[0-9]+}}x32xf32>
// CHECK: seq_rt.parallel_for %{{.*}}, @__seqc_moe_down({{.*}}, %[[DOWN]],
func.func @constant_experts(%x: tensor<5x3xf32>, %w: tensor<5x2xf32>, %idx: tensor<5x2xi32>)
    -> (tensor<5x3xf32>, tensor<2xi64>) {
  %up = arith.constant dense<0.5> : tensor<2x3x4xf32>
  %down = arith.constant dense<0.25> : tensor<2x4x3xf32>
  %gate = arith.constant dense<1.5> : tensor<2x3x4xf32>
  %y, %load = seq.moe_ffn %x, %w, %idx, %up, %down gate_proj(%gate)
      : (tensor<5x3xf32>, tensor<5x2xf32>, tensor<5x2xi32>, tensor<2x3x4xf32>,
         tensor<2x4x3xf32>, tensor<2x3x4xf32>) -> (tensor<5x3xf32>, tensor<2xi64>)
  return %y, %load : tensor<5x3xf32>, tensor<2xi64>
}
