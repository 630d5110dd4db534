//===- Passes.h - seqc passes and pipelines ---------------------*- C++ -*-===//

#ifndef SEQC_PASSES_H
#define SEQC_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include "Seq/SeqDialect.h"

#include <memory>

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace seqc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// Patterns of the reference lowering, one entry per op family.
void populateReferenceScanPatterns(mlir::RewritePatternSet &patterns);
void populateReferenceStateSpacePatterns(mlir::RewritePatternSet &patterns);
void populateReferenceAttentionPatterns(mlir::RewritePatternSet &patterns);
void populateReferenceConvPatterns(mlir::RewritePatternSet &patterns);
void populateReferenceMoEPatterns(mlir::RewritePatternSet &patterns);

/// Options shared by the CPU pipelines.
struct CpuPipelineOptions {
  /// Lower through the reference lowering (the oracle) instead of the fast
  /// chunked / vectorized one.
  bool reference = false;
  /// f32 lanes per vector for the fast kernels (0: the host's widest).
  int64_t vectorWidth = 0;
  /// Fuse elementwise glue into seq ops and matmuls (fast pipeline).
  bool fuse = true;
};

/// Tensor-level graph (seq + linalg/tensor/arith/math ops in func.func) to
/// the LLVM dialect for the host CPU.
void buildCpuPipeline(mlir::OpPassManager &pm, const CpuPipelineOptions &opts);

/// The part of the CPU pipeline after bufferization: memrefs, loops and
/// vectors to the LLVM dialect.
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm);

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace seqc

#endif // SEQC_PASSES_H
