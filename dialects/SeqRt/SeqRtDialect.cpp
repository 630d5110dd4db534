//===- SeqRtDialect.cpp - seqc's internal runtime-ABI ops -----------------===//

#include "SeqRt/SeqRtDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace seqc::seq_rt;

#include "SeqRt/SeqRtDialect.cpp.inc"

void SeqRtDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "SeqRt/SeqRtOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// check
//===----------------------------------------------------------------------===//

LogicalResult CheckOp::verify() {
  StringRef msg = getMessage();
  if (msg.empty())
    return emitOpError() << "needs a message";
  for (size_t pos = msg.find('{'); pos != StringRef::npos;
       pos = msg.find('{', pos + 1)) {
    size_t end = msg.find('}', pos);
    unsigned index;
    if (end == StringRef::npos ||
        msg.substr(pos + 1, end - pos - 1).getAsInteger(10, index))
      return emitOpError() << "malformed placeholder in message";
    if (index >= getArgs().size())
      return emitOpError() << "message refers to {" << index << "} but only "
                           << getArgs().size() << " values are given";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// parallel_for
//===----------------------------------------------------------------------===//

LogicalResult
ParallelForOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto fn = symbolTable.lookupNearestSymbolFrom<FunctionOpInterface>(
      *this, getCalleeAttr());
  if (!fn)
    return emitOpError() << "refers to an unknown function " << getCalleeAttr();
  ArrayRef<Type> inputs = fn.getArgumentTypes();
  if (inputs.size() != getArgs().size() + 2 || !inputs[0].isIndex() ||
      !inputs[1].isIndex())
    return emitOpError() << "callee must take (index, index) followed by the "
                         << getArgs().size() << " shared arguments";
  for (auto [i, arg] : llvm::enumerate(getArgs()))
    if (arg.getType() != inputs[i + 2])
      return emitOpError() << "argument #" << i << " has type " << arg.getType()
                           << " but the callee expects " << inputs[i + 2];
  if (!fn.getResultTypes().empty())
    return emitOpError() << "callee must not return values";
  return success();
}

/// A check whose condition is statically true can never fail.
LogicalResult CheckOp::canonicalize(CheckOp op, PatternRewriter &rewriter) {
  if (!matchPattern(op.getCondition(), m_One()))
    return failure();
  rewriter.eraseOp(op);
  return success();
}

#define GET_OP_CLASSES
#include "SeqRt/SeqRtOps.cpp.inc"
