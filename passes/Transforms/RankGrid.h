//===- RankGrid.h - the grid the distribution passes exchange over -*- C++
//-*-===//
//
// seq-distribute-steps and seq-distribute-experts exchange over one
// one-dimensional `shard` grid of every process, @seq_ranks (shape R),
// which each target lowers to its engine (CPU: MPI_COMM_WORLD).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_RANKGRID_H
#define SEQC_PASSES_TRANSFORMS_RANKGRID_H

#include "EntryPoints.h"

#include "mlir/Dialect/DLTI/DLTI.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace seqc {

inline constexpr llvm::StringLiteral kRankGridName = "seq_ranks";

/// Whether `pass` has work in `module` under `ranks`: an error (failure)
/// for ranks < 1; false for one rank or no op to split (`hasOps`); else
/// true, the grid created if the module lacks it.
inline mlir::FailureOr<bool> prepareRankGrid(mlir::ModuleOp module,
                                             llvm::StringRef pass,
                                             int64_t ranks, bool hasOps) {
  if (ranks < 1) {
    module.emitError() << pass << " needs ranks >= 1, not " << ranks;
    return mlir::failure();
  }
  if (ranks == 1 || !hasOps)
    return false;
  if (!module.lookupSymbol(kRankGridName)) {
    mlir::OpBuilder top(module.getBodyRegion());
    mlir::shard::GridOp::create(top, module.getLoc(), kRankGridName,
                                llvm::ArrayRef<int64_t>{ranks});
  }
  return true;
}

/// Gives `module` the DLTI entry MPIToLLVM writes its calls for, "MPI:
/// Implementation" = "OpenMPI" (the MPI Debian ships), unless it has a DLTI
/// map: the process index (and, on the CPU, the collectives) go through MPI.
inline void useOpenMpiAbi(mlir::ModuleOp module) {
  mlir::MLIRContext *ctx = module.getContext();
  if (module->hasAttr(mlir::DLTIDialect::kMapAttrName))
    return;
  module->setAttr(mlir::DLTIDialect::kMapAttrName,
                  mlir::MapAttr::get(
                      ctx, {mlir::DataLayoutEntryAttr::get(
                               mlir::StringAttr::get(ctx, "MPI:Implementation"),
                               mlir::StringAttr::get(ctx, "OpenMPI"))}));
}

/// An error on the first shard all-reduce, send or receive left in
/// `module` after a target's lowering of them to `engine` (MPI, NCCL), which
/// lowers `what` (the types and grids it takes).
inline mlir::LogicalResult rejectUnloweredCollectives(mlir::ModuleOp module,
                                                      llvm::StringRef engine,
                                                      llvm::StringRef what) {
  mlir::WalkResult left = module.walk([&](mlir::Operation *op) {
    if (!mlir::isa<mlir::shard::AllReduceOp, mlir::shard::SendOp,
                   mlir::shard::RecvOp>(op))
      return mlir::WalkResult::advance();
    op->emitError() << "this " << op->getName() << " has no " << engine
                    << " lowering here: " << op->getOperand(0).getType() << " "
                    << what << " is what seqc lowers";
    return mlir::WalkResult::interrupt();
  });
  return mlir::failure(left.wasInterrupted());
}

/// The MPI communicator `module`'s code runs on, as a pointer: a load of
/// the module's communicator cell (rt::entry::kMpiCommunicator, which the
/// engine defines for each loaded module), declared in `module` if missing.
inline mlir::Value loadMpiCommunicator(mlir::OpBuilder &b, mlir::Location loc,
                                       mlir::ModuleOp module) {
  namespace LLVM = mlir::LLVM;
  auto ptr = LLVM::LLVMPointerType::get(module.getContext());
  if (!module.lookupSymbol(rt::entry::kMpiCommunicator)) {
    mlir::OpBuilder top(module.getBodyRegion());
    LLVM::GlobalOp::create(top, module.getLoc(), ptr, /*isConstant=*/false,
                           LLVM::Linkage::External, rt::entry::kMpiCommunicator,
                           mlir::Attribute());
  }
  mlir::Value cell =
      LLVM::AddressOfOp::create(b, loc, ptr, rt::entry::kMpiCommunicator);
  return LLVM::LoadOp::create(b, loc, ptr, cell);
}

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_RANKGRID_H
