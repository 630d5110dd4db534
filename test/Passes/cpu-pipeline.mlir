// Both CPU pipelines take a graph of seq and upstream ops all the way to the
// LLVM dialect. The fast one runs kernels on the thread pool with vectors of
// the requested width and polynomial math; the reference one keeps libm.
// RUN: seqc-opt %s --seqc-cpu-pipeline=vector-width=8 > %t.fast
// RUN: FileCheck %s --check-prefixes=CHECK,FAST < %t.fast
// RUN: FileCheck %s --check-prefixes=NONE,FASTNONE < %t.fast
// RUN: seqc-opt %s --seqc-reference-pipeline > %t.ref
// RUN: FileCheck %s --check-prefixes=CHECK,REF < %t.ref
// RUN: FileCheck %s --check-prefixes=NONE,REFNONE < %t.ref

// Only the LLVM dialect is left.
// NONE-NOT: {{ seq\.[a-z_]+ }}
// NONE-NOT: memref.
// NONE-NOT: scf.
// NONE-NOT: tensor.
// NONE-NOT: vector.
// FASTNONE-NOT: llvm.func @log1pf
// REFNONE-NOT: seqc_rt_parallel_for

// CHECK-DAG: llvm.func @main(
// CHECK-DAG: llvm.func @_mlir_memref_to_llvm_alloc(i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @seqc_rt_check_failed
// FAST-DAG: llvm.func @seqc_rt_parallel_for(i64, !llvm.ptr, !llvm.ptr)
// FAST-DAG: llvm.intr.fmuladd({{.*}}) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// FAST-DAG: llvm.load {{.*}} -> vector<8xf32>
// REF-DAG: llvm.func @log1pf(f32) -> f32
func.func @main(%x: tensor<1x?x4x8xf32>, %dt: tensor<1x?x4xf32>, %A: tensor<4xf32>,
                %B: tensor<1x?x1x16xf32>, %C: tensor<1x?x1x16xf32>, %a: tensor<2x?x16xf32>)
    -> (tensor<1x?x4x8xf32>, tensor<1x4x8x16xf32>, tensor<2x?x16xf32>) {
  %y, %l = seq.ssd %x, %dt, %A, %B, %C {dt_softplus = true}
    : (tensor<1x?x4x8xf32>, tensor<1x?x4xf32>, tensor<4xf32>, tensor<1x?x1x16xf32>, tensor<1x?x1x16xf32>)
      -> (tensor<1x?x4x8xf32>, tensor<1x4x8x16xf32>)
  %h, %hl = seq.linear_scan %a, %a : (tensor<2x?x16xf32>, tensor<2x?x16xf32>) -> (tensor<2x?x16xf32>, tensor<2x16xf32>)
  return %y, %l, %h : tensor<1x?x4x8xf32>, tensor<1x4x8x16xf32>, tensor<2x?x16xf32>
}
