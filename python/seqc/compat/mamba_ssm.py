"""mamba_ssm's functions on seqc's kernels, with mamba_ssm's argument names,
defaults and layouts:

- `selective_scan_fn` (Mamba-1's scan, channels-first (batch, dim, seqlen))
  on `seq.selective_scan`;
- `selective_state_update` (one decoding step of either scan, the state
  updated in place) on `seq.selective_scan` with one step;
- `mamba_chunk_scan_combined` (Mamba-2's SSD, (batch, seqlen, nheads,
  headdim)) on `seq.ssd`, packed sequences (`cu_seqlens`, `seq_idx`) on its
  `segments`.

States are float32, as seqc's ops keep them; data may be float32, float16 or
bfloat16 (every data argument in one dtype), parameters (A, D, biases)
float32 or the data's dtype.
"""

import math
import operator

import numpy as np

import seqc

from . import _common
from ._common import (OpCall, assign, check_rank, cu_seqlens_offsets,
                            param_type, permute, required, same_type,
                            seq_idx_offsets, to_f32)

__all__ = ["selective_scan_fn", "selective_state_update",
           "mamba_chunk_scan_combined"]


# --------------------------------------------------------------------------
# Mamba-1: the selective scan
# --------------------------------------------------------------------------


def _broadcast(x, shape):
    """A stride-0 view of `x` broadcast to `shape`."""
    return x.expand(*shape) if _common.is_torch(x) else np.broadcast_to(
        x, shape)


def _scan_projection(m, what, batch, dim, length, dtype):
    """mamba_ssm's B or C, time-invariant (dim, dstate), (batch, dstate,
    seqlen) or grouped (batch, groups, dstate, seqlen), as the batch x T x G
    x N view seq.selective_scan takes (channel d uses group d / (dim / G),
    as mamba_ssm's repeat of groups)."""
    check_rank(m, (2, 3, 4), what, "dim x dstate, batch x dstate x seqlen or "
               "batch x groups x dstate x seqlen")
    same_type(m, what, dtype, "u")
    if m.ndim == 2:
        _common.check_shape(m, (dim, None), what)
        return _broadcast(m[None, None], (batch, length) + tuple(m.shape))
    if m.ndim == 3:
        _common.check_shape(m, (batch, None, length), what)
        return permute(m, 0, 2, 1)[:, :, None]
    _common.check_shape(m, (batch, None, None, length), what)
    groups = m.shape[1]
    if groups == 0 or dim % groups:
        raise seqc.CallError(
            f"seqc.compat: {what} has {groups} groups, which do not divide "
            f"dim = {dim}")
    return permute(m, 0, 3, 1, 2)


def _state_space_operands(call, names, x, dt, A, B, C, D, z, bias, dtype,
                          steps):
    """The operands seq.selective_scan and seq.ssd share, in their order:
    the input and step size (batch x T x ...; `names` gives their names and
    the bias keyword), A, B and C (batch x T x G x N), skip(D), gate(z,
    shaped like the input) and the step-size bias. `steps` is T's static
    size or None."""
    x_name, dt_name, bias_name = names

    def stepped(v):
        return (v.shape[0], steps) + tuple(v.shape[2:])

    call.operand(None, x_name, x, stepped(x), dtype)
    call.operand(None, dt_name, dt, stepped(dt), dtype)
    call.operand(None, "A", A, A.shape, _common.element_type(A, "A"))
    for name, m in (("B", B), ("C", C)):
        call.operand(None, name, m, stepped(m), dtype)
    if D is not None:
        call.operand("skip", "D", D, D.shape, _common.element_type(D, "D"))
    if z is not None:
        call.operand("gate", "z", z, stepped(x), dtype)
    if bias is not None:
        call.operand(bias_name, "db", bias, bias.shape,
                     _common.element_type(bias, bias_name))


def _run_selective_scan(u, delta, A, B, C, D, z, delta_bias, init,
                        delta_softplus, steps):
    """seq.selective_scan on seqc-layout views (u, delta, z: batch x T x dim;
    B, C: batch x T x G x N); `steps` is T's static size or None. Returns
    (y batch x T x dim, last batch x dim x N)."""
    batch, _, dim = u.shape
    state = A.shape[1]
    dtype = _common.element_type(u, "u")
    call = OpCall("selective_scan")
    _state_space_operands(call, ("u", "delta", "delta_bias"), u, delta, A, B,
                          C, D, z, delta_bias, dtype, steps)
    if init is not None:
        call.operand("init", "h0", init, (batch, dim, state), "f32")
    if delta_softplus:
        call.attr("delta_softplus = true")
    return call(((batch, steps, dim), dtype), ((batch, dim, state), "f32"))


def _check_param(x, shape, what, dtype, optional=True):
    """Host view of parameter `x` of `shape` (an optional one may be
    None)."""
    x = _common.host(x, what) if optional else required(x, what)
    if x is not None:
        _common.check_shape(x, shape, what)
        param_type(x, what, dtype)
    return x


def selective_scan_fn(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                      delta_softplus=False, return_last_state=False):
    """mamba_ssm's `selective_scan_fn` (the semantics of its
    selective_scan_ref): u, delta, z (batch, dim, seqlen); A (dim, dstate),
    real; B, C (dim, dstate), (batch, dstate, seqlen) or (batch, groups,
    dstate, seqlen); D, delta_bias (dim,).

        dt = delta + delta_bias, softplus'd with delta_softplus
        h[t] = exp(dt * A) * h[t-1] + dt * B[t] * u[t]    (h[-1] = 0)
        out[t] = C[t] . h[t] + D * u[t], times silu(z[t]) with z

    Returns out (batch, dim, seqlen) in u's dtype, and with
    return_last_state (out, last_state): h after the last step, (batch,
    dim, dstate) float32."""
    u = required(u, "u")
    check_rank(u, (3,), "u", "batch x dim x seqlen")
    batch, dim, length = u.shape
    dtype = _common.element_type(u, "u")
    delta = required(delta, "delta")
    _common.check_shape(delta, (batch, dim, length), "delta")
    same_type(delta, "delta", dtype, "u")
    A = _check_param(A, (dim, None), "A", dtype, optional=False)
    state = A.shape[1]
    B, C = (_scan_projection(required(m, n), n, batch, dim, length, dtype)
            for m, n in ((B, "B"), (C, "C")))
    for m, what in ((B, "B"), (C, "C")):
        if m.shape[3] != state:
            raise seqc.CallError(
                f"seqc.compat: {what} has dstate {m.shape[3]}, but A has "
                f"{state}")
    D = _check_param(D, (dim,), "D", dtype)
    delta_bias = _check_param(delta_bias, (dim,), "delta_bias", dtype)
    z = _common.host(z, "z")
    if z is not None:
        _common.check_shape(z, (batch, dim, length), "z")
        same_type(z, "z", dtype, "u")
        z = permute(z, 0, 2, 1)
    y, last = _run_selective_scan(
        permute(u, 0, 2, 1), permute(delta, 0, 2, 1), A, B, C, D, z,
        delta_bias, None, bool(delta_softplus), None)
    out = permute(y, 0, 2, 1)
    return (out, last) if return_last_state else out


# --------------------------------------------------------------------------
# One decoding step
# --------------------------------------------------------------------------


def _step_operand(x, what, shape, dtype, channels, optional=True):
    """A per-step operand of selective_state_update as batch x 1 x
    channels (heads and head dimensions flattened into channels)."""
    x = _common.host(x, what) if optional else required(x, what)
    if x is None:
        return None
    _common.check_shape(x, shape, what)
    same_type(x, what, dtype, "x")
    return x.reshape(shape[0], 1, channels)


def selective_state_update(state, x, dt, A, B, C, D=None, z=None,
                           dt_bias=None, dt_softplus=False):
    """mamba_ssm's `selective_state_update` (its selective_state_update_ref):
    one decoding step of the selective scan. Without heads: state (batch,
    dim, dstate), x, dt, z (batch, dim), A (dim, dstate), B, C (batch,
    dstate), D, dt_bias (dim,). With heads: state (batch, nheads, headdim,
    dstate), x, dt, z (batch, nheads, headdim), A (nheads, headdim, dstate),
    B, C (batch, ngroups, dstate) (head h uses group h / (nheads /
    ngroups)), D, dt_bias (nheads, headdim).

        dt = dt + dt_bias, softplus'd with dt_softplus
        state = exp(dt * A) * state + dt * B * x         (in place)
        out = C . state + D * x, times silu(z) with z

    Returns out (batch, dim) or (batch, nheads, headdim) in x's dtype."""
    state = required(state, "state")
    check_rank(state, (3, 4), "state", "batch x dim x dstate or batch x "
               "nheads x headdim x dstate")
    batch, *heads, dstate = state.shape
    heads = tuple(heads)
    channels = math.prod(heads)
    x = required(x, "x")
    _common.check_shape(x, (batch,) + heads, "x")
    dtype = _common.element_type(x, "x")
    _common.element_type(state, "state")
    u = x.reshape(batch, 1, channels)
    delta = _step_operand(dt, "dt", (batch,) + heads, dtype, channels,
                          optional=False)
    z = _step_operand(z, "z", (batch,) + heads, dtype, channels)
    A = _check_param(A, heads + (dstate,), "A", dtype, optional=False)
    A = A.reshape(channels, dstate)
    B, C = (_step_projection(m, n, batch, heads, dstate, dtype)
            for m, n in ((B, "B"), (C, "C")))
    D, dt_bias = (_check_param(p, heads, n, dtype) for p, n in
                  ((D, "D"), (dt_bias, "dt_bias")))
    D, dt_bias = (None if p is None else p.reshape(channels)
                  for p in (D, dt_bias))
    init = to_f32(state.reshape(batch, channels, dstate))
    y, last = _run_selective_scan(u, delta, A, B, C, D, z, dt_bias, init,
                                  bool(dt_softplus), 1)
    assign(state, last.reshape(state.shape))
    return y.reshape((batch,) + heads)


def _step_projection(m, what, batch, heads, dstate, dtype):
    """selective_state_update's B or C, (batch, dstate) without heads or
    (batch, ngroups, dstate) with them, as batch x 1 x G x N."""
    m = required(m, what)
    if len(heads) == 1:
        _common.check_shape(m, (batch, dstate), what)
        m = m[:, None]
    else:
        _common.check_shape(m, (batch, None, dstate), what)
        groups = m.shape[1]
        if groups == 0 or heads[0] % groups:
            raise seqc.CallError(
                f"seqc.compat: {what} has {groups} groups, which do not "
                f"divide nheads = {heads[0]}")
    same_type(m, what, dtype, "x")
    return m[:, None]


# --------------------------------------------------------------------------
# Mamba-2: SSD
# --------------------------------------------------------------------------


def _dt_limit(dt_limit):
    """(dt_min, dt_max) as floats, checked."""
    try:
        low, high = (float(v) for v in dt_limit)
    except (TypeError, ValueError):
        raise seqc.CallError(
            "seqc.compat: dt_limit must be a pair of floats (dt_min, "
            f"dt_max), not {dt_limit!r}") from None
    if not low <= high:
        raise seqc.CallError(
            f"seqc.compat: dt_limit = ({low}, {high}) is not a range "
            "(dt_min <= dt_max)")
    return low, high


def _chunk_size(chunk_size):
    try:
        size = operator.index(chunk_size)
    except TypeError:
        raise seqc.CallError(
            f"seqc.compat: chunk_size must be an integer, not "
            f"{chunk_size!r}") from None
    if size <= 0:
        raise seqc.CallError(
            f"seqc.compat: chunk_size must be positive, not {size}")
    return size


def _packing(seq_idx, cu_seqlens, length):
    """The segment offsets (int32) of a packed batch and whether they came
    from seq_idx alone; (None, False) for an unpacked batch. With both,
    seq_idx must be the sequence index of cu_seqlens' sequences."""
    if cu_seqlens is None:
        if seq_idx is None:
            return None, False
        return seq_idx_offsets(seq_idx, length), True
    cu = cu_seqlens_offsets(cu_seqlens)
    if seq_idx is not None:
        derived = seq_idx_offsets(seq_idx, length)
        count = len(derived)
        if not (len(cu) >= count and np.array_equal(cu[:count], derived)
                and np.all(cu[count:] == length)):
            raise seqc.CallError(
                "seqc.compat: seq_idx does not index the sequences of "
                "cu_seqlens")
    return cu, False


def _ssd_init(initial_states, cu, from_seq_idx, batch, heads, headdim,
              dstate):
    """initial_states as seq.ssd's f32 init: (batch, nheads, headdim,
    dstate) unpacked, one per sequence (S, ...) with cu_seqlens; with
    seq_idx alone (batch 1, as mamba_ssm) it starts sequence 0 only."""
    if initial_states is None:
        return None
    init = _common.host(initial_states, "initial_states")
    count = len(cu) - 1 if cu is not None else batch
    rows = 1 if from_seq_idx else count
    _common.check_shape(init, (rows, heads, headdim, dstate),
                        "initial_states")
    _common.element_type(init, "initial_states")
    init = to_f32(init)
    if not from_seq_idx:
        return init
    padded = np.zeros((count, heads, headdim, dstate), np.float32)
    padded[:1] = np.asarray(init)
    return padded


def _ssd_operands(call, x, dt, A, B, C, D, z, dt_bias, init, cu, dtype):
    """Adds seq.ssd's operands (x batch x T x H x P, ...) to `call`."""
    batch = x.shape[0]
    _state_space_operands(call, ("x", "dt", "dt_bias"), x, dt, A, B, C, D, z,
                          dt_bias, dtype, None)
    states = batch if cu is None else None
    if init is not None:
        call.operand("init", "h0", init, (states,) + tuple(init.shape[1:]),
                     "f32")
    if cu is not None:
        call.operand("segments", "cu", cu, (None,), "i32")
    return states


def _check_ssd_data(x, dt, B, C, z):
    """Checks the per-step operands of mamba_chunk_scan_combined; returns
    (dtype, dstate)."""
    check_rank(x, (4,), "x", "batch x seqlen x nheads x headdim")
    batch, length, heads, headdim = x.shape
    dtype = _common.element_type(x, "x")
    _common.check_shape(dt, (batch, length, heads), "dt")
    same_type(dt, "dt", dtype, "x")
    for m, what in ((B, "B"), (C, "C")):
        check_rank(m, (4,), what, "batch x seqlen x ngroups x dstate")
        _common.check_shape(m, (batch, length, None, B.shape[3]), what)
        same_type(m, what, dtype, "x")
        groups = m.shape[2]
        if groups == 0 or heads % groups:
            raise seqc.CallError(
                f"seqc.compat: {what} has {groups} groups, which do not "
                f"divide nheads = {heads}")
    if z is not None:
        _common.check_shape(z, (batch, length, heads, headdim), "z")
        same_type(z, "z", dtype, "x")
    return dtype, B.shape[3]


def mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None, z=None,
                              dt_bias=None, initial_states=None, seq_idx=None,
                              cu_seqlens=None, dt_softplus=False,
                              dt_limit=(0.0, float("inf")),
                              return_final_states=False,
                              return_varlen_states=False):
    """mamba_ssm's `mamba_chunk_scan_combined` (Mamba-2's SSD, the semantics
    of its ssd_minimal_discrete): x (batch, seqlen, nheads, headdim), dt
    (batch, seqlen, nheads), A (nheads,), B, C (batch, seqlen, ngroups,
    dstate) (head h uses group h / (nheads / ngroups)), D (nheads,) or
    (nheads, headdim), z like x, dt_bias (nheads,), initial_states (batch,
    nheads, headdim, dstate).

        dt = clamp(softplus?(dt + dt_bias), *dt_limit)   (the default limit
                                                          clamps nothing)
        h[t] = exp(dt * A) * h[t-1] + dt * outer(x[t], B[t])
        out[t] = h[t] . C[t] + D * x[t], times silu(z[t]) with z

    `chunk_size` is the algorithm's block length (the result does not
    depend on it). Returns out (batch, seqlen, nheads, headdim) in x's
    dtype; with return_final_states (out, final_states), h after the last
    step (batch, nheads, headdim, dstate) float32.

    Packed sequences (batch 1), which share no state: `cu_seqlens` (S+1
    offsets) or `seq_idx` (1, seqlen) (non-decreasing, sequence index per
    token). With cu_seqlens, initial_states and final_states have one row
    per sequence (S, ...) (mamba_ssm's return_varlen_states, which is also
    accepted and appends the same states); with seq_idx alone,
    initial_states (1, ...) starts sequence 0 and final_states (1, ...) is
    the state after the last token, as in mamba_ssm."""
    x, dt, B, C = (required(v, n) for v, n in (
        (x, "x"), (dt, "dt"), (B, "B"), (C, "C")))
    z = _common.host(z, "z")
    dtype, dstate = _check_ssd_data(x, dt, B, C, z)
    batch, length, heads, headdim = x.shape
    chunk = _chunk_size(chunk_size)
    low, high = _dt_limit(dt_limit)
    A = _check_param(A, (heads,), "A", dtype, optional=False)
    D = _common.host(D, "D")
    if D is not None:
        check_rank(D, (1, 2), "D", "nheads or nheads x headdim")
        D = _check_param(D, (heads, headdim)[:D.ndim], "D", dtype)
    dt_bias = _check_param(dt_bias, (heads,), "dt_bias", dtype)
    if return_varlen_states and cu_seqlens is None:
        raise seqc.CallError(
            "seqc.compat: return_varlen_states needs cu_seqlens")
    cu, from_seq_idx = _packing(seq_idx, cu_seqlens, length)
    if cu is not None and batch != 1:
        raise seqc.CallError(
            f"seqc.compat: packed sequences (cu_seqlens, seq_idx) need batch "
            f"1, but x has batch {batch}")
    init = _ssd_init(initial_states, cu, from_seq_idx, batch, heads, headdim,
                     dstate)
    call = OpCall("ssd")
    states = _ssd_operands(call, x, dt, A, B, C, D, z, dt_bias, init, cu,
                           dtype)
    _ssd_attrs(call, bool(dt_softplus), low, high, chunk)
    y, last = call(((batch, None, heads, headdim), dtype),
                   ((states, heads, headdim, dstate), "f32"))
    results = [y]
    if return_final_states:
        results.append(last[-1:] if from_seq_idx else last)
    if return_varlen_states:
        results.append(last)
    return results[0] if len(results) == 1 else tuple(results)


def _ssd_attrs(call, dt_softplus, low, high, chunk):
    if dt_softplus:
        call.attr("dt_softplus = true")
    if low != 0.0:
        call.attr(f"dt_min = {_common.float_attr(low)}")
    if high != float("inf"):
        call.attr(f"dt_max = {_common.float_attr(high)}")
    call.attr(f"chunk_size = {chunk} : i64")
