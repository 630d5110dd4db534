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

def SeqLowerToCpu : Pass<"seq-lower-to-cpu", "::mlir::ModuleOp"> {
  let summary = "Lower seq ops to fast, vectorized, multi-threaded CPU kernels";
  let description = [{
    Rewrites each seq op into kernels on memrefs that run over a task space
    on seqc's thread pool (`seq.parallel_for`), bridged to the tensor graph
    with `bufferization.to_buffer` / `to_tensor`. Kernels keep recurrent
    states in vector registers of the target's width. Ops (or element
    types) without a fast kernel take the reference lowering, and a remark
    says so, naming the op, its types and why each fast kernel declined it
    (matmuls left to generic loops too); with `strict` that is an error.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "f32 lanes per vector (0: the host's widest)">,
    Option<"fuse", "fuse", "bool", /*default=*/"true",
           "Apply elementwise producers and consumers inside matmul kernels">,
    Option<"strict", "strict", "bool", /*default=*/"false",
           "An op without a fast kernel is an error (else a remark)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect", "::seqc::seq::SeqDialect"
  ];
}

def SeqLowerToGpu : Pass<"seq-lower-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower seq ops to GPU kernels (gpu.launch) in phases";
  let description = [{
    Rewrites each seq op with a GPU lowering into `gpu.launch` kernels on
    memrefs, bridged to the tensor graph with `bufferization.to_buffer` /
    `to_tensor`: chunked scans, one thread per channel with states in
    registers for selective scans, and SSD as chunk-state, state-passing
    and chunk-output kernels whose tiles are staged in shared memory
    (workgroup attributions). Matrix products of bf16 operands (f16 too in
    matmuls and attention) use the tensor cores (`nvvm.mma.sync` m16n8k16,
    f32 accumulators) on sm_80 and later. Ops without a GPU kernel take the
    reference lowering (host code over managed memory), and a remark says
    so with the reasons; with `strict` that is an error.

    With `emulate`, the same kernels are emitted as host code instead: one
    thread-pool task per thread block, shared memory on the task's stack,
    the threads of a phase one after another. Tests use it to check the
    kernels' arithmetic without a GPU.
  }];
  let options = [
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Emit the kernels as host code (tests without a GPU)">,
    Option<"blockThreads", "block-threads", "int64_t", /*default=*/"256",
           "Threads per thread block">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_80\"",
           "GPU architecture (sm_80 and later: bf16/f16 products on tensor "
           "cores, mma.sync)">,
    Option<"strict", "strict", "bool", /*default=*/"false",
           "An op without a GPU kernel is an error (else a remark)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::seqc::seq::SeqDialect"
  ];
}

def SeqExpandBf16 : Pass<"seq-expand-bf16"> {
  let summary = "Host bf16 conversions as integer arithmetic";
  let description = [{
    Rewrites `arith.truncf` to bf16 (round to nearest even, NaN kept) and
    `arith.extf` from bf16 as bit operations on i32. LLVM would otherwise
    call compiler-rt's `__truncsfbf2`, which neither the C library nor GCC 12's
    libgcc provide: ahead-of-time libraries with bf16 failed to load.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def SeqCopyGlobalsToManaged
    : Pass<"seq-copy-globals-to-managed", "::mlir::ModuleOp"> {
  let summary = "Give kernels managed copies of constant globals";
  let description = [{
    Constant tensors bufferize to `memref.get_global` of host globals, which
    a GPU cannot read (without HMM). In every host function, each
    `memref.get_global` becomes a `memref.alloc` (managed memory in a CUDA
    call) filled from the global with `memref.copy`; host code and kernels
    then read the copy. Runs after bufferization, before kernel outlining.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def SeqGpuRegisterBudget : Pass<"seq-gpu-register-budget", "::mlir::ModuleOp"> {
  let summary = "Give every GPU kernel an explicit register budget";
  let description = [{
    Sets `nvvm.maxnreg` on every kernel (`gpu.func` with `gpu.kernel`) that
    has none. Kernels whose block size is known carry `.maxntid`, and ptxas
    then aims at full occupancy, spilling registers to local memory (the
    SSD output kernel: 48 registers and spills at 256 threads on sm_90a).
    Shared memory caps seqc's tiled kernels at a few blocks per SM anyway,
    so an explicit budget keeps them spill-free. The budget never exceeds
    what one block of the kernel's known size may have (64K registers per
    SM: 64 per thread at 1024 threads), or the launch would fail.

    It also aligns the kernels' shared buffers (workgroup attributions) to
    16 bytes, for the vector loads LLVM forms on them.
  }];
  let options = [
    Option<"maxRegisters", "max-registers", "int64_t", /*default=*/"255",
           "Registers per thread a kernel may use">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def SeqFuseElementwise : Pass<"seq-fuse-elementwise"> {
  let summary = "Fold elementwise glue into the seq ops that can apply it";
  let description = [{
    Recognizes `linalg.generic` producers and consumers a seq op computes
    itself, and folds them in: `softplus(dt [+ bias])` before `seq.ssd` /
    `seq.selective_scan` becomes `dt_bias` / `dt_softplus`, `y * silu(z)`
    after them becomes `gate(z)`, `silu` after `seq.causal_conv1d` its
    `activation`, and the same `elu + 1` or `relu` on the queries and keys of
    `seq.linear_attention` its `feature_map`. The kernels then apply them on
    the fly instead of the graph materializing each intermediate.
  }];
  let dependentDialects = ["::seqc::seq::SeqDialect"];
}

def SeqProfileCalls : Pass<"seq-profile-calls", "::mlir::ModuleOp"> {
  let summary = "Time every call a public function makes (per-layer profiles)";
  let description = [{
    Model graphs call one private function per layer. This pass brackets
    each `func.call` in a public function with calls to the runtime's
    `seqc_rt_profile_enter(id)` / `seqc_rt_profile_exit(id)` and records the
    regions' names (the call's `seq.name` attribute, else the callee's name)
    in the function's `seq.profile_regions` attribute, in id order. The host
    reads the accumulated times after a call (`seqc-run --profile`). With
    `all-functions`, calls in private functions are timed too (regions
    nest), and every public function lists all of the module's regions.
  }];
  let options = [
    Option<"allFunctions", "all-functions", "bool", /*default=*/"false",
           "Time the calls of private functions too">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::arith::ArithDialect"];
}

def SeqOutlineOps : Pass<"seq-outline-ops", "::mlir::ModuleOp"> {
  let summary = "Move every compute op into a function of its own";
  let description = [{
    For measuring a graph op by op: each seq op, linalg op, tensor.concat
    and elementwise arith / math op on tensors at the top level of a
    function becomes a call to a new private function holding only that op
    (captured constants are cloned into it). Nothing fuses across the calls
    and every op's results are materialized, so with `seq-profile-calls`
    (all functions) this times "the ops run separately". The calls are
    named `<function>:<n> <op name>` (`seq.name`).
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def SeqVectorMath : Pass<"seq-vector-math"> {
  let summary = "Polynomial approximations of exp, log, erf, ... (fast path)";
  let description = [{
    Replaces `math` ops on f32 (scalars and vectors) by the upstream
    polynomial approximations, which vectorize. Used by the fast CPU
    pipeline; the reference pipeline keeps libm.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect", "::mlir::vector::VectorDialect"
  ];
}

def SeqMathToLibm : Pass<"seq-math-to-libm", "::mlir::ModuleOp"> {
  let summary = "Call libm for the math functions LLVM cannot lower exactly";
  let description = [{
    expm1, log1p, erf, erfc, the inverse and hyperbolic trigonometric
    functions and cbrt become libm calls (vectors unrolled); every other math
    op is left to the LLVM conversion, which keeps floor, fma, sqrt, exp, ...
    as (vector) intrinsics.
  }];
  let dependentDialects = [
    "::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::vector::VectorDialect"
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

#endif // SEQC_PASSES_TD
