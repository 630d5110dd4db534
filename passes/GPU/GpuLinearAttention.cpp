//===- GpuLinearAttention.cpp - chunked linear attention on the GPU -------===//
//
// Linear attention follows the strategy's plan (Transforms/Strategy.h): the
// recurrence, a block per (batch, head), for decode and short sequences;
// else the chunked form (chunks of Q = 16 or 32 steps) in three kernels, as
// for SSD:
//  1. chunk states, a block per (batch, head, chunk of Q steps): the
//     chunk's cumulative log-decays cg (per step, or per step and key
//     channel for GLA's decay) in shared memory, then
//     S_c[k, v] = sum_s exp(cg[Q-1, k] - cg[s, k]) k'[s, k] v[s, v] from
//     staged (k', v) tiles;
//  2. state passing, a thread per (batch, head, k, v): S_c becomes the state
//     entering chunk c; the final state is `last`;
//  3. chunk outputs: G[t, s] = sum_k q'[t, k] k'[s, k] exp(cg[t, k] -
//     cg[s, k]) (s <= t), then o[t] = (q'[t] o exp(cg[t])) S_in + G v.
// The normalizer is one more value column of ones (z is S's column V), so
// with `normalize` the kernels carry V + 1 columns and the output divides by
// that column (+ eps). Non-causal attention uses the same kernels without
// decay: every output reads the total state and there is no in-chunk term.
// With bf16 q, k and v on sm_80+, the chunk states, q' k'^T (scalar
// decays) and G v are tensor-core products over the shared tiles, their f32
// operands (feature-mapped, decay-weighted, masked) rounded to the inputs'
// type; (q' o exp(cg)) S_in keeps the f32 states in f32 arithmetic.
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

/// Key and value channels per tile, the most key channels a per-channel
/// decay keeps in shared memory (the chunk length Q is the strategy's plan).
constexpr int64_t KT = 32, VT = 32, KMaxDecay = 128;

/// The operands of one seq.linear_attention as buffers; optional ones are
/// null.
struct LinearAttentionBuffers {
  Value q, k, v, o, last;
  Value decay, init;
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
/// and o = num[:V], divided by num[V] + eps with `normalize`.
void emitLinearAttentionRecurrent(ImplicitLocOpBuilder &b,
                                  const GpuTarget &target, KernelBuilder &kb,
                                  const LinearAttentionBuffers &buf,
                                  const LinearAttentionForm &form, Value state,
                                  Value numerators, Value blocks) {
  SmallVector<Value> args{buf.q,    buf.k, buf.v,     buf.o,
                          buf.last, state, numerators};
  if (buf.decay)
    args.push_back(buf.decay);
  if (buf.init)
    args.push_back(buf.init);
  emitGpuKernel(
      b, target, "linear_attention_recurrent", blocks, args, {},
      [&](GpuBlock &blk, ValueRange in, ValueRange) {
        KernelBuilder &k = blk.kb;
        Value q = in[0], km = in[1], vm = in[2], o = in[3], last = in[4],
              st = in[5], num = in[6];
        size_t next = 7;
        Value g = buf.decay ? in[next++] : Value();
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
          blk.phase(nC, [&](Value c) {
            auto sum = k.loop(nK, {k.f32(0.0)}, [&](Value kk, ValueRange it) {
              Value qp =
                  k.fmul(k.featureMap(form.phi, k.mload(q, {bi, t, h, kk})),
                         k.f32(form.scale));
              return SmallVector<Value>{
                  k.fadd(it[0], k.fmul(qp, k.mload(st, {bi, h, kk, c})))};
            });
            k.mstore(sum[0], num, {bi, h, c});
          });
          blk.phase(nV, [&](Value c) {
            Value out = k.mload(num, {bi, h, c});
            if (form.normalize)
              out = k.fdiv(out,
                           k.fadd(k.mload(num, {bi, h, nV}), k.f32(form.eps)));
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
        (ShapedType::isDynamic(kStatic) || kStatic > KMaxDecay))
      return rewriter.notifyMatchFailure(
          op,
          "a per-channel decay needs a static K of at most 128 (chunked plan)");
    const int64_t KG = decayRank == 4 ? kStatic : 1;

    Type mmaType = target.tensorCoreType({op.getQ(), op.getK(), op.getV()},
                                         /*allowF16=*/false);
    bool mma = static_cast<bool>(mmaType);

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], H = dims["H"], K = dims["K"],
          V = dims["V"];
    seq::FeatureMap phi = op.getFeatureMap();
    double scale = op.getScale().convertToDouble();
    double eps = op.getEps().convertToDouble();
    bool normalize = op.getNormalize(), causal = op.getCausal();
    Value Vx = normalize ? kb.add(V, kb.idx(1)) : V; // value columns carried
    auto f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    auto oType = cast<RankedTensorType>(op.getO().getType());
    auto lastType = cast<RankedTensorType>(op.getLast().getType());
    Value oBuf = allocBuffer(b, oType, dims.of("o"));
    Value lastBuf = allocBuffer(b, lastType, dims.of("last"));
    if (plan.getKind() == seq::PlanKind::recurrent) {
      Value state = allocBuffer(
          b, RankedTensorType::get({dyn, dyn, dyn, dyn}, f32), {Bsz, H, K, Vx});
      Value numerators = allocBuffer(
          b, RankedTensorType::get({dyn, dyn, dyn}, f32), {Bsz, H, Vx});
      emitLinearAttentionRecurrent(
          b, target, kb,
          {readBuffer(b, op.getQ()), readBuffer(b, op.getK()),
           readBuffer(b, op.getV()), oBuf, lastBuf,
           decay ? readBuffer(b, decay) : Value(),
           op.getInit() ? readBuffer(b, op.getInit()) : Value()},
          {phi, scale, eps, normalize, decayRank}, state, numerators,
          kb.mul(Bsz, H));
      rewriter.replaceOp(
          op, {asTensor(b, oBuf, oType), asTensor(b, lastBuf, lastType)});
      return success();
    }
    // Chunks of Q steps (non-causal attention sums its chunk states with
    // the same kernels, in chunks as large as the kernels take).
    const int64_t Q = plan.getKind() == seq::PlanKind::chunked
                          ? plan.getChunk()
                          : machine.linearAttentionChunks.max;
    Value nChunks = kb.divs(kb.add(T, kb.idx(Q - 1)), kb.idx(Q));
    Value states =
        allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, dyn, dyn}, f32),
                    {Bsz, H, nChunks, K, Vx});
    Value decays =
        allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, dyn}, f32),
                    {Bsz, H, nChunks, kb.idx(KG)});
    // Non-causal: the total state, read by every output.
    Value totals =
        causal
            ? Value()
            : allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, dyn}, f32),
                          {Bsz, H, K, Vx});
    Value Qm = readBuffer(b, op.getQ()), Km = readBuffer(b, op.getK()),
          Vm = readBuffer(b, op.getV());
    Value G = decay ? readBuffer(b, decay) : Value();
    Value init = op.getInit() ? readBuffer(b, op.getInit()) : Value();

    struct ChunkBlock {
      Value bi, h, c, t0;
    };
    auto chunkBlock = [&](KernelBuilder &k, Value id, Value q) {
      Value nT = k.mdim(q, 1), nH = k.mdim(q, 2);
      Value nC = k.divs(k.add(nT, k.idx(Q - 1)), k.idx(Q));
      Value c = k.rems(id, nC), rest = k.divs(id, nC);
      return ChunkBlock{k.divs(rest, nH), k.rems(rest, nH), c,
                        k.mul(c, k.idx(Q))};
    };
    auto lt = [&](KernelBuilder &k, Value a, Value c) {
      return k.cmp(CmpIPredicate::slt, a, c);
    };
    auto at = [&](KernelBuilder &k, Value row, int64_t ld, Value col) {
      return k.add(k.mul(row, k.idx(ld)), col);
    };
    // phi(q) * scale, phi(k) at step t0 + s (0 past the end / K).
    auto qPrime = [&](KernelBuilder &k, Value q, const ChunkBlock &cb, Value s,
                      Value kk) {
      Value t = k.add(cb.t0, s);
      Value ok = k.andi(lt(k, t, k.mdim(q, 1)), lt(k, kk, k.mdim(q, 3)));
      return k.ifElse(
          ok, {f32},
          [&]() -> SmallVector<Value> {
            return {k.fmul(k.featureMap(phi, k.mload(q, {cb.bi, t, cb.h, kk})),
                           k.f32(scale))};
          },
          [&]() -> SmallVector<Value> { return {k.f32(0.0)}; })[0];
    };
    auto kPrime = [&](KernelBuilder &k, Value km, const ChunkBlock &cb, Value s,
                      Value kk) {
      Value t = k.add(cb.t0, s);
      Value ok = k.andi(lt(k, t, k.mdim(km, 1)), lt(k, kk, k.mdim(km, 3)));
      return k.ifElse(
          ok, {f32},
          [&]() -> SmallVector<Value> {
            return {k.featureMap(phi, k.mload(km, {cb.bi, t, cb.h, kk}))};
          },
          [&]() -> SmallVector<Value> { return {k.f32(0.0)}; })[0];
    };
    // Value column `col` of step t0 + s: v, then the normalizer's ones.
    auto value = [&](KernelBuilder &k, Value vm, const ChunkBlock &cb, Value s,
                     Value col) {
      Value t = k.add(cb.t0, s), nV = k.mdim(vm, 3);
      Value valid = lt(k, t, k.mdim(vm, 1));
      Value isV = k.andi(valid, lt(k, col, nV));
      Value ones = k.f32(normalize ? 1.0 : 0.0);
      Value isOne = k.andi(valid, k.cmp(CmpIPredicate::eq, col, nV));
      return k.select(isOne, ones,
                      k.loadIf(isV, vm, {cb.bi, t, cb.h, col}, k.f32(0.0)));
    };
    // cg[s * KG + j]: cumulative log-decay of the chunk up to step s (0 past
    // the end and without decay), a thread per decay column.
    auto stageDecay = [&](GpuBlock &blk, const ChunkBlock &cb, Value q, Value g,
                          Value cg) {
      KernelBuilder &k = blk.kb;
      blk.phase(k.idx(KG), [&](Value j) {
        k.loop(k.idx(Q), {k.f32(0.0)}, [&](Value s, ValueRange it) {
          Value t = k.add(cb.t0, s);
          Value lg = k.f32(0.0);
          if (g) {
            SmallVector<Value> idx;
            if (decayRank == 1)
              idx = {cb.h};
            else if (decayRank == 3)
              idx = {cb.bi, t, cb.h};
            else
              idx = {cb.bi, t, cb.h, j};
            lg = k.loadIf(lt(k, t, k.mdim(q, 1)), g, idx, k.f32(0.0));
          }
          Value sum = k.fadd(it[0], lg);
          k.mstore(sum, cg, {at(k, s, KG, j)});
          return SmallVector<Value>{sum};
        });
      });
    };
    // cg of step s for key channel kk (0 for channels past K, which only
    // partial tiles ask for).
    auto cgAt = [&](KernelBuilder &k, Value cg, Value s, Value kk) {
      if (KG == 1)
        return k.mload(cg, {at(k, s, KG, k.idx(0))});
      Value inside = lt(k, kk, k.idx(KG));
      Value v = k.mload(cg, {at(k, s, KG, k.mins(kk, k.idx(KG - 1)))});
      return k.select(inside, v, k.f32(0.0));
    };

    auto withDecay = [&](SmallVector<Value> args) {
      if (G)
        args.push_back(G);
      return args;
    };
    // 1. Chunk states.
    emitGpuKernel(
        b, target,
        mma ? "linear_attention_chunk_states_mma"
            : "linear_attention_chunk_states",
        kb.mul(kb.mul(Bsz, H), nChunks),
        withDecay({Qm, Km, Vm, states, decays, Vx}),
        {{Q * KG}, {Q * KT}, {Q * VT}},
        [&](GpuBlock &blk, ValueRange in, ValueRange sh) {
          KernelBuilder &k = blk.kb;
          Value q = in[0], km = in[1], vm = in[2], st = in[3], nVx = in[5];
          Value g = G ? in[6] : Value();
          Value cg = sh[0], kw = sh[1], vs = sh[2];
          ChunkBlock cb = chunkBlock(k, blk.blockId, q);
          stageDecay(blk, cb, q, g, cg);
          blk.phase(k.idx(KG), [&](Value j) {
            k.mstore(k.mload(cg, {at(k, k.idx(Q - 1), KG, j)}), in[4],
                     {cb.bi, cb.h, cb.c, j});
          });
          Value nK = k.mdim(q, 3);
          k.forEach(k.idx(0), nK, k.idx(KT), [&](Value k0) {
            blk.phase2(k.idx(Q), k.idx(KT), [&](Value s, Value kk) {
              Value ch = k.add(k0, kk);
              Value w = k.exp(
                  k.fsub(cgAt(k, cg, k.idx(Q - 1), ch), cgAt(k, cg, s, ch)));
              k.mstore(k.fmul(kPrime(k, km, cb, s, ch), w), kw,
                       {at(k, s, KT, kk)});
            });
            k.forEach(k.idx(0), nVx, k.idx(VT), [&](Value v0) {
              blk.phase2(k.idx(Q), k.idx(VT), [&](Value s, Value vv) {
                k.mstore(value(k, vm, cb, s, k.add(v0, vv)), vs,
                         {at(k, s, VT, vv)});
              });
              if (mma) {
                mmaSharedProduct(
                    blk, mmaType, KT, VT, Q,
                    [&](Value kk, Value s) {
                      return k.mload(kw, {at(k, s, KT, kk)});
                    },
                    [&](Value s, Value vv) {
                      return k.mload(vs, {at(k, s, VT, vv)});
                    },
                    [&](Value, Value) { return k.f32(0.0); },
                    [&](Value kk, Value vv, Value v) {
                      Value ch = k.add(k0, kk), col = k.add(v0, vv);
                      k.ifThen(k.andi(lt(k, ch, nK), lt(k, col, nVx)), [&] {
                        k.mstore(v, st, {cb.bi, cb.h, cb.c, ch, col});
                      });
                    });
                return;
              }
              blk.phase2(k.idx(KT), k.idx(VT), [&](Value kk, Value vv) {
                Value ch = k.add(k0, kk), col = k.add(v0, vv);
                k.ifThen(k.andi(lt(k, ch, nK), lt(k, col, nVx)), [&] {
                  auto sum = k.loop(
                      k.idx(Q), {k.f32(0.0)}, [&](Value s, ValueRange it) {
                        return SmallVector<Value>{k.fadd(
                            it[0], k.fmul(k.mload(kw, {at(k, s, KT, kk)}),
                                          k.mload(vs, {at(k, s, VT, vv)})))};
                      });
                  k.mstore(sum[0], st, {cb.bi, cb.h, cb.c, ch, col});
                });
              });
            });
          });
        });

    // 2. State passing (the normalizer column starts at 0).
    SmallVector<Value> args2{states, decays, lastBuf};
    if (totals)
      args2.push_back(totals);
    if (init)
      args2.push_back(init);
    emitItemKernel(
        b, target, "linear_attention_state_passing", kb,
        kb.mul(kb.mul(kb.mul(Bsz, H), K), Vx), args2,
        [&](KernelBuilder &k, Value item, ValueRange in) {
          Value st = in[0];
          Value nH = k.mdim(st, 1), nC = k.mdim(st, 2), nK = k.mdim(st, 3),
                nVx = k.mdim(st, 4), nV = k.mdim(in[2], 3);
          Value col = k.rems(item, nVx), rest = k.divs(item, nVx);
          Value ch = k.rems(rest, nK);
          rest = k.divs(rest, nK);
          Value h = k.rems(rest, nH), bi = k.divs(rest, nH);
          Value isV = lt(k, col, nV);
          Value h0 =
              init ? k.loadIf(isV, in.back(), {bi, h, ch, col}, k.f32(0.0))
                   : k.f32(0.0);
          Value j = KG == 1 ? k.idx(0) : ch;
          auto r = k.loop(nC, {h0}, [&](Value c, ValueRange it) {
            Value local = k.mload(st, {bi, h, c, ch, col});
            k.mstore(it[0], st, {bi, h, c, ch, col});
            Value f = k.exp(k.mload(in[1], {bi, h, c, j}));
            return SmallVector<Value>{k.fadd(k.fmul(f, it[0]), local)};
          });
          k.ifThen(isV, [&] { k.mstore(r[0], in[2], {bi, h, ch, col}); });
          if (totals)
            k.mstore(r[0], in[3], {bi, h, ch, col});
        });

    // 3. Chunk outputs.
    SmallVector<Value> args3{Qm, Km, Vm, causal ? states : totals, oBuf, Vx};
    emitGpuKernel(
        b, target,
        mma ? "linear_attention_chunk_outputs_mma"
            : "linear_attention_chunk_outputs",
        kb.mul(kb.mul(Bsz, H), nChunks), withDecay(args3),
        {{Q * KG},
         {Q * KT},
         {Q * KT},
         {Q * Q},
         {KT * VT},
         {Q * VT},
         {Q * VT},
         {Q}},
        [&](GpuBlock &blk, ValueRange in, ValueRange sh) {
          KernelBuilder &k = blk.kb;
          Value q = in[0], km = in[1], vm = in[2], st = in[3], o = in[4],
                nVx = in[5];
          Value g = G ? in[6] : Value();
          Value cg = sh[0], qs = sh[1], ks = sh[2], gm = sh[3], ss = sh[4],
                acc = sh[5], vs = sh[6], den = sh[7];
          ChunkBlock cb = chunkBlock(k, blk.blockId, q);
          Value nK = k.mdim(q, 3), nT = k.mdim(q, 1), nV = k.mdim(vm, 3);
          // gm and acc accumulate over key tiles, the first overwriting:
          // with K = 0 there is none, and both must read as zeros.
          blk.phase(
              k.idx(Q * Q),
              [&](Value i) {
                k.mstore(k.f32(0.0), gm, {i});
                k.ifThen(lt(k, i, k.idx(Q * VT)),
                         [&] { k.mstore(k.f32(0.0), acc, {i}); });
              },
              /*barrier=*/false); // stageDecay ends with one
          stageDecay(blk, cb, q, g, cg);
          if (causal) {
            // G[t][s] over key tiles, then the causal mask and decay.
            k.forEach(k.idx(0), nK, k.idx(KT), [&](Value k0) {
              blk.phase2(k.idx(Q), k.idx(KT), [&](Value s, Value kk) {
                Value ch = k.add(k0, kk);
                k.mstore(qPrime(k, q, cb, s, ch), qs, {at(k, s, KT, kk)});
                k.mstore(kPrime(k, km, cb, s, ch), ks, {at(k, s, KT, kk)});
              });
              Value first = k.cmp(CmpIPredicate::eq, k0, k.idx(0));
              if (mma && KG == 1) {
                mmaSharedProduct(
                    blk, mmaType, Q, Q, KT,
                    [&](Value t, Value kk) {
                      return k.mload(qs, {at(k, t, KT, kk)});
                    },
                    [&](Value kk, Value s) {
                      return k.mload(ks, {at(k, s, KT, kk)});
                    },
                    [&](Value t, Value s) {
                      return k.select(first, k.f32(0.0),
                                      k.mload(gm, {at(k, t, Q, s)}));
                    },
                    [&](Value t, Value s, Value v) {
                      k.mstore(v, gm, {at(k, t, Q, s)});
                    });
                return;
              }
              blk.phase2(k.idx(Q), k.idx(Q), [&](Value t, Value s) {
                auto dot = k.loop(
                    k.idx(KT), {k.f32(0.0)}, [&](Value kk, ValueRange it) {
                      Value p = k.fmul(k.mload(qs, {at(k, t, KT, kk)}),
                                       k.mload(ks, {at(k, s, KT, kk)}));
                      if (KG > 1) {
                        Value ch = k.add(k0, kk);
                        Value okCh = lt(k, ch, nK);
                        Value e = k.exp(
                            k.fsub(cgAt(k, cg, t, ch), cgAt(k, cg, s, ch)));
                        p = k.select(okCh, k.fmul(p, e), k.f32(0.0));
                      }
                      return SmallVector<Value>{k.fadd(it[0], p)};
                    });
                Value prev =
                    k.select(first, k.f32(0.0), k.mload(gm, {at(k, t, Q, s)}));
                k.mstore(k.fadd(prev, dot[0]), gm, {at(k, t, Q, s)});
              });
            });
            blk.phase2(k.idx(Q), k.idx(Q), [&](Value t, Value s) {
              Value v = k.mload(gm, {at(k, t, Q, s)});
              if (KG == 1)
                v = k.fmul(v, k.exp(k.fsub(cgAt(k, cg, t, k.idx(0)),
                                           cgAt(k, cg, s, k.idx(0)))));
              k.mstore(k.select(k.cmp(CmpIPredicate::sle, s, t), v, k.f32(0.0)),
                       gm, {at(k, t, Q, s)});
            });
          }
          // acc[t][vv] = value columns v0.. of (q' o exp(cg)) S_in + G v.
          auto columns = [&](Value v0) {
            k.forEach(k.idx(0), nK, k.idx(KT), [&](Value k0) {
              blk.phase2(k.idx(Q), k.idx(KT), [&](Value t, Value kk) {
                Value ch = k.add(k0, kk);
                Value e = k.exp(cgAt(k, cg, t, ch));
                k.mstore(k.fmul(qPrime(k, q, cb, t, ch), e), qs,
                         {at(k, t, KT, kk)});
              });
              blk.phase2(k.idx(KT), k.idx(VT), [&](Value kk, Value vv) {
                Value ch = k.add(k0, kk), col = k.add(v0, vv);
                Value ok = k.andi(lt(k, ch, nK), lt(k, col, nVx));
                SmallVector<Value> idx =
                    causal ? SmallVector<Value>{cb.bi, cb.h, cb.c, ch, col}
                           : SmallVector<Value>{cb.bi, cb.h, ch, col};
                k.mstore(k.loadIf(ok, st, idx, k.f32(0.0)), ss,
                         {at(k, kk, VT, vv)});
              });
              Value first = k.cmp(CmpIPredicate::eq, k0, k.idx(0));
              blk.phase2(k.idx(Q), k.idx(VT), [&](Value t, Value vv) {
                auto dot = k.loop(
                    k.idx(KT), {k.f32(0.0)}, [&](Value kk, ValueRange it) {
                      return SmallVector<Value>{k.fadd(
                          it[0], k.fmul(k.mload(qs, {at(k, t, KT, kk)}),
                                        k.mload(ss, {at(k, kk, VT, vv)})))};
                    });
                Value prev = k.select(first, k.f32(0.0),
                                      k.mload(acc, {at(k, t, VT, vv)}));
                k.mstore(k.fadd(prev, dot[0]), acc, {at(k, t, VT, vv)});
              });
            });
            if (!causal)
              return;
            blk.phase2(k.idx(Q), k.idx(VT), [&](Value s, Value vv) {
              k.mstore(value(k, vm, cb, s, k.add(v0, vv)), vs,
                       {at(k, s, VT, vv)});
            });
            if (mma) {
              // G is zero above the diagonal.
              mmaSharedProduct(
                  blk, mmaType, Q, VT, Q,
                  [&](Value t, Value s) {
                    return k.mload(gm, {at(k, t, Q, s)});
                  },
                  [&](Value s, Value vv) {
                    return k.mload(vs, {at(k, s, VT, vv)});
                  },
                  [&](Value t, Value vv) {
                    return k.mload(acc, {at(k, t, VT, vv)});
                  },
                  [&](Value t, Value vv, Value v) {
                    k.mstore(v, acc, {at(k, t, VT, vv)});
                  },
                  /*causal=*/true);
              return;
            }
            blk.phase2(k.idx(Q), k.idx(VT), [&](Value t, Value vv) {
              auto sum =
                  k.loop(k.add(t, k.idx(1)), {k.f32(0.0)},
                         [&](Value s, ValueRange it) {
                           return SmallVector<Value>{k.fadd(
                               it[0], k.fmul(k.mload(gm, {at(k, t, Q, s)}),
                                             k.mload(vs, {at(k, s, VT, vv)})))};
                         });
              Value a = k.mload(acc, {at(k, t, VT, vv)});
              k.mstore(k.fadd(a, sum[0]), acc, {at(k, t, VT, vv)});
            });
          };
          if (normalize) {
            columns(nV);
            blk.phase(k.idx(Q), [&](Value t) {
              Value z = k.mload(acc, {at(k, t, VT, k.idx(0))});
              k.mstore(k.fadd(z, k.f32(eps)), den, {t});
            });
          }
          k.forEach(k.idx(0), nV, k.idx(VT), [&](Value v0) {
            columns(v0);
            blk.phase2(k.idx(Q), k.idx(VT), [&](Value t, Value vv) {
              Value row = k.add(cb.t0, t), col = k.add(v0, vv);
              k.ifThen(k.andi(lt(k, row, nT), lt(k, col, nV)), [&] {
                Value a = k.mload(acc, {at(k, t, VT, vv)});
                if (normalize)
                  a = k.fdiv(a, k.mload(den, {t}));
                k.mstore(a, o, {cb.bi, row, cb.h, col});
              });
            });
          });
        });
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
