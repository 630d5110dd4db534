//===- LowerDeltaRules.cpp - reference lowering of the delta rules --------===//
//
// seq.delta_rule and seq.generalized_delta_rule as their recurrences,
// exactly as SPEC 2.12 and 2.13 write them. The columns of the K x V state
// never mix (every update is a rank-1 change of whole rows and reads one
// column at a time), so each state column runs its own time loop:
//
//   delta rule    ks = sum_r alpha_r k_r S[r, c]       (S~^T k)
//                 S[r, c] = alpha_r S[r, c] + k_r beta (v_c - ks)
//   generalized   sa = sum_r a_r S[r, c]               (a^T S_{t-1})
//                 S[r, c] = alpha_r S[r, c] + b_r sa + k_r v_c
//   both          o_c = sum_r q'_r S[r, c]
//
//===----------------------------------------------------------------------===//

#include "Common/KernelBuilder.h"
#include "seqc/Passes.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace seqc;

namespace {

/// The log decay of key row r at step t (null: no decay), for a decay of
/// rank 1 (per head), 3 (per step) or 4 (per key channel).
Value logDecayAt(KernelBuilder &kb, Value decay, Value bi, Value t, Value h,
                 Value r) {
  if (!decay)
    return Value();
  switch (cast<RankedTensorType>(decay.getType()).getRank()) {
  case 1:
    return kb.load(decay, {h});
  case 3:
    return kb.load(decay, {bi, t, h});
  default:
    return kb.load(decay, {bi, t, h, r});
  }
}

/// The state column (bi, h, :, c) from init, or zeros, into `state`.
Value initialColumn(KernelBuilder &kb, Value init, Value state, Value K,
                    Value bi, Value h, Value c) {
  return kb.loop(K, {state}, [&](Value r, ValueRange it) {
    SmallVector<Value> at{bi, h, r, c};
    Value s0 = init ? kb.load(init, at) : kb.f32(0.0);
    return SmallVector<Value>{kb.store(s0, it[0], at)};
  })[0];
}

struct LowerDeltaRule : OpRewritePattern<seq::DeltaRuleOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::DeltaRuleOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], HV = dims["HV"], K = dims["K"],
          V = dims["V"];
    Value valuesPerHead = kb.divs(HV, dims["H"]);
    Value scale = kb.f32(op.getScale().convertToDouble());
    Value eps = kb.f32(op.getEps().convertToDouble());
    bool l2norm = op.getQkL2norm();

    Value o =
        kb.empty(cast<RankedTensorType>(op.getO().getType()), dims.of("o"));
    Value state = kb.empty(cast<RankedTensorType>(op.getLast().getType()),
                           dims.of("last"));
    // 1 / sqrt(|x_t|^2 + eps) over K, or 1 without qk_l2norm.
    auto inverseNorm = [&](Value x, Value bi, Value t, Value h) {
      if (!l2norm)
        return kb.f32(1.0);
      Value sq = kb.sumOver(K, [&](Value r) {
        Value e = kb.load(x, {bi, t, h, r});
        return kb.fmul(e, e);
      });
      return kb.fdiv(kb.f32(1.0), kb.sqrt(kb.fadd(sq, eps)));
    };

    SmallVector<Value> res =
        kb.nest({Bsz, HV, V}, {o, state}, [&](ValueRange ivs, ValueRange it) {
          Value bi = ivs[0], j = ivs[1], c = ivs[2];
          Value h = kb.divs(j, valuesPerHead);
          Value S0 = initialColumn(kb, op.getInit(), it[1], K, bi, j, c);
          return kb.loop(T, {it[0], S0}, [&](Value t, ValueRange st) {
            Value qNorm = kb.fmul(inverseNorm(op.getQ(), bi, t, h), scale);
            Value kNorm = inverseNorm(op.getK(), bi, t, h);
            auto keyAt = [&](Value r) {
              return kb.fmul(kb.load(op.getK(), {bi, t, h, r}), kNorm);
            };
            auto alphaAt = [&](Value r) -> Value {
              Value g = logDecayAt(kb, op.getDecay(), bi, t, j, r);
              return g ? kb.exp(g) : Value();
            };
            auto decayed = [&](Value r, Value s) {
              Value alpha = alphaAt(r);
              return alpha ? kb.fmul(alpha, s) : s;
            };
            // S~^T k for this column, then the write beta (v - S~^T k).
            Value ks = kb.sumOver(K, [&](Value r) {
              return kb.fmul(keyAt(r),
                             decayed(r, kb.load(st[1], {bi, j, r, c})));
            });
            Value write =
                kb.fmul(kb.load(op.getBeta(), {bi, t, j}),
                        kb.fsub(kb.load(op.getV(), {bi, t, j, c}), ks));
            SmallVector<Value> upd =
                kb.loop(K, {st[1], kb.f32(0.0)}, [&](Value r, ValueRange acc) {
                  SmallVector<Value> at{bi, j, r, c};
                  Value s = kb.fadd(decayed(r, kb.load(acc[0], at)),
                                    kb.fmul(keyAt(r), write));
                  Value q = kb.fmul(kb.load(op.getQ(), {bi, t, h, r}), qNorm);
                  return SmallVector<Value>{kb.store(s, acc[0], at),
                                            kb.fadd(acc[1], kb.fmul(q, s))};
                });
            return SmallVector<Value>{kb.store(upd[1], st[0], {bi, t, j, c}),
                                      upd[0]};
          });
        });
    rewriter.replaceOp(op, {res[0], res[1]});
    return success();
  }
};

struct LowerGeneralizedDeltaRule
    : OpRewritePattern<seq::GeneralizedDeltaRuleOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::GeneralizedDeltaRuleOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], H = dims["H"], K = dims["K"],
          V = dims["V"];
    Value scale = kb.f32(op.getScale().convertToDouble());
    Value o =
        kb.empty(cast<RankedTensorType>(op.getO().getType()), dims.of("o"));
    Value state = kb.empty(cast<RankedTensorType>(op.getLast().getType()),
                           dims.of("last"));

    SmallVector<Value> res =
        kb.nest({Bsz, H, V}, {o, state}, [&](ValueRange ivs, ValueRange it) {
          Value bi = ivs[0], h = ivs[1], c = ivs[2];
          Value S0 = initialColumn(kb, op.getInit(), it[1], K, bi, h, c);
          return kb.loop(T, {it[0], S0}, [&](Value t, ValueRange st) {
            SmallVector<Value> row{bi, t, h};
            auto at = [&](Value x, Value r) {
              return kb.load(x, {bi, t, h, r});
            };
            // a^T S_{t-1} for this column, before any update.
            Value sa = kb.sumOver(K, [&](Value r) {
              return kb.fmul(at(op.getA(), r), kb.load(st[1], {bi, h, r, c}));
            });
            Value v = kb.load(op.getV(), {bi, t, h, c});
            SmallVector<Value> upd =
                kb.loop(K, {st[1], kb.f32(0.0)}, [&](Value r, ValueRange acc) {
                  SmallVector<Value> sAt{bi, h, r, c};
                  Value s = kb.load(acc[0], sAt);
                  Value g = logDecayAt(kb, op.getDecay(), bi, t, h, r);
                  if (g)
                    s = kb.fmul(kb.exp(g), s);
                  s = kb.fadd(s, kb.fmul(at(op.getB(), r), sa));
                  s = kb.fadd(s, kb.fmul(at(op.getK(), r), v));
                  Value q = kb.fmul(at(op.getQ(), r), scale);
                  return SmallVector<Value>{kb.store(s, acc[0], sAt),
                                            kb.fadd(acc[1], kb.fmul(q, s))};
                });
            return SmallVector<Value>{kb.store(upd[1], st[0], {bi, t, h, c}),
                                      upd[0]};
          });
        });
    rewriter.replaceOp(op, {res[0], res[1]});
    return success();
  }
};

} // namespace

void seqc::populateReferenceDeltaRulePatterns(RewritePatternSet &patterns) {
  patterns.add<LowerDeltaRule, LowerGeneralizedDeltaRule>(
      patterns.getContext());
}
