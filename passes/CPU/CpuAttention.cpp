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

struct CpuAttention : OpRewritePattern<seq::AttentionOp> {
  CpuAttention(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  static constexpr int64_t Bq = 64, Bk = 64;

  LogicalResult matchAndRewrite(seq::AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!cpuTakesElementTypes(op))
      return rewriter.notifyMatchFailure(op, cpuElementTypesReason);
    auto qType = cast<RankedTensorType>(op.getQ().getType());
    auto kType = cast<RankedTensorType>(op.getK().getType());
    auto vType = cast<RankedTensorType>(op.getV().getType());
    int64_t H = qType.getDimSize(2), K = qType.getDimSize(3);
    int64_t Hkv = kType.getDimSize(2), V = vType.getDimSize(3);
    if (ShapedType::isDynamic(H) || ShapedType::isDynamic(K) ||
        ShapedType::isDynamic(Hkv) || ShapedType::isDynamic(V) || Hkv == 0 ||
        H % Hkv != 0)
      return rewriter.notifyMatchFailure(
          op, "needs static H, K, Hkv and V, with H a multiple of Hkv");
    const int64_t lanes = target.vectorWidth;
    const int64_t Kpad = roundUp(K, lanes);

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value Bsz = dims["B"], T = dims["T"], S = dims["S"];
    double scale = op.getScale() ? op.getScale()->convertToDouble()
                                 : 1.0 / std::sqrt(static_cast<double>(K));
    bool causal = op.getCausal();
    int64_t window = op.getWindow();

    // Packed keys (transposed) and values per (batch, kv head).
    auto f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    Value kT =
        memref::AllocOp::create(b, MemRefType::get({dyn, Hkv, Kpad, dyn}, f32),
                                ValueRange{Bsz, S}, b.getI64IntegerAttr(64));
    Value vP =
        memref::AllocOp::create(b, MemRefType::get({dyn, Hkv, dyn, V}, f32),
                                ValueRange{Bsz, S}, b.getI64IntegerAttr(64));
    Value kIn = readBuffer(b, op.getK()), vIn = readBuffer(b, op.getV());
    Value keyBlocks = kb.divs(kb.add(S, kb.idx(Bk - 1)), kb.idx(Bk));
    emitParallelKernel(
        b, "attention_pack", kb.mul(kb.mul(Bsz, kb.idx(Hkv)), keyBlocks),
        {kIn, vIn, kT, vP}, [&](KernelBuilder &k, Value task, ValueRange in) {
          Value nS = k.mdim(in[0], 1);
          Value blocks = k.divs(k.add(nS, k.idx(Bk - 1)), k.idx(Bk));
          Value blk = k.rems(task, blocks), rest = k.divs(task, blocks);
          Value hk = k.rems(rest, k.idx(Hkv)), bi = k.divs(rest, k.idx(Hkv));
          Value j0 = k.mul(blk, k.idx(Bk));
          Value len = k.mins(k.idx(Bk), k.sub(nS, j0));
          MatrixRef keys{in[0], [&](Value j, Value c) {
                           return SmallVector<Value>{bi, k.add(j0, j), hk, c};
                         }};
          MatrixRef kTOut{in[2], [&](Value c, Value j) {
                            return SmallVector<Value>{bi, hk, c, k.add(j0, j)};
                          }};
          // Transpose through lanes: rows of keys -> columns of kT.
          k.forEach(k.idx(0), len, k.idx(1), [&](Value j) {
            for (int64_t c0 = 0; c0 < K; c0 += lanes) {
              int64_t n = std::min(lanes, K - c0);
              Value v = k.vloadMasked(in[0], keys.at(j, k.idx(c0)), lanes,
                                      k.vmask(k.idx(n), lanes));
              for (int64_t l = 0; l < n; ++l)
                k.mstore(vector::ExtractOp::create(k.builder(), v, l), in[2],
                         kTOut.at(k.idx(c0 + l), j));
            }
          });
          MatrixRef vals{in[1], [&](Value j, Value c) {
                           return SmallVector<Value>{bi, k.add(j0, j), hk, c};
                         }};
          MatrixRef packed{in[3], [&](Value j, Value c) {
                             return SmallVector<Value>{bi, hk, k.add(j0, j), c};
                           }};
          packRows(k, target, vals, len, V, packed);
        });

    auto oType = cast<RankedTensorType>(op.getO().getType());
    Value oBuf = allocResult(b, oType, dims.of("o"));
    Value qBlocks = kb.divs(kb.add(T, kb.idx(Bq - 1)), kb.idx(Bq));
    int64_t rep = H / Hkv;
    emitParallelKernel(
        b, "attention", kb.mul(kb.mul(Bsz, kb.idx(H)), qBlocks),
        {readBuffer(b, op.getQ()), kT, vP, oBuf},
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value Qm = in[0], KT = in[1], VP = in[2], O = in[3];
          Value nT = k.mdim(Qm, 1), nS = k.mdim(KT, 3);
          Value blocks = k.divs(k.add(nT, k.idx(Bq - 1)), k.idx(Bq));
          // The last query blocks see the most keys (causal): hand them out
          // first so the pool's dynamic schedule ends balanced.
          Value blk = k.sub(k.sub(blocks, k.idx(1)), k.rems(task, blocks));
          Value rest = k.divs(task, blocks);
          Value h = k.rems(rest, k.idx(H)), bi = k.divs(rest, k.idx(H));
          Value hk = k.divs(h, k.idx(rep));
          Value i0 = k.mul(blk, k.idx(Bq));
          Value rows = k.mins(k.idx(Bq), k.sub(nT, i0));
          Value offset =
              k.sub(nS, nT); // query i sees key positions <= i + S - T

          Value Qs = k.stackBuffer({Bq, Kpad}), Sc = k.stackBuffer({Bq, Bk});
          Value Oacc = k.stackBuffer({Bq, V});
          Value mS = k.stackBuffer({Bq}), lS = k.stackBuffer({Bq});
          Value scaleV = k.f32(scale);
          packRows(
              k, target,
              MatrixRef{Qm,
                        [&](Value i, Value c) {
                          return SmallVector<Value>{bi, k.add(i0, i), h, c};
                        }},
              rows, K, Qs, [&](Value v, Value) {
                return k.fmul(v, k.splat(scaleV, lanes));
              });
          Value negInf = k.f32(-std::numeric_limits<float>::infinity());
          k.forEach(k.idx(0), rows, k.idx(1), [&](Value i) {
            k.mstore(negInf, mS, {i});
            k.mstore(k.f32(0.0), lS, {i});
            for (int64_t v0 = 0; v0 < V; v0 += lanes) {
              Value mask = k.vmask(k.idx(V - v0), lanes);
              k.vstoreMasked(k.vconst(0.0, lanes), Oacc, {i, k.idx(v0)}, mask);
            }
          });

          // Visible keys of the block: [jBegin, jEnd).
          Value lastPos = k.add(k.add(i0, k.sub(rows, k.idx(1))), offset);
          Value jEnd = nS;
          if (causal)
            jEnd = k.mins(nS, k.add(lastPos, k.idx(1)));
          Value jBegin = k.idx(0);
          if (window > 0) {
            Value first =
                k.sub(k.add(k.add(i0, offset), k.idx(1)), k.idx(window));
            jBegin = arith::MaxSIOp::create(k.builder(), k.idx(0), first);
          }
          // Whole tiles from the tile containing jBegin.
          Value tileBegin = k.mul(k.divs(jBegin, k.idx(Bk)), k.idx(Bk));
          Value iota = k.viota(lanes);
          k.forEach(tileBegin, jEnd, k.idx(Bk), [&](Value j0) {
            Value cols = k.mins(k.idx(Bk), k.sub(nS, j0));
            // S = (q scale) K_tile^T.
            MatrixRef kTile{
                KT, [&](Value c, Value j) {
                  return SmallVector<Value>{bi, hk, c, k.add(j0, j)};
                }};
            emitGemm(k, target, {rows, cols, k.idx(K)}, rowMajor(Qs), kTile,
                     rowMajor(Sc), GemmMode::Overwrite);
            // Online softmax, row by row.
            k.forEach(k.idx(0), rows, k.idx(1), [&](Value i) {
              Value pos = k.add(k.add(i0, i), offset);
              SmallVector<Value> sv, visible;
              Value rowMax = negInf;
              for (int64_t c0 = 0; c0 < Bk; c0 += lanes) {
                Value j = arith::AddIOp::create(
                    k.builder(), iota, k.splat(k.add(j0, k.idx(c0)), lanes));
                Value vis = k.cmp(CmpIPredicate::slt, j,
                                  k.splat(k.add(j0, cols), lanes));
                Value posV = k.splat(pos, lanes);
                if (causal)
                  vis = k.andi(vis, k.cmp(CmpIPredicate::sle, j, posV));
                if (window > 0)
                  vis = k.andi(
                      vis, k.cmp(CmpIPredicate::slt,
                                 arith::SubIOp::create(k.builder(), posV, j),
                                 k.splat(k.idx(window), lanes)));
                Value s = k.select(vis, k.vload(Sc, {i, k.idx(c0)}, lanes),
                                   k.splat(negInf, lanes));
                sv.push_back(s);
                rowMax = k.fmax(rowMax, k.hmax(s));
              }
              Value mOld = k.mload(mS, {i});
              Value mNew = k.fmax(mOld, rowMax);
              // Rows that have seen no key yet keep m = -inf: subtract 0.
              Value seen = k.fcmp(CmpFPredicate::OGT, mNew, negInf);
              Value base = k.select(seen, mNew, k.f32(0.0));
              Value corr = k.exp(k.fsub(mOld, base));
              Value sum = k.f32(0.0);
              Value baseV = k.splat(base, lanes);
              for (int64_t c0 = 0; c0 < Bk; c0 += lanes) {
                Value p = k.exp(k.fsub(sv[c0 / lanes], baseV));
                k.vstore(p, Sc, {i, k.idx(c0)});
                sum = k.fadd(sum, k.hsum(p));
              }
              k.mstore(mNew, mS, {i});
              k.mstore(k.fadd(k.fmul(k.mload(lS, {i}), corr), sum), lS, {i});
              Value corrV = k.splat(corr, lanes);
              for (int64_t v0 = 0; v0 < V; v0 += lanes) {
                Value mask = k.vmask(k.idx(V - v0), lanes);
                SmallVector<Value> at{i, k.idx(v0)};
                k.vstoreMasked(
                    k.fmul(k.vloadMasked(Oacc, at, lanes, mask), corrV), Oacc,
                    at, mask);
              }
            });
            // O += p V_tile.
            MatrixRef vTile{
                VP, [&](Value j, Value c) {
                  return SmallVector<Value>{bi, hk, k.add(j0, j), c};
                }};
            emitGemm(k, target, {rows, k.idx(V), cols}, rowMajor(Sc), vTile,
                     rowMajor(Oacc), GemmMode::Accumulate);
          });

          // o = O / l, and 0 for a query that saw no key (l == 0; NaN
          // scores propagate).
          k.forEach(k.idx(0), rows, k.idx(1), [&](Value i) {
            Value l = k.mload(lS, {i});
            Value seen = k.fcmp(CmpFPredicate::UNE, l, k.f32(0.0));
            Value inv = k.select(seen, k.fdiv(k.f32(1.0), l), k.f32(0.0));
            Value invV = k.splat(inv, lanes);
            for (int64_t v0 = 0; v0 < V; v0 += lanes) {
              Value mask = k.vmask(k.idx(V - v0), lanes);
              k.vstoreMasked(
                  k.fmul(k.vloadMasked(Oacc, {i, k.idx(v0)}, lanes, mask),
                         invV),
                  O, {bi, k.add(i0, i), h, k.idx(v0)}, mask);
            }
          });
        });

    rewriter.replaceOp(op, asTensor(b, oBuf, oType));
    return success();
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuAttentionPatterns(RewritePatternSet &patterns,
                                        const CpuTarget &target) {
  patterns.add<CpuAttention>(patterns.getContext(), target);
}
