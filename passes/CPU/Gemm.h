//===- Gemm.h - register-blocked matrix products in CPU kernels -*- C++ -*-===//
//
// The matmul-shaped parts of the chunked algorithms (C B^T, masked products
// with X, chunk states, q S, P V) are small products inside a kernel, on
// slices of memrefs. emitGemm writes one inline: a register-blocked
// micro-kernel of `rows x (2 vectors)` accumulators that stay in registers
// over the whole reduction, a broadcast of A and two vector loads of B per
// step, masked vectors on the last columns and single rows on the last rows.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_GEMM_H
#define SEQC_PASSES_GEMM_H

#include "CPU/CpuKernel.h"

namespace seqc {

/// A matrix inside a memref: `at(row, col)` gives the memref indices of an
/// element. For B and C the column must be the memref's innermost index (a
/// row is contiguous); A may be laid out either way (it is read by scalars).
struct MatrixRef {
  Value memref;
  std::function<llvm::SmallVector<Value>(Value row, Value col)> at;
};

struct GemmShape {
  Value M, N, K;
};

/// How C is produced.
enum class GemmMode {
  Overwrite,  ///< C = A B
  Accumulate, ///< C += A B
};

/// Called at the start of each block [k0, k1) of the reduction (at most
/// gemmReductionBlock long) to provide A for it, e.g. rows of A computed and
/// packed on the fly; element (r, k) of the result is A's (r, k).
using PrepareA = std::function<MatrixRef(Value k0, Value k1)>;

/// The length of the reduction blocks of emitGemm.
constexpr int64_t gemmReductionBlock = 256;

/// C[M x N] = / += A[M x K] B[K x N], f32, inline in the current kernel.
void emitGemm(KernelBuilder &kb, const CpuTarget &target, GemmShape shape,
              const MatrixRef &A, const MatrixRef &B, const MatrixRef &C,
              GemmMode mode, const PrepareA &prepareA = nullptr);

/// Copies `rows` rows of `cols` elements from `src` (element (r, c) at
/// src.at(r, c), rows contiguous) into the row-major 2-D buffer `dst`,
/// vectorized. Packing strided rows (a head's slice of [B, T, H, P]) keeps
/// the 4 KiB-strided rows of a chunk from evicting each other in L1.
/// `transform(vector, row)`, when given, is applied to each loaded vector.
void packRows(KernelBuilder &kb, const CpuTarget &target, const MatrixRef &src,
              Value rows, int64_t cols, const MatrixRef &dst,
              const std::function<Value(Value, Value)> &transform = nullptr);
/// packRows into the row-major 2-D buffer `dst`.
void packRows(KernelBuilder &kb, const CpuTarget &target, const MatrixRef &src,
              Value rows, int64_t cols, Value dst,
              const std::function<Value(Value, Value)> &transform = nullptr);
/// Writes the transpose of the row-major [rows x cols] buffer `src` into
/// `dst` [cols x >= rows]: vector loads of rows, scalar stores of lanes
/// (no scatters, which are slow where they exist at all).
void transposeInto(KernelBuilder &kb, const CpuTarget &target,
                   const MatrixRef &src, Value rows, int64_t cols, Value dst);

/// A row-major 2-D view `m[r, c]` of a 2-D memref.
MatrixRef rowMajor(Value memref);
/// The transpose of a 2-D memref: element (r, c) is `m[c, r]`.
MatrixRef transposed(Value memref);

} // namespace seqc

#endif // SEQC_PASSES_GEMM_H
