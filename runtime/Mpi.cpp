//===- Mpi.cpp - the MPI library of distributed runs, opened at run time --===//
//
// Only the OpenMPI ABI is known here (as in the code MPIToLLVM writes for
// the DLTI entry seq-collectives-to-mpi sets): handles are pointers to the
// library's predefined objects, `ompi_mpi_comm_world` and the like.
//
//===----------------------------------------------------------------------===//

#include "Mpi.h"

#include <cstdlib>
#include <dlfcn.h>
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

struct MpiLibrary {
  void *handle = nullptr;
  InitThreadFn initThread = nullptr;
  InitializedFn initialized = nullptr, finalized = nullptr;
  CommQueryFn commRank = nullptr, commSize = nullptr;
  AllreduceFn allreduce = nullptr;
  FinalizeFn finalize = nullptr;
  AbortFn abort = nullptr;
  void *commWorld = nullptr, *uint64Type = nullptr, *opMax = nullptr;
  void *inPlace = reinterpret_cast<void *>(1); // OpenMPI's MPI_IN_PLACE
  MpiWorld world;
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
         find(lib, lib.opMax, "ompi_mpi_op_max");
}

bool start(MpiLibrary &lib) {
  if (!open(lib))
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
