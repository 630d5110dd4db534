//===- CudaDriver.cpp - the CUDA driver API, loaded on demand -------------===//

#include "CudaDriver.h"

#include <dlfcn.h>
#include <mutex>

namespace {
using CUresult = int;
using InitFn = CUresult (*)(unsigned);
using DeviceCountFn = CUresult (*)(int *);

struct Driver {
  void *handle = nullptr;
  InitFn init = nullptr;
  DeviceCountFn deviceCount = nullptr;
  bool initialized = false;
};

Driver &driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    d.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d.handle)
      return;
    d.init = reinterpret_cast<InitFn>(dlsym(d.handle, "cuInit"));
    d.deviceCount =
        reinterpret_cast<DeviceCountFn>(dlsym(d.handle, "cuDeviceGetCount"));
    d.initialized = d.init && d.deviceCount && d.init(0) == 0;
  });
  return d;
}
} // namespace

int seqc::rt::cudaDeviceCount() {
  Driver &d = driver();
  if (!d.initialized)
    return 0;
  int count = 0;
  if (d.deviceCount(&count) != 0)
    return 0;
  return count;
}
