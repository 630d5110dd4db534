//===- StepAxes.h - which dimension of each value holds the steps -*- C++
//-*-===//
//
// Rank-local sequence parallelism (seq-distribute-steps with `local`): each
// rank passes only its own steps of the function's arguments with a time
// axis and gets back only its own steps of the results. That is right only
// where the graph around the seq ops treats steps independently: a matmul
// over features, a norm over a step's features, SiLU, reshapes that keep the
// steps. StepAxes finds, for every tensor of a function, the dimension that
// holds the steps (or none), starting from the seq ops' declared time axes
// and following the glue both ways; and it rejects, with an error naming
// the op, anything that mixes steps: a reduction over them, an index of
// one, a slice at an offset, the number of steps used as a value, an op it
// does not know.
//
// One pattern that looks across steps is known: a token shift (RWKV's),
// `tensor.concat` of a state holding k steps (static, no steps of its own)
// and then the steps x along their dimension, whose slice [0, T) is x
// shifted by k and [T, T + s), s <= k, the state after x. Its slices are the
// only uses allowed; the distribution gives each rank the state entering it.
// Another is a KV cache that attention reads: concat(cache, x) along the
// steps with a cache of dynamic length, whole, and the concatenation whole
// (the distribution gathers every rank's x after the cache).
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_STEPAXES_H
#define SEQC_PASSES_TRANSFORMS_STEPAXES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace seqc {

/// Where a tensor holds the steps: its dimension `axis`, each step taking
/// `rows` entries of it (more than 1 where the steps were collapsed with
/// other dimensions, [B, T] -> [B T]).
struct StepAxis {
  int64_t axis;
  int64_t rows = 1;
  bool operator==(const StepAxis &o) const {
    return axis == o.axis && rows == o.rows;
  }
};

/// `tensor`'s size along `dim` where it is static, seen through casts (a
/// static state, an empty cache, cast to a dynamic size).
std::optional<int64_t> staticLengthAlong(mlir::Value tensor, int64_t dim);

class StepAxes {
public:
  /// The analysis of `func`, or failure after an error on the op that keeps
  /// it from running rank-local.
  static mlir::FailureOr<StepAxes> analyze(mlir::func::FuncOp func);

  /// Where `value` holds the steps; nullopt for a tensor without steps
  /// (weights, states) and every other value.
  std::optional<StepAxis> of(mlir::Value value) const;

  /// The token shifts, `concat(state, x)` along x's steps: every use of
  /// one is a slice [0, T) (x shifted) or [T, T + s) with s <= k (the
  /// state after x).
  llvm::ArrayRef<mlir::tensor::ConcatOp> shifts() const { return shiftOps; }

  /// The KV caches attention reads, `concat(cache, x)` along the steps with
  /// a cache of dynamic length (no steps): the concatenation is whole, the
  /// same on every rank (the cache, then every rank's steps of x, which the
  /// distribution gathers), and so is attention's operand.
  llvm::ArrayRef<mlir::tensor::ConcatOp> cacheAppends() const {
    return cacheAppendOps;
  }

  /// The class of the function's arguments that count the same steps as
  /// `arg` on every rank (the graph relates their step dimensions: an
  /// elementwise op, a linalg loop, a seq op's T), named by one of them;
  /// null for an argument without steps, or with several rows a step.
  mlir::Value stepClass(mlir::BlockArgument arg) const {
    return argumentClasses.lookup(arg);
  }

private:
  class Solver;
  llvm::SmallVector<mlir::tensor::ConcatOp> shiftOps;
  llvm::SmallVector<mlir::tensor::ConcatOp> cacheAppendOps;
  /// -1: known to have no steps.
  llvm::DenseMap<mlir::Value, StepAxis> axes;
  /// For each argument with steps a step a row, one argument of its class
  /// of arguments that count the same steps.
  llvm::DenseMap<mlir::Value, mlir::Value> argumentClasses;
};

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_STEPAXES_H
