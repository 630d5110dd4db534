"""flash-linear-attention's (fla's) operators on seqc's kernels.

Each function has fla's name, argument names, defaults and layout (fla's
`[B, T, H, ...]` layout, time as dimension 1) and returns fla's pair
`(o, final_state)`, `final_state` None unless `output_final_state`:

    chunk_gla, fused_recurrent_gla, chunk_simple_gla, chunk_retention,
    chunk_linear_attn, chunk_rwkv6        -> seq.linear_attention
    chunk_gated_delta_rule, chunk_kda     -> seq.delta_rule
    chunk_rwkv7                           -> seq.generalized_delta_rule

Shared conventions (fla's):
- q, k: `[B, T, H, K]`; v and o: `[B, T, H, V]` (`[B, T, HV, V]` with
  grouped value heads for the delta rules); states `[N, H, K, V]` (float32),
  `N = B`, or the number of sequences with `cu_seqlens`.
- `scale=None` means `K ** -0.5`.
- `cu_seqlens`: the `N + 1` offsets of `N` sequences packed along T of a
  batch of 1 (flash-attention's layout); every sequence runs alone, from its
  own `initial_state[n]`, and `final_state[n]` is its own final state.
- Gates are log-space decays: a state row is multiplied by `exp(g)`.
- `state_v_first=True` holds states as `[N, H, V, K]`.

Tensors are read in place with their strides, no copies (only cu_seqlens is
converted to int32, and fused_recurrent_gla's `reverse` flips PyTorch
tensors, which have no negative strides). PyTorch tensors in, PyTorch tensors
out; numpy arrays in, numpy arrays out. Every data operand must have q's
dtype (float32, float16 or bfloat16); states are float32. One compile serves
every T and every B: functions are cached by dtypes, the static sizes (H, HV,
K, V) and the options. fla options that the seq ops do not compute (in-kernel
gate activations, value-dimension gates, context parallelism, ...) raise
NotImplementedError rather than compute something else; options that only
choose fla's algorithm (`chunk_size`, `safe_gate`, `disable_recompute`, ...)
are accepted and have no effect.
"""

import numpy as _np

import seqc as _seqc
from . import _common

__all__ = ["chunk_gla", "fused_recurrent_gla", "chunk_simple_gla",
           "chunk_retention", "chunk_linear_attn", "chunk_gated_delta_rule",
           "chunk_kda", "chunk_rwkv6", "chunk_rwkv7"]

# Dimension names of operand layouts: B batch, T time, H query/key heads,
# HV value heads, K key dim, V value dim, N sequences (states' batch), S the
# N + 1 offsets.
_BTHK = ("B", "T", "H", "K")
_BTHV = ("B", "T", "H", "V")
_BTWK = ("B", "T", "HV", "K")
_BTWV = ("B", "T", "HV", "V")
_BTH = ("B", "T", "H")
_BTW = ("B", "T", "HV")
_H = ("H",)
_HK = ("H", "K")

# Operand roles: what element type each takes.
_DATA = "data"    # q's dtype (every data operand and the output share it)
_PARAM = "param"  # float32 or q's dtype (RWKV-6's bonus u)
_STATE = "state"  # float32
_CONST = "const"  # values built into the function (retention's decay):
                  # the value is a function of the sizes giving the numbers
_INDEX = "index"  # i32 offsets (segments)


class _Operand:
    """One operand of the seq op: its MLIR keyword group (None for a
    required one), fla's argument name, the value, its layout and whether
    fla lets it be None (then the group is left out)."""

    __slots__ = ("keyword", "name", "value", "dims", "role", "optional")

    def __init__(self, name, value, dims, keyword=None, role=_DATA,
                 optional=False):
        self.keyword, self.name, self.value = keyword, name, value
        self.dims, self.role, self.optional = dims, role, optional


# --------------------------------------------------------------------------
# The shared path: check, build the op's function, compile once, call.

def _run(fname, op, operands, *, scale, initial_state, output_final_state,
         cu_seqlens, state_v_first=False, attrs=(), value_heads="H"):
    """Runs seq.`op` on `operands` (required ones first, then the optional
    groups before `init`), adding `init(initial_state)` and
    `segments(cu_seqlens)`. Returns fla's `(o, final_state)`."""
    operands = _present(fname, operands)
    sizes = _sizes(fname, operands, cu_seqlens)
    packed = cu_seqlens is not None
    if packed:
        offsets = _offsets(cu_seqlens, sizes["T"])
        sizes["N"], sizes["S"] = offsets.shape[0] - 1, offsets.shape[0]
    state_dims = ("N" if packed else "B", value_heads, "K", "V")
    if initial_state is not None:
        operands.append(_initial_state(initial_state, state_dims, sizes,
                                       state_v_first))
    if packed:
        operands.append(_Operand("cu_seqlens", offsets, ("S",), "segments",
                                 _INDEX))
    for o in operands:
        if o.role == _CONST:
            o.value = tuple(o.value(sizes))
        else:
            _common.check_shape(o.value, [sizes[d] for d in o.dims], o.name)
    dtype = _dtype(operands)
    attrs = dict(attrs, scale=_common.float_attr(
        sizes["K"] ** -0.5 if scale is None else scale))

    def mlir_type(dims, element):
        """(shape, element type), None for a dynamic size: the cache key
        holds these; _function_text writes them as tensor types."""
        dynamic = {"T": None, "N": None, "S": None,
                   "B": 1 if packed else None}
        return (tuple(dynamic[d] if d in dynamic else sizes[d]
                      for d in dims), element)

    signature = tuple(
        (o.keyword, o.name, mlir_type(o.dims, _type_of(o, dtype)),
         o.value if o.role == _CONST else None) for o in operands)
    results = (mlir_type(("B", "T", value_heads, "V"), dtype),
               mlir_type(state_dims, "f32"))
    key = (fname, op, signature, results, tuple(sorted(attrs.items())))
    fn = _common.cached_function(
        key, lambda: _function_text(op, signature, results, attrs))
    out, last = fn(*[o.value for o in operands if o.role != _CONST])
    if not output_final_state:
        return out, None
    return out, (_swap_kv(last) if state_v_first else last)


def _present(fname, operands):
    """The operands given (fla's optional ones may be None, the others
    not), as arguments seqc reads in place."""
    present = []
    for o in operands:
        if o.value is None:
            if not o.optional:
                raise _seqc.ArgumentTypeError(
                    f"seqc.compat.fla.{fname}: {o.name} is None, but it is "
                    "required")
            continue
        if o.role != _CONST:
            o.value = _common.host(o.value, o.name)
        present.append(o)
    return present


def _sizes(fname, operands, cu_seqlens):
    """B, T, H, K from the first operand (q or r), HV, V from v."""
    first = operands[0]
    v = next(o for o in operands if o.name == "v")
    _common.check_shape(first.value, (None,) * 4, first.name)
    _common.check_shape(v.value, (None,) * 4, "v")
    B, T, H, K = first.value.shape
    sizes = dict(B=B, T=T, H=H, K=K, HV=v.value.shape[2], V=v.value.shape[3])
    if sizes["HV"] % H:
        raise _seqc.CallError(
            f"seqc.compat.fla.{fname}: v has {sizes['HV']} heads, not a "
            f"multiple of {first.name}'s {H}")
    if cu_seqlens is not None and B != 1:
        raise _seqc.CallError(
            f"seqc.compat.fla.{fname}: with cu_seqlens the batch size must "
            f"be 1 (sequences packed along T), but {first.name} has batch "
            f"size {B}")
    return sizes


def _offsets(cu_seqlens, T):
    """fla's cu_seqlens (a LongTensor, or any integer array) as the i32
    offsets seq's `segments` takes (a copy of N + 1 integers)."""
    if _common.is_torch(cu_seqlens):
        if cu_seqlens.device.type != "cpu":
            raise _seqc.CallError(
                f"seqc.compat.fla: cu_seqlens is on {cu_seqlens.device}; "
                "seqc's CPU kernels take host tensors (.cpu())")
        cu_seqlens = cu_seqlens.detach().numpy()
    cu = _np.asarray(cu_seqlens)
    if cu.dtype.kind not in "iu":
        raise _seqc.ArgumentTypeError(
            f"seqc.compat.fla: cu_seqlens has dtype {cu.dtype}; it holds "
            "integer offsets (a LongTensor)")
    if cu.ndim != 1 or cu.shape[0] < 1:
        raise _seqc.CallError(
            "seqc.compat.fla: cu_seqlens must be a 1-D tensor of N + 1 "
            f"offsets, but has shape {'x'.join(map(str, cu.shape))}")
    if cu.shape[0] and (cu.min() < 0 or cu.max() > T):
        raise _seqc.CallError(
            f"seqc.compat.fla: cu_seqlens holds offsets outside [0, {T}] "
            f"(T = {T})")
    return cu.astype(_np.int32)


def _initial_state(initial_state, state_dims, sizes, state_v_first):
    """The `init` operand: fla's `[N, H, K, V]` state, or with
    `state_v_first` its `[N, H, V, K]` layout read as a transposed view."""
    h0 = _common.host(initial_state, "initial_state")
    layout = state_dims[:2] + state_dims[:1:-1] if state_v_first \
        else state_dims
    _common.check_shape(h0, [sizes[d] for d in layout], "initial_state")
    return _Operand("initial_state", _swap_kv(h0) if state_v_first else h0,
                    state_dims, "init", _STATE)


def _dtype(operands):
    """The data element type (q's), after checking every operand's element
    type against its role's."""
    first = operands[0]
    data = _common.element_type(first.value, first.name)
    allowed = {_DATA: ((data,), f" (the dtype of {first.name})"),
               _PARAM: ((data, "f32"), ""),
               _STATE: (("f32",), " (seqc's states are float32)")}
    for o in operands:
        if o.role not in allowed:
            continue
        got = _common.element_type(o.value, o.name)
        types, why = allowed[o.role]
        if got not in types:
            raise _seqc.ArgumentTypeError(
                f"seqc.compat.fla: {o.name} has dtype {_DTYPE_NAMES[got]}, "
                f"but must be {' or '.join(_DTYPE_NAMES[t] for t in types)}"
                f"{why}")
    return data


_DTYPE_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def _type_of(operand, dtype):
    if operand.role == _STATE:
        return "f32"
    if operand.role == _INDEX:
        return "i32"
    if operand.role == _PARAM:
        return _common.element_type(operand.value, operand.name)
    return dtype


def _function_text(op, signature, results, attrs):
    """`func.func @main` around the single seq op."""
    signature = [(kw, name, _common.tensor_type(*ty), const)
                 for kw, name, ty, const in signature]
    results = [_common.tensor_type(*ty) for ty in results]
    args = ", ".join(f"%{name}: {ty}" for _, name, ty, const in signature
                     if const is None)
    consts = "".join(
        f"  %{name} = arith.constant dense<[{', '.join(map(repr, const))}]>"
        f" : {ty}\n" for _, name, ty, const in signature if const is not None)
    required = ", ".join(f"%{name}" for kw, name, _, _ in signature
                         if kw is None)
    groups = "".join(f" {kw}(%{name})" for kw, name, _, _ in signature
                     if kw is not None)
    attr_text = ", ".join(f"{k} = {v}" for k, v in sorted(attrs.items()))
    types = ", ".join(ty for _, _, ty, _ in signature)
    o_type, last_type = results
    return (f"func.func @main({args}) -> ({o_type}, {last_type}) {{\n"
            f"{consts}"
            f"  %o, %last = seq.{op} {required}{groups} {{{attr_text}}}\n"
            f"      : ({types}) -> ({o_type}, {last_type})\n"
            f"  return %o, %last : {o_type}, {last_type}\n"
            f"}}\n")


def _swap_kv(x):
    """The last two axes swapped, as a view (K x V <-> V x K states)."""
    return x.transpose(-1, -2) if _common.is_torch(x) else _np.swapaxes(
        x, -1, -2)


def _flip(x, axis):
    """`x` reversed along `axis` (numpy: a view; PyTorch: a copy, as torch
    has no negative strides)."""
    if _common.is_torch(x):
        return x.flip(axis)
    return _np.flip(x, axis)


def _options(fname, kwargs, state_v_first=False, unsupported=(),
             ignored=("chunk_size",)):
    """Handles fla's `**kwargs`: `head_first` (removed from fla: only False
    is accepted), the deprecated `transpose_state_layout` (an alias of
    `state_v_first`), hints in `ignored` (fla's algorithm choices, no effect
    on results) and in-kernel options in `unsupported` (NotImplementedError
    when set). Returns `state_v_first`."""
    kwargs = dict(kwargs)
    if kwargs.pop("head_first", False):
        raise NotImplementedError(
            f"seqc.compat.fla.{fname}: head_first=True is not supported "
            "(fla removed it): pass [B, T, H, ...] tensors")
    if "transpose_state_layout" in kwargs:
        state_v_first = bool(kwargs.pop("transpose_state_layout")) or \
            state_v_first
    for name in ignored:
        kwargs.pop(name, None)
    for name in unsupported:
        if kwargs.pop(name, None):
            _unsupported(fname, name)
    if kwargs:
        raise TypeError(f"seqc.compat.fla.{fname}() got unexpected keyword "
                        f"argument(s) {', '.join(sorted(kwargs))}")
    return state_v_first


def _unsupported(fname, option, why="seqc's op has no counterpart"):
    raise NotImplementedError(
        f"seqc.compat.fla.{fname}: {option} is not supported ({why}); "
        "compute it before the call")


def _reject(fname, **options):
    """NotImplementedError for the first of `options` that is set."""
    for name, value in options.items():
        if value is not None and value is not False:
            _unsupported(fname, name)


# --------------------------------------------------------------------------
# seq.linear_attention: GLA, simple GLA, RetNet, linear attention, RWKV-6.
#   S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T,   o_t = S_t^T (q_t * scale)

def _linear_attention(fname, q, k, v, gate=None, bonus=None, *, scale,
                      initial_state, output_final_state, cu_seqlens,
                      state_v_first=False, attrs=(), query="q"):
    operands = [_Operand(query, q, _BTHK), _Operand("k", k, _BTHK),
                _Operand("v", v, _BTHV)]
    operands += [o for o in (gate, bonus) if o is not None]
    return _run(fname, "linear_attention", operands, scale=scale,
                initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                state_v_first=state_v_first, attrs=attrs)


def chunk_gla(q, k, v, g, scale=None, initial_state=None,
              output_final_state=False, state_v_first=False, cu_seqlens=None,
              cu_seqlens_cpu=None, **kwargs):
    """fla.ops.gla.chunk_gla: gated linear attention, a log-space forget
    gate per key channel, g `[B, T, H, K]`:
    `S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T`, `o_t = S_t^T (q_t * scale)`.
    """
    state_v_first = _options("chunk_gla", kwargs, state_v_first)
    return _linear_attention(
        "chunk_gla", q, k, v, _Operand("g", g, _BTHK, "decay"), scale=scale,
        initial_state=initial_state, output_final_state=output_final_state,
        cu_seqlens=cu_seqlens, state_v_first=state_v_first)


def fused_recurrent_gla(q, k, v, gk=None, gv=None, scale=None,
                        initial_state=None, output_final_state=False,
                        reverse=False, state_v_first=False, cu_seqlens=None,
                        **kwargs):
    """fla.ops.gla.fused_recurrent_gla: chunk_gla's recurrence (gk the
    per-key-channel log gate `[B, T, H, K]`, optional: none means no decay).
    `reverse=True` runs it from the last step to the first (each packed
    sequence separately). A value-dimension gate `gv` is not supported
    (seq.linear_attention's decay scales the state's key rows only)."""
    state_v_first = _options("fused_recurrent_gla", kwargs, state_v_first)
    if gv is not None:
        _unsupported("fused_recurrent_gla", "gv",
                     "seq.linear_attention's decay scales the state's key "
                     "rows, not its value columns")

    def run(q, k, v, gk, initial_state, cu_seqlens):
        return _linear_attention(
            "fused_recurrent_gla", q, k, v,
            _Operand("gk", gk, _BTHK, "decay", optional=True), scale=scale,
            initial_state=initial_state,
            output_final_state=output_final_state, cu_seqlens=cu_seqlens,
            state_v_first=state_v_first)

    series = dict(q=q, k=k, v=v, gk=gk)
    if not reverse:
        return run(**series, initial_state=initial_state,
                   cu_seqlens=cu_seqlens)
    return _reversed(run, series, initial_state, cu_seqlens)


def _reversed(run, series, initial_state, cu_seqlens):
    """`run` over the time-reversed `series` (name -> tensor or None): flips
    T, which reverses the order of packed sequences (so their offsets and
    states too), and flips the output back."""
    series = {name: None if x is None else _flip(_common.host(x, name), 1)
              for name, x in series.items()}
    if cu_seqlens is not None:
        T = series["q"].shape[1]
        cu_seqlens = T - _offsets(cu_seqlens, T)[::-1]
        if initial_state is not None:
            initial_state = _flip(
                _common.host(initial_state, "initial_state"), 0)
    o, last = run(**series, initial_state=initial_state,
                  cu_seqlens=cu_seqlens)
    if last is not None and cu_seqlens is not None:
        last = _flip(last, 0)
    return _flip(o, 1), last


def chunk_simple_gla(q, k, v, g=None, g_gamma=None, scale=None,
                     initial_state=None, output_final_state=False,
                     state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                     **kwargs):
    """fla.ops.simple_gla.chunk_simple_gla: a scalar log-space gate per head
    and step, g `[B, T, H]`, or a constant one per head, g_gamma `[H]`
    (one of them; neither: no decay):
    `S_t = exp(g_t) S_{t-1} + k_t v_t^T`, `o_t = S_t^T (q_t * scale)`."""
    state_v_first = _options("chunk_simple_gla", kwargs, state_v_first)
    if g is not None and g_gamma is not None:
        _unsupported("chunk_simple_gla", "g together with g_gamma",
                     "seq.linear_attention takes one decay: pass g + g_gamma")
    gate = _Operand("g", g, _BTH, "decay", optional=True)
    if g is None and g_gamma is not None:
        gate = _Operand("g_gamma", g_gamma, _H, "decay")
    return _linear_attention(
        "chunk_simple_gla", q, k, v, gate, scale=scale,
        initial_state=initial_state, output_final_state=output_final_state,
        cu_seqlens=cu_seqlens, state_v_first=state_v_first)


def chunk_retention(q, k, v, scale=None, initial_state=None,
                    output_final_state=False, cu_seqlens=None, **kwargs):
    """fla.ops.retention.chunk_retention: RetNet, chunk_simple_gla with the
    fixed decay `gamma_h = 1 - 2 ** (-5 - h)` of head h:
    `S_t = gamma_h S_{t-1} + k_t v_t^T`, `o_t = S_t^T (q_t * scale)`."""
    _options("chunk_retention", kwargs)
    return _linear_attention(
        "chunk_retention", q, k, v,
        _Operand("g_gamma", _retention_decay, _H, "decay", _CONST),
        scale=scale, initial_state=initial_state,
        output_final_state=output_final_state, cu_seqlens=cu_seqlens)


def _retention_decay(sizes):
    """fla's RetNet decays, log(1 - 2 ** (-5 - h)) for head h."""
    return [float(_np.log1p(-2.0 ** (-5.0 - h))) for h in range(sizes["H"])]


def chunk_linear_attn(q, k, v, scale=None, initial_state=None,
                      output_final_state=False, normalize=True,
                      cu_seqlens=None):
    """fla.ops.linear_attn.chunk_linear_attn: causal linear attention
    `S_t = S_{t-1} + k_t v_t^T`, `o_t = S_t^T (q_t * scale)`; with
    `normalize` (fla's default) divided by `(q_t * scale) . z_t + 1e-10`,
    `z_t = sum_{s <= t} k_s`, and the final state is fla's pair
    `(S_T, z_T)` with `z_T` `[N, 1, H, K]` in k's dtype. Normalized with an
    `initial_state` is not supported (seq.linear_attention does not carry
    the normalizer)."""
    attrs = ()
    if normalize:
        if initial_state is not None:
            _unsupported("chunk_linear_attn", "initial_state with "
                         "normalize=True", "seq.linear_attention does not "
                         "carry the normalizer state z")
        attrs = (("normalize", "true"),
                 ("eps", _common.float_attr(1e-10)))
    o, last = _linear_attention(
        "chunk_linear_attn", q, k, v, scale=scale,
        initial_state=initial_state, output_final_state=output_final_state,
        cu_seqlens=cu_seqlens, attrs=attrs)
    if normalize and output_final_state:
        last = (last, _key_sums(_common.host(k, "k"), cu_seqlens))
    return o, last


def _key_sums(k, cu_seqlens):
    """z_T = sum_t k_t per batch row or packed sequence, `[N, 1, H, K]`,
    accumulated in float32, in k's dtype."""
    if cu_seqlens is None:
        parts = [k[b] for b in range(k.shape[0])]
    else:
        cu = _offsets(cu_seqlens, k.shape[1])
        parts = [k[0, a:e] for a, e in zip(cu[:-1], cu[1:])]
    if _common.is_torch(k):
        import torch
        sums = [p.sum(0, dtype=torch.float32) for p in parts]
        return torch.stack(sums)[:, None].to(k.dtype)
    sums = [p.sum(0, dtype=_np.float32) for p in parts]
    return _np.stack(sums)[:, None].astype(k.dtype)


def chunk_rwkv6(r, k, v, w, u, scale=None, initial_state=None,
                output_final_state=False, cu_seqlens=None, cu_seqlens_cpu=None,
                **kwargs):
    """fla.ops.rwkv6.chunk_rwkv6: RWKV-6, a log-space decay per key channel
    w `[B, T, H, K]` and a bonus u `[H, K]` for the current token:
    `o_t = (S_{t-1} + diag(u) k_t v_t^T)^T (r_t * scale)`,
    `S_t = diag(exp(w_t)) S_{t-1} + k_t v_t^T`."""
    _options("chunk_rwkv6", kwargs)
    return _linear_attention(
        "chunk_rwkv6", r, k, v, _Operand("w", w, _BTHK, "decay"),
        _Operand("u", u, _HK, "bonus", _PARAM), scale=scale,
        initial_state=initial_state, output_final_state=output_final_state,
        cu_seqlens=cu_seqlens, query="r")


# --------------------------------------------------------------------------
# seq.delta_rule: Gated DeltaNet and KDA (HV value heads, HV % H == 0).
#   S~ = diag(exp(g_t)) S_{t-1},  S_t = S~ + beta_t k_t (v_t - S~^T k_t)^T,
#   o_t = S_t^T (q_t * scale)

def _delta_rule(fname, q, k, v, g, beta, g_dims, *, scale, initial_state,
                output_final_state, use_qk_l2norm_in_kernel, state_v_first,
                cu_seqlens):
    operands = [_Operand("q", q, _BTHK), _Operand("k", k, _BTHK),
                _Operand("v", v, _BTWV), _Operand("beta", beta, _BTW),
                _Operand("g", g, g_dims, "decay")]
    attrs = (("qk_l2norm", "true"),) if use_qk_l2norm_in_kernel else ()
    return _run(fname, "delta_rule", operands, scale=scale,
                initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                state_v_first=state_v_first, attrs=attrs, value_heads="HV")


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
                           output_final_state=False,
                           use_qk_l2norm_in_kernel=False,
                           use_beta_sigmoid_in_kernel=False,
                           allow_neg_eigval=False, state_v_first=False,
                           cu_seqlens=None, cu_seqlens_cpu=None,
                           chunk_indices=None, cp_context=None, **kwargs):
    """fla.ops.gated_delta_rule.chunk_gated_delta_rule: Gated DeltaNet, a
    scalar log-space decay g `[B, T, HV]` and the write
    strength beta `[B, T, HV]`; value head j reads q/k head j // (HV // H):
    `S~ = exp(g_t) S_{t-1}`, `S_t = S~ + beta_t k_t (v_t - S~^T k_t)^T`,
    `o_t = S_t^T (q_t * scale)`; `use_qk_l2norm_in_kernel` first divides q_t
    and k_t by `sqrt(|.|^2 + 1e-6)`. The in-kernel gate and beta
    activations (`use_gate_in_kernel`, `use_beta_sigmoid_in_kernel`) and
    context parallelism are not supported."""
    state_v_first = _options(
        "chunk_gated_delta_rule", kwargs, state_v_first,
        unsupported=("use_gate_in_kernel",),
        ignored=("chunk_size", "A_log", "dt_bias"))
    _reject("chunk_gated_delta_rule",
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
            allow_neg_eigval=allow_neg_eigval, cp_context=cp_context)
    return _delta_rule(
        "chunk_gated_delta_rule", q, k, v, g, beta, _BTW, scale=scale,
        initial_state=initial_state, output_final_state=output_final_state,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        state_v_first=state_v_first, cu_seqlens=cu_seqlens)


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None,
              output_final_state=False, use_qk_l2norm_in_kernel=False,
              use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
              allow_neg_eigval=False, safe_gate=False, lower_bound=None,
              disable_recompute=False, return_intermediate_states=False,
              state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
              cp_context=None, **kwargs):
    """fla.ops.kda.chunk_kda: Kimi Delta Attention, the gated delta rule
    with a log-space decay per key channel, g `[B, T, HV, K]`:
    `S~ = diag(exp(g_t)) S_{t-1}`, `S_t = S~ + beta_t k_t (v_t - S~^T k_t)^T`,
    `o_t = S_t^T (q_t * scale)`. `safe_gate`, `lower_bound` (without
    `use_gate_in_kernel`) and `disable_recompute` only choose fla's kernels;
    the in-kernel activations, `return_intermediate_states` and context
    parallelism are not supported."""
    state_v_first = _options("chunk_kda", kwargs, state_v_first,
                             ignored=("chunk_size", "A_log", "dt_bias"))
    _reject("chunk_kda", use_gate_in_kernel=use_gate_in_kernel,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
            allow_neg_eigval=allow_neg_eigval,
            return_intermediate_states=return_intermediate_states,
            cp_context=cp_context)
    return _delta_rule(
        "chunk_kda", q, k, v, g, beta, _BTWK, scale=scale,
        initial_state=initial_state, output_final_state=output_final_state,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        state_v_first=state_v_first, cu_seqlens=cu_seqlens)


# --------------------------------------------------------------------------
# seq.generalized_delta_rule: RWKV-7 (fla's diagonal-plus-low-rank form).

def chunk_rwkv7(r, w, k, v, a, b, scale=1.0, initial_state=None,
                output_final_state=False, cu_seqlens=None, cu_seqlens_cpu=None,
                safe_gate=False, chunk_size=None, disable_recompute=False,
                cp_context=None, lower_bound=None, **kwargs):
    """fla.ops.rwkv7.chunk_rwkv7 (fla's chunk_dplr_delta_rule with q = r,
    gk = w): a log-space decay per key channel w `[B, T, H, K]` and a
    rank-one update read through a, written along b (`[B, T, H, K]`):
    `S_t = diag(exp(w_t)) S_{t-1} + b_t (a_t^T S_{t-1}) + k_t v_t^T`,
    `o_t = S_t^T (r_t * scale)`. The default scale is 1.0 (fla's); None
    means `K ** -0.5`. `safe_gate`, `lower_bound`, `chunk_size` and
    `disable_recompute` only choose fla's kernels."""
    _options("chunk_rwkv7", kwargs)
    _reject("chunk_rwkv7", cp_context=cp_context)
    operands = [_Operand("r", r, _BTHK), _Operand("k", k, _BTHK),
                _Operand("v", v, _BTHV), _Operand("a", a, _BTHK),
                _Operand("b", b, _BTHK), _Operand("w", w, _BTHK, "decay")]
    return _run("chunk_rwkv7", "generalized_delta_rule", operands,
                scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens)
