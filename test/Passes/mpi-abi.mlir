// The MPI ABI distributed code is compiled for (named by the module's DLTI
// entry: mpi-abi-dlti.mlir): seq-mpi-to-llvm writes the calls for it, with
// MPI_COMM_WORLD read from the module's communicator cell in both ABIs:
// OpenMPI's handles are addresses of the library's objects, MPICH's are
// ints of its mpi.h (MPI_FLOAT 0x4c00040a, MPI_SUM 0x58000003), its
// communicator the cell's handle narrowed to an int, MPI_STATUS_IGNORE 1.
// RUN: seqc-opt %s --split-input-file --seq-mpi-to-llvm | FileCheck %s

// CHECK: module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">}
// CHECK-NOT: ompi_
// CHECK: llvm.mlir.global external @seqc_mpi_communicator() {{.*}} : !llvm.ptr
// CHECK-LABEL: func.func @exchange
// CHECK: %[[CELL:.*]] = llvm.mlir.addressof @seqc_mpi_communicator : !llvm.ptr
// CHECK: %[[HANDLE:.*]] = llvm.load %[[CELL]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[WORLD:.*]] = llvm.ptrtoint %[[HANDLE]] : !llvm.ptr to i64
// CHECK: %[[COMM:.*]] = llvm.trunc %[[WORLD]] : i64 to i32
// CHECK: llvm.call @MPI_Comm_rank(%[[COMM]], %{{.*}}) : (i32, !llvm.ptr) -> i32
// CHECK: %[[FLOAT:.*]] = llvm.mlir.constant(1275069450 : i32) : i32
// CHECK: %[[SUM:.*]] = llvm.mlir.constant(1476395011 : i32) : i32
// CHECK: %[[COMM2:.*]] = llvm.trunc %[[WORLD]] : i64 to i32
// CHECK: llvm.call @MPI_Allreduce(%{{.*}}, %{{.*}}, %{{.*}}, %[[FLOAT]], %[[SUM]], %[[COMM2]]) : (!llvm.ptr, !llvm.ptr, i32, i32, i32, i32) -> i32
// CHECK: %[[COMM3:.*]] = llvm.trunc %[[WORLD]] : i64 to i32
// CHECK: llvm.call @MPI_Send(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[COMM3]])
// CHECK: %[[COMM4:.*]] = llvm.trunc %[[WORLD]] : i64 to i32
// CHECK: %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK: %[[IGNORE:.*]] = llvm.inttoptr %[[ONE]] : i64 to !llvm.ptr
// CHECK: llvm.call @MPI_Recv(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[COMM4]], %[[IGNORE]])
module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">} {
  func.func @exchange(%send: memref<8xf32>, %recv: memref<8xf32>, %peer: i32) -> i32 {
    %world = mpi.comm_world : !mpi.comm
    %rank = mpi.comm_rank(%world) : i32
    mpi.allreduce(%send, %recv, MPI_SUM, %world) : memref<8xf32>, memref<8xf32>
    mpi.send(%send, %peer, %peer, %world) : memref<8xf32>, i32, i32
    mpi.recv(%recv, %peer, %peer, %world) : memref<8xf32>, i32, i32
    return %rank : i32
  }
}

// -----

// OpenMPI: the same cell, as a pointer; no reference to the library's own
// MPI_COMM_WORLD, whose handle the host's communicator may replace.
// CHECK: module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "OpenMPI">}
// CHECK-NOT: ompi_mpi_comm_world
// CHECK: llvm.mlir.global external @ompi_mpi_op_sum()
// CHECK-LABEL: func.func @exchange
// CHECK: %[[CELL:.*]] = llvm.mlir.addressof @seqc_mpi_communicator : !llvm.ptr
// CHECK: %[[HANDLE:.*]] = llvm.load %[[CELL]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[WORLD:.*]] = llvm.ptrtoint %[[HANDLE]] : !llvm.ptr to i64
// CHECK: %[[COMM:.*]] = llvm.inttoptr %[[WORLD]] : i64 to !llvm.ptr
// CHECK: llvm.call @MPI_Comm_rank(%[[COMM]], %{{.*}}) : (!llvm.ptr, !llvm.ptr) -> i32
// CHECK: %[[FLOAT:.*]] = llvm.mlir.addressof @ompi_mpi_float : !llvm.ptr
// CHECK: %[[SUM:.*]] = llvm.mlir.addressof @ompi_mpi_op_sum : !llvm.ptr
// CHECK: %[[COMM2:.*]] = llvm.inttoptr %[[WORLD]] : i64 to !llvm.ptr
// CHECK: llvm.call @MPI_Allreduce(%{{.*}}, %{{.*}}, %{{.*}}, %[[FLOAT]], %[[SUM]], %[[COMM2]])
// CHECK-NOT: ompi_mpi_comm_world
module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "OpenMPI">} {
  func.func @exchange(%send: memref<8xf32>, %recv: memref<8xf32>) -> i32 {
    %world = mpi.comm_world : !mpi.comm
    %rank = mpi.comm_rank(%world) : i32
    mpi.allreduce(%send, %recv, MPI_SUM, %world) : memref<8xf32>, memref<8xf32>
    return %rank : i32
  }
}
