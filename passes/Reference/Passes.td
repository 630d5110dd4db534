//===- Reference/Passes.td - the reference lowering -------*- tablegen -*-===//

#ifndef SEQC_PASSES_REFERENCE_PASSES_TD
#define SEQC_PASSES_REFERENCE_PASSES_TD

include "mlir/Pass/PassBase.td"

def SeqLowerToReference : Pass<"seq-lower-to-reference"> {
  let summary = "Lower every seq op to explicit loops on tensors (the oracle)";
  let description = [{
    Rewrites each `seq` op into `scf.for` loop nests over tensors with
    `tensor.extract` / `tensor.insert`, `arith` and `math`, following the
    SPEC's equations one step at a time: recurrences run sequentially, sums
    accumulate in f32, transcendental functions stay exact `math` ops (libm at
    the end). It is written for clarity, not speed: the fast lowerings are
    tested against it. Dynamic dimensions get `seq_rt.check` run-time checks
    derived from each op's shape signature; expert indices are checked before
    they are used.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::seqc::seq::SeqDialect",
    "::seqc::seq_rt::SeqRtDialect"
  ];
}

#endif // SEQC_PASSES_REFERENCE_PASSES_TD
