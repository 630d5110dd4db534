//===- CpuChunked.h - the chunked form on the CPU ---------------*- C++ -*-===//
//
// The CPU lowers the phases of the chunked form (Transforms/ChunkedForm.h)
// once, for every family: a task per (batch, head) runs the chunks in
// order with the K x V state and the chunk's tiles in stack buffers (in
// cache), every product a register-blocked emitGemm.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_CPU_CPUCHUNKED_H
#define SEQC_PASSES_CPU_CPUCHUNKED_H

#include "CPU/CpuKernel.h"
#include "Transforms/ChunkedForm.h"

namespace seqc {

/// Emits the chunked kernels of `form` over `batch` sequences with chunks
/// of `chunk` steps, at the builder's insertion point. The form must have
/// static heads and channels, be causal, and have at most a scalar decay
/// per step: the plans the strategy chooses for the CPU
/// (TargetDescription::cpu) guarantee it, the others run the recurrence.
void emitCpuChunked(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                    const CpuTarget &target, const ChunkedForm &form,
                    Value batch, int64_t chunk);

} // namespace seqc

#endif // SEQC_PASSES_CPU_CPUCHUNKED_H
