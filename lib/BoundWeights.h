//===- BoundWeights.h - weights bound into a module when compiled -*- C++
//-*-===//

#ifndef SEQC_LIB_BOUNDWEIGHTS_H
#define SEQC_LIB_BOUNDWEIGHTS_H

#include "seqc/Engine.h"

#include "mlir/IR/BuiltinOps.h"

namespace seqc {

/// Makes every argument of `module`'s public functions that a weight of
/// `weights` names (its seq.name) that weight: an arith.constant of its
/// bytes at the function's entry, the argument removed from the signature
/// (CompileOptions::boundWeights). Fails, naming the weight, when a weight
/// names no argument, is given twice or is not contiguous, or when its
/// element type or shape differs from an argument's.
/// Checks what can be checked of `weights` without a module: distinct
/// names, contiguous data (what the compile and the cache key read: numel
/// elements from `data`), sizes that are not negative.
Status checkBoundWeights(const std::vector<BoundWeight> &weights);

Status bindWeights(mlir::ModuleOp module,
                   const std::vector<BoundWeight> &weights);

} // namespace seqc

#endif // SEQC_LIB_BOUNDWEIGHTS_H
