//===- GpuChunked.h - the chunked form on the GPU ---------------*- C++ -*-===//
//
// The GPU lowers the phases of the chunked form (Transforms/ChunkedForm.h)
// once, for every family, in three kernels (as mamba_ssm's and
// flash-linear-attention's Triton kernels split them):
//  1. `<family>_chunk_states`, a block per (batch, head, chunk): the
//     chunk's cumulative log decay cs (per step, or per step and key
//     channel) and weights w in shared memory, then the chunk's own state
//     S_c[k, v] = sum_s exp(cs[Q-1, k] - cs[s, k]) w[s] k'[s, k] v[s, v]
//     from staged (k', v) tiles;
//  2. `<family>_state_passing`, a thread per (batch, head, k, v): over the
//     chunks in order S_c becomes the state entering chunk c; the final
//     state is `last`;
//  3. `<family>_chunk_outputs`, a block per (batch, head, chunk):
//     M[t, s] = sum_k q'[t, k] w[s] k'[s, k] exp(cs[t, k] - cs[s, k])
//     (s <= t), then y[t] = (q'[t] o exp(cs[t])) S_in + M v, finished.
// A normalizer is one more value column of ones (z is S's column V), so
// with `normalize` the kernels carry V + 1 columns and the output divides by
// that column (+ eps). Non-causal forms use the same kernels without decay:
// every output reads the total state and there is no in-chunk term.
// With bf16 q, k and v on sm_80+, the chunk states, q' k'^T (scalar
// decays) and M v are tensor-core products over the shared tiles, their f32
// operands rounded to the inputs' type; (q' o exp(cs)) S_in keeps the f32
// states in f32 arithmetic. Every tile is static shared memory under
// 48 KiB: chunks of up to 64 steps with a scalar decay, 32 with a decay
// per key channel (of at most gpuChunkedMaxKeyDecay channels).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_GPU_GPUCHUNKED_H
#define SEQC_PASSES_GPU_GPUCHUNKED_H

#include "GPU/GpuKernel.h"
#include "Transforms/ChunkedForm.h"

namespace seqc {

/// The most key channels a per-key decay keeps in shared memory.
constexpr int64_t gpuChunkedMaxKeyDecay = 128;

/// Emits the three chunked kernels of `form` with chunks of `chunk` steps
/// (16 to 64, at most 32 with a per-key decay of a static K of at most
/// gpuChunkedMaxKeyDecay); products on tensor cores over `mmaType` (bf16)
/// when it is not null.
void emitGpuChunked(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                    const GpuTarget &target, const ChunkedForm &form,
                    mlir::Type mmaType, int64_t chunk);

} // namespace seqc

#endif // SEQC_PASSES_GPU_GPUCHUNKED_H
