//===- CpuPatterns.h - the fast CPU lowerings of seq ops --------*- C++ -*-===//

#ifndef SEQC_PASSES_CPUPATTERNS_H
#define SEQC_PASSES_CPUPATTERNS_H

#include "CpuKernel.h"

#include "mlir/IR/PatternMatch.h"

namespace seqc {

/// Fast lowerings, one entry per op family. Their patterns have benefit 2
/// and decline (failure) where they do not apply (element types, shapes),
/// leaving the op to the reference lowering (benefit 1).
void populateCpuScanPatterns(mlir::RewritePatternSet &patterns,
                             const CpuTarget &target);

} // namespace seqc

#endif // SEQC_PASSES_CPUPATTERNS_H
