//===- LocalTokens.h - route and moe_ffn on a rank's tokens -----*- C++ -*-===//
//
// Under rank-local steps (seq-distribute-steps local=1) a MoE layer's tokens
// are each rank's own, as the sequence ops' steps are: rank r's after rank
// r - 1's. Routing is per token, and so is an expert's FFN; what counts
// every token crosses ranks, and only that:
//
//  - seq.route's aux loss (its first-choice counts and mean probabilities
//    over all tokens): each rank sums its tokens' and one all-reduce of
//    2 E floats and an all-gather of the token counts add them up.
//  - seq.moe_ffn's load and capacity (every expert takes ceil(C k T / E)
//    choices of all T tokens, in token order): one all-gather of each
//    rank's choices per expert and token count. A rank's choices of expert
//    e come after the ranks' before it, so it keeps those that find the
//    expert's count below the capacity, starting from the ranks' before
//    it; the dropped ones get a routing weight of 0 and the op runs
//    without capacity.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_LOCALTOKENS_H
#define SEQC_PASSES_TRANSFORMS_LOCALTOKENS_H

#include "Seq/SeqDialect.h"

namespace seqc {

/// Rewrites `op` (whose tokens are the rank's own) so that its results
/// equal the whole run's on the rank's tokens, and its aux the whole's.
void distributeLocalRoute(seq::RouteOp op, int64_t ranks);
/// The same for the experts: y on the rank's tokens, the whole's load.
void distributeLocalExperts(seq::MoeFfnOp op, int64_t ranks);

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_LOCALTOKENS_H
