//===- CudaRuntime.cpp - the mgpu* entry points of MLIR's GPU lowering ----===//
//
// MLIR's GPU-to-LLVM translation emits calls to mgpuModuleLoad,
// mgpuLaunchKernel, mgpuStreamSynchronize, ... (the interface of upstream's
// CUDA runtime wrappers, which Debian does not ship). seqc implements them
// over the dlopen'd driver. A failure inside a call ends the call with an
// error (CallScope); a module that fails to load while compiled code is being
// linked is recorded and reported by the engine.
//
//===----------------------------------------------------------------------===//

#include "CallScope.h"
#include "CudaDriver.h"
#include "CudaDriverApi.h"

#include <cstdint>
#include <string>

using namespace seqc::rt;

namespace {

/// Ends the running call with `what` and the driver's message for `r`
/// (a macro: the message's temporaries die before the call unwinds).
#define SEQC_FAIL_CUDA(what, r)                                                \
  SEQC_FAIL_CALL(std::string(what) + ": " + cudaApi().errorString(r))

/// The driver with the context current; ends the call when there is none.
const CudaApi &ready() {
  endCallUnless([](std::string &why) {
    why = cudaReady();
    return why.empty();
  });
  return cudaApi();
}

} // namespace

/// One stream per host thread, made on first use and kept: the lowering asks
/// for a stream around every launch.
void *seqc::rt::cudaThreadStream(std::string &error) {
  static thread_local CUstream stream = nullptr;
  if (!stream)
    if (CUresult r = cudaApi().cuStreamCreate(&stream,
                                              /*CU_STREAM_NON_BLOCKING=*/1))
      error = "cannot create a CUDA stream: " + cudaApi().errorString(r);
  return stream;
}

extern "C" {

void *mgpuModuleLoad(void *data, size_t /*size*/) {
  std::string why = cudaReady();
  if (!why.empty()) {
    recordCudaLoadError(why);
    return nullptr;
  }
  CUmodule module = nullptr;
  if (CUresult r = cudaApi().cuModuleLoadData(&module, data)) {
    recordCudaLoadError("cannot load a CUDA kernel module: " +
                        cudaApi().errorString(r));
    return nullptr;
  }
  return module;
}

/// PTX (format=isa, null-terminated) is compiled by the driver for the
/// device at hand.
void *mgpuModuleLoadJIT(void *data, int /*optLevel*/) {
  return mgpuModuleLoad(data, 0);
}

void mgpuModuleUnload(void *module) {
  if (module && cudaReady().empty())
    cudaApi().cuModuleUnload(static_cast<CUmodule>(module));
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  const CudaApi &api = ready();
  if (!module)
    SEQC_FAIL_CALL(std::string("the CUDA kernel module holding ") + name +
                   " was not loaded: " + cudaLastLoadError());
  CUfunction fn = nullptr;
  if (CUresult r =
          api.cuModuleGetFunction(&fn, static_cast<CUmodule>(module), name))
    SEQC_FAIL_CUDA(std::string("cannot find CUDA kernel ") + name, r);
  return fn;
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t /*paramsCount*/) {
  const CudaApi &api = ready();
  // Grids are computed from run-time sizes: an empty one launches nothing.
  if (gridX <= 0 || gridY <= 0 || gridZ <= 0)
    return;
  if (gridX > 0x7fffffff || gridY > 65535 || gridZ > 65535)
    SEQC_FAIL_CALL("a CUDA grid of " + std::to_string(gridX) + "x" +
                   std::to_string(gridY) + "x" + std::to_string(gridZ) +
                   " blocks exceeds the device's limits");
  auto fn = static_cast<CUfunction>(function);
  if (smem > 48 * 1024)
    if (CUresult r =
            api.cuFuncSetAttribute(fn, kMaxDynamicSharedBytesAttribute, smem))
      SEQC_FAIL_CUDA("cannot give a CUDA kernel " + std::to_string(smem) +
                         " bytes of shared memory",
                     r);
  if (CUresult r = api.cuLaunchKernel(
          fn, gridX, gridY, gridZ, blockX, blockY, blockZ, smem,
          static_cast<CUstream>(stream), params, extra))
    SEQC_FAIL_CUDA("cannot launch a CUDA kernel", r);
}

void *mgpuStreamCreate() {
  ready();
  void *stream = nullptr;
  endCallUnless([&](std::string &error) {
    stream = cudaThreadStream(error);
    return stream != nullptr;
  });
  return stream;
}

void mgpuStreamDestroy(void * /*stream*/) {}

void mgpuStreamSynchronize(void *stream) {
  const CudaApi &api = ready();
  if (CUresult r = api.cuStreamSynchronize(static_cast<CUstream>(stream)))
    SEQC_FAIL_CUDA("a CUDA kernel failed", r);
}

void mgpuStreamWaitEvent(void *stream, void *event) {
  const CudaApi &api = ready();
  if (CUresult r = api.cuStreamWaitEvent(static_cast<CUstream>(stream),
                                         static_cast<CUevent>(event), 0))
    SEQC_FAIL_CUDA("cannot wait for a CUDA event", r);
}

void *mgpuEventCreate() {
  const CudaApi &api = ready();
  CUevent event = nullptr;
  if (CUresult r = api.cuEventCreate(&event, /*CU_EVENT_DISABLE_TIMING=*/2))
    SEQC_FAIL_CUDA("cannot create a CUDA event", r);
  return event;
}

void mgpuEventDestroy(void *event) {
  if (event && cudaReady().empty())
    cudaApi().cuEventDestroy(static_cast<CUevent>(event));
}

void mgpuEventSynchronize(void *event) {
  const CudaApi &api = ready();
  if (CUresult r = api.cuEventSynchronize(static_cast<CUevent>(event)))
    SEQC_FAIL_CUDA("a CUDA kernel failed", r);
}

void mgpuEventRecord(void *event, void *stream) {
  const CudaApi &api = ready();
  if (CUresult r = api.cuEventRecord(static_cast<CUevent>(event),
                                     static_cast<CUstream>(stream)))
    SEQC_FAIL_CUDA("cannot record a CUDA event", r);
}

void *mgpuMemAlloc(uint64_t bytes, void * /*stream*/, bool /*isHostShared*/) {
  // Managed memory either way: the host part of a graph may touch it.
  void *ptr = nullptr;
  endCallUnless([&](std::string &error) {
    ptr = cudaManagedAlloc(bytes, error);
    return ptr != nullptr;
  });
  return ptr;
}

void mgpuMemFree(void *ptr, void * /*stream*/) { cudaManagedFree(ptr); }

void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream) {
  const CudaApi &api = ready();
  if (CUresult r = api.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                                     reinterpret_cast<CUdeviceptr>(src), bytes,
                                     static_cast<CUstream>(stream)))
    SEQC_FAIL_CUDA("a CUDA copy failed", r);
}

void mgpuMemset32(void *dst, unsigned value, size_t count, void *stream) {
  const CudaApi &api = ready();
  if (CUresult r =
          api.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                               static_cast<CUstream>(stream)))
    SEQC_FAIL_CUDA("a CUDA memset failed", r);
}

void mgpuMemset16(void *dst, int value, size_t count, void *stream) {
  const CudaApi &api = ready();
  if (CUresult r = api.cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst),
                                        static_cast<unsigned short>(value),
                                        count, static_cast<CUstream>(stream)))
    SEQC_FAIL_CUDA("a CUDA memset failed", r);
}

void mgpuSetDefaultDevice(int32_t device) {
  // The runtime picks the process's device itself (CudaDriver.h).
  if (device != 0)
    SEQC_FAIL_CALL("seqc picks the process's CUDA device itself "
                   "(SEQC_CUDA_DEVICE), not the code");
}

} // extern "C"
