//===- RankGrid.h - the grid the distribution passes exchange over -*- C++
//-*-===//
//
// seq-distribute-steps and seq-distribute-experts exchange over one
// one-dimensional `shard` grid of every process, @seq_ranks (shape R),
// which each target lowers to its engine (CPU: MPI, CUDA: NCCL; see
// CollectiveLowering.h).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_RANKGRID_H
#define SEQC_PASSES_TRANSFORMS_RANKGRID_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace seqc {

inline constexpr llvm::StringLiteral kRankGridName = "seq_ranks";

/// Marks a moe_ffn whose tokens seq-distribute-steps local=1 found to be
/// each rank's own and left (leave-experts) to seq-distribute-experts
/// local=1, which must split it, and alone may.
inline constexpr llvm::StringLiteral kLocalTokensAttrName = "seq.local_tokens";

/// Marks, under rank-local steps, a function's arguments and results that
/// hold steps, with their step dimension (seq-distribute-steps local=1).
inline constexpr llvm::StringLiteral kStepsAttrName = "seq.steps";

/// Marks, under rank-local steps, the arguments that count the same steps
/// on each rank (the graph relates their step dimensions), with the number
/// of the first of them; an argument whose steps nothing else counts has
/// none (seq-distribute-steps local=1, for seq-check-rank-agreement).
inline constexpr llvm::StringLiteral kStepGroupAttrName = "seq.step_group";

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

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_RANKGRID_H
