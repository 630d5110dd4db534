//===- GpuMoE.cpp - routed experts as grouped GEMMs on the GPU ------------===//
//
// moe_ffn in four kernels:
//  1. dispatch (one block): a thread per expert walks the choices in token
//     order, accepting while the expert has capacity (the SPEC's order) and
//     counting `load`; one thread turns the counts into expert offsets; the
//     experts' threads then write their accepted choices, in order, into one
//     expert-sorted row list;
//  2. up projection, a block per (tile of 32 sorted rows, tile of 32 hidden
//     columns): the rows' token vectors are staged in shared memory tile by
//     tile of D, each thread accumulates act(x W_gate[e]) * (x W_up[e]) for
//     its (row, column) with its row's expert e (rows of one tile may span
//     experts: each row reads its own expert's weights);
//  3. down projection, the same over the hidden rows, times the choice's
//     weight, into a per-choice contribution;
//  4. combine: y[t] = sum over accepted choices j (in rank order) of their
//     contributions.
// Every sum is f32; operands may be bf16 / f16. When tokens and weights are
// all bf16 on sm_80+, the projections run on tensor cores
// instead (GpuGemm.h): dispatch pads each expert's rows to a multiple of 64,
// so a block's 64 x 64 tile is one expert's, and the down projection reads
// the hidden activations rounded to the weights' type (as grouped-GEMM MoE
// implementations keep them).
//
//===----------------------------------------------------------------------===//

#include "Common/Kernels.h"
#include "GPU/GpuGemm.h"
#include "GPU/GpuPatterns.h"
#include "Reference/ReferencePatterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace seqc;

namespace {

using arith::CmpIPredicate;

/// Sorted rows, output columns and reduction channels per tile.
constexpr int64_t RT = 32, CT = 32, DT = 32;

static Value lessThan(KernelBuilder &k, Value a, Value c) {
  return k.cmp(CmpIPredicate::slt, a, c);
}
static Value toI32(KernelBuilder &k, Value v) {
  return arith::IndexCastOp::create(k.builder(), k.builder().getI32Type(), v)
      .getResult();
}
/// The offset of (row, col) in a row-major tile of `ld` columns.
static Value tileOffset(KernelBuilder &k, Value row, int64_t ld, Value col) {
  return k.add(k.mul(row, k.idx(ld)), col);
}

/// The layer's buffers: its operands (the gate weight null when ungated),
/// its results, and the dispatch's: per choice (t * k + j) accepted (1/0)
/// and rank within its expert; the expert offsets (E + 1) and the
/// expert-sorted list of choices; the hidden activations per sorted row and
/// each choice's contribution to y.
struct MoeBuffers {
  Value x, weights, indices, up, down, gate;
  Value y, load;
  Value accepted, rank, offsets, rows, hidden, contributions;
};

/// A value of a grouped GEMM's row operand: (kernel arguments, sorted row,
/// its choice, reduction channel).
using RowValue =
    std::function<Value(KernelBuilder &, ValueRange, Value, Value, Value)>;
/// Finishes one output: (kernel arguments, sorted row, its choice, output
/// column, the sums of each weight).
using Finish = std::function<void(KernelBuilder &, ValueRange, Value, Value,
                                  Value, ArrayRef<Value>)>;

/// What a block of a grouped GEMM knows: its tile's first sorted row and
/// column, and the sizes.
struct GroupTile {
  Value idx, rows, nIn, nOut, nK, nRows, r0, c0;

  /// The expert of a choice.
  Value expertOf(KernelBuilder &k, Value choice) const {
    return k.i32ToIndex(k.mload(idx, {k.divs(choice, nK), k.rems(choice, nK)}));
  }
};

using TileBody =
    std::function<void(GpuBlock &, ValueRange, ValueRange, const GroupTile &)>;

/// moe_ffn's four kernels (see the file comment).
class MoeKernels {
public:
  MoeKernels(ImplicitLocOpBuilder &b, KernelBuilder &kb,
             const GpuTarget &target, const MoeBuffers &io, Type mmaType,
             Value rowsLen)
      : b(b), kb(kb), target(target), io(io), mmaType(mmaType),
        pad(mmaType ? MmaTileGemm::tileM : 1), rowsLen(rowsLen) {}

  /// 1. One block: a thread per expert accepts its choices in token order
  /// and counts its load; one thread makes the experts' offsets; then every
  /// accepted choice takes its place in the sorted rows.
  void emitDispatch(Value capacity) {
    emitGpuKernel(b, target, "moe_dispatch", kb.idx(1),
                  {io.indices, io.accepted, io.rank, io.offsets, io.rows,
                   io.load, capacity},
                  {}, [&](GpuBlock &blk, ValueRange in, ValueRange) {
                    MoeBuffers my = io;
                    my.indices = in[0];
                    my.accepted = in[1];
                    my.rank = in[2];
                    my.offsets = in[3];
                    my.rows = in[4];
                    my.load = in[5];
                    dispatchBody(blk, my, in[6]);
                  });
  }

  /// 2. Up projection: hidden[sorted row, f] = act(x W_gate) (x W_up).
  void emitUp(seq::Activation act, Value F, Value D) {
    bool gated = static_cast<bool>(io.gate);
    SmallVector<Value> args{io.x, io.up, io.hidden};
    SmallVector<int> weightArgs{1};
    if (gated) {
      args.push_back(io.gate);
      weightArgs.push_back(3);
    }
    size_t indicesArg = args.size(); // where groupedKernel puts the indices
    groupedGemm(
        "moe_up", F, args, weightArgs, D,
        [indicesArg](KernelBuilder &k, ValueRange in, Value, Value choice,
                     Value d) {
          Value x = in[0], nK = k.mdim(in[indicesArg], 1);
          return k.mload(x, {k.divs(choice, nK), d});
        },
        [gated, act](KernelBuilder &k, ValueRange in, Value r, Value, Value f,
                     ArrayRef<Value> sums) {
          Value hidden = in[2];
          Value h = gated ? k.fmul(k.activation(act, sums[1]), sums[0])
                          : k.activation(act, sums[0]);
          k.mstore(h, hidden, {r, f});
        });
  }

  /// 3. Down projection times the choice's weight: contributions[choice, d].
  void emitDown(Value D, Value F) {
    const size_t indicesArg = 4;
    groupedGemm(
        "moe_down", D, {io.hidden, io.down, io.contributions, io.weights}, {1},
        F,
        [](KernelBuilder &k, ValueRange in, Value r, Value, Value f) {
          Value hidden = in[0];
          return k.mload(hidden, {r, f});
        },
        [indicesArg](KernelBuilder &k, ValueRange in, Value, Value choice,
                     Value d, ArrayRef<Value> sums) {
          Value contributions = in[2], weights = in[3];
          Value nK = k.mdim(in[indicesArg], 1);
          Value w = k.mload(weights, {k.divs(choice, nK), k.rems(choice, nK)});
          k.mstore(k.fmul(w, sums[0]), contributions, {choice, d});
        });
  }

  /// 4. Combine, in rank order as the definition sums.
  void emitCombine(Value T, Value D) {
    emitItemKernel(
        b, target, "moe_combine", kb, kb.mul(T, D),
        {io.contributions, io.accepted, io.y},
        [&](KernelBuilder &k, Value item, ValueRange in) {
          Value contributions = in[0], accepted = in[1], y = in[2];
          Value nD = k.mdim(y, 1),
                nK = k.divs(k.mdim(accepted, 0), k.mdim(y, 0));
          Value t = k.divs(item, nD), d = k.rems(item, nD);
          auto sum = k.loop(nK, {k.f32(0.0)}, [&](Value j, ValueRange it) {
            Value c = k.add(k.mul(t, nK), j);
            Value ok = k.cmp(CmpIPredicate::ne, k.mload(accepted, {c}),
                             toI32(k, k.idx(0)));
            Value v = k.loadIf(ok, contributions, {c, d}, k.f32(0.0));
            return SmallVector<Value>{k.select(ok, k.fadd(it[0], v), it[0])};
          });
          k.mstore(sum[0], y, {t, d});
        });
  }

private:
  void dispatchBody(GpuBlock &blk, const MoeBuffers &my, Value capacity) {
    KernelBuilder &k = blk.kb;
    Value nT = k.mdim(my.indices, 0), nK = k.mdim(my.indices, 1);
    Value nE = k.sub(k.mdim(my.offsets, 0), k.idx(1));
    Value nTK = k.mul(nT, nK);
    auto expertOfChoice = [&](Value c) {
      return k.i32ToIndex(k.mload(my.indices, {k.divs(c, nK), k.rems(c, nK)}));
    };
    if (pad > 1)
      blk.phase(k.mdim(my.rows, 0),
                [&](Value r) { k.mstore(toI32(k, k.idx(-1)), my.rows, {r}); });
    // Each expert's choices in token order, accepted while it has capacity.
    blk.phase(nE, [&](Value e) {
      auto used = k.loop(nTK, {k.idx(0)}, [&](Value c, ValueRange it) {
        Value mine = k.cmp(CmpIPredicate::eq, expertOfChoice(c), e);
        Value take = k.andi(mine, lessThan(k, it[0], capacity));
        k.ifThen(mine, [&] {
          k.mstore(arith::ExtUIOp::create(k.builder(), k.builder().getI32Type(),
                                          take)
                       .getResult(),
                   my.accepted, {c});
          k.mstore(toI32(k, it[0]), my.rank, {c});
        });
        return SmallVector<Value>{
            k.select(take, k.add(it[0], k.idx(1)), it[0])};
      });
      k.mstore(k.indexToI64(used[0]), my.load, {e});
    });
    // The experts' offsets, each expert's rows padded to `pad`.
    blk.phase(k.idx(1), [&](Value) {
      k.mstore(toI32(k, k.idx(0)), my.offsets, {k.idx(0)});
      k.loop(nE, {k.idx(0)}, [&](Value e, ValueRange it) {
        Value count = arith::IndexCastOp::create(
            k.builder(), k.builder().getIndexType(), k.mload(my.load, {e}));
        Value padded =
            k.mul(k.divs(k.add(count, k.idx(pad - 1)), k.idx(pad)), k.idx(pad));
        Value n = k.add(it[0], padded);
        k.mstore(toI32(k, n), my.offsets, {k.add(e, k.idx(1))});
        return SmallVector<Value>{n};
      });
    });
    blk.phase(
        nTK,
        [&](Value c) {
          k.ifThen(k.cmp(CmpIPredicate::ne, k.mload(my.accepted, {c}),
                         toI32(k, k.idx(0))),
                   [&] {
                     Value pos = k.add(
                         k.i32ToIndex(k.mload(my.offsets, {expertOfChoice(c)})),
                         k.i32ToIndex(k.mload(my.rank, {c})));
                     k.mstore(toI32(k, c), my.rows, {pos});
                   });
        },
        /*barrier=*/false);
  }

  /// A grouped GEMM over the sorted rows: out[r, col] for r < offsets[E],
  /// reduction over `nIn` channels of `rowValue(r, chan)` times
  /// `weight(e, chan, col)` for each weight (argument numbers
  /// `weightArgs`), finished by `finish`.
  void groupedGemm(StringRef name, Value nOut, SmallVector<Value> args,
                   ArrayRef<int> weightArgs, Value nIn,
                   const RowValue &rowValue, const Finish &finish) {
    if (mmaType)
      return mmaGroupedGemm(name, nOut, args, weightArgs, nIn, rowValue,
                            finish);
    SmallVector<SmallVector<int64_t>> shared{{RT * DT}};
    for (size_t i = 0; i < weightArgs.size(); ++i)
      shared.push_back({RT * CT});
    groupedKernel(
        name, nOut, args, nIn, RT, CT, shared,
        [&](GpuBlock &blk, ValueRange in, ValueRange sh, const GroupTile &t) {
          tiledTile(blk, in, sh, t, weightArgs, rowValue, finish);
        });
  }

  /// A kernel of (rowTile x colTile) tiles over (sorted rows, output
  /// columns), the indices, offsets, rows, nIn and nOut appended to `args`;
  /// blocks past the sorted rows have nothing to do (the grid is sized for
  /// every choice accepted and every expert padded).
  void groupedKernel(StringRef name, Value nOut, SmallVector<Value> args,
                     Value nIn, int64_t rowTile, int64_t colTile,
                     ArrayRef<SmallVector<int64_t>> shared,
                     const TileBody &body) {
    size_t base = args.size();
    args.append({io.indices, io.offsets, io.rows, nIn, nOut});
    Value rowTiles =
        kb.divs(kb.add(rowsLen, kb.idx(rowTile - 1)), kb.idx(rowTile));
    Value colTiles =
        kb.divs(kb.add(nOut, kb.idx(colTile - 1)), kb.idx(colTile));
    emitGpuKernel(
        b, target, name, kb.mul(rowTiles, colTiles), args, shared,
        [&](GpuBlock &blk, ValueRange in, ValueRange sh) {
          KernelBuilder &k = blk.kb;
          GroupTile t;
          t.idx = in[base];
          Value offsets = in[base + 1];
          t.rows = in[base + 2];
          t.nIn = in[base + 3];
          t.nOut = in[base + 4];
          t.nK = k.mdim(t.idx, 1);
          Value nE = k.sub(k.mdim(offsets, 0), k.idx(1));
          t.nRows = k.i32ToIndex(k.mload(offsets, {nE}));
          Value nCT = k.divs(k.add(t.nOut, k.idx(colTile - 1)), k.idx(colTile));
          t.r0 = k.mul(k.divs(blk.blockId, nCT), k.idx(rowTile));
          t.c0 = k.mul(k.rems(blk.blockId, nCT), k.idx(colTile));
          k.ifThen(lessThan(k, t.r0, t.nRows), [&] { body(blk, in, sh, t); });
        });
  }

  /// On tensor cores (GpuGemm.h): a block per 64 x 64 tile, all of its rows
  /// one expert's (a tile's first row is never padding).
  void mmaGroupedGemm(StringRef name, Value nOut, SmallVector<Value> args,
                      ArrayRef<int> weightArgs, Value nIn,
                      const RowValue &rowValue, const Finish &finish) {
    groupedKernel(
        (name + "_mma").str(), nOut, args, nIn, MmaTileGemm::tileM,
        MmaTileGemm::tileN, MmaTileGemm::sharedShapes(weightArgs.size()),
        [&](GpuBlock &blk, ValueRange in, ValueRange sh, const GroupTile &t) {
          mmaTile(blk, in, sh, t, weightArgs, rowValue, finish);
        });
  }

  void mmaTile(GpuBlock &blk, ValueRange in, ValueRange sh, const GroupTile &t,
               ArrayRef<int> weightArgs, const RowValue &rowValue,
               const Finish &finish) const {
    KernelBuilder &k = blk.kb;
    Value e = t.expertOf(k, k.i32ToIndex(k.mload(t.rows, {t.r0})));
    // Row i of the tile: its choice, or -1 (padding, past the end).
    auto choiceOf = [&](Value i) {
      Value r = k.add(t.r0, i);
      return k.ifElse(
          lessThan(k, r, t.nRows), {k.builder().getIndexType()},
          [&]() -> SmallVector<Value> {
            return {k.i32ToIndex(k.mload(t.rows, {r}))};
          },
          [&]() -> SmallVector<Value> { return {k.idx(-1)}; })[0];
    };
    auto isRow = [&](Value choice) {
      return k.cmp(CmpIPredicate::sge, choice, k.idx(0));
    };
    MmaTileGemm gemm;
    gemm.multiplicand = mmaType;
    gemm.depth = t.nIn;
    gemm.a = [&](Value i, Value chan) {
      Value choice = choiceOf(i);
      return k.ifElse(
          k.andi(isRow(choice), lessThan(k, chan, t.nIn)), {k.f32Type()},
          [&]() -> SmallVector<Value> {
            return {rowValue(k, in, k.add(t.r0, i), choice, chan)};
          },
          [&]() -> SmallVector<Value> { return {k.f32(0.0)}; })[0];
    };
    for (int w : weightArgs)
      gemm.b.push_back([&, w](Value chan, Value j) {
        Value col = k.add(t.c0, j);
        return k.loadIf(
            k.andi(lessThan(k, chan, t.nIn), lessThan(k, col, t.nOut)), in[w],
            {e, chan, col}, k.f32(0.0));
      });
    gemm.finish = [&](Value i, Value j, ArrayRef<Value> sums) {
      Value choice = choiceOf(i), col = k.add(t.c0, j);
      k.ifThen(k.andi(isRow(choice), lessThan(k, col, t.nOut)),
               [&] { finish(k, in, k.add(t.r0, i), choice, col, sums); });
    };
    gemm.emit(blk, sh);
  }

  /// Without tensor cores: the rows' values staged in shared memory DT
  /// channels at a time, each thread accumulating its (row, column) of
  /// every weight in shared memory.
  void tiledTile(GpuBlock &blk, ValueRange in, ValueRange sh,
                 const GroupTile &t, ArrayRef<int> weightArgs,
                 const RowValue &rowValue, const Finish &finish) const {
    KernelBuilder &k = blk.kb;
    Value r0 = t.r0, c0 = t.c0, nI = t.nIn, nO = t.nOut, nRows = t.nRows;
    auto choiceOf = [&](Value rr) {
      return k.i32ToIndex(k.mload(t.rows, {k.add(r0, rr)}));
    };
    k.forEach(k.idx(0), nI, k.idx(DT), [&](Value d0) {
      blk.phase2(k.idx(RT), k.idx(DT), [&](Value rr, Value dd) {
        Value ok = k.andi(lessThan(k, k.add(r0, rr), nRows),
                          lessThan(k, k.add(d0, dd), nI));
        Value v = k.ifElse(
            ok, {k.f32Type()},
            [&]() -> SmallVector<Value> {
              return {
                  rowValue(k, in, k.add(r0, rr), choiceOf(rr), k.add(d0, dd))};
            },
            [&]() -> SmallVector<Value> { return {k.f32(0.0)}; })[0];
        k.mstore(v, sh[0], {tileOffset(k, rr, DT, dd)});
      });
      Value first = k.cmp(CmpIPredicate::eq, d0, k.idx(0));
      blk.phase2(k.idx(RT), k.idx(CT), [&](Value rr, Value cc) {
        Value col = k.add(c0, cc);
        Value ok =
            k.andi(lessThan(k, k.add(r0, rr), nRows), lessThan(k, col, nO));
        k.ifThen(ok, [&] {
          Value e = t.expertOf(k, choiceOf(rr));
          Value n = k.mins(k.idx(DT), k.sub(nI, d0));
          for (size_t w = 0; w < weightArgs.size(); ++w) {
            Value wm = in[weightArgs[w]];
            auto dot = k.loop(n, {k.f32(0.0)}, [&](Value dd, ValueRange it) {
              Value xv = k.mload(sh[0], {tileOffset(k, rr, DT, dd)});
              Value wv = k.mload(wm, {e, k.add(d0, dd), col});
              return SmallVector<Value>{k.fadd(it[0], k.fmul(xv, wv))};
            });
            Value slot = tileOffset(k, rr, CT, cc);
            Value prev =
                k.select(first, k.f32(0.0), k.mload(sh[1 + w], {slot}));
            k.mstore(k.fadd(prev, dot[0]), sh[1 + w], {slot});
          }
        });
      });
    });
    blk.phase2(
        k.idx(RT), k.idx(CT),
        [&](Value rr, Value cc) {
          Value r = k.add(r0, rr), col = k.add(c0, cc);
          k.ifThen(k.andi(lessThan(k, r, nRows), lessThan(k, col, nO)), [&] {
            SmallVector<Value> sums;
            for (size_t w = 0; w < weightArgs.size(); ++w)
              sums.push_back(k.mload(sh[1 + w], {tileOffset(k, rr, CT, cc)}));
            finish(k, in, r, choiceOf(rr), col, sums);
          });
        },
        /*barrier=*/false);
  }

  ImplicitLocOpBuilder &b;
  KernelBuilder &kb;
  const GpuTarget &target;
  const MoeBuffers &io;
  Type mmaType;
  int64_t pad;
  Value rowsLen;
};

struct GpuMoeFfn : OpRewritePattern<seq::MoeFfnOp> {
  GpuMoeFfn(MLIRContext *ctx, const GpuTarget &target)
      : OpRewritePattern(ctx, /*benefit=*/2), target(target) {}

  LogicalResult matchAndRewrite(seq::MoeFfnOp op,
                                PatternRewriter &rewriter) const override {
    auto isFloat = [](Value v) {
      return isa<FloatType>(cast<ShapedType>(v.getType()).getElementType());
    };
    if (!isFloat(op.getX()) || !isFloat(op.getWeights()) ||
        !isFloat(op.getWUp()) || !isFloat(op.getWDown()) ||
        (op.getWGate() && !isFloat(op.getWGate())) || !isFloat(op.getY()))
      return rewriter.notifyMatchFailure(
          op, "needs float tokens, weights and results");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    DimSizes dims = DimSizes::checkAndCollect(kb, op);
    Value T = dims["T"], D = dims["D"], K = dims["k"], E = dims["E"],
          F = dims["F"];
    emitExpertIndexChecks(kb, op.getIndices(), T, K, E);
    Value cap =
        expertCapacity(kb, op.getCapacityFactor().convertToDouble(), T, K, E);

    Type i32 = b.getI32Type(), f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    Value TK = kb.mul(T, K);
    // Tensor cores need one expert's weights per tile of rows: each expert's
    // rows then start at a multiple of the tile height (padding rows hold
    // choice -1), as grouped GEMMs do.
    // The down projection rounds the f32 hidden activations: bf16 only.
    Type mmaType = target.tensorCoreType(
        {op.getX(), op.getWUp(), op.getWDown(), op.getWGate()},
        /*allowF16=*/false);
    int64_t pad = mmaType ? MmaTileGemm::tileM : 1;
    Value rowsLen = kb.add(TK, kb.mul(E, kb.idx(pad - 1)));
    auto yType = cast<RankedTensorType>(op.getY().getType());
    auto loadType = cast<RankedTensorType>(op.getLoad().getType());
    auto i32Vector = RankedTensorType::get({dyn}, i32);
    auto f32Matrix = RankedTensorType::get({dyn, dyn}, f32);
    MoeBuffers io;
    io.y = allocBuffer(b, yType, dims.of("y"));
    io.load = allocBuffer(b, loadType, {E});
    io.accepted = allocBuffer(b, i32Vector, {TK});
    io.rank = allocBuffer(b, i32Vector, {TK});
    io.offsets = allocBuffer(b, i32Vector, {kb.add(E, kb.idx(1))});
    io.rows = allocBuffer(b, i32Vector, {rowsLen});
    io.hidden = allocBuffer(b, f32Matrix, {rowsLen, F});
    io.contributions = allocBuffer(b, f32Matrix, {TK, D});
    io.x = readBuffer(b, op.getX());
    io.weights = readBuffer(b, op.getWeights());
    io.indices = readBuffer(b, op.getIndices());
    io.up = readBuffer(b, op.getWUp());
    io.down = readBuffer(b, op.getWDown());
    if (op.getWGate())
      io.gate = readBuffer(b, op.getWGate());

    MoeKernels kernels(b, kb, target, io, mmaType, rowsLen);
    kernels.emitDispatch(cap);
    kernels.emitUp(op.getActivation(), F, D);
    kernels.emitDown(D, F);
    kernels.emitCombine(T, D);
    rewriter.replaceOp(
        op, {asTensor(b, io.y, yType), asTensor(b, io.load, loadType)});
    return success();
  }

  GpuTarget target;
};

} // namespace

void seqc::populateGpuMoEPatterns(RewritePatternSet &patterns,
                                  const GpuTarget &target) {
  patterns.add<GpuMoeFfn>(patterns.getContext(), target);
}
