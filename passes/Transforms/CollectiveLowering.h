//===- CollectiveLowering.h - what every target's collectives share -*- C++
//-*-===//
//
// seq-collectives-to-mpi (CPU) and seq-collectives-to-nccl (CUDA) lower the
// `shard` collectives of the distribution passes, each to its engine. Both
// take the same collectives (the one axis of a one-dimensional grid), call
// on the module's MPI communicator, and name MPI's ABI for the process
// index: those pieces are here.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_COLLECTIVELOWERING_H
#define SEQC_PASSES_TRANSFORMS_COLLECTIVELOWERING_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace seqc {

/// Whether `op` exchanges over the one axis of a one-dimensional grid
/// (`gridName`, `axes`), the only collectives seqc lowers.
bool onWholeLineGrid(mlir::Operation *op, mlir::FlatSymbolRefAttr gridName,
                     llvm::ArrayRef<mlir::shard::GridAxis> axes);

/// The peer of a send or receive on a one-dimensional grid as MPI's and
/// NCCL's i32 rank: the static index, or the dynamic one.
mlir::Value peerRank(mlir::OpBuilder &b, mlir::Location loc,
                     llvm::ArrayRef<int64_t> statics,
                     mlir::ValueRange dynamics);

/// The MPI communicator `module`'s code runs on, as a pointer: a load of
/// the module's communicator cell (rt::entry::kMpiCommunicator, which the
/// engine defines for each loaded module), declared in `module` if missing.
mlir::Value loadMpiCommunicator(mlir::OpBuilder &b, mlir::Location loc,
                                mlir::ModuleOp module);

/// Gives `module` the DLTI entry MPIToLLVM writes its calls for, "MPI:
/// Implementation" = "OpenMPI" (the MPI Debian ships), unless it has a DLTI
/// map: the process index (and, on the CPU, the collectives) go through MPI.
void useOpenMpiAbi(mlir::ModuleOp module);

/// An error on the first shard all-reduce, send or receive left in
/// `module` after a target's lowering of them to `engine` (MPI, NCCL), which
/// lowers `what` (the types and grids it takes).
mlir::LogicalResult rejectUnloweredCollectives(mlir::ModuleOp module,
                                               llvm::StringRef engine,
                                               llvm::StringRef what);

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_COLLECTIVELOWERING_H
