//===- Nccl.cpp - the CUDA target's collectives, on NCCL ------------------===//
//
// Distributed code compiled for the CUDA target exchanges through the
// seqc_rt_nccl_* entry points (seq-collectives-to-nccl), each given the
// module's MPI communicator. NCCL carries them between the ranks' device
// buffers; MPI only starts it: the first collective on a communicator makes
// its NCCL communicator (rank 0's unique id broadcast over MPI, then
// ncclCommInitRank on the process's device), kept for the process's life.
// A collective runs on the thread's stream, which is then synchronized: the
// host code after it reads the result (the kernels run on the same stream).
//
// libnccl.so.2 is opened with dlopen the first time (SEQC_LIBNCCL names
// another), as libcuda is, so nothing else depends on it.
//
// Code of the emulated CUDA target has host buffers: its
// seqc_rt_nccl_emulated_* entry points do the same exchanges on MPI.
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
#include <map>
#include <mutex>
#include <type_traits>

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

/// NCCL with the process's device current on this thread; why not, else.
std::string ncclReady(const NcclApi *&api) {
  api = &ncclApi();
  if (!api->failure.empty())
    return api->failure;
  return cudaReady();
}

/// The NCCL communicator over the ranks of MPI communicator `mpi`, made by
/// its first collective (every rank makes it at the same collective, as
/// they run the same code); null with `error` set on failure.
NcclComm communicatorFor(const NcclApi &api, void *mpi, std::string &error) {
  static std::mutex mutex;
  static auto *made = new std::map<void *, NcclComm>; // kept to the end
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = made->find(mpi); it != made->end())
    return it->second;
  int rank = mpiCommunicatorRank(mpi, error);
  int size = rank < 0 ? -1 : mpiCommunicatorSize(mpi, error);
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
  if (!mpiBroadcast(mpi, &id, sizeof id, /*root=*/0, error))
    return nullptr;
  NcclComm comm = nullptr;
  if (NcclResult r = api.commInitRank(&comm, size, id, rank)) {
    error = "ncclCommInitRank (rank " + std::to_string(rank) + " of " +
            std::to_string(size) + ") failed: " + api.errorString(r);
    return nullptr;
  }
  (*made)[mpi] = comm;
  return comm;
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
  error = ncclReady(call.api);
  if (!error.empty())
    return false;
  call.comm = communicatorFor(*call.api, mpi, error);
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

NcclDataType ncclType(int32_t element) {
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
  return NcclUint8;
}

NcclRedOp ncclOp(int32_t op) {
  switch (static_cast<entry::ReduceOp>(op)) {
  case entry::ReduceOp::Product:
    return NcclProd;
  case entry::ReduceOp::Max:
    return NcclMax;
  case entry::ReduceOp::Min:
    return NcclMin;
  case entry::ReduceOp::Sum:
    break;
  }
  return NcclSum;
}

bool allReduce(void *mpi, const void *send, void *recv, int64_t count,
               int32_t element, int32_t op, std::string &error) {
  NcclCall call;
  return prepare(mpi, call, error) &&
         finish(call,
                call.api->allReduce(send, recv, count, ncclType(element),
                                    ncclOp(op), call.comm, call.stream),
                "ncclAllReduce", error);
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

/// Runs `exchange(error)`; when it fails, ends the running call with its
/// message (kept in a string gone before the call unwinds: unwindCall
/// skips destructors).
template <typename Exchange> void exchangeOrEnd(Exchange exchange) {
  bool ok;
  {
    std::string error;
    ok = exchange(error);
    if (!ok)
      recordCallError(error);
  }
  if (!ok)
    unwindCall();
}

} // namespace

extern "C" {

void seqc_rt_nccl_all_reduce(void *mpi, const void *send, void *recv,
                             int64_t count, int32_t element, int32_t op) {
  exchangeOrEnd([=](std::string &error) {
    return allReduce(mpi, send, recv, count, element, op, error);
  });
}

void seqc_rt_nccl_send(void *mpi, const void *data, int64_t bytes,
                       int32_t peer) {
  exchangeOrEnd([=](std::string &error) {
    return sendBytes(mpi, data, bytes, peer, error);
  });
}

void seqc_rt_nccl_recv(void *mpi, void *data, int64_t bytes, int32_t peer) {
  exchangeOrEnd([=](std::string &error) {
    return recvBytes(mpi, data, bytes, peer, error);
  });
}

void seqc_rt_nccl_emulated_all_reduce(void *mpi, const void *send, void *recv,
                                      int64_t count, int32_t element,
                                      int32_t op) {
  exchangeOrEnd([=](std::string &error) {
    return mpiAllReduce(mpi, send, recv, count,
                        static_cast<entry::ReduceElement>(element),
                        static_cast<entry::ReduceOp>(op), error);
  });
}

void seqc_rt_nccl_emulated_send(void *mpi, const void *data, int64_t bytes,
                                int32_t peer) {
  exchangeOrEnd([=](std::string &error) {
    return mpiSendBytes(mpi, data, bytes, peer, error);
  });
}

void seqc_rt_nccl_emulated_recv(void *mpi, void *data, int64_t bytes,
                                int32_t peer) {
  exchangeOrEnd([=](std::string &error) {
    return mpiRecvBytes(mpi, data, bytes, peer, error);
  });
}

} // extern "C"
