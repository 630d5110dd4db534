//===- DeltaRuleLowering.cpp - the delta rules, lowered once per target ---===//

#include "Transforms/DeltaRuleLowering.h"

using namespace mlir;
using namespace seqc;

namespace {

template <typename OpTy> struct LowerDeltaRule : OpRewritePattern<OpTy> {
  LowerDeltaRule(MLIRContext *ctx,
                 std::shared_ptr<const DeltaRuleTarget> target)
      : OpRewritePattern<OpTy>(ctx, /*benefit=*/2), target(std::move(target)) {}

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (std::string why = target->declines(op); !why.empty())
      return rewriter.notifyMatchFailure(op, why);
    std::optional<int64_t> chunk = chunkOfPlan(op, rewriter);
    if (!chunk)
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    if (*chunk > 0) {
      ChunkedForm form = *ChunkedForm::describe(op, b, dims);
      target->emitChunked(b, kb, op, form, dims["B"], *chunk);
      rewriter.replaceOp(op, form.results(b));
      return success();
    }
    DeltaRecurrence form = *DeltaRecurrence::describe(op, b, dims);
    target->emitRecurrent(b, kb, form, dims["B"]);
    rewriter.replaceOp(op, form.results(b));
    return success();
  }

  /// The plan's chunk size, 0 for the recurrence (the generalized rule has
  /// no chunked form, hence no plan); none when the plan cannot be
  /// followed (a match failure says why).
  std::optional<int64_t> chunkOfPlan(OpTy op, PatternRewriter &rewriter) const {
    if constexpr (!std::is_same_v<OpTy, seq::DeltaRuleOp>)
      return 0;
    FailureOr<seq::PlanAttr> plan =
        followPlan(op, target->describe(), rewriter);
    if (failed(plan))
      return std::nullopt;
    if (plan->getKind() != seq::PlanKind::chunked)
      return 0;
    if (std::string why = target->cannotChunk(op); !why.empty()) {
      op.emitRemark() << why << ": the recurrence runs instead";
      return 0;
    }
    return plan->getChunk();
  }

  std::shared_ptr<const DeltaRuleTarget> target;
};

} // namespace

void seqc::populateDeltaRulePatterns(
    RewritePatternSet &patterns,
    std::shared_ptr<const DeltaRuleTarget> target) {
  patterns.add<LowerDeltaRule<seq::DeltaRuleOp>,
               LowerDeltaRule<seq::GeneralizedDeltaRuleOp>>(
      patterns.getContext(), target);
}
