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

} // namespace seqc

#endif // SEQC_PASSES_REFERENCE_REFERENCEPATTERNS_H
