//===- CpuAttention.cpp - IO-aware exact attention on the CPU -------------===//
//
// FlashAttention's schedule on CPU cores: a task owns a block of Bq queries
// of one head and walks the visible key tiles of Bk keys, keeping a running
// max m, normalizer l and unnormalized output O of its rows in stack buffers:
//
//   S = (q scale) K_tile^T                    register-blocked product
//   m' = max(m, rowmax S), p = exp(S - m'), l = l exp(m - m') + rowsum p
//   O = O exp(m - m') + p V_tile
//
// so no T x S score matrix exists. Tiles entirely above the causal diagonal
// or outside the window are skipped. K is transposed and K, V are packed per
// key/value head once, by a kernel of their own, so every tile's operands are
// contiguous rows.
//
// With bf16 q, k and v on a CPU with AVX-512 BF16, both products multiply
// bf16 pairs (Gemm.h): K and V are packed per key tile into the dot
// product's pair panels, q stays unscaled in bf16 (the scale is applied to
// S in f32), and p is rounded to bf16 for P V, as FlashAttention does on
// tensor cores; l sums the unrounded p.
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuPatterns.h"
#include "CPU/Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace seqc;
using arith::CmpFPredicate;
using arith::CmpIPredicate;

namespace {

constexpr int64_t Bq = 64, Bk = 64;

/// The static sizes of one attention op.
struct AttentionShape {
  int64_t H, K, Hkv, V;
  double scale;
  bool causal;
  int64_t window;
};

/// One query block's task: its rows, its buffers, and the per-tile steps.
struct QueryBlock {
  Value bi, h, hk, i0, rows, offset;
  /// q (scaled in f32; unscaled bf16 for pairs), the tile's scores, the
  /// probabilities P V reads (Sc itself in f32; bf16 for pairs), the
  /// unnormalized output, the running max and normalizer.
  Value Qs, Sc, P, Oacc, mS, lS;
};

class AttentionLowering {
public:
  AttentionLowering(ImplicitLocOpBuilder &b, const CpuTarget &target,
                    const AttentionShape &shape, GemmProducts products)
      : b(b), target(target), s(shape),
        g(GemmBlocking::forTarget(target, products)), lanes(target.vectorWidth),
        Kpad(roundUp(shape.K, lanes)) {}

  Value emit(KernelBuilder &kb, seq::AttentionOp op, DimSizes &dims);

private:
  // Packed keys and values, per (batch, kv head).
  std::pair<Value, Value> allocPacked(KernelBuilder &kb, Value Bsz, Value S);
  void emitPackTile(KernelBuilder &k, ValueRange in, Value bi, Value hk,
                    Value tile, Value j0, Value len);
  // The query block task.
  void emitQueryBlock(KernelBuilder &k, Value task, ValueRange in);
  void loadQueries(KernelBuilder &k, Value Qm, QueryBlock &q);
  void emitKeyTile(KernelBuilder &k, Value KT, Value VP, const QueryBlock &q,
                   Value j0, Value nS);
  void onlineSoftmax(KernelBuilder &k, const QueryBlock &q, Value j0,
                     Value cols);
  void writeOutputs(KernelBuilder &k, Value O, const QueryBlock &q);
  /// The operand of a product that comes packed: pair panels of key tile
  /// `tile`, panel rows counted from the block's first step.
  PrepareB packedTile(KernelBuilder &k, Value packed, Value bi, Value hk,
                      Value tile) const;

  ImplicitLocOpBuilder &b;
  const CpuTarget &target;
  const AttentionShape s;
  const GemmBlocking g;
  const int64_t lanes, Kpad;
};

/// kT [B, Hkv, Kpad, S] and vP [B, Hkv, S, V] in f32; with pairs, per key
/// tile: kT [B, Hkv, tiles, Bk / nr, K / 2, 2 nr] and vP [B, Hkv, tiles,
/// V / nr, Bk / 2, 2 nr] in bf16 (K, V rounded up to whole pairs, panels).
std::pair<Value, Value> AttentionLowering::allocPacked(KernelBuilder &kb,
                                                       Value Bsz, Value S) {
  int64_t dyn = ShapedType::kDynamic;
  auto alloc = [&](ArrayRef<int64_t> shape, ValueRange sizes) {
    return memref::AllocOp::create(
               b, MemRefType::get(shape, g.packedType(b.getContext())), sizes,
               b.getI64IntegerAttr(64))
        .getResult();
  };
  if (!g.pairs())
    return {alloc({dyn, s.Hkv, Kpad, dyn}, {Bsz, S}),
            alloc({dyn, s.Hkv, dyn, s.V}, {Bsz, S})};
  const int64_t nr = g.columns();
  Value tiles = kb.divs(kb.add(S, kb.idx(Bk - 1)), kb.idx(Bk));
  return {
      alloc({dyn, s.Hkv, dyn, Bk / nr, (s.K + 1) / 2, 2 * nr}, {Bsz, tiles}),
      alloc({dyn, s.Hkv, dyn, (s.V + nr - 1) / nr, Bk / 2, 2 * nr},
            {Bsz, tiles})};
}

/// Keys [j0, j0 + len) of (bi, hk): K transposed, and V.
void AttentionLowering::emitPackTile(KernelBuilder &k, ValueRange in, Value bi,
                                     Value hk, Value tile, Value j0,
                                     Value len) {
  Value keysIn = in[0], valuesIn = in[1], KT = in[2], VP = in[3];
  MatrixRef keys{keysIn, [&](Value j, Value c) {
                   return SmallVector<Value>{bi, k.add(j0, j), hk, c};
                 }};
  MatrixRef vals{valuesIn, [&](Value j, Value c) {
                   return SmallVector<Value>{bi, k.add(j0, j), hk, c};
                 }};
  if (!g.pairs()) {
    MatrixRef kTOut{KT, [&](Value c, Value j) {
                      return SmallVector<Value>{bi, hk, c, k.add(j0, j)};
                    }};
    transposeInto(k, target, keys, len, s.K, kTOut);
    MatrixRef packed{VP, [&](Value j, Value c) {
                       return SmallVector<Value>{bi, hk, k.add(j0, j), c};
                     }};
    packRows(k, target, vals, len, s.V, packed);
    return;
  }
  // K^T's panels read its rows (channels) as contiguous keys: the tile is
  // transposed into a stack buffer first (the panels zero keys past len).
  Value kTile = k.stackBuffer({s.K, Bk}, b.getBF16Type());
  transposeInto(k, target, keys, len, s.K, kTile);
  auto panelsOf = [&](Value packed) {
    return PanelRef{packed, [bi, hk, tile](Value p, Value kp, Value slot) {
                      return SmallVector<Value>{bi, hk, tile, p, kp, slot};
                    }};
  };
  packBPanels(k, g, rowMajor(kTile), len, k.idx(0), k.idx(s.K), panelsOf(KT));
  packBPanels(k, g, vals, k.idx(s.V), k.idx(0), len, panelsOf(VP));
}

PrepareB AttentionLowering::packedTile(KernelBuilder &k, Value packed, Value bi,
                                       Value hk, Value tile) const {
  GemmBlocking blocking = g;
  return [&k, blocking, packed, bi, hk, tile](Value k0, Value) {
    Value firstPair = k.divs(k0, k.idx(2));
    PanelRef ref{packed,
                 [&k, bi, hk, tile, firstPair](Value p, Value kp, Value slot) {
                   return SmallVector<Value>{
                       bi, hk, tile, p, k.add(firstPair, kp), slot};
                 }};
    return panelsAsMatrix(k, blocking, ref, k0, k.idx(0));
  };
}

void AttentionLowering::loadQueries(KernelBuilder &k, Value Qm, QueryBlock &q) {
  MatrixRef queries{Qm, [&](Value i, Value c) {
                      return SmallVector<Value>{q.bi, k.add(q.i0, i), q.h, c};
                    }};
  if (g.pairs()) {
    // Unscaled: bf16 q is copied exactly; an odd K's pad step is zero.
    packRows(k, target, queries, q.rows, s.K, q.Qs);
    padReduction(k, g, q.rows, k.idx(s.K), rowMajor(q.Qs));
    return;
  }
  Value scaleV = k.f32(s.scale);
  packRows(k, target, queries, q.rows, s.K, q.Qs,
           [&](Value v, Value) { return k.fmul(v, k.splat(scaleV, lanes)); });
}

/// One key tile: scores, the online softmax, O += p V_tile.
void AttentionLowering::emitKeyTile(KernelBuilder &k, Value KT, Value VP,
                                    const QueryBlock &q, Value j0, Value nS) {
  Value cols = k.mins(k.idx(Bk), k.sub(nS, j0));
  if (g.pairs()) {
    Value tile = k.divs(j0, k.idx(Bk));
    // A's rows are packed already: q per block, p per tile.
    auto rowsOf = [](Value buffer) -> PrepareA {
      return [buffer](Value, Value) { return rowMajor(buffer); };
    };
    emitGemm(k, g, {q.rows, cols, k.idx(s.K)}, rowMajor(q.Qs), MatrixRef{},
             rowMajor(q.Sc), GemmMode::Overwrite, rowsOf(q.Qs),
             packedTile(k, KT, q.bi, q.hk, tile));
    onlineSoftmax(k, q, j0, cols);
    emitGemm(k, g, {q.rows, k.idx(s.V), cols}, rowMajor(q.P), MatrixRef{},
             rowMajor(q.Oacc), GemmMode::Accumulate, rowsOf(q.P),
             packedTile(k, VP, q.bi, q.hk, tile));
    return;
  }
  // S = (q scale) K_tile^T.
  MatrixRef kTile{KT, [&](Value c, Value j) {
                    return SmallVector<Value>{q.bi, q.hk, c, k.add(j0, j)};
                  }};
  emitGemm(k, target, {q.rows, cols, k.idx(s.K)}, rowMajor(q.Qs), kTile,
           rowMajor(q.Sc), GemmMode::Overwrite);
  onlineSoftmax(k, q, j0, cols);
  // O += p V_tile.
  MatrixRef vTile{VP, [&](Value j, Value c) {
                    return SmallVector<Value>{q.bi, q.hk, k.add(j0, j), c};
                  }};
  emitGemm(k, target, {q.rows, k.idx(s.V), cols}, rowMajor(q.P), vTile,
           rowMajor(q.Oacc), GemmMode::Accumulate);
}

/// Row by row: masks, the running max, p into q.P, l and O rescaled.
void AttentionLowering::onlineSoftmax(KernelBuilder &k, const QueryBlock &q,
                                      Value j0, Value cols) {
  Value negInf = k.f32(-std::numeric_limits<float>::infinity());
  Value iota = k.viota(lanes);
  k.forEach(k.idx(0), q.rows, k.idx(1), [&](Value i) {
    Value pos = k.add(k.add(q.i0, i), q.offset);
    SmallVector<Value> sv;
    // Lane-wise maxima and sums first, then one reduction across lanes per
    // row (reductions are shuffles, on the port Intel's second FMA uses).
    Value laneMax = k.splat(negInf, lanes);
    for (int64_t c0 = 0; c0 < Bk; c0 += lanes) {
      Value j = arith::AddIOp::create(k.builder(), iota,
                                      k.splat(k.add(j0, k.idx(c0)), lanes));
      Value vis = k.cmp(CmpIPredicate::slt, j, k.splat(k.add(j0, cols), lanes));
      Value posV = k.splat(pos, lanes);
      if (s.causal)
        vis = k.andi(vis, k.cmp(CmpIPredicate::sle, j, posV));
      if (s.window > 0)
        vis = k.andi(vis, k.cmp(CmpIPredicate::slt,
                                arith::SubIOp::create(k.builder(), posV, j),
                                k.splat(k.idx(s.window), lanes)));
      Value score = k.vload(q.Sc, {i, k.idx(c0)}, lanes);
      // Pairs multiply unscaled q: the scale comes here, in f32.
      if (g.pairs())
        score = k.fmul(score, k.splat(k.f32(s.scale), lanes));
      Value sc = k.select(vis, score, k.splat(negInf, lanes));
      sv.push_back(sc);
      laneMax = k.fmax(laneMax, sc);
    }
    Value rowMax = k.hmax(laneMax);
    Value mOld = k.mload(q.mS, {i});
    Value mNew = k.fmax(mOld, rowMax);
    // Rows that have seen no key yet keep m = -inf: subtract 0.
    Value seen = k.fcmp(CmpFPredicate::OGT, mNew, negInf);
    Value base = k.select(seen, mNew, k.f32(0.0));
    Value corr = k.exp(k.fsub(mOld, base));
    Value sums = k.vconst(0.0, lanes);
    Value baseV = k.splat(base, lanes);
    // Every lane of the tile is written: past `cols`, p is 0, the pad
    // step bf16 pairs read.
    for (int64_t c0 = 0; c0 < Bk; c0 += lanes) {
      Value p = k.exp(k.fsub(sv[c0 / lanes], baseV));
      k.vstore(p, q.P, {i, k.idx(c0)});
      sums = k.fadd(sums, p);
    }
    Value sum = k.hsum(sums);
    k.mstore(mNew, q.mS, {i});
    k.mstore(k.fadd(k.fmul(k.mload(q.lS, {i}), corr), sum), q.lS, {i});
    Value corrV = k.splat(corr, lanes);
    for (int64_t v0 = 0; v0 < s.V; v0 += lanes) {
      Value mask = k.vmask(k.idx(s.V - v0), lanes);
      SmallVector<Value> at{i, k.idx(v0)};
      k.vstoreMasked(k.fmul(k.vloadMasked(q.Oacc, at, lanes, mask), corrV),
                     q.Oacc, at, mask);
    }
  });
}

/// o = O / l, and 0 for a query that saw no key (l == 0; NaN scores
/// propagate).
void AttentionLowering::writeOutputs(KernelBuilder &k, Value O,
                                     const QueryBlock &q) {
  k.forEach(k.idx(0), q.rows, k.idx(1), [&](Value i) {
    Value l = k.mload(q.lS, {i});
    Value seen = k.fcmp(CmpFPredicate::UNE, l, k.f32(0.0));
    Value inv = k.select(seen, k.fdiv(k.f32(1.0), l), k.f32(0.0));
    Value invV = k.splat(inv, lanes);
    for (int64_t v0 = 0; v0 < s.V; v0 += lanes) {
      Value mask = k.vmask(k.idx(s.V - v0), lanes);
      k.vstoreMasked(
          k.fmul(k.vloadMasked(q.Oacc, {i, k.idx(v0)}, lanes, mask), invV), O,
          {q.bi, k.add(q.i0, i), q.h, k.idx(v0)}, mask);
    }
  });
}

void AttentionLowering::emitQueryBlock(KernelBuilder &k, Value task,
                                       ValueRange in) {
  // The kernel's operands, in emit's order; the keys themselves give S.
  Value Qm = in[0], KT = in[1], VP = in[2], O = in[3], keys = in[4];
  Value nT = k.mdim(Qm, 1), nS = k.mdim(keys, 1);
  Value blocks = k.divs(k.add(nT, k.idx(Bq - 1)), k.idx(Bq));
  // The last query blocks see the most keys (causal): hand them out
  // first so the pool's dynamic schedule ends balanced.
  QueryBlock q;
  Value blk = k.sub(k.sub(blocks, k.idx(1)), k.rems(task, blocks));
  Value rest = k.divs(task, blocks);
  q.h = k.rems(rest, k.idx(s.H));
  q.bi = k.divs(rest, k.idx(s.H));
  q.hk = k.divs(q.h, k.idx(s.H / s.Hkv));
  q.i0 = k.mul(blk, k.idx(Bq));
  q.rows = k.mins(k.idx(Bq), k.sub(nT, q.i0));
  q.offset = k.sub(nS, nT); // query i sees key positions <= i + S - T

  Type packed = g.packedType(b.getContext());
  q.Qs = k.stackBuffer({Bq, Kpad}, packed);
  q.Sc = k.stackBuffer({Bq, Bk});
  q.P = g.pairs() ? k.stackBuffer({Bq, Bk}, packed) : q.Sc;
  q.Oacc = k.stackBuffer({Bq, s.V});
  q.mS = k.stackBuffer({Bq});
  q.lS = k.stackBuffer({Bq});
  loadQueries(k, Qm, q);
  Value negInf = k.f32(-std::numeric_limits<float>::infinity());
  k.forEach(k.idx(0), q.rows, k.idx(1), [&](Value i) {
    k.mstore(negInf, q.mS, {i});
    k.mstore(k.f32(0.0), q.lS, {i});
    for (int64_t v0 = 0; v0 < s.V; v0 += lanes) {
      Value mask = k.vmask(k.idx(s.V - v0), lanes);
      k.vstoreMasked(k.vconst(0.0, lanes), q.Oacc, {i, k.idx(v0)}, mask);
    }
  });

  // Visible keys of the block: [jBegin, jEnd).
  Value lastPos = k.add(k.add(q.i0, k.sub(q.rows, k.idx(1))), q.offset);
  Value jEnd = nS;
  if (s.causal)
    jEnd = k.mins(nS, k.add(lastPos, k.idx(1)));
  Value jBegin = k.idx(0);
  if (s.window > 0) {
    Value first =
        k.sub(k.add(k.add(q.i0, q.offset), k.idx(1)), k.idx(s.window));
    jBegin = arith::MaxSIOp::create(k.builder(), k.idx(0), first);
  }
  // Whole tiles from the tile containing jBegin.
  Value tileBegin = k.mul(k.divs(jBegin, k.idx(Bk)), k.idx(Bk));
  k.forEach(tileBegin, jEnd, k.idx(Bk),
            [&](Value j0) { emitKeyTile(k, KT, VP, q, j0, nS); });
  writeOutputs(k, O, q);
}

Value AttentionLowering::emit(KernelBuilder &kb, seq::AttentionOp op,
                              DimSizes &dims) {
  Value Bsz = dims["B"], S = dims["S"], T = dims["T"];
  auto [kT, vP] = allocPacked(kb, Bsz, S);
  Value kIn = readBuffer(b, op.getK()), vIn = readBuffer(b, op.getV());
  Value keyBlocks = kb.divs(kb.add(S, kb.idx(Bk - 1)), kb.idx(Bk));
  emitParallelKernel(
      b, g.pairs() ? "attention_pack_pairs" : "attention_pack",
      kb.mul(kb.mul(Bsz, kb.idx(s.Hkv)), keyBlocks), {kIn, vIn, kT, vP},
      [&](KernelBuilder &k, Value task, ValueRange in) {
        Value nS = k.mdim(in[0], 1);
        Value blocks = k.divs(k.add(nS, k.idx(Bk - 1)), k.idx(Bk));
        Value blk = k.rems(task, blocks), rest = k.divs(task, blocks);
        Value hk = k.rems(rest, k.idx(s.Hkv)), bi = k.divs(rest, k.idx(s.Hkv));
        Value j0 = k.mul(blk, k.idx(Bk));
        emitPackTile(k, in, bi, hk, blk, j0, k.mins(k.idx(Bk), k.sub(nS, j0)));
      });

  auto oType = cast<RankedTensorType>(op.getO().getType());
  Value oBuf = allocResult(b, oType, dims.of("o"));
  Value qBlocks = kb.divs(kb.add(T, kb.idx(Bq - 1)), kb.idx(Bq));
  // The keys themselves ride along for S (the packed layouts of pairs do
  // not keep it).
  emitParallelKernel(b, g.pairs() ? "attention_pairs" : "attention",
                     kb.mul(kb.mul(Bsz, kb.idx(s.H)), qBlocks),
                     {readBuffer(b, op.getQ()), kT, vP, oBuf, kIn},
                     [&](KernelBuilder &k, Value task, ValueRange in) {
                       emitQueryBlock(k, task, in);
                     });
  return asTensor(b, oBuf, oType);
}

struct CpuAttention : OpRewritePattern<seq::AttentionOp> {
  CpuAttention(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!cpuTakesElementTypes(op))
      return rewriter.notifyMatchFailure(op, cpuElementTypesReason);
    auto qType = cast<RankedTensorType>(op.getQ().getType());
    auto kType = cast<RankedTensorType>(op.getK().getType());
    auto vType = cast<RankedTensorType>(op.getV().getType());
    AttentionShape shape;
    shape.H = qType.getDimSize(2);
    shape.K = qType.getDimSize(3);
    shape.Hkv = kType.getDimSize(2);
    shape.V = vType.getDimSize(3);
    if (ShapedType::isDynamic(shape.H) || ShapedType::isDynamic(shape.K) ||
        ShapedType::isDynamic(shape.Hkv) || ShapedType::isDynamic(shape.V) ||
        shape.Hkv == 0 || shape.H % shape.Hkv != 0)
      return rewriter.notifyMatchFailure(
          op, "needs static H, K, Hkv and V, with H a multiple of Hkv");
    shape.scale = op.getScale() ? op.getScale()->convertToDouble()
                                : 1.0 / std::sqrt(static_cast<double>(shape.K));
    shape.causal = op.getCausal();
    shape.window = op.getWindow();
    // Pairs when q, k and v are all bf16 (and the target has the dot
    // product; a key tile must be whole panels). AMX hosts take the dot
    // product here too: a query block's products are a few 16-step blocks
    // between softmax updates, which the tiles' load-and-store of C and the
    // zero padding to 32 steps would not repay.
    GemmProducts products =
        gemmProductsFor(target, qType.getElementType(), kType.getElementType());
    if (products == GemmProducts::AmxTiles)
      products = target.bf16Dot ? GemmProducts::Bf16Pairs : GemmProducts::F32;
    if (!vType.getElementType().isBF16() ||
        Bk % GemmBlocking::forTarget(target, products).columns() != 0)
      products = GemmProducts::F32;

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    AttentionLowering lowering(b, target, shape, products);
    rewriter.replaceOp(op, lowering.emit(kb, op, dims));
    return success();
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuAttentionPatterns(RewritePatternSet &patterns,
                                        const CpuTarget &target) {
  patterns.add<CpuAttention>(patterns.getContext(), target);
}
