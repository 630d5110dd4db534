//===- ExpandBf16.cpp - host bf16 conversions without libcalls ------------===//

#include "seqc/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQEXPANDBF16
#include "passes/CPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {
struct SeqExpandBf16 : seqc::impl::SeqExpandBf16Base<SeqExpandBf16> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
