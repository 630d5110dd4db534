//===- CollectivesToMpi.cpp - shard collectives on MPI, MPI to LLVM -------===//
//
// seq-distribute-steps exchanges states and results with `shard`
// collectives on a one-dimensional grid of every process. On the CPU they
// run on MPI (OpenMPI, Debian's, or a library of MPICH's ABI), through
// MLIR's own `mpi` dialect and its MPIToLLVM conversion, in two places of
// the pipeline:
//
//   - seq-collectives-to-mpi (on tensors): an all-reduce over the whole
//     grid is one `mpi.allreduce` on MPI_COMM_WORLD, between buffers, and a
//     send or receive with one peer (seq-distribute-experts' all-to-all) is
//     `mpi.send` / `mpi.recv`; an all-gather along dimension 0 (the
//     distribution passes' states and results) is a call of the runtime's
//     seqc_rt_mpi_all_gather (MPI_Allgather of bytes: the `mpi` dialect has
//     no all-gather); the upstream convert-shard-to-mpi then takes the
//     process index. Upstream's
//     all-reduce lowering is not used: it splits the communicator on every
//     call (a collective of its own, and a communicator never freed), and in
//     MLIR 22 MPIToLLVM reads the split communicator back as an `int` for
//     OpenMPI, whose communicators are pointers (a crash).
//   - seq-mpi-to-llvm (with the other conversions to LLVM): the `mpi` ops
//     become calls for the ABI the module's DLTI entry names, on the
//     module's communicator, the grid goes, and OpenMPI's reduction handles
//     get their names (MLIR 22 declares `ompi_mpi_sum`; OpenMPI exports
//     `ompi_mpi_op_sum`).
//
// The calls are resolved when the code loads: the runtime opens libmpi for
// a distributed run, and single-process code has no MPI symbol at all.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "EntryPoints.h"
#include "Transforms/CollectiveLowering.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MPIToLLVM/MPIToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/DLTI/DLTI.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MPI/IR/MPI.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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
    if (!seqc::onWholeLineGrid(reduce, reduce.getGridAttr(),
                               reduce.getGridAxes()))
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

/// Whether point-to-point `op` on `gridName` is one MPI can carry: the one
/// axis of a one-dimensional grid, a tensor of an MPI datatype.
LogicalResult checkPointToPoint(PatternRewriter &rewriter, Operation *op,
                                FlatSymbolRefAttr gridName,
                                ArrayRef<shard::GridAxis> axes, Type type,
                                ArrayRef<int64_t> peer) {
  if (!seqc::onWholeLineGrid(op, gridName, axes) || peer.size() != 1)
    return rewriter.notifyMatchFailure(op, "not on a 1-D grid");
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return rewriter.notifyMatchFailure(op, "not a ranked tensor");
  Type elt = tensor.getElementType();
  if (!elt.isF32() && !elt.isF64() && !elt.isInteger(8) && !elt.isInteger(16) &&
      !elt.isInteger(32) && !elt.isInteger(64))
    return rewriter.notifyMatchFailure(op, "no MPI datatype");
  return success();
}

/// A send of a tensor to one process: MPI_Send of its buffer (tag 0; the
/// messages between two processes keep their order).
struct PointToPointSend : OpRewritePattern<shard::SendOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(shard::SendOp send,
                                PatternRewriter &rewriter) const override {
    if (failed(checkPointToPoint(rewriter, send, send.getGridAttr(),
                                 send.getGridAxes(), send.getInput().getType(),
                                 send.getDestination())))
      return failure();
    Location loc = send.getLoc();
    auto type = cast<RankedTensorType>(send.getInput().getType());
    auto bufferType = MemRefType::get(type.getShape(), type.getElementType());
    Value buffer = bufferization::ToBufferOp::create(rewriter, loc, bufferType,
                                                     send.getInput(),
                                                     /*read_only=*/true);
    Value world = mpi::CommWorldOp::create(rewriter, loc,
                                           mpi::CommType::get(getContext()));
    Value tag = arith::ConstantIntOp::create(rewriter, loc, 0, 32);
    Value dest = seqc::peerRank(rewriter, loc, send.getDestination(),
                                send.getDestinationDynamic());
    mpi::SendOp::create(rewriter, loc, TypeRange{},
                        flatten(rewriter, loc, buffer), tag, dest, world);
    rewriter.replaceOp(send, send.getInput());
    return success();
  }
};

/// A receive from one process: MPI_Recv into a new buffer of the input's
/// shape.
struct PointToPointRecv : OpRewritePattern<shard::RecvOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(shard::RecvOp recv,
                                PatternRewriter &rewriter) const override {
    std::optional<ArrayRef<int64_t>> source = recv.getSource();
    if (!source)
      return rewriter.notifyMatchFailure(recv, "no source");
    if (failed(checkPointToPoint(rewriter, recv, recv.getGridAttr(),
                                 recv.getGridAxes(), recv.getInput().getType(),
                                 *source)))
      return failure();
    Location loc = recv.getLoc();
    auto type = cast<RankedTensorType>(recv.getResult().getType());
    auto bufferType = MemRefType::get(type.getShape(), type.getElementType());
    SmallVector<Value> sizes;
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (type.isDynamicDim(i))
        sizes.push_back(
            tensor::DimOp::create(rewriter, loc, recv.getInput(), i));
    Value buffer = memref::AllocOp::create(rewriter, loc, bufferType, sizes);
    Value world = mpi::CommWorldOp::create(rewriter, loc,
                                           mpi::CommType::get(getContext()));
    Value tag = arith::ConstantIntOp::create(rewriter, loc, 0, 32);
    Value from =
        seqc::peerRank(rewriter, loc, *source, recv.getSourceDynamic());
    mpi::RecvOp::create(rewriter, loc, TypeRange{},
                        flatten(rewriter, loc, buffer), tag, from, world);
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        recv, type, buffer, /*restrict=*/true, /*writable=*/true);
    return success();
  }
};

struct SeqCollectivesToMpi
    : seqc::impl::SeqCollectivesToMpiBase<SeqCollectivesToMpi> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (failed(seqc::useMpiImplementation(module, mpiImplementation)))
      return signalPassFailure();
    RewritePatternSet patterns(ctx);
    patterns.add<WholeGridAllReduce, PointToPointSend, PointToPointRecv>(ctx);
    seqc::populateAllGatherCall(patterns, seqc::rt::entry::kMpiAllGather);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    // Anything left would reach upstream's lowering, which splits the
    // communicator (see above), or MPIToLLVM without a datatype.
    if (failed(seqc::rejectUnloweredCollectives(
            module, "MPI",
            "on a one-dimensional grid, in f32, f64, i32 or i64 (sends and "
            "receives also i8 and i16; all-gathers along dimension 0 of any "
            "whole bytes),")))
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

/// The code calls on the communicator its module was compiled for: where
/// upstream would name the library's MPI_COMM_WORLD (its address for
/// OpenMPI, a constant for MPICH), the code reads the handle from the
/// module's kMpiCommunicator cell (the engine defines one per loaded module,
/// holding MPI_COMM_WORLD or the host's communicator). MPIToLLVM carries
/// communicators of both ABIs as i64 and narrows MPICH's to its int where it
/// calls; the cell holds a pointer-sized handle.
struct CommWorldFromCell : ConvertOpToLLVMPattern<mpi::CommWorldOp> {
  explicit CommWorldFromCell(const LLVMTypeConverter &converter)
      : ConvertOpToLLVMPattern(converter, /*benefit=*/2) {}

  LogicalResult
  matchAndRewrite(mpi::CommWorldOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type handle = getTypeConverter()->convertType(op.getType());
    if (!handle || !handle.isInteger(64))
      return rewriter.notifyMatchFailure(op, "communicators are not i64");
    Value communicator = seqc::loadMpiCommunicator(
        rewriter, op.getLoc(), op->getParentOfType<ModuleOp>());
    rewriter.replaceOpWithNewOp<LLVM::PtrToIntOp>(op, handle, communicator);
    return success();
  }
};

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
    // Declared here, not while converting: a conversion's rewriter tracks
    // the ops it creates, and the cell is the module's, not an op's.
    seqc::declareMpiCommunicator(module);
    LLVMTypeConverter converter(ctx);
    RewritePatternSet patterns(ctx);
    mpi::populateMPIToLLVMConversionPatterns(converter, patterns);
    patterns.add<CommWorldFromCell>(converter);
    ConversionTarget target(*ctx);
    target.addIllegalDialect<mpi::MPIDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    renameOpenMpiReductions(module);
  }
};

} // namespace
