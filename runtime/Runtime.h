/*===- Runtime.h - what compiled seqc code calls at run time ------*- C -*-===*\
|*                                                                            *|
|* The entry points generated code calls (run-time check failures, tracked   *|
|* allocations) and the host-side call scope that catches their errors.       *|
|* No MLIR or LLVM here: AOT objects link against this library alone.         *|
\*===----------------------------------------------------------------------===*/

#ifndef SEQC_RUNTIME_RUNTIME_H
#define SEQC_RUNTIME_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called by generated code when a run-time check fails: formats `fmt` with
 * `{0}`..`{3}` replaced by `a0`..`a3` (the first `nargs` are used), records it
 * in the running call and unwinds to the call's entry. Without a running call
 * it prints the message and aborts. */
void seqc_rt_check_failed(const char *fmt, int64_t nargs, int64_t a0,
                          int64_t a1, int64_t a2, int64_t a3);

/* The allocation entry points of MLIR's memref-to-LLVM lowering
 * (use-generic-functions). Inside a call they are tracked, so whatever the
 * call leaves allocated is released when it ends, and a request over the
 * memory limit fails the call with an error instead of the process. */
void *_mlir_memref_to_llvm_alloc(size_t size);
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size);
void _mlir_memref_to_llvm_free(void *ptr);

/* f32 -> bf16, round to nearest even (compiler-rt's __truncsfbf2). LLVM
 * calls it for bf16 values it must round on hosts without AVX-512 BF16 (a
 * select of bf16 values, say), and GCC 12's libgcc does not have it. The
 * bf16 comes back in the low 16 bits of the result register, as the x86-64
 * ABI returns __bf16; the JIT binds __truncsfbf2 to it, and the runtime
 * archive defines a weak __truncsfbf2 for ahead-of-time objects. */
float seqc_rt_truncsfbf2(float value);

/* The thread pool. `fn(ctx, begin, end)` is called on disjoint ranges that
 * cover [0, count), on the pool's threads and the caller's; the call returns
 * when all are done. Thread count: SEQC_NUM_THREADS, else the hardware's. */
typedef void (*seqc_rt_task_fn)(void *ctx, int64_t begin, int64_t end);
void seqc_rt_parallel_for(int64_t count, seqc_rt_task_fn fn, void *ctx);
int64_t seqc_rt_get_num_threads(void);
void seqc_rt_set_num_threads(int64_t n);
/* The threads a parallel_for issued by the calling thread would run on: the
 * pool's, or 1 inside a task of the pool (nested loops run serially).
 * Compiled kernels size their task split from it. */
int64_t seqc_rt_parallel_width(void);

/* Profile regions of a profiled build (seq-profile-calls): the time between
 * enter and exit of region `id` is added to the running call's profile when
 * the host asked for one; otherwise they do nothing. */
void seqc_rt_profile_enter(int64_t region);
void seqc_rt_profile_exit(int64_t region);

/* The CUDA entry points of MLIR's GPU-to-LLVM translation (upstream's CUDA
 * runtime wrappers' interface), over the dlopen'd driver (CudaRuntime.cpp).
 * Failures inside a call end the call with an error. */
void *mgpuModuleLoad(void *data, size_t size);
void *mgpuModuleLoadJIT(void *data, int optLevel);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);
void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t paramsCount);
void *mgpuStreamCreate(void);
void mgpuStreamDestroy(void *stream);
void mgpuStreamSynchronize(void *stream);
void mgpuStreamWaitEvent(void *stream, void *event);
void *mgpuEventCreate(void);
void mgpuEventDestroy(void *event);
void mgpuEventSynchronize(void *event);
void mgpuEventRecord(void *event, void *stream);
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool isHostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream);
void mgpuMemset32(void *dst, unsigned value, size_t count, void *stream);
void mgpuMemset16(void *dst, int value, size_t count, void *stream);
void mgpuSetDefaultDevice(int32_t device);

/* The all-gather of distributed code for the CPU (seq-collectives-to-mpi),
 * on the ranks of MPI communicator `mpi` (the module's): `bytes` from each
 * rank's `send`, rank r's at `recv + r bytes` on every rank (Mpi.cpp). A
 * failure ends the call with an error. */
void seqc_rt_mpi_all_gather(void *mpi, const void *send, void *recv,
                            int64_t bytes);

/* The collectives of distributed code for the CUDA target
 * (seq-collectives-to-nccl), on the ranks of MPI communicator `mpi` (the
 * module's): an all-reduce of `count` elements (`element`, `op`: the codes
 * of EntryPoints.h) from `send` into `recv`, an all-gather of `bytes` from
 * each rank (as seqc_rt_mpi_all_gather), and `bytes` sent to or received
 * from rank `peer`. On NCCL over device buffers (Nccl.cpp); the _emulated_
 * ones, for the emulated target's host buffers, on MPI. A failure ends the
 * call with an error. */
void seqc_rt_nccl_all_reduce(void *mpi, const void *send, void *recv,
                             int64_t count, int32_t element, int32_t op);
void seqc_rt_nccl_all_gather(void *mpi, const void *send, void *recv,
                             int64_t bytes);
void seqc_rt_nccl_send(void *mpi, const void *data, int64_t bytes,
                       int32_t peer);
void seqc_rt_nccl_recv(void *mpi, void *data, int64_t bytes, int32_t peer);
void seqc_rt_nccl_emulated_all_reduce(void *mpi, const void *send, void *recv,
                                      int64_t count, int32_t element,
                                      int32_t op);
void seqc_rt_nccl_emulated_all_gather(void *mpi, const void *send, void *recv,
                                      int64_t bytes);
void seqc_rt_nccl_emulated_send(void *mpi, const void *data, int64_t bytes,
                                int32_t peer);
void seqc_rt_nccl_emulated_recv(void *mpi, void *data, int64_t bytes,
                                int32_t peer);

/* Strided copy between two unranked memref descriptors (the signature of
 * MLIR's memref-to-LLVM lowering of memref.copy). */
struct UnrankedMemRef;
void memrefCopy(int64_t elementSize, struct UnrankedMemRef *src,
                struct UnrankedMemRef *dst);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SEQC_RUNTIME_RUNTIME_H */
