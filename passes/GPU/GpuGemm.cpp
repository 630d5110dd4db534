//===- GpuGemm.cpp - a thread block's GEMM tile on tensor cores -----------===//

#include "GPU/GpuGemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace seqc;

namespace {
// Shared rows are padded by 4 floats: the lanes of a B fragment load then hit
// distinct banks (A's see two-way conflicts at most).
constexpr int64_t strideA = MmaTileGemm::tileK + 4;
constexpr int64_t strideB = MmaTileGemm::tileN + 4;
// Warp tiles: 16 rows x 32 columns, four 16 x 8 mma tiles side by side.
constexpr int64_t warpCols = 32, mmaPerWarpTile = warpCols / 8;
constexpr int64_t warpTiles =
    (MmaTileGemm::tileM / 16) * (MmaTileGemm::tileN / warpCols);
constexpr int64_t accPerWarpTile = 4 * mmaPerWarpTile;
} // namespace

SmallVector<SmallVector<int64_t>> MmaTileGemm::sharedShapes(size_t numB) {
  SmallVector<SmallVector<int64_t>> shapes{{tileM * strideA}};
  for (size_t w = 0; w < numB; ++w)
    shapes.push_back({tileK * strideB});
  return shapes;
}

namespace {

/// MmaTileGemm::emit in its stages: the warps' accumulators loaded, then
/// per 32-deep step of the reduction A's and each B's tile staged in shared
/// memory and multiplied on tensor cores, then the sums handed out.
class MmaTileEmitter {
public:
  MmaTileEmitter(const MmaTileGemm &gemm, GpuBlock &blk, ValueRange shared)
      : gemm(gemm), blk(blk), k(blk.kb), shared(shared), numB(gemm.b.size()),
        warps(blk.numWarps()), slots((warpTiles + warps - 1) / warps) {
    for (size_t w = 0; w < numB; ++w)
      acc.push_back(blk.warpRegisters(slots * accPerWarpTile));
    fa = blk.warpRegisters(8);
    fb = blk.warpRegisters(4);
    numWarps = k.idx(warps);
  }

  /// The sums' initial values (or zeros). Only registers are written: the
  /// staging phases that follow need no barrier before them.
  void loadAccumulators() {
    blk.warps(
        numWarps,
        [&](Warp &warp) {
          eachTile(warp, [&](int64_t off, Value row, Value col) {
            for (size_t w = 0; w < numB; ++w)
              for (int64_t n = 0; n < mmaPerWarpTile; ++n)
                warp.loadFragment(
                    MmaOperand::C, acc[w], off + 4 * n, [&](Value i, Value j) {
                      if (!gemm.init)
                        return k.f32(0.0);
                      return gemm.init(w, k.add(row, i), tileCol(col, n, j));
                    });
          });
        },
        /*barrier=*/false);
  }

  /// A's and every B's tile of reduction step `k0` into shared memory.
  void stageTiles(Value k0) {
    blk.phase2(k.idx(MmaTileGemm::tileM), k.idx(MmaTileGemm::tileK),
               [&](Value i, Value kk) {
                 k.mstore(gemm.a(i, k.add(k0, kk)), shared[0],
                          {k.add(k.mul(i, k.idx(strideA)), kk)});
               });
    for (size_t w = 0; w < numB; ++w)
      blk.phase2(k.idx(MmaTileGemm::tileK), k.idx(MmaTileGemm::tileN),
                 [&](Value kk, Value j) {
                   k.mstore(gemm.b[w](k.add(k0, kk), j), shared[1 + w],
                            {k.add(k.mul(kk, k.idx(strideB)), j)});
                 });
  }

  /// The staged tiles' products, added to the accumulators.
  void multiplyTiles() {
    blk.warps(numWarps, [&](Warp &warp) {
      eachTile(warp, [&](int64_t off, Value row, Value col) {
        for (int64_t kk = 0; kk < MmaTileGemm::tileK; kk += 16)
          multiplyStep(warp, off, row, col, kk);
      });
    });
  }

  /// Every sum, to `finish`.
  void storeAccumulators() {
    blk.warps(
        numWarps,
        [&](Warp &warp) {
          eachTile(warp, [&](int64_t off, Value row, Value col) {
            for (int64_t n = 0; n < mmaPerWarpTile; ++n)
              warp.storeFragments(acc, off + 4 * n,
                                  [&](Value i, Value j, ArrayRef<Value> sums) {
                                    gemm.finish(k.add(row, i),
                                                tileCol(col, n, j), sums);
                                  });
          });
        },
        /*barrier=*/false);
  }

private:
  /// Calls `body(register offset, row, column)` for each warp tile of
  /// `warp`: warp w owns warp tiles w, w + warps, ... (slot s holds w + s *
  /// warps); slots are unrolled so every register index is a constant.
  void eachTile(Warp &warp,
                const std::function<void(int64_t, Value, Value)> &body) {
    for (int64_t s = 0; s < slots; ++s) {
      Value t = k.add(warp.item, k.idx(s * warps));
      // Warp-uniform: a whole warp skips a missing tile.
      k.ifThen(k.cmp(arith::CmpIPredicate::slt, t, k.idx(warpTiles)), [&] {
        int64_t tilesAcross = MmaTileGemm::tileN / warpCols;
        Value row = k.mul(k.divs(t, k.idx(tilesAcross)), k.idx(16));
        Value col = k.mul(k.rems(t, k.idx(tilesAcross)), k.idx(warpCols));
        body(s * accPerWarpTile, row, col);
      });
    }
  }

  /// Column j of mma tile n of the warp tile at `col`.
  Value tileCol(Value col, int64_t n, Value j) {
    return k.add(col, k.add(j, k.idx(8 * n)));
  }

  /// The 16-deep slice `kk` of the staged tiles: A's fragment, then each
  /// B's four fragments multiplied into their accumulators.
  void multiplyStep(Warp &warp, int64_t off, Value row, Value col, int64_t kk) {
    warp.loadFragment(MmaOperand::A, fa, 0, [&](Value i, Value j) {
      return k.mload(shared[0], {k.add(k.mul(k.add(row, i), k.idx(strideA)),
                                       k.add(j, k.idx(kk)))});
    });
    for (size_t w = 0; w < numB; ++w)
      for (int64_t n = 0; n < mmaPerWarpTile; ++n) {
        warp.loadFragment(MmaOperand::B, fb, 0, [&](Value i, Value j) {
          return k.mload(shared[1 + w],
                         {k.add(k.mul(k.add(i, k.idx(kk)), k.idx(strideB)),
                                tileCol(col, n, j))});
        });
        warp.mma(gemm.multiplicand, fa, 0, fb, 0, acc[w], off + 4 * n);
      }
  }

  const MmaTileGemm &gemm;
  GpuBlock &blk;
  KernelBuilder &k;
  ValueRange shared;
  size_t numB;
  int64_t warps, slots;
  /// Per B operand, each warp's sums of its slots' tiles.
  SmallVector<WarpRegisters> acc;
  /// A's and B's fragments of one mma.
  WarpRegisters fa, fb;
  Value numWarps;
};

} // namespace

void MmaTileGemm::emit(GpuBlock &blk, ValueRange shared) const {
  assert(shared.size() == 1 + b.size() && "shared buffers of sharedShapes()");
  MmaTileEmitter tile(*this, blk, shared);
  KernelBuilder &k = blk.kb;
  tile.loadAccumulators();
  k.forEach(k.idx(0), depth, k.idx(tileK), [&](Value k0) {
    tile.stageTiles(k0);
    tile.multiplyTiles();
  });
  tile.storeAccumulators();
}

void seqc::mmaSharedProduct(
    GpuBlock &blk, Type multiplicand, int64_t rows, int64_t cols, int64_t depth,
    const std::function<Value(Value, Value)> &a,
    const std::function<Value(Value, Value)> &b,
    const std::function<Value(Value, Value)> &init,
    const std::function<void(Value, Value, Value)> &store, bool causal) {
  assert(rows % 16 == 0 && cols % 8 == 0 && depth % 16 == 0);
  KernelBuilder &k = blk.kb;
  WarpRegisters fa = blk.warpRegisters(8), fb = blk.warpRegisters(4),
                fc = blk.warpRegisters(4);
  int64_t tileCols = cols / 8;
  blk.warps(k.idx(rows / 16 * tileCols), [&](Warp &warp) {
    Value row = k.mul(k.divs(warp.item, k.idx(tileCols)), k.idx(16));
    Value col = k.mul(k.rems(warp.item, k.idx(tileCols)), k.idx(8));
    warp.loadFragment(MmaOperand::C, fc, 0, [&](Value i, Value j) {
      return init(k.add(row, i), k.add(col, j));
    });
    auto step = [&](Value kk) {
      warp.loadFragment(MmaOperand::A, fa, 0, [&](Value i, Value j) {
        return a(k.add(row, i), k.add(j, kk));
      });
      warp.loadFragment(MmaOperand::B, fb, 0, [&](Value i, Value j) {
        return b(k.add(i, kk), k.add(col, j));
      });
      warp.mma(multiplicand, fa, 0, fb, 0, fc, 0);
    };
    if (causal) // a warp-uniform bound: the tile's rows end at row + 16
      k.forEach(k.idx(0), k.mins(k.add(row, k.idx(16)), k.idx(depth)),
                k.idx(16), step);
    else
      for (int64_t kk = 0; kk < depth; kk += 16)
        step(k.idx(kk));
    warp.storeFragments({fc}, 0, [&](Value i, Value j, ArrayRef<Value> v) {
      store(k.add(row, i), k.add(col, j), v[0]);
    });
  });
}
