//===- Mpi.cpp - the MPI library of distributed runs, opened at run time --===//
//
// Only the OpenMPI ABI is known here (as in the code MPIToLLVM writes for
// the DLTI entry seq-collectives-to-mpi sets): handles are pointers to the
// library's predefined objects, `ompi_mpi_comm_world` and the like.
//
//===----------------------------------------------------------------------===//

#include "Mpi.h"

#include "CallScope.h"
#include "Runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <iterator>
#include <mutex>
#include <unistd.h>

using namespace seqc::rt;

namespace {

using InitThreadFn = int (*)(int *, char ***, int, int *);
using InitializedFn = int (*)(int *);
using CommQueryFn = int (*)(void *, int *);
using AllreduceFn = int (*)(const void *, void *, int, void *, void *, void *);
using FinalizeFn = int (*)();
using AbortFn = int (*)(void *, int);
using BcastFn = int (*)(void *, int, void *, int, void *);
using SendFn = int (*)(const void *, int, void *, int, int, void *);
using RecvFn = int (*)(void *, int, void *, int, int, void *, void *);
using CommDupFn = int (*)(void *, void **);
using CommCompareFn = int (*)(void *, void *, int *);
using AllgatherFn = int (*)(const void *, int, void *, void *, int, void *,
                            void *);

struct MpiLibrary {
  void *handle = nullptr;
  InitThreadFn initThread = nullptr;
  InitializedFn initialized = nullptr, finalized = nullptr;
  CommQueryFn commRank = nullptr, commSize = nullptr;
  AllreduceFn allreduce = nullptr;
  FinalizeFn finalize = nullptr;
  AbortFn abort = nullptr;
  BcastFn bcast = nullptr;
  SendFn send = nullptr;
  RecvFn recv = nullptr;
  CommDupFn commDup = nullptr;
  CommCompareFn commCompare = nullptr;
  AllgatherFn allgather = nullptr;
  void *commWorld = nullptr, *uint64Type = nullptr, *opMax = nullptr;
  // The all-reduces' datatypes (by entry::ReduceElement) and reductions (by
  // entry::ReduceOp), and MPI_BYTE.
  void *elementTypes[4] = {}, *reduceOps[4] = {}, *byteType = nullptr;
  void *inPlace = reinterpret_cast<void *>(1); // OpenMPI's MPI_IN_PLACE
  MpiWorld world;
  /// The most elements one call is given (readMaxCount).
  int64_t maxCount = 0;
  bool started = false;
  /// MPI was started here (not by the host): it is ended here too.
  bool owned = false;
  std::string error;
};

MpiLibrary &library() {
  static MpiLibrary lib;
  return lib;
}

template <typename Fn> bool find(MpiLibrary &lib, Fn &fn, const char *name) {
  // The process's definition first: a host linked against libmpi that
  // names MPI_COMM_WORLD has a copy of `ompi_mpi_comm_world` (a copy
  // relocation) that the library itself uses, and the library's own
  // storage is then never initialized.
  void *address = dlsym(RTLD_DEFAULT, name);
  if (!address)
    address = dlsym(lib.handle, name);
  fn = reinterpret_cast<Fn>(address);
  if (!fn)
    lib.error = std::string("the MPI library has no ") + name +
                " (seqc needs OpenMPI's ABI)";
  return fn != nullptr;
}

bool open(MpiLibrary &lib) {
  const char *name = std::getenv("SEQC_LIBMPI");
  if (!name || !*name)
    name = "libmpi.so.40";
  // Global: the compiled code's MPI calls resolve to this library.
  lib.handle = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
  if (!lib.handle) {
    const char *why = dlerror();
    lib.error = std::string("distributed runs need OpenMPI (cannot open ") +
                name + ": " + (why ? why : "unknown error") +
                "; apt-get install openmpi-bin libopenmpi-dev)";
    return false;
  }
  return find(lib, lib.initThread, "MPI_Init_thread") &&
         find(lib, lib.initialized, "MPI_Initialized") &&
         find(lib, lib.finalized, "MPI_Finalized") &&
         find(lib, lib.commRank, "MPI_Comm_rank") &&
         find(lib, lib.commSize, "MPI_Comm_size") &&
         find(lib, lib.allreduce, "MPI_Allreduce") &&
         find(lib, lib.finalize, "MPI_Finalize") &&
         find(lib, lib.abort, "MPI_Abort") &&
         find(lib, lib.commWorld, "ompi_mpi_comm_world") &&
         find(lib, lib.uint64Type, "ompi_mpi_uint64_t") &&
         find(lib, lib.opMax, "ompi_mpi_op_max") &&
         find(lib, lib.bcast, "MPI_Bcast") && find(lib, lib.send, "MPI_Send") &&
         find(lib, lib.recv, "MPI_Recv") &&
         find(lib, lib.commDup, "MPI_Comm_dup") &&
         find(lib, lib.commCompare, "MPI_Comm_compare") &&
         find(lib, lib.allgather, "MPI_Allgather") &&
         find(lib, lib.elementTypes[0], "ompi_mpi_float") &&
         find(lib, lib.elementTypes[1], "ompi_mpi_double") &&
         find(lib, lib.elementTypes[2], "ompi_mpi_int32_t") &&
         find(lib, lib.elementTypes[3], "ompi_mpi_int64_t") &&
         find(lib, lib.reduceOps[0], "ompi_mpi_op_sum") &&
         find(lib, lib.reduceOps[1], "ompi_mpi_op_prod") &&
         find(lib, lib.reduceOps[2], "ompi_mpi_op_max") &&
         find(lib, lib.reduceOps[3], "ompi_mpi_op_min") &&
         find(lib, lib.byteType, "ompi_mpi_byte");
}

/// The library, or null with `error` set before mpiInit.
MpiLibrary *started(std::string &error) {
  MpiLibrary &lib = library();
  if (lib.started)
    return &lib;
  error = "MPI is not initialized";
  return nullptr;
}

/// The largest count one MPI call is given: 2^30, within MPI's int.
constexpr int64_t kMaxCount = int64_t(1) << 30;

/// The count SEQC_MPI_MAX_COUNT asks for (kMaxCount when unset), so that
/// tests reach the piecewise paths with small tensors; false with `error`
/// set when it is not a count from 1 to kMaxCount.
bool readMaxCount(int64_t &count, std::string &error) {
  count = kMaxCount;
  const char *env = std::getenv("SEQC_MPI_MAX_COUNT");
  if (!env || !*env)
    return true;
  char *end = nullptr;
  long long asked = std::strtoll(env, &end, 10);
  if (*end || asked < 1 || asked > kMaxCount) {
    error = std::string("SEQC_MPI_MAX_COUNT='") + env +
            "' is not a count from 1 to 2^30 (" + std::to_string(kMaxCount) +
            ")";
    return false;
  }
  count = asked;
  return true;
}

/// Calls `piece(offset, count)` over [0, total) in pieces MPI's int counts
/// hold; false at the first that fails.
template <typename Piece> bool inPieces(int64_t total, Piece piece) {
  const int64_t set = library().maxCount, most = set > 0 ? set : kMaxCount;
  for (int64_t offset = 0; offset < total; offset += most)
    if (piece(offset, static_cast<int>(std::min(most, total - offset))) != 0)
      return false;
  return true;
}

bool start(MpiLibrary &lib) {
  if (!readMaxCount(lib.maxCount, lib.error) || !open(lib))
    return false;
  int already = 0;
  lib.initialized(&already);
  if (!already) {
    int provided = 0;
    // Funneled: only the calling thread's compiled code calls MPI.
    constexpr int kThreadFunneled = 1;
    if (lib.initThread(nullptr, nullptr, kThreadFunneled, &provided) != 0) {
      lib.error = "MPI_Init_thread failed";
      return false;
    }
    lib.owned = true;
    // Every process that starts MPI must end it, or mpirun calls the exit
    // abnormal: hosts (C, C++, Python) need not call mpiFinalize.
    std::atexit(seqc::rt::mpiFinalize);
  }
  if (lib.commRank(lib.commWorld, &lib.world.rank) != 0 ||
      lib.commSize(lib.commWorld, &lib.world.size) != 0) {
    lib.error = "cannot read this process's rank in MPI_COMM_WORLD";
    return false;
  }
  lib.started = true;
  return true;
}

} // namespace

bool seqc::rt::mpiInit(MpiWorld &world, std::string &error) {
  static std::once_flag once;
  MpiLibrary &lib = library();
  std::call_once(once, [&] { start(lib); });
  if (!lib.started) {
    error = lib.error;
    return false;
  }
  world = lib.world;
  return true;
}

void *seqc::rt::mpiWorldCommunicator() {
  MpiLibrary &lib = library();
  return lib.started ? lib.commWorld : nullptr;
}

int seqc::rt::mpiCommunicatorSize(void *communicator, std::string &error) {
  MpiLibrary &lib = library();
  int size = 0;
  if (!lib.started) {
    error = "MPI is not initialized";
    return -1;
  }
  if (lib.commSize(communicator, &size) != 0) {
    error = "MPI_Comm_size failed on the communicator given";
    return -1;
  }
  return size;
}

bool seqc::rt::mpiMaxAll(uint64_t *values, int count, std::string &error) {
  MpiLibrary &lib = library();
  if (!lib.started) {
    error = "MPI is not initialized";
    return false;
  }
  if (lib.allreduce(lib.inPlace, values, count, lib.uint64Type, lib.opMax,
                    lib.commWorld) != 0) {
    error = "MPI_Allreduce failed";
    return false;
  }
  return true;
}

int seqc::rt::mpiCommunicatorRank(void *communicator, std::string &error) {
  MpiLibrary *lib = started(error);
  int rank = 0;
  if (!lib)
    return -1;
  if (lib->commRank(communicator, &rank) != 0) {
    error = "MPI_Comm_rank failed";
    return -1;
  }
  return rank;
}

void *seqc::rt::mpiDuplicate(void *communicator, std::string &error) {
  MpiLibrary *lib = started(error);
  if (!lib)
    return nullptr;
  void *copy = nullptr;
  if (lib->commDup(communicator, &copy) != 0) {
    error = "MPI_Comm_dup failed";
    return nullptr;
  }
  return copy;
}

bool seqc::rt::mpiSameProcesses(void *a, void *b) {
  // OpenMPI's MPI_IDENT and MPI_CONGRUENT.
  constexpr int kIdent = 0, kCongruent = 1;
  std::string error;
  MpiLibrary *lib = started(error);
  int result = -1;
  return lib && lib->commCompare(a, b, &result) == 0 &&
         (result == kIdent || result == kCongruent);
}

bool seqc::rt::mpiBroadcast(void *communicator, void *data, int64_t bytes,
                            int root, std::string &error) {
  MpiLibrary *lib = started(error);
  if (!lib)
    return false;
  auto *base = static_cast<char *>(data);
  if (inPieces(bytes, [&](int64_t offset, int count) {
        return lib->bcast(base + offset, count, lib->byteType, root,
                          communicator);
      }))
    return true;
  error = "MPI_Bcast failed";
  return false;
}

bool seqc::rt::mpiAllReduce(void *communicator, const void *send, void *recv,
                            int64_t count, entry::ReduceElement element,
                            entry::ReduceOp op, std::string &error) {
  MpiLibrary *lib = started(error);
  if (!lib)
    return false;
  auto e = static_cast<size_t>(element), o = static_cast<size_t>(op);
  if (e >= std::size(lib->elementTypes) || o >= std::size(lib->reduceOps)) {
    error = "an all-reduce of an unknown element type or reduction";
    return false;
  }
  static constexpr int64_t kBytes[] = {4, 8, 4, 8};
  auto *in = static_cast<const char *>(send);
  auto *out = static_cast<char *>(recv);
  if (inPieces(count, [&](int64_t offset, int n) {
        return lib->allreduce(in + offset * kBytes[e], out + offset * kBytes[e],
                              n, lib->elementTypes[e], lib->reduceOps[o],
                              communicator);
      }))
    return true;
  error = "MPI_Allreduce failed";
  return false;
}

bool seqc::rt::mpiAllGather(void *communicator, const void *send, void *recv,
                            int64_t bytes, std::string &error) {
  MpiLibrary *lib = started(error);
  if (!lib)
    return false;
  if (bytes <= lib->maxCount) {
    if (lib->allgather(send, static_cast<int>(bytes), lib->byteType, recv,
                       static_cast<int>(bytes), lib->byteType,
                       communicator) == 0)
      return true;
    error = "MPI_Allgather failed";
    return false;
  }
  // MPI_Allgather counts in int and cannot be split into pieces (each
  // piece would land at the ranks' whole offsets): past MPI's int, each
  // rank's block goes from its own place in `recv` to every rank.
  int rank = mpiCommunicatorRank(communicator, error);
  int size = rank < 0 ? -1 : mpiCommunicatorSize(communicator, error);
  if (size < 0)
    return false;
  auto *out = static_cast<char *>(recv);
  std::memcpy(out + rank * bytes, send, static_cast<size_t>(bytes));
  for (int root = 0; root < size; ++root)
    if (!mpiBroadcast(communicator, out + root * bytes, bytes, root, error))
      return false;
  return true;
}

bool seqc::rt::mpiSendBytes(void *communicator, const void *data, int64_t bytes,
                            int peer, std::string &error) {
  MpiLibrary *lib = started(error);
  if (!lib)
    return false;
  auto *base = static_cast<const char *>(data);
  if (inPieces(bytes, [&](int64_t offset, int count) {
        return lib->send(base + offset, count, lib->byteType, peer, /*tag=*/0,
                         communicator);
      }))
    return true;
  error = "MPI_Send to rank " + std::to_string(peer) + " failed";
  return false;
}

bool seqc::rt::mpiRecvBytes(void *communicator, void *data, int64_t bytes,
                            int peer, std::string &error) {
  MpiLibrary *lib = started(error);
  if (!lib)
    return false;
  auto *base = static_cast<char *>(data);
  // OpenMPI's MPI_STATUS_IGNORE is a null pointer.
  if (inPieces(bytes, [&](int64_t offset, int count) {
        return lib->recv(base + offset, count, lib->byteType, peer, /*tag=*/0,
                         communicator, /*status=*/nullptr);
      }))
    return true;
  error = "MPI_Recv from rank " + std::to_string(peer) + " failed";
  return false;
}

void seqc::rt::mpiFinalize() {
  MpiLibrary &lib = library();
  int done = 0;
  if (lib.started && lib.owned && lib.finalized(&done) == 0 && !done)
    lib.finalize();
}

void seqc::rt::mpiAbort(int code) {
  MpiLibrary &lib = library();
  if (lib.started)
    lib.abort(lib.commWorld, code);
  _exit(code);
}

extern "C" void seqc_rt_mpi_all_gather(void *mpi, const void *send, void *recv,
                                       int64_t bytes) {
  seqc::rt::endCallUnless([=](std::string &error) {
    return seqc::rt::mpiAllGather(mpi, send, recv, bytes, error);
  });
}
