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

static Value toIndex(KernelBuilder &k, Value v) {
  return arith::IndexCastOp::create(k.builder(), k.builder().getIndexType(), v)
      .getResult();
}

/// The layer's buffers: its operands and `load`, and the plan's: per
/// choice (t, j) its row in the expert-sorted rows (-1 if dropped), per row
/// its token, the experts' first rows (E + 1), and the list of row blocks
/// ((expert, first row) pairs, then their count).
struct MoeBuffers {
  Value x, weights, indices, load;
  Value rowOf, tokenOf, offsets, blocks;
};

/// A row block's expert, first row and row count.
struct BlockInfo {
  Value e, row0, rows;
};

/// seq.moe_ffn's four kernels on the CPU (see the file comment).
class MoeKernels {
public:
  /// Rows of an expert's slice per task, and columns of F / D per task.
  static constexpr int64_t RowBlock = 64, ColBlock = 256;

  MoeKernels(ImplicitLocOpBuilder &b, KernelBuilder &kb, const MoeBuffers &io,
             const GemmBlocking &upBlocking, const GemmBlocking &downBlocking,
             int64_t lanes)
      : b(b), kb(kb), io(io), upBlocking(upBlocking),
        downBlocking(downBlocking), lanes(lanes) {}

  /// Plan (one task: capacity is decided in token order): every accepted
  /// choice gets a row in its expert's contiguous slice, and the slices are
  /// cut in blocks of RowBlock rows.
  void emitPlan(Value capacity) {
    emitParallelKernel(b, "moe_plan", kb.idx(1),
                       {io.indices, io.load, io.rowOf, io.tokenOf, io.offsets,
                        io.blocks, capacity},
                       [&](KernelBuilder &k, Value, ValueRange in) {
                         MoeBuffers my = io;
                         my.indices = in[0];
                         my.load = in[1];
                         my.rowOf = in[2];
                         my.tokenOf = in[3];
                         my.offsets = in[4];
                         my.blocks = in[5];
                         acceptInTokenOrder(k, my, in[6]);
                         listBlocks(k, my);
                         placeRows(k, my);
                       });
  }

  /// Up (and gate) projections: hidden[rows, F] = act(X Wg) (X Wu), a task
  /// per (row block, ColBlock columns of F).
  void emitUp(Value hidden, Value numBlocks, Value F, const ExpertWeight &wUp,
              const std::optional<ExpertWeight> &wGate, seq::Activation act) {
    Value fBlocks = kb.divs(kb.add(F, kb.idx(ColBlock - 1)), kb.idx(ColBlock));
    SmallVector<Value> args{io.x,       wUp.buffer, hidden,
                            io.tokenOf, io.blocks,  io.offsets};
    if (wGate)
      args.push_back(wGate->buffer);
    emitParallelKernel(
        b, "moe_up", kb.mul(numBlocks, fBlocks), args,
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value x = in[0], up = in[1], hiddenOut = in[2], tokenOf = in[3],
                blocks = in[4], offsets = in[5];
          Value gate = wGate ? in[6] : Value();
          Value nF = wUp.columns(k, up), nD = wUp.reduction(k, up);
          Value nfb = k.divs(k.add(nF, k.idx(ColBlock - 1)), k.idx(ColBlock));
          Value fb = k.rems(task, nfb);
          BlockInfo bl = blockInfo(k, blocks, offsets, k.divs(task, nfb));
          Value f0 = k.mul(fb, k.idx(ColBlock));
          Value cols = k.mins(k.idx(ColBlock), k.sub(nF, f0));
          MatrixRef xRows{x, [&, bl](Value r, Value d) {
                            Value t = toIndex(
                                k, k.mload(tokenOf, {k.add(bl.row0, r)}));
                            return SmallVector<Value>{t, d};
                          }};
          // The weights' blocks are packed into panels (Gemm.h): a task's
          // rows of one expert all read them; the task's gathered tokens
          // are packed into rows.
          auto project = [&](const ExpertWeight &weight, Value W) {
            Value out = k.stackBuffer({RowBlock, ColBlock});
            emitGemm(k, upBlocking, {bl.rows, cols, nD}, xRows, MatrixRef(),
                     rowMajor(out), GemmMode::Overwrite,
                     packEachBlockOfA(k, upBlocking, xRows, bl.rows, RowBlock),
                     weight.panels(k, upBlocking, W, bl.e, f0, cols, ColBlock));
            return out;
          };
          Value upTile = project(wUp, up);
          Value gateTile = wGate ? project(*wGate, gate) : Value();
          activateInto(
              k, upTile, gateTile, act, bl, cols,
              [&](Value r, Value c) {
                return SmallVector<Value>{k.add(bl.row0, r), k.add(f0, c)};
              },
              hiddenOut);
        });
  }

  /// Down projection: yRows[rows, D] = hidden W_down, a task per (row
  /// block, ColBlock columns of D).
  void emitDown(Value hidden, Value yRows, Value numBlocks, Value D,
                const ExpertWeight &wDown) {
    Value dBlocks = kb.divs(kb.add(D, kb.idx(ColBlock - 1)), kb.idx(ColBlock));
    emitParallelKernel(
        b, "moe_down", kb.mul(numBlocks, dBlocks),
        {hidden, wDown.buffer, yRows, io.blocks, io.offsets},
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value hiddenIn = in[0], down = in[1], rowsOut = in[2], blocks = in[3],
                offsets = in[4];
          Value nD = wDown.columns(k, down), nF = wDown.reduction(k, down);
          Value ndb = k.divs(k.add(nD, k.idx(ColBlock - 1)), k.idx(ColBlock));
          Value db = k.rems(task, ndb);
          BlockInfo bl = blockInfo(k, blocks, offsets, k.divs(task, ndb));
          Value d0 = k.mul(db, k.idx(ColBlock));
          Value cols = k.mins(k.idx(ColBlock), k.sub(nD, d0));
          MatrixRef hRows{hiddenIn, [&, bl](Value r, Value f) {
                            return SmallVector<Value>{k.add(bl.row0, r), f};
                          }};
          MatrixRef out{
              rowsOut, [&, bl](Value r, Value d) {
                return SmallVector<Value>{k.add(bl.row0, r), k.add(d0, d)};
              }};
          // bf16 pairs read A packed (each block padded to whole pairs);
          // f32 rows are read where they are.
          PrepareA prepareA =
              downBlocking.pairs()
                  ? packEachBlockOfA(k, downBlocking, hRows, bl.rows, RowBlock)
                  : nullptr;
          emitGemm(
              k, downBlocking, {bl.rows, cols, nF}, hRows, MatrixRef(), out,
              GemmMode::Overwrite, prepareA,
              wDown.panels(k, downBlocking, down, bl.e, d0, cols, ColBlock));
        });
  }

  /// Combine: y[t] = sum_j w[t, j] yRows[row(t, j)], a task per 16 tokens,
  /// in choice order.
  void emitCombine(Value yRows, Value y, Value T) {
    const int64_t tokenBlock = 16;
    emitParallelKernel(
        b, "moe_combine",
        kb.divs(kb.add(T, kb.idx(tokenBlock - 1)), kb.idx(tokenBlock)),
        {io.weights, io.rowOf, yRows, y},
        [&](KernelBuilder &k, Value task, ValueRange in) {
          Value weights = in[0], rowOf = in[1], rowsIn = in[2], yOut = in[3];
          Value nT = k.mdim(weights, 0), nD = k.mdim(yOut, 1);
          Value t0 = k.mul(task, k.idx(tokenBlock));
          Value tEnd = k.mins(nT, k.add(t0, k.idx(tokenBlock)));
          k.forEach(t0, tEnd, k.idx(1), [&](Value t) {
            k.forEach(k.idx(0), nD, k.idx(lanes), [&](Value d) {
              Value mask = k.vmask(k.sub(nD, d), lanes);
              Value sum = tokenSum(k, weights, rowOf, rowsIn, t, d, mask);
              k.vstoreMasked(sum, yOut, {t, d}, mask);
            });
          });
        });
  }

private:
  /// Pass 1: each choice in token order is accepted while its expert has
  /// capacity, with its position within the expert; `load` counts them.
  static void acceptInTokenOrder(KernelBuilder &k, const MoeBuffers &my,
                                 Value capacity) {
    Value nT = k.mdim(my.indices, 0), nK = k.mdim(my.indices, 1),
          nE = k.mdim(my.load, 0);
    Value one64 = k.i64(1);
    k.forEach(k.idx(0), nE, k.idx(1),
              [&](Value e) { k.mstore(k.i64(0), my.load, {e}); });
    Value cap64 = k.indexToI64(capacity);
    k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
      k.forEach(k.idx(0), nK, k.idx(1), [&](Value j) {
        Value e = k.i32ToIndex(k.mload(my.indices, {t, j}));
        Value used = k.mload(my.load, {e});
        Value ok = k.cmp(CmpIPredicate::slt, used, cap64);
        Value slot = k.add(k.mul(t, nK), j);
        k.mstore(k.select(ok, used, k.i64(-1)), my.rowOf, {slot});
        k.mstore(
            k.select(ok, arith::AddIOp::create(k.builder(), used, one64), used),
            my.load, {e});
      });
    });
  }

  /// The exclusive scan of the loads into the experts' offsets, and the
  /// list of (expert, first row) blocks, its length after the last slot.
  static void listBlocks(KernelBuilder &k, const MoeBuffers &my) {
    Value nE = k.mdim(my.load, 0);
    SmallVector<Value> end =
        k.loop(nE, {k.i64(0), k.idx(0)}, [&](Value e, ValueRange c) {
          k.mstore(c[0], my.offsets, {e});
          Value n = k.mload(my.load, {e});
          Value start = toIndex(k, c[0]);
          Value count = k.loop(
              k.idx(0), toIndex(k, n), {c[1]}, [&](Value r, ValueRange cb) {
                // One block per RowBlock rows.
                Value first = k.cmp(CmpIPredicate::eq,
                                    k.rems(r, k.idx(RowBlock)), k.idx(0));
                return k.ifElse(
                    first, {cb[0].getType()},
                    [&] {
                      Value at = k.mul(cb[0], k.idx(2));
                      k.mstore(k.indexToI64(e), my.blocks, {at});
                      k.mstore(k.indexToI64(k.add(start, r)), my.blocks,
                               {k.add(at, k.idx(1))});
                      return SmallVector<Value>{k.add(cb[0], k.idx(1))};
                    },
                    [&] { return SmallVector<Value>{cb[0]}; });
              })[0];
          return SmallVector<Value>{arith::AddIOp::create(k.builder(), c[0], n),
                                    count};
        });
    k.mstore(end[0], my.offsets, {nE});
    // The number of blocks, stored after the list's last entry slot.
    k.mstore(k.indexToI64(end[1]), my.blocks,
             {k.sub(k.mdim(my.blocks, 0), k.idx(1))});
  }

  /// Pass 2: the rows of the accepted choices; row -> token.
  static void placeRows(KernelBuilder &k, const MoeBuffers &my) {
    Value nT = k.mdim(my.indices, 0), nK = k.mdim(my.indices, 1);
    k.forEach(k.idx(0), nT, k.idx(1), [&](Value t) {
      k.forEach(k.idx(0), nK, k.idx(1), [&](Value j) {
        Value slot = k.add(k.mul(t, nK), j);
        Value pos = k.mload(my.rowOf, {slot});
        k.ifThen(k.cmp(CmpIPredicate::sge, pos, k.i64(0)), [&] {
          Value e = k.i32ToIndex(k.mload(my.indices, {t, j}));
          Value row =
              arith::AddIOp::create(k.builder(), k.mload(my.offsets, {e}), pos);
          k.mstore(row, my.rowOf, {slot});
          k.mstore(k.indexToI64(t), my.tokenOf, {toIndex(k, row)});
        });
      });
    });
  }

  static BlockInfo blockInfo(KernelBuilder &k, Value blocks, Value offsets,
                             Value blk) {
    Value e = toIndex(k, k.mload(blocks, {k.mul(blk, k.idx(2))}));
    Value row0 =
        toIndex(k, k.mload(blocks, {k.add(k.mul(blk, k.idx(2)), k.idx(1))}));
    Value end = toIndex(k, k.mload(offsets, {k.add(e, k.idx(1))}));
    return BlockInfo{e, row0, k.mins(k.idx(RowBlock), k.sub(end, row0))};
  }

  /// act(gate) * up (act(up) without a gate) of a task's tiles into the
  /// hidden activations at `at(row, column)`.
  void activateInto(KernelBuilder &k, Value upTile, Value gateTile,
                    seq::Activation act, const BlockInfo &bl, Value cols,
                    const std::function<SmallVector<Value>(Value, Value)> &at,
                    Value hidden) const {
    k.forEach(k.idx(0), bl.rows, k.idx(1), [&](Value r) {
      for (int64_t c0 = 0; c0 < ColBlock; c0 += lanes) {
        Value mask = k.vmask(k.sub(cols, k.idx(c0)), lanes);
        SmallVector<Value> tileAt{r, k.idx(c0)};
        Value u = k.vloadMasked(upTile, tileAt, lanes, mask);
        Value h = gateTile
                      ? k.fmul(k.activation(act, k.vloadMasked(gateTile, tileAt,
                                                               lanes, mask)),
                               u)
                      : k.activation(act, u);
        k.vstoreMasked(h, hidden, at(r, k.idx(c0)), mask);
      }
    });
  }

  /// sum_j w[t, j] rows[row(t, j)][d, d + lanes) over token t's accepted
  /// choices, in choice order.
  Value tokenSum(KernelBuilder &k, Value weights, Value rowOf, Value rows,
                 Value t, Value d, Value mask) const {
    Value nK = k.mdim(weights, 1);
    return k.loop(nK, {k.vconst(0.0, lanes)}, [&](Value j, ValueRange c) {
      Value row = k.mload(rowOf, {k.add(k.mul(t, nK), j)});
      Value ok = k.cmp(CmpIPredicate::sge, row, k.i64(0));
      return k.ifElse(
          ok, {c[0].getType()},
          [&] {
            Value yv = k.vloadMasked(rows, {toIndex(k, row), d}, lanes, mask);
            Value wv = k.splat(k.mload(weights, {t, j}), lanes);
            return SmallVector<Value>{k.vfma(wv, yv, c[0])};
          },
          [&] { return SmallVector<Value>{c[0]}; });
    })[0];
  }

  ImplicitLocOpBuilder &b;
  KernelBuilder &kb;
  const MoeBuffers &io;
  const GemmBlocking &upBlocking, &downBlocking;
  int64_t lanes;
};

struct CpuMoeFfn : OpRewritePattern<seq::MoeFfnOp> {
  CpuMoeFfn(MLIRContext *ctx, const CpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

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

    Type i64 = b.getI64Type(), f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    auto alloc = [&](Type elt, ValueRange sizes) {
      SmallVector<int64_t> shape(sizes.size(), dyn);
      return memref::AllocOp::create(b, MemRefType::get(shape, elt), sizes,
                                     b.getI64IntegerAttr(64))
          .getResult();
    };
    Value choices = kb.mul(T, K);
    // Upper bound of the number of row blocks: every expert's last block
    // may be partial.
    Value maxBlocks = kb.add(kb.divs(choices, kb.idx(MoeKernels::RowBlock)),
                             kb.add(E, kb.idx(1)));
    auto loadType = cast<RankedTensorType>(op.getLoad().getType());
    MoeBuffers io;
    io.load = allocBuffer(b, loadType, {E});
    io.rowOf = alloc(i64, {choices});
    io.tokenOf = alloc(i64, {choices});
    io.offsets = alloc(i64, {kb.add(E, kb.idx(1))});
    io.blocks = alloc(i64, {kb.add(kb.mul(maxBlocks, kb.idx(2)), kb.idx(1))});
    io.x = readBuffer(b, op.getX());
    io.weights = readBuffer(b, op.getWeights());
    io.indices = readBuffer(b, op.getIndices());

    MoeKernels kernels(b, kb, io, upBlocking, downBlocking, target.vectorWidth);
    kernels.emitPlan(cap);
    Value numBlocks = toIndex(
        kb, memref::LoadOp::create(b, io.blocks,
                                   ValueRange{kb.mul(maxBlocks, kb.idx(2))}));
    Value hidden = alloc(hiddenType, {choices, F});
    ExpertWeight wUp = ExpertWeight::of(b, upBlocking, op.getWUp());
    std::optional<ExpertWeight> wGate;
    if (op.getWGate())
      wGate = ExpertWeight::of(b, upBlocking, op.getWGate());
    kernels.emitUp(hidden, numBlocks, F, wUp, wGate, op.getActivation());
    Value yRows = alloc(f32, {choices, D});
    kernels.emitDown(hidden, yRows, numBlocks, D,
                     ExpertWeight::of(b, downBlocking, op.getWDown()));
    auto yType = cast<RankedTensorType>(op.getY().getType());
    Value y = allocBuffer(b, yType, {T, D});
    kernels.emitCombine(yRows, y, T);
    rewriter.replaceOp(op,
                       {asTensor(b, y, yType), asTensor(b, io.load, loadType)});
    return success();
  }

  CpuTarget target;
};

} // namespace

void seqc::populateCpuMoEPatterns(RewritePatternSet &patterns,
                                  const CpuTarget &target) {
  patterns.add<CpuMoeFfn>(patterns.getContext(), target);
}
