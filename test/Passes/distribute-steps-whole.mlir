// Ops seq-distribute-steps does not split run whole on every rank, with a
// remark naming why; under strict that is an error. The MPI calls get
// OpenMPI's names for the reductions (MLIR 22 declares ompi_mpi_sum).
// RUN: seqc-opt %s --seq-distribute-steps=ranks=2 -verify-diagnostics -split-input-file
// RUN: not seqc-opt %s --seq-distribute-steps="ranks=2 strict=1" -split-input-file 2>&1 | FileCheck %s --check-prefix=STRICT
// RUN: seqc-opt %s --seq-mpi-to-llvm -split-input-file 2>&1 | FileCheck %s --check-prefix=LLVM
// RUN: not seqc-opt %s --seq-collectives-to-mpi -split-input-file 2>&1 | FileCheck %s --check-prefix=NOMPI

// STRICT: error: seq.associative_scan runs whole on every rank under sequence parallelism: it has no transition over steps
func.func @scan(%x: tensor<1x8xf32>) -> tensor<1x8xf32> {
  // expected-remark @below {{seq.associative_scan runs whole on every rank under sequence parallelism: it has no transition over steps}}
  %r = seq.associative_scan %x {dim = 1 : i64} : (tensor<1x8xf32>) -> (tensor<1x8xf32>) {
  ^bb0(%p: f32, %n: f32):
    %m = arith.maximumf %p, %n : f32
    seq.yield %m : f32
  }
  return %r : tensor<1x8xf32>
}

// -----

// STRICT: error: seq.linear_attention runs whole on every rank under sequence parallelism: the normalizer of normalize = true is not carried
func.func @normalized(%q: tensor<1x8x1x4xf32>, %k: tensor<1x8x1x4xf32>, %v: tensor<1x8x1x4xf32>) -> tensor<1x8x1x4xf32> {
  // expected-remark @below {{seq.linear_attention runs whole on every rank under sequence parallelism: the normalizer of normalize = true is not carried}}
  %o, %last = seq.linear_attention %q, %k, %v {normalize = true} : (tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>) -> (tensor<1x8x1x4xf32>, tensor<1x1x4x4xf32>)
  return %o : tensor<1x8x1x4xf32>
}

// -----

// LLVM-NOT: shard.grid
// LLVM: llvm.mlir.global external @ompi_mpi_op_sum()
// LLVM-NOT: @ompi_mpi_sum
// LLVM: llvm.call @MPI_Allreduce
module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "OpenMPI">} {
  shard.grid @seq_ranks(shape = 2)
  func.func @reduce(%send: memref<8xf32>, %recv: memref<8xf32>) {
    %world = mpi.comm_world : !mpi.comm
    mpi.allreduce(%send, %recv, MPI_SUM, %world) : memref<8xf32>, memref<8xf32>
    return
  }
}

// -----

// An element type MPI has no datatype for is an error, not invalid IR.
// NOMPI: error: this shard.all_reduce has no MPI lowering here: 'tensor<4xbf16>'
shard.grid @g(shape = 2)
func.func @narrow(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %y = shard.all_reduce %x on @g grid_axes = [0] : tensor<4xbf16> -> tensor<4xbf16>
  return %y : tensor<4xbf16>
}
