//===- ReferencePatterns.h - helpers the fast lowerings share ---*- C++ -*-===//

#ifndef SEQC_PASSES_REFERENCE_REFERENCEPATTERNS_H
#define SEQC_PASSES_REFERENCE_REFERENCEPATTERNS_H

#include "Common/KernelBuilder.h"

namespace seqc {

/// MoE helpers shared by the reference and fast lowerings (LowerMoE.cpp):
/// run-time checks that every expert index is in [0, E) (naming the first
/// bad one), and the per-expert capacity ceil(C k T / E) (T k when C = 0).
void emitExpertIndexChecks(KernelBuilder &kb, Value indices, Value T, Value K,
                           Value E);
Value expertCapacity(KernelBuilder &kb, double capacityFactor, Value T, Value K,
                     Value E);

/// The router's load-balancing statistics (SPEC 2.10): `probSum` (E, f32)
/// plus the softmax of token t's plain logits (T x E).
Value addTokenProbabilities(KernelBuilder &kb, Value logits, Value t, Value E,
                            Value probSum);
/// aux = coef * E * sum_i f_i P_i from the first-choice counts and the
/// probability sums (E, f32) of T tokens (0 for none), as `auxType`.
Value routeAuxLoss(KernelBuilder &kb, double coef, Value E, Value T,
                   Value firstCount, Value probSum,
                   mlir::RankedTensorType auxType);

} // namespace seqc

#endif // SEQC_PASSES_REFERENCE_REFERENCEPATTERNS_H
