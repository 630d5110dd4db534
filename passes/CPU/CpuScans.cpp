//===- CpuScans.cpp - vectorized recurrences for the CPU ------------------===//
//
// Recurrences whose state is one value per channel run sequentially in time
// and in parallel across channels: a task owns a block of channels, keeps
// their states in vector registers for the whole sequence and streams the
// inputs through (linear_scan, causal_conv1d; the selective scan is
// CpuSelectiveScan.cpp).
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuKernel.h"
#include "CPU/CpuPatterns.h"
#include "Common/ScanLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace seqc;

namespace {

static Value vzero(KernelBuilder &kb, int64_t lanes) {
  return kb.vconst(0.0, lanes);
}

/// h_t = a_t * h_{t-1} + b_t with a task per (batch, block of up to 2048
/// state columns). Each step streams a whole block row of a and b (long
/// contiguous runs, which DRAM serves at full speed), updates the block's
/// state in an L1-resident stack buffer and writes h with streaming stores.
struct CpuLinearScan : OpRewritePattern<seq::LinearScanOp> {
  CpuLinearScan(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  static constexpr int64_t BlockColumns = 2048;

  LogicalResult matchAndRewrite(seq::LinearScanOp op,
                                PatternRewriter &rewriter) const override {
    if (!cpuTakesElementTypes(op))
      return rewriter.notifyMatchFailure(op, cpuElementTypesReason);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    const int64_t lanes = target.vectorWidth;
    const int64_t width = BlockColumns;

    Value a = toBTS(b, op.getA()), bb = toBTS(b, op.getB());
    Value Bsz = kb.dim(a, 0), T = kb.dim(a, 1), S = kb.dim(a, 2);
    int64_t dyn = ShapedType::kDynamic;
    auto htype = RankedTensorType::get(
        {dyn, dyn, dyn}, getElementTypeOrSelf(op.getH().getType()));
    auto ltype = RankedTensorType::get(
        {dyn, dyn}, getElementTypeOrSelf(op.getLast().getType()));
    Value hBuf = allocBuffer(b, htype, {Bsz, T, S});
    Value lBuf = allocBuffer(b, ltype, {Bsz, S});
    SmallVector<Value> args{readBuffer(b, a), readBuffer(b, bb), hBuf, lBuf};
    bool hasInit = static_cast<bool>(op.getInit());
    if (hasInit)
      args.push_back(readBuffer(b, toBS(b, op.getInit())));
    bool reverse = op.getReverse();

    Value blocks = kb.divs(kb.add(S, kb.idx(width - 1)), kb.idx(width));
    emitParallelKernel(
        b, "linear_scan", kb.mul(Bsz, blocks), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value A = in[0], Bv = in[1], H = in[2], L = in[3];
          Value nT = k.mdim(A, 1), nS = k.mdim(A, 2);
          Value nBlocks = k.divs(k.add(nS, k.idx(width - 1)), k.idx(width));
          Value bi = k.divs(task, nBlocks);
          Value s0 = k.mul(k.rems(task, nBlocks), k.idx(width));
          Value cols = k.mins(k.idx(width), k.sub(nS, s0));
          Value fullEnd = k.mul(k.divs(cols, k.idx(lanes)), k.idx(lanes));
          Value state = k.stackBuffer({width});
          // Applies `body(column offset in the block, mask or null)` to every
          // vector of the block: whole vectors, then one masked.
          auto eachVector = [&](const std::function<void(Value, Value)> &body) {
            k.forEach(k.idx(0), fullEnd, k.idx(lanes),
                      [&](Value c) { body(c, Value()); });
            k.ifThen(k.cmp(arith::CmpIPredicate::slt, fullEnd, cols), [&] {
              body(fullEnd, k.vmask(k.sub(cols, fullEnd), lanes));
            });
          };
          auto load = [&](Value m, ValueRange ivs, Value mask) {
            return mask ? k.vloadMasked(m, ivs, lanes, mask)
                        : k.vload(m, ivs, lanes);
          };
          auto store = [&](Value v, Value m, ValueRange ivs, Value mask,
                           bool streaming) {
            if (mask)
              k.vstoreMasked(v, m, ivs, mask);
            else
              k.vstore(v, m, ivs, streaming);
          };
          eachVector([&](Value c, Value mask) {
            Value h0 = hasInit ? load(in[4], {bi, k.add(s0, c)}, mask)
                               : k.vconst(0.0, lanes);
            store(h0, state, {c}, mask, false);
          });
          k.forEach(k.idx(0), nT, k.idx(1), [&](Value step) {
            Value t = reverse ? k.sub(k.sub(nT, k.idx(1)), step) : step;
            eachVector([&](Value c, Value mask) {
              Value col = k.add(s0, c);
              Value hv =
                  k.vfma(load(A, {bi, t, col}, mask), load(state, {c}, mask),
                         load(Bv, {bi, t, col}, mask));
              store(hv, state, {c}, mask, false);
              store(hv, H, {bi, t, col}, mask, /*streaming=*/true);
            });
          });
          eachVector([&](Value c, Value mask) {
            store(load(state, {c}, mask), L, {bi, k.add(s0, c)}, mask, false);
          });
        });

    Value h = restoreScanShape(b, asTensor(b, hBuf, htype),
                               cast<RankedTensorType>(op.getH().getType()),
                               dims.of("h"));
    Value l = restoreScanShape(b, asTensor(b, lBuf, ltype),
                               cast<RankedTensorType>(op.getLast().getType()),
                               dims.of("last"));
    rewriter.replaceOp(op, {h, l});
    return success();
  }

  CpuTarget target;
};

/// The causal conv's kernel buffers: x ([B, T, D]), the taps with channels
/// innermost ([W, D]), y, the history [B, W - 1, D]; the optional bias and
/// init (null when absent).
struct ConvBuffers : KernelBuffers<ConvBuffers> {
  Value x, wT, y, history, bias, init;

  SmallVector<Value *> fields() {
    return {&x, &wT, &y, &history, &bias, &init};
  }
};

/// Depthwise causal convolution with a task per (batch, block of channels):
/// the last W-1 inputs of the block's channels are a window of vectors in
/// registers that slides one step per output.
struct CpuCausalConv1d : OpRewritePattern<seq::CausalConv1dOp> {
  CpuCausalConv1d(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::CausalConv1dOp op,
                                PatternRewriter &rewriter) const override {
    if (!cpuTakesElementTypes(op))
      return rewriter.notifyMatchFailure(op, cpuElementTypesReason);
    auto wType = cast<RankedTensorType>(op.getW().getType());
    int64_t W = wType.getDimSize(1), D = wType.getDimSize(0);
    if (ShapedType::isDynamic(W) || W < 1 || W > 16 || ShapedType::isDynamic(D))
      return rewriter.notifyMatchFailure(
          op, "needs a static width W in [1, 16] and a static D");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"];
    const int64_t lanes = target.vectorWidth;
    auto yType = cast<RankedTensorType>(op.getY().getType());
    auto lastType = cast<RankedTensorType>(op.getLast().getType());
    // Weights and states with channels innermost: [W, D], [B, W-1, D].
    Value wT = transposeLastTwo(b, op.getW());
    auto histType = RankedTensorType::get({lastType.getDimSize(0), W - 1, D},
                                          lastType.getElementType());
    Value yBuf = allocResult(b, yType, dims.of("y"));
    Value histBuf = allocBuffer(b, histType, {Bsz, kb.idx(W - 1), kb.idx(D)});
    ConvBuffers io;
    io.x = readBuffer(b, op.getX());
    io.wT = readBuffer(b, wT);
    io.y = yBuf;
    io.history = histBuf;
    io.bias = readOptionalBuffer(b, op.getBias());
    if (op.getInit())
      io.init = readBuffer(b, transposeLastTwo(b, op.getInit()));
    seq::Activation act = op.getActivation();
    int64_t blocks = (D + lanes - 1) / lanes;
    emitParallelKernel(
        b, "causal_conv1d", kb.mul(Bsz, kb.idx(blocks)), io.list(),
        [&](KernelBuilder &k, Value task, ValueRange in) {
          ConvBuffers my = io.rebind(in);
          Value X = my.x, Wt = my.wT, Y = my.y, Hist = my.history;
          Value nT = k.mdim(X, 1);
          Value bi = k.divs(task, k.idx(blocks));
          Value d0 = k.mul(k.rems(task, k.idx(blocks)), k.idx(lanes));
          Value mask = k.vmask(k.sub(k.idx(D), d0), lanes);
          SmallVector<Value> taps, window;
          for (int64_t j = 0; j < W; ++j)
            taps.push_back(k.vloadMasked(Wt, {k.idx(j), d0}, lanes, mask));
          Value bias = my.bias ? k.vloadMasked(my.bias, {d0}, lanes, mask)
                               : vzero(k, lanes);
          for (int64_t j = 0; j < W - 1; ++j)
            window.push_back(
                my.init
                    ? k.vloadMasked(my.init, {bi, k.idx(j), d0}, lanes, mask)
                    : vzero(k, lanes));
          SmallVector<Value> last =
              k.loop(nT, window, [&](Value t, ValueRange hist) {
                Value x = k.vloadMasked(X, {bi, t, d0}, lanes, mask);
                Value y = k.vfma(taps[W - 1], x, bias);
                for (int64_t j = 0; j < W - 1; ++j)
                  y = k.vfma(taps[j], hist[j], y);
                k.vstoreMasked(k.activation(act, y), Y, {bi, t, d0}, mask);
                SmallVector<Value> next(hist.begin() + (W > 1 ? 1 : 0),
                                        hist.end());
                if (W > 1)
                  next.push_back(x);
                return next;
              });
          for (int64_t j = 0; j < W - 1; ++j)
            k.vstoreMasked(last[j], Hist, {bi, k.idx(j), d0}, mask);
        });
    Value last = transposeLastTwo(b, asTensor(b, histBuf, histType));
    rewriter.replaceOp(op, {asTensor(b, yBuf, yType),
                            tensor::CastOp::create(b, lastType, last)});
    return success();
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuScanPatterns(RewritePatternSet &patterns,
                                   const CpuTarget &target) {
  patterns.add<CpuLinearScan, CpuCausalConv1d>(patterns.getContext(), target);
}
