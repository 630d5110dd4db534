//===- GpuSsd.cpp - Mamba-2 SSD as chunked GPU kernels --------------------===//
//
// SSD follows the strategy's plan (Transforms/Strategy.h): the recurrence,
// a thread per (batch, head, p), for decode and short sequences; else the
// chunked form with chunks of Q steps (16 to 64) in three kernels (as
// mamba_ssm's Triton kernels split it):
//  1. chunk states, a block per (batch, head, chunk): the chunk's dt and its
//     in-chunk cumulative log-decay in shared memory, then
//     S_c[p, n] = sum_s exp(cs[Q-1] - cs[s]) dt[s] x[s, p] B[s, n] from
//     (x, B) tiles staged in shared memory;
//  2. state passing, a thread per (batch, head, p, n): over the chunks in
//     order, S_c is replaced by the state entering chunk c and the final
//     state is `last`;
//  3. chunk outputs, a block per (batch, head, chunk):
//     G = (C B^T) o L o dt over N tiles into shared memory, then per P tile
//     y = exp(cs[t]) C_t S_in + G x + D x, gated.
// Tiles live in static shared memory (under 48 KiB per block); every sum runs
// in f32 whatever the operands' element type. With x, B and C all bf16 on
// sm_80+, three products run on tensor cores (GpuGemm.h): the chunk
// states (the decay-weighted x rounded to the operands' type), C B^T, and
// G x (G rounded), as mamba_ssm's kernels round them; C S_in keeps f32
// states and f32 arithmetic.
//
//===----------------------------------------------------------------------===//

#include "Common/Kernels.h"
#include "GPU/GpuGemm.h"
#include "GPU/GpuPatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace seqc;

namespace {

using arith::CmpIPredicate;

/// The N / P tile sizes of the staged operands (the chunk length Q is the
/// strategy's plan).
constexpr int64_t NTile = 32, PTile = 32;

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
                      Value items, bool softplus) {
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
          Value d = k.mload(dt, {bi, t, h});
          if (bias)
            d = k.fadd(d, k.mload(bias, {h}));
          if (softplus)
            d = k.softplus(d);
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
            yv = k.fadd(yv, k.fmul(k.mload(skip, {h}), xv));
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
    Value Bsz = dims["B"], T = dims["T"], H = dims["H"], P = dims["P"],
          N = dims["N"];
    auto f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    auto yType = cast<RankedTensorType>(op.getY().getType());
    auto lastType = cast<RankedTensorType>(op.getLast().getType());
    Value yBuf = allocBuffer(b, yType, dims.of("y"));
    Value lastBuf = allocBuffer(b, lastType, dims.of("last"));
    Value X = readBuffer(b, op.getX()), Dt = readBuffer(b, op.getDt()),
          A = readBuffer(b, op.getA()), Bm = readBuffer(b, op.getB()),
          Cm = readBuffer(b, op.getC());
    Value bias = op.getDtBias() ? readBuffer(b, op.getDtBias()) : Value();
    Value skip = op.getSkip() ? readBuffer(b, op.getSkip()) : Value();
    Value gate = op.getGate() ? readBuffer(b, op.getGate()) : Value();
    Value init = op.getInit() ? readBuffer(b, op.getInit()) : Value();
    bool softplus = op.getDtSoftplus();
    if (plan.getKind() == seq::PlanKind::recurrent) {
      Value state = allocBuffer(
          b, RankedTensorType::get({dyn, dyn, dyn, dyn}, f32), {Bsz, H, P, N});
      emitSsdRecurrent(
          b, target, kb,
          {X, Dt, A, Bm, Cm, yBuf, lastBuf, bias, skip, gate, init}, state,
          kb.mul(kb.mul(Bsz, H), P), softplus);
      rewriter.replaceOp(
          op, {asTensor(b, yBuf, yType), asTensor(b, lastBuf, lastType)});
      return success();
    }
    // Chunks of Q steps.
    const int64_t Q = plan.getChunk();
    Value nChunks = kb.divs(kb.add(T, kb.idx(Q - 1)), kb.idx(Q));
    // Chunk states (then incoming states) and chunk log-decays, in f32.
    Value states =
        allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, dyn, dyn}, f32),
                    {Bsz, H, nChunks, P, N});
    Value decays = allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn}, f32),
                               {Bsz, H, nChunks});
    Type mmaType = target.tensorCoreType({op.getX(), op.getB(), op.getC()},
                                         /*allowF16=*/false);
    bool mma = static_cast<bool>(mmaType);

    // Optional operands travel after the fixed ones; `pick` finds them.
    auto withOptional = [](SmallVector<Value> args, ArrayRef<Value> optional) {
      for (Value v : optional)
        if (v)
          args.push_back(v);
      return args;
    };
    auto pick = [](ValueRange in, size_t fixed, ArrayRef<Value> optional,
                   Value which) -> Value {
      if (!which)
        return Value();
      size_t i = fixed;
      for (Value v : optional) {
        if (v == which)
          return in[i];
        if (v)
          ++i;
      }
      return Value();
    };

    // Block (bi, h, c) of a per-chunk kernel, the chunk's first step and
    // the group of head h.
    struct ChunkBlock {
      Value bi, h, c, t0, g;
    };
    auto chunkBlock = [&](KernelBuilder &k, Value id, Value x, Value bm) {
      Value nT = k.mdim(x, 1), nH = k.mdim(x, 2), nG = k.mdim(bm, 2);
      Value nC = k.divs(k.add(nT, k.idx(Q - 1)), k.idx(Q));
      Value c = k.rems(id, nC), rest = k.divs(id, nC);
      Value h = k.rems(rest, nH), bi = k.divs(rest, nH);
      Value g = k.divs(h, k.divs(nH, nG));
      return ChunkBlock{bi, h, c, k.mul(c, k.idx(Q)), g};
    };
    auto inChunk = [&](KernelBuilder &k, Value t0, Value s, Value nT) {
      return k.cmp(CmpIPredicate::slt, k.add(t0, s), nT);
    };
    // Phases filling dts[s] (0 past the end) and cs[s], the in-chunk
    // cumulative sum of dt * A (one thread: Q steps).
    auto stageDecay = [&](GpuBlock &blk, const ChunkBlock &cb, Value x,
                          Value dt, Value a, Value biasIn, Value dts,
                          Value cs) {
      KernelBuilder &k = blk.kb;
      Value nT = k.mdim(x, 1);
      blk.phase(k.idx(Q), [&](Value s) {
        Value valid = inChunk(k, cb.t0, s, nT);
        Value v = k.ifElse(
            valid, {f32},
            [&]() -> SmallVector<Value> {
              Value d = k.mload(dt, {cb.bi, k.add(cb.t0, s), cb.h});
              if (biasIn)
                d = k.fadd(d, k.mload(biasIn, {cb.h}));
              return {softplus ? k.softplus(d) : d};
            },
            [&]() -> SmallVector<Value> { return {k.f32(0.0)}; })[0];
        k.mstore(v, dts, {s});
      });
      blk.phase(k.idx(1), [&](Value) {
        Value ah = k.mload(a, {cb.h});
        k.loop(k.idx(Q), {k.f32(0.0)}, [&](Value s, ValueRange it) {
          Value sum = k.fadd(it[0], k.fmul(k.mload(dts, {s}), ah));
          k.mstore(sum, cs, {s});
          return SmallVector<Value>{sum};
        });
      });
    };
    // Loads element (t0 + s, ..., j0 + j) of `m` (rank 4: [B, T, *, J]) or
    // 0 outside the chunk / the last dim.
    auto loadTile = [&](KernelBuilder &k, Value m, Value bi, Value t0, Value s,
                        Value mid, Value j0, Value j) {
      Value nT = k.mdim(m, 1), nJ = k.mdim(m, 3);
      Value col = k.add(j0, j);
      Value ok =
          k.andi(inChunk(k, t0, s, nT), k.cmp(CmpIPredicate::slt, col, nJ));
      return k.loadIf(ok, m, {bi, k.add(t0, s), mid, col}, k.f32(0.0));
    };

    // 1. Chunk states.
    SmallVector<Value> opt1{bias};
    SmallVector<Value> args1 =
        withOptional({X, Dt, A, Bm, states, decays}, opt1);
    emitGpuKernel(
        b, target, mma ? "ssd_chunk_states_mma" : "ssd_chunk_states",
        kb.mul(kb.mul(Bsz, H), nChunks), args1,
        {{Q}, {Q}, {Q * PTile}, {Q * NTile}},
        [&](GpuBlock &blk, ValueRange in, ValueRange sh) {
          KernelBuilder &k = blk.kb;
          Value x = in[0], bm = in[3], st = in[4];
          ChunkBlock cb = chunkBlock(k, blk.blockId, x, bm);
          Value dts = sh[0], cs = sh[1], xw = sh[2], bs = sh[3];
          stageDecay(blk, cb, x, in[1], in[2], pick(in, 6, opt1, bias), dts,
                     cs);
          Value nP = k.mdim(x, 3), nN = k.mdim(bm, 3);
          blk.phase(k.idx(1), [&](Value) {
            k.mstore(k.mload(cs, {k.idx(Q - 1)}), in[5], {cb.bi, cb.h, cb.c});
          });
          k.forEach(k.idx(0), nP, k.idx(PTile), [&](Value p0) {
            // xw[s][pp] = exp(cs[Q-1] - cs[s]) dt[s] x[s, p0 + pp].
            blk.phase2(k.idx(Q), k.idx(PTile), [&](Value s, Value pp) {
              Value w = k.fmul(
                  k.exp(k.fsub(k.mload(cs, {k.idx(Q - 1)}), k.mload(cs, {s}))),
                  k.mload(dts, {s}));
              Value xv = loadTile(k, x, cb.bi, cb.t0, s, cb.h, p0, pp);
              k.mstore(k.fmul(w, xv), xw, {k.add(k.mul(s, k.idx(PTile)), pp)});
            });
            k.forEach(k.idx(0), nN, k.idx(NTile), [&](Value n0) {
              blk.phase2(k.idx(Q), k.idx(NTile), [&](Value s, Value nn) {
                k.mstore(loadTile(k, bm, cb.bi, cb.t0, s, cb.g, n0, nn), bs,
                         {k.add(k.mul(s, k.idx(NTile)), nn)});
              });
              auto store = [&](Value pp, Value nn, Value v) {
                Value p = k.add(p0, pp), n = k.add(n0, nn);
                Value ok = k.andi(k.cmp(CmpIPredicate::slt, p, nP),
                                  k.cmp(CmpIPredicate::slt, n, nN));
                k.ifThen(ok, [&] {
                  k.mstore(v, st, {cb.bi, cb.h, cb.c, p, n});
                });
              };
              if (mma) {
                mmaSharedProduct(
                    blk, mmaType, PTile, NTile, Q,
                    [&](Value pp, Value s) {
                      return k.mload(xw, {k.add(k.mul(s, k.idx(PTile)), pp)});
                    },
                    [&](Value s, Value nn) {
                      return k.mload(bs, {k.add(k.mul(s, k.idx(NTile)), nn)});
                    },
                    [&](Value, Value) { return k.f32(0.0); }, store);
                return;
              }
              blk.phase2(k.idx(PTile), k.idx(NTile), [&](Value pp, Value nn) {
                Value p = k.add(p0, pp), n = k.add(n0, nn);
                Value ok = k.andi(k.cmp(CmpIPredicate::slt, p, nP),
                                  k.cmp(CmpIPredicate::slt, n, nN));
                k.ifThen(ok, [&] {
                  auto acc = k.loop(
                      k.idx(Q), {k.f32(0.0)}, [&](Value s, ValueRange it) {
                        Value xv =
                            k.mload(xw, {k.add(k.mul(s, k.idx(PTile)), pp)});
                        Value bv =
                            k.mload(bs, {k.add(k.mul(s, k.idx(NTile)), nn)});
                        return SmallVector<Value>{
                            k.fadd(it[0], k.fmul(xv, bv))};
                      });
                  k.mstore(acc[0], st, {cb.bi, cb.h, cb.c, p, n});
                });
              });
            });
          });
        });

    // 2. State passing.
    SmallVector<Value> args2{states, decays, lastBuf};
    if (init)
      args2.push_back(init);
    emitItemKernel(
        b, target, "ssd_state_passing", kb,
        kb.mul(kb.mul(kb.mul(Bsz, H), P), N), args2,
        [&](KernelBuilder &k, Value item, ValueRange in) {
          Value st = in[0];
          Value nH = k.mdim(st, 1), nC = k.mdim(st, 2), nP = k.mdim(st, 3),
                nN = k.mdim(st, 4);
          Value n = k.rems(item, nN), rest = k.divs(item, nN);
          Value p = k.rems(rest, nP);
          rest = k.divs(rest, nP);
          Value h = k.rems(rest, nH), bi = k.divs(rest, nH);
          Value h0 = init ? k.mload(in[3], {bi, h, p, n}) : k.f32(0.0);
          auto r = k.loop(nC, {h0}, [&](Value c, ValueRange it) {
            Value local = k.mload(st, {bi, h, c, p, n});
            k.mstore(it[0], st, {bi, h, c, p, n});
            Value decay = k.exp(k.mload(in[1], {bi, h, c}));
            return SmallVector<Value>{k.fadd(k.fmul(decay, it[0]), local)};
          });
          k.mstore(r[0], in[2], {bi, h, p, n});
        });

    // 3. Chunk outputs.
    SmallVector<Value> opt3{bias, skip, gate};
    SmallVector<Value> args3 =
        withOptional({X, Dt, A, Bm, Cm, states, yBuf}, opt3);
    emitGpuKernel(
        b, target, mma ? "ssd_chunk_outputs_mma" : "ssd_chunk_outputs",
        kb.mul(kb.mul(Bsz, H), nChunks), args3,
        {{Q}, {Q}, {Q * Q}, {2 * Q * NTile}, {PTile * NTile}, {Q * PTile}},
        [&](GpuBlock &blk, ValueRange in, ValueRange sh) {
          KernelBuilder &k = blk.kb;
          Value x = in[0], bm = in[3], cm = in[4], st = in[5], y = in[6];
          Value biasIn = pick(in, 7, opt3, bias),
                skipIn = pick(in, 7, opt3, skip),
                gateIn = pick(in, 7, opt3, gate);
          ChunkBlock cb = chunkBlock(k, blk.blockId, x, bm);
          Value dts = sh[0], cs = sh[1], G = sh[2], tile = sh[3], ss = sh[4],
                acc = sh[5];
          // G and acc accumulate over N tiles, the first tile overwriting:
          // with N = 0 there is none, and both must read as zeros.
          blk.phase(
              k.idx(Q * Q),
              [&](Value i) {
                k.mstore(k.f32(0.0), G, {i});
                k.ifThen(k.cmp(CmpIPredicate::slt, i, k.idx(Q * PTile)),
                         [&] { k.mstore(k.f32(0.0), acc, {i}); });
              },
              /*barrier=*/false); // stageDecay ends with one
          stageDecay(blk, cb, x, in[1], in[2], biasIn, dts, cs);
          Value nT = k.mdim(x, 1), nP = k.mdim(x, 3), nN = k.mdim(bm, 3);
          Value qIdx = k.idx(Q), ntIdx = k.idx(NTile), ptIdx = k.idx(PTile);
          auto at = [&](Value row, Value ld, Value col, int64_t offset = 0) {
            return k.add(k.idx(offset), k.add(k.mul(row, ld), col));
          };
          // G[t][s] = sum_n C[t, n] B[s, n], over N tiles (C at tile[0..),
          // B at tile[Q * NTile..)).
          k.forEach(k.idx(0), nN, ntIdx, [&](Value n0) {
            blk.phase2(qIdx, ntIdx, [&](Value s, Value nn) {
              k.mstore(loadTile(k, cm, cb.bi, cb.t0, s, cb.g, n0, nn), tile,
                       {at(s, ntIdx, nn)});
              k.mstore(loadTile(k, bm, cb.bi, cb.t0, s, cb.g, n0, nn), tile,
                       {at(s, ntIdx, nn, Q * NTile)});
            });
            Value first = k.cmp(CmpIPredicate::eq, n0, k.idx(0));
            if (mma) {
              mmaSharedProduct(
                  blk, mmaType, Q, Q, NTile,
                  [&](Value t, Value nn) {
                    return k.mload(tile, {at(t, ntIdx, nn)});
                  },
                  [&](Value nn, Value s) {
                    return k.mload(tile, {at(s, ntIdx, nn, Q * NTile)});
                  },
                  [&](Value t, Value s) {
                    return k.select(first, k.f32(0.0),
                                    k.mload(G, {at(t, qIdx, s)}));
                  },
                  [&](Value t, Value s, Value v) {
                    k.mstore(v, G, {at(t, qIdx, s)});
                  });
              return;
            }
            blk.phase2(qIdx, qIdx, [&](Value t, Value s) {
              auto sum =
                  k.loop(ntIdx, {k.f32(0.0)}, [&](Value nn, ValueRange it) {
                    Value cv = k.mload(tile, {at(t, ntIdx, nn)});
                    Value bv = k.mload(tile, {at(s, ntIdx, nn, Q * NTile)});
                    return SmallVector<Value>{k.fadd(it[0], k.fmul(cv, bv))};
                  });
              Value prev =
                  k.select(first, k.f32(0.0), k.mload(G, {at(t, qIdx, s)}));
              k.mstore(k.fadd(prev, sum[0]), G, {at(t, qIdx, s)});
            });
          });
          // G[t][s] *= exp(cs[t] - cs[s]) dt[s] for s <= t, else 0.
          blk.phase2(qIdx, qIdx, [&](Value t, Value s) {
            Value causal = k.cmp(CmpIPredicate::sle, s, t);
            Value decay = k.exp(k.fsub(k.mload(cs, {t}), k.mload(cs, {s})));
            Value v = k.fmul(k.fmul(k.mload(G, {at(t, qIdx, s)}), decay),
                             k.mload(dts, {s}));
            k.mstore(k.select(causal, v, k.f32(0.0)), G, {at(t, qIdx, s)});
          });
          k.forEach(k.idx(0), nP, ptIdx, [&](Value p0) {
            // acc[t][pp] = sum_n C[t, n] S_in[p0 + pp, n].
            k.forEach(k.idx(0), nN, ntIdx, [&](Value n0) {
              blk.phase2(qIdx, ntIdx, [&](Value s, Value nn) {
                k.mstore(loadTile(k, cm, cb.bi, cb.t0, s, cb.g, n0, nn), tile,
                         {at(s, ntIdx, nn)});
              });
              blk.phase2(ptIdx, ntIdx, [&](Value pp, Value nn) {
                Value p = k.add(p0, pp), n = k.add(n0, nn);
                Value ok = k.andi(k.cmp(CmpIPredicate::slt, p, nP),
                                  k.cmp(CmpIPredicate::slt, n, nN));
                k.mstore(
                    k.loadIf(ok, st, {cb.bi, cb.h, cb.c, p, n}, k.f32(0.0)), ss,
                    {at(pp, ntIdx, nn)});
              });
              Value first = k.cmp(CmpIPredicate::eq, n0, k.idx(0));
              blk.phase2(qIdx, ptIdx, [&](Value t, Value pp) {
                auto sum =
                    k.loop(ntIdx, {k.f32(0.0)}, [&](Value nn, ValueRange it) {
                      Value cv = k.mload(tile, {at(t, ntIdx, nn)});
                      Value sv = k.mload(ss, {at(pp, ntIdx, nn)});
                      return SmallVector<Value>{k.fadd(it[0], k.fmul(cv, sv))};
                    });
                Value prev = k.select(first, k.f32(0.0),
                                      k.mload(acc, {at(t, ptIdx, pp)}));
                k.mstore(k.fadd(prev, sum[0]), acc, {at(t, ptIdx, pp)});
              });
            });
            // x tile (reusing `tile`), then the outputs.
            blk.phase2(qIdx, ptIdx, [&](Value s, Value pp) {
              k.mstore(loadTile(k, x, cb.bi, cb.t0, s, cb.h, p0, pp), tile,
                       {at(s, ptIdx, pp)});
            });
            // acc[t][pp] = exp(cs[t]) acc[t][pp] + sum_{s <= t} G[t][s]
            // x[s][pp] (G is zero above the diagonal).
            if (mma)
              mmaSharedProduct(
                  blk, mmaType, Q, PTile, Q,
                  [&](Value t, Value s) {
                    return k.mload(G, {at(t, qIdx, s)});
                  },
                  [&](Value s, Value pp) {
                    return k.mload(tile, {at(s, ptIdx, pp)});
                  },
                  [&](Value t, Value pp) {
                    return k.fmul(k.exp(k.mload(cs, {t})),
                                  k.mload(acc, {at(t, ptIdx, pp)}));
                  },
                  [&](Value t, Value pp, Value v) {
                    k.mstore(v, acc, {at(t, ptIdx, pp)});
                  },
                  /*causal=*/true);
            blk.phase2(qIdx, ptIdx, [&](Value t, Value pp) {
              Value p = k.add(p0, pp);
              Value ok = k.andi(inChunk(k, cb.t0, t, nT),
                                k.cmp(CmpIPredicate::slt, p, nP));
              k.ifThen(ok, [&] {
                Value yv = k.mload(acc, {at(t, ptIdx, pp)});
                if (!mma) {
                  auto intra = k.loop(k.add(t, k.idx(1)), {k.f32(0.0)},
                                      [&](Value s, ValueRange it) {
                                        Value gv = k.mload(G, {at(t, qIdx, s)});
                                        Value xv =
                                            k.mload(tile, {at(s, ptIdx, pp)});
                                        return SmallVector<Value>{
                                            k.fadd(it[0], k.fmul(gv, xv))};
                                      });
                  yv = k.fadd(intra[0], k.fmul(k.exp(k.mload(cs, {t})), yv));
                }
                Value row = k.add(cb.t0, t);
                if (skipIn)
                  yv = k.fadd(yv, k.fmul(k.mload(skipIn, {cb.h}),
                                         k.mload(tile, {at(t, ptIdx, pp)})));
                if (gateIn)
                  yv = k.fmul(yv,
                              k.silu(k.mload(gateIn, {cb.bi, row, cb.h, p})));
                k.mstore(yv, y, {cb.bi, row, cb.h, p});
              });
            });
          });
        });

    rewriter.replaceOp(
        op, {asTensor(b, yBuf, yType), asTensor(b, lastBuf, lastType)});
    return success();
  }

  GpuTarget target;
};

} // namespace

void seqc::populateGpuSsdPatterns(RewritePatternSet &patterns,
                                  const GpuTarget &target) {
  patterns.add<GpuSsd>(patterns.getContext(), target);
}
