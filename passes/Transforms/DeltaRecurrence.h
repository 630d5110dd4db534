//===- DeltaRecurrence.h - the delta rules' recurrence, described once -*-===//
//
// seq.delta_rule and seq.generalized_delta_rule update a K x V state per
// (batch, value head) by whole rows, reading it one column at a time, so
// both are one recurrence over runs of state columns. Step t:
//
//   p_t     = sum_r a_r S[r, :]                  (one value per column)
//   S[r, :] = alpha_r S[r, :] + k_r u + b_r p_t
//   o_t     = sum_r q'_r S[r, :]
//
//   family                 a_r          u                 b_r
//   delta_rule             alpha_r k_r  beta (v - p_t)    0    (p = S~^T k)
//   generalized_delta_rule a_r          v                 b_r  (p = a^T S)
//
// with q' and k the (L2-normed) query and key, q' scaled. A step reads the
// state once: its pass over the rows updates each row, adds it to o_t and,
// weighted by the next step's a_r, to p_{t+1} (the first step's p takes a
// pass of its own). A pass for p and another for the update read S twice,
// and the first one's sums, a chain per column, waited on the FMA latency.
//
// A family is described here once (its operands' roles, its step and row
// coefficients, the column update, the deferred decay); a target supplies
// how it holds the state and which columns one of its threads owns: a CPU
// task a few vectors of columns of a stack state, a GPU thread one column
// in global memory (CPU/CpuDeltaRule.cpp, GPU/GpuDeltaRule.cpp). The
// chunked form of the delta rule (ChunkedForm.h, CHUNKED.md) is the
// long-sequence plan where a target has it; this recurrence is the plan
// for decode, for per-key decays (KDA) and for the generalized rule.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_DELTARECURRENCE_H
#define SEQC_PASSES_TRANSFORMS_DELTARECURRENCE_H

#include "Common/KernelBuilder.h"
#include "Transforms/ChunkedForm.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>

namespace seqc {

/// A kernel's view of a delta-rule op's buffers by role; optional ones and
/// those of the other family are null.
struct DeltaArgs {
  Value query, key, value, out, last;
  Value beta; ///< delta_rule
  Value a, b; ///< generalized_delta_rule
  Value decay, init;
};

/// A step's scalars, shared by its rows.
struct DeltaStep {
  /// q' = q * queryFactor (scale, over |q| with qk_l2norm).
  Value queryFactor;
  /// k = k * keyFactor with qk_l2norm; null: the key as it is.
  Value keyFactor;
  /// The write strength beta_t (delta_rule).
  Value beta;
  /// exp(g_t) for a decay per head or step; null: none or per key.
  Value alpha;
};

/// One row's (or one run of rows') coefficients of a step.
struct DeltaRow {
  Value query, key;
  Value alpha; ///< the factor on S[r, :]; null: 1
  /// a_r of the sums the pass accumulates: in a step's pass, the next
  /// step's.
  Value a;
  Value b; ///< null: no low-rank term (delta_rule)
};

/// A run of state columns a target updates together (a vector of them on
/// the CPU, one on the GPU).
struct ColumnRun {
  std::function<Value(Value row)> loadState;
  std::function<void(Value row, Value s)> storeState;
  /// v_t of these columns.
  Value value;
};

/// What a step's pass leaves per run of columns.
struct ColumnStep {
  /// o_t (none when nothing reads it: DeltaRecurrence::outputUsed).
  llvm::SmallVector<Value> outputs;
  /// p_{t+1}, the next step's sums.
  llvm::SmallVector<Value> sums;
};

class DeltaRecurrence {
public:
  enum class Decay { None, PerHead, PerStep, PerKey };

  /// The recurrence of `op` (seq.delta_rule or seq.generalized_delta_rule):
  /// reads its operands' buffers and allocates its results' at `b`; none
  /// for other ops.
  static std::optional<DeltaRecurrence> describe(mlir::Operation *op,
                                                 mlir::ImplicitLocOpBuilder &b,
                                                 const DimSizes &dims);

  /// The kernels' name prefix ("delta_rule", "generalized_delta_rule").
  std::string name;
  bool generalized = false;
  /// Query/key heads and value heads (kDynamic when not static).
  int64_t queryHeads = 0, valueHeads = 0;
  int64_t keyDim = 0, valueDim = 0;
  Decay decay = Decay::None;
  bool l2norm = false;
  double scale = 1.0, eps = 0.0;
  /// Whether anything reads the output o. When nothing does (the state-only
  /// runs of seq-distribute-steps), a step updates the state alone.
  bool outputUsed = true;

  /// The kernels' arguments: q, k, v, out, last, then the family's
  /// operands that are present.
  llvm::SmallVector<Value> buffers;
  DeltaArgs args(ValueRange in) const;
  /// The op's results, from the out and last buffers.
  llvm::SmallVector<Value> results(mlir::ImplicitLocOpBuilder &b) const;

  /// The query/key head of value head j.
  Value queryHeadOf(KernelBuilder &k, const DeltaArgs &a, Value j) const;
  /// Step t's scalars for value head j (query head h); `sumOfSquares(x)`
  /// is the target's |x[bi, t, h, :]|^2 over K (for qk_l2norm).
  DeltaStep step(KernelBuilder &k, const DeltaArgs &a, Value bi, Value t,
                 Value j,
                 const std::function<Value(Value)> &sumOfSquares) const;
  /// The coefficients of rows [r, ...) of step t, loaded through `run`
  /// (ChannelRun: scalars or vectors of rows); `a` is step t's.
  DeltaRow row(KernelBuilder &k, const ChannelRun &run, const DeltaArgs &a,
               const DeltaStep &step, Value bi, Value t, Value j, Value h,
               Value r) const;
  /// The first step's sums p_0 of the columns `runs`, a pass over rows
  /// [0, K) with a(r) the first step's a_r as a scalar, broadcast(x) a
  /// scalar as a run.
  llvm::SmallVector<Value>
  emitColumnSums(KernelBuilder &k, llvm::ArrayRef<ColumnRun> runs,
                 const std::function<Value(Value)> &a,
                 const std::function<Value(Value)> &broadcast, Value K) const;
  /// One step of the columns `runs` from their sums p_t (`sums`): the pass
  /// over rows [0, K), rows(r) the coefficients of row r as scalars (`a` of
  /// step t + 1).
  ColumnStep emitColumnStep(KernelBuilder &k, llvm::ArrayRef<ColumnRun> runs,
                            mlir::ValueRange sums,
                            const std::function<DeltaRow(Value)> &rows,
                            const std::function<Value(Value)> &broadcast,
                            const DeltaStep &step, Value K) const;

  /// The deferred decay. A target may hold the state as diag(c) U, c a
  /// scale per row (1 at the start, S = c U at the end), so that a decay
  /// multiplies c alone: then each state element takes two FMAs a step
  /// (three with b), where decaying S itself takes a multiply more. With
  /// c' = c alpha_r (`scale`), a step's coefficients for U are
  ///
  ///   deferred  alpha null, k / c', b / c', q' c', a c'   and c becomes c'
  ///   folded    alpha c',   k,      b,      q',    a      and c becomes 1
  ///
  /// (`a` being the next step's: p_{t+1} reads c' U). A step folds
  /// (`fold`, for all rows at once) when some c' is out of range
  /// (scaleOutOfRange), where k / c' could overflow, or is NaN.
  DeltaRow deferDecay(KernelBuilder &k, const DeltaRow &row, Value scale,
                      Value fold) const;
  /// Whether c (scalars or a vector) is out of [2^-32, 2^32] or NaN.
  static Value scaleOutOfRange(KernelBuilder &k, Value c);
  /// Whether the op has a decay to defer.
  bool decays() const { return decay != Decay::None; }

private:
  int betaIndex = -1, aIndex = -1, bIndex = -1, decayIndex = -1, initIndex = -1;
  mlir::Type outType, lastType;
};

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_DELTARECURRENCE_H
