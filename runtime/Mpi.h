//===- Mpi.h - the MPI library of distributed runs, opened at run time ----===//
//
// Distributed code (seq-distribute-steps) calls MPI; single-process code
// does not. So seqc does not link MPI: a distributed run opens the MPI
// library here (OpenMPI's or one of MPICH's ABI), with its symbols global,
// before the code loads; the code is compiled for that library's ABI
// (mpiImplementation) and the JIT resolves its MPI calls to it. Hosts that
// run distributed functions call mpiInit() first (seqc-run --parallel
// does). Communicators and other handles are passed as `void *`: OpenMPI's
// as they are (pointers), MPICH's ints as `(void *)(intptr_t)handle`.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_MPI_H
#define SEQC_RUNTIME_MPI_H

#include "EntryPoints.h"

#include <cstdint>
#include <string>

namespace seqc::rt {

/// This process's place among the processes of MPI_COMM_WORLD.
struct MpiWorld {
  int rank = 0;
  int size = 1;
};

/// Opens the MPI library and initializes MPI once per process (threads:
/// MPI_THREAD_FUNNELED) unless the host has; MPI started here is ended at
/// exit. The library is the one the process has loaded already, else
/// SEQC_LIBMPI's, else the first that opens of libmpich.so.12 and
/// libmpi.so.40, MPICH's first under a PMI launcher (Hydra, srun) and
/// OpenMPI's otherwise. False with `error` set when no library opens, its
/// ABI is neither OpenMPI's nor MPICH's, or MPI fails to start.
bool mpiInit(MpiWorld &world, std::string &error);

/// The ABI of the library mpiInit opened as MLIR's MPIToLLVM names it (the
/// DLTI entry "MPI:Implementation"): "OpenMPI" or "MPICH" ("OpenMPI"
/// before mpiInit).
const char *mpiImplementation();

/// MPI_COMM_WORLD's handle (null before mpiInit).
void *mpiWorldCommunicator();

/// The number of processes of `communicator`, or -1 with `error` set.
int mpiCommunicatorSize(void *communicator, std::string &error);

/// Element-wise maximum of `values` over every process (in place).
bool mpiMaxAll(uint64_t *values, int count, std::string &error);

/// This process's rank in `communicator`, or -1 with `error` set.
int mpiCommunicatorRank(void *communicator, std::string &error);

/// A communicator of the same processes as `communicator`, in the same
/// order (MPI_Comm_dup: collective over them), kept until the process ends;
/// null with `error` set on failure.
void *mpiDuplicate(void *communicator, std::string &error);

/// Whether communicators `a` and `b` hold the same processes in the same
/// order (MPI_Comm_compare: identical or congruent).
bool mpiSameProcesses(void *a, void *b);

/// `bytes` of `data` from rank `root` of `communicator` to all its ranks.
bool mpiBroadcast(void *communicator, void *data, int64_t bytes, int root,
                  std::string &error);

/// MPI_Allreduce of `count` elements from `send` into `recv` over
/// `communicator` (in pieces when `count` exceeds MPI's int).
bool mpiAllReduce(void *communicator, const void *send, void *recv,
                  int64_t count, entry::ReduceElement element,
                  entry::ReduceOp op, std::string &error);

/// MPI_Allgather of `bytes` from each rank's `send` into `recv`, rank r's
/// at `recv + r bytes` (past MPI's int, a broadcast per rank instead).
bool mpiAllGather(void *communicator, const void *send, void *recv,
                  int64_t bytes, std::string &error);

/// `bytes` of `data` to / from rank `peer` of `communicator` (MPI_Send /
/// MPI_Recv of MPI_BYTE, tag 0, in pieces past MPI's int).
bool mpiSendBytes(void *communicator, const void *data, int64_t bytes, int peer,
                  std::string &error);
bool mpiRecvBytes(void *communicator, void *data, int64_t bytes, int peer,
                  std::string &error);

/// Ends MPI if it was started here (once; after the last distributed call;
/// also run at exit).
void mpiFinalize();

/// Ends every process of the run with `code` (a rank that cannot go on).
[[noreturn]] void mpiAbort(int code);

} // namespace seqc::rt

#endif // SEQC_RUNTIME_MPI_H
