//===- LowerScans.cpp - reference lowering of linear / associative scans --===//

#include "Common/KernelBuilder.h"
#include "seqc/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace seqc;
using arith::CmpIPredicate;

namespace {

/// The time index of step `t` of `len` steps, running backwards if `reverse`.
static Value stepIndex(KernelBuilder &kb, Value t, Value len, bool reverse) {
  if (!reverse)
    return t;
  return kb.sub(kb.sub(len, kb.idx(1)), t);
}

/// h_t = a_t * h_{t-1} + b_t, sequentially per (batch, state element).
struct LowerLinearScan : OpRewritePattern<seq::LinearScanOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::LinearScanOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);

    auto hType = cast<RankedTensorType>(op.getH().getType());
    auto lastType = cast<RankedTensorType>(op.getLast().getType());
    SmallVector<Value> full = dims.of("h"), state = dims.of("last");
    Value T = dims["T"];
    bool reverse = op.getReverse();

    // Parallel dimensions: batch and every state dimension.
    SmallVector<Value> outer = state;
    Value hOut = kb.empty(hType, full);
    Value lastOut = kb.empty(lastType, state);
    SmallVector<Value> res =
        kb.nest(outer, {hOut, lastOut}, [&](ValueRange ivs, ValueRange it) {
          Value h0 = op.getInit() ? kb.load(op.getInit(), ivs) : kb.f32(0.0);
          auto at = [&](Value t) {
            SmallVector<Value> idx{ivs[0], t};
            idx.append(ivs.begin() + 1, ivs.end());
            return idx;
          };
          SmallVector<Value> scan =
              kb.loop(T, {h0, it[0]}, [&](Value step, ValueRange c) {
                Value t = stepIndex(kb, step, T, reverse);
                SmallVector<Value> idx = at(t);
                Value h = kb.fadd(kb.fmul(kb.load(op.getA(), idx), c[0]),
                                  kb.load(op.getB(), idx));
                return SmallVector<Value>{h, kb.store(h, c[1], idx)};
              });
          return SmallVector<Value>{scan[1], kb.store(scan[0], it[1], ivs)};
        });
    rewriter.replaceOp(op, res);
    return success();
  }
};

/// out_0 = x_0, out_t = combine(out_{t-1}, x_t) along `dim`, with the
/// combiner region inlined at every step.
struct LowerAssociativeScan : OpRewritePattern<seq::AssociativeScanOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::AssociativeScanOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);

    size_t n = op.getInputs().size();
    int64_t scanDim = op.getDim();
    SmallVector<Value> sizes = dims.of("input #0");
    Value len = sizes[scanDim];
    SmallVector<Value> outer;
    for (auto [i, s] : llvm::enumerate(sizes))
      if (static_cast<int64_t>(i) != scanDim)
        outer.push_back(s);

    SmallVector<Value> outs;
    for (Value r : op.getOutputs())
      outs.push_back(kb.empty(cast<RankedTensorType>(r.getType()), sizes));

    Block &combiner = op.getCombiner().front();
    SmallVector<Type> eltTypes;
    for (Value in : op.getInputs())
      eltTypes.push_back(cast<RankedTensorType>(in.getType()).getElementType());

    SmallVector<Value> res =
        kb.nest(outer, outs, [&](ValueRange ivs, ValueRange it) {
          auto at = [&](Value t) {
            SmallVector<Value> idx(ivs.begin(), ivs.end());
            idx.insert(idx.begin() + scanDim, t);
            return idx;
          };
          // Carry the running prefix (n scalars, undefined before step 0) and
          // the n output tensors.
          SmallVector<Value> inits;
          for (Type t : eltTypes)
            inits.push_back(arith::ConstantOp::create(b, b.getZeroAttr(t)));
          inits.append(it.begin(), it.end());
          SmallVector<Value> scan =
              kb.loop(len, inits, [&](Value step, ValueRange c) {
                SmallVector<Value> idx =
                    at(stepIndex(kb, step, len, op.getReverse()));
                SmallVector<Value> next;
                for (Value in : op.getInputs())
                  next.push_back(tensor::ExtractOp::create(b, in, idx));
                Value first = kb.cmp(CmpIPredicate::eq, step, kb.idx(0));
                SmallVector<Value> prefix = kb.ifElse(
                    first, eltTypes, [&] { return next; },
                    [&] {
                      SmallVector<Value> args(c.begin(), c.begin() + n);
                      args.append(next);
                      return kb.inlineBlock(combiner, args);
                    });
                SmallVector<Value> out(prefix);
                for (size_t i = 0; i < n; ++i)
                  out.push_back(
                      tensor::InsertOp::create(b, prefix[i], c[n + i], idx));
                return out;
              });
          return SmallVector<Value>(scan.begin() + n, scan.end());
        });
    rewriter.replaceOp(op, res);
    return success();
  }
};

} // namespace

void seqc::populateReferenceScanPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerLinearScan, LowerAssociativeScan>(patterns.getContext());
}
