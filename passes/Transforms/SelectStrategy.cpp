//===- SelectStrategy.cpp - record each op's plan in the IR ---------------===//
//
// The mechanism only: the plan comes from the cost model (Strategy.cpp) over
// the target description this pass builds from its options.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Strategy.h"
#include "seqc/Passes.h"

namespace seqc {
#define GEN_PASS_DEF_SEQSELECTSTRATEGY
#include "passes/Transforms/Passes.h.inc"
} // namespace seqc

using namespace mlir;
using namespace seqc;

namespace {

struct SelectStrategy : seqc::impl::SeqSelectStrategyBase<SelectStrategy> {
  using SeqSelectStrategyBase::SeqSelectStrategyBase;

  FailureOr<TargetDescription> describeTarget() {
    if (target == "cpu") {
      TargetDescription t = TargetDescription::host();
      if (failed(checkCpuVectorWidth(getOperation(), "seq-select-strategy",
                                     vectorWidth)))
        return failure();
      if (vectorWidth > 0)
        t.vectorWidth = vectorWidth;
      if (l1Bytes > 0)
        t.l1Bytes = l1Bytes;
      if (l2Bytes > 0)
        t.l2Bytes = l2Bytes;
      return t;
    }
    if (target == "gpu") {
      FailureOr<int64_t> sm = chipVersion(getOperation().getLoc(), chip);
      if (failed(sm))
        return failure();
      return TargetDescription::gpu(*sm);
    }
    getOperation().emitError() << "seq-select-strategy: target '" << target
                               << "' is neither cpu nor gpu";
    return failure();
  }

  void runOnOperation() override {
    FailureOr<TargetDescription> description = describeTarget();
    if (failed(description))
      return signalPassFailure();
    getOperation().walk([&](Operation *op) {
      if (op->hasAttr(seq::kPlanAttrName))
        return;
      if (std::optional<seq::PlanAttr> plan = choosePlan(op, *description))
        op->setAttr(seq::kPlanAttrName, *plan);
    });
  }
};

} // namespace
