//===- Passes.td - seqc passes -----------------------------*- tablegen -*-===//

#ifndef SEQC_PASSES_TD
#define SEQC_PASSES_TD

include "mlir/Pass/PassBase.td"

def SeqLowerToReference : Pass<"seq-lower-to-reference"> {
  let summary = "Lower every seq op to explicit loops on tensors (the oracle)";
  let description = [{
    Rewrites each `seq` op into `scf.for` loop nests over tensors with
    `tensor.extract` / `tensor.insert`, `arith` and `math`, following the
    SPEC's equations one step at a time: recurrences run sequentially, sums
    accumulate in f32, transcendental functions stay exact `math` ops (libm at
    the end). It is written for clarity, not speed: the fast lowerings are
    tested against it. Dynamic dimensions get `seq.check` run-time checks
    derived from each op's shape signature; expert indices are checked before
    they are used.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::seqc::seq::SeqDialect"
  ];
}

def SeqLowerChecks : Pass<"seq-lower-checks", "::mlir::ModuleOp"> {
  let summary = "Lower seq.check to calls into seqc's runtime";
  let description = [{
    Turns every `seq.check` into an `scf.if` that, when the condition is
    false, calls `seqc_rt_check_failed(message, nargs, a0, a1, a2, a3)`. The
    runtime records the formatted message and unwinds to the entry of the
    running call, which then reports the error instead of results.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::scf::SCFDialect", "::seqc::seq::SeqDialect"
  ];
}

def SeqLowerParallel : Pass<"seq-lower-parallel", "::mlir::ModuleOp"> {
  let summary = "Lower seq.parallel_for to the runtime's thread pool";
  let description = [{
    Runs on memrefs, before the conversion to LLVM. Each `seq.parallel_for`
    becomes a context struct on the stack holding the shared arguments (memref
    descriptors and scalars) and a call of
    `seqc_rt_parallel_for(count, trampoline, ctx)`. One trampoline per callee,
    `(ptr ctx, i64 begin, i64 end) -> ()` with a plain C signature, unpacks
    the context and calls the callee with the range.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect"
  ];
}

#endif // SEQC_PASSES_TD
