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

/// A step's scalars, shared by its rows. Its key is read twice, by the
/// sums of the step before (a_r) and by its own update: what the key rows
/// need (keyScalars, keyRows) is computed for the step before, and a
/// target may keep it (the CPU the rows, the GPU the key's factor); the
/// rest only for the update (updateScalars, updateRows).
struct DeltaStep {
  /// q' = q * queryFactor (scale, over |q| with qk_l2norm); null when
  /// nothing reads o.
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
  /// Step t's scalars for value head j (query head h) that its key rows
  /// read: the key's factor (qk_l2norm; `keyFactor` when the target already
  /// has it) and a decay per head or step. `sumOfSquares(x)` is the
  /// target's |x[bi, t, h, :]|^2 over K.
  DeltaStep keyScalars(KernelBuilder &k, const DeltaArgs &a, Value bi, Value t,
                       Value j, const std::function<Value(Value)> &sumOfSquares,
                       Value keyFactor = {}) const;
  /// Step t's scalars that only its update reads: the query's factor (when
  /// o is read) and beta.
  DeltaStep
  updateScalars(KernelBuilder &k, const DeltaArgs &a, Value bi, Value t,
                Value j, const std::function<Value(Value)> &sumOfSquares) const;
  /// Rows [r, ...) of step t as keyScalars' `step` gives them, loaded
  /// through `run` (ChannelRun: scalars or vectors of rows): the key, alpha
  /// and a (step t's).
  DeltaRow keyRows(KernelBuilder &k, const ChannelRun &run, const DeltaArgs &a,
                   const DeltaStep &step, Value bi, Value t, Value j, Value h,
                   Value r) const;
  /// What only step t's update reads of rows [r, ...): q' and b.
  DeltaRow updateRows(KernelBuilder &k, const ChannelRun &run,
                      const DeltaArgs &a, const DeltaStep &step, Value bi,
                      Value t, Value h, Value r) const;
  /// The first step's sums p_0 of the columns `runs`, a pass over rows
  /// [0, K) with a(r) the first step's a_r as a scalar, broadcast(x) a
  /// scalar as a run.
  llvm::SmallVector<Value>
  emitColumnSums(KernelBuilder &k, llvm::ArrayRef<ColumnRun> runs,
                 const std::function<Value(Value)> &a,
                 const std::function<Value(Value)> &broadcast, Value K) const;
  /// One step of the columns `runs` from their sums p_t (`sums`): the pass
  /// over rows [0, K), rows(r) the coefficients of row r as scalars (`a` of
  /// step t + 1); `step` gives beta (updateScalars).
  ColumnStep emitColumnStep(KernelBuilder &k, llvm::ArrayRef<ColumnRun> runs,
                            mlir::ValueRange sums,
                            const std::function<DeltaRow(Value)> &rows,
                            const std::function<Value(Value)> &broadcast,
                            const DeltaStep &step, Value K) const;

  /// The deferred decay. A target may hold the state as diag(c) U, c a
  /// scale per row (1 at the start, S = c U at the end), so that a decay
  /// multiplies c alone: then a step's update of a state element is one
  /// FMA, where decaying S itself takes a multiply more (beside the FMAs
  /// of the output and the next sums). With c' = c alpha_r (`scale`), a
  /// step's coefficients for U are
  ///
  ///   deferred  U's rows as they are, k / c', b / c', q' c', a c';  c = c'
  ///   folded    U's rows times c',    k,      b,      q',    a;     c = 1
  ///
  /// (`a` being the next step's: p_{t+1} reads c' U). A step folds
  /// (`fold`, for all rows at once) when some c' is out of range
  /// (deferredScaleOutOfRange: where k / c' could overflow) or NaN. The
  /// row's alpha is c' for both: a deferred step's pass leaves it out.
  DeltaRow deferDecay(KernelBuilder &k, const DeltaRow &row, Value scale,
                      Value fold) const;
  /// Whether the op has a decay to defer.
  bool decays() const { return decay != Decay::None; }

private:
  int betaIndex = -1, aIndex = -1, bIndex = -1, decayIndex = -1, initIndex = -1;
  mlir::Type outType, lastType;
};

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_DELTARECURRENCE_H
