//===- GpuGemm.h - a thread block's GEMM tile on tensor cores ---*- C++ -*-===//
//
// The tensor-core core shared by the GPU kernels whose inner work is a
// matrix product (the graph's matmuls, the experts' grouped GEMMs): one
// thread block computes a 64 x 64 output tile as eight 16 x 32 warp tiles of
// mma.sync (GpuMma.h) whose f32 accumulators stay in registers over the whole
// reduction; A and the B operands advance in 32-deep tiles staged in shared
// memory. Several B operands may share A (a gated FFN's gate and up
// projections). `mmaSharedProduct` is the small form for operands a kernel
// already holds in shared memory.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_GPUGEMM_H
#define SEQC_PASSES_GPUGEMM_H

#include "GPU/GpuKernel.h"

namespace seqc {

struct MmaTileGemm {
  static constexpr int64_t tileM = 64, tileN = 64, tileK = 32;

  /// bf16 or f16: what A and B are rounded to for the tensor cores.
  mlir::Type multiplicand;
  /// The reduction's length.
  Value depth;
  /// A's element (tile row i in [0, 64), reduction index k) as f32: zero
  /// for rows outside the matrix and for k >= depth (the reduction runs in
  /// whole 32-deep tiles).
  std::function<Value(Value i, Value k)> a;
  /// Each B operand's element (k, tile column j): zero outside the matrix
  /// and for k >= depth.
  llvm::SmallVector<std::function<Value(Value k, Value j)>> b;
  /// The sums' initial values (B operand w, i, j); null: zeros.
  std::function<Value(int64_t w, Value i, Value j)> init;
  /// Receives every (i, j) of the tile with its sums, one per B operand.
  std::function<void(Value i, Value j, llvm::ArrayRef<Value> sums)> finish;

  /// The shared buffers `emit` needs with `numB` B operands, for the
  /// kernel's `shared` list.
  static llvm::SmallVector<llvm::SmallVector<int64_t>>
  sharedShapes(size_t numB);
  /// Emits the tile's computation into `blk`, using `shared` (the buffers of
  /// sharedShapes(), in order). The last warp phase ends without a barrier.
  void emit(GpuBlock &blk, ValueRange shared) const;
};

/// One warp phase computing a small product whose operands are already in
/// shared memory (an attention tile's scores, P V): every 16 x 8 tile of the
/// rows x cols result is one warp's, `store(i, j, init(i, j) + sum over k <
/// depth of a(i, k) b(k, j))` for each of its elements. rows, cols and depth
/// are multiples of 16, 8 and 16; `a`, `b` and `init` return f32.
/// `causal`: a(i, k) is zero for k > i (a masked square product), so the
/// reduction of a 16-row tile stops after its last row's k.
void mmaSharedProduct(GpuBlock &blk, mlir::Type multiplicand, int64_t rows,
                      int64_t cols, int64_t depth,
                      const std::function<Value(Value, Value)> &a,
                      const std::function<Value(Value, Value)> &b,
                      const std::function<Value(Value, Value)> &init,
                      const std::function<void(Value, Value, Value)> &store,
                      bool causal = false);

} // namespace seqc

#endif // SEQC_PASSES_GPUGEMM_H
