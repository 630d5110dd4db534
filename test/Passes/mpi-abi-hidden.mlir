// MPIToLLVM reads the "MPI:Implementation" entry from the module's first
// DLTI attribute only, and a data layout spec comes before the map: a spec
// without the entry would hide it (and MPIToLLVM take MPICH's ABI whatever
// the library), so that is an error; a spec that names the ABI is what
// MPIToLLVM reads, and must be the library's.
// RUN: seqc-opt %s --split-input-file --seq-collectives-to-mpi -verify-diagnostics

// expected-error @below {{the module's DLTI attributes hide its "MPI:Implementation" entry from MPIToLLVM, which reads the first of them: put the entry there}}
module attributes {dlti.dl_spec = #dlti.dl_spec<"dlti.endianness" = "little">} {
  shard.grid @g(shape = 2)
  func.func @reduce(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = shard.all_reduce %x on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// expected-error @below {{the module's DLTI entry "MPI:Implementation" is "MPICH", but its code is for the MPI library's ABI, "OpenMPI"}}
module attributes {dlti.dl_spec = #dlti.dl_spec<"MPI:Implementation" = "MPICH">} {
  shard.grid @g(shape = 2)
  func.func @reduce(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = shard.all_reduce %x on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
