//===- Gemm.cpp - register-blocked matrix products in CPU kernels ---------===//

#include "CPU/Gemm.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace seqc;
using arith::CmpIPredicate;

MatrixRef seqc::rowMajor(Value memref) {
  return MatrixRef{memref, [](Value r, Value c) {
                     return SmallVector<Value>{r, c};
                   }};
}

MatrixRef seqc::transposed(Value memref) {
  return MatrixRef{memref, [](Value r, Value c) {
                     return SmallVector<Value>{c, r};
                   }};
}

void seqc::packRows(KernelBuilder &kb, const CpuTarget &target,
                    const MatrixRef &src, Value rows, int64_t cols, Value dst,
                    const std::function<Value(Value, Value)> &transform) {
  packRows(kb, target, src, rows, cols, rowMajor(dst), transform);
}

void seqc::packRows(KernelBuilder &kb, const CpuTarget &target,
                    const MatrixRef &src, Value rows, int64_t cols,
                    const MatrixRef &dst,
                    const std::function<Value(Value, Value)> &transform) {
  const int64_t lanes = target.vectorWidth;
  kb.forEach(kb.idx(0), rows, kb.idx(1), [&](Value r) {
    for (int64_t c0 = 0; c0 < cols; c0 += lanes) {
      Value c = kb.idx(c0);
      bool whole = c0 + lanes <= cols;
      Value mask = whole ? Value() : kb.vmask(kb.idx(cols - c0), lanes);
      Value v = whole ? kb.vload(src.memref, src.at(r, c), lanes)
                      : kb.vloadMasked(src.memref, src.at(r, c), lanes, mask);
      if (transform)
        v = transform(v, r);
      if (whole)
        kb.vstore(v, dst.memref, dst.at(r, c));
      else
        kb.vstoreMasked(v, dst.memref, dst.at(r, c), mask);
    }
  });
}

/// The square block whose rows are `rows` (as many as each has lanes),
/// transposed in registers: log2(lanes) stages, each swapping the two
/// off-diagonal h x h blocks of every 2h x 2h block (h = lanes / 2, ..., 1),
/// two shuffles per pair of rows.
static SmallVector<Value> transposeSquare(KernelBuilder &kb,
                                          SmallVector<Value> rows) {
  const int64_t n = rows.size();
  assert(llvm::isPowerOf2_64(n) && "a transpose in registers halves blocks");
  for (int64_t h = n / 2; h >= 1; h /= 2) {
    // Lane l of the upper row keeps its own lane where l is in the left
    // block and takes the lower row's lane l - h in the right one; the
    // lower row takes the upper row's lane l + h, or keeps its own.
    SmallVector<int64_t> upper(n), lower(n);
    for (int64_t l = 0; l < n; ++l) {
      bool right = l & h;
      upper[l] = right ? n + l - h : l;
      lower[l] = right ? n + l : l + h;
    }
    for (int64_t i = 0; i < n; ++i) {
      if (i & h)
        continue;
      Value a = rows[i], c = rows[i + h];
      rows[i] = vector::ShuffleOp::create(kb.builder(), a, c, upper);
      rows[i + h] = vector::ShuffleOp::create(kb.builder(), a, c, lower);
    }
  }
  return rows;
}

void seqc::transposeInto(KernelBuilder &kb, const CpuTarget &target,
                         const MatrixRef &src, Value rows, int64_t cols,
                         const MatrixRef &dst) {
  const int64_t lanes = target.vectorWidth;
  auto loadRow = [&](Value r, int64_t c0) {
    int64_t n = std::min(lanes, cols - c0);
    SmallVector<Value> at = src.at(r, kb.idx(c0));
    return n == lanes ? kb.vload(src.memref, at, lanes)
                      : kb.vloadMasked(src.memref, at, lanes,
                                       kb.vmask(kb.idx(n), lanes));
  };
  // Whole blocks of `lanes` rows go through registers: a block's rows are
  // loaded, transposed by shuffles and stored as whole columns.
  Value wholeRows = kb.sub(rows, kb.rems(rows, kb.idx(lanes)));
  kb.forEach(kb.idx(0), wholeRows, kb.idx(lanes), [&](Value r0) {
    for (int64_t c0 = 0; c0 < cols; c0 += lanes) {
      SmallVector<Value> block;
      for (int64_t i = 0; i < lanes; ++i)
        block.push_back(loadRow(kb.add(r0, kb.idx(i)), c0));
      SmallVector<Value> columns = transposeSquare(kb, std::move(block));
      for (int64_t j = 0; j < std::min(lanes, cols - c0); ++j)
        kb.vstore(columns[j], dst.memref, dst.at(kb.idx(c0 + j), r0));
    }
  });
  // The rows past them one at a time, a lane per store (no scatters, which
  // are slow where they exist at all).
  kb.forEach(wholeRows, rows, kb.idx(1), [&](Value r) {
    for (int64_t c0 = 0; c0 < cols; c0 += lanes) {
      Value v = loadRow(r, c0);
      for (int64_t l = 0; l < std::min(lanes, cols - c0); ++l) {
        Value x = vector::ExtractOp::create(kb.builder(), v, l);
        kb.mstore(x, dst.memref, dst.at(kb.idx(c0 + l), r));
      }
    }
  });
}

void seqc::transposeInto(KernelBuilder &kb, const CpuTarget &target,
                         const MatrixRef &src, Value rows, int64_t cols,
                         Value dst) {
  transposeInto(kb, target, src, rows, cols, rowMajor(dst));
}

namespace {

/// `lanes` bf16 elements of `m` from `ivs` on, loaded as they are when `m`
/// holds bf16 (else widened and rounded); lanes past `active` (when given)
/// are zero.
Value loadBf16(KernelBuilder &kb, Value m, ValueRange ivs, int64_t lanes,
               Value active) {
  OpBuilder &b = kb.builder();
  Location loc = m.getLoc();
  auto type = VectorType::get({lanes}, b.getBF16Type());
  if (!cast<MemRefType>(m.getType()).getElementType().isBF16()) {
    Value v = active ? kb.vloadMasked(m, ivs, lanes, kb.vmask(active, lanes))
                     : kb.vload(m, ivs, lanes);
    return arith::TruncFOp::create(b, loc, type, v);
  }
  if (!active)
    return vector::LoadOp::create(b, loc, type, m, ivs);
  Value zero = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getZeroAttr(b.getBF16Type())));
  return vector::MaskedLoadOp::create(b, loc, type, m, ivs,
                                      kb.vmask(active, lanes), zero);
}

/// The pair of bf16 steps (k, k + 1) of A's row at `ivs` (the element of
/// step k) in every 32-bit lane: vdpbf16ps's broadcast operand.
Value broadcastPair(KernelBuilder &kb, Value m, ValueRange ivs, int64_t lanes) {
  OpBuilder &b = kb.builder();
  Location loc = m.getLoc();
  Value pair = vector::LoadOp::create(
      b, loc, VectorType::get({2}, b.getBF16Type()), m, ivs);
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), pair);
  Value words = vector::BroadcastOp::create(
      b, loc, VectorType::get({lanes}, b.getI32Type()),
      vector::ExtractOp::create(b, loc, word, 0));
  return vector::BitCastOp::create(
      b, loc, VectorType::get({2 * lanes}, b.getBF16Type()), words);
}

/// The micro-kernel: `rows` rows starting at i0, `vecs` vectors of columns
/// starting at j0, reduction range [k0, k1). C's tile starts from C itself
/// when `addToC` (an i1) is true, from zero otherwise.
struct MicroKernel {
  KernelBuilder &kb;
  const GemmBlocking &g;
  const MatrixRef &A, &B, &C;
  Value k0, k1, addToC;
  /// AMX: a 32 x 32 f32 stack buffer the finished tiles pass through.
  Value tileScratch;
  /// What C is scaled by where it is added to (f32; null: 1).
  Value scaleC = {};

  void emit(Value i0, Value j0, int64_t rows, int64_t vecs,
            ArrayRef<Value> masks) {
    // The tile accumulates from zero and C is added after the reduction:
    // C's lines, prefetched now, arrive while the loop runs instead of
    // stalling its first steps (a task's C is larger than L2).
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t v = 0; v < vecs; ++v)
        memref::PrefetchOp::create(kb.builder(), C.memref,
                                   C.at(row(i0, r), col(j0, v)),
                                   /*isWrite=*/true, /*localityHint=*/3,
                                   /*isDataCache=*/true);
    SmallVector<Value> sums = g.pairs() ? reducePairs(i0, j0, rows, vecs)
                                        : reduceF32(i0, j0, rows, vecs, masks);
    storeTile([&](bool accumulate) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < vecs; ++v)
          storeToC(sums[r * vecs + v], row(i0, r), j0, v, masks, accumulate);
    });
  }

  /// AMX: rows [i0, i0 + 32) x columns [j0, j0 + 32) of C as 2 x 2 tiles
  /// of 16 x 16 that accumulate in tile registers over the block's steps,
  /// then pass through the stack into C's first `validRows` rows (the rows
  /// past M were computed from whatever A's packed rows hold there).
  void emitTiles(Value i0, Value j0, Value validRows, ArrayRef<Value> masks) {
    SmallVector<Value> sums = reduceTiles(i0, j0);
    const int64_t n = GemmBlocking::AmxTileRows;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t v = 0; v < 2; ++v)
        amx::TileStoreOp::create(kb.builder(), C.memref.getLoc(), tileScratch,
                                 ValueRange{kb.idx(r * n), kb.idx(v * n)},
                                 sums[r * 2 + v]);
    storeTile([&](bool accumulate) {
      kb.forEach(kb.idx(0), validRows, kb.idx(1), [&](Value r) {
        for (int64_t v = 0; v < g.vecs; ++v) {
          Value sum = kb.vload(tileScratch, {r, kb.idx(v * g.lanes)}, g.lanes);
          storeToC(sum, kb.add(i0, r), j0, v, masks, accumulate);
        }
      });
    });
  }

private:
  /// `store(accumulate)`: C's tile added to (accumulate) or overwritten,
  /// as addToC says; a branch per tile when that is only known at run
  /// time, so an overwrite never reads C (for a product of a few steps,
  /// reading the tile cost as much as the steps).
  void storeTile(const std::function<void(bool)> &store) {
    if (std::optional<int64_t> known = getConstantIntValue(addToC)) {
      store(*known != 0);
      return;
    }
    auto ifOp = scf::IfOp::create(kb.builder(), TypeRange{}, addToC,
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(kb.builder());
    kb.builder().setInsertionPointToStart(&ifOp.getThenRegion().front());
    store(true);
    kb.builder().setInsertionPointToStart(&ifOp.getElseRegion().front());
    store(false);
  }

  /// C's vector v of row `r` (from j0) becomes `sum`, plus C's value when
  /// `accumulate`.
  void storeToC(Value sum, Value r, Value j0, int64_t v, ArrayRef<Value> masks,
                bool accumulate) {
    if (accumulate)
      sum = scaleC ? kb.vfma(load(C, r, j0, v, masks),
                             kb.splat(scaleC, g.lanes), sum)
                   : kb.fadd(load(C, r, j0, v, masks), sum);
    SmallVector<Value> ivs = C.at(r, col(j0, v));
    if (masks.empty())
      kb.vstore(sum, C.memref, ivs);
    else
      kb.vstoreMasked(sum, C.memref, ivs, masks[v]);
  }

  /// 32 steps at a time: A's rows as two 16 x 32 bf16 tiles, B's pair
  /// panels as two more (each row of a B tile holds a pair of steps for 16
  /// columns), four tile products. The blocks are zero-padded to 32 steps.
  SmallVector<Value> reduceTiles(Value i0, Value j0) {
    OpBuilder &b = kb.builder();
    Location loc = C.memref.getLoc();
    const int64_t n = GemmBlocking::AmxTileRows,
                  steps = GemmBlocking::AmxTileSteps;
    auto accType = amx::TileType::get({n, n}, b.getF32Type());
    auto operandType = amx::TileType::get({n, steps}, b.getBF16Type());
    SmallVector<Value> acc;
    for (int64_t t = 0; t < 4; ++t)
      acc.push_back(amx::TileZeroOp::create(b, loc, accType));
    Value blocks =
        kb.divs(kb.add(kb.sub(k1, k0), kb.idx(steps - 1)), kb.idx(steps));
    return kb.loop(kb.idx(0), blocks, acc, [&](Value kt, ValueRange c) {
      Value k = kb.add(k0, kb.mul(kt, kb.idx(steps)));
      Value a[2], bt[2];
      for (int64_t r = 0; r < 2; ++r)
        a[r] = amx::TileLoadOp::create(b, loc, operandType, A.memref,
                                       A.at(row(i0, r * n), k));
      for (int64_t v = 0; v < 2; ++v)
        bt[v] = amx::TileLoadOp::create(b, loc, operandType, B.memref,
                                        B.at(k, kb.add(j0, kb.idx(v * n))));
      SmallVector<Value> next;
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t v = 0; v < 2; ++v)
          next.push_back(amx::TileMulFOp::create(b, loc, accType, a[r], bt[v],
                                                 c[r * 2 + v]));
      return next;
    });
  }

  Value col(Value j0, int64_t v) { return kb.add(j0, kb.idx(v * g.lanes)); }
  Value row(Value i0, int64_t r) { return kb.add(i0, kb.idx(r)); }
  Value load(const MatrixRef &m, Value r, Value j0, int64_t v,
             ArrayRef<Value> masks) {
    SmallVector<Value> ivs = m.at(r, col(j0, v));
    return masks.empty() ? kb.vload(m.memref, ivs, g.lanes)
                         : kb.vloadMasked(m.memref, ivs, g.lanes, masks[v]);
  }

  /// Step by step: a broadcast of A times each vector of B, f32 FMAs.
  SmallVector<Value> reduceF32(Value i0, Value j0, int64_t rows, int64_t vecs,
                               ArrayRef<Value> masks) {
    SmallVector<Value> acc(rows * vecs, kb.vconst(0.0, g.lanes));
    return kb.loop(k0, k1, acc, [&](Value k, ValueRange c) {
      SmallVector<Value> bv;
      for (int64_t v = 0; v < vecs; ++v)
        bv.push_back(load(B, k, j0, v, masks));
      SmallVector<Value> next;
      for (int64_t r = 0; r < rows; ++r) {
        Value a = kb.splat(kb.mload(A.memref, A.at(row(i0, r), k)), g.lanes);
        for (int64_t v = 0; v < vecs; ++v)
          next.push_back(kb.vfma(a, bv[v], c[r * vecs + v]));
      }
      return next;
    });
  }

  /// Two steps at a time: A's pair of bf16 steps broadcast, times B's
  /// interleaved pairs of each column (zero-padded panels: no masks).
  SmallVector<Value> reducePairs(Value i0, Value j0, int64_t rows,
                                 int64_t vecs) {
    OpBuilder &b = kb.builder();
    auto pairType = VectorType::get({2 * g.lanes}, b.getBF16Type());
    Value pairs = kb.divs(kb.add(kb.sub(k1, k0), kb.idx(1)), kb.idx(2));
    SmallVector<Value> acc(rows * vecs, kb.vconst(0.0, g.lanes));
    return kb.loop(kb.idx(0), pairs, acc, [&](Value kp, ValueRange c) {
      Value k = kb.add(k0, kb.mul(kp, kb.idx(2)));
      SmallVector<Value> bv;
      for (int64_t v = 0; v < vecs; ++v)
        bv.push_back(vector::LoadOp::create(b, B.memref.getLoc(), pairType,
                                            B.memref, B.at(k, col(j0, v))));
      SmallVector<Value> next;
      for (int64_t r = 0; r < rows; ++r) {
        Value a = broadcastPair(kb, A.memref, A.at(row(i0, r), k), g.lanes);
        for (int64_t v = 0; v < vecs; ++v)
          next.push_back(x86vector::DotBF16Op::create(
              b, B.memref.getLoc(), c[r * vecs + v].getType(), c[r * vecs + v],
              a, bv[v]));
      }
      return next;
    });
  }
};

/// Rows [i0, M) of one column block, fewer than `rows`: micro-kernels of
/// 4, 2 and 1 rows (a row alone would leave the FMA units waiting on its
/// two dependency chains).
void emitRowTail(KernelBuilder &kb, MicroKernel &mk, Value i0, Value M,
                 int64_t rows, Value j0, int64_t vecs, ArrayRef<Value> masks) {
  for (int64_t n = llvm::PowerOf2Ceil(rows) / 2; n >= 1; n /= 2) {
    Value fits = kb.cmp(CmpIPredicate::sge, kb.sub(M, i0), kb.idx(n));
    auto ifOp =
        scf::IfOp::create(kb.builder(), TypeRange{kb.builder().getIndexType()},
                          fits, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(kb.builder());
    kb.builder().setInsertionPointToStart(&ifOp.getThenRegion().front());
    mk.emit(i0, j0, n, vecs, masks);
    scf::YieldOp::create(kb.builder(), ValueRange{kb.add(i0, kb.idx(n))});
    kb.builder().setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(kb.builder(), ValueRange{i0});
    kb.builder().setInsertionPointAfter(ifOp);
    i0 = ifOp.getResult(0);
  }
}

/// `columnBlock(j0, masks)` for every block of nr columns of N: whole
/// blocks, then the last, partial one with lane masks.
void forEachColumnBlock(
    KernelBuilder &kb, Value N, int64_t vecs, int64_t nr, int64_t lanes,
    const std::function<void(Value, ArrayRef<Value>)> &columnBlock) {
  Value fullColEnd = kb.mul(kb.divs(N, kb.idx(nr)), kb.idx(nr));
  kb.forEach(kb.idx(0), fullColEnd, kb.idx(nr),
             [&](Value j0) { columnBlock(j0, {}); });
  // The last, partial block of columns, with lane masks.
  kb.ifThen(kb.cmp(CmpIPredicate::slt, fullColEnd, N), [&] {
    SmallVector<Value> masks;
    for (int64_t v = 0; v < vecs; ++v)
      masks.push_back(
          kb.vmask(kb.sub(N, kb.add(fullColEnd, kb.idx(v * lanes))), lanes));
    columnBlock(fullColEnd, masks);
  });
}

/// One pass of the micro-kernel over every block of C.
void emitPass(KernelBuilder &kb, MicroKernel &mk, Value M, Value N,
              int64_t rows, int64_t vecs, int64_t nr, int64_t lanes) {
  Value fullRowEnd = kb.mul(kb.divs(M, kb.idx(rows)), kb.idx(rows));
  // Every rows x nr block of columns j0.
  forEachColumnBlock(
      kb, N, vecs, nr, lanes, [&](Value j0, ArrayRef<Value> masks) {
        kb.forEach(kb.idx(0), fullRowEnd, kb.idx(rows),
                   [&](Value i0) { mk.emit(i0, j0, rows, vecs, masks); });
        emitRowTail(kb, mk, fullRowEnd, M, rows, j0, vecs, masks);
      });
}

/// One pass of the AMX micro-kernel: 32-row blocks, the last one partial.
void emitTilePass(KernelBuilder &kb, MicroKernel &mk, Value M, Value N,
                  const GemmBlocking &g) {
  forEachColumnBlock(
      kb, N, g.vecs, g.columns(), g.lanes,
      [&](Value j0, ArrayRef<Value> masks) {
        kb.forEach(kb.idx(0), M, kb.idx(g.rows), [&](Value i0) {
          mk.emitTiles(i0, j0, kb.mins(kb.idx(g.rows), kb.sub(M, i0)), masks);
        });
      });
}

} // namespace

GemmProducts seqc::gemmProductsFor(const CpuTarget &target, Type a, Type b) {
  if (!a.isBF16() || !b.isBF16())
    return GemmProducts::F32;
  if (target.amxTiles)
    return GemmProducts::AmxTiles;
  return target.bf16Dot ? GemmProducts::Bf16Pairs : GemmProducts::F32;
}

Type GemmBlocking::packedType(MLIRContext *ctx) const {
  return pairs() ? Type(BFloat16Type::get(ctx)) : Type(Float32Type::get(ctx));
}

/// AMX: the micro-kernel's tile of C is 32 x 32 in tile registers, so L1
/// holds only its operands: kc steps of A's 32 rows and of B's 32-column
/// panel, in bf16, fill L1 (a multiple of 32 steps, 128 to 1024). Blocks of
/// rows and columns are whole tiles.
static GemmBlocking amxBlocking(const CpuTarget &target) {
  GemmBlocking g;
  g.products = GemmProducts::AmxTiles;
  g.lanes = 16;
  g.vecs = 2;
  g.rows = 2 * GemmBlocking::AmxTileRows;
  const int64_t operandBytesPerStep = (g.rows + g.columns()) * 2;
  g.reduction = std::clamp<int64_t>(target.l1Bytes / operandBytesPerStep /
                                        GemmBlocking::AmxTileSteps *
                                        GemmBlocking::AmxTileSteps,
                                    128, 1024);
  const int64_t panelRowBytes = g.columns() * 2;
  int64_t panels = target.l2Bytes / 2 / (g.reduction * panelRowBytes);
  g.packedColumns =
      g.columns() * std::clamp<int64_t>(panels, 1, 512 / g.columns());
  int64_t rowsInL2 = target.l2Bytes / 2 / (g.reduction * 2);
  g.packedRows =
      g.rows * std::clamp<int64_t>(rowsInL2 / g.rows, 1, 512 / g.rows);
  return g;
}

GemmBlocking GemmBlocking::forTarget(const CpuTarget &target,
                                     GemmProducts products) {
  if (products == GemmProducts::AmxTiles)
    return amxBlocking(target);
  GemmBlocking g;
  g.products = products;
  g.lanes = target.vectorWidth;
  g.vecs = 2;
  g.rows = g.lanes >= 16 ? 8 : 6;
  // Bytes of one step of a panel and of a packed row of A: bf16 pairs take
  // half of f32's, so their blocks hold twice the steps.
  const int64_t elementBytes = g.pairs() ? 2 : 4;
  const int64_t panelRowBytes = g.columns() * elementBytes;
  // kc: 256 steps, fewer (a multiple of 8, at least 64) where B's kc x nr
  // panel would not fit in L1. Each block ends with a load and a store of
  // every accumulator of C's tile: at 128 steps (the panel in half of L1,
  // the rule before) that cost 2-10% of a 2048^3 f32 product with AVX-512's
  // 32 columns on Zen 4; a panel filling L1 keeps its lines, A's rows
  // streaming past it, and in bf16 pairs (half the bytes) 512 steps gained
  // nothing over 256.
  g.reduction =
      std::clamp<int64_t>(target.l1Bytes / panelRowBytes / 8 * 8, 64, 256);
  // nc: whole panels, one to 512 columns (wider blocks would leave too few
  // tasks for the cores on the projections of a small batch).
  int64_t panels = target.l2Bytes / 2 / (g.reduction * panelRowBytes);
  g.packedColumns =
      g.columns() * std::clamp<int64_t>(panels, 1, 512 / g.columns());
  int64_t rowsInL2 = target.l2Bytes / 2 / (g.reduction * elementBytes);
  g.packedRows =
      g.rows * std::clamp<int64_t>(rowsInL2 / g.rows, 1, 512 / g.rows);
  return g;
}

/// packBPanels in f32: each step of a block is a row of every panel.
static void packF32Panels(KernelBuilder &kb, const GemmBlocking &g,
                          const MatrixRef &B, Value N, Value k0, Value k1,
                          const PanelRef &panels) {
  const int64_t lanes = g.lanes, nr = g.columns();
  Value fullPanels = kb.divs(N, kb.idx(nr));
  kb.forEach(k0, k1, kb.idx(1), [&](Value k) {
    Value kk = kb.sub(k, k0);
    auto copyPanel = [&](Value p, bool masked) {
      Value c0 = kb.mul(p, kb.idx(nr));
      for (int64_t v = 0; v < g.vecs; ++v) {
        Value c = kb.add(c0, kb.idx(v * lanes));
        SmallVector<Value> from = B.at(k, c);
        // Masked lanes load as zeros: the padding the micro-kernel reads.
        Value x = masked ? kb.vloadMasked(B.memref, from, lanes,
                                          kb.vmask(kb.sub(N, c), lanes))
                         : kb.vload(B.memref, from, lanes);
        kb.vstore(x, panels.memref, panels.at(p, kk, kb.idx(v * lanes)));
      }
    };
    kb.forEach(kb.idx(0), fullPanels, kb.idx(1),
               [&](Value p) { copyPanel(p, false); });
    kb.ifThen(kb.cmp(CmpIPredicate::slt, kb.mul(fullPanels, kb.idx(nr)), N),
              [&] { copyPanel(fullPanels, true); });
  });
}

/// packBPanels in bf16 pairs: steps k and k + 1 of each column side by side
/// in the panel's row k / 2 (vdpbf16ps's layout of its second operand).
static void packPairPanels(KernelBuilder &kb, const GemmBlocking &g,
                           const MatrixRef &B, Value N, Value k0, Value k1,
                           const PanelRef &panels) {
  const int64_t lanes = g.lanes, nr = g.columns();
  OpBuilder &b = kb.builder();
  Location loc = B.memref.getLoc();
  auto halfType = VectorType::get({lanes}, b.getBF16Type());
  Value zeros = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(halfType, b.getZeroAttr(b.getBF16Type())));
  Value fullPanels = kb.divs(N, kb.idx(nr));
  // Row kp of every panel; `second`: step k + 1 is in the block.
  auto copyPairRow = [&](Value kp, bool second) {
    Value k = kb.add(k0, kb.mul(kp, kb.idx(2)));
    auto copyPanel = [&](Value p, bool masked) {
      Value c0 = kb.mul(p, kb.idx(nr));
      for (int64_t v = 0; v < g.vecs; ++v) {
        Value c = kb.add(c0, kb.idx(v * lanes));
        // Masked lanes load as zeros: the padding the micro-kernel reads.
        Value active = masked ? kb.sub(N, c) : Value();
        Value first = loadBf16(kb, B.memref, B.at(k, c), lanes, active);
        Value next = second
                         ? loadBf16(kb, B.memref, B.at(kb.add(k, kb.idx(1)), c),
                                    lanes, active)
                         : zeros;
        Value pair = vector::InterleaveOp::create(b, loc, first, next);
        vector::StoreOp::create(b, loc, pair, panels.memref,
                                panels.at(p, kp, kb.idx(2 * v * lanes)));
      }
    };
    kb.forEach(kb.idx(0), fullPanels, kb.idx(1),
               [&](Value p) { copyPanel(p, false); });
    kb.ifThen(kb.cmp(CmpIPredicate::slt, kb.mul(fullPanels, kb.idx(nr)), N),
              [&] { copyPanel(fullPanels, true); });
  };
  Value len = kb.sub(k1, k0);
  Value wholePairs = kb.divs(len, kb.idx(2));
  kb.forEach(kb.idx(0), wholePairs, kb.idx(1),
             [&](Value kp) { copyPairRow(kp, true); });
  kb.ifThen(kb.cmp(CmpIPredicate::ne, kb.rems(len, kb.idx(2)), kb.idx(0)),
            [&] { copyPairRow(wholePairs, false); });
  if (!g.tiles())
    return;
  // AMX reads whole tiles of 16 pair rows: the rows past the block's end
  // are zero in every panel.
  const int64_t granule = g.reductionGranule();
  Value pairRows = kb.divs(kb.add(len, kb.idx(1)), kb.idx(2));
  Value paddedRows =
      kb.mul(kb.divs(kb.add(len, kb.idx(granule - 1)), kb.idx(granule)),
             kb.idx(granule / 2));
  Value allPanels = kb.divs(kb.add(N, kb.idx(nr - 1)), kb.idx(nr));
  auto pairType = VectorType::get({2 * lanes}, b.getBF16Type());
  Value zeroPairs = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(pairType, b.getZeroAttr(b.getBF16Type())));
  kb.forEach(pairRows, paddedRows, kb.idx(1), [&](Value kp) {
    kb.forEach(kb.idx(0), allPanels, kb.idx(1), [&](Value p) {
      for (int64_t v = 0; v < g.vecs; ++v)
        vector::StoreOp::create(b, loc, zeroPairs, panels.memref,
                                panels.at(p, kp, kb.idx(2 * v * lanes)));
    });
  });
}

void seqc::packBPanels(KernelBuilder &kb, const GemmBlocking &g,
                       const MatrixRef &B, Value N, Value k0, Value k1,
                       const PanelRef &panels) {
  if (g.pairs())
    packPairPanels(kb, g, B, N, k0, k1, panels);
  else
    packF32Panels(kb, g, B, N, k0, k1, panels);
}

/// The elements of `attr` widened to f32 (exact for bf16 and f16).
static std::vector<float> widenedValues(DenseElementsAttr attr) {
  std::vector<float> values;
  values.reserve(attr.getNumElements());
  for (APFloat x : attr.getValues<APFloat>()) {
    bool losesInfo = false;
    x.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &losesInfo);
    values.push_back(x.convertToFloat());
  }
  return values;
}

DenseElementsAttr seqc::packConstantPanels(const GemmBlocking &g,
                                           DenseElementsAttr B, bool batched) {
  auto type = cast<RankedTensorType>(B.getType());
  const int64_t off = batched ? 1 : 0;
  const int64_t batch = batched ? type.getDimSize(0) : 1;
  const int64_t K = type.getDimSize(off), N = type.getDimSize(off + 1);
  const int64_t kc = g.reduction, nr = g.columns();
  const int64_t steps = g.stepsPerProduct();
  const int64_t blocks = std::max<int64_t>((K + kc - 1) / kc, 1);
  const int64_t panels = (N + nr - 1) / nr;
  const int64_t rows = g.panelRows(), cols = g.panelColumns();
  std::vector<float> src = widenedValues(B);
  std::vector<float> packed(batch * blocks * panels * rows * cols, 0.0f);
  size_t at = 0;
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t block = 0; block < blocks; ++block)
      for (int64_t p = 0; p < panels; ++p)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c, ++at) {
            // Pairs: column c holds step 2 r + c % 2 of column c / 2.
            int64_t k = block * kc + r * steps + c % steps;
            int64_t n = p * nr + c / steps;
            if (k < K && n < N)
              packed[at] = src[(bi * K + k) * N + n];
          }
  MLIRContext *ctx = B.getContext();
  auto packedType = RankedTensorType::get({batch, blocks, panels, rows, cols},
                                          g.packedType(ctx));
  if (!g.pairs())
    return DenseElementsAttr::get(packedType, ArrayRef<float>(packed));
  // bf16 pairs come from a bf16 B: its values widened, so truncating the
  // f32 bits is exact.
  std::vector<uint16_t> bits(packed.size());
  for (size_t i = 0; i < packed.size(); ++i)
    bits[i] = static_cast<uint16_t>(llvm::bit_cast<uint32_t>(packed[i]) >> 16);
  return DenseElementsAttr::getFromRawBuffer(
      packedType, ArrayRef<char>(reinterpret_cast<const char *>(bits.data()),
                                 bits.size() * sizeof(uint16_t)));
}

Value seqc::constantPanels(ImplicitLocOpBuilder &b, const GemmBlocking &g,
                           DenseElementsAttr B, bool batched) {
  DenseElementsAttr packed = packConstantPanels(g, B, batched);
  auto type = MemRefType::get(cast<ShapedType>(packed.getType()).getShape(),
                              packed.getElementType());
  auto module =
      b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  // A name no symbol of the module has.
  std::string name = "__seqc_packed_weight";
  for (int i = 0; module.lookupSymbol(name); ++i)
    name = llvm::formatv("__seqc_packed_weight_{0}", i).str();
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    memref::GlobalOp::create(b, name, b.getStringAttr("private"), type, packed,
                             /*constant=*/true, b.getI64IntegerAttr(64));
  }
  return memref::GetGlobalOp::create(b, type, name);
}

PrepareB seqc::readConstantPanels(KernelBuilder &kb, const GemmBlocking &g,
                                  Value panels, Value bi, Value column0) {
  return [&kb, g, panels, bi, column0](Value k0, Value) {
    Value slot = kb.divs(k0, kb.idx(g.reduction));
    PanelRef ref{panels, [bi, slot](Value p, Value kk, Value lane) {
                   return SmallVector<Value>{bi, slot, p, kk, lane};
                 }};
    return panelsAsMatrix(kb, g, ref, k0, column0);
  };
}

MatrixRef seqc::panelsAsMatrix(KernelBuilder &kb, const GemmBlocking &g,
                               const PanelRef &panels, Value k0,
                               Value column0) {
  const int64_t nr = g.columns();
  Value firstPanel = kb.divs(column0, kb.idx(nr));
  // The micro-kernel asks for columns j0 + v * lanes, j0 a multiple of nr:
  // the divisions fold into its loop-invariant panel address.
  const int64_t steps = g.stepsPerProduct();
  return MatrixRef{panels.memref,
                   [&kb, panels, k0, nr, steps, firstPanel](Value k, Value c) {
                     Value panel = kb.add(firstPanel, kb.divs(c, kb.idx(nr)));
                     Value lane = kb.rems(c, kb.idx(nr));
                     if (steps == 1)
                       return panels.at(panel, kb.sub(k, k0), lane);
                     // k - k0 is even: the pair's first step.
                     return panels.at(panel,
                                      kb.divs(kb.sub(k, k0), kb.idx(steps)),
                                      kb.mul(lane, kb.idx(steps)));
                   }};
}

void seqc::copyRows(
    KernelBuilder &kb, int64_t lanes, Value rows, Value len,
    const std::function<Value(Value r, Value column, Value mask)> &vectorAt,
    const MatrixRef &dst) {
  Value whole = kb.mul(kb.divs(len, kb.idx(lanes)), kb.idx(lanes));
  Value allLanes = kb.vmask(kb.idx(lanes), lanes);
  auto copy = [&](Value r, Value c, Value mask) {
    kb.vstoreMasked(vectorAt(r, c, mask), dst.memref, dst.at(r, c), mask);
  };
  kb.forEach(kb.idx(0), rows, kb.idx(1), [&](Value r) {
    kb.forEach(kb.idx(0), whole, kb.idx(lanes),
               [&](Value c) { copy(r, c, allLanes); });
    kb.ifThen(kb.cmp(CmpIPredicate::slt, whole, len),
              [&] { copy(r, whole, kb.vmask(kb.sub(len, whole), lanes)); });
  });
}

void seqc::padReduction(KernelBuilder &kb, const GemmBlocking &g, Value rows,
                        Value len, const MatrixRef &packedA) {
  const int64_t granule = g.reductionGranule();
  if (granule == 1)
    return;
  Value padded =
      kb.mul(kb.divs(kb.add(len, kb.idx(granule - 1)), kb.idx(granule)),
             kb.idx(granule));
  kb.forEach(kb.idx(0), rows, kb.idx(1), [&](Value r) {
    kb.forEach(len, padded, kb.idx(1), [&](Value k) {
      kb.mstore(kb.f32(0), packedA.memref, packedA.at(r, k));
    });
  });
}

PrepareA seqc::packEachBlockOfA(KernelBuilder &kb, const GemmBlocking &g,
                                const MatrixRef &A, Value rows,
                                int64_t maxRows) {
  // AMX reads whole tiles of rows: the buffer has a multiple of its rows.
  Value buffer = kb.stackBuffer({roundUp(maxRows, g.rows), g.reduction},
                                g.packedType(kb.builder().getContext()));
  return [&kb, g, A, rows, buffer](Value k0, Value k1) {
    Value len = kb.sub(k1, k0);
    copyRows(
        kb, g.lanes, rows, len,
        [&](Value r, Value kk, Value mask) {
          return kb.vloadMasked(A.memref, A.at(r, kb.add(k0, kk)), g.lanes,
                                mask);
        },
        rowMajor(buffer));
    padReduction(kb, g, rows, len, rowMajor(buffer));
    return MatrixRef{buffer, [&kb, k0](Value r, Value k) {
                       return SmallVector<Value>{r, kb.sub(k, k0)};
                     }};
  };
}

PrepareB seqc::packEachBlockOfB(KernelBuilder &kb, const GemmBlocking &g,
                                const MatrixRef &B, Value N, int64_t columns) {
  int64_t panels = (columns + g.columns() - 1) / g.columns();
  Value buffer = kb.stackBuffer({panels, g.panelRows(), g.panelColumns()},
                                g.packedType(kb.builder().getContext()));
  PanelRef ref{buffer, [](Value panel, Value k, Value lane) {
                 return SmallVector<Value>{panel, k, lane};
               }};
  return [&kb, g, B, N, ref](Value k0, Value k1) {
    packBPanels(kb, g, B, N, k0, k1, ref);
    return panelsAsMatrix(kb, g, ref, k0, kb.idx(0));
  };
}

void seqc::emitGemm(KernelBuilder &kb, const CpuTarget &target, GemmShape shape,
                    const MatrixRef &A, const MatrixRef &B, const MatrixRef &C,
                    GemmMode mode, const PrepareA &prepareA,
                    const PrepareB &prepareB, Value scaleC) {
  emitGemm(kb, GemmBlocking::forTarget(target), shape, A, B, C, mode, prepareA,
           prepareB, scaleC);
}

void seqc::emitGemm(KernelBuilder &kb, const GemmBlocking &g, GemmShape shape,
                    const MatrixRef &A, const MatrixRef &B, const MatrixRef &C,
                    GemmMode mode, const PrepareA &prepareA,
                    const PrepareB &prepareB, Value scaleC) {
  assert((!scaleC || mode == GemmMode::Accumulate) &&
         "only an accumulated C is scaled");
  assert((!g.pairs() || (prepareA && prepareB)) &&
         "bf16 pairs read packed operands");
  const int64_t kc = g.reduction;
  Value M = shape.M, N = shape.N, K = shape.K;
  Value tileScratch =
      g.tiles() ? kb.stackBuffer({g.rows, g.columns()}) : Value();
  // At least one pass, so an empty reduction still writes C = 0.
  Value passes = kb.divs(kb.add(K, kb.idx(kc - 1)), kb.idx(kc));
  passes = arith::MaxSIOp::create(kb.builder(), passes, kb.idx(1));
  kb.forEach(kb.idx(0), passes, kb.idx(1), [&](Value p) {
    Value k0 = kb.mul(p, kb.idx(kc));
    Value k1 = kb.mins(K, kb.add(k0, kb.idx(kc)));
    Value addToC = mode == GemmMode::Accumulate
                       ? kb.i1(true)
                       : kb.cmp(CmpIPredicate::sgt, p, kb.idx(0));
    MatrixRef passA = prepareA ? prepareA(k0, k1) : A;
    MatrixRef passB = prepareB ? prepareB(k0, k1) : B;
    // C is scaled once: in the first pass, which reads it as given.
    Value passScale = scaleC
                          ? kb.select(kb.cmp(CmpIPredicate::eq, p, kb.idx(0)),
                                      scaleC, kb.f32(1.0))
                          : Value();
    MicroKernel mk{kb, g,  passA,  passB,       C,
                   k0, k1, addToC, tileScratch, passScale};
    if (g.tiles())
      emitTilePass(kb, mk, M, N, g);
    else
      emitPass(kb, mk, M, N, g.rows, g.vecs, g.columns(), g.lanes);
  });
}
