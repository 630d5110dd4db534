//===- ChunkedForm.h - the one chunked form of the linear recurrences -*-===//
//
// SSD and linear attention are one linear recurrence per (batch, head):
//
//   S_t = exp(g_t) S_{t-1} + w_t k_t v_t^T        S: K x V
//   y_t = finish(q_t^T S_t)
//
// and both targets compute it by chunks of Q steps in the same phases
// (docs/architecture.md, ../shared/CHUNKED.md):
//
//   cs    = the chunk's cumulative log decay, cs_i = g_0 + ... + g_i
//   Y     = (L o q k^T o w) V                   L[i, j] = exp(cs_i - cs_j),
//                                                j <= i (intra-chunk)
//   Y    += (exp(cs) o q) S_in                  the earlier chunks
//   S_out = exp(cs_Q) S_in + (exp(cs_Q - cs) o w o k)^T V
//                                                chunk state, passed on
//   y     = finish(Y)
//
// A family is described here once: which operand plays q, k and v, its
// per-step log decay g and weight w, the feature maps of q and k, how an
// output row is finished, and how its state is laid out. Each target
// lowers the phases once for every family (CPU/CpuChunked.cpp,
// GPU/GpuChunked.cpp); adding a chunked family means adding a describe
// function here, not kernels.
//
//   family            q          k          v   g            w    finish
//   seq.ssd           C (group)  B (group)  x   dt A         dt   (y+Dx)silu(z)
//   linear_attention  phi(q) s   phi(k)     v   log decay    1    y / (q.z+eps)
//   delta_rule        q/|q| s    k/|k|      v*  log decay    1    y
//                     (group)    (group)
//
// The delta rule adds a transition inside the chunk (CHUNKED.md, the WY
// form): its values are, per chunk, v* = U0 - W S_in with
//
//   A     = strictly lower  beta_i exp(cs_i - cs_j) k_i . k_j
//   U0    = (I + A)^-1 diag(beta) V                forward substitution
//   W     = (I + A)^-1 diag(beta) (exp(cs) o K)
//
// after which every phase above is unchanged.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_CHUNKEDFORM_H
#define SEQC_PASSES_TRANSFORMS_CHUNKEDFORM_H

#include "Common/KernelBuilder.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <functional>

namespace seqc {

/// A kernel's view of a chunked op's buffers by role (ChunkedForm::args).
struct ChunkedArgs {
  Value query, key, value, out, last;
  /// The initial state, or null.
  Value init;
  /// The family's own operands in its slot order; null where absent.
  llvm::SmallVector<Value, 6> family;
};

/// How a target evaluates a family's elementwise functions on a run of
/// channels: one scalar (a GPU thread) or a vector of lanes (a CPU task).
struct ChannelRun {
  /// The run of channels of `memref` starting at indices `at`.
  std::function<Value(Value memref, llvm::ArrayRef<Value> at)> load;
  /// A scalar as a value of the run's shape.
  std::function<Value(Value scalar)> broadcast;
};

/// Step t's coefficients: its log decay g_t (null: no decay, or a per-key
/// decay read by ChunkedForm::keyLogDecay), its weight w_t (null: 1) and,
/// for the delta rule, its write strength beta_t.
struct StepCoefficients {
  Value logDecay, weight, writeStrength;
};

/// One chunked op in the chunked form.
class ChunkedForm {
public:
  enum class Decay {
    None,    ///< g = 0
    PerStep, ///< a scalar g_t (per head, or per batch, step and head)
    PerKey,  ///< g_t[k], one per key channel (GLA)
  };

  /// The form of `op` (seq.ssd, seq.linear_attention or seq.delta_rule):
  /// reads its operands' buffers and allocates its results' at `b`; null
  /// for other ops.
  static std::optional<ChunkedForm> describe(mlir::Operation *op,
                                             mlir::ImplicitLocOpBuilder &b,
                                             const DimSizes &dims);

  /// The kernels' name prefix ("ssd", "linear_attention").
  std::string name;
  /// Heads, and heads per group: q and k belong to group h / headsPerGroup
  /// (kDynamic when not static: the kernels divide H by G).
  int64_t heads = 0, headsPerGroup = 1;
  /// Key (state rows) and value (state columns) channels; kDynamic when
  /// not static.
  int64_t keyDim = 0, valueDim = 0;
  Decay decay = Decay::None;
  /// Whether steps carry a weight w_t (StepCoefficients::weight); else 1,
  /// and the kernels skip it.
  bool weighted = false;
  bool causal = true;
  /// Outputs divided by q'_t . z_t + eps, z_t = sum of the decayed k'.
  bool normalize = false;
  double eps = 0;
  /// Whether `last` and `init` are [B, H, V, K] (SSD's [B, H, P, N])
  /// rather than [B, H, K, V].
  bool stateValueMajor = false;
  /// The delta rule's transition: values become U0 - W S_in per chunk
  /// (StepCoefficients::writeStrength is beta_t).
  bool deltaTransition = false;
  /// Whether q and k rows are divided by sqrt(|row|^2 + rowEps) (over the
  /// key channels, after their maps), q' then scaled by queryScale.
  bool normalizeRows = false;
  double rowEps = 0, queryScale = 1;

  /// Whether anything reads the op's output. A run for its state alone
  /// (sequence parallelism's runs for a rank's own state and transition)
  /// needs only the state's phases: both targets then skip q and the
  /// output's (the CPU its intra, inter and finish phases and the shared
  /// scores kernel, the GPU its output kernel), leaving the output buffer
  /// unwritten.
  bool outputUsed = true;

  /// The kernels' arguments: q, k, v, out, last, then init and the family's
  /// operands when present.
  llvm::SmallVector<Value> buffers;
  /// A kernel's view of `buffers` (its block arguments `in`).
  ChunkedArgs args(ValueRange in) const;
  /// The op's results, from the out and last buffers.
  llvm::SmallVector<Value> results(mlir::ImplicitLocOpBuilder &b) const;

  /// The group of head h (the head itself without groups).
  Value groupOf(KernelBuilder &k, const ChunkedArgs &a, Value h) const;
  /// Indices of channel c of step t of q, k, v and out.
  llvm::SmallVector<Value> queryAt(KernelBuilder &k, const ChunkedArgs &a,
                                   Value bi, Value t, Value h, Value c) const;
  llvm::SmallVector<Value> keyAt(KernelBuilder &k, const ChunkedArgs &a,
                                 Value bi, Value t, Value h, Value c) const;
  llvm::SmallVector<Value> valueAt(Value bi, Value t, Value h, Value c) const;
  /// Indices of state element (kk, vv) of (bi, h) in `last` and `init`.
  llvm::SmallVector<Value> stateAt(Value bi, Value h, Value kk, Value vv) const;

  /// q' and k' from loaded q and k (scalars or vectors).
  Value mapQuery(KernelBuilder &k, Value q) const;
  Value mapKey(KernelBuilder &k, Value key) const;
  /// Step t's log decay (per step) and weight.
  StepCoefficients step(KernelBuilder &k, const ChunkedArgs &a, Value bi,
                        Value t, Value h) const;
  /// The log decay of key channel kk at step t (Decay::PerKey).
  Value keyLogDecay(KernelBuilder &k, const ChunkedArgs &a, Value bi, Value t,
                    Value h, Value kk) const;
  /// Whether rows need finishing (else the output is Y itself).
  bool hasFinish() const { return static_cast<bool>(finishFn); }
  /// The output of channels [vv, ...) of step t from their Y and v.
  Value finish(KernelBuilder &k, const ChannelRun &run, const ChunkedArgs &a,
               Value bi, Value t, Value h, Value vv, Value y, Value v) const;

private:
  using MapFn = std::function<Value(KernelBuilder &, Value)>;
  using StepFn = std::function<StepCoefficients(
      KernelBuilder &, const ChunkedArgs &, Value, Value, Value)>;
  using KeyDecayFn = std::function<Value(KernelBuilder &, const ChunkedArgs &,
                                         Value, Value, Value, Value)>;
  using FinishFn = std::function<Value(KernelBuilder &, const ChannelRun &,
                                       const ChunkedArgs &, Value, Value, Value,
                                       Value, Value, Value)>;

  static ChunkedForm ssd(mlir::Operation *op, mlir::ImplicitLocOpBuilder &b,
                         const DimSizes &dims);
  static ChunkedForm linearAttention(mlir::Operation *op,
                                     mlir::ImplicitLocOpBuilder &b,
                                     const DimSizes &dims);
  static ChunkedForm deltaRule(mlir::Operation *op,
                               mlir::ImplicitLocOpBuilder &b,
                               const DimSizes &dims);
  /// The fixed kernel arguments: the buffers of q, k, v (and init), and new
  /// ones for the results out (shaped as the signature's `outName`) and
  /// last.
  void setRoles(mlir::ImplicitLocOpBuilder &b, const DimSizes &dims,
                Value query, Value key, Value value, Value out,
                llvm::StringRef outName, Value last, Value init);
  /// Adds `buffer` to the kernels' arguments as family slot `slot`.
  void addFamilyOperand(unsigned slot, Value buffer);

  MapFn queryMap, keyMap;
  StepFn stepFn;
  KeyDecayFn keyDecayFn;
  FinishFn finishFn;
  /// Where each family slot is in `buffers` (-1: absent) and where init is.
  llvm::SmallVector<int, 6> familyIndex;
  int initIndex = -1;
  mlir::Type outType, lastType;
};

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_CHUNKEDFORM_H
