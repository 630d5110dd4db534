//===- OutlineOps.cpp - one function per compute op, for measuring --------===//

#include "seqc/Passes.h"

#include "Seq/SeqDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"

namespace seqc {
#define GEN_PASS_DEF_SEQOUTLINEOPS
#include "passes/Transforms/Passes.h.inc"
} // namespace seqc

using namespace mlir;

/// Ops that compute (read and write tensor data), as opposed to views,
/// constants and shape arithmetic.
static bool isComputeOp(Operation *op) {
  if (isa<seqc::seq::SeqDialect>(op->getDialect()) && op->getNumResults() > 0)
    return true;
  if (isa<linalg::LinalgOp>(op) || isa<tensor::ConcatOp>(op))
    return true;
  if (isa<arith::ArithDialect, math::MathDialect>(op->getDialect()))
    return llvm::any_of(op->getResultTypes(),
                        [](Type t) { return isa<RankedTensorType>(t); });
  return false;
}

namespace {
struct SeqOutlineOps : seqc::impl::SeqOutlineOpsBase<SeqOutlineOps> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    unsigned counter = 0;
    for (func::FuncOp fn : funcs) {
      if (fn.isDeclaration())
        continue;
      SmallVector<Operation *> ops;
      for (Operation &op : fn.getBody().front())
        if (isComputeOp(&op))
          ops.push_back(&op);
      unsigned index = 0;
      for (Operation *op : ops)
        outline(module, symbols, fn, op, index++, counter++);
    }
  }

  void outline(ModuleOp module, SymbolTable &symbols, func::FuncOp parent,
               Operation *op, unsigned index, unsigned counter) {
    // Arguments: the operands and the values the op's regions capture,
    // except constants, which are cloned.
    SetVector<Value> captured;
    getUsedValuesDefinedAbove(op->getRegions(), captured);
    SmallVector<Value> args;
    SmallVector<Value> constants;
    auto consider = [&](Value v) {
      if (v.getDefiningOp<arith::ConstantOp>()) {
        if (!llvm::is_contained(constants, v))
          constants.push_back(v);
      } else if (!llvm::is_contained(args, v)) {
        args.push_back(v);
      }
    };
    for (Value v : op->getOperands())
      consider(v);
    for (Value v : captured)
      consider(v);

    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    SmallVector<Type> argTypes;
    for (Value v : args)
      argTypes.push_back(v.getType());
    auto fn = func::FuncOp::create(
        b, op->getLoc(), "__seqc_op_" + std::to_string(counter),
        b.getFunctionType(argTypes, op->getResultTypes()));
    fn.setPrivate();
    symbols.insert(fn);
    Block *body = fn.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping map;
    for (auto [v, a] : llvm::zip(args, body->getArguments()))
      map.map(v, a);
    for (Value c : constants)
      map.map(c, b.clone(*c.getDefiningOp())->getResult(0));
    Operation *copy = b.clone(*op, map);
    func::ReturnOp::create(b, op->getLoc(), copy->getResults());

    OpBuilder at(op);
    auto call = func::CallOp::create(at, op->getLoc(), fn, args);
    call->setAttr("seq.name", at.getStringAttr(parent.getSymName() + ":" +
                                               std::to_string(index) + " " +
                                               op->getName().getStringRef()));
    op->replaceAllUsesWith(call.getResults());
    op->erase();
  }
};
} // namespace
