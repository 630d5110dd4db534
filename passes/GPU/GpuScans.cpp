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

/// (batch, chunk, channel) of a chunk item, channels fastest.
static std::array<Value, 3> chunkItem(KernelBuilder &k, Value item, Value nC,
                                      Value nChannels) {
  Value channel = k.rems(item, nChannels), rest = k.divs(item, nChannels);
  return {k.divs(rest, nC), k.rems(rest, nC), channel};
}

/// The linear scan's three kernels and the buffers they share.
class LinearScanKernels {
public:
  /// Steps per chunk.
  static constexpr int64_t Chunk = 64;

  LinearScanKernels(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                    const GpuTarget &target, bool reverse)
      : b(b), kb(kb), target(target), reverse(reverse) {}

  /// The inputs a, b ([B, T, S]); per (batch, chunk, channel) the product of
  /// the chunk's a (then, after the pass, the state entering the chunk) and
  /// the chunk's end state from zero; the results h and last; init or null.
  struct Buffers {
    Value a, b, products, ends, h, last, init;
  };

  /// Every chunk reduced to (product of a, end state from zero).
  void emitChunks(const Buffers &io, Value chunkItems) {
    emitItemKernel(b, target, "linear_scan_chunks", kb, chunkItems,
                   {io.a, io.b, io.products, io.ends},
                   [&](KernelBuilder &k, Value item, ValueRange in) {
                     Value a = in[0], bIn = in[1], products = in[2],
                           ends = in[3];
                     auto [bi, c, s] = chunkItem(k, item, k.mdim(products, 1),
                                                 k.mdim(products, 2));
                     auto r = scanChunk(k, a, bIn, bi, c, s, k.f32(0.0),
                                        /*withProduct=*/true, nullptr);
                     k.mstore(r[1], products, {bi, c, s});
                     k.mstore(r[0], ends, {bi, c, s});
                   });
  }

  /// A thread per (batch, channel) passes the state across the chunks,
  /// leaving the state entering each chunk where its product was.
  void emitPass(const Buffers &io, Value channels) {
    SmallVector<Value> args{io.products, io.ends, io.last};
    if (io.init)
      args.push_back(io.init);
    bool hasInit = static_cast<bool>(io.init);
    emitItemKernel(
        b, target, "linear_scan_pass", kb, channels, args,
        [&](KernelBuilder &k, Value item, ValueRange in) {
          Value products = in[0], ends = in[1], last = in[2];
          Value init = hasInit ? in[3] : Value();
          Value nC = k.mdim(products, 1), nS = k.mdim(products, 2);
          Value bi = k.divs(item, nS), s = k.rems(item, nS);
          Value h0 = init ? k.mload(init, {bi, s}) : k.f32(0.0);
          auto r = k.loop(nC, {h0}, [&](Value c, ValueRange it) {
            Value p = k.mload(products, {bi, c, s});
            k.mstore(it[0], products, {bi, c, s}); // the state entering c
            return SmallVector<Value>{
                k.fadd(k.fmul(p, it[0]), k.mload(ends, {bi, c, s}))};
          });
          k.mstore(r[0], last, {bi, s});
        });
  }

  /// Every chunk rescanned from the state entering it, writing h.
  void emitApply(const Buffers &io, Value chunkItems) {
    emitItemKernel(b, target, "linear_scan_apply", kb, chunkItems,
                   {io.a, io.b, io.products, io.h},
                   [&](KernelBuilder &k, Value item, ValueRange in) {
                     Value a = in[0], bIn = in[1], entering = in[2], h = in[3];
                     auto [bi, c, s] = chunkItem(k, item, k.mdim(entering, 1),
                                                 k.mdim(entering, 2));
                     Value h0 = k.mload(entering, {bi, c, s});
                     scanChunk(k, a, bIn, bi, c, s, h0, /*withProduct=*/false,
                               [&](Value t, Value ht) {
                                 k.mstore(ht, h, {bi, t, s});
                               });
                   });
  }

private:
  /// Step `j` in processing order is time index t.
  Value timeOf(KernelBuilder &k, Value nT, Value j) const {
    return reverse ? k.sub(k.sub(nT, k.idx(1)), j) : j;
  }

  /// Runs the steps of chunk c: h = a h + b from `h0`, the product of a when
  /// `withProduct`; `each(t, h)` after each step. Returns {h, product}.
  SmallVector<Value>
  scanChunk(KernelBuilder &k, Value a, Value bIn, Value bi, Value c, Value s,
            Value h0, bool withProduct,
            const std::function<void(Value, Value)> &each) const {
    Value nT = k.mdim(a, 1);
    Value j0 = k.mul(c, k.idx(Chunk));
    Value j1 = k.mins(k.add(j0, k.idx(Chunk)), nT);
    return k.loop(j0, j1, {h0, k.f32(1.0)}, [&](Value j, ValueRange it) {
      Value t = timeOf(k, nT, j);
      Value at = k.mload(a, {bi, t, s});
      Value h = k.fadd(k.fmul(at, it[0]), k.mload(bIn, {bi, t, s}));
      if (each)
        each(t, h);
      Value p = withProduct ? k.fmul(it[1], at) : it[1];
      return SmallVector<Value>{h, p};
    });
  }

  ImplicitLocOpBuilder &b;
  KernelBuilder &kb;
  const GpuTarget &target;
  bool reverse;
};

struct GpuLinearScan : OpRewritePattern<seq::LinearScanOp> {
  GpuLinearScan(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

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
    const int64_t chunk = LinearScanKernels::Chunk;
    Value nChunks = kb.divs(kb.add(T, kb.idx(chunk - 1)), kb.idx(chunk));
    auto f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    Type hElt = cast<RankedTensorType>(op.getH().getType()).getElementType();
    Type lElt = cast<RankedTensorType>(op.getLast().getType()).getElementType();
    auto htype = RankedTensorType::get({dyn, dyn, dyn}, hElt);
    auto ltype = RankedTensorType::get({dyn, dyn}, lElt);
    auto ctype = RankedTensorType::get({dyn, dyn, dyn}, f32);
    LinearScanKernels::Buffers io;
    io.a = readBuffer(b, a);
    io.b = readBuffer(b, bb);
    io.products = allocBuffer(b, ctype, {Bsz, nChunks, S});
    io.ends = allocBuffer(b, ctype, {Bsz, nChunks, S});
    io.h = allocBuffer(b, htype, {Bsz, T, S});
    io.last = allocBuffer(b, ltype, {Bsz, S});
    if (op.getInit())
      io.init = readBuffer(b, toBS(b, op.getInit()));

    LinearScanKernels kernels(b, kb, target, op.getReverse());
    Value chunkItems = kb.mul(kb.mul(Bsz, nChunks), S);
    kernels.emitChunks(io, chunkItems);
    kernels.emitPass(io, kb.mul(Bsz, S));
    kernels.emitApply(io, chunkItems);

    Value h = restoreScanShape(b, asTensor(b, io.h, htype),
                               cast<RankedTensorType>(op.getH().getType()),
                               dims.of("h"));
    Value l = restoreScanShape(b, asTensor(b, io.last, ltype),
                               cast<RankedTensorType>(op.getLast().getType()),
                               dims.of("last"));
    rewriter.replaceOp(op, {h, l});
    return success();
  }

  GpuTarget target;
};

/// The selective scan's buffers as its chunk kernels take them: u, delta
/// ([B, T, D]), A ([D, N]), B and C ([B, T, G, N]), y; the chunks' end
/// states from zero (then the states entering them) [B, chunks, N, D] and
/// sums of dt [B, chunks, D]; the optional skip, gate and delta bias (null
/// when absent).
struct SelectiveScanBuffers : KernelBuffers<SelectiveScanBuffers> {
  Value u, delta, a, b, c, y, states, dtSums;
  Value skip, gate, bias;

  SmallVector<Value *> fields() {
    return {&u, &delta, &a, &b, &c, &y, &states, &dtSums, &skip, &gate, &bias};
  }
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
class SelectiveScanKernels {
public:
  /// The most states a thread keeps in registers; steps per chunk.
  static constexpr int64_t MaxStates = 64, Chunk = 64;

  SelectiveScanKernels(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                       const GpuTarget &target, seq::SelectiveScanOp op,
                       int64_t N)
      : b(b), kb(kb), target(target), N(N),
        zoh(op.getDiscretization() == seq::Discretization::zoh),
        softplus(op.getDeltaSoftplus()) {}

  /// Every chunk from a zero state: its end states and sum of dt.
  void emitChunks(const SelectiveScanBuffers &io, Value chunkItems) {
    emitItemKernel(b, target, "selective_scan_chunks", kb, chunkItems,
                   io.list(), [&](KernelBuilder &k, Value item, ValueRange in) {
                     SelectiveScanBuffers my = io.rebind(in);
                     auto [bi, c, d] = chunkItem(k, item, k.mdim(my.states, 1),
                                                 k.mdim(my.states, 3));
                     SmallVector<Value> zero(N, k.f32(0.0));
                     auto r = runChunk(k, my, bi, c, d, zero, /*emitY=*/false);
                     for (int64_t n = 0; n < N; ++n)
                       k.mstore(r[n], my.states, {bi, c, k.idx(n), d});
                     k.mstore(r[N], my.dtSums, {bi, c, d});
                   });
  }

  /// A thread per (batch, channel, state) passes the state across the
  /// chunks, leaving the state entering each chunk in `states`, and writes
  /// `last`.
  void emitPass(const SelectiveScanBuffers &io, Value last, Value init,
                Value items) {
    SmallVector<Value> args{io.states, io.dtSums, io.a, last};
    if (init)
      args.push_back(init);
    bool hasInit = static_cast<bool>(init);
    emitItemKernel(
        b, target, "selective_scan_pass", kb, items, args,
        [&](KernelBuilder &k, Value item, ValueRange in) {
          Value states = in[0], dtSums = in[1], A = in[2], lastOut = in[3];
          Value initIn = hasInit ? in[4] : Value();
          Value nC = k.mdim(states, 1), nN = k.mdim(states, 2),
                nD = k.mdim(states, 3);
          Value d = k.rems(item, nD), rest = k.divs(item, nD);
          Value n = k.rems(rest, nN), bi = k.divs(rest, nN);
          Value a = k.mload(A, {d, n});
          Value h0 = initIn ? k.mload(initIn, {bi, d, n}) : k.f32(0.0);
          auto r = k.loop(nC, {h0}, [&](Value c, ValueRange it) {
            Value local = k.mload(states, {bi, c, n, d});
            k.mstore(it[0], states, {bi, c, n, d}); // the state entering c
            Value decay = k.exp(k.fmul(a, k.mload(dtSums, {bi, c, d})));
            return SmallVector<Value>{k.fadd(k.fmul(decay, it[0]), local)};
          });
          k.mstore(r[0], lastOut, {bi, d, n});
        });
  }

  /// Every chunk rerun from the states entering it, writing y.
  void emitOutputs(const SelectiveScanBuffers &io, Value chunkItems) {
    emitItemKernel(b, target, "selective_scan_outputs", kb, chunkItems,
                   io.list(), [&](KernelBuilder &k, Value item, ValueRange in) {
                     SelectiveScanBuffers my = io.rebind(in);
                     auto [bi, c, d] = chunkItem(k, item, k.mdim(my.states, 1),
                                                 k.mdim(my.states, 3));
                     SmallVector<Value> h0;
                     for (int64_t n = 0; n < N; ++n)
                       h0.push_back(k.mload(my.states, {bi, c, k.idx(n), d}));
                     runChunk(k, my, bi, c, d, h0, /*emitY=*/true);
                   });
  }

private:
  /// Runs the steps of chunk c of channel (bi, d) from `h0`; with `emitY`
  /// writes y. Returns the end states and the chunk's sum of dt.
  SmallVector<Value> runChunk(KernelBuilder &k, const SelectiveScanBuffers &io,
                              Value bi, Value c, Value d, ArrayRef<Value> h0,
                              bool emitY) const {
    Value nD = k.mdim(io.u, 2), nT = k.mdim(io.u, 1), nG = k.mdim(io.b, 2);
    Value g = k.divs(d, k.divs(nD, nG));
    SmallVector<Value> a;
    for (int64_t n = 0; n < N; ++n)
      a.push_back(k.mload(io.a, {d, k.idx(n)}));
    Value bias = io.bias ? k.mload(io.bias, {d}) : Value();
    Value skip = io.skip ? k.mload(io.skip, {d}) : Value();
    Value t0 = k.mul(c, k.idx(Chunk));
    Value t1 = k.mins(k.add(t0, k.idx(Chunk)), nT);
    SmallVector<Value> inits(h0.begin(), h0.end());
    inits.push_back(k.f32(0.0));
    return k.loop(t0, t1, inits, [&](Value t, ValueRange state) {
      Value dt = k.mload(io.delta, {bi, t, d});
      if (bias)
        dt = k.fadd(dt, bias);
      if (softplus)
        dt = k.softplus(dt);
      Value u = k.mload(io.u, {bi, t, d});
      Value y = skip ? k.fmul(skip, u) : k.f32(0.0);
      SmallVector<Value> next;
      for (int64_t n = 0; n < N; ++n) {
        Value hn =
            step(k, a[n], dt, u, state[n], k.mload(io.b, {bi, t, g, k.idx(n)}));
        next.push_back(hn);
        if (emitY)
          y = k.fadd(y, k.fmul(k.mload(io.c, {bi, t, g, k.idx(n)}), hn));
      }
      if (emitY) {
        if (io.gate)
          y = k.fmul(y, k.silu(k.mload(io.gate, {bi, t, d})));
        k.mstore(y, io.y, {bi, t, d});
      }
      next.push_back(k.fadd(state[N], dt));
      return next;
    });
  }

  /// One state's step: exp(dt a) h + w B u, w = dt (Euler) or, with zoh,
  /// expm1(dt a) / a (dt where a = 0).
  Value step(KernelBuilder &k, Value a, Value dt, Value u, Value h,
             Value bn) const {
    Value dA = k.fmul(dt, a);
    Value weight = dt;
    if (zoh) {
      Value isZero = k.fcmp(arith::CmpFPredicate::OEQ, a, k.f32(0.0));
      weight = k.select(isZero, dt, k.fdiv(k.expm1(dA), a));
    }
    return k.fadd(k.fmul(k.exp(dA), h), k.fmul(k.fmul(weight, bn), u));
  }

  ImplicitLocOpBuilder &b;
  KernelBuilder &kb;
  const GpuTarget &target;
  int64_t N;
  bool zoh, softplus;
};

struct GpuSelectiveScan : OpRewritePattern<seq::SelectiveScanOp> {
  GpuSelectiveScan(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::SelectiveScanOp op,
                                PatternRewriter &rewriter) const override {
    auto aType = cast<RankedTensorType>(op.getA().getType());
    int64_t N = aType.getDimSize(1);
    if (!allFloat(op) || ShapedType::isDynamic(N) ||
        N > SelectiveScanKernels::MaxStates)
      return rewriter.notifyMatchFailure(
          op, "needs float operands and a static N of at most 64");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], D = dims["D"], T = dims["T"];
    const int64_t chunk = SelectiveScanKernels::Chunk;
    Value nChunks = kb.divs(kb.add(T, kb.idx(chunk - 1)), kb.idx(chunk));
    auto f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;

    SelectiveScanBuffers io;
    io.u = readBuffer(b, op.getU());
    io.delta = readBuffer(b, op.getDelta());
    io.a = readBuffer(b, op.getA());
    io.b = readBuffer(b, op.getB());
    io.c = readBuffer(b, op.getC());
    io.y = allocBuffer(b, cast<RankedTensorType>(op.getY().getType()),
                       dims.of("y"));
    io.states = allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, dyn}, f32),
                            {Bsz, nChunks, kb.idx(N), D});
    io.dtSums = allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn}, f32),
                            {Bsz, nChunks, D});
    io.skip = readOptionalBuffer(b, op.getSkip());
    io.gate = readOptionalBuffer(b, op.getGate());
    io.bias = readOptionalBuffer(b, op.getDeltaBias());
    Value last = allocBuffer(b, cast<RankedTensorType>(op.getLast().getType()),
                             dims.of("last"));

    SelectiveScanKernels kernels(b, kb, target, op, N);
    Value chunkItems = kb.mul(kb.mul(Bsz, nChunks), D);
    kernels.emitChunks(io, chunkItems);
    kernels.emitPass(io, last, readOptionalBuffer(b, op.getInit()),
                     kb.mul(kb.mul(Bsz, D), kb.idx(N)));
    kernels.emitOutputs(io, chunkItems);
    rewriter.replaceOp(
        op,
        {asTensor(b, io.y, cast<RankedTensorType>(op.getY().getType())),
         asTensor(b, last, cast<RankedTensorType>(op.getLast().getType()))});
    return success();
  }

  GpuTarget target;
};

/// The causal convolution's buffers as its kernels take them: x ([B, T, D]),
/// w ([D, W]), y, last ([B, D, W - 1]); the optional bias and init (null when
/// absent).
struct ConvBuffers : KernelBuffers<ConvBuffers> {
  Value x, w, y, last, bias, init;

  SmallVector<Value *> fields() { return {&x, &w, &y, &last, &bias, &init}; }
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
    ConvBuffers io;
    io.x = readBuffer(b, op.getX());
    io.w = readBuffer(b, op.getW());
    io.y = allocBuffer(b, yType, dims.of("y"));
    io.last = allocBuffer(b, lastType, dims.of("last"));
    io.bias = readOptionalBuffer(b, op.getBias());
    io.init = readOptionalBuffer(b, op.getInit());
    seq::Activation act = op.getActivation();

    emitItemKernel(b, target, "causal_conv1d", kb, kb.mul(kb.mul(Bsz, T), D),
                   io.list(), [&](KernelBuilder &k, Value item, ValueRange in) {
                     ConvBuffers my = io.rebind(in);
                     Value nT = k.mdim(my.x, 1), nD = k.mdim(my.x, 2);
                     Value d = k.rems(item, nD), rest = k.divs(item, nD);
                     Value t = k.rems(rest, nT), bi = k.divs(rest, nT);
                     Value y = output(k, my, bi, t, d);
                     k.mstore(k.activation(act, y), my.y, {bi, t, d});
                   });
    emitItemKernel(
        b, target, "causal_conv1d_state", kb,
        kb.mul(kb.mul(Bsz, D), kb.sub(W, kb.idx(1))), io.list(),
        [&](KernelBuilder &k, Value item, ValueRange in) {
          ConvBuffers my = io.rebind(in);
          Value nT = k.mdim(my.x, 1), nD = k.mdim(my.x, 2);
          Value nH = k.mdim(my.last, 2);
          Value j = k.rems(item, nH), rest = k.divs(item, nH);
          Value d = k.rems(rest, nD), bi = k.divs(rest, nD);
          k.mstore(padded(k, my, bi, k.add(nT, j), d), my.last, {bi, d, j});
        });
    rewriter.replaceOp(
        op, {asTensor(b, io.y, yType), asTensor(b, io.last, lastType)});
    return success();
  }

  /// Output (bi, t, d) before the activation: the bias first, then the taps
  /// in order (the definition's sum).
  static Value output(KernelBuilder &k, const ConvBuffers &io, Value bi,
                      Value t, Value d) {
    Value acc0 = io.bias ? k.mload(io.bias, {d}) : k.f32(0.0);
    return k.loop(k.mdim(io.w, 1), {acc0}, [&](Value j, ValueRange c) {
      Value x = padded(k, io, bi, k.add(t, j), d);
      return SmallVector<Value>{k.fadd(c[0], k.fmul(k.mload(io.w, {d, j}), x))};
    })[0];
  }

  /// Element q of concat(init, x[bi, :, d]).
  static Value padded(KernelBuilder &k, const ConvBuffers &io, Value bi,
                      Value q, Value d) {
    Value history = k.sub(k.mdim(io.w, 1), k.idx(1));
    Value inX = k.cmp(arith::CmpIPredicate::sge, q, history);
    return k.ifElse(
        inX, {k.f32Type()},
        [&] {
          return SmallVector<Value>{k.mload(io.x, {bi, k.sub(q, history), d})};
        },
        [&] {
          return SmallVector<Value>{io.init ? k.mload(io.init, {bi, d, q})
                                            : k.f32(0.0)};
        })[0];
  }

  GpuTarget target;
};

} // namespace

void seqc::populateGpuScanPatterns(RewritePatternSet &patterns,
                                   const GpuTarget &target) {
  patterns.add<GpuLinearScan, GpuSelectiveScan, GpuCausalConv1d>(
      patterns.getContext(), target);
}
