//===- CpuDeltaRule.cpp - the delta rules on the CPU ----------------------===//
//
// seq.delta_rule and seq.generalized_delta_rule run their recurrence
// (Transforms/DeltaRecurrence.h) as `<family>_recurrent`: a task per
// (batch, value head) keeps the K x V state on its stack (16 KiB at
// K = V = 64, in L1) and per step
//
//   rows     the step's row coefficients q', k, alpha, a, b, vectorized
//            over K into a [5 x K] stack table (norms by vector sums)
//   columns  the state's columns in groups of kColumnVectors vectors, each
//            group both passes of the column update: the group's vectors
//            are independent sums, which keeps the FMA units busy
//
// The pattern is the targets' shared one (Transforms/DeltaRuleLowering.h);
// the chunked WY form is CPU/CpuChunked.cpp's, this file only says how a
// CPU task holds the recurrence's state.
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuChunked.h"
#include "CPU/CpuPatterns.h"
#include "CPU/Gemm.h"
#include "Transforms/DeltaRuleLowering.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace seqc;

namespace {

/// Column vectors one group of the update carries: each needs a sum, a
/// write and an output vector live across the row loop (12 of AVX2's 16
/// registers at 4).
constexpr int64_t kColumnVectors = 4;

/// The rows of the per-step coefficient table.
enum CoefficientRow { QueryRow, KeyRow, AlphaRow, ARow, BRow, NumRows };

class CpuDeltaRecurrence {
public:
  CpuDeltaRecurrence(const CpuTarget &target, const DeltaRecurrence &form)
      : target(target), form(form), lanes(target.vectorWidth), K(form.keyDim),
        V(form.valueDim) {}

  void emit(ImplicitLocOpBuilder &b, KernelBuilder &kb, Value batch) const {
    Value heads = kb.mdim(form.buffers[2], 2);
    emitParallelKernel(b, form.name + "_recurrent", kb.mul(batch, heads),
                       form.buffers,
                       [&](KernelBuilder &k, Value task, ValueRange in) {
                         emitTask(k, task, in);
                       });
  }

private:
  void emitTask(KernelBuilder &k, Value task, ValueRange in) const {
    DeltaArgs a = form.args(in);
    Value heads = k.mdim(a.value, 2);
    Value j = k.rems(task, heads), bi = k.divs(task, heads);
    Value h = form.queryHeadOf(k, a, j);
    Value S = k.stackBuffer({K, V});
    Value coeff = k.stackBuffer({NumRows, roundUp(K, lanes)});
    MatrixRef state{a.last, [&](Value r, Value c) {
                      return SmallVector<Value>{bi, j, r, c};
                    }};
    if (a.init)
      packRows(k, target,
               MatrixRef{a.init,
                         [&](Value r, Value c) {
                           return SmallVector<Value>{bi, j, r, c};
                         }},
               k.idx(K), V, S);
    else
      packRows(k, target, rowMajor(S), k.idx(K), V, S,
               [&](Value, Value) { return k.vconst(0.0, lanes); });
    Value nT = k.mdim(a.query, 1);
    k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
      prefetchStep(k, a, bi, recurrencePrefetchStep(k, t, nT), j, h);
      DeltaStep step = form.step(k, a, bi, t, j, [&](Value x) {
        return sumOfSquares(k, x, bi, t, h);
      });
      tabulateRows(k, a, step, bi, t, j, h, coeff);
      for (int64_t v0 = 0; v0 < V; v0 += kColumnVectors * lanes)
        updateColumns(k, a, step, coeff, S, bi, t, j, v0);
    });
    packRows(k, target, rowMajor(S), k.idx(K), V, state);
  }

  /// The rows step t reads (and the output row it writes).
  void prefetchStep(KernelBuilder &k, const DeltaArgs &a, Value bi, Value t,
                    Value j, Value h) const {
    for (Value m : {a.key, a.a, a.b})
      if (m)
        k.prefetchRow(m, {bi, t, h, k.idx(0)}, K);
    if (form.decay == DeltaRecurrence::Decay::PerKey)
      k.prefetchRow(a.decay, {bi, t, j, k.idx(0)}, K);
    k.prefetchRow(a.value, {bi, t, j, k.idx(0)}, V);
    if (!form.outputUsed)
      return;
    k.prefetchRow(a.query, {bi, t, h, k.idx(0)}, K);
    k.prefetchRow(a.out, {bi, t, j, k.idx(0)}, V, /*forWrite=*/true);
  }

  /// |x[bi, t, h, :]|^2 by vectors.
  Value sumOfSquares(KernelBuilder &k, Value x, Value bi, Value t,
                     Value h) const {
    Value sum = k.vconst(0.0, lanes);
    for (int64_t r0 = 0; r0 < K; r0 += lanes) {
      Value e = k.vloadMasked(x, {bi, t, h, k.idx(r0)}, lanes,
                              k.vmask(k.idx(K - r0), lanes));
      sum = k.vfma(e, e, sum);
    }
    return k.hsum(sum);
  }

  /// The step's row coefficients into `coeff` [NumRows x K].
  void tabulateRows(KernelBuilder &k, const DeltaArgs &a, const DeltaStep &step,
                    Value bi, Value t, Value j, Value h, Value coeff) const {
    for (int64_t r0 = 0; r0 < K; r0 += lanes) {
      Value mask = k.vmask(k.idx(K - r0), lanes);
      ChannelRun run{[&](Value m, ArrayRef<Value> at) {
                       return k.vloadMasked(m, at, lanes, mask);
                     },
                     [&](Value s) { return k.splat(s, lanes); }};
      DeltaRow row = form.row(k, run, a, step, bi, t, j, h, k.idx(r0));
      auto put = [&](CoefficientRow which, Value v) {
        if (v)
          k.vstore(v, coeff, {k.idx(which), k.idx(r0)});
      };
      put(QueryRow, row.query);
      put(KeyRow, row.key);
      if (form.decay == DeltaRecurrence::Decay::PerKey)
        put(AlphaRow, row.alpha); // scalar decays are step.alpha
      put(ARow, row.a);
      put(BRow, row.b);
    }
  }

  /// Both passes of the update over columns [v0, v0 + kColumnVectors
  /// lanes) of S, and their outputs when read (DeltaRecurrence::outputUsed).
  void updateColumns(KernelBuilder &k, const DeltaArgs &a,
                     const DeltaStep &step, Value coeff, Value S, Value bi,
                     Value t, Value j, int64_t v0) const {
    SmallVector<ColumnRun> runs;
    SmallVector<Value> masks;
    for (int64_t c0 = v0; c0 < std::min(V, v0 + kColumnVectors * lanes);
         c0 += lanes) {
      Value mask = c0 + lanes <= V ? Value() : k.vmask(k.idx(V - c0), lanes);
      Value col = k.idx(c0);
      masks.push_back(mask);
      auto load = [&k, mask, S, col, this](Value r) {
        return mask ? k.vloadMasked(S, {r, col}, lanes, mask)
                    : k.vload(S, {r, col}, lanes);
      };
      auto store = [&k, mask, S, col](Value r, Value s) {
        if (mask)
          k.vstoreMasked(s, S, {r, col}, mask);
        else
          k.vstore(s, S, {r, col});
      };
      Value value = k.vloadMasked(a.value, {bi, t, j, col}, lanes,
                                  k.vmask(k.idx(V - c0), lanes));
      runs.push_back(ColumnRun{load, store, value});
    }
    auto rows = [&](Value r) {
      auto at = [&](CoefficientRow which) {
        return k.mload(coeff, {k.idx(which), r});
      };
      DeltaRow row{form.outputUsed ? at(QueryRow) : Value(), at(KeyRow),
                   step.alpha, at(ARow), Value()};
      if (form.decay == DeltaRecurrence::Decay::PerKey)
        row.alpha = at(AlphaRow);
      if (form.generalized)
        row.b = at(BRow);
      return row;
    };
    SmallVector<Value> outs = form.emitColumnStep(
        k, runs, rows, [&](Value s) { return k.splat(s, lanes); }, step,
        k.idx(K));
    for (size_t i = 0; i < outs.size(); ++i) {
      int64_t c0 = v0 + i * lanes;
      k.vstoreMasked(outs[i], a.out, {bi, t, j, k.idx(c0)},
                     k.vmask(k.idx(V - c0), lanes));
    }
  }

  const CpuTarget &target;
  const DeltaRecurrence &form;
  const int64_t lanes, K, V;
};

/// The CPU's part of the delta rules' lowering
/// (Transforms/DeltaRuleLowering.h).
class CpuDeltaRuleTarget : public DeltaRuleTarget {
public:
  explicit CpuDeltaRuleTarget(const CpuTarget &target) : target(target) {}

  TargetDescription describe() const override { return target.describe(); }

  std::string declines(Operation *op) const override {
    if (!cpuTakesElementTypes(op))
      return cpuElementTypesReason;
    // The state and the row tables live on the task's stack.
    auto q = cast<RankedTensorType>(op->getOperand(0).getType());
    auto v = cast<RankedTensorType>(op->getOperand(2).getType());
    if (q.isDynamicDim(3) || v.isDynamicDim(3))
      return "needs static K and V";
    return "";
  }

  std::string cannotChunk(Operation *op) const override {
    // The chunked kernel's tasks are (batch, value head) pairs of static
    // heads.
    auto q = cast<RankedTensorType>(op->getOperand(0).getType());
    auto v = cast<RankedTensorType>(op->getOperand(2).getType());
    if (q.isDynamicDim(2) || v.isDynamicDim(2))
      return "the CPU's chunked delta rule needs static H and HV";
    return "";
  }

  void emitChunked(ImplicitLocOpBuilder &b, KernelBuilder &kb, Operation *,
                   const ChunkedForm &form, Value batch,
                   int64_t chunk) const override {
    emitCpuChunked(b, kb, target, form, batch, chunk);
  }

  void emitRecurrent(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                     const DeltaRecurrence &form, Value batch) const override {
    CpuDeltaRecurrence(target, form).emit(b, kb, batch);
  }

private:
  CpuTarget target;
};

} // namespace

void seqc::populateCpuDeltaRulePatterns(RewritePatternSet &patterns,
                                        const CpuTarget &target) {
  populateDeltaRulePatterns(patterns,
                            std::make_shared<CpuDeltaRuleTarget>(target));
}
