//===- CudaDriver.cpp - the CUDA driver API, loaded on demand -------------===//

#include "CudaDriver.h"
#include "CudaDriverApi.h"

#include <cstdlib>
#include <dlfcn.h>
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
    bool all = true;
    auto get = [&](auto &fn, const char *symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(api.handle, symbol));
      all = all && fn;
    };
    get(api.cuInit, "cuInit");
    get(api.cuGetErrorString, "cuGetErrorString");
    get(api.cuDeviceGetCount, "cuDeviceGetCount");
    get(api.cuDeviceGet, "cuDeviceGet");
    get(api.cuDeviceGetAttribute, "cuDeviceGetAttribute");
    get(api.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    get(api.cuCtxSetCurrent, "cuCtxSetCurrent");
    get(api.cuModuleLoadData, "cuModuleLoadData");
    get(api.cuModuleUnload, "cuModuleUnload");
    get(api.cuModuleGetFunction, "cuModuleGetFunction");
    get(api.cuFuncSetAttribute, "cuFuncSetAttribute");
    get(api.cuLaunchKernel, "cuLaunchKernel");
    get(api.cuStreamCreate, "cuStreamCreate");
    get(api.cuStreamSynchronize, "cuStreamSynchronize");
    get(api.cuStreamWaitEvent, "cuStreamWaitEvent");
    get(api.cuEventCreate, "cuEventCreate");
    get(api.cuEventDestroy, "cuEventDestroy_v2");
    get(api.cuEventSynchronize, "cuEventSynchronize");
    get(api.cuEventRecord, "cuEventRecord");
    get(api.cuMemAllocManaged, "cuMemAllocManaged");
    get(api.cuMemFree, "cuMemFree_v2");
    get(api.cuPointerGetAttribute, "cuPointerGetAttribute");
    get(api.cuMemcpyAsync, "cuMemcpyAsync");
    get(api.cuMemsetD32Async, "cuMemsetD32Async");
    get(api.cuMemsetD16Async, "cuMemsetD16Async");
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
    CUdevice device = 0;
    if (CUresult r = api.cuDeviceGet(&device, 0)) {
      api.failure = "cannot open CUDA device 0: " + api.errorString(r);
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
