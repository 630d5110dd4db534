//===- LowerConv.cpp - reference lowering of causal_conv1d ----------------===//

#include "Common/KernelBuilder.h"
#include "seqc/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace seqc;
using arith::CmpIPredicate;

namespace {

/// y[t,d] = act(sum_j w[d,j] x[t-W+1+j, d] + bias[d]) over the sequence
/// `concat(init or zeros, x)`; `last` is that sequence's final W-1 entries.
struct LowerCausalConv1d : OpRewritePattern<seq::CausalConv1dOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::CausalConv1dOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], D = dims["D"], W = dims["W"];
    Value history = kb.sub(W, kb.idx(1));
    Value zero = kb.f32(0.0);

    // Element `q` of concat(init, x[b, :, d]) (q may index either part).
    auto padded = [&](Value bi, Value q, Value d) {
      Value inX = kb.cmp(CmpIPredicate::sge, q, history);
      return kb.ifElse(
          inX, {kb.f32Type()},
          [&] {
            return SmallVector<Value>{
                kb.load(op.getX(), {bi, kb.sub(q, history), d})};
          },
          [&] {
            return SmallVector<Value>{
                op.getInit() ? kb.load(op.getInit(), {bi, d, q}) : zero};
          })[0];
    };

    Value y =
        kb.empty(cast<RankedTensorType>(op.getY().getType()), dims.of("y"));
    y = kb.nest({Bsz, T, D}, {y}, [&](ValueRange ivs, ValueRange it) {
      Value bi = ivs[0], t = ivs[1], d = ivs[2];
      Value acc0 = op.getBias() ? kb.load(op.getBias(), {d}) : zero;
      // Tap j reads padded position t + j (t - W + 1 + j in time).
      Value acc = kb.loop(W, {acc0}, [&](Value j, ValueRange c) {
        Value x = padded(bi, kb.add(t, j), d);
        return SmallVector<Value>{
            kb.fadd(c[0], kb.fmul(kb.load(op.getW(), {d, j}), x))};
      })[0];
      return SmallVector<Value>{
          kb.store(kb.activation(op.getActivation(), acc), it[0], ivs)};
    })[0];

    Value last = kb.empty(cast<RankedTensorType>(op.getLast().getType()),
                          dims.of("last"));
    last =
        kb.nest({Bsz, D, history}, {last}, [&](ValueRange ivs, ValueRange it) {
          Value v = padded(ivs[0], kb.add(T, ivs[2]), ivs[1]);
          return SmallVector<Value>{kb.store(v, it[0], ivs)};
        })[0];
    rewriter.replaceOp(op, {y, last});
    return success();
  }
};

} // namespace

void seqc::populateReferenceConvPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerCausalConv1d>(patterns.getContext());
}
