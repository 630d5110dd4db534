//===- ElementwiseStage.cpp - elementwise ops applied inside kernels ------===//

#include "Common/ElementwiseStage.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace seqc;

/// The inputs' accesses and the body's checks shared by both forms;
/// `reduction` allows the output block argument in one final addf.
static std::optional<ElementwiseStage> matchBody(linalg::GenericOp op,
                                                 bool reduction) {
  if (!op || !op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumLoops() != 2 ||
      op.getNumReductionLoops() != (reduction ? 1u : 0u))
    return std::nullopt;
  if (reduction &&
      op.getIteratorTypesArray()[1] != utils::IteratorType::reduction)
    return std::nullopt;
  auto out = dyn_cast<RankedTensorType>(op.getResult(0).getType());
  if (!out || !out.getElementType().isF32())
    return std::nullopt;
  MLIRContext *ctx = op.getContext();
  AffineMap full = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap row = AffineMap::get(2, 0, getAffineDimExpr(0, ctx));
  AffineMap col = AffineMap::get(2, 0, getAffineDimExpr(1, ctx));
  if (op.getIndexingMapsArray().back() != (reduction ? row : full))
    return std::nullopt;

  ElementwiseStage stage{op, {}, Value()};
  for (OpOperand *in : op.getDpsInputOperands()) {
    auto type = dyn_cast<RankedTensorType>(in->get().getType());
    if (!type || !type.getElementType().isF32())
      return std::nullopt;
    AffineMap map = op.getMatchingIndexingMap(in);
    if (map == full)
      stage.access.push_back(ElementwiseStage::Access::Full);
    else if (map == row)
      stage.access.push_back(ElementwiseStage::Access::Row);
    else if (map == col)
      stage.access.push_back(ElementwiseStage::Access::Col);
    else
      return std::nullopt;
  }
  // The body: arith and math on f32 (and i1 from comparisons), nothing
  // captured but constants, and the output read only by a final sum.
  Block &body = op.getRegion().front();
  Value acc = body.getArgument(body.getNumArguments() - 1);
  Value yielded = body.getTerminator()->getOperand(0);
  stage.result = yielded;
  if (reduction) {
    auto add = yielded.getDefiningOp<arith::AddFOp>();
    if (!add || !acc.hasOneUse())
      return std::nullopt;
    if (add.getLhs() == acc)
      stage.result = add.getRhs();
    else if (add.getRhs() == acc)
      stage.result = add.getLhs();
    else
      return std::nullopt;
    if (stage.result == acc)
      return std::nullopt;
  } else if (!acc.use_empty()) {
    return std::nullopt;
  }
  for (Operation &inner : body.without_terminator()) {
    if (!isa<arith::ArithDialect, math::MathDialect>(inner.getDialect()))
      return std::nullopt;
    for (Type t : inner.getResultTypes())
      if (!t.isF32() && !t.isInteger(1))
        return std::nullopt;
  }
  SetVector<Value> captured;
  getUsedValuesDefinedAbove(op.getRegion(), captured);
  for (Value v : captured)
    if (!v.getDefiningOp<arith::ConstantOp>())
      return std::nullopt;
  return stage;
}

std::optional<ElementwiseStage> ElementwiseStage::match(linalg::GenericOp op) {
  return matchBody(op, /*reduction=*/false);
}

std::optional<ElementwiseStage>
ElementwiseStage::matchRowSum(linalg::GenericOp op) {
  return matchBody(op, /*reduction=*/true);
}

Value ElementwiseStage::emit(KernelBuilder &kb, int64_t lanes, Value row,
                             Value col, ValueRange buffers, int givenInput,
                             Value given, Value mask) const {
  ImplicitLocOpBuilder &b = kb.builder();
  linalg::GenericOp generic = op;
  Block &body = generic.getRegion().front();
  IRMapping map;
  for (unsigned i = 0; i < access.size(); ++i) {
    Value v;
    if (static_cast<int>(i) == givenInput) {
      v = given;
    } else if (access[i] == Access::Row) {
      v = kb.splat(kb.mload(buffers[i], {row}), lanes);
    } else {
      SmallVector<Value> ivs;
      if (access[i] == Access::Full)
        ivs.push_back(row);
      ivs.push_back(col);
      v = mask ? kb.vloadMasked(buffers[i], ivs, lanes, mask)
               : kb.vload(buffers[i], ivs, lanes);
    }
    map.map(body.getArgument(i), v);
  }
  // Constants captured from the enclosing function, as vectors.
  SetVector<Value> captured;
  getUsedValuesDefinedAbove(generic.getRegion(), captured);
  for (Value c : captured) {
    Operation *cst = b.clone(*c.getDefiningOp());
    map.map(c, kb.splat(cst->getResult(0), lanes));
  }
  Value acc = body.getArgument(body.getNumArguments() - 1);
  for (Operation &inner : body.without_terminator()) {
    // A row sum's final accumulation is the caller's.
    if (llvm::is_contained(inner.getOperands(), acc))
      continue;
    if (auto cst = dyn_cast<arith::ConstantOp>(inner)) {
      Operation *scalar = b.clone(inner);
      map.map(cst.getResult(), kb.splat(scalar->getResult(0), lanes));
      continue;
    }
    // The same op on vectors: clone, then widen the result types.
    Operation *copy = b.clone(inner, map);
    for (Value r : copy->getResults())
      r.setType(VectorType::get({lanes}, r.getType()));
  }
  return map.lookup(result);
}

Operation *seqc::soleComputeUser(Value v) {
  Operation *user = nullptr;
  for (Operation *u : v.getUsers()) {
    if (isa<tensor::DimOp>(u))
      continue;
    if (user && user != u)
      return nullptr;
    user = u;
  }
  return user;
}
