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
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_TRANSFORMS_STEPAXES_H
#define SEQC_PASSES_TRANSFORMS_STEPAXES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
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

class StepAxes {
public:
  /// The analysis of `func`, or failure after an error on the op that keeps
  /// it from running rank-local.
  static mlir::FailureOr<StepAxes> analyze(mlir::func::FuncOp func);

  /// Where `value` holds the steps; nullopt for a tensor without steps
  /// (weights, states) and every other value.
  std::optional<StepAxis> of(mlir::Value value) const;

private:
  class Solver;
  /// -1: known to have no steps.
  llvm::DenseMap<mlir::Value, StepAxis> axes;
};

} // namespace seqc

#endif // SEQC_PASSES_TRANSFORMS_STEPAXES_H
