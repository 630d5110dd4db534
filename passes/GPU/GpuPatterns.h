//===- GpuPatterns.h - the GPU lowerings of seq ops -------------*- C++ -*-===//

#ifndef SEQC_PASSES_GPUPATTERNS_H
#define SEQC_PASSES_GPUPATTERNS_H

#include "GPU/GpuKernel.h"

#include "mlir/IR/PatternMatch.h"

namespace seqc {

/// GPU kernels, one entry per op family. Their patterns have benefit 2 and
/// decline where they do not apply, leaving the op to the reference lowering
/// (which then runs on the host, over managed memory).
void populateGpuScanPatterns(mlir::RewritePatternSet &patterns,
                             const GpuTarget &target);
void populateGpuSsdPatterns(mlir::RewritePatternSet &patterns,
                            const GpuTarget &target);
void populateGpuLinearAttentionPatterns(mlir::RewritePatternSet &patterns,
                                        const GpuTarget &target);
/// seq.delta_rule and seq.generalized_delta_rule.
void populateGpuDeltaRulePatterns(mlir::RewritePatternSet &patterns,
                                  const GpuTarget &target);
void populateGpuMoEPatterns(mlir::RewritePatternSet &patterns,
                            const GpuTarget &target);
/// The graph's linalg ops (named ones generalized): a thread per element of
/// the outputs, reductions looped by it.
void populateGpuLinalgPatterns(mlir::RewritePatternSet &patterns,
                               const GpuTarget &target);
void populateGpuAttentionPatterns(mlir::RewritePatternSet &patterns,
                                  const GpuTarget &target);

} // namespace seqc

#endif // SEQC_PASSES_GPUPATTERNS_H
