//===- GpuScans.cpp - recurrences as GPU kernels --------------------------===//
//
// linear_scan: a chunked scan in three kernels, for parallelism beyond one
// thread per channel (B x S is often a few thousand channels, far from
// filling a GPU): every (batch, chunk of time, channel) reduces its chunk to
// (product of a, local final state); one thread per (batch, channel) passes
// states across chunks; every (batch, chunk, channel) then rescans its chunk
// from the right incoming state and writes h. Adjacent threads take adjacent
// channels, so every load and store is coalesced.
//
// selective_scan: chunked the same way, a thread per (batch, chunk, channel)
// with the chunk's N states in registers; B_t and C_t are the same for every
// channel of a group, so a warp reads each with one broadcast load.
//
//===----------------------------------------------------------------------===//

#include "Common/Kernels.h"
#include "Common/ScanLayout.h"
#include "GPU/GpuKernel.h"
#include "GPU/GpuPatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace seqc;

namespace {

struct GpuLinearScan : OpRewritePattern<seq::LinearScanOp> {
  GpuLinearScan(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  /// Steps per chunk.
  static constexpr int64_t Chunk = 64;

  LogicalResult matchAndRewrite(seq::LinearScanOp op,
                                PatternRewriter &rewriter) const override {
    if (!allFloat(op))
      return rewriter.notifyMatchFailure(
          op, "needs float (f32, f16, bf16) operands");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value a = toBTS(b, op.getA()), bb = toBTS(b, op.getB());
    Value Bsz = kb.dim(a, 0), T = kb.dim(a, 1), S = kb.dim(a, 2);
    Value nChunks = kb.divs(kb.add(T, kb.idx(Chunk - 1)), kb.idx(Chunk));
    auto f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    Type hElt = cast<RankedTensorType>(op.getH().getType()).getElementType();
    Type lElt = cast<RankedTensorType>(op.getLast().getType()).getElementType();
    auto htype = RankedTensorType::get({dyn, dyn, dyn}, hElt);
    auto ltype = RankedTensorType::get({dyn, dyn}, lElt);
    auto ctype = RankedTensorType::get({dyn, dyn, dyn}, f32);
    Value hBuf = allocBuffer(b, htype, {Bsz, T, S});
    Value lBuf = allocBuffer(b, ltype, {Bsz, S});
    // Per (batch, chunk, channel): the product of the chunk's a, then the
    // state entering the chunk; and the chunk's local final state.
    Value prodBuf = allocBuffer(b, ctype, {Bsz, nChunks, S});
    Value endBuf = allocBuffer(b, ctype, {Bsz, nChunks, S});
    Value A = readBuffer(b, a), Bv = readBuffer(b, bb);
    Value init = op.getInit() ? readBuffer(b, toBS(b, op.getInit())) : Value();
    bool reverse = op.getReverse();

    // Step `j` in processing order is time index t.
    auto timeOf = [&](KernelBuilder &k, Value nT, Value j) {
      return reverse ? k.sub(k.sub(nT, k.idx(1)), j) : j;
    };
    // (bi, c, s) of a chunk item.
    auto split = [&](KernelBuilder &k, Value item, Value nC, Value nS) {
      Value s = k.rems(item, nS), rest = k.divs(item, nS);
      return std::array<Value, 3>{k.divs(rest, nC), k.rems(rest, nC), s};
    };
    // Runs the steps of chunk c: h = a h + b from `h0`, `product` times a;
    // `each(t, h)` after each step. Returns {h, product}.
    auto scanChunk = [&](KernelBuilder &k, Value Am, Value Bm, Value bi,
                         Value c, Value s, Value h0, bool withProduct,
                         const std::function<void(Value, Value)> &each) {
      Value nT = k.mdim(Am, 1);
      Value j0 = k.mul(c, k.idx(Chunk));
      Value j1 = k.mins(k.add(j0, k.idx(Chunk)), nT);
      auto r = k.loop(j0, j1, {h0, k.f32(1.0)}, [&](Value j, ValueRange it) {
        Value t = timeOf(k, nT, j);
        Value av = k.mload(Am, {bi, t, s});
        Value h = k.fadd(k.fmul(av, it[0]), k.mload(Bm, {bi, t, s}));
        if (each)
          each(t, h);
        Value p = withProduct ? k.fmul(it[1], av) : it[1];
        return SmallVector<Value>{h, p};
      });
      return r;
    };

    Value chunkItems = kb.mul(kb.mul(Bsz, nChunks), S);
    emitItemKernel(b, target, "linear_scan_chunks", kb, chunkItems,
                   {A, Bv, prodBuf, endBuf},
                   [&](KernelBuilder &k, Value item, ValueRange in) {
                     Value nC = k.mdim(in[2], 1), nS = k.mdim(in[2], 2);
                     auto [bi, c, s] = split(k, item, nC, nS);
                     auto r = scanChunk(k, in[0], in[1], bi, c, s, k.f32(0.0),
                                        true, nullptr);
                     k.mstore(r[1], in[2], {bi, c, s});
                     k.mstore(r[0], in[3], {bi, c, s});
                   });

    SmallVector<Value> passArgs{prodBuf, endBuf, lBuf};
    if (init)
      passArgs.push_back(init);
    emitItemKernel(
        b, target, "linear_scan_pass", kb, kb.mul(Bsz, S), passArgs,
        [&](KernelBuilder &k, Value item, ValueRange in) {
          Value nC = k.mdim(in[0], 1), nS = k.mdim(in[0], 2);
          Value bi = k.divs(item, nS), s = k.rems(item, nS);
          Value h0 = init ? k.mload(in[3], {bi, s}) : k.f32(0.0);
          auto r = k.loop(nC, {h0}, [&](Value c, ValueRange it) {
            Value p = k.mload(in[0], {bi, c, s});
            k.mstore(it[0], in[0], {bi, c, s}); // the state entering c
            return SmallVector<Value>{
                k.fadd(k.fmul(p, it[0]), k.mload(in[1], {bi, c, s}))};
          });
          k.mstore(r[0], in[2], {bi, s});
        });

    emitItemKernel(b, target, "linear_scan_apply", kb, chunkItems,
                   {A, Bv, prodBuf, hBuf},
                   [&](KernelBuilder &k, Value item, ValueRange in) {
                     Value nC = k.mdim(in[2], 1), nS = k.mdim(in[2], 2);
                     auto [bi, c, s] = split(k, item, nC, nS);
                     Value h0 = k.mload(in[2], {bi, c, s});
                     scanChunk(k, in[0], in[1], bi, c, s, h0, false,
                               [&](Value t, Value h) {
                                 k.mstore(h, in[3], {bi, t, s});
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

  GpuTarget target;
};

/// Mamba-1's selective scan, chunked like linear_scan for parallelism (B x D
/// channels alone fill a fraction of a GPU): per (batch, 64-step chunk,
/// channel) a thread runs the chunk from a zero state with the N states in
/// registers and keeps the end states and the chunk's sum of dt (the decay
/// of state n over the chunk is exp(A[d, n] * sum dt)); a thread per
/// (batch, state, channel) passes states across chunks; the first kernel's
/// threads then rerun their chunks from the incoming states and write y.
/// Scratch is laid out [B, chunks, N, D] so adjacent threads (channels)
/// touch adjacent addresses.
struct GpuSelectiveScan : OpRewritePattern<seq::SelectiveScanOp> {
  GpuSelectiveScan(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  /// The most states a thread keeps in registers; steps per chunk.
  static constexpr int64_t MaxStates = 64, Chunk = 64;

  LogicalResult matchAndRewrite(seq::SelectiveScanOp op,
                                PatternRewriter &rewriter) const override {
    auto aType = cast<RankedTensorType>(op.getA().getType());
    int64_t N = aType.getDimSize(1);
    if (!allFloat(op) || ShapedType::isDynamic(N) || N > MaxStates)
      return rewriter.notifyMatchFailure(
          op, "needs float operands and a static N of at most 64");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], D = dims["D"], T = dims["T"];
    bool zoh = op.getDiscretization() == seq::Discretization::zoh;
    bool softplus = op.getDeltaSoftplus();
    Value nChunks = kb.divs(kb.add(T, kb.idx(Chunk - 1)), kb.idx(Chunk));
    auto f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;

    Value yBuf = allocBuffer(b, cast<RankedTensorType>(op.getY().getType()),
                             dims.of("y"));
    Value lastBuf = allocBuffer(
        b, cast<RankedTensorType>(op.getLast().getType()), dims.of("last"));
    Value states =
        allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, dyn}, f32),
                    {Bsz, nChunks, kb.idx(N), D});
    Value dtSums = allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn}, f32),
                               {Bsz, nChunks, D});
    SmallVector<Value> args{readBuffer(b, op.getU()),
                            readBuffer(b, op.getDelta()),
                            readBuffer(b, op.getA()),
                            readBuffer(b, op.getB()),
                            readBuffer(b, op.getC()),
                            yBuf,
                            states,
                            dtSums};
    enum Opt { Skip, Gate, Bias };
    int optIndex[3] = {-1, -1, -1};
    auto addOpt = [&](Opt which, Value v) {
      if (!v)
        return;
      optIndex[which] = args.size();
      args.push_back(readBuffer(b, v));
    };
    addOpt(Skip, op.getSkip());
    addOpt(Gate, op.getGate());
    addOpt(Bias, op.getDeltaBias());

    // Runs the steps of chunk c of channel (bi, d) from `h0`; with `emitY`
    // writes y. Returns the end states and the chunk's sum of dt.
    auto runChunk = [&](KernelBuilder &k, ValueRange in, Value bi, Value c,
                        Value d, ArrayRef<Value> h0, bool emitY) {
      auto opt = [&](Opt which) {
        return optIndex[which] < 0 ? Value() : in[optIndex[which]];
      };
      Value U = in[0], Dt = in[1], Am = in[2], Bm = in[3], Cm = in[4];
      Value nD = k.mdim(U, 2), nT = k.mdim(U, 1), nG = k.mdim(Bm, 2);
      Value g = k.divs(d, k.divs(nD, nG));
      SmallVector<Value> a;
      for (int64_t n = 0; n < N; ++n)
        a.push_back(k.mload(Am, {d, k.idx(n)}));
      Value bias = opt(Bias) ? k.mload(opt(Bias), {d}) : Value();
      Value skip = opt(Skip) ? k.mload(opt(Skip), {d}) : Value();
      Value t0 = k.mul(c, k.idx(Chunk));
      Value t1 = k.mins(k.add(t0, k.idx(Chunk)), nT);
      SmallVector<Value> inits(h0.begin(), h0.end());
      inits.push_back(k.f32(0.0));
      return k.loop(t0, t1, inits, [&](Value t, ValueRange state) {
        Value dt = k.mload(Dt, {bi, t, d});
        if (bias)
          dt = k.fadd(dt, bias);
        if (softplus)
          dt = k.softplus(dt);
        Value u = k.mload(U, {bi, t, d});
        Value y = skip ? k.fmul(skip, u) : k.f32(0.0);
        SmallVector<Value> next;
        for (int64_t n = 0; n < N; ++n) {
          Value dA = k.fmul(dt, a[n]);
          Value bn = k.mload(Bm, {bi, t, g, k.idx(n)});
          Value weight = dt;
          if (zoh) {
            // expm1(dt A) / A, and dt where A = 0.
            Value isZero = k.fcmp(arith::CmpFPredicate::OEQ, a[n], k.f32(0.0));
            weight = k.select(isZero, dt, k.fdiv(k.expm1(dA), a[n]));
          }
          Value hn = k.fadd(k.fmul(k.exp(dA), state[n]),
                            k.fmul(k.fmul(weight, bn), u));
          next.push_back(hn);
          if (emitY)
            y = k.fadd(y, k.fmul(k.mload(Cm, {bi, t, g, k.idx(n)}), hn));
        }
        if (emitY) {
          if (Value gate = opt(Gate))
            y = k.fmul(y, k.silu(k.mload(gate, {bi, t, d})));
          k.mstore(y, in[5], {bi, t, d});
        }
        next.push_back(k.fadd(state[N], dt));
        return next;
      });
    };
    auto chunkItem = [](KernelBuilder &k, Value item, Value nC, Value nD) {
      Value d = k.rems(item, nD), rest = k.divs(item, nD);
      return std::array<Value, 3>{k.divs(rest, nC), k.rems(rest, nC), d};
    };
    Value chunkItems = kb.mul(kb.mul(Bsz, nChunks), D);
    emitItemKernel(b, target, "selective_scan_chunks", kb, chunkItems, args,
                   [&](KernelBuilder &k, Value item, ValueRange in) {
                     Value nC = k.mdim(in[6], 1), nD = k.mdim(in[6], 3);
                     auto [bi, c, d] = chunkItem(k, item, nC, nD);
                     SmallVector<Value> zero(N, k.f32(0.0));
                     auto r = runChunk(k, in, bi, c, d, zero, /*emitY=*/false);
                     for (int64_t n = 0; n < N; ++n)
                       k.mstore(r[n], in[6], {bi, c, k.idx(n), d});
                     k.mstore(r[N], in[7], {bi, c, d});
                   });

    SmallVector<Value> passArgs{states, dtSums, readBuffer(b, op.getA()),
                                lastBuf};
    Value init = op.getInit() ? readBuffer(b, op.getInit()) : Value();
    if (init)
      passArgs.push_back(init);
    emitItemKernel(
        b, target, "selective_scan_pass", kb, kb.mul(kb.mul(Bsz, D), kb.idx(N)),
        passArgs, [&](KernelBuilder &k, Value item, ValueRange in) {
          Value st = in[0];
          Value nC = k.mdim(st, 1), nN = k.mdim(st, 2), nD = k.mdim(st, 3);
          Value d = k.rems(item, nD), rest = k.divs(item, nD);
          Value n = k.rems(rest, nN), bi = k.divs(rest, nN);
          Value a = k.mload(in[2], {d, n});
          Value h0 = init ? k.mload(in[4], {bi, d, n}) : k.f32(0.0);
          auto r = k.loop(nC, {h0}, [&](Value c, ValueRange it) {
            Value local = k.mload(st, {bi, c, n, d});
            k.mstore(it[0], st, {bi, c, n, d}); // the state entering c
            Value decay = k.exp(k.fmul(a, k.mload(in[1], {bi, c, d})));
            return SmallVector<Value>{k.fadd(k.fmul(decay, it[0]), local)};
          });
          k.mstore(r[0], in[3], {bi, d, n});
        });

    emitItemKernel(b, target, "selective_scan_outputs", kb, chunkItems, args,
                   [&](KernelBuilder &k, Value item, ValueRange in) {
                     Value nC = k.mdim(in[6], 1), nD = k.mdim(in[6], 3);
                     auto [bi, c, d] = chunkItem(k, item, nC, nD);
                     SmallVector<Value> h0;
                     for (int64_t n = 0; n < N; ++n)
                       h0.push_back(k.mload(in[6], {bi, c, k.idx(n), d}));
                     runChunk(k, in, bi, c, d, h0, /*emitY=*/true);
                   });
    rewriter.replaceOp(
        op,
        {asTensor(b, yBuf, cast<RankedTensorType>(op.getY().getType())),
         asTensor(b, lastBuf, cast<RankedTensorType>(op.getLast().getType()))});
    return success();
  }

  GpuTarget target;
};

/// The depthwise causal convolution: a thread per output (batch, step,
/// channel), adjacent threads on adjacent channels; the W-1 inputs before
/// t = 0 come from `init`. A second kernel writes the last W-1 inputs.
struct GpuCausalConv1d : OpRewritePattern<seq::CausalConv1dOp> {
  GpuCausalConv1d(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::CausalConv1dOp op,
                                PatternRewriter &rewriter) const override {
    if (!allFloat(op))
      return rewriter.notifyMatchFailure(
          op, "needs float (f32, f16, bf16) operands");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], D = dims["D"], W = dims["W"];
    auto yType = cast<RankedTensorType>(op.getY().getType());
    auto lastType = cast<RankedTensorType>(op.getLast().getType());
    Value yBuf = allocBuffer(b, yType, dims.of("y"));
    Value lastBuf = allocBuffer(b, lastType, dims.of("last"));
    SmallVector<Value> args{readBuffer(b, op.getX()), readBuffer(b, op.getW()),
                            yBuf, lastBuf};
    int biasAt = -1, initAt = -1;
    if (op.getBias()) {
      biasAt = args.size();
      args.push_back(readBuffer(b, op.getBias()));
    }
    if (op.getInit()) {
      initAt = args.size();
      args.push_back(readBuffer(b, op.getInit()));
    }
    seq::Activation act = op.getActivation();

    // Element q of concat(init, x[bi, :, d]).
    auto padded = [&](KernelBuilder &k, ValueRange in, Value bi, Value q,
                      Value d) {
      Value history = k.sub(k.mdim(in[1], 1), k.idx(1));
      Value inX = k.cmp(arith::CmpIPredicate::sge, q, history);
      return k.ifElse(
          inX, {k.f32Type()},
          [&] {
            return SmallVector<Value>{
                k.mload(in[0], {bi, k.sub(q, history), d})};
          },
          [&] {
            return SmallVector<Value>{
                initAt >= 0 ? k.mload(in[initAt], {bi, d, q}) : k.f32(0.0)};
          })[0];
    };
    emitItemKernel(b, target, "causal_conv1d", kb, kb.mul(kb.mul(Bsz, T), D),
                   args, [&](KernelBuilder &k, Value item, ValueRange in) {
                     Value nT = k.mdim(in[0], 1), nD = k.mdim(in[0], 2);
                     Value d = k.rems(item, nD), rest = k.divs(item, nD);
                     Value t = k.rems(rest, nT), bi = k.divs(rest, nT);
                     // The bias first, then the taps in order (the definition's
                     // sum).
                     Value acc0 =
                         biasAt >= 0 ? k.mload(in[biasAt], {d}) : k.f32(0.0);
                     auto acc = k.loop(
                         k.mdim(in[1], 1), {acc0}, [&](Value j, ValueRange c) {
                           Value x = padded(k, in, bi, k.add(t, j), d);
                           return SmallVector<Value>{
                               k.fadd(c[0], k.fmul(k.mload(in[1], {d, j}), x))};
                         });
                     k.mstore(k.activation(act, acc[0]), in[2], {bi, t, d});
                   });
    emitItemKernel(
        b, target, "causal_conv1d_state", kb,
        kb.mul(kb.mul(Bsz, D), kb.sub(W, kb.idx(1))), args,
        [&](KernelBuilder &k, Value item, ValueRange in) {
          Value nT = k.mdim(in[0], 1), nD = k.mdim(in[0], 2);
          Value nH = k.mdim(in[3], 2);
          Value j = k.rems(item, nH), rest = k.divs(item, nH);
          Value d = k.rems(rest, nD), bi = k.divs(rest, nD);
          k.mstore(padded(k, in, bi, k.add(nT, j), d), in[3], {bi, d, j});
        });
    rewriter.replaceOp(
        op, {asTensor(b, yBuf, yType), asTensor(b, lastBuf, lastType)});
    return success();
  }

  GpuTarget target;
};

} // namespace

void seqc::populateGpuScanPatterns(RewritePatternSet &patterns,
                                   const GpuTarget &target) {
  patterns.add<GpuLinearScan, GpuSelectiveScan, GpuCausalConv1d>(
      patterns.getContext(), target);
}
