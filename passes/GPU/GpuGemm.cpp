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

void MmaTileGemm::emit(GpuBlock &blk, ValueRange shared) const {
  KernelBuilder &k = blk.kb;
  size_t numB = b.size();
  assert(shared.size() == 1 + numB && "shared buffers of sharedShapes(numB)");
  // Warp w owns warp tiles w, w + warps, ... (slot s holds w + s * warps);
  // slots are unrolled so every register index is a constant.
  int64_t warps = blk.numWarps();
  int64_t slots = (warpTiles + warps - 1) / warps;
  SmallVector<WarpRegisters> acc;
  for (size_t w = 0; w < numB; ++w)
    acc.push_back(blk.warpRegisters(slots * accPerWarpTile));
  WarpRegisters fa = blk.warpRegisters(8), fb = blk.warpRegisters(4);
  auto eachTile = [&](Warp &warp,
                      const std::function<void(int64_t, Value, Value)> &body) {
    for (int64_t s = 0; s < slots; ++s) {
      Value t = k.add(warp.item, k.idx(s * warps));
      // Warp-uniform: a whole warp skips a missing tile.
      k.ifThen(k.cmp(arith::CmpIPredicate::slt, t, k.idx(warpTiles)), [&] {
        Value row = k.mul(k.divs(t, k.idx(tileN / warpCols)), k.idx(16));
        Value col = k.mul(k.rems(t, k.idx(tileN / warpCols)), k.idx(warpCols));
        body(s * accPerWarpTile, row, col);
      });
    }
  };
  auto tileCol = [&](Value col, int64_t n, Value j) {
    return k.add(col, k.add(j, k.idx(8 * n)));
  };
  Value nw = k.idx(warps);
  // Only registers are written: the staging phases that follow need no
  // barrier before them.
  blk.warps(
      nw,
      [&](Warp &warp) {
        eachTile(warp, [&](int64_t off, Value row, Value col) {
          for (size_t w = 0; w < numB; ++w)
            for (int64_t n = 0; n < mmaPerWarpTile; ++n)
              warp.loadFragment(
                  MmaOperand::C, acc[w], off + 4 * n, [&](Value i, Value j) {
                    if (!init)
                      return k.f32(0.0);
                    return init(w, k.add(row, i), tileCol(col, n, j));
                  });
        });
      },
      /*barrier=*/false);
  k.forEach(k.idx(0), depth, k.idx(tileK), [&](Value k0) {
    blk.phase2(k.idx(tileM), k.idx(tileK), [&](Value i, Value kk) {
      k.mstore(a(i, k.add(k0, kk)), shared[0],
               {k.add(k.mul(i, k.idx(strideA)), kk)});
    });
    for (size_t w = 0; w < numB; ++w)
      blk.phase2(k.idx(tileK), k.idx(tileN), [&](Value kk, Value j) {
        k.mstore(b[w](k.add(k0, kk), j), shared[1 + w],
                 {k.add(k.mul(kk, k.idx(strideB)), j)});
      });
    blk.warps(nw, [&](Warp &warp) {
      eachTile(warp, [&](int64_t off, Value row, Value col) {
        for (int64_t kk = 0; kk < tileK; kk += 16) {
          warp.loadFragment(MmaOperand::A, fa, 0, [&](Value i, Value j) {
            return k.mload(shared[0],
                           {k.add(k.mul(k.add(row, i), k.idx(strideA)),
                                  k.add(j, k.idx(kk)))});
          });
          for (size_t w = 0; w < numB; ++w)
            for (int64_t n = 0; n < mmaPerWarpTile; ++n) {
              warp.loadFragment(MmaOperand::B, fb, 0, [&](Value i, Value j) {
                return k.mload(shared[1 + w], {k.add(k.mul(k.add(i, k.idx(kk)),
                                                           k.idx(strideB)),
                                                     tileCol(col, n, j))});
              });
              warp.mma(multiplicand, fa, 0, fb, 0, acc[w], off + 4 * n);
            }
        }
      });
    });
  });
  blk.warps(
      nw,
      [&](Warp &warp) {
        eachTile(warp, [&](int64_t off, Value row, Value col) {
          for (int64_t n = 0; n < mmaPerWarpTile; ++n)
            warp.storeFragments(
                acc, off + 4 * n, [&](Value i, Value j, ArrayRef<Value> sums) {
                  finish(k.add(row, i), tileCol(col, n, j), sums);
                });
        });
      },
      /*barrier=*/false);
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
