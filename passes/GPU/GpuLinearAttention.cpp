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

/// One block of the recurrence: a (batch, head) pair's steps in order over
/// its state S [K x C] (C = V, or V + 1 with `normalize`: column V is z,
/// fed ones), with the kernel's arguments by name.
class RecurrentBlock {
public:
  RecurrentBlock(GpuBlock &blk, const LinearAttentionForm &form,
                 const LinearAttentionBuffers &present, ValueRange in)
      : blk(blk), k(blk.kb), form(form), q(in[0]), keys(in[1]), values(in[2]),
        out(in[3]), last(in[4]), state(in[5]), numerators(in[6]) {
    size_t next = 7;
    decay = present.decay ? in[next++] : Value();
    bonus = present.bonus ? in[next++] : Value();
    init = present.init ? in[next++] : Value();
    nT = k.mdim(q, 1);
    nH = k.mdim(q, 2);
    nK = k.mdim(q, 3);
    nV = k.mdim(values, 3);
    nC = form.normalize ? k.add(nV, k.idx(1)) : nV;
    h = k.rems(blk.blockId, nH);
    bi = k.divs(blk.blockId, nH);
  }

  void emit() {
    initState();
    k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
      // With a bonus the numerators read the state before the update.
      if (bonus)
        storeNumerators(t);
      updateState(t);
      if (!bonus)
        storeNumerators(t);
      storeOutputs(t);
    });
    storeLast();
  }

private:
  Value below(Value a, Value c) { return k.cmp(CmpIPredicate::slt, a, c); }
  Value queryPrime(Value t, Value kk) {
    return k.fmul(k.featureMap(form.phi, k.mload(q, {bi, t, h, kk})),
                  k.f32(form.scale));
  }
  Value keyPrime(Value t, Value kk) {
    return k.featureMap(form.phi, k.mload(keys, {bi, t, h, kk}));
  }

  /// S from init's (0 where there is none, and in z's column).
  void initState() {
    blk.phase2(nK, nC, [&](Value kk, Value c) {
      Value s0 = init ? k.loadIf(below(c, nV), init, {bi, h, kk, c}, k.f32(0.0))
                      : k.f32(0.0);
      k.mstore(s0, state, {bi, h, kk, c});
    });
  }

  /// num[c] = sum_k q'[k] S[k, c] (a thread per c), plus with a bonus u the
  /// current step's term (q' . (u o k')) v[c].
  void storeNumerators(Value t) {
    blk.phase(nC, [&](Value c) {
      auto sums =
          k.loop(nK, {k.f32(0.0), k.f32(0.0)}, [&](Value kk, ValueRange it) {
            Value qp = queryPrime(t, kk);
            Value fromState =
                k.fadd(it[0], k.fmul(qp, k.mload(state, {bi, h, kk, c})));
            if (!bonus)
              return SmallVector<Value>{fromState, it[1]};
            Value kp = keyPrime(t, kk);
            Value uk = k.fmul(k.mload(bonus, {h, kk}), kp);
            return SmallVector<Value>{fromState, k.fadd(it[1], k.fmul(qp, uk))};
          });
      Value num = sums[0];
      if (bonus)
        num = k.fadd(num, k.fmul(sums[1], k.mload(values, {bi, t, h, c})));
      k.mstore(num, numerators, {bi, h, c});
    });
  }

  /// S[k, c] = exp(g_k) S[k, c] + k'[k] v[c] (a thread per (k, c)).
  void updateState(Value t) {
    blk.phase2(nK, nC, [&](Value kk, Value c) {
      Value f = k.f32(1.0);
      if (decay) {
        SmallVector<Value> at{h};
        if (form.decayRank == 3)
          at = {bi, t, h};
        else if (form.decayRank == 4)
          at = {bi, t, h, kk};
        f = k.exp(k.mload(decay, at));
      }
      Value v =
          k.select(below(c, nV),
                   k.loadIf(below(c, nV), values, {bi, t, h, c}, k.f32(0.0)),
                   k.f32(1.0));
      Value kp = keyPrime(t, kk);
      Value s =
          k.fadd(k.fmul(f, k.mload(state, {bi, h, kk, c})), k.fmul(kp, v));
      k.mstore(s, state, {bi, h, kk, c});
    });
  }

  /// o = num[:V], divided by num[V] + eps with `normalize`.
  void storeOutputs(Value t) {
    blk.phase(nV, [&](Value c) {
      Value o = k.mload(numerators, {bi, h, c});
      if (form.normalize)
        o = k.fdiv(o,
                   k.fadd(k.mload(numerators, {bi, h, nV}), k.f32(form.eps)));
      k.mstore(o, out, {bi, t, h, c});
    });
  }

  /// `last`, the state after the final step.
  void storeLast() {
    blk.phase2(
        nK, nV,
        [&](Value kk, Value c) {
          k.mstore(k.mload(state, {bi, h, kk, c}), last, {bi, h, kk, c});
        },
        /*barrier=*/false);
  }

  GpuBlock &blk;
  KernelBuilder &k;
  const LinearAttentionForm &form;
  Value q, keys, values, out, last, state, numerators, decay, bonus, init;
  Value nT, nH, nK, nV, nC, h, bi;
};

/// The recurrence (the plan for decode and short sequences): a block per
/// (batch, head) runs the steps in order, each in three phases (the
/// numerators, the state's update, the outputs; RecurrentBlock) over the
/// state (f32, in `state`, the numerators in `numerators`).
void emitLinearAttentionRecurrent(ImplicitLocOpBuilder &b,
                                  const GpuTarget &target,
                                  const LinearAttentionBuffers &buf,
                                  const LinearAttentionForm &form, Value state,
                                  Value numerators, Value blocks) {
  SmallVector<Value> args{buf.q,    buf.k, buf.v,     buf.o,
                          buf.last, state, numerators};
  for (Value optional : {buf.decay, buf.bonus, buf.init})
    if (optional)
      args.push_back(optional);
  emitGpuKernel(b, target, "linear_attention_recurrent", blocks, args, {},
                [&](GpuBlock &blk, ValueRange in, ValueRange) {
                  RecurrentBlock(blk, form, buf, in).emit();
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
        b, target,
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
