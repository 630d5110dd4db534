//===- Kernels.h - kernels on buffers, shared by every target ---*- C++ -*-===//
//
// The fast lowerings (CPU and GPU) turn a seq op on tensors into kernels on
// memrefs:
//
//   %xb = bufferization.to_buffer %x read_only        (operands)
//   %yb = memref.alloc(...)                            (results)
//   %yv = memref.cast %yb to a strided view            (what kernels write)
//   <kernels reading %xb, writing %yv>
//   %y = bufferization.to_tensor %yb restrict writable
//
// One-shot bufferization then connects the kernels to the rest of the graph.
// A CPU kernel (and an emulated GPU block) is a task of the runtime's thread
// pool, dispatched with seq_rt.parallel_for.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_COMMON_KERNELS_H
#define SEQC_PASSES_COMMON_KERNELS_H

#include "Common/KernelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include <functional>

namespace seqc {

/// The body of one task: `task` in [0, count), `args` the kernel's view of
/// the shared arguments.
using TaskBody =
    std::function<void(KernelBuilder &kb, Value task, ValueRange args)>;

/// Creates `func.func private @<name>(%begin: index, %end: index, args...)`
/// that runs `body` for every task in [begin, end), and dispatches it over
/// [0, count) with seq_rt.parallel_for at the builder's insertion point.
void emitParallelKernel(mlir::ImplicitLocOpBuilder &b, llvm::StringRef name,
                        Value count, ValueRange args, const TaskBody &body);

/// The buffer of `tensor` (identity layout), for reading.
Value readBuffer(mlir::ImplicitLocOpBuilder &b, Value tensor);
/// readBuffer of an optional operand: null when `tensor` is.
Value readOptionalBuffer(mlir::ImplicitLocOpBuilder &b, Value tensor);
/// A new buffer of type `type` with dimension sizes `sizes` (scratch, or a
/// result whose kernels need its static layout).
Value allocBuffer(mlir::ImplicitLocOpBuilder &b, mlir::RankedTensorType type,
                  ValueRange sizes);
/// A new buffer for the op's result of type `type`, as the strided view
/// kernels write through (the layout readBuffer gives inputs). When the
/// result is then copied into a slice of a larger buffer (each sequence of
/// a packed batch, each checkpoint), seq-write-results-in-place points the
/// view at that slice and the copy goes away.
Value allocResult(mlir::ImplicitLocOpBuilder &b, mlir::RankedTensorType type,
                  ValueRange sizes);
/// The tensor a kernel wrote into `buffer` (of allocBuffer, or the view of
/// allocResult: the tensor is then the allocation under the view, whose
/// identity layout crosses function boundaries without a copy).
Value asTensor(mlir::ImplicitLocOpBuilder &b, Value buffer,
               mlir::RankedTensorType type);

inline int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/// Whether c (scalars or vectors) is out of [2^-32, 2^32] or NaN. The
/// recurrences that defer their decay (the state held as c U, so that a
/// step's decay multiplies c alone) take k / c into U: they keep c in this
/// range, where k / c cannot overflow, and fold c into U when it leaves.
Value deferredScaleOutOfRange(KernelBuilder &k, Value c);

/// The values a region uses from above, for a kernel that inlines it: a
/// kernel function (a CPU task, an emulated GPU block) cannot see its
/// caller's values.
struct RegionCaptures {
  /// Values that travel as kernel arguments.
  llvm::SmallVector<Value> values;
  /// Constants recreated inside the kernel instead.
  llvm::SmallVector<mlir::Operation *> constants;

  static RegionCaptures of(mlir::Region &region);
  /// Whether every capture is a scalar: a kernel cannot take a tensor (or a
  /// dense constant) as an argument, so regions using one are left to the
  /// loop-based lowerings.
  bool scalarOnly() const;
  /// Inside the kernel: maps every capture, given the kernel's view of
  /// `values` (`args`), cloning the constants at the insertion point.
  mlir::IRMapping map(mlir::OpBuilder &b, ValueRange args) const;
};

/// The indices of `item` in the row-major index space of `sizes`.
llvm::SmallVector<Value> delinearize(KernelBuilder &kb, Value item,
                                     llvm::ArrayRef<Value> sizes);

} // namespace seqc

#endif // SEQC_PASSES_COMMON_KERNELS_H
