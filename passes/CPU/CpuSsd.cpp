//===- CpuSsd.cpp - Mamba-2 SSD on the CPU --------------------------------===//
//
// SSD follows the strategy's plan: chunked plans are the chunked form
// (Transforms/ChunkedForm.h, lowered by CPU/CpuChunked.cpp); short
// sequences (decode, T < 16) run the recurrence directly, a task per
// (batch, head), vectorized over N with the state in `last` itself.
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuChunked.h"
#include "CPU/CpuPatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace seqc;
using arith::CmpIPredicate;

namespace {

/// seq.ssd's operands as a kernel sees them (optional ones null if absent).
struct SsdOperands : KernelBuffers<SsdOperands> {
  Value x, dt, a, b, c, y, last;
  Value skip, gate, bias, init;

  SmallVector<Value *> fields() {
    return {&x, &dt, &a, &b, &c, &y, &last, &skip, &gate, &bias, &init};
  }
};

struct CpuSsd : OpRewritePattern<seq::SsdOp> {
  CpuSsd(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::SsdOp op,
                                PatternRewriter &rewriter) const override {
    if (!cpuTakesElementTypes(op))
      return rewriter.notifyMatchFailure(op, cpuElementTypesReason);
    auto xType = cast<RankedTensorType>(op.getX().getType());
    auto bType = cast<RankedTensorType>(op.getB().getType());
    int64_t H = xType.getDimSize(2), P = xType.getDimSize(3);
    int64_t G = bType.getDimSize(2), N = bType.getDimSize(3);
    if (ShapedType::isDynamic(H) || ShapedType::isDynamic(P) ||
        ShapedType::isDynamic(G) || ShapedType::isDynamic(N) || H % G != 0)
      return rewriter.notifyMatchFailure(op, "needs static H, P, G and N");
    const int64_t lanes = target.vectorWidth;
    // Recurrent or chunked, and the chunk size: the strategy's plan.
    TargetDescription machine = target.describe();
    FailureOr<seq::PlanAttr> followed = followPlan(op, machine, rewriter);
    if (failed(followed))
      return failure();
    seq::PlanAttr plan = *followed;
    bool recurrent = plan.getKind() == seq::PlanKind::recurrent;

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"];
    if (!recurrent) {
      ChunkedForm form = *ChunkedForm::describe(op, b, dims);
      emitCpuChunked(b, kb, target, form, Bsz, plan.getChunk());
      rewriter.replaceOp(op, form.results(b));
      return success();
    }

    auto yType = cast<RankedTensorType>(op.getY().getType());
    auto lastType = cast<RankedTensorType>(op.getLast().getType());
    Value yBuf = allocResult(b, yType, dims.of("y"));
    Value lastBuf = allocResult(b, lastType, dims.of("last"));
    SsdOperands io;
    io.x = readBuffer(b, op.getX());
    io.dt = readBuffer(b, op.getDt());
    io.a = readBuffer(b, op.getA());
    io.b = readBuffer(b, op.getB());
    io.c = readBuffer(b, op.getC());
    io.y = yBuf;
    io.last = lastBuf;
    io.skip = readOptionalBuffer(b, op.getSkip());
    io.gate = readOptionalBuffer(b, op.getGate());
    io.bias = readOptionalBuffer(b, op.getDtBias());
    io.init = readOptionalBuffer(b, op.getInit());

    int64_t headsPerGroup = H / G;

    SsdStepSize stepSize = SsdStepSize::of(op);
    auto stepDt = [&](KernelBuilder &k, const SsdOperands &my, Value bi,
                      Value t, Value h) {
      return stepSize.apply(k, k.mload(my.dt, {bi, t, h}),
                            my.bias ? k.mload(my.bias, {h}) : Value());
    };
    bool skipPerChannel =
        op.getSkip() &&
        cast<RankedTensorType>(op.getSkip().getType()).getRank() == 2;
    // y[bi, t, h, :] = (y + D x) * silu(z) from the f32 row `yRow`,
    // vectorized over P: rounded once to y's type.
    auto finishRow = [&](KernelBuilder &k, const SsdOperands &my, Value bi,
                         Value t, Value h, Value yRow) {
      Value skip = my.skip, gate = my.gate;
      Value d = skip && !skipPerChannel ? k.splat(k.mload(skip, {h}), lanes)
                                        : Value();
      for (int64_t p0 = 0; p0 < P; p0 += lanes) {
        Value mask = k.vmask(k.idx(P - p0), lanes);
        SmallVector<Value> at{bi, t, h, k.idx(p0)};
        Value y = k.vloadMasked(yRow, {k.idx(p0)}, lanes, mask);
        if (skip && skipPerChannel)
          d = k.vloadMasked(skip, {h, k.idx(p0)}, lanes, mask);
        if (d)
          y = k.vfma(d, k.vloadMasked(my.x, at, lanes, mask), y);
        if (gate)
          y = k.fmul(y, k.silu(k.vloadMasked(gate, at, lanes, mask)));
        k.vstoreMasked(y, my.y, at, mask);
      }
    };
    emitRecurrent(b, kb, io, Bsz, H, P, N, headsPerGroup, stepDt, finishRow);
    rewriter.replaceOp(
        op, {asTensor(b, yBuf, yType), asTensor(b, lastBuf, lastType)});
    return success();
  }

  using StepDt = std::function<Value(KernelBuilder &, const SsdOperands &,
                                     Value, Value, Value)>;
  using FinishRowFn = std::function<void(KernelBuilder &, const SsdOperands &,
                                         Value, Value, Value, Value)>;

  /// The recurrence step by step (decode), one task per (batch, head). The
  /// state lives in `last` itself, in its [P, N] layout, vectorized over N:
  /// a decode step reads the carried state once and writes it once.
  void emitRecurrent(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                     const SsdOperands &io, Value Bsz, int64_t H, int64_t P,
                     int64_t N, int64_t headsPerGroup, const StepDt &stepDt,
                     const FinishRowFn &finishRow) const {
    const int64_t lanes = target.vectorWidth;
    emitParallelKernel(
        b, "ssd_recurrent", kb.mul(Bsz, kb.idx(H)), io.list(),
        [&](KernelBuilder &k, Value task, ValueRange in) {
          SsdOperands my = io.rebind(in);
          Value X = my.x, Am = my.a, Bm = my.b, Cm = my.c, Last = my.last;
          Value nT = k.mdim(X, 1);
          Value h = k.rems(task, k.idx(H)), bi = k.divs(task, k.idx(H));
          Value g = k.divs(h, k.idx(headsPerGroup));
          Value aH = k.mload(Am, {h});
          // Step t's output row in f32, finished into y.
          Value yRow = k.stackBuffer({roundUp(P, lanes)});
          SmallVector<Value> masks;
          for (int64_t n0 = 0; n0 < N; n0 += lanes)
            masks.push_back(k.vmask(k.idx(N - n0), lanes));
          // Step t reads the state from `from` and writes it to Last.
          auto step = [&](Value t, Value from) {
            Value dt = stepDt(k, my, bi, t, h);
            Value decay = k.splat(k.exp(k.fmul(dt, aH)), lanes);
            SmallVector<Value> bv, cv;
            for (size_t v = 0; v < masks.size(); ++v) {
              Value n0 = k.idx(v * lanes);
              bv.push_back(k.vloadMasked(Bm, {bi, t, g, n0}, lanes, masks[v]));
              cv.push_back(k.vloadMasked(Cm, {bi, t, g, n0}, lanes, masks[v]));
            }
            k.forEach(k.idx(0), k.idx(P), k.idx(1), [&](Value p) {
              Value xdt = k.splat(k.fmul(k.mload(X, {bi, t, h, p}), dt), lanes);
              Value acc = k.vconst(0.0, lanes);
              for (size_t v = 0; v < masks.size(); ++v) {
                SmallVector<Value> at{bi, h, p, k.idx(v * lanes)};
                Value s = from ? k.vloadMasked(from, at, lanes, masks[v])
                               : k.vconst(0.0, lanes);
                s = k.vfma(xdt, bv[v], k.fmul(decay, s));
                k.vstoreMasked(s, Last, at, masks[v]);
                acc = k.vfma(cv[v], s, acc);
              }
              k.mstore(k.hsum(acc), yRow, {p});
            });
            finishRow(k, my, bi, t, h, yRow);
          };
          // The first step reads init (or nothing), the others Last.
          k.ifThen(k.cmp(CmpIPredicate::sgt, nT, k.idx(0)), [&] {
            step(k.idx(0), my.init);
            k.forEach(k.idx(1), nT, k.idx(1), [&](Value t) { step(t, Last); });
          });
          // No steps: the state is init (or zeros).
          k.ifThen(k.cmp(CmpIPredicate::eq, nT, k.idx(0)), [&] {
            k.forEach(k.idx(0), k.idx(P), k.idx(1), [&](Value p) {
              for (size_t v = 0; v < masks.size(); ++v) {
                SmallVector<Value> at{bi, h, p, k.idx(v * lanes)};
                Value s = my.init ? k.vloadMasked(my.init, at, lanes, masks[v])
                                  : k.vconst(0.0, lanes);
                k.vstoreMasked(s, Last, at, masks[v]);
              }
            });
          });
        });
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuSsdPatterns(RewritePatternSet &patterns,
                                  const CpuTarget &target) {
  patterns.add<CpuSsd>(patterns.getContext(), target);
}
