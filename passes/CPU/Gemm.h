//===- Gemm.h - register-blocked matrix products in CPU kernels -*- C++ -*-===//
//
// The matmul-shaped parts of the chunked algorithms (C B^T, masked products
// with X, chunk states, q S, P V) are small products inside a kernel, on
// slices of memrefs. emitGemm writes one inline: a register-blocked
// micro-kernel of `rows x (2 vectors)` accumulators that stay in registers
// over the whole reduction, a broadcast of A and two vector loads of B per
// step, masked vectors on the last columns and single rows on the last rows.
//
// The micro-kernel multiplies in one of three ways (GemmProducts), chosen
// per product from its operands' types and the target (gemmProductsFor):
// f32 FMAs on operands widened to f32, AVX-512 BF16 dot products of bf16
// pairs, or AMX tiles of bf16 pairs (amx.tile_mulf). Only the packed
// layouts, their padding and the micro-kernel's reduction differ; the
// blocking rule, the passes over C and the tails are the same code.
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

/// What the micro-kernel multiplies with.
enum class GemmProducts {
  /// f32 FMAs; narrower operands are widened to f32 where they are packed.
  F32,
  /// AVX-512 BF16 dot products (vdpbf16ps, `x86vector.avx512.dot`): one
  /// instruction multiplies two consecutive reduction steps of A and B in
  /// bf16 and adds both products to f32 accumulators. A and B are packed in
  /// bf16, B with each pair of steps interleaved per column, and a block
  /// with an odd number of steps is padded with a zero step.
  Bf16Pairs,
  /// AMX (amx.tile_mulf, tdpbf16ps): the micro-kernel's 32 x 32 tile of C
  /// is four 16 x 16 f32 tiles that stay in tile registers over a
  /// reduction block; each 32 steps, A's rows load as two 16 x 32 bf16
  /// tiles and B's pair panels (the layout of Bf16Pairs, which is AMX's
  /// VNNI layout) as two more. Packed blocks are padded with zero steps to
  /// a multiple of 32; rows past M are read (whatever the packed buffer
  /// holds) and their results dropped.
  AmxTiles,
};

/// The products for operands of element types `a` and `b` on `target`:
/// when both are bf16, AMX tiles or dot products of pairs as the target's
/// bf16 products say (CpuTarget::bf16Products), else f32.
GemmProducts gemmProductsFor(const CpuTarget &target, mlir::Type a,
                             mlir::Type b);

/// The blocking of emitGemm's loops on one target, chosen here from its
/// vector width, register file and cache sizes (CpuTarget::host reads them
/// from the OS), so that no kernel carries its own constants.
struct GemmBlocking {
  GemmProducts products = GemmProducts::F32;
  /// f32 lanes per vector (accumulator lanes).
  int64_t lanes;
  /// The micro-kernel's tile of C held in registers: `rows` rows of `vecs`
  /// vectors. Accumulators + B's vectors + a broadcast of A fill the
  /// register file (32 vector registers with AVX-512, 16 otherwise).
  int64_t rows, vecs;
  /// The reduction block kc: B's panel of kc x columns() stays in L1 while
  /// the micro-kernel passes over every row of A.
  int64_t reduction;
  /// The widest block of B packed at once (packBBuffer): kc x packedColumns
  /// fills half of L2, where it stays while the rows of A pass over it.
  int64_t packedColumns;
  /// The rows of A a matmul task packs per reduction block: mc x kc fills
  /// half of L2, where it stays while each panel of B passes over it (B's
  /// block, read once per task, is then amortized over mc rows).
  int64_t packedRows;

  /// Columns of the micro-kernel's tile (nr).
  int64_t columns() const { return vecs * lanes; }
  /// Operands packed in bf16 with B in pair panels (dot products, AMX).
  bool pairs() const { return products != GemmProducts::F32; }
  bool tiles() const { return products == GemmProducts::AmxTiles; }
  /// Reduction steps per element of a packed panel row (2 for pairs).
  int64_t stepsPerProduct() const { return pairs() ? 2 : 1; }
  /// Packed blocks hold whole multiples of this many steps, the steps past
  /// the block's end zero: a pair (dot products), a tile's 32 (AMX).
  int64_t reductionGranule() const {
    return tiles() ? AmxTileSteps : stepsPerProduct();
  }
  /// AMX tile geometry: 16 rows; 32 bf16 steps (64 bytes) per row of A.
  static constexpr int64_t AmxTileRows = 16, AmxTileSteps = 32;
  /// One reduction block of a packed panel of B is panelRows() x
  /// panelColumns() elements: kc x nr in f32, or (kc / 2) x (2 nr) bf16
  /// pairs.
  int64_t panelRows() const { return reduction / stepsPerProduct(); }
  int64_t panelColumns() const { return columns() * stepsPerProduct(); }
  /// The element type of packed operands (f32, or bf16 for pairs).
  mlir::Type packedType(mlir::MLIRContext *ctx) const;
  static GemmBlocking forTarget(const CpuTarget &target,
                                GemmProducts products = GemmProducts::F32);
};

/// Called at the start of each block [k0, k1) of the reduction (at most
/// GemmBlocking::reduction long) to provide A for it, e.g. rows of A
/// computed and packed on the fly; element (r, k) of the result is A's
/// (r, k).
using PrepareA = std::function<MatrixRef(Value k0, Value k1)>;
/// The same for B: element (k, c) of the result is B's (k, c).
using PrepareB = std::function<MatrixRef(Value k0, Value k1)>;

/// C[M x N] = / += A[M x K] B[K x N], f32, inline in the current kernel.
/// With `scaleC` (an f32, Accumulate only), C = scaleC C + A B: the scale
/// is applied where C is added, not in a pass of its own over C.
void emitGemm(KernelBuilder &kb, const CpuTarget &target, GemmShape shape,
              const MatrixRef &A, const MatrixRef &B, const MatrixRef &C,
              GemmMode mode, const PrepareA &prepareA = nullptr,
              const PrepareB &prepareB = nullptr, Value scaleC = {});
/// The same with a given blocking. With bf16 pairs or AMX tiles both
/// operands must come packed (prepareA, prepareB): A's rows in bf16 with
/// each block's steps padded (padReduction), B in pair panels (packBPanels);
/// for AMX, A's packed rows are readable up to a multiple of 32 rows.
void emitGemm(KernelBuilder &kb, const GemmBlocking &blocking, GemmShape shape,
              const MatrixRef &A, const MatrixRef &B, const MatrixRef &C,
              GemmMode mode, const PrepareA &prepareA, const PrepareB &prepareB,
              Value scaleC = {});

/// B in the micro-kernel's layout: each reduction block of B as contiguous
/// kc x nr panels, in f32, the last zero-padded (with bf16 pairs, (kc / 2)
/// x (2 nr) bf16 panels: row `k / 2` holds steps k and k + 1 of each column
/// side by side, zero for a step past the block's end). The micro-kernel then
/// streams a panel from L1 instead of loading rows that lie N elements
/// apart (a 2048-wide f32 weight puts every row of a panel in the same L1
/// set and a different page), and a bf16 B is widened once, not once per
/// row block of A. `at(panel, k, lane)` gives the memref indices of element
/// (k0 + k, panel * nr + lane) of the block that starts at step k0; with
/// bf16 pairs, `at(panel, k / 2, 2 lane + k % 2)`.
struct PanelRef {
  Value memref;
  std::function<llvm::SmallVector<Value>(Value panel, Value k, Value lane)> at;
};

/// Packs rows [k0, k1) of B's first N columns into `panels`.
void packBPanels(KernelBuilder &kb, const GemmBlocking &blocking,
                 const MatrixRef &B, Value N, Value k0, Value k1,
                 const PanelRef &panels);
/// A constant B (K x N, or batch x K x N with `batched`) packed at compile
/// time into every reduction block's panels, in packBPanels' layout and the
/// blocking's packed type: [batch][block][panel][panelRows()][panelColumns()],
/// zero past K and N. A product whose weight is a function constant then
/// packs it once, here, not in every call.
mlir::DenseElementsAttr packConstantPanels(const GemmBlocking &blocking,
                                           mlir::DenseElementsAttr B,
                                           bool batched);
/// `B`'s panels (packConstantPanels) as a constant global of the module
/// holding the insertion point of `b`, read there: a weight packed once,
/// when compiling, for every call.
Value constantPanels(mlir::ImplicitLocOpBuilder &b,
                     const GemmBlocking &blocking, mlir::DenseElementsAttr B,
                     bool batched);
/// A PrepareB reading the panels packed when compiling (constantPanels) of
/// batch `bi`, from column `column0` (a multiple of nr) on.
PrepareB readConstantPanels(KernelBuilder &kb, const GemmBlocking &blocking,
                            Value panels, Value bi, Value column0);
/// The block packed by packBPanels from rows [k0, ...) as a matrix whose
/// column 0 is the packed block's column `column0` (a multiple of nr).
MatrixRef panelsAsMatrix(KernelBuilder &kb, const GemmBlocking &blocking,
                         const PanelRef &panels, Value k0, Value column0);
/// Writes `rows` rows of `len` elements (a run-time length) into `dst`,
/// vector by vector, each produced by `vectorAt(r, column, mask)`. Whole
/// vectors take a constant all-lanes mask (LLVM makes them plain loads and
/// stores: masked stores are slow on AMD cores), the last a real one.
void copyRows(
    KernelBuilder &kb, int64_t lanes, Value rows, Value len,
    const std::function<Value(Value r, Value column, Value mask)> &vectorAt,
    const MatrixRef &dst);
/// Zeroes steps [len, len rounded up to the blocking's reduction granule)
/// of the first `rows` rows of a packed block of A: the odd step of bf16
/// pairs, up to 31 steps of an AMX tile; nothing for f32.
void padReduction(KernelBuilder &kb, const GemmBlocking &blocking, Value rows,
                  Value len, const MatrixRef &packedA);
/// A PrepareA that copies each reduction block of A's first `rows` rows (at
/// most `maxRows`; each row contiguous) into a row-major stack buffer of
/// the blocking's packed type (f32, or bf16 padded to whole pairs):
/// for an A whose rows lie far apart (gathered tokens) or are narrow (bf16
/// and f16 are widened once per block, not at every broadcast).
PrepareA packEachBlockOfA(KernelBuilder &kb, const GemmBlocking &blocking,
                          const MatrixRef &A, Value rows, int64_t maxRows);
/// A PrepareB that packs each reduction block of B (N <= `columns`) into a
/// stack buffer, for products whose B block serves a single task.
PrepareB packEachBlockOfB(KernelBuilder &kb, const GemmBlocking &blocking,
                          const MatrixRef &B, Value N, int64_t columns);

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
/// Writes the transpose of the [rows x cols] matrix `src` (rows contiguous)
/// into `dst` (element (c, r) for c < cols, r < rows; its rows contiguous):
/// blocks of lanes x lanes transposed in registers, the rows past the last
/// whole block a lane at a time.
void transposeInto(KernelBuilder &kb, const CpuTarget &target,
                   const MatrixRef &src, Value rows, int64_t cols,
                   const MatrixRef &dst);
/// transposeInto the row-major 2-D buffer `dst` [cols x >= rows].
void transposeInto(KernelBuilder &kb, const CpuTarget &target,
                   const MatrixRef &src, Value rows, int64_t cols, Value dst);

/// A row-major 2-D view `m[r, c]` of a 2-D memref.
MatrixRef rowMajor(Value memref);
/// The transpose of a 2-D memref: element (r, c) is `m[c, r]`.
MatrixRef transposed(Value memref);

} // namespace seqc

#endif // SEQC_PASSES_GEMM_H
