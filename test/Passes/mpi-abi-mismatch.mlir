// A module that names another MPI ABI than the library's (the
// mpi-implementation option, OpenMPI by default) is an error, not code that
// would call the library with the other ABI's handles.
// RUN: seqc-opt %s --seq-collectives-to-mpi -verify-diagnostics
// RUN: seqc-opt %s --seq-collectives-to-mpi=mpi-implementation=MPICH | FileCheck %s

// CHECK: module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">}
// CHECK: mpi.allreduce
// expected-error @below {{the module's DLTI entry "MPI:Implementation" is "MPICH", but its code is for the MPI library's ABI, "OpenMPI"}}
module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {
  shard.grid @g(shape = 2)
  func.func @reduce(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = shard.all_reduce %x on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
