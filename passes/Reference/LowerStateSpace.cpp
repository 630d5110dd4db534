//===- LowerStateSpace.cpp - reference lowering of selective scan / SSD ---===//
//
// The recurrences exactly as the SPEC writes them: one state element at a
// time, time sequential, output contributions accumulated in f32 and the skip
// and gate terms applied at the end.
//
//===----------------------------------------------------------------------===//

#include "Common/KernelBuilder.h"
#include "seqc/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace seqc;
using arith::CmpFPredicate;

namespace {

/// The f32 twin of `type` (accumulators).
static RankedTensorType f32Like(Type type) {
  auto t = cast<RankedTensorType>(type);
  return RankedTensorType::get(t.getShape(), Float32Type::get(t.getContext()));
}

struct LowerSelectiveScan : OpRewritePattern<seq::SelectiveScanOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::SelectiveScanOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], D = dims["D"], N = dims["N"];
    Value perGroup = kb.divs(D, dims["G"]);
    bool zoh = op.getDiscretization() == seq::Discretization::zoh;

    SmallVector<Value> ySizes = dims.of("y");
    Value yacc = kb.zeros(f32Like(op.getY().getType()), ySizes);
    Value last = kb.empty(cast<RankedTensorType>(op.getLast().getType()),
                          dims.of("last"));

    SmallVector<Value> acc =
        kb.nest({Bsz, D, N}, {yacc, last}, [&](ValueRange ivs, ValueRange it) {
          Value bi = ivs[0], d = ivs[1], n = ivs[2];
          Value g = kb.divs(d, perGroup);
          Value a = kb.load(op.getA(), {d, n});
          Value bias =
              op.getDeltaBias() ? kb.load(op.getDeltaBias(), {d}) : Value();
          Value h0 =
              op.getInit() ? kb.load(op.getInit(), {bi, d, n}) : kb.f32(0.0);
          SmallVector<Value> scan =
              kb.loop(T, {h0, it[0]}, [&](Value t, ValueRange c) {
                // selective_scan's dt follows ssd's rule, with no clamp.
                SsdStepSize rule;
                rule.softplus = op.getDeltaSoftplus();
                Value dt =
                    rule.apply(kb, kb.load(op.getDelta(), {bi, t, d}), bias);
                Value u = kb.load(op.getU(), {bi, t, d});
                Value bu = kb.fmul(kb.load(op.getB(), {bi, t, g, n}), u);
                Value dtA = kb.fmul(dt, a);
                Value weight = dt;
                if (zoh) {
                  // expm1(dt A) / A, whose limit at A = 0 is dt.
                  Value isZero = kb.fcmp(CmpFPredicate::OEQ, a, kb.f32(0.0));
                  Value safeA = kb.select(isZero, kb.f32(1.0), a);
                  weight = kb.select(isZero, dt, kb.fdiv(kb.expm1(dtA), safeA));
                }
                Value h =
                    kb.fadd(kb.fmul(kb.exp(dtA), c[0]), kb.fmul(weight, bu));
                Value contrib = kb.fmul(kb.load(op.getC(), {bi, t, g, n}), h);
                Value y = kb.fadd(kb.load(c[1], {bi, t, d}), contrib);
                return SmallVector<Value>{h, kb.store(y, c[1], {bi, t, d})};
              });
          return SmallVector<Value>{scan[1],
                                    kb.store(scan[0], it[1], {bi, d, n})};
        });

    Value y = kb.empty(cast<RankedTensorType>(op.getY().getType()), ySizes);
    y = kb.nest({Bsz, T, D}, {y}, [&](ValueRange ivs, ValueRange it) {
      Value d = ivs[2];
      Value v = kb.load(acc[0], ivs);
      if (op.getSkip())
        v = kb.fadd(
            v, kb.fmul(kb.load(op.getSkip(), {d}), kb.load(op.getU(), ivs)));
      if (op.getGate())
        v = kb.fmul(v, kb.silu(kb.load(op.getGate(), ivs)));
      return SmallVector<Value>{kb.store(v, it[0], ivs)};
    })[0];
    rewriter.replaceOp(op, {y, acc[1]});
    return success();
  }
};

struct LowerSsd : OpRewritePattern<seq::SsdOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::SsdOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], H = dims["H"], P = dims["P"],
          N = dims["N"];
    Value perGroup = kb.divs(H, dims["G"]);

    SmallVector<Value> ySizes = dims.of("y");
    Value yacc = kb.zeros(f32Like(op.getY().getType()), ySizes);
    Value last = kb.empty(cast<RankedTensorType>(op.getLast().getType()),
                          dims.of("last"));

    SmallVector<Value> acc = kb.nest(
        {Bsz, H, P, N}, {yacc, last}, [&](ValueRange ivs, ValueRange it) {
          Value bi = ivs[0], h = ivs[1], p = ivs[2], n = ivs[3];
          Value g = kb.divs(h, perGroup);
          Value a = kb.load(op.getA(), {h});
          Value bias = op.getDtBias() ? kb.load(op.getDtBias(), {h}) : Value();
          Value s0 =
              op.getInit() ? kb.load(op.getInit(), {bi, h, p, n}) : kb.f32(0.0);
          SmallVector<Value> scan =
              kb.loop(T, {s0, it[0]}, [&](Value t, ValueRange c) {
                Value dt = SsdStepSize::of(op).apply(
                    kb, kb.load(op.getDt(), {bi, t, h}), bias);
                Value decay = kb.exp(kb.fmul(dt, a));
                Value xb = kb.fmul(kb.load(op.getX(), {bi, t, h, p}),
                                   kb.load(op.getB(), {bi, t, g, n}));
                Value s = kb.fadd(kb.fmul(decay, c[0]), kb.fmul(dt, xb));
                Value contrib = kb.fmul(kb.load(op.getC(), {bi, t, g, n}), s);
                SmallVector<Value> yIdx{bi, t, h, p};
                Value y = kb.fadd(kb.load(c[1], yIdx), contrib);
                return SmallVector<Value>{s, kb.store(y, c[1], yIdx)};
              });
          return SmallVector<Value>{scan[1],
                                    kb.store(scan[0], it[1], {bi, h, p, n})};
        });

    Value y = kb.empty(cast<RankedTensorType>(op.getY().getType()), ySizes);
    y = kb.nest({Bsz, T, H, P}, {y}, [&](ValueRange ivs, ValueRange it) {
      Value h = ivs[2];
      Value v = kb.load(acc[0], ivs);
      if (Value skip = op.getSkip()) {
        bool perChannel = cast<RankedTensorType>(skip.getType()).getRank() == 2;
        Value d = perChannel ? kb.load(skip, {h, ivs[3]}) : kb.load(skip, {h});
        v = kb.fadd(v, kb.fmul(d, kb.load(op.getX(), ivs)));
      }
      if (op.getGate())
        v = kb.fmul(v, kb.silu(kb.load(op.getGate(), ivs)));
      return SmallVector<Value>{kb.store(v, it[0], ivs)};
    })[0];
    rewriter.replaceOp(op, {y, acc[1]});
    return success();
  }
};

/// L[i,j] = exp(log_a[j+1] + ... + log_a[i]), each segment summed on its own
/// (never as a difference of two long prefix sums).
struct LowerSemiseparableMask : OpRewritePattern<seq::SemiseparableMaskOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::SemiseparableMaskOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    SmallVector<Value> inSizes = dims.of("log_a");
    Value T = inSizes.back();
    SmallVector<Value> outer(inSizes.begin(), inSizes.end() - 1);
    outer.push_back(T); // the column j
    Value mask = kb.zeros(cast<RankedTensorType>(op.getMask().getType()),
                          dims.of("mask"));
    mask = kb.nest(outer, {mask}, [&](ValueRange ivs, ValueRange it) {
      SmallVector<Value> lead(ivs.drop_back());
      Value j = ivs.back();
      auto at = [&](Value i) {
        SmallVector<Value> idx(lead);
        idx.push_back(i);
        idx.push_back(j);
        return idx;
      };
      Value m = kb.store(kb.f32(1.0), it[0], at(j));
      SmallVector<Value> seg = kb.loop(
          kb.add(j, kb.idx(1)), T, {kb.f32(0.0), m},
          [&](Value i, ValueRange c) {
            SmallVector<Value> src(lead);
            src.push_back(i);
            Value s = kb.fadd(c[0], kb.load(op.getLogA(), src));
            return SmallVector<Value>{s, kb.store(kb.exp(s), c[1], at(i))};
          });
      return SmallVector<Value>{seg[1]};
    })[0];
    rewriter.replaceOp(op, mask);
    return success();
  }
};

} // namespace

void seqc::populateReferenceStateSpacePatterns(RewritePatternSet &patterns) {
  patterns.add<LowerSelectiveScan, LowerSsd, LowerSemiseparableMask>(
      patterns.getContext());
}
