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

namespace seqc::rt::entry {

/// A failed seq_rt.check (seq-lower-checks).
inline constexpr char kCheckFailed[] = "seqc_rt_check_failed";
/// A kernel's task space on the thread pool (seq-lower-parallel).
inline constexpr char kParallelFor[] = "seqc_rt_parallel_for";
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

} // namespace seqc::rt::entry

#endif // SEQC_RUNTIME_ENTRYPOINTS_H
