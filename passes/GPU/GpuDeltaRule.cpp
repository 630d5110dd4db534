//===- GpuDeltaRule.cpp - the delta rules on the GPU ----------------------===//
//
// seq.delta_rule and seq.generalized_delta_rule run their recurrence
// (Transforms/DeltaRecurrence.h) as `<family>_recurrent`, fla's
// fused-recurrent design: a block per (batch, value head), a thread per
// state column, which it owns for the whole sequence, so the steps need no
// barrier. The column (f32) lives in `last`, cached: every thread reads the
// step's q, k, a, b rows and the next step's k, a and decays (for the next
// step's sums, DeltaRecurrence.h), which all threads of the block share.
//
// This is the plan for decode, KDA's per-key decay and the generalized
// rule; a long delta rule with a scalar decay takes the chunked form
// (GPU/GpuChunked.cpp). The pattern is the targets' shared one
// (Transforms/DeltaRuleLowering.h).
//
//===----------------------------------------------------------------------===//

#include "Common/Kernels.h"
#include "GPU/GpuChunked.h"
#include "GPU/GpuPatterns.h"
#include "Transforms/DeltaRuleLowering.h"

using namespace mlir;
using namespace seqc;

namespace {

/// The steps of one state column (thread): step t's pass reads the rows
/// of step t and the next step's key rows for its a (the last step's pass
/// reads its own). The loop carries the next step's sums and, with
/// qk_l2norm, its key's factor (a key's norm, a sum over K, is computed for
/// the step before and kept; a row's decay is computed for both steps, as
/// it was for both passes).
void emitColumn(KernelBuilder &k, const DeltaRecurrence &form,
                const DeltaArgs &a, Value bi, Value j, Value h,
                ColumnRun &column, Value c) {
  Value K = k.mdim(a.query, 3), nT = k.mdim(a.query, 1);
  ChannelRun scalars{
      [&](Value m, ArrayRef<Value> at) { return k.mload(m, at); },
      [](Value s) { return s; }};
  auto identity = [](Value s) { return s; };
  auto sumsOfSquares = [&](Value t) {
    return [&, t](Value x) {
      return k.sumOver(K, [&](Value r) {
        Value e = k.mload(x, {bi, t, h, r});
        return k.fmul(e, e);
      });
    };
  };
  auto keyScalars = [&](Value t, Value keyFactor) {
    return form.keyScalars(k, a, bi, t, j, sumsOfSquares(t), keyFactor);
  };
  // (sums, key factor) as the loop carries them: a key factor exactly with
  // qk_l2norm (`types`).
  auto carried = [&](Value sum, const DeltaStep &keys) {
    SmallVector<Value> values{sum};
    if (keys.keyFactor)
      values.push_back(keys.keyFactor);
    return values;
  };
  SmallVector<Type> types(form.l2norm ? 2 : 1, k.f32Type());
  SmallVector<Value> first = k.ifElse(
      k.cmp(arith::CmpIPredicate::sgt, nT, k.idx(0)), types,
      [&] {
        Value t = k.idx(0);
        DeltaStep keys = keyScalars(t, Value());
        Value sum = form.emitColumnSums(
            k, {column},
            [&](Value r) {
              return form.keyRows(k, scalars, a, keys, bi, t, j, h, r).a;
            },
            identity, K)[0];
        return carried(sum, keys);
      },
      [&] { return SmallVector<Value>(types.size(), k.f32(0.0)); });
  k.loop(nT, first, [&](Value t, ValueRange state) {
    Value tNext = k.mins(k.add(t, k.idx(1)), k.sub(nT, k.idx(1)));
    DeltaStep keys = keyScalars(t, form.l2norm ? state[1] : Value());
    DeltaStep next = keyScalars(tNext, Value());
    DeltaStep now = form.updateScalars(k, a, bi, t, j, sumsOfSquares(t));
    column.value = k.mload(a.value, {bi, t, j, c});
    ColumnStep pass = form.emitColumnStep(
        k, {column}, state.take_front(1),
        [&](Value r) {
          DeltaRow row = form.updateRows(k, scalars, a, now, bi, t, h, r);
          DeltaRow key = form.keyRows(k, scalars, a, keys, bi, t, j, h, r);
          row.key = key.key;
          row.alpha = key.alpha;
          row.a = form.keyRows(k, scalars, a, next, bi, tNext, j, h, r).a;
          return row;
        },
        identity, now, K);
    if (form.outputUsed)
      k.mstore(pass.outputs[0], a.out, {bi, t, j, c});
    return carried(pass.sums[0], next);
  });
}

void emitDeltaRecurrent(ImplicitLocOpBuilder &b, const GpuTarget &target,
                        KernelBuilder &kb, const DeltaRecurrence &form,
                        Value batch) {
  // A warp-multiple of threads, one per column (more only idle).
  GpuTarget columns = target;
  if (!ShapedType::isDynamic(form.valueDim))
    columns.blockThreads = std::clamp<int64_t>(roundUp(form.valueDim, 32), 32,
                                               target.blockThreads);
  Value heads = kb.mdim(form.buffers[2], 2);
  emitGpuKernel(
      b, columns, form.name + "_recurrent", kb.mul(batch, heads), form.buffers,
      {}, [&](GpuBlock &blk, ValueRange in, ValueRange) {
        KernelBuilder &k = blk.kb;
        DeltaArgs a = form.args(in);
        Value nHeads = k.mdim(a.value, 2);
        Value j = k.rems(blk.blockId, nHeads);
        Value bi = k.divs(blk.blockId, nHeads);
        Value h = form.queryHeadOf(k, a, j);
        Value K = k.mdim(a.query, 3);
        blk.phase(
            k.mdim(a.value, 3),
            [&](Value c) {
              k.forEach(k.idx(0), K, k.idx(1), [&](Value r) {
                SmallVector<Value> at{bi, j, r, c};
                k.mstore(a.init ? k.mload(a.init, at) : k.f32(0.0), a.last, at);
              });
              ColumnRun column{[&](Value r) {
                                 return k.mload(a.last, {bi, j, r, c});
                               },
                               [&](Value r, Value s) {
                                 k.mstore(s, a.last, {bi, j, r, c});
                               },
                               Value()};
              emitColumn(k, form, a, bi, j, h, column, c);
            },
            /*barrier=*/false);
      });
}

/// The GPU's part of the delta rules' lowering
/// (Transforms/DeltaRuleLowering.h).
class GpuDeltaRuleTarget : public DeltaRuleTarget {
public:
  explicit GpuDeltaRuleTarget(const GpuTarget &target) : target(target) {}

  TargetDescription describe() const override { return target.describe(); }

  std::string declines(Operation *op) const override {
    return allFloat(op) ? "" : "needs float (f32, f16, bf16) operands";
  }

  void emitChunked(ImplicitLocOpBuilder &b, KernelBuilder &kb, Operation *op,
                   const ChunkedForm &form, Value,
                   int64_t chunk) const override {
    Type mmaType = target.tensorCoreType(op->getOperands().take_front(3),
                                         /*allowF16=*/false);
    emitGpuChunked(b, kb, target, form, mmaType, chunk);
  }

  void emitRecurrent(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                     const DeltaRecurrence &form, Value batch) const override {
    emitDeltaRecurrent(b, target, kb, form, batch);
  }

private:
  GpuTarget target;
};

} // namespace

void seqc::populateGpuDeltaRulePatterns(RewritePatternSet &patterns,
                                        const GpuTarget &target) {
  populateDeltaRulePatterns(patterns,
                            std::make_shared<GpuDeltaRuleTarget>(target));
}
