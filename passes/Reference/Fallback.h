//===- Fallback.h - fast lowerings over the reference one -------*- C++ -*-===//
//
// Each target's kernel lowering is a set of fast patterns (benefit 2) over
// the reference lowering of every op family (benefit 1), which takes what
// they decline. A decline is never silent: it is reported as a remark, or,
// strict, as an error (SPEC section 3).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_REFERENCE_FALLBACK_H
#define SEQC_PASSES_REFERENCE_FALLBACK_H

#include "mlir/IR/PatternMatch.h"

namespace seqc {

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
/// fallback is reported as `policy` says (Fallback.cpp); fast patterns
/// decline with rewriter.notifyMatchFailure(op, reason) so the report can
/// say why.
mlir::LogicalResult applyKernelLowerings(mlir::Operation *module,
                                         mlir::RewritePatternSet &&patterns,
                                         const FallbackPolicy &policy);

} // namespace seqc

#endif // SEQC_PASSES_REFERENCE_FALLBACK_H
