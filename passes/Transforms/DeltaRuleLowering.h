//===- DeltaRuleLowering.h - the delta rules, lowered once per target -*-===//
//
// The delta rules are described once (Transforms/ChunkedForm.h for the
// chunked WY form, Transforms/DeltaRecurrence.h for the recurrence), and so
// is their lowering: one pattern checks the operands, follows the
// strategy's plan, describes the op in the plan's form and asks the target
// to emit that form's kernels. A target supplies only what differs per
// target (DeltaRuleTarget), as Triton's TargetInfoBase does for its
// algorithms: CPU/CpuDeltaRule.cpp and GPU/GpuDeltaRule.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_DELTARULELOWERING_H
#define SEQC_PASSES_TRANSFORMS_DELTARULELOWERING_H

#include "Transforms/ChunkedForm.h"
#include "Transforms/DeltaRecurrence.h"
#include "Transforms/Strategy.h"

#include "mlir/IR/PatternMatch.h"

#include <memory>
#include <string>

namespace seqc {

/// What one target supplies to lower seq.delta_rule and
/// seq.generalized_delta_rule.
class DeltaRuleTarget {
public:
  virtual ~DeltaRuleTarget() = default;

  /// The target as the strategy sees it (its plans).
  virtual TargetDescription describe() const = 0;
  /// Why the target's kernels decline `op` (element types, dynamic
  /// channels), or "" when they take it: the op is then reported and takes
  /// the reference lowering.
  virtual std::string declines(mlir::Operation *op) const = 0;
  /// Why the target's chunked kernels cannot run `op` although the plan is
  /// chunked (or ""): the recurrence runs instead, with a remark saying why.
  virtual std::string cannotChunk(mlir::Operation *op) const { return ""; }
  /// The chunked form's kernels for `op`, chunks of `chunk` steps.
  virtual void emitChunked(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                           mlir::Operation *op, const ChunkedForm &form,
                           Value batch, int64_t chunk) const = 0;
  /// The recurrence's kernel over `batch` sequences.
  virtual void emitRecurrent(mlir::ImplicitLocOpBuilder &b, KernelBuilder &kb,
                             const DeltaRecurrence &form,
                             Value batch) const = 0;
};

/// The delta rules' patterns (benefit 2) over `target`.
void populateDeltaRulePatterns(mlir::RewritePatternSet &patterns,
                               std::shared_ptr<const DeltaRuleTarget> target);

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_DELTARULELOWERING_H
