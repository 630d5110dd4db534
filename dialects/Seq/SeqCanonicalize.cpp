//===- SeqCanonicalize.cpp - folds and canonicalizations of seq ops -------===//

#include "Seq/SeqDialect.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace seqc::seq;

/// A check whose condition is statically true can never fail.
LogicalResult CheckOp::canonicalize(CheckOp op, PatternRewriter &rewriter) {
  if (!matchPattern(op.getCondition(), m_One()))
    return failure();
  rewriter.eraseOp(op);
  return success();
}
