//===- CollectiveLowering.h - what every target's collectives share -*- C++
//-*-===//
//
// seq-collectives-to-mpi (CPU) and seq-collectives-to-nccl (CUDA) lower the
// `shard` collectives of the distribution passes, each to its engine. Both
// take the same collectives (the one axis of a one-dimensional grid), call
// on the module's MPI communicator, and name MPI's ABI for the process
// index: those pieces are here, with the calls of runtime entry points
// (RuntimeCallBuilder) and the all-gather, which both targets lower to such
// a call (MLIR's `mpi` dialect has no all-gather).
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

/// Declares the module's communicator cell (rt::entry::kMpiCommunicator,
/// which the engine defines for each loaded module) in `module` if missing.
void declareMpiCommunicator(mlir::ModuleOp module);

/// The MPI communicator `module`'s code runs on, as a pointer (an MPICH
/// handle: its int, sign-extended): a load of the module's communicator
/// cell, declared in `module` if missing.
mlir::Value loadMpiCommunicator(mlir::OpBuilder &b, mlir::Location loc,
                                mlir::ModuleOp module);

/// Builds the call of one collective's runtime entry point at a rewriter's
/// insertion point: the module's communicator first, then buffers as
/// pointers and sizes as i64.
class RuntimeCallBuilder {
public:
  RuntimeCallBuilder(mlir::PatternRewriter &rewriter, mlir::Location loc,
                     mlir::ModuleOp module);

  /// `tensor`'s buffer (identity layout: its data starts at the aligned
  /// pointer, contiguous).
  mlir::Value bufferOf(mlir::Value tensor, bool readOnly);
  /// A new buffer of tensor type `type`, its dynamic sizes `sizes`.
  mlir::Value alloc(mlir::RankedTensorType type, mlir::ValueRange sizes);
  /// A new buffer of `like`'s shape (dynamic sizes read from it).
  mlir::Value allocLike(mlir::Value like);
  /// The address of `buffer`'s first element.
  mlir::Value dataPointer(mlir::Value buffer);
  /// The number of elements of `buffer`, as i64, times `scale`.
  mlir::Value elementCount(mlir::Value buffer, int64_t scale = 1);
  mlir::Value i32(int64_t value);
  /// A call of runtime function `name` with the module's communicator and
  /// `operands`, declared in the module on first use.
  void call(llvm::StringRef name, mlir::ValueRange operands);

private:
  mlir::PatternRewriter &rewriter;
  mlir::Location loc;
  mlir::ModuleOp module;
  mlir::Type ptr;
};

/// The bytes of one element of tensor type `type`, if whole.
std::optional<int64_t> elementBytes(mlir::Type type);

/// Lowers an all-gather along dimension 0 over the whole of a
/// one-dimensional grid, of whole-byte elements, to a call of runtime entry
/// point `entry`, (comm, send, recv, i64 bytes per rank), into a new buffer
/// (the distribution passes gather only so: their slices are contiguous).
void populateAllGatherCall(mlir::RewritePatternSet &patterns,
                           llvm::StringRef entry);

/// Gives `module` the DLTI entry MPIToLLVM writes its calls for, "MPI:
/// Implementation" = `implementation` ("OpenMPI" or "MPICH": the ABI of the
/// library the code will call), added to its DLTI map if it has one: the
/// process index (and, on the CPU, the collectives) go through MPI. An
/// error for another name, or where the module names another ABI.
mlir::LogicalResult useMpiImplementation(mlir::ModuleOp module,
                                         llvm::StringRef implementation);

/// An error on the first shard all-reduce, all-gather, send or receive left in
/// `module` after a target's lowering of them to `engine` (MPI, NCCL), which
/// lowers `what` (the types and grids it takes).
mlir::LogicalResult rejectUnloweredCollectives(mlir::ModuleOp module,
                                               llvm::StringRef engine,
                                               llvm::StringRef what);

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_COLLECTIVELOWERING_H
