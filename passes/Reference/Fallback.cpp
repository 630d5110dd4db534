//===- Fallback.cpp - no silent fallbacks from the fast lowerings ---------===//
//
// A kernel lowering (seq-lower-to-cpu, seq-lower-to-gpu) applies the target's
// fast patterns and, for what they decline, the reference lowering. Taking
// the reference lowering is a fallback the user must hear of: a listener on
// the rewrite records why each fast pattern declined an op
// (notifyMatchFailure), and when a reference pattern then takes the op, or
// a matmul is left for the generic loops, it emits a remark naming the op,
// its types and the reasons; with `strict` an error that fails the pass
// (SPEC section 3, strict lowering).
//
//===----------------------------------------------------------------------===//

#include "Reference/Fallback.h"
#include "seqc/Passes.h"

#include "Seq/SeqDialect.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace seqc;

/// The label of every reference-lowering pattern inside a kernel lowering.
static constexpr llvm::StringLiteral kReferenceLabel = "seq-reference";

/// "seq.ssd (tensor<1x?x4x8xbf16>, ...) -> (...)".
static std::string describeOp(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName() << " (";
  llvm::interleaveComma(op->getOperandTypes(), os);
  os << ") -> (";
  llvm::interleaveComma(op->getResultTypes(), os);
  os << ")";
  return text;
}

namespace {
class FallbackReporter : public RewriterBase::Listener {
public:
  explicit FallbackReporter(const FallbackPolicy &policy) : policy(policy) {}

  void notifyPatternBegin(const Pattern &pattern, Operation *op) override {
    current = op;
    pendingReference.reset();
    if (llvm::is_contained(pattern.getDebugLabels(), kReferenceLabel))
      pendingReference = Fallback{describeOp(op), op->getLoc(), declined(op)};
  }

  void
  notifyMatchFailure(Location loc,
                     function_ref<void(Diagnostic &)> reasonCallback) override {
    if (!current)
      return;
    Diagnostic reason(loc, DiagnosticSeverity::Remark);
    reasonCallback(reason);
    std::vector<std::string> &list = reasons[current];
    std::string text = reason.str();
    if (!llvm::is_contained(list, text))
      list.push_back(text);
  }

  void notifyPatternEnd(const Pattern &, LogicalResult status) override {
    if (succeeded(status) && pendingReference)
      report(*pendingReference, "takes the reference lowering");
    pendingReference.reset();
    current = nullptr;
  }

  void notifyOperationErased(Operation *op) override { reasons.erase(op); }

  /// Matmuls no fast pattern took stay for the generic loops.
  void reportUnloweredMatmuls(Operation *module) {
    module->walk([&](Operation *op) {
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op))
        report({describeOp(op), op->getLoc(), declined(op)},
               "is left to generic loops");
    });
  }

  bool failedStrict() const { return strictFailure; }

private:
  struct Fallback {
    std::string op;
    Location loc;
    std::string why;
  };

  std::string declined(Operation *op) const {
    auto it = reasons.find(op);
    if (it == reasons.end() || it->second.empty())
      return "no fast " + policy.target.str() + " kernel handles this op";
    return llvm::join(it->second, "; ");
  }

  void report(const Fallback &f, StringRef what) {
    DiagnosticSeverity severity =
        policy.strict ? DiagnosticSeverity::Error : DiagnosticSeverity::Remark;
    // Through the engine, not op->emit: the op may be gone already.
    InFlightDiagnostic diag =
        f.loc.getContext()->getDiagEngine().emit(f.loc, severity);
    diag << f.op << " " << what << " instead of a fast " << policy.target
         << " kernel: " << f.why;
    if (policy.strict)
      strictFailure = true;
  }

  FallbackPolicy policy;
  Operation *current = nullptr;
  std::optional<Fallback> pendingReference;
  llvm::DenseMap<Operation *, std::vector<std::string>> reasons;
  bool strictFailure = false;
};
} // namespace

LogicalResult seqc::applyKernelLowerings(Operation *module,
                                         RewritePatternSet &&patterns,
                                         const FallbackPolicy &policy) {
  RewritePatternSet reference(module->getContext());
  populateReferenceScanPatterns(reference);
  populateReferenceStateSpacePatterns(reference);
  populateReferenceAttentionPatterns(reference);
  populateReferenceDeltaRulePatterns(reference);
  populateReferenceConvPatterns(reference);
  populateReferenceMoEPatterns(reference);
  for (std::unique_ptr<RewritePattern> &p : reference.getNativePatterns()) {
    p->addDebugLabels(kReferenceLabel);
    patterns.add(std::move(p));
  }

  FallbackReporter reporter(policy);
  GreedyRewriteConfig config;
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  config.enableFolding(false);
  config.enableConstantCSE(false);
  config.setListener(&reporter);
  if (failed(applyPatternsGreedily(module, std::move(patterns), config)))
    return failure();
  reporter.reportUnloweredMatmuls(module);
  return failure(reporter.failedStrict());
}
