//===- CollectiveLowering.cpp - what every target's collectives share -----===//

#include "Transforms/CollectiveLowering.h"

#include "EntryPoints.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/DLTI/DLTI.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

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

void seqc::declareMpiCommunicator(ModuleOp module) {
  if (module.lookupSymbol(rt::entry::kMpiCommunicator))
    return;
  OpBuilder top(module.getBodyRegion());
  LLVM::GlobalOp::create(top, module.getLoc(),
                         LLVM::LLVMPointerType::get(module.getContext()),
                         /*isConstant=*/false, LLVM::Linkage::External,
                         rt::entry::kMpiCommunicator, Attribute());
}

Value seqc::loadMpiCommunicator(OpBuilder &b, Location loc, ModuleOp module) {
  auto ptr = LLVM::LLVMPointerType::get(module.getContext());
  declareMpiCommunicator(module);
  Value cell =
      LLVM::AddressOfOp::create(b, loc, ptr, rt::entry::kMpiCommunicator);
  return LLVM::LoadOp::create(b, loc, ptr, cell);
}

seqc::RuntimeCallBuilder::RuntimeCallBuilder(PatternRewriter &rewriter,
                                             Location loc, ModuleOp module)
    : rewriter(rewriter), loc(loc), module(module),
      ptr(LLVM::LLVMPointerType::get(rewriter.getContext())) {}

Value seqc::RuntimeCallBuilder::bufferOf(Value tensor, bool readOnly) {
  auto type = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(
      rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()),
      tensor, readOnly);
}

Value seqc::RuntimeCallBuilder::alloc(RankedTensorType type, ValueRange sizes) {
  return memref::AllocOp::create(
      rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()),
      sizes);
}

Value seqc::RuntimeCallBuilder::allocLike(Value like) {
  auto type = cast<RankedTensorType>(like.getType());
  SmallVector<Value> sizes;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      sizes.push_back(tensor::DimOp::create(rewriter, loc, like, i));
  return alloc(type, sizes);
}

Value seqc::RuntimeCallBuilder::dataPointer(Value buffer) {
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, buffer);
  Value asInt =
      arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(), address);
  return LLVM::IntToPtrOp::create(rewriter, loc, ptr, asInt);
}

Value seqc::RuntimeCallBuilder::elementCount(Value buffer, int64_t scale) {
  auto type = cast<MemRefType>(buffer.getType());
  Value count = arith::ConstantIndexOp::create(rewriter, loc, scale);
  for (int64_t i = 0; i < type.getRank(); ++i)
    count = arith::MulIOp::create(
        rewriter, loc, count,
        memref::DimOp::create(rewriter, loc, buffer, i).getResult());
  return arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(),
                                    count);
}

Value seqc::RuntimeCallBuilder::i32(int64_t value) {
  return arith::ConstantIntOp::create(rewriter, loc, value, 32);
}

void seqc::RuntimeCallBuilder::call(StringRef name, ValueRange operands) {
  SmallVector<Value> args{loadMpiCommunicator(rewriter, loc, module)};
  llvm::append_range(args, operands);
  auto fn = module.lookupSymbol<func::FuncOp>(name);
  if (!fn) {
    OpBuilder top(module.getBodyRegion());
    fn = func::FuncOp::create(
        top, loc, name,
        rewriter.getFunctionType(ValueRange(args).getTypes(), {}));
    fn.setPrivate();
  }
  func::CallOp::create(rewriter, loc, fn, args);
}

std::optional<int64_t> seqc::elementBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isIntOrFloat() ||
      tensor.getElementTypeBitWidth() % 8 != 0)
    return std::nullopt;
  return tensor.getElementTypeBitWidth() / 8;
}

namespace {

/// An all-gather along dimension 0: every rank's buffer, in rank order,
/// into a new one of R times its rows.
struct AllGatherToCall : OpRewritePattern<shard::AllGatherOp> {
  AllGatherToCall(MLIRContext *ctx, StringRef entry)
      : OpRewritePattern(ctx), entry(entry.str()) {}

  LogicalResult matchAndRewrite(shard::AllGatherOp gather,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(gather.getResult().getType());
    std::optional<int64_t> bytes =
        seqc::elementBytes(gather.getInput().getType());
    if (!seqc::onWholeLineGrid(gather, gather.getGridAttr(),
                               gather.getGridAxes()) ||
        gather.getGatherAxis().getZExtValue() != 0 || !type || !bytes)
      return rewriter.notifyMatchFailure(
          gather, "not bytes along dimension 0 of a 1-D grid");
    int64_t ranks = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
                        gather, gather.getGridAttr())
                        .getShape()[0];
    if (ShapedType::isDynamic(ranks))
      return rewriter.notifyMatchFailure(gather, "a grid of unknown size");
    Location loc = gather.getLoc();
    seqc::RuntimeCallBuilder b(rewriter, loc,
                               gather->getParentOfType<ModuleOp>());
    Value input = b.bufferOf(gather.getInput(), /*readOnly=*/true);
    // The result's sizes: the input's, dimension 0 times the ranks.
    SmallVector<Value> sizes;
    for (int64_t i = 0; i < type.getRank(); ++i) {
      if (!type.isDynamicDim(i))
        continue;
      Value size = memref::DimOp::create(rewriter, loc, input, i);
      if (i == 0)
        size = arith::MulIOp::create(
            rewriter, loc, size,
            arith::ConstantIndexOp::create(rewriter, loc, ranks));
      sizes.push_back(size);
    }
    Value output = b.alloc(type, sizes);
    b.call(entry, {b.dataPointer(input), b.dataPointer(output),
                   b.elementCount(input, *bytes)});
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        gather, type, output, /*restrict=*/true, /*writable=*/true);
    return success();
  }

  std::string entry;
};

} // namespace

void seqc::populateAllGatherCall(RewritePatternSet &patterns, StringRef entry) {
  patterns.add<AllGatherToCall>(patterns.getContext(), entry);
}

/// Adds `key` = `value` to the module's #dlti.map (made if missing) unless
/// the map has `key` already.
static LogicalResult addToDltiMap(ModuleOp module, StringAttr key,
                                  StringAttr value) {
  SmallVector<DataLayoutEntryInterface> entries;
  if (auto map = module->getAttrOfType<MapAttr>(DLTIDialect::kMapAttrName)) {
    if (succeeded(map.query(key)))
      return success();
    llvm::append_range(entries, map.getEntries());
  } else if (module->hasAttr(DLTIDialect::kMapAttrName)) {
    return module.emitError() << "the module's " << DLTIDialect::kMapAttrName
                              << " is not a #dlti.map";
  }
  entries.push_back(DataLayoutEntryAttr::get(key, value));
  module->setAttr(DLTIDialect::kMapAttrName,
                  MapAttr::get(module.getContext(), entries));
  return success();
}

LogicalResult seqc::useMpiImplementation(ModuleOp module,
                                         StringRef implementation) {
  if (implementation != "OpenMPI" && implementation != "MPICH")
    return module.emitError()
           << "unknown MPI implementation '" << implementation
           << "': seqc knows the ABIs of \"OpenMPI\" and \"MPICH\"";
  MLIRContext *ctx = module.getContext();
  auto key = StringAttr::get(ctx, "MPI:Implementation");
  auto wanted = StringAttr::get(ctx, implementation);
  if (failed(addToDltiMap(module, key, wanted)))
    return failure();
  // What MPIToLLVM will read: the entry of the module's first DLTI
  // attribute (a data layout spec comes before the map). Without one it
  // takes MPICH's ABI, whatever the library; with another, that one's.
  FailureOr<Attribute> seen = dlti::query(module, {key.getValue()});
  if (failed(seen))
    return module.emitError()
           << "the module's DLTI attributes hide its \"MPI:Implementation\" "
              "entry from MPIToLLVM, which reads the first of them: put the "
              "entry there";
  if (*seen != wanted)
    return module.emitError()
           << "the module's DLTI entry \"MPI:Implementation\" is " << *seen
           << ", but its code is for the MPI library's ABI, \""
           << implementation << "\"";
  return success();
}

LogicalResult seqc::rejectUnloweredCollectives(ModuleOp module,
                                               StringRef engine,
                                               StringRef what) {
  WalkResult left = module.walk([&](Operation *op) {
    if (!isa<shard::AllReduceOp, shard::AllGatherOp, shard::SendOp,
             shard::RecvOp>(op))
      return WalkResult::advance();
    op->emitError() << "this " << op->getName() << " has no " << engine
                    << " lowering here: " << op->getOperand(0).getType() << " "
                    << what << " is what seqc lowers";
    return WalkResult::interrupt();
  });
  return failure(left.wasInterrupted());
}
