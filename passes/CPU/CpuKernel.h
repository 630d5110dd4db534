//===- CpuKernel.h - what the CPU lowerings know of the host ----*- C++ -*-===//
//
// The fast CPU lowerings turn a seq op into kernels on buffers
// (Common/Kernels.h), each a task space on the runtime's thread pool, over
// the reference lowering for what they decline (Reference/Fallback.h).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_CPU_CPUKERNEL_H
#define SEQC_PASSES_CPU_CPUKERNEL_H

#include "Common/ItemKernels.h"
#include "Common/Kernels.h"
#include "Reference/Fallback.h"
#include "Transforms/Strategy.h"

namespace seqc {

/// What the CPU lowerings know of the machine they compile for.
struct CpuTarget {
  /// f32 lanes of the widest vector the host computes with (AVX-512: 16,
  /// AVX2: 8, NEON/SSE: 4).
  int64_t vectorWidth = 8;
  /// Per-core data cache sizes in bytes.
  int64_t l1Bytes = 32 * 1024;
  int64_t l2Bytes = 1024 * 1024;
  /// Whether products of bf16 operands take AVX-512 BF16's dot product of
  /// bf16 pairs (vdpbf16ps) instead of f32 FMAs on widened operands.
  bool bf16Dot = false;
  /// Whether the GEMM engine's products of bf16 operands (matmuls,
  /// experts) take AMX tiles (amx.tile_mulf). The kernels are the same
  /// when the tiles are emulated (seq-emulate-amx, for hosts without AMX).
  bool amxTiles = false;

  /// Vector registers: 32 with AVX-512 (16 lanes), 16 with AVX2 or SSE.
  /// Kernels that carry accumulators across a loop size their blocks by
  /// this, or spill them to the stack on every iteration.
  int64_t vectorRegisters() const { return vectorWidth >= 16 ? 32 : 16; }

  /// The host, from its CPU features and cache geometry.
  static CpuTarget host();
  /// This CPU as the strategy sees it (Transforms/Strategy.h).
  TargetDescription describe() const {
    return TargetDescription::cpu(vectorWidth, l1Bytes, l2Bytes);
  }
};

/// Whether the CPU's kernels take `op`'s element types: f32, bf16 and f16
/// (loads widen to f32, stores round back; sums and states stay f32) and
/// integers.
bool cpuTakesElementTypes(mlir::Operation *op);
/// What a CPU kernel says when it declines other element types.
inline constexpr const char *cpuElementTypesReason =
    "takes f32, bf16 or f16 operands (and integers)";

/// The CPU's item dispatch: a task of the runtime's thread pool per item
/// (the pool hands each thread a range of items); the element types of
/// cpuTakesElementTypes.
class CpuItemDispatch : public ItemDispatch {
public:
  void emit(mlir::ImplicitLocOpBuilder &b, llvm::StringRef name,
            KernelBuilder &kb, Value count, ValueRange args,
            const ItemBody &body) const override;
  bool adjacentItemsShareLines() const override { return false; }
  std::string unsupportedTypes(mlir::Operation *op) const override;
};

/// Splits `vectors` column vectors into the fewest blocks whose vectors a
/// loop can carry in registers, of near-equal sizes: each column vector
/// holds `perVector` registers across the loop, beside `fixed` others.
/// Returns the blocks' bounds (first vectors, then the end). More than the
/// register file holds spills the sums to the stack on every iteration:
/// with AVX2's 16 registers, linear attention's recurrence over V = 64
/// (8 vectors, two steps a pass) held 32 and ran at 0.2 of the FMA peak.
llvm::SmallVector<size_t> columnBlocks(const CpuTarget &target, size_t vectors,
                                       int64_t perVector, int64_t fixed);

/// The masks of a row of `n` elements in vectors of `lanes` (all lanes but
/// in a ragged last vector).
llvm::SmallVector<mlir::Value> rowMasks(KernelBuilder &k, int64_t n,
                                        int64_t lanes);

/// The step whose rows a recurrence's step t prefetches: t + 32, clamped
/// to the last of nT steps. A head's consecutive rows lie H rows apart (a
/// page at H16 K64), where the hardware prefetchers stop; a step of a
/// K = V = 64 state takes about 80 ns, so 32 steps cover DRAM's latency
/// with room (8 and 16 were 4-8% slower on a Zen 5).
inline mlir::Value recurrencePrefetchStep(KernelBuilder &k, mlir::Value t,
                                          mlir::Value nT) {
  return k.mins(k.add(t, k.idx(32)), k.sub(nT, k.idx(1)));
}

} // namespace seqc

#endif // SEQC_PASSES_CPU_CPUKERNEL_H
