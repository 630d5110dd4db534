//===- CpuDeltaRule.cpp - the delta rules on the CPU ----------------------===//
//
// seq.delta_rule and seq.generalized_delta_rule run their recurrence
// (Transforms/DeltaRecurrence.h) as `<family>_recurrent`: a task per
// (batch, value head) keeps the K x V state on its stack (16 KiB at
// K = V = 64, in L1) and per step
//
//   rows     the step's row coefficients q', k, b (and c' with a decay)
//            and the next step's a, vectorized over K into a stack table
//            (norms by vector sums), the next step's key rows kept
//   columns  one pass over the state per block of column vectors (as many
//            as the register file holds: each carries a write, an output
//            sum and the next step's sum), the pass DeltaRecurrence
//            describes
//
// With a decay the task holds the state as diag(c) U (the deferred decay
// of DeltaRecurrence::deferDecay): the table then holds the coefficients
// for U, and a step multiplies U's rows only when it folds c into them.
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
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace seqc;

namespace {

/// The rows of the per-step coefficient table: the pass's coefficients
/// (DeltaRow), then what a task keeps from step to step.
enum CoefficientRow {
  QueryRow,
  KeyRow,
  AlphaRow,
  ARow,
  BRow,
  /// c of the deferred decay (S = c U).
  ScaleRow,
  /// The next step's key and decays (each norm and exp computed once).
  NextKeyRow,
  NextAlphaRow,
  NumRows
};

/// One (batch, value head) of the recurrence.
class DeltaTask {
public:
  DeltaTask(const CpuTarget &target, const DeltaRecurrence &form,
            KernelBuilder &k, Value task, ValueRange in)
      : target(target), form(form), k(k), a(form.args(in)),
        lanes(target.vectorWidth), K(form.keyDim), V(form.valueDim),
        defers(form.decays()) {
    Value heads = k.mdim(a.value, 2);
    j = k.rems(task, heads);
    bi = k.divs(task, heads);
    h = form.queryHeadOf(k, a, j);
    S = k.stackBuffer({K, V});
    coeff = k.stackBuffer({NumRows, roundUp(K, lanes)});
    sums = k.stackBuffer({roundUp(V, lanes)});
    keyMasks = rowMasks(k, K, lanes);
    valueMasks = rowMasks(k, V, lanes);
    blocks = columnBlocks(target, valueMasks.size(), registersPerVector(),
                          fixedRegisters());
  }

  void emit() {
    loadState();
    nT = k.mdim(a.query, 1);
    k.ifThen(k.cmp(arith::CmpIPredicate::sgt, nT, k.idx(0)), [&] {
      firstSums();
      k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) { step(t); });
    });
    storeState();
  }

private:
  /// Registers a column vector holds across a pass over the rows: its
  /// write, output sum (when read), next step's sum and, for the
  /// low-rank term, this step's sum.
  int64_t registersPerVector() const {
    return 2 + (form.outputUsed ? 1 : 0) + (form.generalized ? 1 : 0);
  }
  /// Beside them: the row's broadcasts (k, a, q', b and, in a pass that
  /// multiplies the rows, c') and the state vector in flight. Both passes
  /// take the blocks of the one that multiplies: on a Zen 3 (AVX2, V = 64)
  /// the delta rule's passes without c' in two blocks of four column
  /// vectors (16 registers) ran 1.07x slower than in three of at most three.
  int64_t fixedRegisters() const {
    return 3 + (form.outputUsed ? 1 : 0) + (defers ? 1 : 0) +
           (form.generalized ? 1 : 0);
  }

  /// S from init (or zeros); c = 1.
  void loadState() {
    if (a.init)
      packRows(k, target, stateRef(a.init), k.idx(K), V, S);
    else
      packRows(k, target, rowMajor(S), k.idx(K), V, S,
               [&](Value, Value) { return k.vconst(0.0, lanes); });
    if (defers)
      for (size_t v = 0; v < keyMasks.size(); ++v)
        setTableRow(ScaleRow, v, k.vconst(1.0, lanes));
  }

  /// last = c U.
  void storeState() {
    packRows(k, target, rowMajor(S), k.idx(K), V, stateRef(a.last),
             [&](Value v, Value r) {
               if (!defers)
                 return v;
               return k.fmul(
                   v, k.splat(k.mload(coeff, {k.idx(ScaleRow), r}), lanes));
             });
  }

  MatrixRef stateRef(Value m) {
    return MatrixRef{m, [this](Value r, Value c) {
                       return SmallVector<Value>{bi, j, r, c};
                     }};
  }

  /// The target's |x[bi, t, h, :]|^2, by vectors.
  std::function<Value(Value)> sumsOfSquares(Value t) {
    return [this, t](Value x) {
      Value sum = k.vconst(0.0, lanes);
      for (auto [i, mask] : llvm::enumerate(keyMasks)) {
        Value e = k.vloadMasked(x, {bi, t, h, k.idx(i * lanes)}, lanes, mask);
        sum = k.vfma(e, e, sum);
      }
      return k.hsum(sum);
    };
  }

  /// Key rows [vector * lanes, ...) as a run of one vector.
  ChannelRun vectorRun(size_t vector) {
    Value mask = keyMasks[vector];
    return ChannelRun{[this, mask](Value m, ArrayRef<Value> at) {
                        return k.vloadMasked(m, at, lanes, mask);
                      },
                      [this](Value s) { return k.splat(s, lanes); }};
  }
  DeltaRow keyRowsAt(const DeltaStep &step, Value t, size_t vector) {
    return form.keyRows(k, vectorRun(vector), a, step, bi, t, j, h,
                        k.idx(vector * lanes));
  }
  DeltaRow updateRowsAt(const DeltaStep &step, Value t, size_t vector) {
    return form.updateRows(k, vectorRun(vector), a, step, bi, t, h,
                           k.idx(vector * lanes));
  }

  Value tableRow(CoefficientRow which, size_t vector) {
    return k.vload(coeff, {k.idx(which), k.idx(vector * lanes)}, lanes);
  }
  void setTableRow(CoefficientRow which, size_t vector, Value v) {
    if (v)
      k.vstore(v, coeff, {k.idx(which), k.idx(vector * lanes)});
  }
  /// A row's coefficients for the pass but alpha (scales writes c').
  void setTable(const DeltaRow &row, size_t vector) {
    setTableRow(QueryRow, vector, row.query);
    setTableRow(KeyRow, vector, row.key);
    setTableRow(ARow, vector, row.a);
    setTableRow(BRow, vector, row.b);
  }
  /// A step's key and decay rows, kept for its update.
  void keepKeyRows(const DeltaRow &row, size_t vector) {
    setTableRow(NextKeyRow, vector, row.key);
    if (defers)
      setTableRow(NextAlphaRow, vector, row.alpha);
  }

  /// p_0, the first step's sums, into `sums`; its key rows kept.
  void firstSums() {
    Value t = k.idx(0);
    DeltaStep first = form.keyScalars(k, a, bi, t, j, sumsOfSquares(t));
    for (size_t v = 0; v < keyMasks.size(); ++v) {
      DeltaRow row = keyRowsAt(first, t, v);
      setTableRow(ARow, v, row.a);
      keepKeyRows(row, v);
    }
    for (size_t i = 0; i + 1 < blocks.size(); ++i) {
      SmallVector<Value> p = form.emitColumnSums(
          k, columnRuns(t, i),
          [&](Value r) {
            return k.mload(coeff, {k.idx(ARow), r});
          },
          [&](Value s) { return k.splat(s, lanes); }, k.idx(K));
      storeSums(i, p);
    }
  }

  void step(Value t) {
    prefetchStep(recurrencePrefetchStep(k, t, nT));
    Value tNext = k.mins(k.add(t, k.idx(1)), k.sub(nT, k.idx(1)));
    DeltaStep now = form.updateScalars(k, a, bi, t, j, sumsOfSquares(t));
    DeltaStep next = form.keyScalars(k, a, bi, tNext, j, sumsOfSquares(tNext));
    Value fold = tabulate(now, t, next, tNext);
    auto passOf = [&](bool multiply) {
      return [&, multiply] {
        pass(now, t, multiply);
        return SmallVector<Value>{};
      };
    };
    if (fold)
      k.ifElse(fold, {}, passOf(true), passOf(false));
    else
      passOf(false)();
  }

  /// The step's coefficients into the table, vectorized over K: step t's
  /// q', k and b, step tNext's a (its key rows kept for its update: each
  /// key's norm and exps are computed once). A deferring task takes them
  /// for U (DeltaRecurrence::deferDecay) and returns whether the step
  /// folds; otherwise null.
  Value tabulate(const DeltaStep &now, Value t, const DeltaStep &next,
                 Value tNext) {
    Value fold = defers ? scales() : Value();
    for (size_t v = 0; v < keyMasks.size(); ++v) {
      DeltaRow row = updateRowsAt(now, t, v);
      DeltaRow following = keyRowsAt(next, tNext, v);
      row.key = tableRow(NextKeyRow, v);
      row.a = following.a;
      keepKeyRows(following, v);
      if (defers) {
        Value scale = tableRow(AlphaRow, v);
        row = form.deferDecay(k, row, scale, fold);
        setTableRow(ScaleRow, v, k.select(fold, k.vconst(1.0, lanes), scale));
      }
      setTable(row, v);
    }
    return fold;
  }

  /// c' = c alpha of each row into the table's alpha row; returns whether
  /// the step folds (some c' out of range).
  Value scales() {
    if (keyMasks.empty()) // K = 0: no rows to fold
      return k.i1(false);
    Value outOfRange;
    for (size_t v = 0; v < keyMasks.size(); ++v) {
      Value scale = k.fmul(tableRow(ScaleRow, v), tableRow(NextAlphaRow, v));
      setTableRow(AlphaRow, v, scale);
      Value out = deferredScaleOutOfRange(k, scale);
      outOfRange = outOfRange ? k.ori(outOfRange, out) : out;
    }
    return vector::ReductionOp::create(k.builder(), vector::CombiningKind::OR,
                                       outOfRange);
  }

  /// Step t's pass over U, block by block: each row is first multiplied
  /// by its c' when `multiply` (a step that folds c).
  void pass(const DeltaStep &now, Value t, bool multiply) {
    auto rows = [&](Value r) {
      auto at = [&](CoefficientRow which) {
        return k.mload(coeff, {k.idx(which), r});
      };
      DeltaRow row;
      if (form.outputUsed)
        row.query = at(QueryRow);
      row.key = at(KeyRow);
      if (multiply)
        row.alpha = at(AlphaRow);
      row.a = at(ARow);
      if (form.generalized)
        row.b = at(BRow);
      return row;
    };
    for (size_t i = 0; i + 1 < blocks.size(); ++i) {
      SmallVector<Value> p;
      for (size_t v = blocks[i]; v < blocks[i + 1]; ++v)
        p.push_back(k.vload(sums, {k.idx(v * lanes)}, lanes));
      ColumnStep done = form.emitColumnStep(
          k, columnRuns(t, i), p, rows,
          [&](Value s) { return k.splat(s, lanes); }, now, k.idx(K));
      storeSums(i, done.sums);
      for (auto [n, o] : llvm::enumerate(done.outputs)) {
        size_t v = blocks[i] + n;
        k.vstoreMasked(o, a.out, {bi, t, j, k.idx(v * lanes)}, valueMasks[v]);
      }
    }
  }

  /// The column vectors of block i as runs of U, with step t's values.
  SmallVector<ColumnRun> columnRuns(Value t, size_t i) {
    SmallVector<ColumnRun> runs;
    for (size_t v = blocks[i]; v < blocks[i + 1]; ++v) {
      Value mask = valueMasks[v], col = k.idx(v * lanes);
      bool whole = static_cast<int64_t>(v + 1) * lanes <= V;
      auto load = [this, whole, mask, col](Value r) {
        return whole ? k.vload(S, {r, col}, lanes)
                     : k.vloadMasked(S, {r, col}, lanes, mask);
      };
      auto store = [this, whole, mask, col](Value r, Value s) {
        if (whole)
          k.vstore(s, S, {r, col});
        else
          k.vstoreMasked(s, S, {r, col}, mask);
      };
      Value value = k.vloadMasked(a.value, {bi, t, j, col}, lanes, mask);
      runs.push_back(ColumnRun{load, store, value});
    }
    return runs;
  }

  void storeSums(size_t i, ArrayRef<Value> p) {
    for (auto [n, sum] : llvm::enumerate(p))
      k.vstore(sum, sums, {k.idx((blocks[i] + n) * lanes)});
  }

  /// The rows step t reads (and the output row it writes).
  void prefetchStep(Value t) {
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

  const CpuTarget &target;
  const DeltaRecurrence &form;
  KernelBuilder &k;
  DeltaArgs a;
  const int64_t lanes, K, V;
  /// Whether the task holds S as c U (a decay to defer).
  const bool defers;
  Value j, bi, h, nT, S, coeff, sums;
  SmallVector<Value> keyMasks, valueMasks;
  SmallVector<size_t> blocks;
};

class CpuDeltaRecurrence {
public:
  CpuDeltaRecurrence(const CpuTarget &target, const DeltaRecurrence &form)
      : target(target), form(form) {}

  void emit(ImplicitLocOpBuilder &b, KernelBuilder &kb, Value batch) const {
    Value heads = kb.mdim(form.buffers[2], 2);
    emitParallelKernel(b, form.name + "_recurrent", kb.mul(batch, heads),
                       form.buffers,
                       [&](KernelBuilder &k, Value task, ValueRange in) {
                         DeltaTask(target, form, k, task, in).emit();
                       });
  }

private:
  const CpuTarget &target;
  const DeltaRecurrence &form;
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
