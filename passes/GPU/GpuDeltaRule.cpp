//===- GpuDeltaRule.cpp - the delta rules on the GPU ----------------------===//
//
// seq.delta_rule and seq.generalized_delta_rule run their recurrence
// (Transforms/DeltaRecurrence.h) as `<family>_recurrent`, fla's
// fused-recurrent design: a block per (batch, value head), a thread per
// state column, which it owns for the whole sequence, so the steps need no
// barrier. The column (f32) lives in `last`, cached: every thread reads the
// step's q, k, a, b rows, which all threads of the block share.
//
// This is the plan for decode, KDA's per-key decay and the generalized
// rule; a long delta rule with a scalar decay takes the chunked form
// (GPU/GpuChunked.cpp): W and U0 solved per chunk in shared memory, the
// chunks' states in order, the outputs as for linear attention.
//
//===----------------------------------------------------------------------===//

#include "Common/Kernels.h"
#include "GPU/GpuChunked.h"
#include "GPU/GpuPatterns.h"
#include "Transforms/DeltaRecurrence.h"

using namespace mlir;
using namespace seqc;

namespace {

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
        ChannelRun scalars{
            [&](Value m, ArrayRef<Value> at) { return k.mload(m, at); },
            [](Value s) { return s; }};
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
              k.forEach(k.idx(0), k.mdim(a.query, 1), k.idx(1), [&](Value t) {
                DeltaStep step = form.step(k, a, bi, t, j, [&](Value x) {
                  return k.sumOver(K, [&](Value r) {
                    Value e = k.mload(x, {bi, t, h, r});
                    return k.fmul(e, e);
                  });
                });
                column.value = k.mload(a.value, {bi, t, j, c});
                SmallVector<Value> out = form.emitColumnStep(
                    k, {column},
                    [&](Value r) {
                      return form.row(k, scalars, a, step, bi, t, j, h, r);
                    },
                    [](Value s) { return s; }, step, K);
                k.mstore(out[0], a.out, {bi, t, j, c});
              });
            },
            /*barrier=*/false);
      });
}

template <typename OpTy> struct GpuDeltaRule : OpRewritePattern<OpTy> {
  GpuDeltaRule(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern<OpTy>(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!allFloat(op))
      return rewriter.notifyMatchFailure(
          op, "needs float (f32, f16, bf16) operands");
    std::optional<seq::PlanAttr> chunked;
    if constexpr (std::is_same_v<OpTy, seq::DeltaRuleOp>) {
      FailureOr<seq::PlanAttr> plan =
          followPlan(op, target.describe(), rewriter);
      if (failed(plan))
        return failure();
      if (plan->getKind() == seq::PlanKind::chunked)
        chunked = *plan;
    }
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    if (chunked) {
      Type mmaType = target.tensorCoreType({op.getQ(), op.getK(), op.getV()},
                                           /*allowF16=*/false);
      ChunkedForm form = *ChunkedForm::describe(op, b, dims);
      emitGpuChunked(b, kb, target, form, mmaType, chunked->getChunk());
      rewriter.replaceOp(op, form.results(b));
      return success();
    }
    DeltaRecurrence form = *DeltaRecurrence::describe(op, b, dims);
    emitDeltaRecurrent(b, target, kb, form, dims["B"]);
    rewriter.replaceOp(op, form.results(b));
    return success();
  }

  GpuTarget target;
};

} // namespace

void seqc::populateGpuDeltaRulePatterns(RewritePatternSet &patterns,
                                        const GpuTarget &target) {
  patterns.add<GpuDeltaRule<seq::DeltaRuleOp>,
               GpuDeltaRule<seq::GeneralizedDeltaRuleOp>>(patterns.getContext(),
                                                          target);
}
