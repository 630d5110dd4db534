//===- Nccl.cpp - the CUDA target's collectives, on NCCL ------------------===//
//
// Distributed code compiled for the CUDA target exchanges through the
// seqc_rt_nccl_* entry points (seq-collectives-to-nccl), each given the
// module's MPI communicator. NCCL carries them between the ranks' device
// buffers; MPI only starts it: the first collective over a set of processes
// makes their NCCL communicator (rank 0's unique id broadcast over MPI, then
// ncclCommInitRank on the process's device), kept for the process's life
// and found again by the processes it holds.
// A collective runs on the thread's stream, which is then synchronized: the
// host code after it reads the result (the kernels run on the same stream).
//
// libnccl.so.2 is opened with dlopen the first time (SEQC_LIBNCCL names
// another), as libcuda is, so nothing else depends on it.
//
// Code of the emulated CUDA target has host buffers: its
// seqc_rt_nccl_emulated_* entry points do the same exchanges on MPI, over a
// communicator of their own made and found the same way as NCCL's (a
// duplicate of the module's), so the emulation tests that too.
//
//===----------------------------------------------------------------------===//

#include "CallScope.h"
#include "CudaDriver.h"
#include "CudaDriverApi.h"
#include "DynamicLibrary.h"
#include "EntryPoints.h"
#include "Mpi.h"
#include "NcclApi.h"
#include "Runtime.h"

#include <cstdlib>
#include <mutex>
#include <optional>
#include <vector>

using namespace seqc::rt;

const NcclApi &seqc::rt::ncclApi() {
  static NcclApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const char *name = std::getenv("SEQC_LIBNCCL");
    if (!name || !*name)
      name = "libnccl.so.2";
    api.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!api.handle) {
      const char *why = dlerror();
      api.failure = std::string("distributed runs on the GPU need NCCL "
                                "(cannot open ") +
                    name + ": " + (why ? why : "unknown error") + ")";
      return;
    }
    // `&`, not `&&`: every function is looked up.
    void *lib = api.handle;
    bool all = findFunction(lib, api.getVersion, "ncclGetVersion") &
               findFunction(lib, api.getErrorString, "ncclGetErrorString") &
               findFunction(lib, api.getUniqueId, "ncclGetUniqueId") &
               findFunction(lib, api.commInitRank, "ncclCommInitRank") &
               findFunction(lib, api.allReduce, "ncclAllReduce") &
               findFunction(lib, api.allGather, "ncclAllGather") &
               findFunction(lib, api.send, "ncclSend") &
               findFunction(lib, api.recv, "ncclRecv");
    if (!all) {
      api.failure = std::string(name) + " lacks NCCL 2 entry points";
      return;
    }
    // Point-to-point send and receive came with NCCL 2.7.
    if (api.getVersion(&api.version) != 0 || api.version < 20700)
      api.failure = std::string(name) + " is older than NCCL 2.7 (version " +
                    std::to_string(api.version) + ")";
  });
  return api;
}

std::string NcclApi::errorString(NcclResult r) const {
  const char *s = getErrorString ? getErrorString(r) : nullptr;
  return std::string(s ? s : "NCCL error") + " (" + std::to_string(r) + ")";
}

namespace {

/// Communicators of type `Comm` made from MPI communicators, each kept with
/// a duplicate of the MPI communicator of its processes. They are found by
/// the processes they hold, not by the MPI handle: a host may free a
/// communicator and get the same handle back for other processes.
template <typename Comm> class CommunicatorCache {
public:
  /// The communicator over the processes of `mpi`, made the first time by
  /// `make(processes, error)` from a duplicate of `mpi` (by all of them at
  /// once, as they run the same code); null with `error` set on failure.
  template <typename Make> Comm get(void *mpi, std::string &error, Make make) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto &[processes, comm] : made)
      if (mpiSameProcesses(processes, mpi))
        return comm;
    void *processes = mpiDuplicate(mpi, error);
    if (!processes)
      return nullptr;
    Comm comm = make(processes, error);
    if (comm)
      made.emplace_back(processes, comm);
    return comm;
  }

private:
  std::mutex mutex;
  std::vector<std::pair<void *, Comm>> made; // kept to the end
};

/// The NCCL communicator over the processes of MPI communicator
/// `processes`: rank 0's unique id broadcast over it, then
/// ncclCommInitRank on every rank; null with `error` set on failure.
NcclComm makeNcclCommunicator(const NcclApi &api, void *processes,
                              std::string &error) {
  int rank = mpiCommunicatorRank(processes, error);
  int size = rank < 0 ? -1 : mpiCommunicatorSize(processes, error);
  if (size < 0)
    return nullptr;
  NcclUniqueId id{};
  if (rank == 0)
    if (NcclResult r = api.getUniqueId(&id)) {
      // The other ranks wait in the broadcast: rank 0 failing ends the run
      // (seqc-run's timeout, mpirun's end of the job on an error exit).
      error = "ncclGetUniqueId failed: " + api.errorString(r);
      return nullptr;
    }
  if (!mpiBroadcast(processes, &id, sizeof id, /*root=*/0, error))
    return nullptr;
  NcclComm comm = nullptr;
  if (NcclResult r = api.commInitRank(&comm, size, id, rank)) {
    error = "ncclCommInitRank (rank " + std::to_string(rank) + " of " +
            std::to_string(size) + ") failed: " + api.errorString(r);
    return nullptr;
  }
  return comm;
}

/// NCCL's communicator for the processes of `mpi`.
NcclComm ncclCommunicatorFor(const NcclApi &api, void *mpi,
                             std::string &error) {
  static auto *cache = new CommunicatorCache<NcclComm>; // kept to the end
  return cache->get(mpi, error, [&](void *processes, std::string &error) {
    return makeNcclCommunicator(api, processes, error);
  });
}

/// The emulation's own MPI communicator for the processes of `mpi` (a
/// duplicate, as NCCL's is its own): its exchanges do not mix with the
/// host's messages on `mpi`.
void *emulatedCommunicatorFor(void *mpi, std::string &error) {
  static auto *cache = new CommunicatorCache<void *>; // kept to the end
  return cache->get(mpi, error,
                    [](void *processes, std::string &) { return processes; });
}

/// What one collective runs with.
struct NcclCall {
  const NcclApi *api = nullptr;
  NcclComm comm = nullptr;
  NcclStream stream = nullptr;
};

/// NCCL's communicator for `mpi` and this thread's stream, or false with
/// `error` set.
bool prepare(void *mpi, NcclCall &call, std::string &error) {
  call.api = &ncclApi();
  error = call.api->failure.empty() ? cudaReady() : call.api->failure;
  if (!error.empty())
    return false;
  call.comm = ncclCommunicatorFor(*call.api, mpi, error);
  if (!call.comm)
    return false;
  call.stream = static_cast<NcclStream>(cudaThreadStream(error));
  return call.stream != nullptr;
}

/// Waits for `call`'s collective; an error names `what` and the cause.
bool finish(const NcclCall &call, NcclResult r, const char *what,
            std::string &error) {
  if (r != 0) {
    error = std::string(what) + " failed: " + call.api->errorString(r);
    return false;
  }
  if (int s = cudaApi().cuStreamSynchronize(call.stream)) {
    error = std::string(what) + " failed: " + cudaApi().errorString(s);
    return false;
  }
  return true;
}

/// NCCL's type and reduction for the runtime's codes (EntryPoints.h).
std::optional<NcclDataType> ncclType(int32_t element) {
  switch (static_cast<entry::ReduceElement>(element)) {
  case entry::ReduceElement::F32:
    return NcclFloat32;
  case entry::ReduceElement::F64:
    return NcclFloat64;
  case entry::ReduceElement::I32:
    return NcclInt32;
  case entry::ReduceElement::I64:
    return NcclInt64;
  }
  return std::nullopt;
}

std::optional<NcclRedOp> ncclOp(int32_t op) {
  switch (static_cast<entry::ReduceOp>(op)) {
  case entry::ReduceOp::Sum:
    return NcclSum;
  case entry::ReduceOp::Product:
    return NcclProd;
  case entry::ReduceOp::Max:
    return NcclMax;
  case entry::ReduceOp::Min:
    return NcclMin;
  }
  return std::nullopt;
}

bool allReduce(void *mpi, const void *send, void *recv, int64_t count,
               int32_t element, int32_t op, std::string &error) {
  std::optional<NcclDataType> type = ncclType(element);
  std::optional<NcclRedOp> reduction = ncclOp(op);
  if (!type || !reduction) {
    error = "an all-reduce of an unknown element type or reduction";
    return false;
  }
  NcclCall call;
  return prepare(mpi, call, error) &&
         finish(call,
                call.api->allReduce(send, recv, count, *type, *reduction,
                                    call.comm, call.stream),
                "ncclAllReduce", error);
}

bool allGather(void *mpi, const void *send, void *recv, int64_t bytes,
               std::string &error) {
  NcclCall call;
  return prepare(mpi, call, error) &&
         finish(call,
                call.api->allGather(send, recv, bytes, NcclUint8, call.comm,
                                    call.stream),
                "ncclAllGather", error);
}

bool sendBytes(void *mpi, const void *data, int64_t bytes, int32_t peer,
               std::string &error) {
  NcclCall call;
  return prepare(mpi, call, error) &&
         finish(call,
                call.api->send(data, bytes, NcclUint8, peer, call.comm,
                               call.stream),
                "ncclSend", error);
}

bool recvBytes(void *mpi, void *data, int64_t bytes, int32_t peer,
               std::string &error) {
  NcclCall call;
  return prepare(mpi, call, error) &&
         finish(call,
                call.api->recv(data, bytes, NcclUint8, peer, call.comm,
                               call.stream),
                "ncclRecv", error);
}

} // namespace

extern "C" {

void seqc_rt_nccl_all_reduce(void *mpi, const void *send, void *recv,
                             int64_t count, int32_t element, int32_t op) {
  endCallUnless([=](std::string &error) {
    return allReduce(mpi, send, recv, count, element, op, error);
  });
}

void seqc_rt_nccl_all_gather(void *mpi, const void *send, void *recv,
                             int64_t bytes) {
  endCallUnless([=](std::string &error) {
    return allGather(mpi, send, recv, bytes, error);
  });
}

void seqc_rt_nccl_send(void *mpi, const void *data, int64_t bytes,
                       int32_t peer) {
  endCallUnless([=](std::string &error) {
    return sendBytes(mpi, data, bytes, peer, error);
  });
}

void seqc_rt_nccl_recv(void *mpi, void *data, int64_t bytes, int32_t peer) {
  endCallUnless([=](std::string &error) {
    return recvBytes(mpi, data, bytes, peer, error);
  });
}

void seqc_rt_nccl_emulated_all_reduce(void *mpi, const void *send, void *recv,
                                      int64_t count, int32_t element,
                                      int32_t op) {
  endCallUnless([=](std::string &error) {
    void *comm = emulatedCommunicatorFor(mpi, error);
    return comm && mpiAllReduce(comm, send, recv, count,
                                static_cast<entry::ReduceElement>(element),
                                static_cast<entry::ReduceOp>(op), error);
  });
}

void seqc_rt_nccl_emulated_all_gather(void *mpi, const void *send, void *recv,
                                      int64_t bytes) {
  endCallUnless([=](std::string &error) {
    void *comm = emulatedCommunicatorFor(mpi, error);
    return comm && mpiAllGather(comm, send, recv, bytes, error);
  });
}

void seqc_rt_nccl_emulated_send(void *mpi, const void *data, int64_t bytes,
                                int32_t peer) {
  endCallUnless([=](std::string &error) {
    void *comm = emulatedCommunicatorFor(mpi, error);
    return comm && mpiSendBytes(comm, data, bytes, peer, error);
  });
}

void seqc_rt_nccl_emulated_recv(void *mpi, void *data, int64_t bytes,
                                int32_t peer) {
  endCallUnless([=](std::string &error) {
    void *comm = emulatedCommunicatorFor(mpi, error);
    return comm && mpiRecvBytes(comm, data, bytes, peer, error);
  });
}

} // extern "C"
