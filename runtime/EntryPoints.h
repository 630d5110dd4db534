//===- EntryPoints.h - the names of the runtime's entry points --*- C++ -*-===//
//
// The functions of seqc's runtime that compiled code calls, by name: the
// passes that emit the calls, the ahead-of-time entry points and the JIT's
// symbol table (lib/Engine.cpp) all spell them from here. Their C
// declarations are in Runtime.h and seqc_runtime.h.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_ENTRYPOINTS_H
#define SEQC_RUNTIME_ENTRYPOINTS_H

#include <cstdint>

namespace seqc::rt::entry {

/// A failed seq_rt.check (seq-lower-checks).
inline constexpr char kCheckFailed[] = "seqc_rt_check_failed";
/// A kernel's task space on the thread pool (seq-lower-parallel).
inline constexpr char kParallelFor[] = "seqc_rt_parallel_for";
/// The threads a parallel_for would run on (seq-lower-parallel).
inline constexpr char kParallelWidth[] = "seqc_rt_parallel_width";
/// Profile regions (seq-profile-calls).
inline constexpr char kProfileEnter[] = "seqc_rt_profile_enter";
inline constexpr char kProfileExit[] = "seqc_rt_profile_exit";
/// The C entry points of ahead-of-time objects (lib/Aot.cpp).
inline constexpr char kInvokeC[] = "seqc_rt_invoke_c";
/// Whether this CPU has the features an entry point's code needs.
inline constexpr char kCpuHas[] = "seqc_rt_cpu_has";
/// Distributed code's communicator: a data symbol, a pointer to the MPI_Comm
/// the module was compiled for (each loaded module defines its own;
/// seq-mpi-to-llvm reads it where MPIToLLVM names MPI_COMM_WORLD).
inline constexpr char kMpiCommunicator[] = "seqc_mpi_communicator";

/// The all-gather of distributed code for the CPU (seq-collectives-to-mpi:
/// MLIR's `mpi` dialect has none), with the module's MPI communicator first
/// (the kMpiCommunicator cell's value):
///   all_gather(comm, send, recv, i64 bytes)
/// `bytes` from every rank, rank r's at recv + r bytes.
inline constexpr char kMpiAllGather[] = "seqc_rt_mpi_all_gather";

/// The collectives of distributed code for the CUDA target
/// (seq-collectives-to-nccl), each taking the module's MPI communicator
/// first (the kMpiCommunicator cell's value):
///   all_reduce(comm, send, recv, i64 count, i32 ReduceElement, i32 ReduceOp)
///   all_gather(comm, send, recv, i64 bytes) (as kMpiAllGather)
///   send(comm, data, i64 bytes, i32 peer), recv(comm, data, i64 bytes, i32
///   peer)
/// on NCCL over the communicator's ranks, on this thread's stream.
inline constexpr char kNcclAllReduce[] = "seqc_rt_nccl_all_reduce";
inline constexpr char kNcclAllGather[] = "seqc_rt_nccl_all_gather";
inline constexpr char kNcclSend[] = "seqc_rt_nccl_send";
inline constexpr char kNcclRecv[] = "seqc_rt_nccl_recv";
/// The same for code of the emulated CUDA target, whose buffers are the
/// host's: MPI carries out what NCCL would.
inline constexpr char kNcclEmulatedAllReduce[] =
    "seqc_rt_nccl_emulated_all_reduce";
inline constexpr char kNcclEmulatedAllGather[] =
    "seqc_rt_nccl_emulated_all_gather";
inline constexpr char kNcclEmulatedSend[] = "seqc_rt_nccl_emulated_send";
inline constexpr char kNcclEmulatedRecv[] = "seqc_rt_nccl_emulated_recv";

/// The element types and reductions of those all-reduces.
enum class ReduceElement : int32_t { F32 = 0, F64 = 1, I32 = 2, I64 = 3 };
enum class ReduceOp : int32_t { Sum = 0, Product = 1, Max = 2, Min = 3 };

} // namespace seqc::rt::entry

#endif // SEQC_RUNTIME_ENTRYPOINTS_H
