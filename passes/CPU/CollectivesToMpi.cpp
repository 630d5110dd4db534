//===- CollectivesToMpi.cpp - shard collectives on MPI, MPI to LLVM -------===//
//
// seq-distribute-steps exchanges states and results with `shard`
// collectives on a one-dimensional grid of every process. On the CPU they
// run on MPI (OpenMPI, Debian's), through MLIR's own `mpi` dialect and its
// MPIToLLVM conversion, in two places of the pipeline:
//
//   - seq-collectives-to-mpi (on tensors): an all-reduce over the whole
//     grid is one `mpi.allreduce` on MPI_COMM_WORLD, between buffers; the
//     upstream convert-shard-to-mpi then takes the process index. Upstream's
//     all-reduce lowering is not used: it splits the communicator on every
//     call (a collective of its own, and a communicator never freed), and in
//     MLIR 22 MPIToLLVM reads the split communicator back as an `int` for
//     OpenMPI, whose communicators are pointers (a crash).
//   - seq-mpi-to-llvm (with the other conversions to LLVM): the `mpi` ops
//     become calls, the grid goes, and the reduction handles get OpenMPI's
//     names (MLIR 22 declares `ompi_mpi_sum`; OpenMPI exports
//     `ompi_mpi_op_sum`).
//
// The calls are resolved when the code loads: the runtime opens libmpi for
// a distributed run, and single-process code has no MPI symbol at all.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MPIToLLVM/MPIToLLVM.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/DLTI/DLTI.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MPI/IR/MPI.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQCOLLECTIVESTOMPI
#define GEN_PASS_DEF_SEQMPITOLLVM
#include "passes/CPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;

namespace {

std::optional<mpi::MPI_ReductionOpEnum> mpiReduction(shard::ReductionKind k) {
  switch (k) {
  case shard::ReductionKind::Sum:
    return mpi::MPI_ReductionOpEnum::MPI_SUM;
  case shard::ReductionKind::Max:
    return mpi::MPI_ReductionOpEnum::MPI_MAX;
  case shard::ReductionKind::Min:
    return mpi::MPI_ReductionOpEnum::MPI_MIN;
  case shard::ReductionKind::Product:
    return mpi::MPI_ReductionOpEnum::MPI_PROD;
  default:
    return std::nullopt;
  }
}

/// `buffer` (identity layout) as one dimension.
Value flatten(PatternRewriter &rewriter, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getRank() == 1)
    return buffer;
  ReassociationIndices all;
  for (int64_t i = 0; i < type.getRank(); ++i)
    all.push_back(i);
  return memref::CollapseShapeOp::create(rewriter, loc, buffer,
                                         ArrayRef<ReassociationIndices>{all});
}

/// An all-reduce of a tensor over every process of a one-dimensional grid:
/// MPI_Allreduce on MPI_COMM_WORLD from the tensor's buffer into a new one.
struct WholeGridAllReduce : OpRewritePattern<shard::AllReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(shard::AllReduceOp reduce,
                                PatternRewriter &rewriter) const override {
    auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
        reduce, reduce.getGridAttr());
    if (!grid || grid.getRank() != 1 || reduce.getGridAxes().size() != 1)
      return rewriter.notifyMatchFailure(reduce, "not the whole of a 1-D grid");
    auto type = dyn_cast<RankedTensorType>(reduce.getInput().getType());
    if (!type || type != reduce.getResult().getType())
      return rewriter.notifyMatchFailure(reduce, "not tensor to same tensor");
    Type elt = type.getElementType();
    if (!elt.isF32() && !elt.isF64() && !elt.isInteger(32) &&
        !elt.isInteger(64))
      return rewriter.notifyMatchFailure(reduce, "no MPI datatype");
    std::optional<mpi::MPI_ReductionOpEnum> kind =
        mpiReduction(reduce.getReduction());
    if (!kind)
      return rewriter.notifyMatchFailure(reduce, "no MPI reduction");

    Location loc = reduce.getLoc();
    auto bufferType = MemRefType::get(type.getShape(), type.getElementType());
    Value input = bufferization::ToBufferOp::create(rewriter, loc, bufferType,
                                                    reduce.getInput());
    SmallVector<Value> sizes;
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (type.isDynamicDim(i))
        sizes.push_back(memref::DimOp::create(rewriter, loc, input, i));
    Value output = memref::AllocOp::create(rewriter, loc, bufferType, sizes);
    Value world = mpi::CommWorldOp::create(rewriter, loc,
                                           mpi::CommType::get(getContext()));
    // MPIToLLVM counts the elements of dimension 0 only: the buffers go
    // flat, as upstream's own lowering does.
    mpi::AllReduceOp::create(rewriter, loc, TypeRange{},
                             flatten(rewriter, loc, input),
                             flatten(rewriter, loc, output), *kind, world);
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        reduce, type, output, /*restrict=*/true, /*writable=*/true);
    return success();
  }
};

struct SeqCollectivesToMpi
    : seqc::impl::SeqCollectivesToMpiBase<SeqCollectivesToMpi> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // MPIToLLVM writes calls for the ABI this names (Debian ships OpenMPI).
    MLIRContext *ctx = &getContext();
    if (!module->hasAttr(DLTIDialect::kMapAttrName))
      module->setAttr(
          DLTIDialect::kMapAttrName,
          MapAttr::get(ctx, {DataLayoutEntryAttr::get(
                                StringAttr::get(ctx, "MPI:Implementation"),
                                StringAttr::get(ctx, "OpenMPI"))}));
    RewritePatternSet patterns(ctx);
    patterns.add<WholeGridAllReduce>(ctx);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    // Anything left would reach upstream's lowering, which splits the
    // communicator (see above), or MPIToLLVM without a datatype.
    WalkResult left = module.walk([](shard::AllReduceOp reduce) {
      reduce.emitError() << "this all-reduce has no MPI lowering here: "
                         << reduce.getInput().getType()
                         << " over the whole of a one-dimensional grid, in "
                            "f32, f64, i32 or i64, is what seqc lowers";
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

/// OpenMPI's names for the predefined reductions MLIR 22 misnames.
void renameOpenMpiReductions(ModuleOp module) {
  for (auto global :
       llvm::make_early_inc_range(module.getOps<LLVM::GlobalOp>())) {
    StringRef name = global.getSymName();
    if (!name.consume_front("ompi_mpi_") || name.starts_with("op_") ||
        !llvm::is_contained({"sum", "max", "min", "prod", "land", "band", "lor",
                             "bor", "lxor", "bxor", "minloc", "maxloc",
                             "replace", "no_op"},
                            name))
      continue;
    std::string fixed = ("ompi_mpi_op_" + name).str();
    if (failed(SymbolTable::replaceAllSymbolUses(
            global, StringAttr::get(module.getContext(), fixed), module)))
      continue;
    global.setSymName(fixed);
  }
}

struct SeqMpiToLLVM : seqc::impl::SeqMpiToLLVMBase<SeqMpiToLLVM> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      if (SymbolTable::symbolKnownUseEmpty(grid, module))
        grid.erase();
    bool hasMpi = false;
    module.walk([&](Operation *op) {
      if (isa<mpi::MPIDialect>(op->getDialect()))
        hasMpi = true;
    });
    if (!hasMpi)
      return;
    MLIRContext *ctx = &getContext();
    LLVMTypeConverter converter(ctx);
    RewritePatternSet patterns(ctx);
    mpi::populateMPIToLLVMConversionPatterns(converter, patterns);
    ConversionTarget target(*ctx);
    target.addIllegalDialect<mpi::MPIDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    renameOpenMpiReductions(module);
  }
};

} // namespace
