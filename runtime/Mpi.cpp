//===- Mpi.cpp - the MPI library of distributed runs, opened at run time --===//
//
// Two MPI ABIs are known here, as to MLIR's MPIToLLVM (the DLTI entry
// "MPI:Implementation" seq-collectives-to-mpi sets from mpiImplementation()):
//   - OpenMPI's: handles are pointers to the library's predefined objects,
//     found by name (`ompi_mpi_comm_world` and the like);
//   - MPICH's, which Intel MPI, Cray MPICH and MVAPICH share: handles are
//     ints of fixed values (MpichAbi.h).
// The runtime passes handles as `void *`; an MPICH handle is its int,
// sign-extended, and is given to the library as an int again
// (HandleFunctions::of).
//
//===----------------------------------------------------------------------===//

#include "Mpi.h"

#include "CallScope.h"
#include "MpichAbi.h"
#include "Runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <iterator>
#include <mutex>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <vector>

using namespace seqc::rt;

namespace {

/// The ABIs of MPI libraries seqc knows.
enum class MpiAbi {
  /// OpenMPI's: handles are pointers to the library's objects.
  OpenMpi,
  /// MPICH's (also Intel MPI's, Cray MPICH's, MVAPICH's): handles are ints.
  Mpich,
};

/// The MPI functions seqc calls that take handles, typed for one ABI's
/// handle (`void *` for OpenMPI, `int` for MPICH).
template <typename Handle> struct HandleFunctions {
  int (*commRank)(Handle, int *) = nullptr;
  int (*commSize)(Handle, int *) = nullptr;
  int (*allreduce)(const void *, void *, int, Handle, Handle, Handle) = nullptr;
  int (*abort)(Handle, int) = nullptr;
  int (*bcast)(void *, int, Handle, int, Handle) = nullptr;
  int (*send)(const void *, int, Handle, int, int, Handle) = nullptr;
  int (*recv)(void *, int, Handle, int, int, Handle, void *) = nullptr;
  int (*commDup)(Handle, Handle *) = nullptr;
  int (*commCompare)(Handle, Handle, int *) = nullptr;
  int (*allgather)(const void *, int, Handle, void *, int, Handle,
                   Handle) = nullptr;

  /// The library's form of a runtime handle, and back.
  static Handle of(void *handle) {
    if constexpr (std::is_pointer_v<Handle>)
      return handle;
    else
      return static_cast<Handle>(reinterpret_cast<intptr_t>(handle));
  }
  static void *opaque(Handle handle) {
    if constexpr (std::is_pointer_v<Handle>)
      return handle;
    else
      return reinterpret_cast<void *>(static_cast<intptr_t>(handle));
  }
};

struct MpiLibrary {
  void *handle = nullptr;
  /// The library's name and ABI.
  std::string name;
  MpiAbi abi = MpiAbi::OpenMpi;
  int (*initThread)(int *, char ***, int, int *) = nullptr;
  int (*initialized)(int *) = nullptr, (*finalized)(int *) = nullptr;
  int (*finalize)() = nullptr;
  int (*libraryVersion)(char *, int *) = nullptr;
  /// The functions of the library's ABI (the other's stay null).
  HandleFunctions<void *> openMpi;
  HandleFunctions<int> mpich;
  /// Predefined handles, as the runtime passes them.
  void *commWorld = nullptr, *uint64Type = nullptr;
  // The all-reduces' datatypes (by entry::ReduceElement) and reductions (by
  // entry::ReduceOp), and MPI_BYTE.
  void *elementTypes[4] = {}, *reduceOps[4] = {}, *byteType = nullptr;
  void *inPlace = nullptr, *statusIgnore = nullptr;
  MpiWorld world;
  /// The most elements one call is given (readMaxCount).
  int64_t maxCount = 0;
  bool started = false;
  /// MPI was started here (not by the host): it is ended here too.
  bool owned = false;
  std::string error;

  /// `call(functions)` with the functions of the library's ABI.
  template <typename Call> int call(Call call) const {
    return abi == MpiAbi::OpenMpi ? call(openMpi) : call(mpich);
  }
};

MpiLibrary &library() {
  static MpiLibrary lib;
  return lib;
}

/// The address of `name` in the library, or null.
void *lookUp(const MpiLibrary &lib, const char *name) {
  // The process's definition first: a host linked against libmpi that
  // names MPI_COMM_WORLD has a copy of `ompi_mpi_comm_world` (a copy
  // relocation) that the library itself uses, and the library's own
  // storage is then never initialized.
  void *address = dlsym(RTLD_DEFAULT, name);
  return address ? address : dlsym(lib.handle, name);
}

template <typename T> bool find(MpiLibrary &lib, T &found, const char *name) {
  found = reinterpret_cast<T>(lookUp(lib, name));
  if (!found)
    lib.error = "the MPI library " + lib.name + " has no " + name;
  return found != nullptr;
}

template <typename Handle>
bool findHandleFunctions(MpiLibrary &lib, HandleFunctions<Handle> &fns) {
  return find(lib, fns.commRank, "MPI_Comm_rank") &&
         find(lib, fns.commSize, "MPI_Comm_size") &&
         find(lib, fns.allreduce, "MPI_Allreduce") &&
         find(lib, fns.abort, "MPI_Abort") &&
         find(lib, fns.bcast, "MPI_Bcast") && find(lib, fns.send, "MPI_Send") &&
         find(lib, fns.recv, "MPI_Recv") &&
         find(lib, fns.commDup, "MPI_Comm_dup") &&
         find(lib, fns.commCompare, "MPI_Comm_compare") &&
         find(lib, fns.allgather, "MPI_Allgather");
}

bool findOpenMpiHandles(MpiLibrary &lib) {
  lib.inPlace = reinterpret_cast<void *>(1); // OpenMPI's MPI_IN_PLACE
  lib.statusIgnore = nullptr;                // and MPI_STATUS_IGNORE
  return findHandleFunctions(lib, lib.openMpi) &&
         find(lib, lib.commWorld, "ompi_mpi_comm_world") &&
         find(lib, lib.uint64Type, "ompi_mpi_uint64_t") &&
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

bool findMpichHandles(MpiLibrary &lib) {
  auto handle = HandleFunctions<int>::opaque;
  lib.inPlace = reinterpret_cast<void *>(mpich::kInPlace);
  lib.statusIgnore = reinterpret_cast<void *>(mpich::kStatusIgnore);
  lib.commWorld = handle(mpich::kCommWorld);
  lib.uint64Type = handle(mpich::kUint64);
  const int types[] = {mpich::kFloat, mpich::kDouble, mpich::kInt32,
                       mpich::kInt64};
  const int ops[] = {mpich::kSum, mpich::kProd, mpich::kMax, mpich::kMin};
  for (size_t i = 0; i < std::size(types); ++i) {
    lib.elementTypes[i] = handle(types[i]);
    lib.reduceOps[i] = handle(ops[i]);
  }
  lib.byteType = handle(mpich::kByte);
  return findHandleFunctions(lib, lib.mpich);
}

/// The library's own account of itself (MPI_Get_library_version, which
/// may be called before MPI_Init), its first line.
std::string libraryVersion(const MpiLibrary &lib) {
  // MPICH's MPI_MAX_LIBRARY_VERSION_STRING (OpenMPI's is 256).
  std::string version(8192, '\0');
  int length = 0;
  if (lib.libraryVersion(version.data(), &length) != 0)
    return "";
  version.resize(std::clamp(length, 0, static_cast<int>(version.size())));
  return version.substr(0, version.find('\n'));
}

/// Which ABI the opened library has: OpenMPI's names its predefined
/// objects; the MPICH family says so in its version.
bool findAbi(MpiLibrary &lib) {
  if (lookUp(lib, "ompi_mpi_comm_world")) {
    lib.abi = MpiAbi::OpenMpi;
    return true;
  }
  std::string version = libraryVersion(lib);
  for (const char *family : {"MPICH", "Intel(R) MPI", "MVAPICH"})
    if (version.find(family) != std::string::npos) {
      lib.abi = MpiAbi::Mpich;
      return true;
    }
  lib.error = "the MPI library " + lib.name +
              " has neither OpenMPI's ABI nor MPICH's (it says '" + version +
              "')";
  return false;
}

/// The libraries to try: SEQC_LIBMPI's, else first the one of the launcher
/// that started this process (OpenMPI's mpirun, or a PMI launcher: MPICH's
/// Hydra, Slurm's srun), then the other; without a launcher OpenMPI's
/// first.
std::vector<std::string> libraryNames() {
  const char *named = std::getenv("SEQC_LIBMPI");
  if (named && *named)
    return {named};
  constexpr const char *kOpenMpi = "libmpi.so.40", *kMpich = "libmpich.so.12";
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") &&
      (std::getenv("PMI_SIZE") || std::getenv("PMI_RANK")))
    return {kMpich, kOpenMpi};
  return {kOpenMpi, kMpich};
}

/// An MPI library the process has already loaded: one whose symbols are
/// global (a host linked with MPI), else one of `names` loaded locally
/// (mpi4py's); made global either way, so that the compiled code's calls
/// resolve to it. Another library would be a second MPI in the process.
bool openLoaded(MpiLibrary &lib, const std::vector<std::string> &names) {
  Dl_info info{};
  void *init = dlsym(RTLD_DEFAULT, "MPI_Init_thread");
  if (init && dladdr(init, &info) && info.dli_fname) {
    lib.handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    // MPI linked into the executable itself.
    if (!lib.handle)
      lib.handle = dlopen(nullptr, RTLD_NOW);
    lib.name = info.dli_fname;
    return lib.handle != nullptr;
  }
  for (const std::string &name : names) {
    lib.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    if (lib.handle) {
      lib.name = name;
      return true;
    }
  }
  return false;
}

bool open(MpiLibrary &lib) {
  std::vector<std::string> names = libraryNames();
  std::string why;
  if (!openLoaded(lib, names))
    for (const std::string &name : names) {
      // Global: the compiled code's MPI calls resolve to this library.
      lib.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (lib.handle) {
        lib.name = name;
        break;
      }
      const char *error = dlerror();
      why += (why.empty() ? "cannot open " : "; nor ") + name + ": " +
             (error ? error : "unknown error");
    }
  if (!lib.handle) {
    lib.error = "distributed runs need MPI (" + why +
                "; apt-get install openmpi-bin libopenmpi-dev, or set "
                "SEQC_LIBMPI to the MPI library)";
    return false;
  }
  if (!find(lib, lib.initThread, "MPI_Init_thread") ||
      !find(lib, lib.initialized, "MPI_Initialized") ||
      !find(lib, lib.finalized, "MPI_Finalized") ||
      !find(lib, lib.finalize, "MPI_Finalize") ||
      !find(lib, lib.libraryVersion, "MPI_Get_library_version") ||
      !findAbi(lib))
    return false;
  return lib.abi == MpiAbi::OpenMpi ? findOpenMpiHandles(lib)
                                    : findMpichHandles(lib);
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
  if (lib.call([&](auto &mpi) {
        return mpi.commRank(mpi.of(lib.commWorld), &lib.world.rank) ||
               mpi.commSize(mpi.of(lib.commWorld), &lib.world.size);
      }) != 0) {
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

const char *seqc::rt::mpiImplementation() {
  MpiLibrary &lib = library();
  return lib.started && lib.abi == MpiAbi::Mpich ? "MPICH" : "OpenMPI";
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
  if (lib.call([&](auto &mpi) {
        return mpi.commSize(mpi.of(communicator), &size);
      }) != 0) {
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
  if (lib.call([&](auto &mpi) {
        constexpr auto kMax = static_cast<size_t>(entry::ReduceOp::Max);
        return mpi.allreduce(lib.inPlace, values, count, mpi.of(lib.uint64Type),
                             mpi.of(lib.reduceOps[kMax]),
                             mpi.of(lib.commWorld));
      }) != 0) {
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
  if (lib->call([&](auto &mpi) {
        return mpi.commRank(mpi.of(communicator), &rank);
      }) != 0) {
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
  if (lib->call([&](auto &mpi) {
        decltype(mpi.of(copy)) duplicate{};
        int failed = mpi.commDup(mpi.of(communicator), &duplicate);
        copy = mpi.opaque(duplicate);
        return failed;
      }) != 0) {
    error = "MPI_Comm_dup failed";
    return nullptr;
  }
  return copy;
}

bool seqc::rt::mpiSameProcesses(void *a, void *b) {
  // MPI_IDENT and MPI_CONGRUENT (the same in both ABIs).
  constexpr int kIdent = 0, kCongruent = 1;
  std::string error;
  MpiLibrary *lib = started(error);
  int result = -1;
  return lib && lib->call([&](auto &mpi) {
    return mpi.commCompare(mpi.of(a), mpi.of(b), &result);
  }) == 0 &&
         (result == kIdent || result == kCongruent);
}

bool seqc::rt::mpiBroadcast(void *communicator, void *data, int64_t bytes,
                            int root, std::string &error) {
  MpiLibrary *lib = started(error);
  if (!lib)
    return false;
  auto *base = static_cast<char *>(data);
  if (inPieces(bytes, [&](int64_t offset, int count) {
        return lib->call([&](auto &mpi) {
          return mpi.bcast(base + offset, count, mpi.of(lib->byteType), root,
                           mpi.of(communicator));
        });
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
        return lib->call([&](auto &mpi) {
          return mpi.allreduce(in + offset * kBytes[e],
                               out + offset * kBytes[e], n,
                               mpi.of(lib->elementTypes[e]),
                               mpi.of(lib->reduceOps[o]), mpi.of(communicator));
        });
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
    if (lib->call([&](auto &mpi) {
          return mpi.allgather(send, static_cast<int>(bytes),
                               mpi.of(lib->byteType), recv,
                               static_cast<int>(bytes), mpi.of(lib->byteType),
                               mpi.of(communicator));
        }) == 0)
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
        return lib->call([&](auto &mpi) {
          return mpi.send(base + offset, count, mpi.of(lib->byteType), peer,
                          /*tag=*/0, mpi.of(communicator));
        });
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
  if (inPieces(bytes, [&](int64_t offset, int count) {
        return lib->call([&](auto &mpi) {
          return mpi.recv(base + offset, count, mpi.of(lib->byteType), peer,
                          /*tag=*/0, mpi.of(communicator), lib->statusIgnore);
        });
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
    lib.call([&](auto &mpi) { return mpi.abort(mpi.of(lib.commWorld), code); });
  _exit(code);
}

extern "C" void seqc_rt_mpi_all_gather(void *mpi, const void *send, void *recv,
                                       int64_t bytes) {
  seqc::rt::endCallUnless([=](std::string &error) {
    return seqc::rt::mpiAllGather(mpi, send, recv, bytes, error);
  });
}
