// seq-relax-expand-shape: an expand_shape with two dynamic sizes in one
// group (which MLIR 22's expand-strided-metadata cannot expand) becomes the
// reinterpret_cast it stands for: sizes from output_shape, the innermost
// dimension of the group keeping the source stride, each outer one the next
// one's stride times its size. Others are left alone.
// RUN: seqc-opt %s -seq-relax-expand-shape | FileCheck %s
// RUN: seqc-opt %s -seq-relax-expand-shape -expand-strided-metadata | FileCheck %s --check-prefix=EXPANDED

// CHECK-LABEL: func @two_dynamic
// CHECK: %[[OUTER:.*]] = arith.muli %arg2, %c96
// CHECK: memref.reinterpret_cast %arg0 to offset: [0], sizes: [%arg1, %arg2, 96], strides: [%[[OUTER]], 96, 1]
// CHECK-NOT: memref.expand_shape
// EXPANDED-LABEL: func @two_dynamic
// EXPANDED-NOT: memref.expand_shape
func.func @two_dynamic(%m: memref<?x96xf32>, %a: index, %b: index) -> memref<?x?x96xf32> {
  %e = memref.expand_shape %m [[0, 1], [2]] output_shape [%a, %b, 96]
      : memref<?x96xf32> into memref<?x?x96xf32>
  return %e : memref<?x?x96xf32>
}

// CHECK-LABEL: func @one_dynamic
// CHECK: memref.expand_shape
func.func @one_dynamic(%m: memref<?x96xf32>, %b: index) -> memref<4x?x96xf32> {
  %e = memref.expand_shape %m [[0, 1], [2]] output_shape [4, %b, 96]
      : memref<?x96xf32> into memref<4x?x96xf32>
  return %e : memref<4x?x96xf32>
}
