"""seqc.compat.mamba_ssm and seqc.compat.causal_conv1d against float64 numpy
references written from the peers' documented semantics (mamba_ssm's
selective_scan_ref, selective_state_update_ref and ssd_minimal, causal-conv1d's
causal_conv1d_ref and causal_conv1d_update_ref), as plain loops over time.

Tolerance (SPEC section 4): max|y - ref| <= 1e-4 * max(1, max|ref|) in f32;
relative RMS error <= 1e-2 for bf16 (against float64 on the rounded inputs).
"""

import math

import numpy as np
import pytest
import torch

import seqc
from helpers import f64
from seqc.compat import _common
from seqc.compat.causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from seqc.compat.mamba_ssm import (mamba_chunk_scan_combined,
                                   selective_scan_fn, selective_state_update)

# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------




def assert_close(got, ref, what=""):
    got, ref = f64(got), f64(ref)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    if ref.size == 0:
        return
    err = np.max(np.abs(got - ref))
    bound = 1e-4 * max(1.0, np.max(np.abs(ref)))
    assert err <= bound, f"{what}: max error {err:.3g} > {bound:.3g}"


def assert_rms(got, ref, what=""):
    got, ref = f64(got), f64(ref)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    rel = np.sqrt(np.mean((got - ref) ** 2) / max(np.mean(ref ** 2), 1e-30))
    assert rel <= 1e-2, f"{what}: relative RMS error {rel:.3g}"


def tensor(r, *shape, scale=1.0, shift=0.0):
    return torch.from_numpy(
        (r.standard_normal(shape) * scale + shift).astype(np.float32))


def softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def silu(x):
    return x / (1 + np.exp(-x))


def groups_to_channels(m, channels, axis):
    """Groups along `axis` repeated so channel c sees group c / (channels /
    groups) (the peers' `repeat(..., "g -> (g h)")`)."""
    return np.repeat(m, channels // m.shape[axis], axis=axis)


# --------------------------------------------------------------------------
# References (float64, loops over time)
# --------------------------------------------------------------------------


def ref_selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                       delta_softplus=False, h0=None):
    """mamba_ssm's selective_scan_ref: u, delta, z (b, d, l), A (d, n),
    B/C (d, n), (b, n, l) or (b, g, n, l). Returns (out, last_state)."""
    u, delta, A, B, C, D, z, delta_bias = map(
        f64, (u, delta, A, B, C, D, z, delta_bias))
    b, d, l = u.shape
    dt = delta + (0 if delta_bias is None else delta_bias[:, None])
    if delta_softplus:
        dt = softplus(dt)

    def at(m, t):  # (b, d, n) at step t
        if m.ndim == 2:
            return np.broadcast_to(m, (b,) + m.shape)
        if m.ndim == 3:
            return np.broadcast_to(m[:, None, :, t], (b, d, m.shape[1]))
        return groups_to_channels(m[:, :, :, t], d, 1)

    h = np.zeros((b, d, A.shape[1])) if h0 is None else f64(h0).copy()
    out = np.zeros((b, d, l))
    for t in range(l):
        step = dt[:, :, t, None]
        h = np.exp(step * A) * h + step * at(B, t) * u[:, :, t, None]
        out[:, :, t] = (h * at(C, t)).sum(-1)
    if D is not None:
        out += D[:, None] * u
    if z is not None:
        out *= silu(z)
    return out, h


def ref_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None,
                     dt_softplus=False):
    """mamba_ssm's selective_state_update_ref: returns (out, new state); the
    head form (state b, h, p, n) or the plain one (b, d, n)."""
    state, x, dt, A, B, C, D, z, dt_bias = map(
        f64, (state, x, dt, A, B, C, D, z, dt_bias))
    heads = state.ndim == 4
    if not heads:  # one head: (b, d, n) -> (b, 1, d, n), B (b, 1, n)
        state, x, dt, B, C, z = (None if v is None else v[:, None]
                                 for v in (state, x, dt, B, C, z))
        A, D, dt_bias = (None if v is None else v[None]
                         for v in (A, D, dt_bias))
    if dt_bias is not None:
        dt = dt + dt_bias
    if dt_softplus:
        dt = softplus(dt)
    nheads = state.shape[1]
    B, C = (groups_to_channels(m, nheads, 1) for m in (B, C))
    new = (np.exp(dt[..., None] * A) * state
           + dt[..., None] * B[:, :, None, :] * x[..., None])
    out = (new * C[:, :, None, :]).sum(-1)
    if D is not None:
        out += x * D
    if z is not None:
        out *= silu(z)
    if not heads:
        out, new = out[:, 0], new[:, 0]
    return out, new


def ref_ssd(x, dt, A, B, C, D=None, z=None, dt_bias=None, h0=None,
            dt_softplus=False, dt_limit=(0.0, math.inf)):
    """Mamba-2's SSD as the recurrence ssd_minimal_discrete computes in
    chunks: x (b, l, h, p), dt (b, l, h), B/C (b, l, g, n). Returns
    (out, final_state)."""
    x, dt, A, B, C, D, z, dt_bias = map(f64, (x, dt, A, B, C, D, z, dt_bias))
    b, l, heads, p = x.shape
    if dt_bias is not None:
        dt = dt + dt_bias
    if dt_softplus:
        dt = softplus(dt)
    if tuple(dt_limit) != (0.0, math.inf):
        dt = np.clip(dt, *dt_limit)
    B, C = (groups_to_channels(m, heads, 2) for m in (B, C))
    h = (np.zeros((b, heads, p, B.shape[3])) if h0 is None
         else f64(h0).copy())
    out = np.zeros_like(x)
    for t in range(l):
        step = dt[:, t, :, None, None]
        h = (np.exp(step * A[:, None, None]) * h
             + step * x[:, t, :, :, None] * B[:, t, :, None, :])
        out[:, t] = (h * C[:, t, :, None, :]).sum(-1)
    if D is not None:
        out += x * (D[:, None] if D.ndim == 1 else D)
    if z is not None:
        out *= silu(z)
    return out, h


def ref_conv(x, weight, bias=None, init=None, activation=None):
    """causal_conv1d_ref: x (b, d, l), weight (d, w), init (b, d, w-1).
    Returns (out, final_states)."""
    x, weight, bias, init = map(f64, (x, weight, bias, init))
    b, d, l = x.shape
    w = weight.shape[1]
    if init is None:
        init = np.zeros((b, d, w - 1))
    padded = np.concatenate([init, x], axis=-1)
    out = np.zeros((b, d, l))
    for t in range(l):
        out[:, :, t] = (padded[:, :, t:t + w] * weight).sum(-1)
    if bias is not None:
        out += bias[:, None]
    if activation in ("silu", "swish"):
        out = silu(out)
    return out, padded[:, :, padded.shape[2] - (w - 1):]


def ref_conv_update(x, state, weight, bias=None, activation=None):
    """causal_conv1d_update_ref: x (b, d) or (b, d, l), state (b, d, s).
    Returns (out, new state)."""
    x, state, weight, bias = map(f64, (x, state, weight, bias))
    squeeze = x.ndim == 2
    x = x[:, :, None] if squeeze else x
    l, w, s = x.shape[2], weight.shape[1], state.shape[2]
    joined = np.concatenate([state, x], axis=-1)
    out = np.zeros(x.shape)
    for t in range(l):
        end = s + t + 1
        out[:, :, t] = (joined[:, :, end - w:end] * weight).sum(-1)
    if bias is not None:
        out += bias[:, None]
    if activation in ("silu", "swish"):
        out = silu(out)
    return (out[:, :, 0] if squeeze else out), joined[:, :, -s:]


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------


def scan_inputs(r, b, d, n, l, form="plain", groups=2):
    """selective_scan_fn's inputs with decays in (0, 1): u, delta, A, B, C,
    D, z, delta_bias."""
    u = tensor(r, b, d, l)
    delta = tensor(r, b, d, l, scale=0.5, shift=-1.0)
    A = -torch.exp(tensor(r, d, n, scale=0.5))
    shape = {"plain": (b, n, l), "grouped": (b, groups, n, l),
             "invariant": (d, n)}[form]
    B, C = tensor(r, *shape), tensor(r, *shape)
    return u, delta, A, B, C, tensor(r, d), tensor(r, b, d, l), tensor(
        r, d, scale=0.1)


def ssd_inputs(r, b, l, h, p, g, n):
    """mamba_chunk_scan_combined's inputs: x, dt, A, B, C, D, z, dt_bias."""
    return (tensor(r, b, l, h, p), tensor(r, b, l, h, scale=0.5, shift=-1.0),
            -torch.exp(tensor(r, h, scale=0.5)), tensor(r, b, l, g, n),
            tensor(r, b, l, g, n), tensor(r, h), tensor(r, b, l, h, p),
            tensor(r, h, scale=0.1))


# --------------------------------------------------------------------------
# selective_scan_fn
# --------------------------------------------------------------------------


@pytest.mark.parametrize("l", [1, 7, 64, 131])
@pytest.mark.parametrize("form", ["plain", "grouped", "invariant"])
def test_selective_scan_fn(l, form):
    r = np.random.default_rng(l)
    u, delta, A, B, C, D, z, db = scan_inputs(r, 2, 8, 4, l, form)
    out, last = selective_scan_fn(u, delta, A, B, C, D, z, db,
                                  delta_softplus=True, return_last_state=True)
    ref, ref_last = ref_selective_scan(u, delta, A, B, C, D, z, db, True)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 8, l)
    assert last.dtype == torch.float32
    assert_close(out, ref, "out")
    assert_close(last, ref_last, "last_state")


def test_selective_scan_fn_minimal_options():
    """No D, z or delta_bias, no softplus (delta used as given), one
    output."""
    r = np.random.default_rng(1)
    u, delta, A, B, C, *_ = scan_inputs(r, 1, 4, 3, 20)
    delta = torch.rand(1, 4, 20) * 0.5
    out = selective_scan_fn(u, delta, A, B, C)
    assert isinstance(out, torch.Tensor)
    assert_close(out, ref_selective_scan(u, delta, A, B, C)[0])


def test_selective_scan_fn_strided_views():
    """Non-contiguous arguments (slices and a transposed u) are read in
    place."""
    r = np.random.default_rng(2)
    u, delta, A, B, C, D, z, db = scan_inputs(r, 2, 8, 4, 40)
    u_t = u.transpose(1, 2).contiguous().transpose(1, 2)  # channels-last
    wide = tensor(r, 2, 8, 80)
    delta_s = wide[:, :, ::2]
    out = selective_scan_fn(u_t, delta_s, A, B, C, D, z, db,
                            delta_softplus=True)
    ref = ref_selective_scan(u, delta_s, A, B, C, D, z, db, True)[0]
    assert_close(out, ref)


def test_selective_scan_fn_long_sequence():
    r = np.random.default_rng(3)
    u, delta, A, B, C, D, z, db = scan_inputs(r, 1, 8, 4, 2048, "grouped")
    out, last = selective_scan_fn(u, delta, A, B, C, D, z, db, True, True)
    ref, ref_last = ref_selective_scan(u, delta, A, B, C, D, z, db, True)
    assert_close(out, ref)
    assert_close(last, ref_last)


def test_selective_scan_fn_numpy():
    r = np.random.default_rng(4)
    args = [a.numpy() for a in scan_inputs(r, 2, 4, 3, 9, "grouped")]
    out, last = selective_scan_fn(*args, delta_softplus=True,
                                  return_last_state=True)
    assert isinstance(out, np.ndarray) and isinstance(last, np.ndarray)
    ref, ref_last = ref_selective_scan(*args, delta_softplus=True)
    assert_close(out, ref)
    assert_close(last, ref_last)


def test_selective_scan_fn_numpy_time_invariant():
    """B and C (dim, dstate) reach seqc as read-only stride-0 broadcasts."""
    r = np.random.default_rng(7)
    args = [a.numpy() for a in scan_inputs(r, 2, 4, 3, 9, "invariant")]
    out = selective_scan_fn(*args, delta_softplus=True)
    assert isinstance(out, np.ndarray)
    assert_close(out, ref_selective_scan(*args, delta_softplus=True)[0])


def test_selective_scan_fn_bf16():
    r = np.random.default_rng(5)
    u, delta, A, B, C, D, z, db = scan_inputs(r, 2, 8, 4, 50, "grouped")
    u, delta, B, C, z = (v.to(torch.bfloat16) for v in (u, delta, B, C, z))
    out, last = selective_scan_fn(u, delta, A, B, C, D, z, db, True, True)
    assert out.dtype == torch.bfloat16 and last.dtype == torch.float32
    ref, ref_last = ref_selective_scan(u, delta, A, B, C, D, z, db, True)
    assert_rms(out, ref, "out")
    assert_rms(last, ref_last, "last_state")


def test_selective_scan_fn_compiles_once_over_lengths():
    r = np.random.default_rng(6)
    before = _common.compiled_count()
    for l in (5, 33, 70):
        u, delta, A, B, C, D, z, db = scan_inputs(r, 3, 5, 7, l)
        out = selective_scan_fn(u, delta, A, B, C, D, z, db, True)
        ref = ref_selective_scan(u, delta, A, B, C, D, z, db, True)[0]
        assert_close(out, ref)
    assert _common.compiled_count() - before == 1


# --------------------------------------------------------------------------
# selective_state_update
# --------------------------------------------------------------------------


def test_selective_state_update_plain_in_place():
    r = np.random.default_rng(10)
    b, d, n = 3, 8, 4
    state = tensor(r, b, d, n)
    x, dt, z = tensor(r, b, d), tensor(r, b, d, shift=-1.0), tensor(r, b, d)
    A, D, db = -torch.exp(tensor(r, d, n)), tensor(r, d), tensor(r, d)
    B, C = tensor(r, b, n), tensor(r, b, n)
    ref_out, ref_state = ref_state_update(state, x, dt, A, B, C, D, z, db,
                                          True)
    alias = state
    out = selective_state_update(state, x, dt, A, B, C, D=D, z=z,
                                 dt_bias=db, dt_softplus=True)
    assert out.shape == (b, d)
    assert_close(out, ref_out, "out")
    assert_close(alias, ref_state, "state (in place)")


@pytest.mark.parametrize("groups", [1, 2])
def test_selective_state_update_heads(groups):
    r = np.random.default_rng(11 + groups)
    b, h, p, n = 2, 4, 3, 5
    state = tensor(r, b, h, p, n)
    x, dt, z = (tensor(r, b, h, p), tensor(r, b, h, p, shift=-1.0),
                tensor(r, b, h, p))
    A = -torch.exp(tensor(r, h, p, n))
    B, C = tensor(r, b, groups, n), tensor(r, b, groups, n)
    D, db = tensor(r, h, p), tensor(r, h, p)
    ref_out, ref_state = ref_state_update(state, x, dt, A, B, C, D, z, db,
                                          True)
    out = selective_state_update(state, x, dt, A, B, C, D, z, db, True)
    assert out.shape == (b, h, p)
    assert_close(out, ref_out, "out")
    assert_close(state, ref_state, "state")


def test_selective_state_update_mamba2_tied():
    """Mamba-2's decoding call: A, dt, D, dt_bias expanded over headdim and
    dstate (stride 0)."""
    r = np.random.default_rng(13)
    b, h, p, n = 2, 4, 3, 5
    state = tensor(r, b, h, p, n)
    x = tensor(r, b, h, p)
    dt = tensor(r, b, h, shift=-1.0)[:, :, None].expand(b, h, p)
    A = -torch.exp(tensor(r, h))[:, None, None].expand(h, p, n)
    db = tensor(r, h)[:, None].expand(h, p)
    D = tensor(r, h)[:, None].expand(h, p)
    B, C = tensor(r, b, 1, n), tensor(r, b, 1, n)
    ref_out, ref_state = ref_state_update(state, x, dt, A, B, C, D, None, db,
                                          True)
    out = selective_state_update(state, x, dt, A, B, C, D, None, db, True)
    assert_close(out, ref_out, "out")
    assert_close(state, ref_state, "state")


def test_selective_state_update_cache_view():
    """The state is a non-contiguous view into a larger cache (the heads
    form, which seqc sees flattened): the update lands in the cache."""
    r = np.random.default_rng(17)
    b, h, p, n = 2, 2, 3, 4
    cache = tensor(r, b, h, p, n + 2)
    state = cache[..., 1:n + 1]
    before = cache.clone()
    x, dt = tensor(r, b, h, p), tensor(r, b, h, p, shift=-1.0)
    A = -torch.exp(tensor(r, h, p, n))
    B, C = tensor(r, b, 1, n), tensor(r, b, 1, n)
    ref_out, ref_state = ref_state_update(state, x, dt, A, B, C,
                                          dt_softplus=True)
    out = selective_state_update(state, x, dt, A, B, C, dt_softplus=True)
    assert_close(out, ref_out)
    assert_close(cache[..., 1:n + 1], ref_state)
    assert torch.equal(cache[..., 0], before[..., 0])
    assert torch.equal(cache[..., n + 1], before[..., n + 1])


def test_selective_state_update_numpy_in_place():
    r = np.random.default_rng(14)
    b, d, n = 2, 4, 3
    state = tensor(r, b, d, n).numpy()
    x, dt = tensor(r, b, d).numpy(), np.abs(tensor(r, b, d).numpy())
    A = -np.exp(tensor(r, d, n).numpy())
    B, C = tensor(r, b, n).numpy(), tensor(r, b, n).numpy()
    ref_out, ref_state = ref_state_update(state, x, dt, A, B, C)
    out = selective_state_update(state, x, dt, A, B, C)
    assert isinstance(out, np.ndarray)
    assert_close(out, ref_out)
    assert_close(state, ref_state)


def test_selective_state_update_continues_scan():
    """A prefill by selective_scan_fn, then steps, equals one scan."""
    r = np.random.default_rng(15)
    u, delta, A, B, C, D, z, db = scan_inputs(r, 2, 6, 4, 12)
    full = selective_scan_fn(u, delta, A, B, C, D, z, db, True)
    out, state = selective_scan_fn(u[..., :9], delta[..., :9], A,
                                   B[..., :9], C[..., :9], D, z[..., :9], db,
                                   True, return_last_state=True)
    steps = [selective_state_update(state, u[..., t], delta[..., t], A,
                                    B[..., t], C[..., t], D, z[..., t], db,
                                    True) for t in range(9, 12)]
    assert_close(torch.cat([out] + [s[..., None] for s in steps], -1), full)


def test_selective_state_update_bf16_state():
    """A bf16 state is updated in place (rounded to bf16, as mamba_ssm's
    copy_)."""
    r = np.random.default_rng(16)
    b, d, n = 2, 8, 4
    state = tensor(r, b, d, n).to(torch.bfloat16)
    x, dt = tensor(r, b, d), tensor(r, b, d, shift=-1.0)
    x, dt = x.to(torch.bfloat16), dt.to(torch.bfloat16)
    A = -torch.exp(tensor(r, d, n))
    B, C = (tensor(r, b, n).to(torch.bfloat16) for _ in range(2))
    ref_out, ref_state = ref_state_update(state, x, dt, A, B, C,
                                          dt_softplus=True)
    out = selective_state_update(state, x, dt, A, B, C, dt_softplus=True)
    assert out.dtype == torch.bfloat16 and state.dtype == torch.bfloat16
    assert_rms(out, ref_out)
    assert_rms(state, ref_state)


# --------------------------------------------------------------------------
# mamba_chunk_scan_combined
# --------------------------------------------------------------------------


@pytest.mark.parametrize("l", [1, 50, 64, 130])
@pytest.mark.parametrize("groups,d_hdim", [(1, False), (2, True)])
def test_chunk_scan(l, groups, d_hdim):
    r = np.random.default_rng(20 + l)
    b, h, p, n = 2, 4, 8, 16
    x, dt, A, B, C, D, z, db = ssd_inputs(r, b, l, h, p, groups, n)
    if d_hdim:
        D = tensor(r, h, p)
    h0 = tensor(r, b, h, p, n)
    out, last = mamba_chunk_scan_combined(
        x, dt, A, B, C, 64, D=D, z=z, dt_bias=db, initial_states=h0,
        dt_softplus=True, return_final_states=True)
    ref, ref_last = ref_ssd(x, dt, A, B, C, D, z, db, h0, True)
    assert out.shape == (b, l, h, p) and last.shape == (b, h, p, n)
    assert_close(out, ref, "out")
    assert_close(last, ref_last, "final_states")


@pytest.mark.parametrize("chunk_size", [16, 64, 256])
def test_chunk_scan_chunk_size_and_limit(chunk_size):
    """dt_limit clamps dt after softplus; the chunk size does not change the
    result."""
    r = np.random.default_rng(30)
    x, dt, A, B, C, D, z, db = ssd_inputs(r, 1, 100, 2, 4, 1, 8)
    dt = dt * 4  # spread dt beyond the limit on both sides
    out = mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D,
                                    dt_bias=db, dt_softplus=True,
                                    dt_limit=(0.1, 0.6))
    ref = ref_ssd(x, dt, A, B, C, D, None, db, None, True, (0.1, 0.6))[0]
    assert_close(out, ref)


def test_chunk_scan_minimal_options():
    r = np.random.default_rng(31)
    x, dt, A, B, C, *_ = ssd_inputs(r, 2, 37, 2, 4, 2, 8)
    dt = torch.rand(2, 37, 2) * 0.5
    out = mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size=64)
    assert isinstance(out, torch.Tensor)
    assert_close(out, ref_ssd(x, dt, A, B, C)[0])


def test_chunk_scan_long_sequence():
    r = np.random.default_rng(32)
    x, dt, A, B, C, D, z, db = ssd_inputs(r, 1, 4096, 2, 4, 1, 8)
    out, last = mamba_chunk_scan_combined(x, dt, A, B, C, 64, D, z, db,
                                          dt_softplus=True,
                                          return_final_states=True)
    ref, ref_last = ref_ssd(x, dt, A, B, C, D, z, db, None, True)
    assert_close(out, ref)
    assert_close(last, ref_last)


def packed_reference(lengths, x, dt, A, B, C, D, z, db, h0, **options):
    """Each packed sequence run alone: (out, one final state per
    sequence)."""
    outs, lasts, start = [], [], 0
    for s, n in enumerate(lengths):
        part = [None if v is None else v[:, start:start + n]
                for v in (x, dt, B, C, z)]
        init = None if h0 is None else h0[s:s + 1]
        o, h = ref_ssd(part[0], part[1], A, part[2], part[3], D, part[4], db,
                       init, **options)
        outs.append(o)
        lasts.append(h)
        start += n
    return np.concatenate(outs, axis=1), np.concatenate(lasts, axis=0)


def offsets(lengths, kind=torch.tensor):
    return kind(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))


@pytest.mark.parametrize("with_init", [False, True])
def test_chunk_scan_cu_seqlens(with_init):
    lengths = [0, 1, 63, 65, 3]
    r = np.random.default_rng(40)
    l, h, p, n = sum(lengths), 2, 4, 8
    x, dt, A, B, C, D, z, db = ssd_inputs(r, 1, l, h, p, 2, n)
    h0 = tensor(r, len(lengths), h, p, n) if with_init else None
    out, last = mamba_chunk_scan_combined(
        x, dt, A, B, C, 64, D, z, db, initial_states=h0,
        cu_seqlens=offsets(lengths), dt_softplus=True,
        return_final_states=True)
    ref, ref_last = packed_reference(lengths, x, dt, A, B, C, D, z, db, h0,
                                     dt_softplus=True)
    assert last.shape == (len(lengths), h, p, n)
    assert_close(out, ref, "out")
    assert_close(last, ref_last, "final_states")


def test_chunk_scan_varlen_states_with_seq_idx():
    """Mamba2's call: seq_idx and cu_seqlens together, return_final_states
    and return_varlen_states."""
    lengths = [5, 64, 1]
    r = np.random.default_rng(41)
    x, dt, A, B, C, D, z, db = ssd_inputs(r, 1, sum(lengths), 2, 4, 1, 8)
    seq_idx = torch.repeat_interleave(torch.arange(3, dtype=torch.int32),
                                      torch.tensor(lengths))[None]
    out, final, varlen = mamba_chunk_scan_combined(
        x, dt, A, B, C, 64, D, z, db, seq_idx=seq_idx,
        cu_seqlens=offsets(lengths), dt_softplus=True,
        return_final_states=True, return_varlen_states=True)
    ref, ref_last = packed_reference(lengths, x, dt, A, B, C, D, z, db, None,
                                     dt_softplus=True)
    assert_close(out, ref)
    assert_close(varlen, ref_last)
    assert_close(final, ref_last)


def test_chunk_scan_seq_idx_alone():
    """seq_idx alone (mamba_ssm's packing): initial_states starts sequence 0
    and final_states is the state after the last token."""
    lengths = [10, 70, 20]
    r = np.random.default_rng(42)
    l, h, p, n = sum(lengths), 2, 4, 8
    x, dt, A, B, C, D, z, db = ssd_inputs(r, 1, l, h, p, 1, n)
    seq_idx = np.repeat(np.arange(3), lengths)[None].astype(np.int64)
    h0 = tensor(r, 1, h, p, n)
    out, final = mamba_chunk_scan_combined(
        x, dt, A, B, C, 64, D, z, db, initial_states=h0,
        seq_idx=torch.from_numpy(seq_idx), dt_softplus=True,
        return_final_states=True)
    inits = torch.cat([h0, torch.zeros(2, h, p, n)])
    ref, ref_last = packed_reference(lengths, x, dt, A, B, C, D, z, db,
                                     inits, dt_softplus=True)
    assert final.shape == (1, h, p, n)
    assert_close(out, ref)
    assert_close(final, ref_last[-1:])


def test_chunk_scan_numpy():
    r = np.random.default_rng(43)
    args = [v.numpy() for v in ssd_inputs(r, 1, 30, 2, 4, 1, 8)]
    x, dt, A, B, C, D, z, db = args
    out, last = mamba_chunk_scan_combined(x, dt, A, B, C, 16, D, z, db,
                                          dt_softplus=True,
                                          return_final_states=True)
    assert isinstance(out, np.ndarray) and isinstance(last, np.ndarray)
    ref, ref_last = ref_ssd(x, dt, A, B, C, D, z, db, None, True)
    assert_close(out, ref)
    assert_close(last, ref_last)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_chunk_scan_low_precision(dtype):
    r = np.random.default_rng(44)
    x, dt, A, B, C, D, z, db = ssd_inputs(r, 2, 80, 2, 8, 1, 16)
    x, dt, B, C, z = (v.to(dtype) for v in (x, dt, B, C, z))
    out, last = mamba_chunk_scan_combined(x, dt, A, B, C, 64, D, z, db,
                                          dt_softplus=True,
                                          return_final_states=True)
    assert out.dtype == dtype and last.dtype == torch.float32
    ref, ref_last = ref_ssd(x, dt, A, B, C, D, z, db, None, True)
    assert_rms(out, ref)
    assert_rms(last, ref_last)


def test_chunk_scan_compiles_once_over_lengths():
    r = np.random.default_rng(45)
    before = _common.compiled_count()
    for l in (3, 64, 100):
        x, dt, A, B, C, D, z, db = ssd_inputs(r, 1, l, 3, 2, 1, 4)
        out = mamba_chunk_scan_combined(x, dt, A, B, C, 32, D, z, db,
                                        dt_softplus=True)
        assert_close(out, ref_ssd(x, dt, A, B, C, D, z, db, None, True)[0])
    assert _common.compiled_count() - before == 1


# --------------------------------------------------------------------------
# causal_conv1d
# --------------------------------------------------------------------------


@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("l", [1, 5, 100])
@pytest.mark.parametrize("activation", [None, "silu", "swish"])
def test_causal_conv1d_fn(width, l, activation):
    r = np.random.default_rng(width * 100 + l)
    x, w, bias = tensor(r, 2, 8, l), tensor(r, 8, width), tensor(r, 8)
    init = tensor(r, 2, 8, width - 1)
    out, final = causal_conv1d_fn(x, w, bias, initial_states=init,
                                  return_final_states=True,
                                  activation=activation)
    ref, ref_final = ref_conv(x, w, bias, init, activation)
    assert out.shape == (2, 8, l) and final.shape == (2, 8, width - 1)
    assert_close(out, ref, "out")
    assert_close(final, ref_final, "final_states")


def test_causal_conv1d_fn_plain_and_strided():
    """No bias, no state; a channels-last x (the layout Mamba feeds) and a
    final_states_out written in place."""
    r = np.random.default_rng(50)
    x = tensor(r, 2, 40, 16).transpose(1, 2)  # (2, 16, 40), channels-last
    w = tensor(r, 16, 4)
    out = causal_conv1d_fn(x, w)
    assert_close(out, ref_conv(x, w)[0])
    final_out = torch.zeros(2, 16, 3)
    out2, final = causal_conv1d_fn(x, w, return_final_states=True,
                                   final_states_out=final_out)
    assert final is final_out
    assert_close(final_out, ref_conv(x, w)[1])
    assert_close(out2, out)


def test_causal_conv1d_fn_seq_idx():
    lengths = [3, 1, 60, 7]
    r = np.random.default_rng(51)
    l = sum(lengths)
    x, w, bias = tensor(r, 1, 8, l), tensor(r, 8, 4), tensor(r, 8)
    seq_idx = torch.repeat_interleave(torch.arange(4, dtype=torch.int32),
                                      torch.tensor(lengths))[None]
    out = causal_conv1d_fn(x, w, bias, seq_idx=seq_idx, activation="silu")
    parts, start = [], 0
    for n in lengths:
        parts.append(ref_conv(x[:, :, start:start + n], w, bias,
                              activation="silu")[0])
        start += n
    assert_close(out, np.concatenate(parts, axis=-1))


def test_causal_conv1d_fn_numpy_and_bf16():
    r = np.random.default_rng(52)
    x, w, bias = tensor(r, 2, 8, 30), tensor(r, 8, 4), tensor(r, 8)
    out = causal_conv1d_fn(x.numpy(), w.numpy(), bias.numpy(),
                           activation="silu")
    assert isinstance(out, np.ndarray)
    assert_close(out, ref_conv(x, w, bias, activation="silu")[0])
    xb = x.to(torch.bfloat16)
    init = tensor(r, 2, 8, 3).to(torch.bfloat16)
    out, final = causal_conv1d_fn(xb, w, bias, initial_states=init,
                                  return_final_states=True, activation="silu")
    assert out.dtype == torch.bfloat16 and final.dtype == torch.bfloat16
    ref, ref_final = ref_conv(xb, w, bias, init, "silu")
    assert_rms(out, ref)
    assert_close(final, ref_final)  # the inputs themselves: exact


def test_causal_conv1d_fn_compiles_once_over_lengths():
    r = np.random.default_rng(53)
    w, bias = tensor(r, 5, 3), tensor(r, 5)
    before = _common.compiled_count()
    for l in (2, 17, 90):
        x = tensor(r, 3, 5, l)
        assert_close(causal_conv1d_fn(x, w, bias), ref_conv(x, w, bias)[0])
    assert _common.compiled_count() - before == 1


@pytest.mark.parametrize("state_len_extra", [0, 2])
@pytest.mark.parametrize("new", [None, 1, 3])
def test_causal_conv1d_update(state_len_extra, new):
    r = np.random.default_rng(60 + 10 * state_len_extra + (new or 0))
    b, d, width = 2, 8, 4
    x = tensor(r, b, d) if new is None else tensor(r, b, d, new)
    state = tensor(r, b, d, width - 1 + state_len_extra)
    w, bias = tensor(r, d, width), tensor(r, d)
    ref, ref_state = ref_conv_update(x, state, w, bias, "silu")
    alias = state
    out = causal_conv1d_update(x, state, w, bias, activation="silu")
    assert out.shape == x.shape
    assert_close(out, ref, "out")
    assert_close(alias, ref_state, "conv_state (in place)")


def test_causal_conv1d_update_decodes_like_fn():
    """A prefill with causal_conv1d_fn's final state, then steps."""
    r = np.random.default_rng(61)
    x, w, bias = tensor(r, 2, 6, 20), tensor(r, 6, 3), tensor(r, 6)
    full = causal_conv1d_fn(x, w, bias, activation="silu")
    out, state = causal_conv1d_fn(x[..., :15], w, bias,
                                  return_final_states=True, activation="silu")
    steps = [causal_conv1d_update(x[..., t], state, w, bias, "silu")
             for t in range(15, 20)]
    assert_close(torch.cat([out] + [s[..., None] for s in steps], -1), full)


def test_causal_conv1d_update_numpy_in_place():
    r = np.random.default_rng(62)
    x, state = tensor(r, 2, 4).numpy(), tensor(r, 2, 4, 2).numpy()
    w = tensor(r, 4, 3).numpy()
    ref, ref_state = ref_conv_update(x, state, w)
    out = causal_conv1d_update(x, state, w)
    assert isinstance(out, np.ndarray)
    assert_close(out, ref)
    assert_close(state, ref_state)


# --------------------------------------------------------------------------
# Bad arguments: TypeError / ValueError naming the argument
# --------------------------------------------------------------------------


def _scan_args():
    return list(scan_inputs(np.random.default_rng(70), 1, 4, 3, 6)[:5])


def _ssd_args():
    return list(ssd_inputs(np.random.default_rng(71), 1, 6, 2, 4, 1, 8)[:5])


def _replace(args, index, value):
    args = list(args)
    args[index] = value
    return args


BAD_CALLS = [
    # (name, call, exception, words the message must contain)
    ("u float64", lambda: selective_scan_fn(
        *_replace(_scan_args(), 0, torch.zeros(1, 4, 6, dtype=torch.float64))),
     TypeError, "u"),
    ("delta shape", lambda: selective_scan_fn(
        *_replace(_scan_args(), 1, torch.zeros(1, 4, 5))),
     ValueError, "delta"),
    ("A shape", lambda: selective_scan_fn(
        *_replace(_scan_args(), 2, torch.zeros(5, 3))), ValueError, "A"),
    ("B dtype", lambda: selective_scan_fn(
        *_replace(_scan_args(), 3, torch.zeros(1, 3, 6, dtype=torch.float16))),
     TypeError, "B"),
    ("C groups", lambda: selective_scan_fn(
        *_replace(_scan_args(), 4, torch.zeros(1, 3, 3, 6))), ValueError, "C"),
    ("C dstate", lambda: selective_scan_fn(
        *_replace(_scan_args(), 4, torch.zeros(1, 5, 6))), ValueError, "C"),
    ("B list", lambda: selective_scan_fn(
        *_replace(_scan_args(), 3, [[1.0]])), TypeError, "B"),
    ("u missing", lambda: selective_scan_fn(*_replace(_scan_args(), 0, None)),
     TypeError, "u"),
    ("D shape", lambda: selective_scan_fn(*_scan_args(), D=torch.zeros(3)),
     ValueError, "D"),
    ("state rank", lambda: selective_state_update(
        torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3),
        torch.zeros(3, 1), torch.zeros(2, 1), torch.zeros(2, 1)),
     ValueError, "state"),
    ("state_update x", lambda: selective_state_update(
        torch.zeros(2, 3, 4), torch.zeros(2, 4), torch.zeros(2, 3),
        torch.zeros(3, 4), torch.zeros(2, 4), torch.zeros(2, 4)),
     ValueError, "x"),
    ("state_update groups", lambda: selective_state_update(
        torch.zeros(2, 3, 2, 4), torch.zeros(2, 3, 2), torch.zeros(2, 3, 2),
        torch.zeros(3, 2, 4), torch.zeros(2, 2, 4), torch.zeros(2, 2, 4)),
     ValueError, "B"),
    ("state_update dt dtype", lambda: selective_state_update(
        torch.zeros(2, 3, 4), torch.zeros(2, 3),
        torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, 4),
        torch.zeros(2, 4), torch.zeros(2, 4)), TypeError, "dt"),
    ("ssd x rank", lambda: mamba_chunk_scan_combined(
        *_replace(_ssd_args(), 0, torch.zeros(1, 6, 8)), 64),
     ValueError, "x"),
    ("ssd dt shape", lambda: mamba_chunk_scan_combined(
        *_replace(_ssd_args(), 1, torch.zeros(1, 6, 3)), 64),
     ValueError, "dt"),
    ("ssd B groups", lambda: mamba_chunk_scan_combined(
        *_replace(_ssd_args(), 3, torch.zeros(1, 6, 3, 8)), 64),
     ValueError, "B"),
    ("ssd D shape", lambda: mamba_chunk_scan_combined(
        *_ssd_args(), 64, D=torch.zeros(2, 3)), ValueError, "D"),
    ("ssd chunk_size", lambda: mamba_chunk_scan_combined(*_ssd_args(), 0),
     ValueError, "chunk_size"),
    ("ssd dt_limit", lambda: mamba_chunk_scan_combined(
        *_ssd_args(), 64, dt_limit=(1.0, 0.5)), ValueError, "dt_limit"),
    ("ssd initial_states", lambda: mamba_chunk_scan_combined(
        *_ssd_args(), 64, initial_states=torch.zeros(2, 2, 4, 8)),
     ValueError, "initial_states"),
    ("ssd cu_seqlens dtype", lambda: mamba_chunk_scan_combined(
        *_ssd_args(), 64, cu_seqlens=torch.tensor([0.0, 6.0])),
     TypeError, "cu_seqlens"),
    ("ssd cu_seqlens end", lambda: mamba_chunk_scan_combined(
        *_ssd_args(), 64, cu_seqlens=torch.tensor([0, 2, 5])),
     ValueError, "segments"),
    ("ssd seq_idx decreasing", lambda: mamba_chunk_scan_combined(
        *_ssd_args(), 64, seq_idx=torch.tensor([[0, 0, 1, 1, 0, 0]])),
     ValueError, "seq_idx"),
    ("ssd seq_idx batch", lambda: mamba_chunk_scan_combined(
        *[torch.cat([a, a]) if a.ndim > 1 else a for a in _ssd_args()], 64,
        seq_idx=torch.zeros(2, 6, dtype=torch.int32)), ValueError, "seq_idx"),
    ("ssd seq_idx vs cu_seqlens", lambda: mamba_chunk_scan_combined(
        *_ssd_args(), 64, seq_idx=torch.tensor([[0, 0, 0, 1, 1, 1]]),
        cu_seqlens=torch.tensor([0, 2, 6])), ValueError, "seq_idx"),
    ("ssd varlen without cu", lambda: mamba_chunk_scan_combined(
        *_ssd_args(), 64, return_varlen_states=True),
     ValueError, "cu_seqlens"),
    ("conv x dtype", lambda: causal_conv1d_fn(
        torch.zeros(1, 4, 5, dtype=torch.int32), torch.zeros(4, 3)),
     TypeError, "x"),
    ("conv weight shape", lambda: causal_conv1d_fn(
        torch.zeros(1, 4, 5), torch.zeros(3, 3)), ValueError, "weight"),
    ("conv bias dtype", lambda: causal_conv1d_fn(
        torch.zeros(1, 4, 5), torch.zeros(4, 3),
        torch.zeros(4, dtype=torch.float64)), TypeError, "bias"),
    ("conv activation", lambda: causal_conv1d_fn(
        torch.zeros(1, 4, 5), torch.zeros(4, 3), activation="relu"),
     ValueError, "activation"),
    ("conv initial_states", lambda: causal_conv1d_fn(
        torch.zeros(1, 4, 5), torch.zeros(4, 3),
        initial_states=torch.zeros(1, 4, 3)), ValueError, "initial_states"),
    ("conv seq_idx with states", lambda: causal_conv1d_fn(
        torch.zeros(1, 4, 5), torch.zeros(4, 3),
        seq_idx=torch.zeros(1, 5, dtype=torch.int32),
        return_final_states=True), ValueError, "seq_idx"),
    ("conv final_states_out", lambda: causal_conv1d_fn(
        torch.zeros(1, 4, 5), torch.zeros(4, 3), return_final_states=True,
        final_states_out=torch.zeros(1, 4, 5)), ValueError,
     "final_states_out"),
    ("update conv_state short", lambda: causal_conv1d_update(
        torch.zeros(1, 4), torch.zeros(1, 4, 1), torch.zeros(4, 3)),
     ValueError, "conv_state"),
    ("update x rank", lambda: causal_conv1d_update(
        torch.zeros(4), torch.zeros(1, 4, 2), torch.zeros(4, 3)),
     ValueError, "x"),
]


@pytest.mark.parametrize("call,error,word",
                         [c[1:] for c in BAD_CALLS],
                         ids=[c[0] for c in BAD_CALLS])
def test_bad_arguments(call, error, word):
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, seqc.Error), type(info.value)
    assert word in str(info.value), str(info.value)


def test_unsupported_options():
    with pytest.raises(NotImplementedError, match="cache_seqlens"):
        causal_conv1d_update(torch.zeros(1, 4), torch.zeros(1, 4, 2),
                             torch.zeros(4, 3),
                             cache_seqlens=torch.zeros(1, dtype=torch.int32))


def test_state_update_state_unchanged_on_error():
    """A call that fails its checks leaves the state as it was."""
    state = torch.ones(2, 3, 4)
    with pytest.raises(ValueError):
        selective_state_update(state, torch.zeros(2, 3), torch.zeros(2, 3),
                               torch.zeros(3, 5), torch.zeros(2, 4),
                               torch.zeros(2, 4))
    assert torch.equal(state, torch.ones(2, 3, 4))
