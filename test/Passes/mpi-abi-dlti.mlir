// The MPI ABI seq-collectives-to-mpi (and seq-collectives-to-nccl, for the
// process index) compile for: the DLTI entry "MPI:Implementation" names
// the mpi-implementation option's ABI (OpenMPI, the default, or MPICH),
// added to a DLTI map the module has (without the entry MPIToLLVM would
// take MPICH's ABI whatever the library); another name is an error.
// RUN: seqc-opt %s --split-input-file --seq-collectives-to-mpi | FileCheck %s --check-prefix=OPENMPI
// RUN: seqc-opt %s --split-input-file --seq-collectives-to-mpi=mpi-implementation=MPICH | FileCheck %s --check-prefix=MPICH
// RUN: seqc-opt %s --split-input-file --seq-collectives-to-nccl="emulate=1 mpi-implementation=MPICH" | FileCheck %s --check-prefix=NCCL
// RUN: not seqc-opt %s --split-input-file --seq-collectives-to-mpi=mpi-implementation=LAM 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// OPENMPI: module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "OpenMPI">} {
// OPENMPI-NEXT: shard.grid @plain
// MPICH: module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {
// MPICH-NEXT: shard.grid @plain
// NCCL: module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {
// NCCL: shard.grid @plain
// UNKNOWN: error: unknown MPI implementation 'LAM': seqc knows the ABIs of "OpenMPI" and "MPICH"
shard.grid @plain(shape = 2)
func.func @reduce(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = shard.all_reduce %x on @plain grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// OPENMPI: module attributes {dlti.map = #dlti.map<"other" = 1 : i32, "MPI:Implementation" = "OpenMPI">} {
// OPENMPI-NEXT: shard.grid @mapped
// MPICH: module attributes {dlti.map = #dlti.map<"other" = 1 : i32, "MPI:Implementation" = "MPICH">} {
// MPICH-NEXT: shard.grid @mapped
// NCCL: module attributes {dlti.map = #dlti.map<"other" = 1 : i32, "MPI:Implementation" = "MPICH">} {
module attributes {dlti.map = #dlti.map<"other" = 1 : i32>} {
  shard.grid @mapped(shape = 2)
  func.func @reduce(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = shard.all_reduce %x on @mapped grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
