// seq-write-results-in-place: a kernel result (an allocation the kernels
// write through a strided view) copied whole into a slice of a larger
// buffer is written into the slice; the allocation and the copy go away.
// Only when nothing between the allocation and the copy uses the larger
// buffer, the buffer is allocated here, and the slice's operands are
// available at the allocation.
// RUN: seqc-opt %s -seq-write-results-in-place | FileCheck %s

!view = memref<1x?x4xf32, strided<[?, ?, 1], offset: ?>>

func.func private @kernel(%out: !view)
func.func private @read(%in: memref<1x8x4xf32>)

// Each sequence's result written straight into the packed result: the
// slice moves up to where the allocation was.
// CHECK-LABEL: func @per_sequence
// CHECK: %[[P:.*]] = memref.alloc() {{.*}} : memref<1x8x4xf32>
// CHECK: scf.for
// CHECK: %[[S:.*]] = memref.subview %[[P]][0, %{{.*}}, 0] [1, %{{.*}}, 4]
// CHECK-NEXT: %[[V:.*]] = memref.cast %[[S]] {{.*}} to memref<1x?x4xf32, strided<[?, ?, 1], offset: ?>>
// CHECK-NEXT: call @kernel(%[[V]])
// CHECK-NOT: memref.copy
// CHECK: return %[[P]]
func.func @per_sequence(%starts: memref<3xindex>, %lens: memref<3xindex>) -> memref<1x8x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %packed = memref.alloc() {alignment = 64 : i64} : memref<1x8x4xf32>
  scf.for %s = %c0 to %c3 step %c1 {
    %start = memref.load %starts[%s] : memref<3xindex>
    %n = memref.load %lens[%s] : memref<3xindex>
    %piece = memref.alloc(%n) {alignment = 64 : i64} : memref<1x?x4xf32>
    %v = memref.cast %piece : memref<1x?x4xf32> to !view
    func.call @kernel(%v) : (!view) -> ()
    %slice = memref.subview %packed[0, %start, 0] [1, %n, 4] [1, 1, 1]
        : memref<1x8x4xf32> to memref<1x?x4xf32, strided<[32, 4, 1], offset: ?>>
    memref.copy %piece, %slice : memref<1x?x4xf32> to memref<1x?x4xf32, strided<[32, 4, 1], offset: ?>>
  }
  return %packed : memref<1x8x4xf32>
}

// The packed buffer is read between the kernel and the copy: the kernel
// must not overwrite it early.
// CHECK-LABEL: func @read_in_between
// CHECK: memref.copy
func.func @read_in_between(%start: index, %n: index) -> memref<1x8x4xf32> {
  %packed = memref.alloc() : memref<1x8x4xf32>
  %piece = memref.alloc(%n) : memref<1x?x4xf32>
  %v = memref.cast %piece : memref<1x?x4xf32> to !view
  func.call @kernel(%v) : (!view) -> ()
  func.call @read(%packed) : (memref<1x8x4xf32>) -> ()
  %slice = memref.subview %packed[0, %start, 0] [1, %n, 4] [1, 1, 1]
      : memref<1x8x4xf32> to memref<1x?x4xf32, strided<[32, 4, 1], offset: ?>>
  memref.copy %piece, %slice : memref<1x?x4xf32> to memref<1x?x4xf32, strided<[32, 4, 1], offset: ?>>
  return %packed : memref<1x8x4xf32>
}

// A function argument may alias another argument the kernel reads.
// CHECK-LABEL: func @into_argument
// CHECK: memref.copy
func.func @into_argument(%packed: memref<1x8x4xf32>, %start: index, %n: index) {
  %piece = memref.alloc(%n) : memref<1x?x4xf32>
  %v = memref.cast %piece : memref<1x?x4xf32> to !view
  func.call @kernel(%v) : (!view) -> ()
  %slice = memref.subview %packed[0, %start, 0] [1, %n, 4] [1, 1, 1]
      : memref<1x8x4xf32> to memref<1x?x4xf32, strided<[32, 4, 1], offset: ?>>
  memref.copy %piece, %slice : memref<1x?x4xf32> to memref<1x?x4xf32, strided<[32, 4, 1], offset: ?>>
  return
}

// The slice's offset is computed after the kernel ran: it cannot move up.
// CHECK-LABEL: func @offset_after_kernel
// CHECK: memref.copy
func.func @offset_after_kernel(%starts: memref<1xindex>, %n: index) -> memref<1x8x4xf32> {
  %c0 = arith.constant 0 : index
  %packed = memref.alloc() : memref<1x8x4xf32>
  %piece = memref.alloc(%n) : memref<1x?x4xf32>
  %v = memref.cast %piece : memref<1x?x4xf32> to !view
  func.call @kernel(%v) : (!view) -> ()
  %start = memref.load %starts[%c0] : memref<1xindex>
  %slice = memref.subview %packed[0, %start, 0] [1, %n, 4] [1, 1, 1]
      : memref<1x8x4xf32> to memref<1x?x4xf32, strided<[32, 4, 1], offset: ?>>
  memref.copy %piece, %slice : memref<1x?x4xf32> to memref<1x?x4xf32, strided<[32, 4, 1], offset: ?>>
  return %packed : memref<1x8x4xf32>
}

// The kernels write through their identity-layout allocation, not a
// strided view (allocBuffer, not allocResult): nothing to repoint.
// CHECK-LABEL: func @no_view
// CHECK: memref.copy
func.func @no_view(%n: index) -> memref<1x8x4xf32> {
  %c0 = arith.constant 0 : index
  %packed = memref.alloc() : memref<1x8x4xf32>
  %piece = memref.alloc(%n) : memref<1x?x4xf32>
  %f = arith.constant 1.0 : f32
  linalg.fill ins(%f : f32) outs(%piece : memref<1x?x4xf32>)
  %slice = memref.subview %packed[0, %c0, 0] [1, %n, 4] [1, 1, 1]
      : memref<1x8x4xf32> to memref<1x?x4xf32, strided<[32, 4, 1], offset: ?>>
  memref.copy %piece, %slice : memref<1x?x4xf32> to memref<1x?x4xf32, strided<[32, 4, 1], offset: ?>>
  return %packed : memref<1x8x4xf32>
}
