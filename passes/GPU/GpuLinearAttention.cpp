//===- GpuLinearAttention.cpp - linear attention on the GPU ---------------===//
//
// Linear attention follows the strategy's plan (Transforms/Strategy.h): the
// recurrence, a block per (batch, head), for decode and short sequences;
// else the chunked form (Transforms/ChunkedForm.h, lowered by
// GPU/GpuChunked.cpp) with chunks of 16 or 32 steps, also for per-key
// decays, `normalize` and non-causal attention.
//
//===----------------------------------------------------------------------===//

#include "Common/Kernels.h"
#include "GPU/GpuChunked.h"
#include "GPU/GpuPatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace seqc;

namespace {

using arith::CmpIPredicate;

/// The operands of one seq.linear_attention as buffers; optional ones are
/// null.
struct LinearAttentionBuffers {
  Value q, k, v, o, last;
  Value decay, bonus, init;
};

/// What the recurrence needs of the op's attributes.
struct LinearAttentionForm {
  seq::FeatureMap phi;
  double scale, eps;
  bool normalize;
  int64_t decayRank;
};

/// The recurrence (the plan for decode and short sequences): a block per
/// (batch, head) runs the steps in order, each in two phases over the state
/// S [K x Vx] (f32, in `state`; with `normalize` column V is z, fed ones):
///   S[k, c] = exp(g_k) S[k, c] + k'[k] v[c]      (a thread per (k, c))
///   num[c] = sum_k q'[k] S[k, c]                (a thread per c)
/// and o = num[:V], divided by num[V] + eps with `normalize`. With RWKV-6's
/// bonus u the numerators read the state before the update, plus the
/// current term (q' . (u o k')) v[c].
void emitLinearAttentionRecurrent(ImplicitLocOpBuilder &b,
                                  const GpuTarget &target, KernelBuilder &kb,
                                  const LinearAttentionBuffers &buf,
                                  const LinearAttentionForm &form, Value state,
                                  Value numerators, Value blocks) {
  SmallVector<Value> args{buf.q,    buf.k, buf.v,     buf.o,
                          buf.last, state, numerators};
  if (buf.decay)
    args.push_back(buf.decay);
  if (buf.bonus)
    args.push_back(buf.bonus);
  if (buf.init)
    args.push_back(buf.init);
  emitGpuKernel(
      b, target, "linear_attention_recurrent", blocks, args, {},
      [&](GpuBlock &blk, ValueRange in, ValueRange) {
        KernelBuilder &k = blk.kb;
        Value q = in[0], km = in[1], vm = in[2], o = in[3], last = in[4],
              st = in[5], numStore = in[6];
        size_t next = 7;
        Value g = buf.decay ? in[next++] : Value();
        Value bonus = buf.bonus ? in[next++] : Value();
        Value init = buf.init ? in[next++] : Value();
        Value nT = k.mdim(q, 1), nH = k.mdim(q, 2), nK = k.mdim(q, 3),
              nV = k.mdim(vm, 3);
        Value nC = form.normalize ? k.add(nV, k.idx(1)) : nV;
        Value h = k.rems(blk.blockId, nH), bi = k.divs(blk.blockId, nH);
        auto lt = [&](Value a, Value c) {
          return k.cmp(CmpIPredicate::slt, a, c);
        };
        blk.phase2(nK, nC, [&](Value kk, Value c) {
          Value s0 = init
                         ? k.loadIf(lt(c, nV), init, {bi, h, kk, c}, k.f32(0.0))
                         : k.f32(0.0);
          k.mstore(s0, st, {bi, h, kk, c});
        });
        k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
          auto numerators = [&] {
            blk.phase(nC, [&](Value c) {
              auto sums = k.loop(
                  nK, {k.f32(0.0), k.f32(0.0)}, [&](Value kk, ValueRange it) {
                    Value qp = k.fmul(
                        k.featureMap(form.phi, k.mload(q, {bi, t, h, kk})),
                        k.f32(form.scale));
                    Value state =
                        k.fadd(it[0], k.fmul(qp, k.mload(st, {bi, h, kk, c})));
                    if (!bonus)
                      return SmallVector<Value>{state, it[1]};
                    Value kp =
                        k.featureMap(form.phi, k.mload(km, {bi, t, h, kk}));
                    Value uk = k.fmul(k.mload(bonus, {h, kk}), kp);
                    return SmallVector<Value>{state,
                                              k.fadd(it[1], k.fmul(qp, uk))};
                  });
              Value num = sums[0];
              if (bonus)
                num = k.fadd(num, k.fmul(sums[1], k.mload(vm, {bi, t, h, c})));
              k.mstore(num, numStore, {bi, h, c});
            });
          };
          if (bonus)
            numerators();
          blk.phase2(nK, nC, [&](Value kk, Value c) {
            Value f = k.f32(1.0);
            if (g) {
              SmallVector<Value> at{h};
              if (form.decayRank == 3)
                at = {bi, t, h};
              else if (form.decayRank == 4)
                at = {bi, t, h, kk};
              f = k.exp(k.mload(g, at));
            }
            Value kp = k.featureMap(form.phi, k.mload(km, {bi, t, h, kk}));
            Value val = k.select(
                lt(c, nV), k.loadIf(lt(c, nV), vm, {bi, t, h, c}, k.f32(0.0)),
                k.f32(1.0));
            Value s =
                k.fadd(k.fmul(f, k.mload(st, {bi, h, kk, c})), k.fmul(kp, val));
            k.mstore(s, st, {bi, h, kk, c});
          });
          if (!bonus)
            numerators();
          blk.phase(nV, [&](Value c) {
            Value out = k.mload(numStore, {bi, h, c});
            if (form.normalize)
              out = k.fdiv(
                  out, k.fadd(k.mload(numStore, {bi, h, nV}), k.f32(form.eps)));
            k.mstore(out, o, {bi, t, h, c});
          });
        });
        blk.phase2(
            nK, nV,
            [&](Value kk, Value c) {
              k.mstore(k.mload(st, {bi, h, kk, c}), last, {bi, h, kk, c});
            },
            /*barrier=*/false);
      });
}

struct GpuLinearAttention : OpRewritePattern<seq::LinearAttentionOp> {
  GpuLinearAttention(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::LinearAttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!allFloat(op))
      return rewriter.notifyMatchFailure(
          op, "needs float (f32, f16, bf16) operands");
    TargetDescription machine = target.describe();
    FailureOr<seq::PlanAttr> followed = followPlan(op, machine, rewriter);
    if (failed(followed))
      return failure();
    seq::PlanAttr plan = *followed;
    Value decay = op.getDecay();
    int64_t decayRank =
        decay ? cast<RankedTensorType>(decay.getType()).getRank() : 0;
    int64_t kStatic = cast<RankedTensorType>(op.getQ().getType()).getDimSize(3);
    // Per-channel decays keep a Q x K table of cumulative decays in shared
    // memory (the chunked kernels; the recurrence has no such bound).
    if (plan.getKind() != seq::PlanKind::recurrent && decayRank == 4 &&
        (ShapedType::isDynamic(kStatic) || kStatic > gpuChunkedMaxKeyDecay))
      return rewriter.notifyMatchFailure(
          op,
          "a per-channel decay needs a static K of at most 128 (chunked plan)");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    if (plan.getKind() != seq::PlanKind::recurrent) {
      // The chunked form; non-causal attention sums its chunk states with
      // the same kernels, in chunks as large as the kernels take.
      int64_t chunk = plan.getKind() == seq::PlanKind::chunked
                          ? plan.getChunk()
                          : machine.linearAttentionChunks.max;
      Type mmaType = target.tensorCoreType({op.getQ(), op.getK(), op.getV()},
                                           /*allowF16=*/false);
      ChunkedForm form = *ChunkedForm::describe(op, b, dims);
      emitGpuChunked(b, kb, target, form, mmaType, chunk);
      rewriter.replaceOp(op, form.results(b));
      return success();
    }
    Value Bsz = dims["B"], H = dims["H"], K = dims["K"], V = dims["V"];
    bool normalize = op.getNormalize();
    Value Vx = normalize ? kb.add(V, kb.idx(1)) : V; // value columns carried
    auto f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    auto oType = cast<RankedTensorType>(op.getO().getType());
    auto lastType = cast<RankedTensorType>(op.getLast().getType());
    Value oBuf = allocBuffer(b, oType, dims.of("o"));
    Value lastBuf = allocBuffer(b, lastType, dims.of("last"));
    Value state = allocBuffer(
        b, RankedTensorType::get({dyn, dyn, dyn, dyn}, f32), {Bsz, H, K, Vx});
    Value numerators = allocBuffer(
        b, RankedTensorType::get({dyn, dyn, dyn}, f32), {Bsz, H, Vx});
    emitLinearAttentionRecurrent(
        b, target, kb,
        {readBuffer(b, op.getQ()), readBuffer(b, op.getK()),
         readBuffer(b, op.getV()), oBuf, lastBuf,
         decay ? readBuffer(b, decay) : Value(),
         op.getBonus() ? readBuffer(b, op.getBonus()) : Value(),
         op.getInit() ? readBuffer(b, op.getInit()) : Value()},
        {op.getFeatureMap(), op.getScale().convertToDouble(),
         op.getEps().convertToDouble(), normalize, decayRank},
        state, numerators, kb.mul(Bsz, H));
    rewriter.replaceOp(
        op, {asTensor(b, oBuf, oType), asTensor(b, lastBuf, lastType)});
    return success();
  }

  GpuTarget target;
};

} // namespace

void seqc::populateGpuLinearAttentionPatterns(RewritePatternSet &patterns,
                                              const GpuTarget &target) {
  patterns.add<GpuLinearAttention>(patterns.getContext(), target);
}
