//===- CudaDriver.h - the CUDA driver API, loaded on demand -----*- C++ -*-===//
//
// seqc never links libcuda: it opens libcuda.so.1 with dlopen the first time a
// CUDA entry point is needed, so every binary runs where there is no driver.
// SEQC_LIBCUDA names another library to open instead (the toolkit's stub in
// tests of the error paths).
//
// Compiled code uses one device's primary context, made current on whichever
// host thread calls in: SEQC_CUDA_DEVICE's, else, in a process mpirun or srun
// started, that of its place among the node's processes (modulo the device
// count: one GPU per rank, as NCCL requires), else device 0. Managed (unified)
// memory backs every buffer a CUDA call allocates, so host code between kernels
// reads and writes the same buffers the kernels do.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_CUDADRIVER_H
#define SEQC_RUNTIME_CUDADRIVER_H

#include <cstddef>
#include <string>

namespace seqc::rt {

/// The number of CUDA devices, or 0 when there is no driver or no device.
int cudaDeviceCount();

/// Why CUDA cannot be used ("no CUDA device", "libcuda.so.1: ..."), or ""
/// when the process's device's context is ready on this thread.
std::string cudaReady();

/// This thread's stream, made on first use and kept (kernels and NCCL's
/// collectives run on it). Call with the context ready; null with `error`
/// set when the stream cannot be made.
void *cudaThreadStream(std::string &error);

/// The process's device's architecture as a compilation target: sm_90a for
/// compute capability 9.0 (Hopper's arch-specific features), sm_XY otherwise.
std::string cudaDeviceChip();

/// `bytes` of managed memory (null and `error` set on failure).
void *cudaManagedAlloc(size_t bytes, std::string &error);
void cudaManagedFree(void *ptr);
/// Whether `ptr` points into CUDA managed memory (which kernels can read
/// without a copy).
bool cudaIsManaged(const void *ptr);

/// The first failure of a module load on this thread (run from static
/// constructors of compiled code, outside any call) since the last time it
/// was taken.
std::string cudaTakeLoadError();
/// The last module-load failure of any thread (kept).
std::string cudaLastLoadError();

} // namespace seqc::rt

#endif // SEQC_RUNTIME_CUDADRIVER_H
