//===- SeqDialect.cpp - the seq dialect -----------------------------------===//

#include "Seq/SeqDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;
using namespace seqc::seq;

#include "Seq/SeqDialect.cpp.inc"
#include "Seq/SeqEnums.cpp.inc"
#include "Seq/SeqInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "Seq/SeqAttrs.cpp.inc"

/// Upstream's parser prefixes every error of a custom op's parser with
/// "custom op 'NAME' ", and ODS's attribute checks start theirs with
/// "'NAME' op ": an invalid attribute value said the op's name twice. The
/// handler rewrites such a message in place and passes it on (failure():
/// the tool's own handler, registered earlier, reports it).
static LogicalResult polishDiagnostic(Diagnostic &diag) {
  std::string text = diag.str();
  size_t at = text.find("custom op '");
  if (at == std::string::npos)
    return failure();
  size_t nameEnd = text.find('\'', at + 11);
  if (nameEnd == std::string::npos)
    return failure();
  std::string quoted = text.substr(at + 10, nameEnd - at - 9); // 'NAME'
  std::string doubled = "custom op " + quoted + " " + quoted + " op ";
  if (text.compare(at, doubled.size(), doubled) != 0)
    return failure();
  std::string fixed =
      text.substr(0, at) + quoted + " op " + text.substr(at + doubled.size());
  for (DiagnosticArgument &arg : diag.getArguments())
    arg = DiagnosticArgument(StringRef());
  diag << std::move(fixed);
  return failure();
}

namespace {
/// seq ops hold no state of their own and refer to nothing outside their
/// operands: a call's body inlines like any tensor code (rank-local steps
/// analyse the graph inlined, through func calls).
struct SeqInlinerInterface : DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void SeqDialect::initialize() {
  addInterfaces<SeqInlinerInterface>();
  getContext()->getDiagEngine().registerHandler(polishDiagnostic);
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Seq/SeqAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "Seq/SeqOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Plans (seq-select-strategy)
//===----------------------------------------------------------------------===//

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               PlanKind kind, int64_t chunk) {
  if (kind == PlanKind::chunked && chunk <= 0)
    return emitError() << "a chunked plan needs a chunk size above 0, got "
                       << chunk;
  if (kind != PlanKind::chunked && chunk != 0)
    return emitError() << "only a chunked plan has a chunk size";
  return success();
}

/// `seq.plan` is a #seq.plan on an op that has a choice of plans, and the
/// plan is one that op has: a global plan only for non-causal linear
/// attention, which has no other. Other `seq.` attributes (seq.name,
/// seq.note, seq.profile_regions) are annotations kept as they are.
LogicalResult SeqDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  if (attr.getName() != kPlanAttrName)
    return success();
  auto plan = dyn_cast<PlanAttr>(attr.getValue());
  if (!plan)
    return op->emitError() << "'" << kPlanAttrName
                           << "' must be a #seq.plan, got " << attr.getValue();
  bool global = plan.getKind() == PlanKind::global;
  if (auto la = dyn_cast<LinearAttentionOp>(op)) {
    if (global != !la.getCausal())
      return op->emitError()
             << "non-causal linear attention has the global plan only, "
                "causal linear attention never (got "
             << plan << ")";
    return success();
  }
  if (isa<SsdOp, DeltaRuleOp>(op)) {
    if (global)
      return op->emitError() << op->getName() << " has no global plan";
    return success();
  }
  return op->emitError() << "'" << kPlanAttrName << "' is for seq.ssd, "
                         << "seq.linear_attention and seq.delta_rule, not "
                         << op->getName();
}

//===----------------------------------------------------------------------===//
// Misspellings
//===----------------------------------------------------------------------===//

StringRef seqc::seq::nearestName(StringRef name, ArrayRef<StringRef> known) {
  // A likely misspelling: a few edits, and fewer than half the letters.
  // The bound also keeps a very long name from costing a full edit-distance
  // table per candidate.
  unsigned allowed =
      std::max<unsigned>(1, std::min<size_t>(3, name.size() / 2));
  StringRef best;
  unsigned bestDistance = allowed + 1;
  for (StringRef candidate : known) {
    unsigned d = name.edit_distance(candidate, /*AllowReplacements=*/true,
                                    /*MaxEditDistance=*/allowed + 1);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return bestDistance <= allowed ? best : StringRef();
}

LogicalResult seqc::seq::verifyKnownAttributes(Operation *op,
                                               ArrayRef<StringRef> inherent) {
  for (NamedAttribute attr : op->getDiscardableAttrs()) {
    StringRef name = attr.getName().strref();
    if (name.contains('.'))
      continue;
    InFlightDiagnostic diag = op->emitOpError()
                              << "has no attribute '" << name << "'";
    // Internal names (operandSegmentSizes) are not for users to write.
    SmallVector<StringRef> userNames;
    for (StringRef n : inherent)
      if (n != "operandSegmentSizes" && n != "resultSegmentSizes")
        userNames.push_back(n);
    if (StringRef near = nearestName(name, userNames); !near.empty())
      diag << " (did you mean '" << near << "'?)";
    else if (userNames.empty())
      diag << " (it takes none)";
    else
      diag << " (its attributes: " << llvm::join(userNames, ", ") << ")";
    return diag;
  }
  return success();
}

/// The parser of every `seq.NAME` that is not an op: an error naming the
/// nearest op. (A ParseOpHook is a function_ref, so this is a plain
/// function; the name it was called for is in the operation state.)
static ParseResult rejectUnknownOp(OpAsmParser &parser, OperationState &state) {
  StringRef unknown = state.name.getStringRef();
  SmallVector<StringRef> names;
  for (RegisteredOperationName op :
       parser.getContext()->getRegisteredOperations())
    if (op.getDialectNamespace() == "seq")
      names.push_back(op.getStringRef());
  InFlightDiagnostic diag = parser.emitError(parser.getNameLoc())
                            << "is not an op of the seq dialect";
  if (StringRef near = nearestName(unknown, names); !near.empty())
    diag << " (did you mean '" << near << "'?)";
  return failure();
}

std::optional<Dialect::ParseOpHook>
SeqDialect::getParseOperationHook(StringRef) const {
  return ParseOpHook(rejectUnknownOp);
}
