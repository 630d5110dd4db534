//===- SeqRtOps.td - seqc's internal runtime-ABI ops -------*- tablegen -*-===//
//
// Ops that seqc's lowerings emit on their way to its runtime and that no
// user writes: run-time checks and thread-pool dispatch. They live outside
// the public `seq` dialect, so the SPEC's dialect holds only the operators
// of sequence models; `seq-lower-checks` and `seq-lower-parallel` turn them
// into calls of the runtime's entry points (runtime/EntryPoints.h).
//
//===----------------------------------------------------------------------===//

#ifndef SEQRT_OPS_TD
#define SEQRT_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def SeqRt_Dialect : Dialect {
  let name = "seq_rt";
  let cppNamespace = "::seqc::seq_rt";
  let summary = "seqc's internal ops for its runtime (checks, thread pool)";
  let description = [{
    Emitted by seqc's lowerings, lowered to calls into seqc's runtime by
    `seq-lower-checks` and `seq-lower-parallel`. Not part of the public
    `seq` dialect: their form may change with the runtime's ABI.
  }];
}

class SeqRt_Op<string mnemonic, list<Trait> traits = []>
    : Op<SeqRt_Dialect, mnemonic, traits>;

def SeqRt_CheckOp : SeqRt_Op<"check",
    [MemoryEffects<[MemWrite]>]> {
  let summary = "a run-time check that ends the call with an error when false";
  let description = [{
    Emitted by lowerings for what the verifier cannot see (dynamic dimensions
    that must agree, divisibility, index ranges). When `condition` is false
    the running call stops and reports `message`, with `{0}`, `{1}`, ...
    replaced by the decimal values of `args`. Lowered to a call into seqc's
    runtime, which unwinds to the call's entry: no output is produced.

    ```mlir
    seq_rt.check %ok, "dimension 1 (T) of dt is {0} but x has {1}" (%a, %b : index, index)
    ```
  }];
  let arguments = (ins I1:$condition, StrAttr:$message,
                   Variadic<AnyTypeOf<[Index, AnySignlessInteger]>>:$args);
  let assemblyFormat = [{
    $condition `,` $message (`(` $args^ `:` type($args) `)`)? attr-dict
  }];
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

def SeqRt_ParallelForOp : SeqRt_Op<"parallel_for",
    [MemoryEffects<[MemRead, MemWrite]>,
     DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "runs a function over [0, count) on the runtime's thread pool";
  let description = [{
    Calls `callee(begin, end, args...)` on disjoint ranges `[begin, end)`
    covering `[0, count)`, from the threads of seqc's runtime pool (the
    calling thread included), and returns when all ranges are done. The
    callee is a `func.func` whose first two arguments are `index`; the other
    arguments (memrefs and scalars) are shared by every range. Emitted by the
    CPU lowerings after bufferization; `seq-lower-parallel` turns it into a
    call of `seqc_rt_parallel_for` with a trampoline.

    ```mlir
    seq_rt.parallel_for %n, @kernel(%a, %b) : memref<?x64xf32>, memref<?x64xf32>
    ```
  }];
  let arguments = (ins Index:$count, FlatSymbolRefAttr:$callee,
                   Variadic<AnyType>:$args);
  let assemblyFormat = [{
    $count `,` $callee `(` $args `)` attr-dict `:` type($args)
  }];
}

def SeqRt_ParallelWidthOp : SeqRt_Op<"parallel_width",
    [MemoryEffects<[MemRead]>]> {
  let summary = "the threads a parallel_for issued here would run on";
  let description = [{
    The number of threads that a `seq_rt.parallel_for` at this point would
    share its ranges among: the runtime pool's size (`SEQC_NUM_THREADS`, else
    the hardware's threads, or what the host set), or 1 inside a task of the
    pool, where parallel loops run on the calling thread. Kernels that split
    their work into tasks read it at run time, so code compiled ahead of
    time splits for the machine and pool it runs on, not the compiler's.
    `seq-lower-parallel` turns it into a call of `seqc_rt_parallel_width`.

    ```mlir
    %threads = seq_rt.parallel_width : index
    ```
  }];
  let results = (outs Index:$width);
  let assemblyFormat = "attr-dict `:` type($width)";
}

#endif // SEQRT_OPS_TD
