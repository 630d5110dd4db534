//===- CpuMoE.cpp - routed experts as grouped GEMMs on the CPU ------------===//
//
// seq.moe_ffn in four kernels:
//
//   plan     (one task)  capacity in token order, a histogram of accepted
//                        choices and its exclusive scan: every accepted
//                        (token, choice) gets a row in its expert's
//                        contiguous slice, and the slices are cut in blocks
//   up       (parallel)  per block of rows and of F: act(X W_gate) (X W_up),
//                        the rows of X read through the row -> token map
//   down     (parallel)  per block of rows and of D: H W_down
//   combine  (parallel)  y[t] = sum_j w[t, j] Y[row(t, j)], per token, in
//                        choice order (deterministic, no atomics)
//
// Each task packs its block of an expert's weights into panels, unless the
// weight is a function constant (a weight bound when compiling): its panels
// are then packed once, when compiling (Gemm.h, constantPanels).
//
//===----------------------------------------------------------------------===//

#include "CPU/CpuPatterns.h"
#include "CPU/Gemm.h"
#include "Reference/ReferencePatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace seqc;
using arith::CmpIPredicate;

namespace {

/// An expert weight [E, K, N] as the projections read it: its buffer, or,
/// when it is a function constant, its panels packed when compiling
/// (constantPanels), whose sizes are then static.
struct ExpertWeight {
  static ExpertWeight of(ImplicitLocOpBuilder &b, const GemmBlocking &g,
                         Value weight) {
    DenseElementsAttr constant;
    if (!matchPattern(weight, m_Constant(&constant)))
      return {readBuffer(b, weight)};
    ArrayRef<int64_t> shape = cast<ShapedType>(constant.getType()).getShape();
    return {constantPanels(b, g, constant, /*batched=*/true), true, shape[1],
            shape[2]};
  }

  /// The reduction size and the columns of `W` (this weight's kernel
  /// argument).
  Value reduction(KernelBuilder &k, Value W) const {
    return prepacked ? k.idx(K) : k.mdim(W, 1);
  }
  Value columns(KernelBuilder &k, Value W) const {
    return prepacked ? k.idx(N) : k.mdim(W, 2);
  }
  /// Expert e's columns [column0, column0 + cols) of `W` in panels: read
  /// where they were packed when compiling, else packed block by block.
  PrepareB panels(KernelBuilder &k, const GemmBlocking &g, Value W, Value e,
                  Value column0, Value cols, int64_t maxCols) const {
    // Column blocks start at whole panels (nr divides ColBlock).
    assert(maxCols % g.columns() == 0 && "column blocks of whole panels");
    if (prepacked)
      return readConstantPanels(k, g, W, e, column0);
    MatrixRef w{W, [&k, e, column0](Value r, Value c) {
                  return SmallVector<Value>{e, r, k.add(column0, c)};
                }};
    return packEachBlockOfB(k, g, w, cols, maxCols);
  }

  Value buffer;
  bool prepacked = false;
  int64_t K = 0, N = 0;
};

struct CpuMoeFfn : OpRewritePattern<seq::MoeFfnOp> {
  CpuMoeFfn(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  /// Rows of an expert's slice per task, and columns of F / D per task.
  static constexpr int64_t RowBlock = 64, ColBlock = 256;

  LogicalResult matchAndRewrite(seq::MoeFfnOp op,
                                PatternRewriter &rewriter) const override {
    if (!cpuTakesElementTypes(op))
      return rewriter.notifyMatchFailure(op, cpuElementTypesReason);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value T = dims["T"], D = dims["D"], K = dims["k"], E = dims["E"],
          F = dims["F"];
    emitExpertIndexChecks(kb, op.getIndices(), T, K, E);
    Value cap =
        expertCapacity(kb, op.getCapacityFactor().convertToDouble(), T, K, E);
    const int64_t lanes = target.vectorWidth;
    // With bf16 tokens and weights on a host with the dot product, both
    // projections take bf16 pairs, and the hidden activations are kept in
    // bf16 between them (what a bf16 framework materializes).
    auto elementOf = [](Value v) { return getElementTypeOrSelf(v.getType()); };
    const GemmBlocking upBlocking = GemmBlocking::forTarget(
        target,
        gemmProductsFor(target, elementOf(op.getX()), elementOf(op.getWUp())));
    Type hiddenType = upBlocking.packedType(b.getContext());
    const GemmBlocking downBlocking = GemmBlocking::forTarget(
        target, gemmProductsFor(target, hiddenType, elementOf(op.getWDown())));
    bool gated = static_cast<bool>(op.getWGate());
    seq::Activation act = op.getActivation();

    Type i64 = b.getI64Type(), f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    auto i64Buf = [&](Value n) {
      return memref::AllocOp::create(b, MemRefType::get({dyn}, i64),
                                     ValueRange{n}, b.getI64IntegerAttr(64))
          .getResult();
    };
    Value choices = kb.mul(T, K);
    // Upper bound of the number of row blocks: every expert's last block
    // may be partial.
    Value maxBlocks =
        kb.add(kb.divs(choices, kb.idx(RowBlock)), kb.add(E, kb.idx(1)));
    auto loadType = cast<RankedTensorType>(op.getLoad().getType());
    Value load = allocBuffer(b, loadType, {E});
    Value rowOf = i64Buf(choices);   // (t, j) -> row, -1 if dropped
    Value tokenOf = i64Buf(choices); // row -> t
    Value offsets = i64Buf(kb.add(E, kb.idx(1)));
    Value blocks = i64Buf(kb.add(kb.mul(maxBlocks, kb.idx(2)), kb.idx(1)));
    Value xIn = readBuffer(b, op.getX()), wIn = readBuffer(b, op.getWeights());
    Value idxIn = readBuffer(b, op.getIndices());

    // Plan (sequential: capacity is decided in token order).
    emitParallelKernel(
        b, "moe_plan", kb.idx(1),
        {idxIn, load, rowOf, tokenOf, offsets, blocks, cap},
        [&](KernelBuilder &k, Value, ValueRange in) {
          Value Idx = in[0], Load = in[1], Row = in[2], Tok = in[3],
                Off = in[4], Blk = in[5], capacity = in[6];
          Value nT = k.mdim(Idx, 0), nK = k.mdim(Idx, 1), nE = k.mdim(Load, 0);
          Value zero64 = k.i64(0), one64 = k.i64(1);
          k.forEach(k.idx(0), nE, k.idx(1),
                    [&](Value e) { k.mstore(zero64, Load, {e}); });
          Value cap64 = k.indexToI64(capacity);
          // Pass 1: accept in token order, position within the expert.
          k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
            k.forEach(k.idx(0), nK, k.idx(1), [&](Value j) {
              Value e = k.i32ToIndex(k.mload(Idx, {t, j}));
              Value used = k.mload(Load, {e});
              Value ok = k.cmp(CmpIPredicate::slt, used, cap64);
              Value slot = k.add(k.mul(t, nK), j);
              k.mstore(k.select(ok, used, k.i64(-1)), Row, {slot});
              k.mstore(k.select(ok,
                                arith::AddIOp::create(k.builder(), used, one64),
                                used),
                       Load, {e});
            });
          });
          // Exclusive scan of the loads; the list of (expert, first row)
          // blocks.
          SmallVector<Value> end =
              k.loop(nE, {zero64, k.idx(0)}, [&](Value e, ValueRange c) {
                k.mstore(c[0], Off, {e});
                Value n = k.mload(Load, {e});
                Value nIdx = arith::IndexCastOp::create(
                    k.builder(), k.builder().getIndexType(), n);
                Value start = arith::IndexCastOp::create(
                    k.builder(), k.builder().getIndexType(), c[0]);
                Value count =
                    k.loop(k.idx(0), nIdx, {c[1]}, [&](Value r, ValueRange cb) {
                      // One block per RowBlock rows.
                      Value first = k.cmp(CmpIPredicate::eq,
                                          k.rems(r, k.idx(RowBlock)), k.idx(0));
                      return k.ifElse(
                          first, {cb[0].getType()},
                          [&] {
                            Value at = k.mul(cb[0], k.idx(2));
                            k.mstore(k.indexToI64(e), Blk, {at});
                            k.mstore(k.indexToI64(k.add(start, r)), Blk,
                                     {k.add(at, k.idx(1))});
                            return SmallVector<Value>{k.add(cb[0], k.idx(1))};
                          },
                          [&] { return SmallVector<Value>{cb[0]}; });
                    })[0];
                return SmallVector<Value>{
                    arith::AddIOp::create(k.builder(), c[0], n), count};
              });
          k.mstore(end[0], Off, {nE});
          // The number of blocks, stored after the list's last entry slot.
          k.mstore(k.indexToI64(end[1]), Blk,
                   {k.sub(k.mdim(Blk, 0), k.idx(1))});
          // Pass 2: rows of the accepted choices; row -> token.
          k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
            k.forEach(k.idx(0), nK, k.idx(1), [&](Value j) {
              Value slot = k.add(k.mul(t, nK), j);
              Value pos = k.mload(Row, {slot});
              k.ifThen(k.cmp(CmpIPredicate::sge, pos, zero64), [&] {
                Value e = k.i32ToIndex(k.mload(Idx, {t, j}));
                Value row =
                    arith::AddIOp::create(k.builder(), k.mload(Off, {e}), pos);
                k.mstore(row, Row, {slot});
                k.mstore(k.indexToI64(t), Tok,
                         {arith::IndexCastOp::create(
                             k.builder(), k.builder().getIndexType(), row)});
              });
            });
          });
        });

    Value numBlocks = arith::IndexCastOp::create(
        b, b.getIndexType(),
        memref::LoadOp::create(b, blocks,
                               ValueRange{kb.mul(maxBlocks, kb.idx(2))}));
    auto toIndex = [](KernelBuilder &k, Value v) {
      return arith::IndexCastOp::create(k.builder(), k.builder().getIndexType(),
                                        v)
          .getResult();
    };
    // A block's expert, first row and row count.
    struct BlockInfo {
      Value e, row0, rows;
    };
    auto blockInfo = [&](KernelBuilder &k, Value Blk, Value Off, Value blk) {
      Value e = toIndex(k, k.mload(Blk, {k.mul(blk, k.idx(2))}));
      Value row0 =
          toIndex(k, k.mload(Blk, {k.add(k.mul(blk, k.idx(2)), k.idx(1))}));
      Value end = toIndex(k, k.mload(Off, {k.add(e, k.idx(1))}));
      return BlockInfo{e, row0, k.mins(k.idx(RowBlock), k.sub(end, row0))};
    };

    // Up (and gate) projections: H[rows, F] = act(X Wg) (X Wu).
    Value hBuf = memref::AllocOp::create(
        b, MemRefType::get({dyn, dyn}, hiddenType), ValueRange{choices, F},
        b.getI64IntegerAttr(64));
    Value fBlocks = kb.divs(kb.add(F, kb.idx(ColBlock - 1)), kb.idx(ColBlock));
    ExpertWeight wUp = ExpertWeight::of(b, upBlocking, op.getWUp());
    SmallVector<Value> upArgs{xIn, wUp.buffer, hBuf, tokenOf, blocks, offsets};
    std::optional<ExpertWeight> wGate;
    if (gated) {
      wGate = ExpertWeight::of(b, upBlocking, op.getWGate());
      upArgs.push_back(wGate->buffer);
    }
    emitParallelKernel(
        b, "moe_up", kb.mul(numBlocks, fBlocks), upArgs,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value X = in[0], Wu = in[1], Hb = in[2], Tok = in[3];
          Value nF = wUp.columns(k, Wu), nD = wUp.reduction(k, Wu);
          Value nfb = k.divs(k.add(nF, k.idx(ColBlock - 1)), k.idx(ColBlock));
          Value fb = k.rems(task, nfb), blk = k.divs(task, nfb);
          BlockInfo bl = blockInfo(k, in[4], in[5], blk);
          Value f0 = k.mul(fb, k.idx(ColBlock));
          Value cols = k.mins(k.idx(ColBlock), k.sub(nF, f0));
          MatrixRef xRows{X, [&, bl](Value r, Value d) {
                            Value t =
                                toIndex(k, k.mload(Tok, {k.add(bl.row0, r)}));
                            return SmallVector<Value>{t, d};
                          }};
          // The weights' blocks are packed into panels (Gemm.h): a task's
          // rows of one expert all read them; the task's gathered tokens
          // are packed into rows.
          auto project = [&](const ExpertWeight &weight, Value W, Value out) {
            emitGemm(k, upBlocking, {bl.rows, cols, nD}, xRows, MatrixRef(),
                     rowMajor(out), GemmMode::Overwrite,
                     packEachBlockOfA(k, upBlocking, xRows, bl.rows, RowBlock),
                     weight.panels(k, upBlocking, W, bl.e, f0, cols, ColBlock));
          };
          Value up = k.stackBuffer({RowBlock, ColBlock});
          project(wUp, Wu, up);
          Value gate;
          if (gated) {
            gate = k.stackBuffer({RowBlock, ColBlock});
            project(*wGate, in[6], gate);
          }
          k.forEach(k.idx(0), bl.rows, k.idx(1), [&](Value r) {
            for (int64_t c0 = 0; c0 < ColBlock; c0 += lanes) {
              Value mask = k.vmask(k.sub(cols, k.idx(c0)), lanes);
              SmallVector<Value> at{r, k.idx(c0)};
              Value u = k.vloadMasked(up, at, lanes, mask);
              Value hv =
                  gate ? k.fmul(k.activation(
                                    act, k.vloadMasked(gate, at, lanes, mask)),
                                u)
                       : k.activation(act, u);
              k.vstoreMasked(hv, Hb, {k.add(bl.row0, r), k.add(f0, k.idx(c0))},
                             mask);
            }
          });
        });

    // Down projection: Y[rows, D] = H W_down.
    Value yRows = memref::AllocOp::create(b, MemRefType::get({dyn, dyn}, f32),
                                          ValueRange{choices, D},
                                          b.getI64IntegerAttr(64));
    Value dBlocks = kb.divs(kb.add(D, kb.idx(ColBlock - 1)), kb.idx(ColBlock));
    ExpertWeight wDown = ExpertWeight::of(b, downBlocking, op.getWDown());
    emitParallelKernel(
        b, "moe_down", kb.mul(numBlocks, dBlocks),
        {hBuf, wDown.buffer, yRows, blocks, offsets},
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value Hb = in[0], Wd = in[1], Yr = in[2];
          Value nD = wDown.columns(k, Wd), nF = wDown.reduction(k, Wd);
          Value ndb = k.divs(k.add(nD, k.idx(ColBlock - 1)), k.idx(ColBlock));
          Value db = k.rems(task, ndb), blk = k.divs(task, ndb);
          BlockInfo bl = blockInfo(k, in[3], in[4], blk);
          Value d0 = k.mul(db, k.idx(ColBlock));
          Value cols = k.mins(k.idx(ColBlock), k.sub(nD, d0));
          MatrixRef hRows{Hb, [&, bl](Value r, Value f) {
                            return SmallVector<Value>{k.add(bl.row0, r), f};
                          }};
          MatrixRef out{
              Yr, [&, bl](Value r, Value d) {
                return SmallVector<Value>{k.add(bl.row0, r), k.add(d0, d)};
              }};
          // bf16 pairs read A packed (each block padded to whole pairs);
          // f32 rows are read where they are.
          PrepareA prepareA =
              downBlocking.pairs()
                  ? packEachBlockOfA(k, downBlocking, hRows, bl.rows, RowBlock)
                  : nullptr;
          emitGemm(k, downBlocking, {bl.rows, cols, nF}, hRows, MatrixRef(),
                   out, GemmMode::Overwrite, prepareA,
                   wDown.panels(k, downBlocking, Wd, bl.e, d0, cols, ColBlock));
        });

    // Combine: y[t] = sum_j w[t, j] Y[row(t, j)].
    auto yType = cast<RankedTensorType>(op.getY().getType());
    Value yBuf = allocBuffer(b, yType, {T, D});
    const int64_t tokenBlock = 16;
    emitParallelKernel(
        b, "moe_combine",
        kb.divs(kb.add(T, kb.idx(tokenBlock - 1)), kb.idx(tokenBlock)),
        {wIn, rowOf, yRows, yBuf},
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value W = in[0], Row = in[1], Yr = in[2], Y = in[3];
          Value nT = k.mdim(W, 0), nK = k.mdim(W, 1), nD = k.mdim(Y, 1);
          Value t0 = k.mul(task, k.idx(tokenBlock));
          Value tEnd = k.mins(nT, k.add(t0, k.idx(tokenBlock)));
          k.forEach(t0, tEnd, k.idx(1), [&](Value t) {
            k.forEach(k.idx(0), nD, k.idx(lanes), [&](Value d) {
              Value mask = k.vmask(k.sub(nD, d), lanes);
              Value acc = k.loop(
                  nK, {k.vconst(0.0, lanes)}, [&](Value j, ValueRange c) {
                    Value row = k.mload(Row, {k.add(k.mul(t, nK), j)});
                    Value ok = k.cmp(CmpIPredicate::sge, row, k.i64(0));
                    return k.ifElse(
                        ok, {c[0].getType()},
                        [&] {
                          Value yv = k.vloadMasked(Yr, {toIndex(k, row), d},
                                                   lanes, mask);
                          Value wv = k.splat(k.mload(W, {t, j}), lanes);
                          return SmallVector<Value>{k.vfma(wv, yv, c[0])};
                        },
                        [&] { return SmallVector<Value>{c[0]}; });
                  })[0];
              k.vstoreMasked(acc, Y, {t, d}, mask);
            });
          });
        });

    rewriter.replaceOp(op,
                       {asTensor(b, yBuf, yType), asTensor(b, load, loadType)});
    return success();
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuMoEPatterns(RewritePatternSet &patterns,
                                  const CpuTarget &target) {
  patterns.add<CpuMoeFfn>(patterns.getContext(), target);
}
