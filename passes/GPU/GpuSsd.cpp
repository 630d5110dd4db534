//===- GpuSsd.cpp - Mamba-2 SSD on the GPU --------------------------------===//
//
// SSD follows the strategy's plan (Transforms/Strategy.h): the recurrence,
// a thread per (batch, head, p), for decode and short sequences; else the
// chunked form (Transforms/ChunkedForm.h) with chunks of Q steps (16 to
// 64), lowered by GPU/GpuChunked.cpp.
//
//===----------------------------------------------------------------------===//

#include "Common/Kernels.h"
#include "GPU/GpuChunked.h"
#include "GPU/GpuPatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace seqc;

namespace {

/// The operands of one seq.ssd as buffers; optional ones are null.
struct SsdBuffers {
  Value x, dt, a, b, c, y, last;
  Value bias, skip, gate, init;
};

/// The recurrence (the plan for decode and short sequences): a thread per
/// (batch, head, p) runs the steps in order over its row S[p, :] of the
/// state, kept in f32 in `state`:
///   S[p, n] = exp(dt A) S[p, n] + dt B[n] x[p];  y[p] = sum_n C[n] S[p, n]
/// then y = (y + D x) silu(z), and `last` is the final state.
void emitSsdRecurrent(ImplicitLocOpBuilder &b, const GpuTarget &target,
                      KernelBuilder &kb, const SsdBuffers &buf, Value state,
                      Value items, const SsdStepSize &stepSize) {
  SmallVector<Value> args{buf.x, buf.dt, buf.a,    buf.b,
                          buf.c, buf.y,  buf.last, state};
  // Optional operands follow the fixed ones, in this order.
  SmallVector<Value> optional{buf.bias, buf.skip, buf.gate, buf.init};
  for (Value v : optional)
    if (v)
      args.push_back(v);
  emitItemKernel(
      b, target, "ssd_recurrent", kb, items, args,
      [&](KernelBuilder &k, Value item, ValueRange in) {
        Value x = in[0], dt = in[1], a = in[2], bm = in[3], cm = in[4],
              y = in[5], last = in[6], st = in[7];
        size_t next = 8;
        auto take = [&](Value present) {
          return present ? in[next++] : Value();
        };
        Value bias = take(buf.bias), skip = take(buf.skip),
              gate = take(buf.gate), init = take(buf.init);
        // D per head, or per head and channel (H x P).
        bool perChannelSkip =
            skip && cast<ShapedType>(skip.getType()).getRank() == 2;
        Value nT = k.mdim(x, 1), nH = k.mdim(x, 2), nP = k.mdim(x, 3);
        Value nG = k.mdim(bm, 2), nN = k.mdim(bm, 3);
        Value p = k.rems(item, nP), rest = k.divs(item, nP);
        Value h = k.rems(rest, nH), bi = k.divs(rest, nH);
        Value g = k.divs(h, k.divs(nH, nG));
        k.forEach(k.idx(0), nN, k.idx(1), [&](Value n) {
          Value s0 = init ? k.mload(init, {bi, h, p, n}) : k.f32(0.0);
          k.mstore(s0, st, {bi, h, p, n});
        });
        Value ah = k.mload(a, {h});
        k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
          Value d = stepSize.apply(k, k.mload(dt, {bi, t, h}),
                                   bias ? k.mload(bias, {h}) : Value());
          Value decay = k.exp(k.fmul(d, ah));
          Value xv = k.mload(x, {bi, t, h, p});
          Value dx = k.fmul(d, xv);
          auto acc = k.loop(nN, {k.f32(0.0)}, [&](Value n, ValueRange it) {
            Value s = k.fadd(k.fmul(decay, k.mload(st, {bi, h, p, n})),
                             k.fmul(dx, k.mload(bm, {bi, t, g, n})));
            k.mstore(s, st, {bi, h, p, n});
            return SmallVector<Value>{
                k.fadd(it[0], k.fmul(k.mload(cm, {bi, t, g, n}), s))};
          });
          Value yv = acc[0];
          if (skip)
            yv = k.fadd(yv, k.fmul(perChannelSkip ? k.mload(skip, {h, p})
                                                  : k.mload(skip, {h}),
                                   xv));
          if (gate)
            yv = k.fmul(yv, k.silu(k.mload(gate, {bi, t, h, p})));
          k.mstore(yv, y, {bi, t, h, p});
        });
        k.forEach(k.idx(0), nN, k.idx(1), [&](Value n) {
          k.mstore(k.mload(st, {bi, h, p, n}), last, {bi, h, p, n});
        });
      });
}

struct GpuSsd : OpRewritePattern<seq::SsdOp> {
  GpuSsd(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::SsdOp op,
                                PatternRewriter &rewriter) const override {
    if (!allFloat(op))
      return rewriter.notifyMatchFailure(
          op, "needs float (f32, f16, bf16) operands");
    TargetDescription machine = target.describe();
    FailureOr<seq::PlanAttr> followed = followPlan(op, machine, rewriter);
    if (failed(followed))
      return failure();
    seq::PlanAttr plan = *followed;
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    if (plan.getKind() == seq::PlanKind::chunked) {
      Type mmaType = target.tensorCoreType({op.getX(), op.getB(), op.getC()},
                                           /*allowF16=*/false);
      ChunkedForm form = *ChunkedForm::describe(op, b, dims);
      emitGpuChunked(b, kb, target, form, mmaType, plan.getChunk());
      rewriter.replaceOp(op, form.results(b));
      return success();
    }
    Value Bsz = dims["B"], H = dims["H"], P = dims["P"], N = dims["N"];
    auto yType = cast<RankedTensorType>(op.getY().getType());
    auto lastType = cast<RankedTensorType>(op.getLast().getType());
    SsdBuffers buffers{readBuffer(b, op.getX()),
                       readBuffer(b, op.getDt()),
                       readBuffer(b, op.getA()),
                       readBuffer(b, op.getB()),
                       readBuffer(b, op.getC()),
                       allocBuffer(b, yType, dims.of("y")),
                       allocBuffer(b, lastType, dims.of("last")),
                       op.getDtBias() ? readBuffer(b, op.getDtBias()) : Value(),
                       op.getSkip() ? readBuffer(b, op.getSkip()) : Value(),
                       op.getGate() ? readBuffer(b, op.getGate()) : Value(),
                       op.getInit() ? readBuffer(b, op.getInit()) : Value()};
    int64_t dyn = ShapedType::kDynamic;
    Value state = allocBuffer(
        b, RankedTensorType::get({dyn, dyn, dyn, dyn}, b.getF32Type()),
        {Bsz, H, P, N});
    emitSsdRecurrent(b, target, kb, buffers, state, kb.mul(kb.mul(Bsz, H), P),
                     SsdStepSize::of(op));
    rewriter.replaceOp(op, {asTensor(b, buffers.y, yType),
                            asTensor(b, buffers.last, lastType)});
    return success();
  }

  GpuTarget target;
};

} // namespace

void seqc::populateGpuSsdPatterns(RewritePatternSet &patterns,
                                  const GpuTarget &target) {
  patterns.add<GpuSsd>(patterns.getContext(), target);
}
