//===- GpuChunked.cpp - the chunked form's phases on the GPU --------------===//
//
// The three kernels of GpuChunked.h, written once over a ChunkedForm: the
// family's operands are read through its roles (queryAt, keyAt, valueAt,
// stateAt) and maps, its decay and weights through step / keyLogDecay, its
// outputs through finish.
//
//===----------------------------------------------------------------------===//

#include "GPU/GpuChunked.h"
#include "GPU/GpuGemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace seqc;

namespace {

using arith::CmpIPredicate;

/// Key and value channels per staged tile.
constexpr int64_t KT = 32, VT = 32;

/// Block (bi, h, c) of a per-chunk kernel and the chunk's first step.
struct ChunkBlock {
  Value bi, h, c, t0;
};

/// What a chunk kernel's blocks see: the form's arguments by role and the
/// kernel's own buffers after them.
struct ChunkKernelArgs {
  ChunkedArgs form;
  ValueRange own;
};

class GpuChunkedLowering {
public:
  GpuChunkedLowering(const GpuTarget &target, const ChunkedForm &form,
                     Type mmaType, int64_t chunk)
      : target(target), form(form), mmaType(mmaType), Q(chunk),
        KG(form.decay == ChunkedForm::Decay::PerKey ? form.keyDim : 1) {}

  void emit(ImplicitLocOpBuilder &b, KernelBuilder &kb) const {
    Value q = form.buffers[0], v = form.buffers[2];
    Value Bsz = kb.mdim(v, 0), T = kb.mdim(v, 1), H = kb.mdim(v, 2);
    Value K = kb.mdim(q, 3), V = kb.mdim(v, 3);
    // Value columns carried: v, then the normalizer's ones.
    Value Vx = form.normalize ? kb.add(V, kb.idx(1)) : V;
    Value nChunks = kb.divs(kb.add(T, kb.idx(Q - 1)), kb.idx(Q));
    auto f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    // Chunk states (then incoming states) and chunk log decays, in f32.
    Value states =
        allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, dyn, dyn}, f32),
                    {Bsz, H, nChunks, K, Vx});
    Value decays =
        allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, dyn}, f32),
                    {Bsz, H, nChunks, kb.idx(KG)});
    // Non-causal: the total state, read by every output.
    Value totals =
        form.causal
            ? Value()
            : allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, dyn}, f32),
                          {Bsz, H, K, Vx});
    Value blocks = kb.mul(kb.mul(Bsz, H), nChunks);
    if (form.deltaTransition) {
      // The delta rule: W and U0 per chunk (in parallel), then the chunks
      // in order turn U0 into v* = U0 - W S_in and pass the state on, then
      // the outputs as for linear attention, from v*.
      Value weights =
          allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, Q, dyn}, f32),
                      {Bsz, H, nChunks, kb.idx(Q), K});
      Value newValues =
          allocBuffer(b, RankedTensorType::get({dyn, dyn, dyn, Q, dyn}, f32),
                      {Bsz, H, nChunks, kb.idx(Q), V});
      emitDeltaWeights(b, blocks, weights, newValues, decays);
      emitDeltaStatePassing(b, kb.mul(Bsz, H), weights, newValues, states,
                            decays);
      if (form.outputUsed)
        emitChunkOutputs(b, blocks, states, Vx, newValues);
      return;
    }
    emitChunkStates(b, blocks, states, decays, Vx);
    emitStatePassing(b, kb, kb.mul(kb.mul(kb.mul(Bsz, H), K), Vx), states,
                     decays, totals);
    // `last` is the state passing's: a run for its state alone
    // (ChunkedForm::outputUsed) has no output kernel.
    if (form.outputUsed)
      emitChunkOutputs(b, blocks, form.causal ? states : totals, Vx);
  }

private:
  std::string kernelName(StringRef phase) const {
    return form.name + "_" + phase.str() + (mmaType ? "_mma" : "");
  }

  /// Emits a per-chunk kernel: the form's buffers then `own`.
  void emitChunkKernel(
      ImplicitLocOpBuilder &b, StringRef name, Value blocks,
      ArrayRef<Value> own, ArrayRef<SmallVector<int64_t>> shared,
      const std::function<void(GpuBlock &, const ChunkKernelArgs &, ValueRange)>
          &body) const {
    SmallVector<Value> args(form.buffers);
    args.append(own.begin(), own.end());
    size_t fixed = form.buffers.size();
    emitGpuKernel(b, target, name, blocks, args, shared,
                  [&](GpuBlock &blk, ValueRange in, ValueRange sh) {
                    body(blk, {form.args(in), in.drop_front(fixed)}, sh);
                  });
  }

  ChunkBlock chunkBlock(KernelBuilder &k, Value id,
                        const ChunkedArgs &a) const {
    Value nT = k.mdim(a.value, 1), nH = k.mdim(a.value, 2);
    Value nC = k.divs(k.add(nT, k.idx(Q - 1)), k.idx(Q));
    Value c = k.rems(id, nC), rest = k.divs(id, nC);
    return ChunkBlock{k.divs(rest, nH), k.rems(rest, nH), c,
                      k.mul(c, k.idx(Q))};
  }

  static Value lt(KernelBuilder &k, Value a, Value c) {
    return k.cmp(CmpIPredicate::slt, a, c);
  }
  static Value at(KernelBuilder &k, Value row, int64_t ld, Value col) {
    return k.add(k.mul(row, k.idx(ld)), col);
  }

  /// q'[s, kk] of the chunk (0 past its end and past K); `rowNorms` [Q]
  /// the rows' factors when the form normalizes them (stageRowNorms).
  Value queryPrime(KernelBuilder &k, const ChunkedArgs &a, const ChunkBlock &cb,
                   Value s, Value kk, Value rowNorms = {}) const {
    Value t = k.add(cb.t0, s);
    Value ok =
        k.andi(lt(k, t, k.mdim(a.query, 1)), lt(k, kk, k.mdim(a.query, 3)));
    Value q = k.ifElse(
        ok, {k.f32Type()},
        [&]() -> SmallVector<Value> {
          return {form.mapQuery(
              k, k.mload(a.query, form.queryAt(k, a, cb.bi, t, cb.h, kk)))};
        },
        [&]() -> SmallVector<Value> { return {k.f32(0.0)}; })[0];
    return rowNorms ? k.fmul(q, k.mload(rowNorms, {s})) : q;
  }

  /// w[s] k'[s, kk] of the chunk (0 past its end and past K).
  Value keyPrime(KernelBuilder &k, const ChunkedArgs &a, const ChunkBlock &cb,
                 Value weights, Value s, Value kk, Value rowNorms = {}) const {
    Value t = k.add(cb.t0, s);
    Value ok = k.andi(lt(k, t, k.mdim(a.key, 1)), lt(k, kk, k.mdim(a.key, 3)));
    Value key = k.ifElse(
        ok, {k.f32Type()},
        [&]() -> SmallVector<Value> {
          return {form.mapKey(
              k, k.mload(a.key, form.keyAt(k, a, cb.bi, t, cb.h, kk)))};
        },
        [&]() -> SmallVector<Value> { return {k.f32(0.0)}; })[0];
    if (rowNorms)
      key = k.fmul(key, k.mload(rowNorms, {s}));
    return form.weighted ? k.fmul(key, k.mload(weights, {s})) : key;
  }

  /// The factors of the chunk's q and k rows when the form normalizes them
  /// (qk_l2norm): queryScale / |q'_s| into qn[s], 1 / |k'_s| into kn[s]
  /// (either may be null), a thread per step.
  void stageRowNorms(GpuBlock &blk, const ChunkedArgs &a, const ChunkBlock &cb,
                     Value qn, Value kn) const {
    KernelBuilder &k = blk.kb;
    Value nK = k.mdim(a.query, 3);
    auto factor = [&](bool isQuery, Value s) {
      Value sq = k.sumOver(nK, [&](Value kk) {
        Value x = isQuery ? queryPrime(k, a, cb, s, kk)
                          : keyPrime(k, a, cb, Value(), s, kk);
        return k.fmul(x, x);
      });
      Value scale = k.f32(isQuery ? form.queryScale : 1.0);
      return k.fdiv(scale, k.sqrt(k.fadd(sq, k.f32(form.rowEps))));
    };
    // Rows past the sequence's end are zeros: their factor is 0, not the
    // 1 / sqrt(eps) that would be inf (and 0 * inf NaN) with eps = 0.
    Value nT = k.mdim(a.query, 1);
    blk.phase(k.idx(Q), [&](Value s) {
      Value inside = lt(k, k.add(cb.t0, s), nT);
      if (qn)
        k.mstore(k.select(inside, factor(true, s), k.f32(0.0)), qn, {s});
      if (kn)
        k.mstore(k.select(inside, factor(false, s), k.f32(0.0)), kn, {s});
    });
  }

  /// Value column `col` of step t0 + s: v (or the delta rule's v* from
  /// `newValues` [B, H, chunks, Q, V]), then the normalizer's ones.
  Value value(KernelBuilder &k, const ChunkedArgs &a, const ChunkBlock &cb,
              Value s, Value col, Value newValues = {}) const {
    Value t = k.add(cb.t0, s), nV = k.mdim(a.value, 3);
    Value valid = lt(k, t, k.mdim(a.value, 1));
    Value isV = k.andi(valid, lt(k, col, nV));
    if (newValues)
      return k.loadIf(isV, newValues, {cb.bi, cb.h, cb.c, s, col}, k.f32(0.0));
    Value ones = k.f32(form.normalize ? 1.0 : 0.0);
    Value isOne = k.andi(valid, k.cmp(CmpIPredicate::eq, col, nV));
    return k.select(
        isOne, ones,
        k.loadIf(isV, a.value, form.valueAt(cb.bi, t, cb.h, col), k.f32(0.0)));
  }

  /// cs[s * KG + j], the chunk's cumulative log decay up to step s (per
  /// key channel j with a per-key decay), and the weights w[s]; both 0 past
  /// the chunk's end. The steps' coefficients load in parallel, then a
  /// thread per decay column sums them.
  void stageDecay(GpuBlock &blk, const ChunkedArgs &a, const ChunkBlock &cb,
                  Value cs, Value weights) const {
    KernelBuilder &k = blk.kb;
    Value nT = k.mdim(a.value, 1);
    blk.phase2(k.idx(Q), k.idx(KG), [&](Value s, Value j) {
      Value t = k.add(cb.t0, s);
      SmallVector<Value> gw = k.ifElse(
          lt(k, t, nT), {k.f32Type(), k.f32Type()},
          [&]() -> SmallVector<Value> {
            StepCoefficients step = form.step(k, a, cb.bi, t, cb.h);
            Value g = form.decay == ChunkedForm::Decay::PerKey
                          ? form.keyLogDecay(k, a, cb.bi, t, cb.h, j)
                          : step.logDecay;
            return {g ? g : k.f32(0.0), step.weight ? step.weight : k.f32(1.0)};
          },
          [&]() -> SmallVector<Value> {
            return {k.f32(0.0), k.f32(0.0)};
          });
      k.mstore(gw[0], cs, {at(k, s, KG, j)});
      k.ifThen(k.cmp(CmpIPredicate::eq, j, k.idx(0)),
               [&] { k.mstore(gw[1], weights, {s}); });
    });
    blk.phase(k.idx(KG), [&](Value j) {
      k.loop(k.idx(Q), {k.f32(0.0)}, [&](Value s, ValueRange it) {
        Value sum = k.fadd(it[0], k.mload(cs, {at(k, s, KG, j)}));
        k.mstore(sum, cs, {at(k, s, KG, j)});
        return SmallVector<Value>{sum};
      });
    });
  }

  /// cs of step s for key channel kk (0 for channels past K, which only
  /// partial tiles ask for).
  Value csAt(KernelBuilder &k, Value cs, Value s, Value kk) const {
    if (KG == 1)
      return k.mload(cs, {at(k, s, KG, k.idx(0))});
    Value inside = lt(k, kk, k.idx(KG));
    Value v = k.mload(cs, {at(k, s, KG, k.mins(kk, k.idx(KG - 1)))});
    return k.select(inside, v, k.f32(0.0));
  }

  /// 1. S_c = (exp(cs_Q - cs) o w o k')^T v per chunk.
  void emitChunkStates(ImplicitLocOpBuilder &b, Value blocks, Value states,
                       Value decays, Value Vx) const {
    emitChunkKernel(
        b, kernelName("chunk_states"), blocks, {states, decays, Vx},
        {{Q * KG}, {Q}, {Q * KT}, {Q * VT}},
        [&](GpuBlock &blk, const ChunkKernelArgs &in, ValueRange sh) {
          KernelBuilder &k = blk.kb;
          const ChunkedArgs &a = in.form;
          Value st = in.own[0], chunkDecays = in.own[1], nVx = in.own[2];
          Value cs = sh[0], ws = sh[1], kw = sh[2], vs = sh[3];
          ChunkBlock cb = chunkBlock(k, blk.blockId, a);
          stageDecay(blk, a, cb, cs, ws);
          blk.phase(k.idx(KG), [&](Value j) {
            k.mstore(k.mload(cs, {at(k, k.idx(Q - 1), KG, j)}), chunkDecays,
                     {cb.bi, cb.h, cb.c, j});
          });
          Value nK = k.mdim(a.query, 3);
          k.forEach(k.idx(0), nK, k.idx(KT), [&](Value k0) {
            blk.phase2(k.idx(Q), k.idx(KT), [&](Value s, Value kk) {
              Value ch = k.add(k0, kk);
              Value w = k.exp(
                  k.fsub(csAt(k, cs, k.idx(Q - 1), ch), csAt(k, cs, s, ch)));
              k.mstore(k.fmul(keyPrime(k, a, cb, ws, s, ch), w), kw,
                       {at(k, s, KT, kk)});
            });
            k.forEach(k.idx(0), nVx, k.idx(VT), [&](Value v0) {
              blk.phase2(k.idx(Q), k.idx(VT), [&](Value s, Value vv) {
                k.mstore(value(k, a, cb, s, k.add(v0, vv)), vs,
                         {at(k, s, VT, vv)});
              });
              auto store = [&](Value kk, Value vv, Value v) {
                Value ch = k.add(k0, kk), col = k.add(v0, vv);
                k.ifThen(k.andi(lt(k, ch, nK), lt(k, col, nVx)), [&] {
                  k.mstore(v, st, {cb.bi, cb.h, cb.c, ch, col});
                });
              };
              if (mmaType) {
                mmaSharedProduct(
                    blk, mmaType, KT, VT, Q,
                    [&](Value kk, Value s) {
                      return k.mload(kw, {at(k, s, KT, kk)});
                    },
                    [&](Value s, Value vv) {
                      return k.mload(vs, {at(k, s, VT, vv)});
                    },
                    [&](Value, Value) { return k.f32(0.0); }, store);
                return;
              }
              blk.phase2(k.idx(KT), k.idx(VT), [&](Value kk, Value vv) {
                auto sum =
                    k.loop(k.idx(Q), {k.f32(0.0)}, [&](Value s, ValueRange it) {
                      return SmallVector<Value>{k.fadd(
                          it[0], k.fmul(k.mload(kw, {at(k, s, KT, kk)}),
                                        k.mload(vs, {at(k, s, VT, vv)})))};
                    });
                store(kk, vv, sum[0]);
              });
            });
          });
        });
  }

  /// 2. State passing: S_c becomes the state entering chunk c (the
  /// normalizer column starts at 0); `last` (and the non-causal total) is
  /// the state after the last chunk.
  void emitStatePassing(ImplicitLocOpBuilder &b, KernelBuilder &kb, Value items,
                        Value states, Value decays, Value totals) const {
    SmallVector<Value> args(form.buffers);
    size_t fixed = args.size();
    args.append({states, decays});
    if (totals)
      args.push_back(totals);
    emitItemKernel(
        b, target, form.name + "_state_passing", kb, items, args,
        [&](KernelBuilder &k, Value item, ValueRange in) {
          ChunkedArgs a = form.args(in);
          Value st = in[fixed], chunkDecays = in[fixed + 1];
          Value nH = k.mdim(st, 1), nC = k.mdim(st, 2), nK = k.mdim(st, 3),
                nVx = k.mdim(st, 4), nV = k.mdim(a.value, 3);
          Value col = k.rems(item, nVx), rest = k.divs(item, nVx);
          Value ch = k.rems(rest, nK);
          rest = k.divs(rest, nK);
          Value h = k.rems(rest, nH), bi = k.divs(rest, nH);
          Value isV = lt(k, col, nV);
          Value h0 = a.init ? k.loadIf(isV, a.init,
                                       form.stateAt(bi, h, ch, col), k.f32(0.0))
                            : k.f32(0.0);
          Value j = KG == 1 ? k.idx(0) : ch;
          auto r = k.loop(nC, {h0}, [&](Value c, ValueRange it) {
            Value local = k.mload(st, {bi, h, c, ch, col});
            k.mstore(it[0], st, {bi, h, c, ch, col});
            Value f = k.exp(k.mload(chunkDecays, {bi, h, c, j}));
            return SmallVector<Value>{k.fadd(k.fmul(f, it[0]), local)};
          });
          k.ifThen(isV, [&] {
            k.mstore(r[0], a.last, form.stateAt(bi, h, ch, col));
          });
          if (totals)
            k.mstore(r[0], in[fixed + 2], {bi, h, ch, col});
        });
  }

  /// X <- (I - N)^-1 X for the strictly lower N [Q x Q] in `negLower` and
  /// the tile X [Q x cols] in `x`: a thread per column substitutes its
  /// column forward, so the solve needs no barrier between rows.
  void forwardSubstitute(GpuBlock &blk, Value negLower, Value x,
                         int64_t cols) const {
    KernelBuilder &k = blk.kb;
    blk.phase(k.idx(cols), [&](Value col) {
      k.forEach(k.idx(1), k.idx(Q), k.idx(1), [&](Value i) {
        Value sum =
            k.loop(k.idx(0), i, {k.mload(x, {at(k, i, cols, col)})},
                   [&](Value j, ValueRange it) {
                     Value n = k.mload(negLower, {at(k, i, Q, j)});
                     Value xj = k.mload(x, {at(k, j, cols, col)});
                     return SmallVector<Value>{k.fadd(it[0], k.fmul(n, xj))};
                   })[0];
        k.mstore(sum, x, {at(k, i, cols, col)});
      });
    });
  }

  /// One block of the delta rule's WY solve: its chunk, its shared buffers
  /// by name, and the rows' norms where the form normalizes them.
  struct WySolveBlock {
    GpuBlock &blk;
    const ChunkedArgs &a;
    ChunkBlock cb;
    /// [Q] cumulative log decays, weights, key norms and write strengths.
    Value cs, ws, kn, beta;
    /// [Q x KT] a tile of k'; [Q x Q] the Gram matrix, then -A; [Q x XT]
    /// the tile being solved.
    Value keys, gram, tile;
    /// kn where the form normalizes rows, else null (keyPrime's argument).
    Value norms;
  };

  /// The delta rule, 1: per chunk, -A = strictly lower -beta_i exp(cs_i -
  /// cs_j) k'_i . k'_j (k'k'^T on tensor cores for bf16), then (I + A) [W | U0]
  /// = diag(beta) [exp(cs) o k' | v] solved in shared memory, a key or value
  /// tile at a time, into `weights` [B, H, chunks, Q, K] and `newValues` [..,
  /// Q, V].
  void emitDeltaWeights(ImplicitLocOpBuilder &b, Value blocks, Value weights,
                        Value newValues, Value decays) const {
    constexpr int64_t XT = std::max(KT, VT);
    emitChunkKernel(
        b, kernelName("wy_solve"), blocks, {weights, newValues, decays},
        {{Q}, {Q}, {Q}, {Q}, {Q * KT}, {Q * Q}, {Q * XT}},
        [&](GpuBlock &blk, const ChunkKernelArgs &in, ValueRange sh) {
          Value weightsOut = in.own[0], newValuesOut = in.own[1],
                chunkDecays = in.own[2];
          WySolveBlock wy{blk, in.form,
                          chunkBlock(blk.kb, blk.blockId, in.form)};
          wy.cs = sh[0];
          wy.ws = sh[1];
          wy.kn = sh[2];
          wy.beta = sh[3];
          wy.keys = sh[4];
          wy.gram = sh[5];
          wy.tile = sh[6];
          wy.norms = form.normalizeRows ? wy.kn : Value();
          KernelBuilder &k = blk.kb;
          blk.phase(
              k.idx(Q * Q),
              [&](Value i) { k.mstore(k.f32(0.0), wy.gram, {i}); },
              /*barrier=*/false); // stageDecay ends with one
          stageDecay(blk, wy.a, wy.cb, wy.cs, wy.ws);
          stageWriteStrengths(wy, chunkDecays);
          if (form.normalizeRows)
            stageRowNorms(blk, wy.a, wy.cb, Value(), wy.kn);
          accumulateKeyGram(wy);
          maskKeyGram(wy);
          solveKeyTiles(wy, weightsOut);
          solveValueTiles(wy, newValuesOut);
        });
  }

  /// beta[s], each step's write strength (0 past the chunk's end); the
  /// chunk's total log decay into `chunkDecays`.
  void stageWriteStrengths(WySolveBlock &wy, Value chunkDecays) const {
    KernelBuilder &k = wy.blk.kb;
    Value nT = k.mdim(wy.a.value, 1);
    wy.blk.phase(k.idx(Q), [&](Value s) {
      Value t = k.add(wy.cb.t0, s);
      Value strength = k.ifElse(
          lt(k, t, nT), {k.f32Type()},
          [&]() -> SmallVector<Value> {
            return {form.step(k, wy.a, wy.cb.bi, t, wy.cb.h).writeStrength};
          },
          [&]() -> SmallVector<Value> { return {k.f32(0.0)}; })[0];
      k.mstore(strength, wy.beta, {s});
      k.ifThen(k.cmp(CmpIPredicate::eq, s, k.idx(0)), [&] {
        k.mstore(k.mload(wy.cs, {k.idx(Q - 1)}), chunkDecays,
                 {wy.cb.bi, wy.cb.h, wy.cb.c, k.idx(0)});
      });
    });
  }

  /// gram += k' k'^T, a key tile at a time (on tensor cores for bf16).
  void accumulateKeyGram(WySolveBlock &wy) const {
    KernelBuilder &k = wy.blk.kb;
    Value nK = k.mdim(wy.a.query, 3);
    k.forEach(k.idx(0), nK, k.idx(KT), [&](Value k0) {
      wy.blk.phase2(k.idx(Q), k.idx(KT), [&](Value s, Value kk) {
        k.mstore(keyPrime(k, wy.a, wy.cb, wy.ws, s, k.add(k0, kk), wy.norms),
                 wy.keys, {at(k, s, KT, kk)});
      });
      auto keyAt = [&](Value s, Value kk) {
        return k.mload(wy.keys, {at(k, s, KT, kk)});
      };
      if (mmaType) {
        mmaSharedProduct(
            wy.blk, mmaType, Q, Q, KT, keyAt,
            [&](Value kk, Value s) { return keyAt(s, kk); },
            [&](Value t, Value s) {
              return k.mload(wy.gram, {at(k, t, Q, s)});
            },
            [&](Value t, Value s, Value v) {
              k.mstore(v, wy.gram, {at(k, t, Q, s)});
            });
        return;
      }
      wy.blk.phase2(k.idx(Q), k.idx(Q), [&](Value t, Value s) {
        Value dot = k.sumOver(k.idx(KT), [&](Value kk) {
          return k.fmul(keyAt(t, kk), keyAt(s, kk));
        });
        Value prev = k.mload(wy.gram, {at(k, t, Q, s)});
        k.mstore(k.fadd(prev, dot), wy.gram, {at(k, t, Q, s)});
      });
    });
  }

  /// gram <- -A: -beta_t exp(cs_t - cs_s) gram[t, s] below the diagonal,
  /// 0 on and above it.
  void maskKeyGram(WySolveBlock &wy) const {
    KernelBuilder &k = wy.blk.kb;
    wy.blk.phase2(k.idx(Q), k.idx(Q), [&](Value t, Value s) {
      Value l = k.exp(k.fsub(k.mload(wy.cs, {t}), k.mload(wy.cs, {s})));
      Value n = k.fmul(k.fneg(k.mload(wy.beta, {t})),
                       k.fmul(l, k.mload(wy.gram, {at(k, t, Q, s)})));
      k.mstore(k.select(k.cmp(CmpIPredicate::slt, s, t), n, k.f32(0.0)),
               wy.gram, {at(k, t, Q, s)});
    });
  }

  /// W = (I + A)^-1 diag(beta) (exp(cs) o k'), a key tile at a time, into
  /// `weightsOut` [B, H, chunks, Q, K].
  void solveKeyTiles(WySolveBlock &wy, Value weightsOut) const {
    KernelBuilder &k = wy.blk.kb;
    Value nK = k.mdim(wy.a.query, 3);
    k.forEach(k.idx(0), nK, k.idx(KT), [&](Value k0) {
      wy.blk.phase2(k.idx(Q), k.idx(KT), [&](Value s, Value kk) {
        Value f = k.fmul(k.mload(wy.beta, {s}), k.exp(k.mload(wy.cs, {s})));
        Value key = keyPrime(k, wy.a, wy.cb, wy.ws, s, k.add(k0, kk), wy.norms);
        k.mstore(k.fmul(f, key), wy.tile, {at(k, s, KT, kk)});
      });
      forwardSubstitute(wy.blk, wy.gram, wy.tile, KT);
      storeSolvedTile(wy, weightsOut, k0, KT, nK);
    });
  }

  /// U0 = (I + A)^-1 diag(beta) v, a value tile at a time, into
  /// `newValuesOut` [B, H, chunks, Q, V].
  void solveValueTiles(WySolveBlock &wy, Value newValuesOut) const {
    KernelBuilder &k = wy.blk.kb;
    Value nV = k.mdim(wy.a.value, 3);
    k.forEach(k.idx(0), nV, k.idx(VT), [&](Value v0) {
      wy.blk.phase2(k.idx(Q), k.idx(VT), [&](Value s, Value vv) {
        Value v = value(k, wy.a, wy.cb, s, k.add(v0, vv));
        k.mstore(k.fmul(k.mload(wy.beta, {s}), v), wy.tile, {at(k, s, VT, vv)});
      });
      forwardSubstitute(wy.blk, wy.gram, wy.tile, VT);
      storeSolvedTile(wy, newValuesOut, v0, VT, nV);
    });
  }

  /// Columns [col0, col0 + width) of the solved tile into `out` [B, H,
  /// chunks, Q, cols] (those below `cols`).
  void storeSolvedTile(WySolveBlock &wy, Value out, Value col0, int64_t width,
                       Value cols) const {
    KernelBuilder &k = wy.blk.kb;
    wy.blk.phase2(k.idx(Q), k.idx(width), [&](Value s, Value j) {
      Value col = k.add(col0, j);
      k.ifThen(lt(k, col, cols), [&] {
        k.mstore(k.mload(wy.tile, {at(k, s, width, j)}), out,
                 {wy.cb.bi, wy.cb.h, wy.cb.c, s, col});
      });
    });
  }

  /// The delta rule, 2: a block per (batch, head) walks its chunks in
  /// order: v* = U0 - W S_in (in place in `newValues`), then S_out =
  /// exp(cs_Q) S_in + (exp(cs_Q - cs) o k')^T v*. `states` [B, H, chunks,
  /// K, V] receives each chunk's incoming state, `last` the final one.
  void emitDeltaStatePassing(ImplicitLocOpBuilder &b, Value blocks,
                             Value weights, Value newValues, Value states,
                             Value decays) const {
    SmallVector<Value> args(form.buffers);
    size_t fixed = args.size();
    args.append({weights, newValues, states, decays});
    emitGpuKernel(
        b, target, form.name + "_state_passing", blocks, args,
        {{Q * KG}, {Q}, {Q}}, [&](GpuBlock &blk, ValueRange in, ValueRange sh) {
          KernelBuilder &k = blk.kb;
          ChunkedArgs a = form.args(in);
          // in[fixed + 3] (the chunks' decays) is passed but not read here.
          Value w = in[fixed], u = in[fixed + 1], st = in[fixed + 2];
          Value cs = sh[0], ws = sh[1], kn = sh[2];
          Value nH = k.mdim(a.value, 2), nT = k.mdim(a.value, 1);
          Value nK = k.mdim(a.query, 3), nV = k.mdim(a.value, 3);
          Value nC = k.divs(k.add(nT, k.idx(Q - 1)), k.idx(Q));
          Value h = k.rems(blk.blockId, nH), bi = k.divs(blk.blockId, nH);
          Value norms = form.normalizeRows ? kn : Value();
          // The incoming state of chunk 0 (and `last` without chunks).
          blk.phase2(nK, nV, [&](Value kk, Value col) {
            Value s0 = a.init ? k.mload(a.init, form.stateAt(bi, h, kk, col))
                              : k.f32(0.0);
            k.mstore(s0, a.last, form.stateAt(bi, h, kk, col));
            k.ifThen(lt(k, k.idx(0), nC), [&] {
              k.mstore(s0, st, {bi, h, k.idx(0), kk, col});
            });
          });
          k.forEach(k.idx(0), nC, k.idx(1), [&](Value c) {
            ChunkBlock cb{bi, h, c, k.mul(c, k.idx(Q))};
            stageDecay(blk, a, cb, cs, ws);
            if (form.normalizeRows)
              stageRowNorms(blk, a, cb, Value(), kn);
            blk.phase2(k.idx(Q), nV, [&](Value s, Value col) {
              Value ws0 = k.sumOver(nK, [&](Value kk) {
                return k.fmul(k.mload(w, {bi, h, c, s, kk}),
                              k.mload(st, {bi, h, c, kk, col}));
              });
              SmallVector<Value> at{bi, h, c, s, col};
              k.mstore(k.fsub(k.mload(u, at), ws0), u, at);
            });
            Value csLast = k.mload(cs, {k.idx(Q - 1)});
            blk.phase2(nK, nV, [&](Value kk, Value col) {
              Value carried =
                  k.fmul(k.exp(csLast), k.mload(st, {bi, h, c, kk, col}));
              Value next =
                  k.loop(k.idx(Q), {carried}, [&](Value s, ValueRange it) {
                    Value e = k.exp(k.fsub(csLast, k.mload(cs, {s})));
                    Value key = keyPrime(k, a, cb, ws, s, kk, norms);
                    Value vs = k.mload(u, {bi, h, c, s, col});
                    return SmallVector<Value>{
                        k.fadd(it[0], k.fmul(k.fmul(e, key), vs))};
                  })[0];
              Value following = k.add(c, k.idx(1));
              Value inside = lt(k, following, nC);
              k.ifThen(inside, [&] {
                k.mstore(next, st, {bi, h, following, kk, col});
              });
              k.ifThen(k.noti(inside), [&] {
                k.mstore(next, a.last, form.stateAt(bi, h, kk, col));
              });
            });
          });
        });
  }

  /// M = L o q' (w o k')^T over key tiles into `gm` [Q x Q] (causal).
  void intraChunkScores(GpuBlock &blk, const ChunkedArgs &a,
                        const ChunkBlock &cb, Value cs, Value ws, Value qs,
                        Value ks, Value gm, Value qn = {},
                        Value kn = {}) const {
    KernelBuilder &k = blk.kb;
    Value nK = k.mdim(a.query, 3);
    k.forEach(k.idx(0), nK, k.idx(KT), [&](Value k0) {
      blk.phase2(k.idx(Q), k.idx(KT), [&](Value s, Value kk) {
        Value ch = k.add(k0, kk);
        k.mstore(queryPrime(k, a, cb, s, ch, qn), qs, {at(k, s, KT, kk)});
        k.mstore(keyPrime(k, a, cb, ws, s, ch, kn), ks, {at(k, s, KT, kk)});
      });
      Value first = k.cmp(CmpIPredicate::eq, k0, k.idx(0));
      if (mmaType && KG == 1) {
        mmaSharedProduct(
            blk, mmaType, Q, Q, KT,
            [&](Value t, Value kk) { return k.mload(qs, {at(k, t, KT, kk)}); },
            [&](Value kk, Value s) { return k.mload(ks, {at(k, s, KT, kk)}); },
            [&](Value t, Value s) {
              return k.select(first, k.f32(0.0), k.mload(gm, {at(k, t, Q, s)}));
            },
            [&](Value t, Value s, Value v) {
              k.mstore(v, gm, {at(k, t, Q, s)});
            });
        return;
      }
      blk.phase2(k.idx(Q), k.idx(Q), [&](Value t, Value s) {
        auto dot =
            k.loop(k.idx(KT), {k.f32(0.0)}, [&](Value kk, ValueRange it) {
              Value p = k.fmul(k.mload(qs, {at(k, t, KT, kk)}),
                               k.mload(ks, {at(k, s, KT, kk)}));
              if (KG > 1) {
                Value ch = k.add(k0, kk);
                Value e = k.exp(k.fsub(csAt(k, cs, t, ch), csAt(k, cs, s, ch)));
                p = k.select(lt(k, ch, nK), k.fmul(p, e), k.f32(0.0));
              }
              return SmallVector<Value>{k.fadd(it[0], p)};
            });
        Value prev = k.select(first, k.f32(0.0), k.mload(gm, {at(k, t, Q, s)}));
        k.mstore(k.fadd(prev, dot[0]), gm, {at(k, t, Q, s)});
      });
    });
    blk.phase2(k.idx(Q), k.idx(Q), [&](Value t, Value s) {
      Value v = k.mload(gm, {at(k, t, Q, s)});
      if (KG == 1)
        v = k.fmul(v, k.exp(k.fsub(csAt(k, cs, t, k.idx(0)),
                                   csAt(k, cs, s, k.idx(0)))));
      k.mstore(k.select(k.cmp(CmpIPredicate::sle, s, t), v, k.f32(0.0)), gm,
               {at(k, t, Q, s)});
    });
  }

  /// acc[t, vv] = value columns v0.. of (q' o exp(cs)) S_in + M v.
  void outputColumns(GpuBlock &blk, const ChunkedArgs &a, const ChunkBlock &cb,
                     Value stateIn, Value nVx, Value v0, Value cs, Value qs,
                     Value ss, Value gm, Value vs, Value acc, Value qn = {},
                     Value newValues = {}) const {
    KernelBuilder &k = blk.kb;
    Value nK = k.mdim(a.query, 3);
    k.forEach(k.idx(0), nK, k.idx(KT), [&](Value k0) {
      blk.phase2(k.idx(Q), k.idx(KT), [&](Value t, Value kk) {
        Value ch = k.add(k0, kk);
        Value e = k.exp(csAt(k, cs, t, ch));
        k.mstore(k.fmul(queryPrime(k, a, cb, t, ch, qn), e), qs,
                 {at(k, t, KT, kk)});
      });
      blk.phase2(k.idx(KT), k.idx(VT), [&](Value kk, Value vv) {
        Value ch = k.add(k0, kk), col = k.add(v0, vv);
        Value ok = k.andi(lt(k, ch, nK), lt(k, col, nVx));
        SmallVector<Value> idx =
            form.causal ? SmallVector<Value>{cb.bi, cb.h, cb.c, ch, col}
                        : SmallVector<Value>{cb.bi, cb.h, ch, col};
        k.mstore(k.loadIf(ok, stateIn, idx, k.f32(0.0)), ss,
                 {at(k, kk, VT, vv)});
      });
      Value first = k.cmp(CmpIPredicate::eq, k0, k.idx(0));
      blk.phase2(k.idx(Q), k.idx(VT), [&](Value t, Value vv) {
        auto dot =
            k.loop(k.idx(KT), {k.f32(0.0)}, [&](Value kk, ValueRange it) {
              return SmallVector<Value>{
                  k.fadd(it[0], k.fmul(k.mload(qs, {at(k, t, KT, kk)}),
                                       k.mload(ss, {at(k, kk, VT, vv)})))};
            });
        Value prev =
            k.select(first, k.f32(0.0), k.mload(acc, {at(k, t, VT, vv)}));
        k.mstore(k.fadd(prev, dot[0]), acc, {at(k, t, VT, vv)});
      });
    });
    if (!form.causal)
      return;
    blk.phase2(k.idx(Q), k.idx(VT), [&](Value s, Value vv) {
      k.mstore(value(k, a, cb, s, k.add(v0, vv), newValues), vs,
               {at(k, s, VT, vv)});
    });
    if (mmaType) {
      // M is zero above the diagonal.
      mmaSharedProduct(
          blk, mmaType, Q, VT, Q,
          [&](Value t, Value s) { return k.mload(gm, {at(k, t, Q, s)}); },
          [&](Value s, Value vv) { return k.mload(vs, {at(k, s, VT, vv)}); },
          [&](Value t, Value vv) { return k.mload(acc, {at(k, t, VT, vv)}); },
          [&](Value t, Value vv, Value v) {
            k.mstore(v, acc, {at(k, t, VT, vv)});
          },
          /*causal=*/true);
      return;
    }
    blk.phase2(k.idx(Q), k.idx(VT), [&](Value t, Value vv) {
      auto sum =
          k.loop(k.add(t, k.idx(1)), {k.f32(0.0)}, [&](Value s, ValueRange it) {
            return SmallVector<Value>{
                k.fadd(it[0], k.fmul(k.mload(gm, {at(k, t, Q, s)}),
                                     k.mload(vs, {at(k, s, VT, vv)})))};
          });
      Value prev = k.mload(acc, {at(k, t, VT, vv)});
      k.mstore(k.fadd(prev, sum[0]), acc, {at(k, t, VT, vv)});
    });
  }

  /// out[t, v0 + vv] = finish(acc[t, vv]) (divided by the normalizer).
  void storeOutputs(GpuBlock &blk, const ChunkedArgs &a, const ChunkBlock &cb,
                    Value v0, Value acc, Value den) const {
    KernelBuilder &k = blk.kb;
    Value nT = k.mdim(a.value, 1), nV = k.mdim(a.value, 3);
    ChannelRun scalar{[&](Value m, ArrayRef<Value> idx) {
                        return k.mload(m, ValueRange(idx));
                      },
                      [](Value s) { return s; }};
    blk.phase2(k.idx(Q), k.idx(VT), [&](Value t, Value vv) {
      Value row = k.add(cb.t0, t), col = k.add(v0, vv);
      k.ifThen(k.andi(lt(k, row, nT), lt(k, col, nV)), [&] {
        Value y = k.mload(acc, {at(k, t, VT, vv)});
        if (form.normalize)
          y = k.fdiv(y, k.mload(den, {t}));
        if (form.hasFinish()) {
          Value v = k.mload(a.value, form.valueAt(cb.bi, row, cb.h, col));
          y = form.finish(k, scalar, a, cb.bi, row, cb.h, col, y, v);
        }
        k.mstore(y, a.out, form.valueAt(cb.bi, row, cb.h, col));
      });
    });
  }

  /// 3. The chunks' outputs. The staged v tile shares ks's buffer: ks is
  /// dead once M is formed, and the two make the difference between 64-step
  /// chunks fitting in 48 KiB of shared memory or not.
  /// `newValues`: the delta rule's v* (emitDeltaStatePassing), read in place
  /// of v.
  void emitChunkOutputs(ImplicitLocOpBuilder &b, Value blocks, Value stateIn,
                        Value Vx, Value newValues = {}) const {
    SmallVector<SmallVector<int64_t>> shared{
        {Q * KG}, {Q},       {Q * KT}, {Q * std::max(KT, VT)},
        {Q * Q},  {KT * VT}, {Q * VT}, {Q}};
    if (form.normalizeRows)
      shared.append({{Q}, {Q}}); // the rows' factors of q and k
    SmallVector<Value> own{stateIn, Vx};
    if (newValues)
      own.push_back(newValues);
    emitChunkKernel(
        b, kernelName("chunk_outputs"), blocks, own, shared,
        [&](GpuBlock &blk, const ChunkKernelArgs &in, ValueRange sh) {
          KernelBuilder &k = blk.kb;
          const ChunkedArgs &a = in.form;
          Value st = in.own[0], nVx = in.own[1];
          Value vNew = newValues ? in.own[2] : Value();
          Value cs = sh[0], ws = sh[1], qs = sh[2], ks = sh[3], gm = sh[4],
                ss = sh[5], acc = sh[6], den = sh[7];
          Value qn = form.normalizeRows ? sh[8] : Value();
          Value kn = form.normalizeRows ? sh[9] : Value();
          Value vs = ks;
          ChunkBlock cb = chunkBlock(k, blk.blockId, a);
          Value nV = k.mdim(a.value, 3);
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
          stageDecay(blk, a, cb, cs, ws);
          if (form.normalizeRows)
            stageRowNorms(blk, a, cb, qn, kn);
          if (form.causal)
            intraChunkScores(blk, a, cb, cs, ws, qs, ks, gm, qn, kn);
          if (form.normalize) {
            outputColumns(blk, a, cb, st, nVx, nV, cs, qs, ss, gm, vs, acc);
            blk.phase(k.idx(Q), [&](Value t) {
              Value z = k.mload(acc, {at(k, t, VT, k.idx(0))});
              k.mstore(k.fadd(z, k.f32(form.eps)), den, {t});
            });
          }
          k.forEach(k.idx(0), nV, k.idx(VT), [&](Value v0) {
            outputColumns(blk, a, cb, st, nVx, v0, cs, qs, ss, gm, vs, acc, qn,
                          vNew);
            storeOutputs(blk, a, cb, v0, acc, den);
          });
        });
  }

  const GpuTarget &target;
  const ChunkedForm &form;
  Type mmaType;
  const int64_t Q, KG;
};

} // namespace

void seqc::emitGpuChunked(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                          const GpuTarget &target, const ChunkedForm &form,
                          Type mmaType, int64_t chunk) {
  GpuChunkedLowering(target, form, mmaType, chunk).emit(b, kb);
}
