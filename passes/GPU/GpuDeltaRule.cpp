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
                if (form.outputUsed)
                  k.mstore(out[0], a.out, {bi, t, j, c});
              });
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
