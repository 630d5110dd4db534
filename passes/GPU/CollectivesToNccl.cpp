//===- CollectivesToNccl.cpp - shard collectives as NCCL calls
//-------------===//
//
// seq-distribute-steps and seq-distribute-experts exchange with `shard`
// collectives on a one-dimensional grid of every process. For the CUDA
// target they run on NCCL, between the ranks' device buffers: each becomes
// a call of the runtime's NCCL entry points (runtime/Nccl.cpp) with the
// module's MPI communicator, from which the runtime makes NCCL's (MPI
// starts NCCL and numbers the processes; NCCL moves the data):
//
//   - an all-reduce over the whole grid: seqc_rt_nccl_all_reduce of the
//     tensor's buffer into a new one, with the element type and reduction
//     as the runtime's codes (EntryPoints.h);
//   - an all-gather along dimension 0: seqc_rt_nccl_all_gather of the
//     tensor's bytes (CollectiveLowering.h);
//   - a send or receive with one peer: seqc_rt_nccl_send / _recv of the
//     buffer's bytes (NCCL's point-to-point moves bytes exactly, 16-bit
//     floats included).
//
// With `emulate` (the emulated CUDA target, whose buffers are the host's)
// the calls name the runtime's _emulated_ entry points, which do the same
// on MPI. Upstream convert-shard-to-mpi then takes the process index, as on
// the CPU.
//
//===----------------------------------------------------------------------===//

#include "seqc/Passes.h"

#include "EntryPoints.h"
#include "Transforms/CollectiveLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/DLTI/DLTI.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace seqc {
#define GEN_PASS_DEF_SEQCOLLECTIVESTONCCL
#include "passes/GPU/Passes.h.inc"
} // namespace seqc

using namespace mlir;
namespace entry = seqc::rt::entry;

namespace {

/// The runtime functions the calls name: NCCL's, or their emulation's.
struct NcclEntries {
  StringRef allReduce, allGather, send, recv;

  static NcclEntries get(bool emulate) {
    if (emulate)
      return {entry::kNcclEmulatedAllReduce, entry::kNcclEmulatedAllGather,
              entry::kNcclEmulatedSend, entry::kNcclEmulatedRecv};
    return {entry::kNcclAllReduce, entry::kNcclAllGather, entry::kNcclSend,
            entry::kNcclRecv};
  }
};

std::optional<entry::ReduceElement> reduceElement(Type type) {
  if (type.isF32())
    return entry::ReduceElement::F32;
  if (type.isF64())
    return entry::ReduceElement::F64;
  if (type.isInteger(32))
    return entry::ReduceElement::I32;
  if (type.isInteger(64))
    return entry::ReduceElement::I64;
  return std::nullopt;
}

std::optional<entry::ReduceOp> reduceOp(shard::ReductionKind kind) {
  switch (kind) {
  case shard::ReductionKind::Sum:
    return entry::ReduceOp::Sum;
  case shard::ReductionKind::Product:
    return entry::ReduceOp::Product;
  case shard::ReductionKind::Max:
    return entry::ReduceOp::Max;
  case shard::ReductionKind::Min:
    return entry::ReduceOp::Min;
  default:
    return std::nullopt;
  }
}

/// An all-reduce of a tensor over every process: from its buffer into a new
/// one.
struct AllReduceToNccl : OpRewritePattern<shard::AllReduceOp> {
  AllReduceToNccl(MLIRContext *ctx, NcclEntries entries)
      : OpRewritePattern(ctx), entries(entries) {}

  LogicalResult matchAndRewrite(shard::AllReduceOp reduce,
                                PatternRewriter &rewriter) const override {
    if (!seqc::onWholeLineGrid(reduce, reduce.getGridAttr(),
                               reduce.getGridAxes()))
      return rewriter.notifyMatchFailure(reduce, "not the whole of a 1-D grid");
    auto type = dyn_cast<RankedTensorType>(reduce.getInput().getType());
    if (!type || type != reduce.getResult().getType())
      return rewriter.notifyMatchFailure(reduce, "not tensor to same tensor");
    std::optional<entry::ReduceElement> element =
        reduceElement(type.getElementType());
    std::optional<entry::ReduceOp> op = reduceOp(reduce.getReduction());
    if (!element || !op)
      return rewriter.notifyMatchFailure(reduce, "no NCCL type or reduction");

    seqc::RuntimeCallBuilder b(rewriter, reduce.getLoc(),
                               reduce->getParentOfType<ModuleOp>());
    Value input = b.bufferOf(reduce.getInput(), /*readOnly=*/true);
    Value output = b.allocLike(reduce.getInput());
    b.call(entries.allReduce,
           {b.dataPointer(input), b.dataPointer(output), b.elementCount(input),
            b.i32(static_cast<int32_t>(*element)),
            b.i32(static_cast<int32_t>(*op))});
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        reduce, type, output, /*restrict=*/true, /*writable=*/true);
    return success();
  }

  NcclEntries entries;
};

/// A send of a tensor's bytes to one process.
struct SendToNccl : OpRewritePattern<shard::SendOp> {
  SendToNccl(MLIRContext *ctx, NcclEntries entries)
      : OpRewritePattern(ctx), entries(entries) {}

  LogicalResult matchAndRewrite(shard::SendOp send,
                                PatternRewriter &rewriter) const override {
    std::optional<int64_t> bytes =
        seqc::elementBytes(send.getInput().getType());
    if (!seqc::onWholeLineGrid(send, send.getGridAttr(), send.getGridAxes()) ||
        send.getDestination().size() != 1 || !bytes)
      return rewriter.notifyMatchFailure(send, "not bytes on a 1-D grid");
    seqc::RuntimeCallBuilder b(rewriter, send.getLoc(),
                               send->getParentOfType<ModuleOp>());
    Value buffer = b.bufferOf(send.getInput(), /*readOnly=*/true);
    b.call(entries.send,
           {b.dataPointer(buffer), b.elementCount(buffer, *bytes),
            seqc::peerRank(rewriter, send.getLoc(), send.getDestination(),
                           send.getDestinationDynamic())});
    rewriter.replaceOp(send, send.getInput());
    return success();
  }

  NcclEntries entries;
};

/// A receive of a tensor's bytes from one process, into a new buffer.
struct RecvToNccl : OpRewritePattern<shard::RecvOp> {
  RecvToNccl(MLIRContext *ctx, NcclEntries entries)
      : OpRewritePattern(ctx), entries(entries) {}

  LogicalResult matchAndRewrite(shard::RecvOp recv,
                                PatternRewriter &rewriter) const override {
    std::optional<ArrayRef<int64_t>> source = recv.getSource();
    std::optional<int64_t> bytes =
        seqc::elementBytes(recv.getResult().getType());
    if (!source || source->size() != 1 || !bytes ||
        !seqc::onWholeLineGrid(recv, recv.getGridAttr(), recv.getGridAxes()))
      return rewriter.notifyMatchFailure(recv, "not bytes on a 1-D grid");
    seqc::RuntimeCallBuilder b(rewriter, recv.getLoc(),
                               recv->getParentOfType<ModuleOp>());
    Value buffer = b.allocLike(recv.getInput());
    b.call(entries.recv, {b.dataPointer(buffer), b.elementCount(buffer, *bytes),
                          seqc::peerRank(rewriter, recv.getLoc(), *source,
                                         recv.getSourceDynamic())});
    rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
        recv, recv.getResult().getType(), buffer, /*restrict=*/true,
        /*writable=*/true);
    return success();
  }

  NcclEntries entries;
};

struct SeqCollectivesToNccl
    : seqc::impl::SeqCollectivesToNcclBase<SeqCollectivesToNccl> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    NcclEntries entries = NcclEntries::get(emulate);
    patterns.add<AllReduceToNccl, SendToNccl, RecvToNccl>(ctx, entries);
    seqc::populateAllGatherCall(patterns, entries.allGather);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();
    if (failed(seqc::rejectUnloweredCollectives(
            module, "NCCL",
            "on a one-dimensional grid (all-reduces of f32, f64, i32 or i64; "
            "all-gathers along dimension 0, sends and receives of whole "
            "bytes)")))
      return signalPassFailure();
    // The process index goes through MPI (convert-shard-to-mpi).
    if (failed(seqc::useMpiImplementation(module, mpiImplementation)))
      signalPassFailure();
  }
};

} // namespace
