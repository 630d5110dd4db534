//===- LowerMoE.cpp - reference lowering of route and moe_ffn -------------===//
//
// The router as a per-token selection loop (k passes of an argmax that skips
// the experts already chosen, ties to the lower index), and the experts as
// the book's "MoE layer" algorithm: tokens in order, choices in rank order,
// capacity counted per expert, one FFN evaluation per accepted choice.
//
//===----------------------------------------------------------------------===//

#include "Common/KernelBuilder.h"
#include "Reference/ReferencePatterns.h"
#include "seqc/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

using namespace mlir;
using namespace seqc;
using arith::CmpFPredicate;
using arith::CmpIPredicate;

namespace {

static RankedTensorType tensorOf(Type elt, int64_t rank) {
  return RankedTensorType::get(SmallVector<int64_t>(rank, ShapedType::kDynamic),
                               elt);
}

/// The router one token at a time, in tensors: its k choices, their gate
/// weights, and the load-balancing statistics summed in token order.
class ReferenceRouter {
public:
  ReferenceRouter(ImplicitLocOpBuilder &b, KernelBuilder &kb, seq::RouteOp op,
                  Value E, Value K)
      : b(b), kb(kb), op(op), E(E), K(K) {}

  /// Token t's indices, weights and statistics, into the iteration values
  /// {weights, indices, first-choice counts, probability sums}.
  SmallVector<Value> token(Value t, ValueRange c) {
    Value idx = select(t, c[1]);
    Value w = weigh(t, idx, c[0]);
    // Load-balancing statistics: first choices and the mean softmax of the
    // plain logits.
    Value firstE = expertAt(idx, t, kb.idx(0));
    Value fc =
        kb.store(kb.fadd(kb.load(c[2], {firstE}), kb.f32(1.0)), c[2], {firstE});
    return {w, idx, fc, addProbabilities(t, c[3])};
  }

  Value aux(Value T, Value firstCount, Value probSum) {
    return routeAuxLoss(kb, op.getAuxLossCoef().convertToDouble(), E, T,
                        firstCount, probSum,
                        cast<RankedTensorType>(op.getAux().getType()));
  }

private:
  /// h = logits + eps * softplus(noise_logits).
  Value hAt(Value t, Value e) {
    Value h = kb.load(op.getLogits(), {t, e});
    if (op.getNoiseEps())
      h = kb.fadd(h,
                  kb.fmul(kb.load(op.getNoiseEps(), {t, e}),
                          kb.softplus(kb.load(op.getNoiseLogits(), {t, e}))));
    return h;
  }
  /// The selection score: h plus the bias.
  Value selAt(Value t, Value e) {
    Value s = hAt(t, e);
    return op.getBias() ? kb.fadd(s, kb.load(op.getBias(), {e})) : s;
  }
  Value expertAt(Value indices, Value t, Value j) {
    return kb.i32ToIndex(kb.load(indices, {t, j}));
  }

  /// k rounds of "best expert not chosen yet" (ties to the lower index).
  Value select(Value t, Value indices) {
    return kb.loop(K, {indices}, [&](Value j, ValueRange cj) {
      SmallVector<Value> best =
          kb.loop(E, {kb.idx(-1), kb.f32(0.0)}, [&](Value e, ValueRange ce) {
            Value taken =
                kb.loop(j, {kb.i1(false)}, [&](Value jj, ValueRange tk) {
                  Value same =
                      kb.cmp(CmpIPredicate::eq, expertAt(cj[0], t, jj), e);
                  return SmallVector<Value>{kb.ori(tk[0], same)};
                })[0];
            Value s = selAt(t, e);
            Value better = kb.ori(kb.cmp(CmpIPredicate::slt, ce[0], kb.idx(0)),
                                  kb.fcmp(CmpFPredicate::OGT, s, ce[1]));
            Value take = kb.andi(kb.noti(taken), better);
            return SmallVector<Value>{kb.select(take, e, ce[0]),
                                      kb.select(take, s, ce[1])};
          });
      Value e32 = arith::IndexCastOp::create(b, b.getI32Type(), best[0]);
      return SmallVector<Value>{
          tensor::InsertOp::create(b, e32, cj[0], ValueRange{t, j})};
    })[0];
  }

  /// Gate weights of token t's chosen experts (`idx`) into `weights`.
  Value weigh(Value t, Value idx, Value weights) {
    seq::Score score = op.getScore();
    auto hChosen = [&](Value j) { return hAt(t, expertAt(idx, t, j)); };
    Value mx, den;
    if (score == seq::Score::softmax_topk) {
      mx = kb.maxOver(K, hChosen);
      den = kb.sumOver(
          K, [&](Value j) { return kb.exp(kb.fsub(hChosen(j), mx)); });
    } else if (score == seq::Score::softmax) {
      mx = kb.maxOver(E, [&](Value e) { return hAt(t, e); });
      den = kb.sumOver(E,
                       [&](Value e) { return kb.exp(kb.fsub(hAt(t, e), mx)); });
    }
    auto gate = [&](Value j) {
      Value h = hChosen(j);
      if (score == seq::Score::sigmoid)
        return kb.sigmoid(h);
      return kb.fdiv(kb.exp(kb.fsub(h, mx)), den);
    };
    Value norm = op.getNormalize() ? kb.sumOver(K, gate) : Value();
    Value scale = kb.f32(op.getRoutedScale().convertToDouble());
    return kb.loop(K, {weights}, [&](Value j, ValueRange cw) {
      Value g = gate(j);
      if (norm)
        g = kb.fdiv(g, norm);
      return SmallVector<Value>{kb.store(kb.fmul(g, scale), cw[0], {t, j})};
    })[0];
  }

  Value addProbabilities(Value t, Value probSum) {
    return addTokenProbabilities(kb, op.getLogits(), t, E, probSum);
  }

  ImplicitLocOpBuilder &b;
  KernelBuilder &kb;
  seq::RouteOp op;
  Value E, K;
};

struct LowerRoute : OpRewritePattern<seq::RouteOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::RouteOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value T = dims["T"], E = dims["E"], K = dims["k"];
    kb.check(kb.cmp(CmpIPredicate::sle, K, E),
             "k = {0} exceeds the number of experts E = {1}", {K, E});
    auto wType = cast<RankedTensorType>(op.getWeights().getType());
    auto iType = cast<RankedTensorType>(op.getIndices().getType());
    Value weights = kb.empty(wType, {T, K});
    Value indices = kb.empty(iType, {T, K});
    Value firstCount = kb.zeros(tensorOf(kb.f32Type(), 1), {E});
    Value probSum = kb.zeros(tensorOf(kb.f32Type(), 1), {E});
    ReferenceRouter router(b, kb, op, E, K);
    SmallVector<Value> res =
        kb.loop(T, {weights, indices, firstCount, probSum},
                [&](Value t, ValueRange c) { return router.token(t, c); });
    rewriter.replaceOp(op, {res[0], res[1], router.aux(T, res[2], res[3])});
    return success();
  }
};

struct LowerMoeFfn : OpRewritePattern<seq::MoeFfnOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(seq::MoeFfnOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value T = dims["T"], D = dims["D"], K = dims["k"], E = dims["E"],
          F = dims["F"];
    auto expertAt = [&](Value t, Value j) {
      return kb.i32ToIndex(kb.load(op.getIndices(), {t, j}));
    };

    emitExpertIndexChecks(kb, op.getIndices(), T, K, E);
    Value cap =
        expertCapacity(kb, op.getCapacityFactor().convertToDouble(), T, K, E);

    Activation act = op.getActivation();
    Value counts =
        kb.zeros(cast<RankedTensorType>(op.getLoad().getType()), {E});
    Value yacc = kb.zeros(tensorOf(kb.f32Type(), 2), {T, D});
    Value hidden = kb.empty(tensorOf(kb.f32Type(), 1), {F});

    SmallVector<Value> res = kb.nest(
        {T, K}, {counts, yacc, hidden}, [&](ValueRange ivs, ValueRange c) {
          Value t = ivs[0], j = ivs[1];
          Value e = expertAt(t, j);
          Value used = kb.load(c[0], {e});
          Value usedIdx = arith::IndexCastOp::create(b, b.getIndexType(), used);
          Value accept = kb.cmp(CmpIPredicate::slt, usedIdx, cap);
          return kb.ifElse(
              accept, {c[0].getType(), c[1].getType(), c[2].getType()},
              [&] {
                Value cnt = kb.store(arith::AddIOp::create(b, used, kb.i64(1)),
                                     c[0], {e});
                Value hid = kb.loop(F, {c[2]}, [&](Value f, ValueRange ch) {
                  auto proj = [&](Value wTensor) {
                    return kb.sumOver(D, [&](Value d) {
                      return kb.fmul(kb.load(op.getX(), {t, d}),
                                     kb.load(wTensor, {e, d, f}));
                    });
                  };
                  Value up = proj(op.getWUp());
                  Value h =
                      op.getWGate()
                          ? kb.fmul(kb.activation(act, proj(op.getWGate())), up)
                          : kb.activation(act, up);
                  return SmallVector<Value>{kb.store(h, ch[0], {f})};
                })[0];
                Value wt = kb.load(op.getWeights(), {t, j});
                Value y = kb.loop(D, {c[1]}, [&](Value d, ValueRange cy) {
                  Value down = kb.sumOver(F, [&](Value f) {
                    return kb.fmul(kb.load(hid, {f}),
                                   kb.load(op.getWDown(), {e, f, d}));
                  });
                  Value upd =
                      kb.fadd(kb.load(cy[0], {t, d}), kb.fmul(wt, down));
                  return SmallVector<Value>{kb.store(upd, cy[0], {t, d})};
                })[0];
                return SmallVector<Value>{cnt, y, hid};
              },
              [&] { return SmallVector<Value>(c.begin(), c.end()); });
        });

    Value y = kb.castTensor(res[1], cast<RankedTensorType>(op.getY().getType()),
                            {T, D});
    rewriter.replaceOp(op, {y, res[0]});
    return success();
  }

  using Activation = seq::Activation;
};

} // namespace

void seqc::emitExpertIndexChecks(KernelBuilder &kb, Value indices, Value T,
                                 Value K, Value E) {
  ImplicitLocOpBuilder &b = kb.builder();
  (void)b;
  auto expertAt = [&](Value t, Value j) {
    return kb.i32ToIndex(kb.load(indices, {t, j}));
  };
  // Every index is checked before any is used; the first bad one is named.
  SmallVector<Value> bad =
      kb.nest({T, K}, {kb.i1(false), kb.idx(0), kb.idx(0), kb.idx(0)},
              [&](ValueRange ivs, ValueRange c) {
                Value e = expertAt(ivs[0], ivs[1]);
                Value outside = kb.ori(kb.cmp(CmpIPredicate::slt, e, kb.idx(0)),
                                       kb.cmp(CmpIPredicate::sge, e, E));
                Value firstBad = kb.andi(outside, kb.noti(c[0]));
                return SmallVector<Value>{kb.ori(c[0], outside),
                                          kb.select(firstBad, ivs[0], c[1]),
                                          kb.select(firstBad, ivs[1], c[2]),
                                          kb.select(firstBad, e, c[3])};
              });
  kb.check(kb.noti(bad[0]),
           "expert index {2} at indices[{0}, {1}] is outside [0, {3})",
           {bad[1], bad[2], bad[3], E});
}

Value seqc::addTokenProbabilities(KernelBuilder &kb, Value logits, Value t,
                                  Value E, Value probSum) {
  Value pmx = kb.maxOver(E, [&](Value e) { return kb.load(logits, {t, e}); });
  Value pden = kb.sumOver(E, [&](Value e) {
    return kb.exp(kb.fsub(kb.load(logits, {t, e}), pmx));
  });
  return kb.loop(E, {probSum}, [&](Value e, ValueRange cp) {
    Value p = kb.fdiv(kb.exp(kb.fsub(kb.load(logits, {t, e}), pmx)), pden);
    return SmallVector<Value>{
        kb.store(kb.fadd(kb.load(cp[0], {e}), p), cp[0], {e})};
  })[0];
}

Value seqc::routeAuxLoss(KernelBuilder &kb, double coef, Value E, Value T,
                         Value firstCount, Value probSum,
                         RankedTensorType auxType) {
  Value tF = kb.indexToF32(T);
  Value dot = kb.sumOver(E, [&](Value e) {
    return kb.fmul(kb.load(firstCount, {e}), kb.load(probSum, {e}));
  });
  Value hasTokens = kb.cmp(CmpIPredicate::sgt, T, kb.idx(0));
  Value safeT = kb.select(hasTokens, tF, kb.f32(1.0));
  Value value = kb.fmul(kb.fmul(kb.f32(coef), kb.indexToF32(E)),
                        kb.fdiv(dot, kb.fmul(safeT, safeT)));
  value = kb.select(hasTokens, value, kb.f32(0.0));
  return kb.store(value, kb.empty(auxType, {}), {});
}

Value seqc::expertCapacity(KernelBuilder &kb, double cf, Value T, Value K,
                           Value E) {
  ImplicitLocOpBuilder &b = kb.builder();
  // cap = ceil(C * k * T / E) slots per expert, computed in f64; C = 0
  // means no limit (T k slots can never fill).
  if (cf <= 0.0)
    return kb.mul(T, K);
  Type f64 = b.getF64Type();
  auto toF64 = [&](Value i) {
    return arith::SIToFPOp::create(b, f64, kb.indexToI64(i)).getResult();
  };
  Value hasExperts = kb.cmp(CmpIPredicate::sgt, E, kb.idx(0));
  Value safeE = kb.select(hasExperts, E, kb.idx(1));
  Value num = arith::MulFOp::create(
      b,
      arith::MulFOp::create(
          b, arith::ConstantOp::create(b, b.getF64FloatAttr(cf)), toF64(K)),
      toF64(T));
  Value slots =
      math::CeilOp::create(b, arith::DivFOp::create(b, num, toF64(safeE)));
  Value capI = arith::FPToSIOp::create(b, b.getI64Type(), slots);
  return arith::IndexCastOp::create(b, b.getIndexType(), capI);
}

void seqc::populateReferenceMoEPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerRoute, LowerMoeFfn>(patterns.getContext());
}
