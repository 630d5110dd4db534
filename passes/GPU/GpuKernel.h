//===- GpuKernel.h - GPU kernels in barrier-separated phases ----*- C++ -*-===//
//
// The GPU lowerings write a kernel as what one thread block does: shared
// buffers, block-uniform control flow, and *phases* — "for every i in [0, n),
// body(i)" spread over the block's threads and ended by a barrier. Values
// cross phases only through shared or global memory, except the per-warp
// register arrays of warp phases (tensor-core accumulators, GpuMma.h).
//
// That form has two faithful executions:
//  - on the GPU: a gpu.launch with workgroup attributions (shared memory);
//    a phase is a thread-strided loop followed by gpu.barrier;
//  - emulated on the CPU (`emulate`): one task of the thread pool per block,
//    shared buffers on the task's stack, a phase a plain loop over i. Threads
//    between two barriers are independent, so running them one after another
//    is one of the executions the GPU may pick.
// The emulation runs the very IR the GPU runs, so the kernels' logic is
// tested against numpy on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_GPUKERNEL_H
#define SEQC_PASSES_GPUKERNEL_H

#include "Common/ItemKernels.h"
#include "Common/KernelBuilder.h"
#include "Common/Kernels.h"
#include "GPU/GpuMma.h"
#include "Transforms/Strategy.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <string>

namespace seqc {

/// What the GPU lowerings know of the device they compile for.
struct GpuTarget {
  /// Run the kernels' IR on the host instead (tests without a GPU).
  bool emulate = false;
  /// Threads per block of the lowerings' kernels.
  int64_t blockThreads = 256;
  /// The compute capability compiled for (80 for sm_80, 90 for sm_90a).
  int64_t smVersion = 80;

  /// Whether bf16 / f16 products may use mma.sync (sm_80 and later).
  bool tensorCores() const { return smVersion >= 80; }
  /// This GPU as the strategy sees it (Transforms/Strategy.h).
  TargetDescription describe() const {
    return TargetDescription::gpu(smVersion);
  }
  /// The multiplicand type of tensor-core products over `operands` (null
  /// values skipped): their common element type when it is bf16, or f16
  /// with `allowF16`, and the chip has tensor cores; else null. Kernels
  /// that round f32 intermediates to it pass allowF16 = false: f16's range
  /// (65504) could overflow.
  mlir::Type tensorCoreType(ValueRange operands, bool allowF16) const;
};

/// One thread block of a kernel being emitted.
class GpuBlock {
public:
  GpuBlock(KernelBuilder &kb, Value blockId, Value threadId, int64_t threads,
           bool emulate)
      : kb(kb), blockId(blockId), threadId(threadId), threads(threads),
        emulate(emulate) {}

  KernelBuilder &kb;
  /// This block's index in [0, blocks).
  Value blockId;

  /// body(i) for every i in [0, n), spread over the block's threads, then a
  /// barrier (unless `barrier` is false: the last phase of a kernel).
  void phase(Value n, const std::function<void(Value)> &body,
             bool barrier = true);
  /// A phase over a 2-D index space [0, rows) x [0, cols).
  void phase2(Value rows, Value cols,
              const std::function<void(Value, Value)> &body,
              bool barrier = true);

  /// Warps per block.
  int64_t numWarps() const { return threads / 32; }
  /// A per-lane array of `size` f32 for every warp of the block, alive for
  /// the whole kernel (create it before the loops that use it).
  WarpRegisters warpRegisters(int64_t size);
  /// A warp phase: body(warp) for every item in [0, n), each run by a whole
  /// warp (item i by warp i mod numWarps()), then a barrier. Values may
  /// stay in a warp's registers from one warp phase to the next.
  void warps(Value n, const std::function<void(Warp &)> &body,
             bool barrier = true);

private:
  Value threadId; // null when emulated
  int64_t threads;
  bool emulate;
  Value mmaTileA, mmaTileB; // emulated mma.sync's operand tiles
};

using GpuBlockBody =
    std::function<void(GpuBlock &block, ValueRange args, ValueRange shared)>;

/// Emits a kernel of `blocks` thread blocks at the builder's insertion point.
/// `args` are the memrefs and sizes the kernel uses (in the body, use the
/// values `body` receives); `shared` the static shapes of its f32 shared
/// buffers. `name` names the emulated kernel's function.
void emitGpuKernel(mlir::ImplicitLocOpBuilder &b, const GpuTarget &target,
                   llvm::StringRef name, Value blocks, ValueRange args,
                   llvm::ArrayRef<llvm::SmallVector<int64_t>> shared,
                   const GpuBlockBody &body);

/// A kernel of one independent item per thread: `body(kb, item, args)` for
/// every item in [0, count), `blockThreads` items per block.
void emitItemKernel(
    mlir::ImplicitLocOpBuilder &b, const GpuTarget &target,
    llvm::StringRef name, KernelBuilder &kb, Value count, ValueRange args,
    const std::function<void(KernelBuilder &, Value, ValueRange)> &body);

/// Whether every operand and result has a float element type (f32, f16 or
/// bf16: GPU kernels widen loads to f32 and narrow stores).
bool allFloat(mlir::Operation *op);

/// The GPU's item dispatch: a thread per item (emitItemKernel); float
/// operands of every width (loads widen to f32, stores narrow), and any
/// element type for associative_scan, whose combiner takes them as they are.
class GpuItemDispatch : public ItemDispatch {
public:
  explicit GpuItemDispatch(const GpuTarget &target) : target(target) {}
  void emit(mlir::ImplicitLocOpBuilder &b, llvm::StringRef name,
            KernelBuilder &kb, Value count, ValueRange args,
            const ItemBody &body) const override;
  bool adjacentItemsShareLines() const override { return true; }
  std::string unsupportedTypes(mlir::Operation *op) const override;

private:
  GpuTarget target;
};

} // namespace seqc

#endif // SEQC_PASSES_GPUKERNEL_H
