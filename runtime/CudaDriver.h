//===- CudaDriver.h - the CUDA driver API, loaded on demand -----*- C++ -*-===//
//
// seqc never links libcuda: it opens libcuda.so.1 with dlopen the first time a
// CUDA entry point is needed, so every binary runs where there is no driver.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_RUNTIME_CUDADRIVER_H
#define SEQC_RUNTIME_CUDADRIVER_H

namespace seqc::rt {

/// The number of CUDA devices, or 0 when there is no driver or no device.
int cudaDeviceCount();

} // namespace seqc::rt

#endif // SEQC_RUNTIME_CUDADRIVER_H
