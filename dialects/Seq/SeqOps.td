//===- SeqOps.td - operations of the seq dialect -----------*- tablegen -*-===//
//
// Every op here is the contract of ../shared/SPEC.md section 2: operand order,
// optional `keyword(%v)` groups in the listed order, attributes with their
// defaults (elided when printed), and `functional-type` signatures.
//
//===----------------------------------------------------------------------===//

#ifndef SEQ_OPS_TD
#define SEQ_OPS_TD

include "Seq/SeqDialect.td"
include "Seq/SeqAttrs.td"
include "Seq/SeqInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Undotted attributes that are not the op's own are verifier errors.
def Seq_KnownAttributesOnly : NativeOpTrait<"KnownAttributesOnly"> {
  let cppNamespace = "::seqc::seq";
}

class Seq_Op<string mnemonic, list<Trait> traits = []>
    : Op<Seq_Dialect, mnemonic,
         !listconcat(traits, [Seq_KnownAttributesOnly,
                              DeclareOpInterfaceMethods<
                                  Seq_ShapeSignatureOpInterface>])> {
  let hasVerifier = 1;
}

// The required operands are written `%a, %b, ...` through
// custom<RequiredOperands>("\"a, b\"", $a, $b): a missing one is an error
// naming it (a plain `$a `,` $b` says only "expected ','").
//
// Shapes and element types are checked by the op verifiers (through the shape
// signature), which name the operand and the dimension of every mismatch.
//
// The operand tables of the generated reference say the element types the
// verifier accepts. The constraints check rankedness only: the shape
// signature checks element types with messages that name the operand (and
// the operand whose type a data tensor must share), which ODS's positional
// "operand #3 must be ..." would replace.
class Seq_TensorOf<string summary>
    : Type<CPred<"::llvm::isa<::mlir::RankedTensorType>($_self)">,
           summary, "::mlir::RankedTensorType">;
def Seq_DataTensor : Seq_TensorOf<
    "ranked tensor of f32, f16 or bf16 (every data operand and result of the "
    "op has the same element type)">;
def Seq_StateTensor : Seq_TensorOf<"ranked tensor of f32 (states stay f32)">;
def Seq_ParamTensor : Seq_TensorOf<
    "ranked tensor of f32 or of the op's data element type">;
def Seq_IndexTensor : Seq_TensorOf<"ranked tensor of i32">;
def Seq_LoadTensor : Seq_TensorOf<"ranked tensor of i64">;

// Packed variable-length batches and state checkpoints (SPEC section 1):
// every op with a state takes `segments(%cu)` as its last optional group and
// `checkpoint_every = n`, which adds the `checkpoints` result after `last`.
// The interfaces' methods are the ops' generated accessors.
defvar Seq_Packed = Seq_PackedSequencesOpInterface;
defvar Seq_Stateful = Seq_StatefulOpInterface;

//===----------------------------------------------------------------------===//
// Scans
//===----------------------------------------------------------------------===//

def Seq_LinearScanOp : Seq_Op<"linear_scan",
    [Pure, AttrSizedOperandSegments, Seq_Packed, Seq_Stateful]> {
  let summary = "first-order linear recurrence h_t = a_t * h_{t-1} + b_t";
  let description = [{
    `a` and `b` have the same shape `B x T x S...` (rank >= 2, any trailing
    state dimensions). The op computes `h_t = a_t * h_{t-1} + b_t` with
    `h_{-1} = init` (zero when absent). With `reverse = true` time runs from
    `T-1` down to `0`. `last` is the state after the last processed step.

    This covers minGRU (`a = 1 - z`, `b = z * h~`), diagonal / S4D SSMs,
    cumulative sums and cumulative decays.

    ```mlir
    %h, %last = seq.linear_scan %a, %b init(%h0) {reverse = false}
      : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x8xf32>)
        -> (tensor<2x16x8xf32>, tensor<2x8xf32>)
    ```
  }];
  let arguments = (ins Seq_DataTensor:$a, Seq_DataTensor:$b,
                       Optional<Seq_StateTensor>:$init,
                   Optional<Seq_IndexTensor>:$segments,
                   DefaultValuedAttr<I64Attr, "0">:$checkpoint_every,
                   DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs Seq_DataTensor:$h, Seq_StateTensor:$last,
                      Optional<Seq_StateTensor>:$checkpoints);
  let assemblyFormat = [{
    custom<RequiredOperands>("\"a, b\"", $a, $b) (`init` `(` $init^ `)`)? (`segments` `(` $segments^ `)`)? attr-dict
    `:` functional-type(operands, results)
  }];
}

def Seq_AssociativeScanOp : Seq_Op<"associative_scan",
    [RecursiveMemoryEffects, SingleBlock, AttrSizedOperandSegments,
     Seq_Packed]> {
  let summary = "inclusive scan with a user-defined associative combiner";
  let description = [{
    `n` operands of one shape are scanned together along `dim`:
    `out_0 = x_0`, `out_t = combine(out_{t-1}, x_t)`. The combiner region takes
    `2n` scalars, the earlier prefix first and the next element second, and
    yields `n` scalars with `seq.yield`. The combiner is assumed associative,
    so lowerings may reassociate it (tree, chunked, Blelloch). With
    `reverse = true` the scan runs from the last index down to the first.

    ```mlir
    %r0, %r1 = seq.associative_scan %a, %b {dim = 1 : i64}
      : (tensor<4x64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
    ^bb0(%a1: f32, %b1: f32, %a2: f32, %b2: f32):
      %a = arith.mulf %a1, %a2 : f32
      %t = arith.mulf %a2, %b1 : f32
      %b = arith.addf %t, %b2 : f32
      seq.yield %a, %b : f32, f32
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                   Optional<Seq_IndexTensor>:$segments,
                   DefaultValuedAttr<I64Attr, "1">:$dim,
                   DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs Variadic<AnyRankedTensor>:$outputs);
  let regions = (region SizedRegion<1>:$combiner);
  let assemblyFormat = [{
    $inputs (`segments` `(` $segments^ `)`)? attr-dict
    `:` functional-type(operands, results) $combiner
  }];
  let hasRegionVerifier = 1;
}

def Seq_YieldOp : Op<Seq_Dialect, "yield", [Pure, Terminator,
    HasParent<"AssociativeScanOp">, ReturnLike]> {
  let summary = "yields the combined scalars of an associative_scan combiner";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// State-space models
//===----------------------------------------------------------------------===//

def Seq_SelectiveScanOp : Seq_Op<"selective_scan",
    [Pure, AttrSizedOperandSegments, Seq_Packed, Seq_Stateful]> {
  let summary = "Mamba-1 selective state-space scan";
  let description = [{
    Shapes: `u, delta, gate: B x T x D`, `A: D x N`, `B, C: B x T x G x N`,
    `skip, delta_bias: D`, `init` and `last: B x D x N`, `y: B x T x D`.
    Channel `d` uses group `g = d / (D / G)`.

    - `dt = delta + delta_bias`; with `delta_softplus`, `dt = softplus(dt)`
      (`= dt` for `dt > 20`).
    - `Abar = exp(dt * A[d,n])`.
    - `zoh_euler` (default, as Mamba ships): `Bbar_x = dt * B[t,g,n] * u[t,d]`;
      `zoh`: `Bbar_x = expm1(dt * A) / A * B[t,g,n] * u[t,d]` (limit
      `dt * B * u` where `A = 0`).
    - `h[t,d,n] = Abar * h[t-1,d,n] + Bbar_x`, `h[-1] = init` (or 0).
    - `y[t,d] = sum_n C[t,g,n] * h[t,d,n] + skip[d] * u[t,d]`; with `gate`,
      `y *= z * sigmoid(z)`.
  }];
  let arguments = (ins Seq_DataTensor:$u, Seq_DataTensor:$delta,
                       Seq_ParamTensor:$A, Seq_DataTensor:$B,
                   Seq_DataTensor:$C, Optional<Seq_ParamTensor>:$skip,
                   Optional<Seq_DataTensor>:$gate,
                   Optional<Seq_ParamTensor>:$delta_bias,
                   Optional<Seq_StateTensor>:$init,
                   Optional<Seq_IndexTensor>:$segments,
                   DefaultValuedAttr<I64Attr, "0">:$checkpoint_every,
                   DefaultValuedAttr<BoolAttr, "false">:$delta_softplus,
                   DefaultValuedAttr<Seq_DiscretizationAttr,
                       "::seqc::seq::Discretization::zoh_euler">:$discretization);
  let results = (outs Seq_DataTensor:$y, Seq_StateTensor:$last,
                      Optional<Seq_StateTensor>:$checkpoints);
  let assemblyFormat = [{
    custom<RequiredOperands>("\"u, delta, A, B, C\"", $u, $delta, $A, $B, $C)
    (`skip` `(` $skip^ `)`)? (`gate` `(` $gate^ `)`)?
    (`delta_bias` `(` $delta_bias^ `)`)? (`init` `(` $init^ `)`)?
    (`segments` `(` $segments^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
}

def Seq_SsdOp : Seq_Op<"ssd",
    [Pure, AttrSizedOperandSegments, Seq_Packed, Seq_Stateful]> {
  let summary = "Mamba-2 structured state-space duality (scalar decay per head)";
  let description = [{
    Shapes: `x, gate, y: B x T x H x P`, `dt: B x T x H`, `A, dt_bias: H`,
    `skip: H` or `H x P` (mamba_ssm's `D_has_hdim`), `B, C: B x T x G x N`,
    `init` and `last: B x H x P x N`. Head `h` uses group `g = h / (H / G)`.

    - `dt = dt + dt_bias`, softplus when `dt_softplus`, then clamped to
      `[dt_min, dt_max]` (mamba_ssm's `dt_limit`; the defaults `0` and `+inf`
      clamp nothing, as there); `a[t,h] = exp(dt * A[h])`.
    - `h[t,h] = a[t,h] * h[t-1,h] + dt[t,h] * outer(x[t,h,:], B[t,g,:])`.
    - `y[t,h,p] = sum_n h[t,h,p,n] * C[t,g,n] + skip[h(,p)] * x[t,h,p]`;
      with `gate`, `y *= silu(z)`.

    Equivalently `Y = (L o (C B^T)) (dt o X)` per head with `L` the
    semiseparable mask of `dt * A`. `chunk_size` is a hint (0: the compiler
    chooses); any value gives the same result to float rounding.
  }];
  let arguments = (ins Seq_DataTensor:$x, Seq_DataTensor:$dt, Seq_ParamTensor:$A,
                       Seq_DataTensor:$B, Seq_DataTensor:$C,
                   Optional<Seq_ParamTensor>:$skip,
                   Optional<Seq_DataTensor>:$gate,
                   Optional<Seq_ParamTensor>:$dt_bias,
                   Optional<Seq_StateTensor>:$init,
                   Optional<Seq_IndexTensor>:$segments,
                   DefaultValuedAttr<I64Attr, "0">:$checkpoint_every,
                   DefaultValuedAttr<BoolAttr, "false">:$dt_softplus,
                   DefaultValuedAttr<F32Attr, "0.0">:$dt_min,
                   DefaultValuedAttr<F32Attr,
                       "std::numeric_limits<float>::infinity()">:$dt_max,
                   DefaultValuedAttr<I64Attr, "0">:$chunk_size);
  let results = (outs Seq_DataTensor:$y, Seq_StateTensor:$last,
                      Optional<Seq_StateTensor>:$checkpoints);
  let extraClassDeclaration = [{
    /// Whether dt_min / dt_max clamp dt (they are not the defaults 0, +inf).
    bool clampsDt();
  }];
  let assemblyFormat = [{
    custom<RequiredOperands>("\"x, dt, A, B, C\"", $x, $dt, $A, $B, $C)
    (`skip` `(` $skip^ `)`)? (`gate` `(` $gate^ `)`)?
    (`dt_bias` `(` $dt_bias^ `)`)? (`init` `(` $init^ `)`)?
    (`segments` `(` $segments^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
}

def Seq_SemiseparableMaskOp : Seq_Op<"semiseparable_mask", [Pure]> {
  let summary = "the SSD mask L[i,j] = exp(sum_{k=j+1..i} log_a[k])";
  let description = [{
    `log_a: ... x T` gives `L: ... x T x T` with
    `L[..., i, j] = exp(sum_{k=j+1..i} log_a[..., k])` for `i >= j` (so the
    diagonal is 1) and `0` above the diagonal. Lowerings compute segment sums
    directly, never differences of one long cumulative sum, so the mask stays
    accurate when partial sums are large.
  }];
  let arguments = (ins Seq_DataTensor:$log_a);
  let results = (outs Seq_DataTensor:$mask);
  let assemblyFormat = "$log_a attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Seq_LinearAttentionOp : Seq_Op<"linear_attention",
    [Pure, AttrSizedOperandSegments, Seq_Packed, Seq_Stateful]> {
  let summary = "kernelized / gated linear attention";
  let description = [{
    Shapes: `q, k: B x T x H x K`, `v: B x T x H x V`, `o: B x T x H x V`,
    `init` and `last: B x H x K x V`. `decay` is a log-decay of shape `H`
    (constant per head), `B x T x H` (data-dependent scalar) or
    `B x T x H x K` (per key channel, GLA).

    - `q' = phi(q) * scale`, `k' = phi(k)` with `phi` the `feature_map`
      (`identity`, `elu_plus_one`, `relu`).
    - Causal: `S_t = exp(g_t) * S_{t-1} + outer(k'_t, v_t)`, `o_t = q'_t S_t`;
      with `normalize`, `z_t = exp(g_t) * z_{t-1} + k'_t` and
      `o_t = q'_t S_t / (q'_t . z_t + eps)`.
    - `causal = false`: `S = sum_t outer(k'_t, v_t)`, `o_t = q'_t S`
      (normalized by `q'_t . sum_t k'_t + eps`); `decay` is then an error.
    - `bonus(u)` (`H x K`, RWKV-6, causal only, not with `normalize`): the
      output reads the state before the step's update plus a weighted
      current term, `o_t = q'_t (S_{t-1} + diag(u) outer(k'_t, v_t))`.
    - `normalize` together with `init` is an error (the normalizer is not
      carried). `last` is the final `S`.

    `chunk_size` is an algorithm hint, as for `seq.ssd`.
  }];
  let arguments = (ins Seq_DataTensor:$q, Seq_DataTensor:$k, Seq_DataTensor:$v,
                       Optional<Seq_DataTensor>:$decay,
                   Optional<Seq_ParamTensor>:$bonus,
                   Optional<Seq_StateTensor>:$init,
                   Optional<Seq_IndexTensor>:$segments,
                   DefaultValuedAttr<I64Attr, "0">:$checkpoint_every,
                   DefaultValuedAttr<Seq_FeatureMapAttr,
                       "::seqc::seq::FeatureMap::identity">:$feature_map,
                   DefaultValuedAttr<BoolAttr, "true">:$causal,
                   DefaultValuedAttr<BoolAttr, "false">:$normalize,
                   DefaultValuedAttr<F32Attr, "1.0">:$scale,
                   DefaultValuedAttr<F32Attr, "1.0e-6">:$eps,
                   DefaultValuedAttr<I64Attr, "0">:$chunk_size);
  let results = (outs Seq_DataTensor:$o, Seq_StateTensor:$last,
                      Optional<Seq_StateTensor>:$checkpoints);
  let assemblyFormat = [{
    custom<RequiredOperands>("\"q, k, v\"", $q, $k, $v) (`decay` `(` $decay^ `)`)?
    (`bonus` `(` $bonus^ `)`)? (`init` `(` $init^ `)`)? (`segments` `(` $segments^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Seq_DeltaRuleOp : Seq_Op<"delta_rule",
    [Pure, AttrSizedOperandSegments, Seq_Packed, Seq_Stateful]> {
  let summary = "delta-rule linear attention (DeltaNet, Gated DeltaNet, KDA)";
  let description = [{
    Shapes: `q, k: B x T x H x K`, `v, o: B x T x HV x V`, `beta: B x T x HV`,
    `init` and `last: B x HV x K x V`, `HV % H == 0` (value head `j` reads
    query/key head `j / (HV / H)`). `decay` is a log-decay of shape `HV`,
    `B x T x HV` (Gated DeltaNet) or `B x T x HV x K` (per key channel,
    Kimi Delta Attention); absent, there is none (DeltaNet).

    - With `qk_l2norm`, `q_t` and `k_t` are divided by
      `sqrt(|.|^2 + eps)` over `K`; then `q'_t = q_t * scale`.
    - `S~ = diag(exp(g_t)) S_{t-1}`,
      `S_t = S~ + beta_t * outer(k_t, v_t - S~^T k_t)`, `o_t = S_t^T q'_t`.
    - `last = S_T` (zero start without `init`).

    `chunk_size` is an algorithm hint, as for `seq.ssd`.
  }];
  let arguments = (ins Seq_DataTensor:$q, Seq_DataTensor:$k, Seq_DataTensor:$v,
                       Seq_DataTensor:$beta,
                   Optional<Seq_DataTensor>:$decay,
                   Optional<Seq_StateTensor>:$init,
                   Optional<Seq_IndexTensor>:$segments,
                   DefaultValuedAttr<I64Attr, "0">:$checkpoint_every,
                   DefaultValuedAttr<BoolAttr, "false">:$qk_l2norm,
                   DefaultValuedAttr<F32Attr, "1.0">:$scale,
                   DefaultValuedAttr<F32Attr, "1.0e-6">:$eps,
                   DefaultValuedAttr<I64Attr, "0">:$chunk_size);
  let results = (outs Seq_DataTensor:$o, Seq_StateTensor:$last,
                      Optional<Seq_StateTensor>:$checkpoints);
  let assemblyFormat = [{
    custom<RequiredOperands>("\"q, k, v, beta\"", $q, $k, $v, $beta)
    (`decay` `(` $decay^ `)`)? (`init` `(` $init^ `)`)? (`segments` `(` $segments^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Seq_GeneralizedDeltaRuleOp : Seq_Op<"generalized_delta_rule",
    [Pure, AttrSizedOperandSegments, Seq_Packed, Seq_Stateful]> {
  let summary = "diagonal-plus-low-rank state transition (RWKV-7)";
  let description = [{
    Shapes: `q, k, a, b, decay: B x T x H x K`, `v, o: B x T x H x V`,
    `init` and `last: B x H x K x V`.

    - `S_t = diag(exp(g_t)) S_{t-1} + outer(b_t, a_t^T S_{t-1}) +
      outer(k_t, v_t)` (no decay when `decay` is absent),
      `o_t = S_t^T (q_t * scale)`.
    - RWKV-7 is `a = -kappa^`, `b = kappa^ * a_rwkv`. `last = S_T`.
  }];
  let arguments = (ins Seq_DataTensor:$q, Seq_DataTensor:$k, Seq_DataTensor:$v,
                       Seq_DataTensor:$a, Seq_DataTensor:$b,
                   Optional<Seq_DataTensor>:$decay,
                   Optional<Seq_StateTensor>:$init,
                   Optional<Seq_IndexTensor>:$segments,
                   DefaultValuedAttr<I64Attr, "0">:$checkpoint_every,
                   DefaultValuedAttr<F32Attr, "1.0">:$scale);
  let results = (outs Seq_DataTensor:$o, Seq_StateTensor:$last,
                      Optional<Seq_StateTensor>:$checkpoints);
  let assemblyFormat = [{
    custom<RequiredOperands>("\"q, k, v, a, b\"", $q, $k, $v, $a, $b)
    (`decay` `(` $decay^ `)`)? (`init` `(` $init^ `)`)? (`segments` `(` $segments^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Seq_RandomFeaturesOp : Seq_Op<"random_features", [Pure]> {
  let summary = "Performer FAVOR+ random feature map";
  let description = [{
    `x: ... x K`, `omega: K x M`. `positive`:
    `phi(x) = exp(x . omega_m - |x|^2 / 2) / sqrt(M)` (last dimension `M`);
    `trigonometric`: `[sin(x omega), cos(x omega)] * exp(|x|^2 / 2) / sqrt(M)`
    (last dimension `2M`). Feed the result to `seq.linear_attention` with the
    `identity` feature map.
  }];
  let arguments = (ins Seq_DataTensor:$x, Seq_DataTensor:$omega,
                   DefaultValuedAttr<Seq_RandomFeaturesAttr,
                       "::seqc::seq::RandomFeatures::positive">:$kind);
  let results = (outs Seq_DataTensor:$features);
  let assemblyFormat = [{
    custom<RequiredOperands>("\"x, omega\"", $x, $omega) attr-dict
    `:` functional-type(operands, results)
  }];
}

def Seq_AttentionOp : Seq_Op<"attention",
    [Pure, AttrSizedOperandSegments, Seq_Packed]> {
  let summary = "exact softmax attention (IO-aware), grouped-query";
  let description = [{
    `q: B x T x H x K`, `k: B x S x Hkv x K`, `v: B x S x Hkv x V`,
    `o: B x T x H x V`, `H % Hkv == 0`. Computes `softmax(q k^T * scale + M) v`
    per head; query head `h` reads key/value head `h / (H / Hkv)`. Queries are
    aligned to the end of the keys (`i' = i + S - T`). With `causal`, key `j`
    is visible iff `j <= i'`; `window = W > 0` additionally requires
    `i' - j < W`. A query that sees no key outputs 0. `scale` defaults to
    `1/sqrt(K)`. Lowerings never materialize `T x S` scores.

    With `segments(%cu)` (`B = 1`) the queries and keys hold sequences back
    to back and each query sees only its own sequence's keys (varlen flash
    attention); `kv_segments(%cu_k)` gives the keys' own offsets when they
    differ (a KV cache per sequence), each sequence's queries aligned to the
    end of its keys.
  }];
  let arguments = (ins Seq_DataTensor:$q, Seq_DataTensor:$k, Seq_DataTensor:$v,
                   Optional<Seq_IndexTensor>:$segments,
                   Optional<Seq_IndexTensor>:$kv_segments,
                   DefaultValuedAttr<BoolAttr, "true">:$causal,
                   DefaultValuedAttr<I64Attr, "0">:$window,
                   OptionalAttr<F32Attr>:$scale);
  let results = (outs Seq_DataTensor:$o);
  let assemblyFormat = [{
    custom<RequiredOperands>("\"q, k, v\"", $q, $k, $v)
    (`segments` `(` $segments^ `)`)? (`kv_segments` `(` $kv_segments^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

def Seq_CausalConv1dOp : Seq_Op<"causal_conv1d",
    [Pure, AttrSizedOperandSegments, Seq_Packed, Seq_Stateful]> {
  let summary = "depthwise causal 1-D convolution (the Mamba block's conv)";
  let description = [{
    `x, y: B x T x D`, `w: D x W`, `bias: D`, `init` and `last: B x D x (W-1)`.
    `y[t,d] = act(sum_{j<W} w[d,j] * x[t-W+1+j, d] + bias[d])`; inputs before
    `t = 0` come from `init` (oldest first) or are zero. `activation` is
    `none` (default) or `silu`. `last` holds the last `W-1` inputs, oldest
    first.
  }];
  let arguments = (ins Seq_DataTensor:$x, Seq_ParamTensor:$w,
                       Optional<Seq_ParamTensor>:$bias,
                       Optional<Seq_StateTensor>:$init,
                   Optional<Seq_IndexTensor>:$segments,
                   DefaultValuedAttr<I64Attr, "0">:$checkpoint_every,
                   DefaultValuedAttr<Seq_ActivationAttr,
                       "::seqc::seq::Activation::none">:$activation);
  let results = (outs Seq_DataTensor:$y, Seq_StateTensor:$last,
                      Optional<Seq_StateTensor>:$checkpoints);
  let assemblyFormat = [{
    custom<RequiredOperands>("\"x, w\"", $x, $w) (`bias` `(` $bias^ `)`)? (`init` `(` $init^ `)`)? (`segments` `(` $segments^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

def Seq_RouteOp : Seq_Op<"route", [Pure, AttrSizedOperandSegments]> {
  let summary = "mixture-of-experts top-k router";
  let description = [{
    `logits, noise_eps, noise_logits: T x E`, `bias: E`; results
    `weights: T x k`, `indices: T x k` (i32), `aux: tensor<f32>`.

    - Noisy top-k: `h = logits + eps * softplus(noise_logits)`; without
      `noise`, `h = logits`.
    - Selection uses `h + bias` (the bias only chooses, as in aux-loss-free
      balancing): the `k` largest, ties to the lower expert index, ordered by
      descending selection score.
    - `score`: `softmax_topk` (softmax over the `k` selected `h`), `softmax`
      (softmax over all `E`, gathered) or `sigmoid` (sigmoid of `h`,
      gathered). `normalize` rescales the gathered weights to sum 1; then all
      weights are multiplied by `routed_scale`.
    - `aux = aux_loss_coef * E * sum_i f_i P_i` with `f_i` the fraction of
      tokens whose first choice is `i` and `P_i` the mean of
      `softmax(logits)_i` (plain logits).
  }];
  let arguments = (ins Seq_DataTensor:$logits, Optional<Seq_ParamTensor>:$bias,
                       Optional<Seq_DataTensor>:$noise_eps,
                   Optional<Seq_DataTensor>:$noise_logits,
                   I64Attr:$k,
                   DefaultValuedAttr<Seq_ScoreAttr,
                       "::seqc::seq::Score::softmax_topk">:$score,
                   DefaultValuedAttr<BoolAttr, "false">:$normalize,
                   DefaultValuedAttr<F32Attr, "1.0">:$routed_scale,
                   DefaultValuedAttr<F32Attr, "0.0">:$aux_loss_coef);
  let results = (outs Seq_DataTensor:$weights, Seq_IndexTensor:$indices,
                      Seq_StateTensor:$aux);
  let assemblyFormat = [{
    $logits (`bias` `(` $bias^ `)`)?
    (`noise` `(` $noise_eps^ `,` $noise_logits `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Seq_MoeFfnOp : Seq_Op<"moe_ffn", [Pure]> {
  let summary = "routed expert FFNs with capacity";
  let description = [{
    `x, y: T x D`, `weights: T x k`, `indices: T x k` (i32),
    `w_up, w_gate: E x D x F`, `w_down: E x F x D`, `load: E` (i64).

    - Expert FFN: `act(x W_up[e]) W_down[e]`, or with `gate_proj`
      `(act(x W_gate[e]) * (x W_up[e])) W_down[e]`; `activation` is `silu`
      (default), `gelu` (exact erf form) or `relu`.
    - `capacity_factor = C > 0` gives every expert `ceil(C * k * T / E)`
      slots; tokens are taken in order and, per token, its choices in rank
      order; a choice whose expert is full is dropped. `0` drops none.
    - `y[t] = sum over accepted (t, j) of weights[t,j] * FFN_{indices[t,j]}(x[t])`;
      `load[e]` counts the accepted choices of expert `e`. An index outside
      `[0, E)` is a run-time error.
  }];
  let arguments = (ins Seq_DataTensor:$x, Seq_DataTensor:$weights,
                       Seq_IndexTensor:$indices,
                   Seq_DataTensor:$w_up, Seq_DataTensor:$w_down,
                   Optional<Seq_DataTensor>:$w_gate,
                   DefaultValuedAttr<Seq_ActivationAttr,
                       "::seqc::seq::Activation::silu">:$activation,
                   DefaultValuedAttr<F32Attr, "0.0">:$capacity_factor);
  let results = (outs Seq_DataTensor:$y, Seq_LoadTensor:$load);
  let assemblyFormat = [{
    custom<RequiredOperands>("\"x, weights, indices, w_up, w_down\"", $x, $weights, $indices, $w_up, $w_down)
    (`gate_proj` `(` $w_gate^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
}

#endif // SEQ_OPS_TD
