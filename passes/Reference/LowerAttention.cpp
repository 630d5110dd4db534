//===- LowerAttention.cpp - reference lowering of the attention family ----===//
//
// Linear attention as its recurrence (the K x V state updated one step at a
// time), Performer features as explicit dot products, and exact attention as
// a one-key-at-a-time online softmax, so no T x S score matrix ever exists.
//
//===----------------------------------------------------------------------===//

#include "Common/KernelBuilder.h"
#include "seqc/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

using namespace mlir;
using namespace seqc;
using arith::CmpFPredicate;
using arith::CmpIPredicate;

namespace {

static RankedTensorType f32Tensor(MLIRContext *ctx, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, Float32Type::get(ctx));
}

/// Linear attention's recurrence, one step at a time, in tensors: the state
/// S [B, H, K, V] and normalizer z [B, H, K] updated per step, the outputs
/// stored as each step ends (causal) or after the whole sequence.
class LinearAttentionRecurrence {
public:
  LinearAttentionRecurrence(KernelBuilder &kb, seq::LinearAttentionOp op,
                            Value K, Value V)
      : kb(kb), op(op), K(K), V(V), phi(op.getFeatureMap()),
        scale(kb.f32(op.getScale().convertToDouble())),
        eps(kb.f32(op.getEps().convertToDouble())), decay(op.getDecay()),
        decayRank(decay ? cast<RankedTensorType>(decay.getType()).getRank()
                        : 0) {}

  /// Head (bi, h): S from init, then every step. Returns {o, S, z}.
  SmallVector<Value> head(Value bi, Value h, Value T, Value o, Value S,
                          Value z) {
    S = kb.nest({K, V}, {S}, [&](ValueRange kv, ValueRange c) {
      SmallVector<Value> at{bi, h, kv[0], kv[1]};
      Value s0 = op.getInit() ? kb.load(op.getInit(), at) : kb.f32(0.0);
      return SmallVector<Value>{kb.store(s0, c[0], at)};
    })[0];
    if (op.getCausal())
      return kb.loop(T, {o, S, z}, [&](Value t, ValueRange c) {
        if (op.getBonus()) {
          Value out = outputWithBonus(bi, h, t, c[1], c[0]);
          auto [S2, z2] = accumulate(bi, h, t, c[1], c[2]);
          return SmallVector<Value>{out, S2, z2};
        }
        auto [S2, z2] = accumulate(bi, h, t, c[1], c[2]);
        return SmallVector<Value>{output(bi, h, t, S2, z2, c[0]), S2, z2};
      });
    // Non-causal: the whole sequence's state, then every output from it.
    SmallVector<Value> total = kb.loop(T, {S, z}, [&](Value t, ValueRange c) {
      auto [S2, z2] = accumulate(bi, h, t, c[0], c[1]);
      return SmallVector<Value>{S2, z2};
    });
    Value out = kb.loop(T, {o}, [&](Value t, ValueRange c) {
      return SmallVector<Value>{output(bi, h, t, total[0], total[1], c[0])};
    })[0];
    return {out, total[0], total[1]};
  }

private:
  Value qPrime(Value bi, Value t, Value h, Value kk) {
    return kb.fmul(kb.featureMap(phi, kb.load(op.getQ(), {bi, t, h, kk})),
                   scale);
  }
  Value kPrime(Value bi, Value t, Value h, Value kk) {
    return kb.featureMap(phi, kb.load(op.getK(), {bi, t, h, kk}));
  }
  /// The log decay of key row kk at step t (null without decay).
  Value logDecay(Value bi, Value t, Value h, Value kk) {
    switch (decayRank) {
    case 1:
      return kb.load(decay, {h});
    case 3:
      return kb.load(decay, {bi, t, h});
    case 4:
      return kb.load(decay, {bi, t, h, kk});
    default:
      return Value();
    }
  }

  /// Accumulates outer(k'_t, v_t) into S (and k'_t into z), after decaying
  /// each key row of S (and z) by exp(g_t).
  std::pair<Value, Value> accumulate(Value bi, Value h, Value t, Value S,
                                     Value z) {
    SmallVector<Value> r = kb.loop(K, {S, z}, [&](Value kk, ValueRange c) {
      Value g = logDecay(bi, t, h, kk);
      Value f = g ? kb.exp(g) : Value();
      Value kp = kPrime(bi, t, h, kk);
      Value rowS = kb.loop(V, {c[0]}, [&](Value vv, ValueRange s) {
        SmallVector<Value> at{bi, h, kk, vv};
        Value old = kb.load(s[0], at);
        if (f)
          old = kb.fmul(f, old);
        Value upd =
            kb.fadd(old, kb.fmul(kp, kb.load(op.getV(), {bi, t, h, vv})));
        return SmallVector<Value>{kb.store(upd, s[0], at)};
      })[0];
      Value zOld = kb.load(c[1], {bi, h, kk});
      if (f)
        zOld = kb.fmul(f, zOld);
      Value zNew = kb.store(kb.fadd(zOld, kp), c[1], {bi, h, kk});
      return SmallVector<Value>{rowS, zNew};
    });
    return {r[0], r[1]};
  }

  /// q'_t S summed over the keys, for column vv.
  Value queryTimesState(Value bi, Value h, Value t, Value S, Value vv) {
    return kb.sumOver(K, [&](Value kk) {
      return kb.fmul(qPrime(bi, t, h, kk), kb.load(S, {bi, h, kk, vv}));
    });
  }

  /// o_t = q'_t S (/ (q'_t . z + eps)).
  Value output(Value bi, Value h, Value t, Value S, Value z, Value out) {
    Value den;
    if (op.getNormalize())
      den = kb.fadd(
          kb.sumOver(
              K,
              [&](Value kk) {
                return kb.fmul(qPrime(bi, t, h, kk), kb.load(z, {bi, h, kk}));
              }),
          eps);
    return kb.loop(V, {out}, [&](Value vv, ValueRange c) {
      Value acc = queryTimesState(bi, h, t, S, vv);
      if (den)
        acc = kb.fdiv(acc, den);
      return SmallVector<Value>{kb.store(acc, c[0], {bi, t, h, vv})};
    })[0];
  }

  /// RWKV-6's bonus: o_t = q'_t S_{t-1} + (q'_t . (u o k'_t)) v_t, from the
  /// state before step t's update.
  Value outputWithBonus(Value bi, Value h, Value t, Value S, Value out) {
    Value current = kb.sumOver(K, [&](Value kk) {
      return kb.fmul(
          kb.fmul(qPrime(bi, t, h, kk), kb.load(op.getBonus(), {h, kk})),
          kPrime(bi, t, h, kk));
    });
    return kb.loop(V, {out}, [&](Value vv, ValueRange c) {
      Value acc = kb.fadd(queryTimesState(bi, h, t, S, vv),
                          kb.fmul(current, kb.load(op.getV(), {bi, t, h, vv})));
      return SmallVector<Value>{kb.store(acc, c[0], {bi, t, h, vv})};
    })[0];
  }

  KernelBuilder &kb;
  seq::LinearAttentionOp op;
  Value K, V;
  seq::FeatureMap phi;
  Value scale, eps, decay;
  int64_t decayRank;
};

struct LowerLinearAttention : OpRewritePattern<seq::LinearAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::LinearAttentionOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], H = dims["H"], K = dims["K"];
    auto outType = cast<RankedTensorType>(op.getO().getType());
    auto stateType = cast<RankedTensorType>(op.getLast().getType());
    Value o = kb.empty(outType, dims.of("o"));
    Value state = kb.empty(stateType, dims.of("last"));
    // The normalizer z (running or total sum of k'), per (b, h, key).
    int64_t dynamic = ShapedType::kDynamic;
    Value z = kb.zeros(f32Tensor(op.getContext(), {dynamic, dynamic, dynamic}),
                       {Bsz, H, K});
    LinearAttentionRecurrence recurrence(kb, op, K, dims["V"]);
    SmallVector<Value> res =
        kb.nest({Bsz, H}, {o, state, z}, [&](ValueRange ivs, ValueRange it) {
          return recurrence.head(ivs[0], ivs[1], T, it[0], it[1], it[2]);
        });
    rewriter.replaceOp(op, {res[0], res[1]});
    return success();
  }
};

struct LowerRandomFeatures : OpRewritePattern<seq::RandomFeaturesOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::RandomFeaturesOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value K = dims["K"], M = dims["M"];
    bool trig = op.getKind() == seq::RandomFeatures::trigonometric;
    SmallVector<Value> xSizes = dims.of("x");
    SmallVector<Value> outer(xSizes.begin(), xSizes.end() - 1);
    Value norm = kb.fdiv(kb.f32(1.0), kb.sqrt(kb.indexToF32(M)));

    Value out = kb.empty(cast<RankedTensorType>(op.getFeatures().getType()),
                         dims.of("features"));
    out = kb.nest(outer, {out}, [&](ValueRange lead, ValueRange it) {
      auto xAt = [&](Value kk) {
        SmallVector<Value> idx(lead.begin(), lead.end());
        idx.push_back(kk);
        return kb.load(op.getX(), idx);
      };
      Value half = kb.fmul(kb.sumOver(K,
                                      [&](Value kk) {
                                        Value x = xAt(kk);
                                        return kb.fmul(x, x);
                                      }),
                           kb.f32(0.5));
      return kb.loop(M, {it[0]}, [&](Value m, ValueRange c) {
        Value dot = kb.sumOver(K, [&](Value kk) {
          return kb.fmul(xAt(kk), kb.load(op.getOmega(), {kk, m}));
        });
        auto at = [&](Value col) {
          SmallVector<Value> idx(lead.begin(), lead.end());
          idx.push_back(col);
          return idx;
        };
        if (!trig) {
          Value v = kb.fmul(kb.exp(kb.fsub(dot, half)), norm);
          return SmallVector<Value>{kb.store(v, c[0], at(m))};
        }
        Value amp = kb.fmul(kb.exp(half), norm);
        Value r = kb.store(kb.fmul(kb.sin(dot), amp), c[0], at(m));
        r = kb.store(kb.fmul(kb.cos(dot), amp), r, at(kb.add(M, m)));
        return SmallVector<Value>{r};
      });
    })[0];
    rewriter.replaceOp(op, out);
    return success();
  }
};

struct LowerAttention : OpRewritePattern<seq::AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::AttentionOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], H = dims["H"], K = dims["K"],
          S = dims["S"], V = dims["V"];
    Value rep = kb.divs(H, dims["Hkv"]);
    Value scale = op.getScale()
                      ? kb.f32(op.getScale()->convertToDouble())
                      : kb.fdiv(kb.f32(1.0), kb.sqrt(kb.indexToF32(K)));
    bool causal = op.getCausal();
    int64_t window = op.getWindow();
    Value offset = kb.sub(S, T); // query i sits at key position i + S - T

    SmallVector<Value> oSizes = dims.of("o");
    int64_t dyn = ShapedType::kDynamic;
    Value acc =
        kb.zeros(f32Tensor(op.getContext(), {dyn, dyn, dyn, dyn}), oSizes);
    Value negInf = kb.f32(-std::numeric_limits<float>::infinity());

    // Per query row: running max m, normalizer l, unnormalized output.
    SmallVector<Value> rows = kb.nest(
        {Bsz, T, H},
        {acc,
         kb.zeros(f32Tensor(op.getContext(), {dyn, dyn, dyn}), {Bsz, T, H})},
        [&](ValueRange ivs, ValueRange it) {
          Value bi = ivs[0], i = ivs[1], h = ivs[2];
          Value hk = kb.divs(h, rep);
          Value pos = kb.add(i, offset);
          SmallVector<Value> r = kb.loop(
              S, {negInf, kb.f32(0.0), it[0]}, [&](Value j, ValueRange c) {
                Value visible = kb.i1(true);
                if (causal)
                  visible = kb.cmp(CmpIPredicate::sle, j, pos);
                if (window > 0)
                  visible =
                      kb.andi(visible, kb.cmp(CmpIPredicate::slt,
                                              kb.sub(pos, j), kb.idx(window)));
                return kb.ifElse(
                    visible, {c[0].getType(), c[1].getType(), c[2].getType()},
                    [&] {
                      Value s = kb.fmul(
                          kb.sumOver(K,
                                     [&](Value kk) {
                                       return kb.fmul(
                                           kb.load(op.getQ(), {bi, i, h, kk}),
                                           kb.load(op.getK(), {bi, j, hk, kk}));
                                     }),
                          scale);
                      Value m = kb.fmax(c[0], s);
                      Value corr = kb.exp(kb.fsub(c[0], m));
                      Value p = kb.exp(kb.fsub(s, m));
                      Value l = kb.fadd(kb.fmul(c[1], corr), p);
                      Value out =
                          kb.loop(V, {c[2]}, [&](Value vv, ValueRange o) {
                            SmallVector<Value> at{bi, i, h, vv};
                            Value upd =
                                kb.fadd(kb.fmul(kb.load(o[0], at), corr),
                                        kb.fmul(p, kb.load(op.getV(),
                                                           {bi, j, hk, vv})));
                            return SmallVector<Value>{kb.store(upd, o[0], at)};
                          })[0];
                      return SmallVector<Value>{m, l, out};
                    },
                    [&] { return SmallVector<Value>(c.begin(), c.end()); });
              });
          return SmallVector<Value>{r[2], kb.store(r[1], it[1], {bi, i, h})};
        });

    // o = acc / l, and 0 for a query that saw no key (l == 0; a NaN l, from
    // NaN scores, propagates).
    Value o = kb.empty(cast<RankedTensorType>(op.getO().getType()), oSizes);
    o = kb.nest(oSizes, {o}, [&](ValueRange ivs, ValueRange it) {
      Value l = kb.load(rows[1], {ivs[0], ivs[1], ivs[2]});
      Value seen = kb.fcmp(CmpFPredicate::UNE, l, kb.f32(0.0));
      Value v = kb.select(seen, kb.fdiv(kb.load(rows[0], ivs), l), kb.f32(0.0));
      return SmallVector<Value>{kb.store(v, it[0], ivs)};
    })[0];
    rewriter.replaceOp(op, o);
    return success();
  }
};

} // namespace

void seqc::populateReferenceAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerLinearAttention, LowerRandomFeatures, LowerAttention>(
      patterns.getContext());
}
