//===- CpuLinearAttention.cpp - linear attention on the CPU ---------------===//
//
// Linear attention follows the strategy's plan: chunked plans (causal, a
// scalar decay per step or none, normalized or not) are the chunked form
// (Transforms/ChunkedForm.h, lowered by CPU/CpuChunked.cpp). Per-key decays
// (GLA) and short sequences run the recurrence directly, vectorized over V.
// Non-causal attention is two products: S = S0 + k'^T V, then O = q' S
// (normalized by q' . sum k').
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuChunked.h"
#include "CPU/CpuPatterns.h"
#include "CPU/Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace seqc;
using arith::CmpIPredicate;

namespace {

struct CpuLinearAttention : OpRewritePattern<seq::LinearAttentionOp> {
  CpuLinearAttention(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::LinearAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!cpuTakesElementTypes(op))
      return rewriter.notifyMatchFailure(op, cpuElementTypesReason);
    auto qType = cast<RankedTensorType>(op.getQ().getType());
    auto vType = cast<RankedTensorType>(op.getV().getType());
    int64_t H = qType.getDimSize(2), K = qType.getDimSize(3);
    int64_t V = vType.getDimSize(3);
    if (ShapedType::isDynamic(H) || ShapedType::isDynamic(K) ||
        ShapedType::isDynamic(V))
      return rewriter.notifyMatchFailure(op, "needs static H, K and V");
    int64_t decayRank =
        op.getDecay()
            ? cast<RankedTensorType>(op.getDecay().getType()).getRank()
            : 0;
    // Chunked, recurrent or global, and the chunk size: the strategy's plan.
    TargetDescription machine = target.describe();
    FailureOr<seq::PlanAttr> followed = followPlan(op, machine, rewriter);
    if (failed(followed))
      return failure();
    seq::PlanAttr chosen = *followed;
    seq::PlanKind plan = chosen.getKind();

    // The chunked phases' preconditions (emitCpuChunked), which the plans
    // of TargetDescription::cpu keep: causal, no per-key decay.
    if (plan == seq::PlanKind::chunked && (decayRank == 4 || !op.getCausal()))
      return rewriter.notifyMatchFailure(
          op, "the CPU's chunked phases take a causal op with a scalar decay");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"];
    if (plan == seq::PlanKind::chunked) {
      ChunkedForm form = *ChunkedForm::describe(op, b, dims);
      emitCpuChunked(b, kb, target, form, Bsz, chosen.getChunk());
      rewriter.replaceOp(op, form.results(b));
      return success();
    }
    auto oType = cast<RankedTensorType>(op.getO().getType());
    auto sType = cast<RankedTensorType>(op.getLast().getType());
    Value oBuf = allocResult(b, oType, dims.of("o"));
    Value sBuf = allocResult(b, sType, dims.of("last"));
    SmallVector<Value> args{readBuffer(b, op.getQ()), readBuffer(b, op.getK()),
                            readBuffer(b, op.getV()), oBuf, sBuf};
    int decayIndex = -1, initIndex = -1;
    if (op.getDecay()) {
      decayIndex = args.size();
      args.push_back(readBuffer(b, op.getDecay()));
    }
    int bonusIndex = -1;
    if (op.getBonus()) {
      bonusIndex = args.size();
      args.push_back(readBuffer(b, op.getBonus()));
    }
    if (op.getInit()) {
      initIndex = args.size();
      args.push_back(readBuffer(b, op.getInit()));
    }
    Params p{H,
             K,
             V,
             decayRank,
             decayIndex,
             bonusIndex,
             initIndex,
             op.getFeatureMap(),
             op.getScale().convertToDouble(),
             op.getEps().convertToDouble(),
             op.getNormalize()};
    if (plan == seq::PlanKind::recurrent)
      emitRecurrent(b, kb, args, Bsz, p);
    else
      emitGlobal(b, kb, args, Bsz, p);
    rewriter.replaceOp(op,
                       {asTensor(b, oBuf, oType), asTensor(b, sBuf, sType)});
    return success();
  }

  struct Params {
    int64_t H, K, V, decayRank;
    int decayIndex, bonusIndex, initIndex;
    seq::FeatureMap phi;
    double scale, eps;
    bool normalize;
  };

  /// The log decay of step t, head h (0 without decay).
  static Value logDecay(KernelBuilder &k, ValueRange in, const Params &p,
                        Value bi, Value t, Value h) {
    if (p.decayRank == 1)
      return k.mload(in[p.decayIndex], {h});
    if (p.decayRank == 3)
      return k.mload(in[p.decayIndex], {bi, t, h});
    return k.f32(0.0);
  }

  /// S from init (or zeros) into the K x V buffer `S`.
  void loadState(KernelBuilder &k, ValueRange in, const Params &p, Value bi,
                 Value h, Value S) const {
    if (p.initIndex >= 0) {
      seqc::packRows(k, target,
                     MatrixRef{in[p.initIndex],
                               [&](Value kk, Value v) {
                                 return SmallVector<Value>{bi, h, kk, v};
                               }},
                     k.idx(p.K), p.V, S);
      return;
    }
    seqc::packRows(
        k, target, rowMajor(S), k.idx(p.K), p.V, S,
        [&](Value v, Value) { return k.vconst(0.0, target.vectorWidth); });
  }

  void storeState(KernelBuilder &k, ValueRange in, const Params &p, Value bi,
                  Value h, Value S) const {
    seqc::packRows(k, target, rowMajor(S), k.idx(p.K), p.V,
                   MatrixRef{in[4], [&](Value kk, Value v) {
                               return SmallVector<Value>{bi, h, kk, v};
                             }});
  }

  /// Copies phi(x[bi, t0 + i, h, :]) * factor(i) for i < rows into `dst`
  /// [rows x K] (vectorized over K).
  void packRows(KernelBuilder &k, const Params &p, Value src, Value bi,
                Value t0, Value h, Value rows, Value dst,
                const std::function<Value(Value)> &factor) const {
    const int64_t lanes = target.vectorWidth;
    seqc::packRows(
        k, target,
        MatrixRef{src,
                  [&](Value i, Value c) {
                    return SmallVector<Value>{bi, k.add(t0, i), h, c};
                  }},
        rows, p.K, dst, [&](Value v, Value i) {
          v = k.featureMap(p.phi, v);
          return factor ? k.fmul(v, k.splat(factor(i), lanes)) : v;
        });
  }

  /// The recurrence, vectorized over V: per step every key row of S decays
  /// (per key for GLA) and takes k'_t v_t; o_t = q'_t S (/ q'_t . z + eps).
  /// With RWKV-6's bonus u, o_t = q'_t S_{t-1} + (q'_t . (u o k'_t)) v_t:
  /// rows are read before their update, and the current term is one more
  /// running sum (in the normalizer's place: the two never combine).
  void emitRecurrent(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                     ValueRange args, Value Bsz, const Params &p) const {
    const int64_t lanes = target.vectorWidth;
    emitParallelKernel(
        b, "linear_attention_recurrent", kb.mul(Bsz, kb.idx(p.H)), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value Qm = in[0], Km = in[1], Vm = in[2], O = in[3];
          Value nT = k.mdim(Qm, 1);
          Value h = k.rems(task, k.idx(p.H)), bi = k.divs(task, k.idx(p.H));
          Value S = k.stackBuffer({p.K, p.V});
          Value z = k.stackBuffer({roundUp(p.K, lanes)});
          Value bonus = p.bonusIndex >= 0 ? in[p.bonusIndex] : Value();
          loadState(k, in, p, bi, h, S);
          for (int64_t c0 = 0; c0 < roundUp(p.K, lanes); c0 += lanes)
            k.vstore(k.vconst(0.0, lanes), z, {k.idx(c0)});
          Value scale = k.f32(p.scale);
          k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
            SmallVector<Value> masks, vs, os;
            for (int64_t v0 = 0; v0 < p.V; v0 += lanes) {
              masks.push_back(k.vmask(k.idx(p.V - v0), lanes));
              vs.push_back(k.vloadMasked(Vm, {bi, t, h, k.idx(v0)}, lanes,
                                         masks.back()));
              os.push_back(k.vconst(0.0, lanes));
            }
            Value scalarDecay = p.decayRank == 4
                                    ? Value()
                                    : k.exp(logDecay(k, in, p, bi, t, h));
            SmallVector<Value> init(os);
            init.push_back(k.f32(0.0)); // q' . z
            SmallVector<Value> acc =
                k.loop(k.idx(p.K), init, [&](Value kk, ValueRange c) {
                  Value f =
                      scalarDecay
                          ? scalarDecay
                          : k.exp(k.mload(in[p.decayIndex], {bi, t, h, kk}));
                  Value kp = k.featureMap(p.phi, k.mload(Km, {bi, t, h, kk}));
                  Value qp = k.fmul(
                      k.featureMap(p.phi, k.mload(Qm, {bi, t, h, kk})), scale);
                  Value fs = k.splat(f, lanes), ks = k.splat(kp, lanes);
                  Value qv = k.splat(qp, lanes);
                  SmallVector<Value> next;
                  for (size_t v = 0; v < vs.size(); ++v) {
                    SmallVector<Value> at{kk, k.idx(v * lanes)};
                    Value old = k.vloadMasked(S, at, lanes, masks[v]);
                    Value s = k.vfma(ks, vs[v], k.fmul(fs, old));
                    k.vstoreMasked(s, S, at, masks[v]);
                    next.push_back(k.vfma(qv, bonus ? old : s, c[v]));
                  }
                  if (bonus) {
                    Value uk = k.fmul(k.mload(bonus, {h, kk}), kp);
                    next.push_back(k.fadd(c.back(), k.fmul(qp, uk)));
                    return next;
                  }
                  Value zk = k.fadd(k.fmul(f, k.mload(z, {kk})), kp);
                  k.mstore(zk, z, {kk});
                  next.push_back(k.fadd(c.back(), k.fmul(qp, zk)));
                  return next;
                });
            Value inv, current;
            if (p.normalize)
              inv = k.splat(
                  k.fdiv(k.f32(1.0), k.fadd(acc.back(), k.f32(p.eps))), lanes);
            if (bonus)
              current = k.splat(acc.back(), lanes);
            for (size_t v = 0; v < vs.size(); ++v) {
              Value o = inv ? k.fmul(acc[v], inv) : acc[v];
              if (current)
                o = k.vfma(current, vs[v], o);
              k.vstoreMasked(o, O, {bi, t, h, k.idx(v * lanes)}, masks[v]);
            }
          });
          storeState(k, in, p, bi, h, S);
        });
  }

  /// Non-causal: S = S0 + k'^T V over the whole sequence, then O = q' S.
  void emitGlobal(ImplicitLocOpBuilder &b, KernelBuilder &kb, ValueRange args,
                  Value Bsz, const Params &p) const {
    const int64_t lanes = target.vectorWidth;
    const int64_t block = 64;
    emitParallelKernel(
        b, "linear_attention_global", kb.mul(Bsz, kb.idx(p.H)), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value Qm = in[0], Km = in[1], Vm = in[2], O = in[3];
          Value nT = k.mdim(Qm, 1);
          Value h = k.rems(task, k.idx(p.H)), bi = k.divs(task, k.idx(p.H));
          Value S = k.stackBuffer({p.K, p.V});
          Value zs = k.stackBuffer({roundUp(p.K, lanes)});
          Value rows = k.stackBuffer({block, p.K});
          Value outRows = k.stackBuffer({block, p.V});
          loadState(k, in, p, bi, h, S);
          for (int64_t c0 = 0; c0 < roundUp(p.K, lanes); c0 += lanes)
            k.vstore(k.vconst(0.0, lanes), zs, {k.idx(c0)});
          Value nBlocks = k.divs(k.add(nT, k.idx(block - 1)), k.idx(block));
          // S += k'^T V, z = sum k', block by block.
          k.forEach(k.idx(0), nBlocks, k.idx(1), [&](Value c) {
            Value t0 = k.mul(c, k.idx(block));
            Value len = k.mins(k.idx(block), k.sub(nT, t0));
            packRows(k, p, Km, bi, t0, h, len, rows, nullptr);
            k.forEach(k.idx(0), len, k.idx(1), [&](Value j) {
              for (int64_t c0 = 0; c0 < p.K; c0 += lanes) {
                Value mask = k.vmask(k.idx(p.K - c0), lanes);
                Value s =
                    k.fadd(k.vloadMasked(zs, {k.idx(c0)}, lanes, mask),
                           k.vloadMasked(rows, {j, k.idx(c0)}, lanes, mask));
                k.vstoreMasked(s, zs, {k.idx(c0)}, mask);
              }
            });
            MatrixRef vRows{Vm, [&](Value j, Value v) {
                              return SmallVector<Value>{bi, k.add(t0, j), h, v};
                            }};
            emitGemm(k, target, {k.idx(p.K), k.idx(p.V), len}, transposed(rows),
                     vRows, rowMajor(S), GemmMode::Accumulate);
          });
          // O = q' S (normalized by q' . z + eps).
          Value scale = k.f32(p.scale);
          k.forEach(k.idx(0), nBlocks, k.idx(1), [&](Value c) {
            Value t0 = k.mul(c, k.idx(block));
            Value len = k.mins(k.idx(block), k.sub(nT, t0));
            packRows(k, p, Qm, bi, t0, h, len, rows,
                     [&](Value) { return scale; });
            emitGemm(k, target, {len, k.idx(p.V), k.idx(p.K)}, rowMajor(rows),
                     rowMajor(S), rowMajor(outRows), GemmMode::Overwrite);
            // The f32 rows (normalized) rounded once into o.
            k.forEach(k.idx(0), len, k.idx(1), [&](Value i) {
              Value inv;
              if (p.normalize) {
                Value dot = k.loop(
                    k.idx(p.K), {k.f32(0.0)}, [&](Value kk, ValueRange a) {
                      return SmallVector<Value>{
                          k.fadd(a[0], k.fmul(k.mload(rows, {i, kk}),
                                              k.mload(zs, {kk})))};
                    })[0];
                inv = k.splat(k.fdiv(k.f32(1.0), k.fadd(dot, k.f32(p.eps))),
                              lanes);
              }
              for (int64_t v0 = 0; v0 < p.V; v0 += lanes) {
                Value mask = k.vmask(k.idx(p.V - v0), lanes);
                Value o = k.vloadMasked(outRows, {i, k.idx(v0)}, lanes, mask);
                k.vstoreMasked(inv ? k.fmul(o, inv) : o, O,
                               {bi, k.add(t0, i), h, k.idx(v0)}, mask);
              }
            });
          });
          storeState(k, in, p, bi, h, S);
        });
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuLinearAttentionPatterns(RewritePatternSet &patterns,
                                              const CpuTarget &target) {
  patterns.add<CpuLinearAttention>(patterns.getContext(), target);
}
