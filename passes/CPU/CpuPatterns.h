//===- CpuPatterns.h - the fast CPU lowerings of seq ops --------*- C++ -*-===//

#ifndef SEQC_PASSES_CPUPATTERNS_H
#define SEQC_PASSES_CPUPATTERNS_H

#include "CPU/CpuKernel.h"

#include "mlir/IR/PatternMatch.h"

namespace seqc {

/// Fast lowerings, one entry per op family. Their patterns have benefit 2
/// and decline (failure) where they do not apply (element types, shapes),
/// leaving the op to the reference lowering (benefit 1).
void populateCpuScanPatterns(mlir::RewritePatternSet &patterns,
                             const CpuTarget &target);
void populateCpuSelectiveScanPatterns(mlir::RewritePatternSet &patterns,
                                      const CpuTarget &target);

void populateCpuSsdPatterns(mlir::RewritePatternSet &patterns,
                            const CpuTarget &target);
void populateCpuLinearAttentionPatterns(mlir::RewritePatternSet &patterns,
                                        const CpuTarget &target);
/// seq.delta_rule and seq.generalized_delta_rule.
void populateCpuDeltaRulePatterns(mlir::RewritePatternSet &patterns,
                                  const CpuTarget &target);
void populateCpuAttentionPatterns(mlir::RewritePatternSet &patterns,
                                  const CpuTarget &target);
void populateCpuMoEPatterns(mlir::RewritePatternSet &patterns,
                            const CpuTarget &target);
/// 2-D elementwise linalg.generic ops and row sums (f32) of the graph.
/// With `fuse`, leaves the ones a matmul kernel absorbs to it.
void populateCpuElementwisePatterns(mlir::RewritePatternSet &patterns,
                                    const CpuTarget &target, bool fuse);
/// linalg.matmul / linalg.batch_matmul of the graph (f32, row-major); with
/// `fuse`, with the elementwise producer of A and consumer of the result.
void populateCpuMatmulPatterns(mlir::RewritePatternSet &patterns,
                               const CpuTarget &target, bool fuse);

} // namespace seqc

#endif // SEQC_PASSES_CPUPATTERNS_H
