//===- CpuScans.cpp - vectorized recurrences for the CPU ------------------===//
//
// Recurrences whose state is one value per channel run sequentially in time
// and in parallel across channels: a task owns a block of channels, keeps
// their states in vector registers for the whole sequence and streams the
// inputs through (linear_scan, selective_scan, causal_conv1d).
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

/// A `[d0, d1, d2]` tensor transposed to `[d0, d2, d1]`.
static Value transposeLast2(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                            Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < type.getRank() - 2; ++i)
    perm.push_back(i);
  perm.push_back(type.getRank() - 1);
  perm.push_back(type.getRank() - 2);
  SmallVector<int64_t> shape;
  SmallVector<Value> sizes;
  for (int64_t p : perm) {
    shape.push_back(type.getDimSize(p));
    sizes.push_back(kb.dim(t, p));
  }
  Value init =
      kb.empty(RankedTensorType::get(shape, type.getElementType()), sizes);
  return linalg::TransposeOp::create(b, t, init, perm).getResult()[0];
}

/// The Mamba-1 selective scan with a task per (batch, block of channels):
/// the N states of the block's channels live in vector registers (one vector
/// per state index, lanes over channels) for the whole sequence.
struct CpuSelectiveScan : OpRewritePattern<seq::SelectiveScanOp> {
  CpuSelectiveScan(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::SelectiveScanOp op,
                                PatternRewriter &rewriter) const override {
    if (!cpuTakesElementTypes(op))
      return rewriter.notifyMatchFailure(op, cpuElementTypesReason);
    auto aType = cast<RankedTensorType>(op.getA().getType());
    auto bType = cast<RankedTensorType>(op.getB().getType());
    int64_t N = aType.getDimSize(1), G = bType.getDimSize(2);
    int64_t D = aType.getDimSize(0);
    const int64_t lanes = target.vectorWidth;
    // States in registers need a static, modest N; a channel block must not
    // straddle two B/C groups so B and C are one broadcast per step.
    if (ShapedType::isDynamic(N) || N > 64 || ShapedType::isDynamic(G) ||
        ShapedType::isDynamic(D) || (G > 1 && (D / G) % lanes != 0))
      return rewriter.notifyMatchFailure(
          op, "needs static N <= 64, static D and G, and D / G a multiple of "
              "the vector width when G > 1");

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"];
    bool zoh = op.getDiscretization() == seq::Discretization::zoh;
    bool softplus = op.getDeltaSoftplus();
    int64_t perGroup = D / G;

    // A^T [N, D] and the state in [B, N, D]: lanes run over channels.
    Value AT = transposeLast2(b, kb, op.getA());
    Value yBuf = allocResult(b, cast<RankedTensorType>(op.getY().getType()),
                             dims.of("y"));
    auto stateT = RankedTensorType::get(
        {cast<RankedTensorType>(op.getLast().getType()).getDimSize(0), N, D},
        getElementTypeOrSelf(op.getLast().getType()));
    Value lastBuf = allocBuffer(b, stateT, {Bsz, kb.idx(N), kb.idx(D)});
    SmallVector<Value> args{readBuffer(b, op.getU()),
                            readBuffer(b, op.getDelta()),
                            readBuffer(b, AT),
                            readBuffer(b, op.getB()),
                            readBuffer(b, op.getC()),
                            yBuf,
                            lastBuf};
    enum Opt { Skip, Gate, Bias, Init };
    int optIndex[4] = {-1, -1, -1, -1};
    auto addOpt = [&](Opt which, Value v) {
      if (!v)
        return;
      optIndex[which] = args.size();
      args.push_back(readBuffer(b, v));
    };
    addOpt(Skip, op.getSkip());
    addOpt(Gate, op.getGate());
    addOpt(Bias, op.getDeltaBias());
    if (op.getInit())
      addOpt(Init, transposeLast2(b, kb, op.getInit()));

    int64_t blocks = (D + lanes - 1) / lanes;
    emitParallelKernel(
        b, "selective_scan", kb.mul(Bsz, kb.idx(blocks)), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value U = in[0], Delta = in[1], At = in[2], Bm = in[3], Cm = in[4],
                Y = in[5], Last = in[6];
          Value nT = k.mdim(U, 1);
          Value bi = k.divs(task, k.idx(blocks));
          Value d0 = k.mul(k.rems(task, k.idx(blocks)), k.idx(lanes));
          Value mask = k.vmask(k.sub(k.idx(D), d0), lanes);
          Value g = k.divs(d0, k.idx(perGroup));
          auto opt = [&](Opt which) {
            return optIndex[which] < 0 ? Value() : in[optIndex[which]];
          };
          Value bias =
              opt(Bias) ? k.vloadMasked(opt(Bias), {d0}, lanes, mask) : Value();
          Value skip =
              opt(Skip) ? k.vloadMasked(opt(Skip), {d0}, lanes, mask) : Value();
          // The N states stay in registers for the whole sequence; the
          // columns of A are re-read from L1 every step (loaded inside the
          // loop, after its stores, so they are not hoisted into registers
          // the states need).
          SmallVector<Value> h;
          for (int64_t n = 0; n < N; ++n)
            h.push_back(opt(Init) ? k.vloadMasked(opt(Init), {bi, k.idx(n), d0},
                                                  lanes, mask)
                                  : vzero(k, lanes));
          SmallVector<Value> hT = k.loop(nT, h, [&](Value t, ValueRange c) {
            Value dt = k.vloadMasked(Delta, {bi, t, d0}, lanes, mask);
            if (bias)
              dt = k.fadd(dt, bias);
            if (softplus)
              dt = k.softplus(dt);
            Value u = k.vloadMasked(U, {bi, t, d0}, lanes, mask);
            Value dtu = k.fmul(dt, u);
            Value y = vzero(k, lanes);
            SmallVector<Value> next;
            for (int64_t n = 0; n < N; ++n) {
              Value aCol = k.vloadMasked(At, {k.idx(n), d0}, lanes, mask);
              Value dA = k.fmul(dt, aCol);
              Value Bn = k.splat(k.mload(Bm, {bi, t, g, k.idx(n)}), lanes);
              Value Cn = k.splat(k.mload(Cm, {bi, t, g, k.idx(n)}), lanes);
              Value input = k.fmul(dtu, Bn);
              if (zoh) {
                // expm1(dt A) / A, whose limit at A = 0 is dt.
                Value isZero =
                    k.fcmp(arith::CmpFPredicate::OEQ, aCol, k.like(dt, 0.0));
                Value safeA = k.select(isZero, k.like(dt, 1.0), aCol);
                Value w = k.select(isZero, dt, k.fdiv(k.expm1(dA), safeA));
                input = k.fmul(k.fmul(w, u), Bn);
              }
              Value hn = k.vfma(k.exp(dA), c[n], input);
              y = k.vfma(Cn, hn, y);
              next.push_back(hn);
            }
            if (skip)
              y = k.vfma(skip, u, y);
            if (opt(Gate))
              y = k.fmul(y, k.silu(k.vloadMasked(opt(Gate), {bi, t, d0}, lanes,
                                                 mask)));
            k.vstoreMasked(y, Y, {bi, t, d0}, mask);
            return next;
          });
          for (int64_t n = 0; n < N; ++n)
            k.vstoreMasked(hT[n], Last, {bi, k.idx(n), d0}, mask);
        });

    Value y = asTensor(b, yBuf, cast<RankedTensorType>(op.getY().getType()));
    Value last = transposeLast2(b, kb, asTensor(b, lastBuf, stateT));
    rewriter.replaceOp(
        op, {y, tensor::CastOp::create(b, op.getLast().getType(), last)});
    return success();
  }

  CpuTarget target;
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
    Value wT = transposeLast2(b, kb, op.getW());
    auto histType = RankedTensorType::get({lastType.getDimSize(0), W - 1, D},
                                          lastType.getElementType());
    Value yBuf = allocResult(b, yType, dims.of("y"));
    Value histBuf = allocBuffer(b, histType, {Bsz, kb.idx(W - 1), kb.idx(D)});
    SmallVector<Value> args{readBuffer(b, op.getX()), readBuffer(b, wT), yBuf,
                            histBuf};
    int biasIndex = -1, initIndex = -1;
    if (op.getBias()) {
      biasIndex = args.size();
      args.push_back(readBuffer(b, op.getBias()));
    }
    if (op.getInit()) {
      initIndex = args.size();
      args.push_back(readBuffer(b, transposeLast2(b, kb, op.getInit())));
    }
    seq::Activation act = op.getActivation();
    int64_t blocks = (D + lanes - 1) / lanes;
    emitParallelKernel(
        b, "causal_conv1d", kb.mul(Bsz, kb.idx(blocks)), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value X = in[0], Wt = in[1], Y = in[2], Hist = in[3];
          Value nT = k.mdim(X, 1);
          Value bi = k.divs(task, k.idx(blocks));
          Value d0 = k.mul(k.rems(task, k.idx(blocks)), k.idx(lanes));
          Value mask = k.vmask(k.sub(k.idx(D), d0), lanes);
          SmallVector<Value> taps, window;
          for (int64_t j = 0; j < W; ++j)
            taps.push_back(k.vloadMasked(Wt, {k.idx(j), d0}, lanes, mask));
          Value bias = biasIndex >= 0
                           ? k.vloadMasked(in[biasIndex], {d0}, lanes, mask)
                           : vzero(k, lanes);
          for (int64_t j = 0; j < W - 1; ++j)
            window.push_back(initIndex >= 0 ? k.vloadMasked(in[initIndex],
                                                            {bi, k.idx(j), d0},
                                                            lanes, mask)
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
    Value last = transposeLast2(b, kb, asTensor(b, histBuf, histType));
    rewriter.replaceOp(op, {asTensor(b, yBuf, yType),
                            tensor::CastOp::create(b, lastType, last)});
    return success();
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuScanPatterns(RewritePatternSet &patterns,
                                   const CpuTarget &target) {
  patterns.add<CpuLinearScan, CpuSelectiveScan, CpuCausalConv1d>(
      patterns.getContext(), target);
}
