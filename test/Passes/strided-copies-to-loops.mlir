// seq-strided-copies-to-loops: a copy into a slice of a larger buffer (or
// with dynamic sizes) becomes linalg.copy, loops LLVM vectorizes, instead
// of the runtime's element-by-element memrefCopy; a copy of two contiguous
// static buffers stays a memcpy.
// RUN: seqc-opt %s -seq-strided-copies-to-loops | FileCheck %s

// CHECK-LABEL: func @into_slice
// CHECK: linalg.copy ins(%{{.*}} : memref<1x?x16x64xf32>) outs(%{{.*}} : memref<1x?x16x64xf32, strided<[?, 1024, 64, 1], offset: ?>>)
// CHECK-NOT: memref.copy
func.func @into_slice(%piece: memref<1x?x16x64xf32>, %packed: memref<1x?x16x64xf32>, %start: index) {
  %c1 = arith.constant 1 : index
  %n = memref.dim %piece, %c1 : memref<1x?x16x64xf32>
  %view = memref.subview %packed[0, %start, 0, 0] [1, %n, 16, 64] [1, 1, 1, 1]
      : memref<1x?x16x64xf32> to memref<1x?x16x64xf32, strided<[?, 1024, 64, 1], offset: ?>>
  memref.copy %piece, %view : memref<1x?x16x64xf32> to memref<1x?x16x64xf32, strided<[?, 1024, 64, 1], offset: ?>>
  return
}

// CHECK-LABEL: func @contiguous
// CHECK: memref.copy
// CHECK-NOT: linalg.copy
func.func @contiguous(%a: memref<4x64xf32>, %b: memref<4x64xf32>) {
  memref.copy %a, %b : memref<4x64xf32> to memref<4x64xf32>
  return
}
