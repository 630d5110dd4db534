// The CUDA target's exchanges: seq-collectives-to-nccl turns shard
// all-reduces, all-gathers and sends / receives into calls of the runtime's NCCL entry
// points (the emulated target's with emulate=1), each with the module's MPI
// communicator; the full CUDA pipeline keeps them in the host code, beside
// the process index MPI gives. What NCCL cannot carry is an error.
// RUN: seqc-opt %s --seq-collectives-to-nccl -split-input-file -verify-diagnostics | FileCheck %s
// RUN: seqc-opt %s --seq-collectives-to-nccl=emulate=1 -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=EMU
// RUN: seqc-opt %S/distribute-experts.mlir --seqc-cuda-pipeline="ranks=2 parallel=experts format=llvm" | FileCheck %s --check-prefix=HOST
// RUN: seqc-opt %S/distribute-experts.mlir --seqc-cuda-pipeline="ranks=2 parallel=experts emulate=1" | FileCheck %s --check-prefix=HOSTEMU

// CHECK: module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "OpenMPI">}
// CHECK-DAG: func.func private @seqc_rt_nccl_all_reduce(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32, i32)
// CHECK-DAG: llvm.mlir.global external @seqc_mpi_communicator() {{.*}} : !llvm.ptr
// CHECK-LABEL: func.func @sum
// CHECK: %[[CELL:.*]] = llvm.mlir.addressof @seqc_mpi_communicator
// CHECK: %[[IN:.*]] = bufferization.to_buffer %arg0 read_only : tensor<?x3xf32> to memref<?x3xf32>
// CHECK: %[[DIM:.*]] = tensor.dim %arg0, %c0
// CHECK: %[[OUT:.*]] = memref.alloc(%[[DIM]]) : memref<?x3xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[IN]]
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[ROWS:.*]] = memref.dim %[[IN]], %c0
// CHECK: %[[N:.*]] = arith.muli %[[ROWS]], %c3
// CHECK: %[[COUNT:.*]] = arith.index_cast %[[N]] : index to i64
// CHECK: %[[COMM:.*]] = llvm.load %[[CELL]] : !llvm.ptr -> !llvm.ptr
// Element 0 (f32), reduction 0 (sum).
// CHECK: call @seqc_rt_nccl_all_reduce(%[[COMM]], %{{.*}}, %{{.*}}, %[[COUNT]], %c0_i32, %c0_i32)
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable
// EMU: call @seqc_rt_nccl_emulated_all_reduce(
shard.grid @g(shape = 2)
func.func @sum(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %y = shard.all_reduce %x on @g grid_axes = [0] : tensor<?x3xf32> -> tensor<?x3xf32>
  return %y : tensor<?x3xf32>
}

// -----

// Element 3 (i64), reduction 2 (max).
// CHECK-LABEL: func.func @max
// CHECK: call @seqc_rt_nccl_all_reduce(%{{.*}}, %{{.*}}, %{{.*}}, %c8_i64, %c3_i32, %c2_i32)
shard.grid @g(shape = 4)
func.func @max(%x: tensor<8xi64>) -> tensor<8xi64> {
  %y = shard.all_reduce %x on @g grid_axes = [0] reduction = max : tensor<8xi64> -> tensor<8xi64>
  return %y : tensor<8xi64>
}

// -----

// Sends and receives carry bytes: 16-bit floats as they are, the peer as
// i32.
// CHECK-LABEL: func.func @exchange
// CHECK: %[[ROWS2:.*]] = arith.muli %{{.*}}, %c2 : index
// CHECK: %[[N2:.*]] = arith.muli %[[ROWS2]], %c8 : index
// CHECK: %[[BYTES:.*]] = arith.index_cast %[[N2]] : index to i64
// CHECK: %[[PEER:.*]] = arith.index_cast %arg1 : index to i32
// CHECK: call @seqc_rt_nccl_send(%{{.*}}, %{{.*}}, %[[BYTES]], %[[PEER]]) : (!llvm.ptr, !llvm.ptr, i64, i32) -> ()
// CHECK: %[[BUF:.*]] = memref.alloc() : memref<4x8xbf16>
// CHECK: call @seqc_rt_nccl_recv(%{{.*}}, %{{.*}}, %c64_i64, %c1_i32)
// CHECK: bufferization.to_tensor %[[BUF]]
// EMU-LABEL: func.func @exchange
// EMU: call @seqc_rt_nccl_emulated_send(
// EMU: call @seqc_rt_nccl_emulated_recv(
shard.grid @g(shape = 2)
func.func @exchange(%x: tensor<?x8xbf16>, %peer: index, %like: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %s = shard.send %x on @g grid_axes = [0] destination = [%peer] : (tensor<?x8xbf16>, index) -> tensor<?x8xbf16>
  %r = shard.recv %like on @g grid_axes = [0] source = [1] : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return %r : tensor<4x8xbf16>
}

// -----

// An all-gather along dimension 0 is every rank's bytes into R times as
// many rows: bf16 as it is.
// CHECK-LABEL: func.func @gather
// CHECK: %[[SRC:.*]] = bufferization.to_buffer %arg0 read_only : tensor<?x8xbf16> to memref<?x8xbf16>
// CHECK: %[[ROWS:.*]] = memref.dim %[[SRC]], %c0
// CHECK: %[[ALL:.*]] = arith.muli %[[ROWS]], %c4
// CHECK: %[[DST:.*]] = memref.alloc(%[[ALL]]) : memref<?x8xbf16>
// CHECK: %[[N:.*]] = arith.muli %{{.*}}, %c8 : index
// CHECK: %[[BYTES:.*]] = arith.index_cast %[[N]] : index to i64
// CHECK: call @seqc_rt_nccl_all_gather(%{{.*}}, %{{.*}}, %{{.*}}, %[[BYTES]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64) -> ()
// CHECK: bufferization.to_tensor %[[DST]] restrict writable : memref<?x8xbf16> to tensor<?x8xbf16>
// EMU-LABEL: func.func @gather
// EMU: call @seqc_rt_nccl_emulated_all_gather(
shard.grid @g(shape = 4)
func.func @gather(%x: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  %y = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<?x8xbf16> -> tensor<?x8xbf16>
  return %y : tensor<?x8xbf16>
}

// -----

shard.grid @g(shape = 4)
func.func @gather_columns(%x: tensor<2x8xf32>) -> tensor<2x32xf32> {
  // expected-error @below {{this shard.all_gather has no NCCL lowering here: 'tensor<2x8xf32>'}}
  %y = shard.all_gather %x on @g grid_axes = [0] gather_axis = 1 : tensor<2x8xf32> -> tensor<2x32xf32>
  return %y : tensor<2x32xf32>
}

// -----

shard.grid @g(shape = 2)
func.func @narrow(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  // expected-error @below {{this shard.all_reduce has no NCCL lowering here: 'tensor<4xbf16>'}}
  %y = shard.all_reduce %x on @g grid_axes = [0] : tensor<4xbf16> -> tensor<4xbf16>
  return %y : tensor<4xbf16>
}

// -----

shard.grid @g2(shape = 2x2)
func.func @plane(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @below {{this shard.all_reduce has no NCCL lowering here: 'tensor<4x4xf32>'}}
  %y = shard.all_reduce %x on @g2 grid_axes = [0, 1] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// The distributed experts of distribute-experts.mlir through the whole CUDA
// pipeline: the host code calls NCCL's entry points and MPI's rank, the
// kernels are in the GPU binary.
// HOST: gpu.binary
// HOST-DAG: llvm.call @MPI_Comm_rank
// HOST-DAG: llvm.call @seqc_rt_nccl_recv
// HOST-DAG: llvm.call @seqc_rt_nccl_send
// HOST-DAG: llvm.call @seqc_rt_nccl_recv
// HOST-DAG: llvm.call @seqc_rt_nccl_all_gather
// HOST-NOT: shard.
// HOSTEMU-NOT: gpu.binary
// HOSTEMU-DAG: llvm.call @seqc_rt_nccl_emulated_recv
// HOSTEMU-DAG: llvm.call @seqc_rt_nccl_emulated_send
// HOSTEMU-DAG: llvm.call @seqc_rt_nccl_emulated_all_gather
// HOSTEMU-NOT: llvm.call @seqc_rt_nccl_all_gather
