//===- StridedCopies.cpp - strided memref.copy as vectorizable loops ------===//
//
// finalize-memref-to-llvm turns a memref.copy into llvm.memcpy only when both
// sides are contiguous with a static shape; any other copy becomes a call of
// the runtime's memrefCopy, one element at a time. The copies bufferization
// leaves between a kernel's result and a slice of a larger tensor are of that
// kind (seq-expand-sequences inserts every sequence's outputs into the packed
// result), and with dynamic sizes even contiguous ones are. As linalg.copy
// they become loops whose innermost dimension is unit-stride, which LLVM
// vectorizes.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQSTRIDEDCOPIESTOLOOPS
#include "passes/CPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {

/// Whether finalize-memref-to-llvm copies `type` with one memcpy.
bool copiesAsMemcpy(MemRefType type) {
  return type.hasStaticShape() && type.getLayout().isIdentity();
}

struct StridedCopyToLinalg : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &rewriter) const override {
    auto source = cast<MemRefType>(op.getSource().getType());
    auto target = cast<MemRefType>(op.getTarget().getType());
    if ((copiesAsMemcpy(source) && copiesAsMemcpy(target)) ||
        source.getRank() == 0)
      return rewriter.notifyMatchFailure(op, "a memcpy already");
    rewriter.replaceOpWithNewOp<linalg::CopyOp>(op, op.getSource(),
                                                op.getTarget());
    return success();
  }
};

struct SeqStridedCopiesToLoops
    : seqc::impl::SeqStridedCopiesToLoopsBase<SeqStridedCopiesToLoops> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<StridedCopyToLinalg>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
