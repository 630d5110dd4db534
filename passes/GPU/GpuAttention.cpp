//===- GpuAttention.cpp - exact attention as a tiled GPU kernel -----------===//
//
// Flash-attention's schedule with one thread block per (batch, head, tile of
// 32 queries): key tiles stream through shared memory; for each, the block
// computes the 32 x 32 scores from (query, key) tiles of 32 head channels,
// one thread per query row folds them into its running max and normalizer
// (online softmax) and leaves the probabilities in shared memory, and the
// block updates the tile's output accumulator (rescaled by the row's
// correction) from V tiles. Scores are never materialized beyond one tile;
// key tiles wholly masked by causality or the window are skipped.
// With bf16 (or f16) queries, keys and values on sm_80+, the two products
// (Q K^T and P V) are warp-level mma.sync tiles over the same shared tiles,
// P rounded to the operands' type as flash attention does.
//
//===----------------------------------------------------------------------===//

#include "Common/Kernels.h"
#include "GPU/GpuGemm.h"
#include "GPU/GpuPatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;
using namespace seqc;

namespace {

using arith::CmpFPredicate;
using arith::CmpIPredicate;

/// Queries, keys and head channels per tile; V tile; the most V channels
/// the accumulator holds.
constexpr int64_t QT = 32, KT = 32, DT = 32, VT = 64, VMax = 128;

/// What the attention kernel's body does, stage by stage, for its block's
/// (batch, head, tile of QT queries): its arguments and shared tiles by
/// name, and the tile's place in the sequence.
class AttentionTile {
public:
  /// What the op fixes at compile time.
  struct Config {
    Type mmaType; // null: f32 products on the CUDA cores
    bool causal;
    int64_t window, vDim;
  };

  AttentionTile(GpuBlock &blk, ValueRange in, ValueRange sh,
                const Config &config)
      : blk(blk), k(blk.kb), config(config), q(in[0]), key(in[1]), v(in[2]),
        o(in[3]), scale(in[4]), qTile(sh[0]), kTile(sh[1]), scores(sh[2]),
        vTile(sh[3]), acc(sh[4]), rowMax(sh[5]), rowSum(sh[6]),
        rowCorrection(sh[7]) {
    nT = k.mdim(q, 1);
    Value nH = k.mdim(q, 2);
    nK = k.mdim(q, 3);
    nS = k.mdim(key, 1);
    Value nHkv = k.mdim(key, 2);
    nV = k.idx(config.vDim);
    Value nQT = k.divs(k.add(nT, k.idx(QT - 1)), k.idx(QT));
    Value qt = k.rems(blk.blockId, nQT), rest = k.divs(blk.blockId, nQT);
    h = k.rems(rest, nH);
    bi = k.divs(rest, nH);
    hk = k.divs(h, k.divs(nH, nHkv));
    i0 = k.mul(qt, k.idx(QT));
    offset = k.sub(nS, nT); // query i sits at key i + S - T
    negInf = k.f32(-std::numeric_limits<float>::infinity());
  }

  /// The whole body: every key tile any query of the tile may see, then o.
  void emit() {
    initialize();
    auto [jBegin, jEnd] = visibleKeys();
    k.forEach(jBegin, jEnd, k.idx(KT), [&](Value j0) {
      scoreTile(j0);
      onlineSoftmax(j0);
      k.forEach(k.idx(0), nV, k.idx(VT),
                [&](Value v0) { accumulateValues(j0, v0); });
    });
    writeOutput();
  }

private:
  Value at(Value row, int64_t ld, Value col) const {
    return k.add(k.mul(row, k.idx(ld)), col);
  }
  Value lt(Value a, Value c) const { return k.cmp(CmpIPredicate::slt, a, c); }

  void initialize() {
    blk.phase2(k.idx(QT), k.idx(VMax), [&](Value r, Value c) {
      k.mstore(k.f32(0.0), acc, {at(r, VMax, c)});
    });
    blk.phase(k.idx(QT), [&](Value r) {
      k.mstore(negInf, rowMax, {r});
      k.mstore(k.f32(0.0), rowSum, {r});
    });
  }

  /// [begin, end) of the keys any query of the tile may see, begin a
  /// multiple of KT.
  std::pair<Value, Value> visibleKeys() const {
    Value qEnd = k.mins(k.add(i0, k.idx(QT)), nT);
    Value jEnd = nS;
    if (config.causal)
      jEnd = k.mins(nS, k.add(offset, qEnd));
    Value jBegin = k.idx(0);
    if (config.window > 0) {
      Value first = k.sub(k.add(offset, i0), k.idx(config.window - 1));
      Value lo = k.select(lt(first, k.idx(0)), k.idx(0), first);
      jBegin = k.mul(k.divs(lo, k.idx(KT)), k.idx(KT));
    }
    return {jBegin, jEnd};
  }

  /// Whether query i sees key j.
  Value visible(Value i, Value j) const {
    Value pos = k.add(i, offset);
    Value ok = lt(j, nS);
    if (config.causal)
      ok = k.andi(ok, k.cmp(CmpIPredicate::sle, j, pos));
    if (config.window > 0)
      ok = k.andi(ok, lt(k.sub(pos, j), k.idx(config.window)));
    return ok;
  }

  /// The QT x KT scores of key tile j0, over tiles of DT head channels.
  void scoreTile(Value j0) {
    k.forEach(k.idx(0), nK, k.idx(DT), [&](Value d0) {
      blk.phase2(k.idx(QT), k.idx(DT), [&](Value r, Value dd) {
        Value i = k.add(i0, r), d = k.add(d0, dd);
        k.mstore(k.loadIf(k.andi(lt(i, nT), lt(d, nK)), q, {bi, i, h, d},
                          k.f32(0.0)),
                 qTile, {at(r, DT, dd)});
      });
      blk.phase2(k.idx(KT), k.idx(DT), [&](Value c, Value dd) {
        Value j = k.add(j0, c), d = k.add(d0, dd);
        k.mstore(k.loadIf(k.andi(lt(j, nS), lt(d, nK)), key, {bi, j, hk, d},
                          k.f32(0.0)),
                 kTile, {at(c, DT, dd)});
      });
      Value first = k.cmp(CmpIPredicate::eq, d0, k.idx(0));
      if (config.mmaType) {
        mmaSharedProduct(
            blk, config.mmaType, QT, KT, DT,
            [&](Value r, Value dd) { return k.mload(qTile, {at(r, DT, dd)}); },
            [&](Value dd, Value c) { return k.mload(kTile, {at(c, DT, dd)}); },
            [&](Value r, Value c) {
              return k.select(first, k.f32(0.0),
                              k.mload(scores, {at(r, KT, c)}));
            },
            [&](Value r, Value c, Value s) {
              k.mstore(s, scores, {at(r, KT, c)});
            });
        return;
      }
      blk.phase2(k.idx(QT), k.idx(KT), [&](Value r, Value c) {
        auto dot =
            k.loop(k.idx(DT), {k.f32(0.0)}, [&](Value dd, ValueRange it) {
              return SmallVector<Value>{
                  k.fadd(it[0], k.fmul(k.mload(qTile, {at(r, DT, dd)}),
                                       k.mload(kTile, {at(c, DT, dd)})))};
            });
        Value prev =
            k.select(first, k.f32(0.0), k.mload(scores, {at(r, KT, c)}));
        k.mstore(k.fadd(prev, dot[0]), scores, {at(r, KT, c)});
      });
    });
  }

  /// Online softmax, a thread per query row: probabilities replace the
  /// scores; the row's correction of what it accumulated goes to
  /// rowCorrection.
  void onlineSoftmax(Value j0) {
    blk.phase(k.idx(QT), [&](Value r) {
      Value i = k.add(i0, r);
      Value mOld = k.mload(rowMax, {r});
      auto mx = k.loop(k.idx(KT), {mOld}, [&](Value c, ValueRange it) {
        Value s = k.fmul(k.mload(scores, {at(r, KT, c)}), scale);
        Value m = k.fmax(it[0], s);
        return SmallVector<Value>{k.select(visible(i, k.add(j0, c)), m, it[0])};
      });
      Value mNew = mx[0];
      Value none = k.fcmp(CmpFPredicate::OEQ, mNew, negInf);
      Value corr = k.select(none, k.f32(1.0), k.exp(k.fsub(mOld, mNew)));
      auto sum = k.loop(k.idx(KT), {k.f32(0.0)}, [&](Value c, ValueRange it) {
        Value s = k.fmul(k.mload(scores, {at(r, KT, c)}), scale);
        Value p = k.select(visible(i, k.add(j0, c)), k.exp(k.fsub(s, mNew)),
                           k.f32(0.0));
        k.mstore(p, scores, {at(r, KT, c)});
        return SmallVector<Value>{k.fadd(it[0], p)};
      });
      k.mstore(mNew, rowMax, {r});
      k.mstore(corr, rowCorrection, {r});
      k.mstore(k.fadd(k.fmul(k.mload(rowSum, {r}), corr), sum[0]), rowSum, {r});
    });
  }

  /// acc = acc * correction + P V for V's columns [v0, v0 + VT).
  void accumulateValues(Value j0, Value v0) {
    blk.phase2(k.idx(KT), k.idx(VT), [&](Value c, Value vv) {
      Value j = k.add(j0, c), col = k.add(v0, vv);
      k.mstore(k.loadIf(k.andi(lt(j, nS), lt(col, nV)), v, {bi, j, hk, col},
                        k.f32(0.0)),
               vTile, {at(c, VT, vv)});
    });
    if (config.mmaType) {
      // Columns past V were staged as zeros; they are not stored.
      mmaSharedProduct(
          blk, config.mmaType, QT, VT, KT,
          [&](Value r, Value c) { return k.mload(scores, {at(r, KT, c)}); },
          [&](Value c, Value vv) { return k.mload(vTile, {at(c, VT, vv)}); },
          [&](Value r, Value vv) {
            Value col = k.add(v0, vv);
            Value a =
                k.loadIf(lt(col, nV), acc, {at(r, VMax, col)}, k.f32(0.0));
            return k.fmul(a, k.mload(rowCorrection, {r}));
          },
          [&](Value r, Value vv, Value a) {
            Value col = k.add(v0, vv);
            k.ifThen(lt(col, nV),
                     [&] { k.mstore(a, acc, {at(r, VMax, col)}); });
          });
      return;
    }
    blk.phase2(k.idx(QT), k.idx(VT), [&](Value r, Value vv) {
      Value col = k.add(v0, vv);
      k.ifThen(lt(col, nV), [&] {
        auto pv = k.loop(k.idx(KT), {k.f32(0.0)}, [&](Value c, ValueRange it) {
          return SmallVector<Value>{
              k.fadd(it[0], k.fmul(k.mload(scores, {at(r, KT, c)}),
                                   k.mload(vTile, {at(c, VT, vv)})))};
        });
        Value a = k.mload(acc, {at(r, VMax, col)});
        k.mstore(k.fadd(k.fmul(a, k.mload(rowCorrection, {r})), pv[0]), acc,
                 {at(r, VMax, col)});
      });
    });
  }

  /// o = acc / l; 0 for a query that saw no key (a NaN l propagates).
  void writeOutput() {
    blk.phase2(
        k.idx(QT), nV,
        [&](Value r, Value col) {
          Value i = k.add(i0, r);
          k.ifThen(lt(i, nT), [&] {
            Value l = k.mload(rowSum, {r});
            Value seen = k.fcmp(CmpFPredicate::UNE, l, k.f32(0.0));
            Value val = k.select(
                seen, k.fdiv(k.mload(acc, {at(r, VMax, col)}), l), k.f32(0.0));
            k.mstore(val, o, {bi, i, h, col});
          });
        },
        /*barrier=*/false);
  }

  GpuBlock &blk;
  KernelBuilder &k;
  const Config &config;
  // Arguments.
  Value q, key, v, o, scale;
  // Shared: the tiles of Q and K (QT and KT x DT), the scores then
  // probabilities (QT x KT), V's tile (KT x VT), the output accumulator
  // (QT x VMax), and per query row its max, sum and correction.
  Value qTile, kTile, scores, vTile, acc, rowMax, rowSum, rowCorrection;
  // Sizes; the tile's batch, head, key head and first query; where query
  // i sits among the keys (i + offset).
  Value nT, nK, nS, nV, bi, h, hk, i0, offset, negInf;
};

struct GpuAttention : OpRewritePattern<seq::AttentionOp> {
  GpuAttention(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::AttentionOp op,
                                PatternRewriter &rewriter) const override {
    int64_t vDim = cast<RankedTensorType>(op.getV().getType()).getDimSize(3);
    if (!allFloat(op) || ShapedType::isDynamic(vDim) || vDim > VMax)
      return rewriter.notifyMatchFailure(
          op, "needs float operands and a static V of at most 128");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], H = dims["H"], K = dims["K"];
    Value scale = op.getScale()
                      ? kb.f32(op.getScale()->convertToDouble())
                      : kb.fdiv(kb.f32(1.0), kb.sqrt(kb.indexToF32(K)));
    // P is rounded too, but lies in [0, 1]: f16 is safe.
    AttentionTile::Config config{
        target.tensorCoreType({op.getQ(), op.getK(), op.getV()},
                              /*allowF16=*/true),
        op.getCausal(), static_cast<int64_t>(op.getWindow()), vDim};
    auto oType = cast<RankedTensorType>(op.getO().getType());
    Value oBuf = allocBuffer(b, oType, dims.of("o"));
    Value qTiles = kb.divs(kb.add(T, kb.idx(QT - 1)), kb.idx(QT));
    SmallVector<Value> args{readBuffer(b, op.getQ()), readBuffer(b, op.getK()),
                            readBuffer(b, op.getV()), oBuf, scale};
    SmallVector<SmallVector<int64_t>> shared{{QT * DT}, {KT * DT},   {QT * KT},
                                             {KT * VT}, {QT * VMax}, {QT},
                                             {QT},      {QT}};
    emitGpuKernel(b, target, config.mmaType ? "attention_mma" : "attention",
                  kb.mul(kb.mul(Bsz, H), qTiles), args, shared,
                  [&](GpuBlock &blk, ValueRange in, ValueRange sh) {
                    AttentionTile(blk, in, sh, config).emit();
                  });
    rewriter.replaceOp(op, asTensor(b, oBuf, oType));
    return success();
  }

  GpuTarget target;
};

} // namespace

void seqc::populateGpuAttentionPatterns(RewritePatternSet &patterns,
                                        const GpuTarget &target) {
  patterns.add<GpuAttention>(patterns.getContext(), target);
}
