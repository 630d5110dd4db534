//===- CudaDriver.cpp - the CUDA driver API, loaded on demand -------------===//

#include "CudaDriver.h"
#include "CudaDriverApi.h"
#include "DynamicLibrary.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

using namespace seqc::rt;

namespace {
/// Module loads run on the thread that links the code (the engine's
/// compile, a program's or library's constructors): per thread, two
/// concurrent compilations cannot take each other's failure.
thread_local std::string loadError;
/// The last failure of any thread, for the message of a later call that
/// needs the module (ahead-of-time code loads in constructors; no engine
/// takes the error there).
std::mutex lastLoadErrorMutex;
std::string lastLoadError;

/// Freed managed blocks by size, reused by later allocations of the same
/// size: a fresh managed page faults on its first touch by a kernel, so a
/// model called again and again would otherwise pay that on every call.
struct ManagedCache {
  std::mutex mutex;
  std::multimap<size_t, void *> free;
  size_t bytes = 0;
  static constexpr size_t Limit = size_t(16) << 30;
};
ManagedCache &managedCache() {
  static ManagedCache *cache = new ManagedCache; // outlives static dtors
  return *cache;
}
std::mutex sizesMutex;
std::unordered_map<void *, size_t> &managedSizes() {
  static auto *sizes = new std::unordered_map<void *, size_t>;
  return *sizes;
}
/// The device this process uses among `count`: SEQC_CUDA_DEVICE, else the
/// process's place among those its launcher (mpirun, srun) started on this
/// node, modulo `count` (one GPU per rank, as NCCL requires), else 0. -1
/// with `why` set when SEQC_CUDA_DEVICE names no device.
int processDeviceOrdinal(int count, std::string &why) {
  if (const char *asked = std::getenv("SEQC_CUDA_DEVICE"); asked && *asked) {
    char *end = nullptr;
    long ordinal = std::strtol(asked, &end, 10);
    if (*end || ordinal < 0 || ordinal >= count) {
      why = std::string("SEQC_CUDA_DEVICE=") + asked +
            " names no CUDA device (this machine has " + std::to_string(count) +
            ")";
      return -1;
    }
    return static_cast<int>(ordinal);
  }
  for (const char *local :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char *rank = std::getenv(local); rank && *rank)
      return static_cast<int>(std::strtol(rank, nullptr, 10) % count);
  return 0;
}

} // namespace

const CudaApi &seqc::rt::cudaApi() {
  static CudaApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    const char *name = std::getenv("SEQC_LIBCUDA");
    if (!name || !*name)
      name = "libcuda.so.1";
    api.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!api.handle) {
      const char *why = dlerror();
      api.failure = std::string("no CUDA device (cannot open ") + name + ": " +
                    (why ? why : "unknown error") + ")";
      return;
    }
    // `&`, not `&&`: every function is looked up.
    void *lib = api.handle;
    bool all =
        findFunction(lib, api.cuInit, "cuInit") &
        findFunction(lib, api.cuGetErrorString, "cuGetErrorString") &
        findFunction(lib, api.cuDeviceGetCount, "cuDeviceGetCount") &
        findFunction(lib, api.cuDeviceGet, "cuDeviceGet") &
        findFunction(lib, api.cuDeviceGetAttribute, "cuDeviceGetAttribute") &
        findFunction(lib, api.cuDevicePrimaryCtxRetain,
                     "cuDevicePrimaryCtxRetain") &
        findFunction(lib, api.cuCtxSetCurrent, "cuCtxSetCurrent") &
        findFunction(lib, api.cuModuleLoadData, "cuModuleLoadData") &
        findFunction(lib, api.cuModuleUnload, "cuModuleUnload") &
        findFunction(lib, api.cuModuleGetFunction, "cuModuleGetFunction") &
        findFunction(lib, api.cuFuncSetAttribute, "cuFuncSetAttribute") &
        findFunction(lib, api.cuLaunchKernel, "cuLaunchKernel") &
        findFunction(lib, api.cuStreamCreate, "cuStreamCreate") &
        findFunction(lib, api.cuStreamSynchronize, "cuStreamSynchronize") &
        findFunction(lib, api.cuStreamWaitEvent, "cuStreamWaitEvent") &
        findFunction(lib, api.cuEventCreate, "cuEventCreate") &
        findFunction(lib, api.cuEventDestroy, "cuEventDestroy_v2") &
        findFunction(lib, api.cuEventSynchronize, "cuEventSynchronize") &
        findFunction(lib, api.cuEventRecord, "cuEventRecord") &
        findFunction(lib, api.cuMemAllocManaged, "cuMemAllocManaged") &
        findFunction(lib, api.cuMemFree, "cuMemFree_v2") &
        findFunction(lib, api.cuPointerGetAttribute, "cuPointerGetAttribute") &
        findFunction(lib, api.cuMemcpyAsync, "cuMemcpyAsync") &
        findFunction(lib, api.cuMemsetD32Async, "cuMemsetD32Async") &
        findFunction(lib, api.cuMemsetD16Async, "cuMemsetD16Async");
    if (!all) {
      api.failure = std::string("no CUDA device (") + name +
                    " lacks CUDA driver entry points)";
      return;
    }
    if (CUresult r = api.cuInit(0)) {
      api.failure = "no CUDA device (cuInit: " + api.errorString(r) + ")";
      return;
    }
    int count = 0;
    if (api.cuDeviceGetCount(&count) != 0 || count == 0) {
      api.failure = "no CUDA device";
      return;
    }
    std::string why;
    int ordinal = processDeviceOrdinal(count, why);
    if (ordinal < 0) {
      api.failure = why;
      return;
    }
    CUdevice device = 0;
    if (CUresult r = api.cuDeviceGet(&device, ordinal)) {
      api.failure = "cannot open CUDA device " + std::to_string(ordinal) +
                    ": " + api.errorString(r);
      return;
    }
    if (CUresult r = api.cuDevicePrimaryCtxRetain(&api.context, device)) {
      api.failure = "cannot create a CUDA context: " + api.errorString(r);
      return;
    }
    // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR.
    api.cuDeviceGetAttribute(&api.major, 75, device);
    api.cuDeviceGetAttribute(&api.minor, 76, device);
    api.deviceCount = count;
  });
  return api;
}

std::string CudaApi::errorString(CUresult r) const {
  const char *s = nullptr;
  if (cuGetErrorString && cuGetErrorString(r, &s) == 0 && s)
    return std::string(s) + " (" + std::to_string(r) + ")";
  return "CUDA error " + std::to_string(r);
}

int seqc::rt::cudaDeviceCount() { return cudaApi().deviceCount; }

std::string seqc::rt::cudaReady() {
  const CudaApi &api = cudaApi();
  if (!api.context)
    return api.failure.empty() ? "no CUDA device" : api.failure;
  if (CUresult r = api.cuCtxSetCurrent(api.context))
    return "cannot use the CUDA context: " + api.errorString(r);
  return "";
}

std::string seqc::rt::cudaDeviceChip() {
  const CudaApi &api = cudaApi();
  std::string chip =
      "sm_" + std::to_string(api.major) + std::to_string(api.minor);
  return api.major == 9 && api.minor == 0 ? chip + "a" : chip;
}

void *seqc::rt::cudaManagedAlloc(size_t bytes, std::string &error) {
  error = cudaReady();
  if (!error.empty())
    return nullptr;
  const CudaApi &api = cudaApi();
  if (bytes == 0)
    bytes = 1;
  {
    ManagedCache &cache = managedCache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.free.find(bytes);
    if (it != cache.free.end()) {
      void *p = it->second;
      cache.free.erase(it);
      cache.bytes -= bytes;
      return p;
    }
  }
  CUdeviceptr ptr = 0;
  // CU_MEM_ATTACH_GLOBAL: any stream and the host may touch it.
  CUresult r = api.cuMemAllocManaged(&ptr, bytes, 1);
  if (r) {
    // Blocks of other sizes may be holding the memory: give them back to
    // the driver and try once more before failing the call.
    std::vector<void *> cached;
    {
      ManagedCache &cache = managedCache();
      std::lock_guard<std::mutex> lock(cache.mutex);
      for (auto &entry : cache.free)
        cached.push_back(entry.second);
      cache.free.clear();
      cache.bytes = 0;
    }
    if (!cached.empty()) {
      {
        std::lock_guard<std::mutex> lock(sizesMutex);
        for (void *p : cached)
          managedSizes().erase(p);
      }
      for (void *p : cached)
        api.cuMemFree(reinterpret_cast<CUdeviceptr>(p));
      r = api.cuMemAllocManaged(&ptr, bytes, 1);
    }
  }
  if (r) {
    error = "out of memory: allocating " + std::to_string(bytes) +
            " bytes of CUDA managed memory failed: " + api.errorString(r);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(sizesMutex);
  managedSizes()[reinterpret_cast<void *>(ptr)] = bytes;
  return reinterpret_cast<void *>(ptr);
}

bool seqc::rt::cudaIsManaged(const void *ptr) {
  const CudaApi &api = cudaApi();
  if (!ptr || !api.context)
    return false;
  unsigned managed = 0;
  // CU_POINTER_ATTRIBUTE_IS_MANAGED; host memory the driver does not know
  // answers an error.
  return api.cuPointerGetAttribute(&managed, 8,
                                   reinterpret_cast<CUdeviceptr>(ptr)) == 0 &&
         managed != 0;
}

void seqc::rt::cudaManagedFree(void *ptr) {
  if (!ptr)
    return;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(sizesMutex);
    auto it = managedSizes().find(ptr);
    if (it != managedSizes().end())
      bytes = it->second;
  }
  ManagedCache &cache = managedCache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (bytes && cache.bytes + bytes <= ManagedCache::Limit) {
      cache.free.emplace(bytes, ptr);
      cache.bytes += bytes;
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(sizesMutex);
    managedSizes().erase(ptr);
  }
  if (cudaReady().empty())
    cudaApi().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));
}

void seqc::rt::recordCudaLoadError(const std::string &message) {
  if (loadError.empty())
    loadError = message;
  std::lock_guard<std::mutex> lock(lastLoadErrorMutex);
  lastLoadError = message;
}

std::string seqc::rt::cudaTakeLoadError() {
  std::string e;
  e.swap(loadError);
  return e;
}

std::string seqc::rt::cudaLastLoadError() {
  std::lock_guard<std::mutex> lock(lastLoadErrorMutex);
  return lastLoadError.empty() ? "no load was attempted" : lastLoadError;
}
