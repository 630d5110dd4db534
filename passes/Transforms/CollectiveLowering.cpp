//===- CollectiveLowering.cpp - what every target's collectives share -----===//

#include "Transforms/CollectiveLowering.h"

#include "EntryPoints.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/DLTI/DLTI.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;

bool seqc::onWholeLineGrid(Operation *op, FlatSymbolRefAttr gridName,
                           ArrayRef<shard::GridAxis> axes) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridName);
  return grid && grid.getRank() == 1 && axes.size() == 1;
}

Value seqc::peerRank(OpBuilder &b, Location loc, ArrayRef<int64_t> statics,
                     ValueRange dynamics) {
  Value peer =
      statics[0] == ShapedType::kDynamic
          ? dynamics[0]
          : arith::ConstantIndexOp::create(b, loc, statics[0]).getResult();
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), peer);
}

Value seqc::loadMpiCommunicator(OpBuilder &b, Location loc, ModuleOp module) {
  auto ptr = LLVM::LLVMPointerType::get(module.getContext());
  if (!module.lookupSymbol(rt::entry::kMpiCommunicator)) {
    OpBuilder top(module.getBodyRegion());
    LLVM::GlobalOp::create(top, module.getLoc(), ptr, /*isConstant=*/false,
                           LLVM::Linkage::External, rt::entry::kMpiCommunicator,
                           Attribute());
  }
  Value cell =
      LLVM::AddressOfOp::create(b, loc, ptr, rt::entry::kMpiCommunicator);
  return LLVM::LoadOp::create(b, loc, ptr, cell);
}

void seqc::useOpenMpiAbi(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  if (module->hasAttr(DLTIDialect::kMapAttrName))
    return;
  module->setAttr(
      DLTIDialect::kMapAttrName,
      MapAttr::get(ctx, {DataLayoutEntryAttr::get(
                            StringAttr::get(ctx, "MPI:Implementation"),
                            StringAttr::get(ctx, "OpenMPI"))}));
}

LogicalResult seqc::rejectUnloweredCollectives(ModuleOp module,
                                               StringRef engine,
                                               StringRef what) {
  WalkResult left = module.walk([&](Operation *op) {
    if (!isa<shard::AllReduceOp, shard::SendOp, shard::RecvOp>(op))
      return WalkResult::advance();
    op->emitError() << "this " << op->getName() << " has no " << engine
                    << " lowering here: " << op->getOperand(0).getType() << " "
                    << what << " is what seqc lowers";
    return WalkResult::interrupt();
  });
  return failure(left.wasInterrupted());
}
