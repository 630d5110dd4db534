// seq-gpu-register-budget: every kernel gets nvvm.maxnreg (255, or what one
// block of its known size may have: 64K registers per SM, 64 a thread at
// 1024 threads), and shared buffers a 16-byte alignment. A budget that is
// set already stays.
// RUN: seqc-opt %s --seq-gpu-register-budget | FileCheck %s

// CHECK-LABEL: gpu.func @kernel
// CHECK-SAME: workgroup(%{{.*}} : memref<64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME: nvvm.maxnreg = 255 : i32
// CHECK-LABEL: gpu.func @big
// CHECK-SAME: nvvm.maxnreg = 64 : i32
// CHECK-LABEL: gpu.func @given
// CHECK-SAME: nvvm.maxnreg = 32 : i32
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @kernel(%m: memref<4xf32>) workgroup(%s: memref<64xf32, #gpu.address_space<workgroup>>) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
      gpu.return
    }
    gpu.func @big(%m: memref<4xf32>) kernel attributes {known_block_size = array<i32: 1024, 1, 1>} {
      gpu.return
    }
    gpu.func @given(%m: memref<4xf32>) kernel attributes {nvvm.maxnreg = 32 : i32} {
      gpu.return
    }
  }
}
