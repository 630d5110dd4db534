//===- ReferenceLowering.cpp - seq ops to explicit loops (the oracle) -----===//

#include "seqc/Passes.h"

#include "Seq/SeqDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQLOWERTOREFERENCE
#include "passes/Reference/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqLowerToReference
    : seqc::impl::SeqLowerToReferenceBase<SeqLowerToReference> {
  void runOnOperation() override {
    if (failed(
            seqc::checkLoweringInput(getOperation(), "seq-lower-to-reference")))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    seqc::populateReferenceScanPatterns(patterns);
    seqc::populateReferenceStateSpacePatterns(patterns);
    seqc::populateReferenceAttentionPatterns(patterns);
    seqc::populateReferenceDeltaRulePatterns(patterns);
    seqc::populateReferenceConvPatterns(patterns);
    seqc::populateReferenceMoEPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();

    // Every seq op but the run-time checks must be gone.
    WalkResult left = getOperation()->walk([](Operation *op) {
      if (isa<seqc::seq::SeqDialect>(op->getDialect()) &&
          !isa<seqc::seq_rt::CheckOp, seqc::seq_rt::ParallelForOp>(op)) {
        op->emitError() << "no reference lowering for this op";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
