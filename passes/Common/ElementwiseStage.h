//===- ElementwiseStage.h - elementwise ops applied inside kernels -*- C++
//-*-===//
//
// Norms, scales, activations and residual adds around a matmul are
// elementwise linalg.generic ops over the matmul's operand or result. A
// kernel can apply them while it reads its operand or before it stores its
// result, so the graph never writes and reads back the intermediate. An
// ElementwiseStage is such a generic: a 2-D iteration space whose output is
// written at (m, n), inputs read at (m, n), (m) or (n), and a body of
// arith/math ops on scalars, which the kernel re-emits on vectors.
//
//===----------------------------------------------------------------------===//

#ifndef SEQC_PASSES_ELEMENTWISESTAGE_H
#define SEQC_PASSES_ELEMENTWISESTAGE_H

#include "Common/KernelBuilder.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace seqc {

struct ElementwiseStage {
  /// How an input is indexed by the iteration (m, n).
  enum class Access { Full, Row, Col };

  mlir::linalg::GenericOp op;
  llvm::SmallVector<Access> access;
  /// The body value emit() computes: the yielded one, or for a row sum the
  /// summand.
  Value result;

  /// `op` as a stage, if it is one: all-parallel over 2-D, f32, identity
  /// output map, inputs indexed by (m, n), (m) or (n), a body of arith and
  /// math ops that does not read the output, capturing only constants.
  static std::optional<ElementwiseStage> match(mlir::linalg::GenericOp op);
  /// `op` as a row sum, out[m] += sum_n f(inputs at (m, n)): iterators
  /// (parallel, reduction), output indexed by (m), a body yielding
  /// `acc + f` with f a stage's body; emit() then computes f.
  static std::optional<ElementwiseStage>
  matchRowSum(mlir::linalg::GenericOp op);

  /// The stage's value for `lanes` consecutive columns [col, col + lanes) of
  /// row `row`: input i is `given` when i == givenInput, else loaded from
  /// `buffers[i]` (the kernel's view of the op's input i). `mask` (may be
  /// null) marks the valid lanes of a partial vector.
  Value emit(KernelBuilder &kb, int64_t lanes, Value row, Value col,
             mlir::ValueRange buffers, int givenInput, Value given,
             Value mask) const;
};

/// The one user of `v` other than tensor.dim ops (which only read its
/// shape, like the checks of run-time verification), if there is exactly
/// one: whether a kernel may absorb the op that computes `v`.
mlir::Operation *soleComputeUser(Value v);

} // namespace seqc

#endif // SEQC_PASSES_ELEMENTWISESTAGE_H
