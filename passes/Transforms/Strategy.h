//===- Strategy.h - one plan per op, chosen once for every target -*- C++
//-*-===//
//
// How seq.ssd, seq.linear_attention and seq.delta_rule are computed (recurrent,
// chunked with chunk size Q, or global) is decided here, by one cost model over
// one description of the machine. seq-select-strategy records the decision as
// `seq.plan = #seq.plan<...>` on each op; the CPU and GPU lowerings read it
// (followPlan) and supply only what differs per target: the kernels and the
// chunk sizes their tiles allow (TargetDescription::chunkLimits).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_STRATEGY_H
#define SEQC_PASSES_TRANSFORMS_STRATEGY_H

#include "Seq/SeqDialect.h"

#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace seqc {

/// The op families with a choice of plans.
enum class ChunkedFamily { Ssd, LinearAttention, DeltaRule };

/// The chunk sizes a target's kernels run for one family: from `min` to
/// `max` steps, multiples of `multiple`.
struct ChunkLimits {
  int64_t min = 1;
  int64_t max = 256;
  int64_t multiple = 1;

  bool allows(int64_t q) const {
    return q >= min && q <= max && q % multiple == 0;
  }
};

/// One machine as the strategy sees it. Each target describes itself
/// (CpuTarget::describe, GpuTarget::describe); the cost model reads nothing
/// else.
struct TargetDescription {
  enum class Kind { CPU, GPU };
  Kind kind = Kind::CPU;

  /// CPU: f32 lanes per vector, per-core data caches, bf16 features. (Not
  /// the cores: kernels split their work by the threads they run on, read
  /// at run time.)
  int64_t vectorWidth = 8;
  int64_t l1Bytes = 32 * 1024;
  int64_t l2Bytes = 1024 * 1024;
  bool avx512bf16 = false;
  bool amx = false;

  /// GPU: compute capability, shared memory per block, SMs (0: unknown),
  /// and whether bf16/f16 products run on tensor cores (mma.sync m16n8k16).
  int64_t smVersion = 0;
  int64_t sharedBytes = 48 * 1024;
  int64_t smCount = 0;
  bool tensorCores = false;

  /// Cost of a step's state work (decaying and writing the N x D state,
  /// the chunk-state products) relative to its share of the intra-chunk
  /// product, per chunk: the `c` of the chunk-size model (chunkFor).
  double stateCost = 16;

  /// The chunk sizes of each family's chunked kernels.
  ChunkLimits ssdChunks, linearAttentionChunks, deltaRuleChunks;
  /// Whether the chunked phases cover a per-key decay (linear attention's
  /// decay [B, T, H, K]); where not, the recurrence runs.
  bool chunkedPerKeyDecay = true;
  /// Whether the target has the delta rule's chunked form (the WY
  /// transform's triangular solve per chunk); where not, the recurrence
  /// runs. No target chunks a per-key delta-rule decay (KDA) yet.
  bool chunkedDeltaRule = false;
  /// The largest state (bytes of f32) whose recurrence outruns the
  /// chunked form (0: none). The CPU's recurrent kernels keep the state in
  /// L1 (half of it, the rest for the step's operands) and do a step's
  /// useful work per element, where chunks of linear attention do 1.5x it
  /// at K = V = 64 (the Q x Q products), and the delta rule's WY form more
  /// (bench/seqc-bench --only chunk). A GPU's recurrence is serial over
  /// the steps: none.
  int64_t recurrentStateBytes() const {
    return kind == Kind::CPU ? l1Bytes / 2 : 0;
  }

  /// A CPU with `vectorWidth` f32 lanes and the given caches.
  static TargetDescription cpu(int64_t vectorWidth, int64_t l1Bytes,
                               int64_t l2Bytes);
  /// The host CPU: vector width from its features (AVX-512: 16, AVX2: 8,
  /// else 4), cache sizes, AVX-512 BF16 and AMX.
  static TargetDescription host();
  /// An NVIDIA GPU of compute capability `smVersion` (80 for sm_80).
  static TargetDescription gpu(int64_t smVersion);

  llvm::StringRef name() const { return kind == Kind::CPU ? "CPU" : "GPU"; }
  const ChunkLimits &chunkLimits(ChunkedFamily family) const {
    switch (family) {
    case ChunkedFamily::Ssd:
      return ssdChunks;
    case ChunkedFamily::LinearAttention:
      return linearAttentionChunks;
    case ChunkedFamily::DeltaRule:
      return deltaRuleChunks;
    }
    return ssdChunks;
  }
};

/// The compute capability of a chip name "sm_<digits>[a]" (sm_90a: 90), or
/// nothing for anything else.
std::optional<int64_t> parseChip(llvm::StringRef chip);
/// parseChip, or an error at `loc` naming the chip.
mlir::FailureOr<int64_t> chipVersion(mlir::Location loc, llvm::StringRef chip);

/// Sequences shorter than this run the recurrence: below one minimal chunk
/// (16 steps, a tensor-core tile's rows) the chunk machinery only pads.
inline constexpr int64_t kRecurrentBelowSteps = 16;

/// The cost model's plan for `op` on `target`, ignoring any seq.plan it
/// has; none for ops without a choice of plans. A `chunk_size` hint is
/// honoured when the target's kernels allow it, else the nearest allowed
/// size is taken and a remark says so.
std::optional<seq::PlanAttr> choosePlan(mlir::Operation *op,
                                        const TargetDescription &target);

/// The cost model's chunk size on the host CPU for `family` with a state of
/// stateDim x valueDim without a hint, or 0 where it takes the recurrence
/// (for the benchmark's report; linear attention without a normalizer or
/// bonus, a scalar decay).
int64_t hostModelChunkSize(ChunkedFamily family, int64_t stateDim,
                           int64_t valueDim);

/// The plan a lowering for `target` follows: `op`'s seq.plan, else
/// choosePlan's. When the target's kernels cannot run it (a chunk size
/// outside their limits, a variant without a chunked kernel), a match
/// failure naming why, which the fallback report quotes.
mlir::FailureOr<seq::PlanAttr> followPlan(mlir::Operation *op,
                                          const TargetDescription &target,
                                          mlir::PatternRewriter &rewriter);

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_STRATEGY_H
