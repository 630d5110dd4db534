//===- Transforms/Passes.td - target-independent passes ---*- tablegen -*-===//

#ifndef SEQC_PASSES_TRANSFORMS_PASSES_TD
#define SEQC_PASSES_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def SeqSelectStrategy : Pass<"seq-select-strategy", "::mlir::ModuleOp"> {
  let summary = "Choose each op's plan (recurrent, chunked Q, global) for a target";
  let description = [{
    Sets `seq.plan = #seq.plan<...>` on every `seq.ssd`,
    `seq.linear_attention` and `seq.delta_rule` that has none, from one cost model over one
    description of the target (Transforms/Strategy.h): non-causal linear
    attention is `global`; sequences shorter than 16 steps, and variants
    the target has no chunked kernel for, are `recurrent`, as are, on the
    CPU, linear attention without a normalizer, bonus or per-key decay and
    the delta rule with a scalar decay whose K x V state fits in half of
    L1 and that have no `chunk_size`; the rest are
    `chunked` with the op's `chunk_size` when the target's kernels allow
    it (else the nearest allowed size, with a remark), or the cost model's
    chunk size. The CPU and GPU lowerings follow the plan; an existing plan
    is kept, so a plan can be forced in the input.

    `target=cpu` describes the host CPU (`vector-width`, `l1-bytes` and
    `l2-bytes` override what is detected); `target=gpu` the GPU named by
    `chip`.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "The machine to plan for: cpu or gpu">,
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "CPU: f32 lanes per vector (0: the host's widest)">,
    Option<"l1Bytes", "l1-bytes", "int64_t", /*default=*/"0",
           "CPU: per-core L1 data cache bytes (0: the host's)">,
    Option<"l2Bytes", "l2-bytes", "int64_t", /*default=*/"0",
           "CPU: per-core L2 cache bytes (0: the host's)">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_80\"",
           "GPU: the architecture (sm_80, sm_90a, ...)">
  ];
  let dependentDialects = ["::seqc::seq::SeqDialect"];
}

def SeqExpandSequences : Pass<"seq-expand-sequences"> {
  let summary = "Run packed batches and checkpointed ops as loops of plain ops";
  let description = [{
    An op with `segments(%cu)` (SPEC section 1: `S` sequences packed along
    `T`, `cu` their offsets) becomes a loop over its sequences, each the
    same op without segments on its slice of the packed tensors (attention:
    its keys by `kv_segments`, or by `segments`), with its `init` row; the
    results are assembled back, and a sequence of no steps keeps its `init`
    (or zeros) as `last`. An op with `checkpoint_every = n` runs each
    sequence in pieces of `n` steps (from the end when `reverse`), carrying
    the state; each piece's `last` is a checkpoint. The offsets are checked
    at run time (`cu[0] = 0`, non-decreasing, `cu[S] = T`, `B = 1`) before
    any slice is read. Which operands are sliced follows the op's shape
    signature, so one pattern serves every op and both targets; the
    lowerings then see only plain ops and choose their plans for them.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::seqc::seq_rt::SeqRtDialect"];
}

def SeqDistributeSteps : Pass<"seq-distribute-steps", "::mlir::ModuleOp"> {
  let summary = "Split every seq op with a time axis over R ranks (sequence parallelism)";
  let description = [{
    Under `ranks = R`, rank `r` computes steps `[r T / R, (r + 1) T / R)` of
    every op with a state, of `causal_conv1d` and of `attention`; the
    function's arguments and results stay whole on every rank, so results
    equal the single-process run's to float rounding. An op with a state
    computes its own state from zero and its transition (the op with its
    additive input zero, from ones, or from the identity for the delta
    rules), the ranks all-gather the pairs (LASP-2), each folds
    `S <- M_j S + S_j` over the ranks before it into its incoming state and
    runs its steps from there; `last` is the fold over all ranks.
    `causal_conv1d` reads the `W - 1` inputs before its slice again,
    `attention` gives its slice's queries the keys they see. Each rank's
    steps of a result are all-gathered. The exchanges are `shard`
    collectives on the grid `@seq_ranks` (shape `R`), which each target
    lowers to its engine. Ops it does not split (`associative_scan`,
    non-causal or normalized `linear_attention`, non-causal windowed
    attention) run whole on every rank with a remark, an error under
    `strict`. With `ranks = 1` the module is left as it is. Runs after
    `seq-expand-sequences`.

    With `local`, each rank's arguments and results with steps are its own
    steps (any number on each rank; rank r's follow rank r - 1's in the
    whole): the ops take them as they are and nothing is gathered but the
    states, the conv's last `W - 1` inputs of each rank, a token shift's
    last `k`, attention's keys and values (after a KV cache, a
    `tensor.concat` of a cache of dynamic length and the new steps read as
    attention's keys and values: every rank's new steps, after the whole
    cache), and a MoE layer's counts (the
    router's aux-loss statistics; `moe_ffn`'s choices per expert, for its
    load and capacity over every rank's tokens: each rank runs every expert
    on its own tokens, unless `leave-experts` leaves `moe_ffn` to
    `seq-distribute-experts` with `local`, which runs after). The graph
    around the ops must treat steps independently: a reduction over steps,
    a slice of them at an offset, the number of steps used as a value, a
    static number of steps or an op not known to keep steps apart is an
    error naming it. The arguments and results with steps are marked
    `seq.steps = d` (their step dimension), and arguments that must count
    the same steps `seq.step_group = i` (the first such argument's number).
    Ops that do not split are an error.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1",
           "Processes the steps are split over">,
    Option<"strict", "strict", "bool", /*default=*/"false",
           "An op that runs whole on every rank is an error, not a remark">,
    Option<"local", "local", "bool", /*default=*/"false",
           "Rank-local steps: the arguments and results with steps are each "
           "rank's own (marked seq.steps), not the whole">,
    Option<"leaveExperts", "leave-experts", "bool", /*default=*/"false",
           "Under local, leave moe_ffn to seq-distribute-experts local=1 "
           "(expert parallelism on each rank's own tokens)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect",
                           "::seqc::seq_rt::SeqRtDialect"];
}

def SeqDistributeExperts : Pass<"seq-distribute-experts", "::mlir::ModuleOp"> {
  let summary = "Split every moe_ffn's experts over R ranks (expert parallelism)";
  let description = [{
    Under `ranks = R`, rank `r` holds experts `[r E / R, (r + 1) E / R)` of
    every `seq.moe_ffn` and routes tokens `[r T / R, (r + 1) T / R)`. The
    ranks all-gather their choice counts (R x (E + 2)), so each knows how many of
    its choices every expert's capacity accepts (token order across ranks,
    as in the single-process op); the accepted rows go to their experts'
    ranks and back with pairwise `shard.send` / `shard.recv` (an
    all-to-all in R - 1 steps, the pairs of step `s` being `r` and
    `r xor s`); each rank runs its experts as a `seq.moe_ffn` over the rows
    it received; the tokens' results are all-gathered. Arguments and
    results stay whole on every rank, and other ops run replicated. `E`
    that is not a multiple of R is an error naming the rank counts that
    split it (at run time when `E` is dynamic). With `ranks = 1` the
    module is left as it is.

    With `local` (after `seq-distribute-steps local=1 leave-experts=1`,
    which found the tokens), each rank's tokens are its own, any number on
    each (rank r's after rank r - 1's, as DeepEP has them): the counts'
    all-gather also carries each rank's tokens (capacity counts all of
    them) and its indices outside `[0, E)` (so that one bad index fails
    every rank before the exchange), and each rank keeps its tokens'
    results instead of gathering them.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1",
           "Processes the experts are split over">,
    Option<"local", "local", "bool", /*default=*/"false",
           "Each rank's tokens are its own (rank-local steps), not the "
           "whole">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect",
                           "::seqc::seq_rt::SeqRtDialect"];
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

def SeqCheckRankAgreement : Pass<"seq-check-rank-agreement", "::mlir::ModuleOp"> {
  let summary = "Check at each call that the ranks pass agreeing shapes";
  let description = [{
    After the distribution passes (a module with the grid `@seq_ranks`),
    every public function with dynamic dimensions starts with one
    all-gather of their sizes, a row per rank. Every rank then checks every
    column against rank 0's, so ranks that pass disagreeing shapes all stop
    with the same error, naming the dimension, the argument, a rank that
    differs and both sizes, before an exchange could pair mismatched data
    or a shape check stop one rank while the others wait in a collective.
    A step dimension (an argument marked `seq.steps = d` under rank-local
    steps) is each rank's own and is not compared with other ranks'; but
    the arguments marked `seq.step_group = i` must count as many steps on
    each rank: their sizes join the row (a function whose only dynamic
    sizes are steps gets the exchange for them), and every rank checks
    every rank's. Static dimensions are the module's, which the host checks
    before the call.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect",
                           "::seqc::seq_rt::SeqRtDialect"];
}

#endif // SEQC_PASSES_TRANSFORMS_PASSES_TD
