//===- GpuMma.h - warp-level tensor-core tiles -----------------*- C++ -*-===//
//
// Tensor cores take a matrix product from a whole warp at once: for
// mma.sync.m16n8k16 (bf16 or f16 multiplicands, f32 accumulators) each of the
// 32 lanes holds 8 values of A (16 x 16, m x k), 4 of B (16 x 8, k x n) and 4
// of C (16 x 8, m x n) in registers, at positions the PTX ISA fixes (its
// "matrix fragments for mma.m16n8k16" tables). Kernels place values into and
// out of fragments through `mmaFragmentCoord`, the one statement of that
// layout in seqc.
//
// Both executions of a kernel (GpuKernel.h) run the same fragment code:
//  - on the GPU a lane's fragments are private arrays that LLVM promotes to
//    registers, and `Warp::mma` is one `nvvm.mma.sync`;
//  - emulated, every lane's fragments are kept (an array per warp and lane),
//    the lanes run one after another, and `Warp::mma` does what the
//    instruction does: it places the lanes' values into the A and B tiles by
//    the layout, multiplies in f32 and gives each lane its values of D.
// So the emulation checks the tiling, the staging and the fragment
// bookkeeping of the kernels. The layout table itself is compared by a unit
// test with upstream MLIR's (nvgpu's mma.sync lowering, used on hardware for
// f16; bf16 shares the 16-bit layout) and the register packing by a PTX
// test; barriers between warps, warp convergence and the tensor cores' own
// summation order only a device shows.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_GPUMMA_H
#define SEQC_PASSES_GPUMMA_H

#include "Common/KernelBuilder.h"

#include <functional>
#include <utility>

namespace seqc {

/// The operands of mma.sync.m16n8k16: A (m x k), B (k x n), C and D (m x n).
enum class MmaOperand { A, B, C };

/// Values one lane holds of an operand's fragment (8, 4, 4).
int64_t mmaFragmentValues(MmaOperand operand);

/// Where value `value` of `lane`'s fragment of `operand` lies in its matrix:
/// (row, column) of A and C, (k, n) of B.
std::pair<int64_t, int64_t> mmaFragmentCoord(MmaOperand operand, int64_t lane,
                                             int64_t value);

/// Per-lane f32 arrays of every warp of a block, alive for the whole kernel:
/// fragments, and accumulators that stay in registers across phases.
struct WarpRegisters {
  Value buffer;
  int64_t size = 0;
};

/// What a warp does in a warp phase (`GpuBlock::warps`). Code that differs
/// between lanes goes inside `lanes`; the rest is the same for every lane,
/// as mma.sync requires (all 32 lanes execute it together).
class Warp {
public:
  Warp(KernelBuilder &kb, Value item, Value warp, Value lane, bool emulate,
       Value tileA, Value tileB)
      : item(item), kb(kb), warp(warp), lane(lane), emulate(emulate),
        tileA(tileA), tileB(tileB) {}

  /// The item of the warp phase this warp runs (warp-uniform).
  Value item;

  /// body(lane): for this thread's lane on the GPU, for lanes 0..31 in turn
  /// when emulated.
  void lanes(const std::function<void(Value lane)> &body);
  /// Register `i` of array `regs` of `lane` (inside `lanes`).
  Value get(const WarpRegisters &regs, Value lane, int64_t i);
  void set(const WarpRegisters &regs, Value lane, int64_t i, Value v);

  /// Fills registers [offset, offset + values) of `regs` with the fragment
  /// of `operand` whose element (row, col) is `element(row, col)` (f32).
  void loadFragment(MmaOperand operand, const WarpRegisters &regs,
                    int64_t offset,
                    const std::function<Value(Value, Value)> &element);
  /// Hands the C fragments at `offset` of each of `regs` (of one shape) to
  /// `store(row, col, values)`, one value per array.
  void storeFragments(
      llvm::ArrayRef<WarpRegisters> regs, int64_t offset,
      const std::function<void(Value, Value, llvm::ArrayRef<Value>)> &store);
  /// C += A * B with A and B rounded to `multiplicand` (bf16 or f16): the
  /// fragments at the given offsets; C is updated in place.
  void mma(mlir::Type multiplicand, const WarpRegisters &a, int64_t aOffset,
           const WarpRegisters &b, int64_t bOffset, const WarpRegisters &c,
           int64_t cOffset);

private:
  KernelBuilder &kb;
  Value warp; // the warp's index in its block (emulated: selects its arrays)
  Value lane; // this thread's lane (GPU only)
  bool emulate;
  Value tileA, tileB; // emulated: the warp's A (16 x 16) and B (16 x 8)

  std::pair<Value, Value> coord(MmaOperand operand, Value lane, int64_t value);
};

} // namespace seqc

#endif // SEQC_PASSES_GPUMMA_H
