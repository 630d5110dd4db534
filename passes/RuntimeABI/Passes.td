//===- RuntimeABI/Passes.td - lowering to the runtime ABI -*- tablegen -*-===//

#ifndef SEQC_PASSES_RUNTIMEABI_PASSES_TD
#define SEQC_PASSES_RUNTIMEABI_PASSES_TD

include "mlir/Pass/PassBase.td"

def SeqLowerChecks : Pass<"seq-lower-checks", "::mlir::ModuleOp"> {
  let summary = "Lower seq_rt.check to calls into seqc's runtime";
  let description = [{
    Turns every `seq_rt.check` into an `scf.if` that, when the condition is
    false, calls `seqc_rt_check_failed(message, nargs, a0, a1, a2, a3)`. The
    runtime records the formatted message and unwinds to the entry of the
    running call, which then reports the error instead of results.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::scf::SCFDialect", "::seqc::seq_rt::SeqRtDialect"
  ];
}

def SeqLowerParallel : Pass<"seq-lower-parallel", "::mlir::ModuleOp"> {
  let summary = "Lower seq_rt.parallel_for to the runtime's thread pool";
  let description = [{
    Runs on memrefs, before the conversion to LLVM. Each `seq_rt.parallel_for`
    becomes a context struct on the stack holding the shared arguments (memref
    descriptors and scalars) and a call of
    `seqc_rt_parallel_for(count, trampoline, ctx)`. One trampoline per callee,
    `(ptr ctx, i64 begin, i64 end) -> ()` with a plain C signature, unpacks
    the context and calls the callee with the range. Each
    `seq_rt.parallel_width` becomes a call of `seqc_rt_parallel_width()`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect"
  ];
}

def SeqEmitPackedWrappers : Pass<"seq-emit-packed-wrappers",
                                 "::mlir::ModuleOp"> {
  let summary = "Give every public function a packed C entry point";
  let description = [{
    Runs on the LLVM dialect. For every public function `@f` adds
    `_seqc_packed_f(void **args)`: args[i] points at the i-th scalar argument
    of `@f` (its memrefs as expanded descriptors) and the last pointer at room
    for its results. Private functions become internal.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // SEQC_PASSES_RUNTIMEABI_PASSES_TD
