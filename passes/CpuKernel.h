//===- CpuKernel.h - parallel CPU kernels emitted by lowerings --*- C++ -*-===//
//
// The fast CPU lowerings turn a seq op on tensors into one or more kernel
// functions on memrefs, run over a task space on the runtime's thread pool:
//
//   %xb = bufferization.to_buffer %x read_only        (operands)
//   %yb = memref.alloc(...)                            (results)
//   seq.parallel_for %tasks, @__seqc_kernel(%xb, %yb, ...)
//   %y = bufferization.to_tensor %yb restrict writable
//
// One-shot bufferization then connects the kernels to the rest of the graph.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_CPUKERNEL_H
#define SEQC_PASSES_CPUKERNEL_H

#include "KernelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"

namespace seqc {

/// What the CPU lowerings know of the machine they compile for.
struct CpuTarget {
  /// f32 lanes of the widest vector the host computes with (AVX-512: 16,
  /// AVX2: 8, NEON/SSE: 4).
  int64_t vectorWidth = 8;
  /// Per-core data cache sizes in bytes.
  int64_t l1Bytes = 32 * 1024;
  int64_t l2Bytes = 1024 * 1024;

  /// The host, from its CPU features and cache geometry.
  static CpuTarget host();
};

/// The body of one task: `task` in [0, count), `args` the kernel's view of
/// the shared arguments.
using TaskBody =
    std::function<void(KernelBuilder &kb, Value task, ValueRange args)>;

/// Creates `func.func private @<name>(%begin: index, %end: index, args...)`
/// that runs `body` for every task in [begin, end), and dispatches it over
/// [0, count) with seq.parallel_for at the builder's insertion point.
void emitParallelKernel(mlir::ImplicitLocOpBuilder &b, llvm::StringRef name,
                        Value count, ValueRange args, const TaskBody &body);

/// The buffer of `tensor` (identity layout), for reading.
Value readBuffer(mlir::ImplicitLocOpBuilder &b, Value tensor);
/// A new buffer for a result of type `type` with dimension sizes `sizes`.
Value allocBuffer(mlir::ImplicitLocOpBuilder &b, mlir::RankedTensorType type,
                  ValueRange sizes);
/// The tensor a kernel wrote into `buffer`.
Value asTensor(mlir::ImplicitLocOpBuilder &b, Value buffer,
               mlir::RankedTensorType type);

inline int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/// Whether every operand and result of `op` has an f32 element type (the
/// fast kernels' type; others take the reference lowering).
bool allF32(mlir::Operation *op);

/// What a kernel lowering does with an op no fast pattern takes: a remark
/// naming the op and why each fast pattern declined it, or, `strict`, an
/// error that fails the pass. `target` names the fast path ("CPU", "GPU").
struct FallbackPolicy {
  llvm::StringRef target;
  bool strict = false;
};

/// Applies `patterns` (kernel lowerings, then the reference lowering of
/// every op family for whatever they decline) to `module`: kernels are
/// created at module level while their callers are rewritten, and nothing
/// folds (to_buffer(to_tensor(m)) would fold to m, hiding a kernel's read of
/// its input from the bufferization analysis; see Pipelines.cpp). Every
/// fallback is reported as `policy` says (FallbackReport.cpp); fast patterns
/// decline with rewriter.notifyMatchFailure(op, reason) so the report can
/// say why.
mlir::LogicalResult applyKernelLowerings(mlir::Operation *module,
                                         mlir::RewritePatternSet &&patterns,
                                         const FallbackPolicy &policy);

} // namespace seqc

#endif // SEQC_PASSES_CPUKERNEL_H
