// Constant tensors bufferize to host globals a GPU cannot read: in host
// functions, seq-copy-globals-to-managed gives every use (kernels included)
// a copy in a call buffer (managed memory in a CUDA call).
// RUN: seqc-opt %s --seq-copy-globals-to-managed | FileCheck %s

memref.global "private" constant @table : memref<1x8xf32> = dense<1.0>

// CHECK-LABEL: func.func @f
// CHECK: %[[G:.*]] = memref.get_global @table : memref<1x8xf32>
// CHECK: %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x8xf32>
// CHECK: memref.copy %[[G]], %[[A]]
// CHECK: memref.load %[[A]]
// CHECK-NOT: memref.load %[[G]]
func.func @f(%i: index) -> f32 {
  %g = memref.get_global @table : memref<1x8xf32>
  %c0 = arith.constant 0 : index
  %v = memref.load %g[%c0, %i] : memref<1x8xf32>
  return %v : f32
}
