//===- RelaxExpandShape.cpp - expand_shape MLIR 22 cannot expand ----------===//
//
// expand-strided-metadata (MLIR 22) computes an expand_shape's sizes and
// strides assuming at most one dynamic size per reassociation group, and
// dereferences a null size when there are more (llvm-project #186830; LLVM 23
// reads output_shape instead). Such an expand_shape is rewritten here, before
// that pass, as the reinterpret_cast it stands for.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQRELAXEXPANDSHAPE
#include "passes/CPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {

/// Whether some reassociation group of `op` has two or more dynamic sizes.
bool hasSeveralDynamicSizesInAGroup(memref::ExpandShapeOp op) {
  MemRefType type = op.getResultType();
  for (const ReassociationIndices &group : op.getReassociationIndices()) {
    int dynamic = 0;
    for (int64_t dim : group)
      dynamic += type.isDynamicDim(dim);
    if (dynamic > 1)
      return true;
  }
  return false;
}

struct ExpandShapeAsReinterpretCast : OpRewritePattern<memref::ExpandShapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::ExpandShapeOp op,
                                PatternRewriter &rewriter) const override {
    if (!hasSeveralDynamicSizesInAGroup(op))
      return rewriter.notifyMatchFailure(op, "expand-strided-metadata can");
    MemRefType resultType = op.getResultType();
    auto [resultStrides, resultOffset] = resultType.getStridesAndOffset();
    Location loc = op.getLoc();
    auto source =
        memref::ExtractStridedMetadataOp::create(rewriter, loc, op.getSrc());
    SmallVector<OpFoldResult> sizes = op.getMixedOutputShape();
    SmallVector<OpFoldResult> strides(resultType.getRank());
    for (auto [sourceDim, group] :
         llvm::enumerate(op.getReassociationIndices())) {
      // The innermost dimension of the group keeps the source's stride;
      // each outer one steps over the whole of the next.
      Value stride = source.getStrides()[sourceDim];
      for (int64_t i = static_cast<int64_t>(group.size()) - 1; i >= 0; --i) {
        int64_t dim = group[i];
        strides[dim] =
            ShapedType::isDynamic(resultStrides[dim])
                ? OpFoldResult(stride)
                : OpFoldResult(rewriter.getIndexAttr(resultStrides[dim]));
        Value size = getValueOrCreateConstantIndexOp(rewriter, loc, sizes[dim]);
        stride = arith::MulIOp::create(rewriter, loc, stride, size);
      }
    }
    OpFoldResult offset =
        ShapedType::isDynamic(resultOffset)
            ? OpFoldResult(source.getOffset())
            : OpFoldResult(rewriter.getIndexAttr(resultOffset));
    rewriter.replaceOpWithNewOp<memref::ReinterpretCastOp>(
        op, resultType, op.getSrc(), offset, sizes, strides);
    return success();
  }
};

struct SeqRelaxExpandShape
    : seqc::impl::SeqRelaxExpandShapeBase<SeqRelaxExpandShape> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandShapeAsReinterpretCast>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
