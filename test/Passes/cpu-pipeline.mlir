// The CPU pipeline takes a graph of seq and upstream ops all the way to the
// LLVM dialect: nothing else is left, and the runtime's entry points are the
// only external calls besides libm.
// RUN: seqc-opt %s --seqc-cpu-pipeline | FileCheck %s
// RUN: seqc-opt %s --seqc-reference-pipeline | FileCheck %s

// CHECK-NOT: seq.
// CHECK-NOT: memref.
// CHECK-NOT: scf.
// CHECK-NOT: tensor.
// CHECK-DAG: llvm.func @_mlir_memref_to_llvm_alloc(i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @seqc_rt_check_failed
// CHECK-DAG: llvm.func @log1pf(f32) -> f32
// CHECK: llvm.func @main
func.func @main(%x: tensor<1x?x4x8xf32>, %dt: tensor<1x?x4xf32>, %A: tensor<4xf32>,
                %B: tensor<1x?x1x16xf32>, %C: tensor<1x?x1x16xf32>, %w: tensor<8x8xf32>)
    -> (tensor<1x?x4x8xf32>, tensor<1x4x8x16xf32>) {
  %y, %l = seq.ssd %x, %dt, %A, %B, %C {dt_softplus = true}
    : (tensor<1x?x4x8xf32>, tensor<1x?x4xf32>, tensor<4xf32>, tensor<1x?x1x16xf32>, tensor<1x?x1x16xf32>)
      -> (tensor<1x?x4x8xf32>, tensor<1x4x8x16xf32>)
  return %y, %l : tensor<1x?x4x8xf32>, tensor<1x4x8x16xf32>
}
