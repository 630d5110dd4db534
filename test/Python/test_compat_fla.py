"""seqc.compat.fla against float64 references written from fla's definitions
as plain per-step recurrences (fla's naive recurrent forms): every function,
several sizes (T = 1, T not a multiple of 64), initial_state, the final
state, packed sequences (cu_seqlens with lengths 0, 1, 63, 65: packed equals
each sequence alone), grouped value heads, state_v_first, reverse, strided
views, low precision, one compile for every T, numpy in / numpy out, and
bad inputs (TypeError / ValueError naming the argument, NotImplementedError
for fla options the seq ops do not compute).

Run (from the repository root):
  PYTHONPATH=build/python /usr/bin/python3 -m pytest -q \
      test/Python/test_compat_fla.py
"""

import zlib

import numpy as np
import pytest
import torch

import seqc
from helpers import f64
from seqc.compat import _common, fla

# --------------------------------------------------------------------------
# References (float64, one step at a time).




def decay_at(g, t):
    """exp(g) at step t, shaped to scale the rows of a B x H x K x V state:
    g is H (per head), B x T x H (per head and step) or B x T x H x K."""
    if g is None:
        return 1.0
    if g.ndim == 1:
        return np.exp(g)[None, :, None, None]
    if g.ndim == 3:
        return np.exp(g[:, t])[:, :, None, None]
    return np.exp(g[:, t])[..., None]


def ref_linear(q, k, v, g=None, u=None, h0=None, scale=None,
               normalize=False, eps=1e-10):
    """GLA, simple GLA, RetNet, linear attention, RWKV-6:
    S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T, o_t = S_t^T (q_t * scale);
    with u (RWKV-6) o_t = (S_{t-1} + diag(u) k_t v_t^T)^T (q_t * scale);
    normalized: o_t /= (q_t * scale) . sum_{s<=t} k_s + eps."""
    q, k, v, g, u = map(f64, (q, k, v, g, u))
    B, T, H, K = q.shape
    scale = K ** -0.5 if scale is None else scale
    S = np.zeros((B, H, K, v.shape[-1])) if h0 is None else f64(h0).copy()
    z = np.zeros((B, H, K))
    o = np.zeros(v.shape)
    for t in range(T):
        qt = q[:, t] * scale
        kv = k[:, t, :, :, None] * v[:, t, :, None, :]
        if u is not None:
            read = S + u[None, :, :, None] * kv
            o[:, t] = np.einsum("bhk,bhkv->bhv", qt, read)
        S = decay_at(g, t) * S + kv
        if u is None:
            o[:, t] = np.einsum("bhk,bhkv->bhv", qt, S)
        if normalize:
            z = z + k[:, t]
            o[:, t] /= np.sum(qt * z, -1)[..., None] + eps
    return o, S


def ref_delta(q, k, v, beta, g=None, h0=None, scale=None, l2norm=False):
    """Gated DeltaNet / KDA with HV value heads (head j reads q/k head
    j // (HV // H)): S~ = diag(exp(g_t)) S_{t-1},
    S_t = S~ + beta_t k_t (v_t - S~^T k_t)^T, o_t = S_t^T (q_t * scale)."""
    q, k, v, beta, g = map(f64, (q, k, v, beta, g))
    B, T, H, K = q.shape
    HV = v.shape[2]
    scale = K ** -0.5 if scale is None else scale
    if l2norm:
        q = q / np.sqrt(np.sum(q * q, -1, keepdims=True) + 1e-6)
        k = k / np.sqrt(np.sum(k * k, -1, keepdims=True) + 1e-6)
    q = np.repeat(q, HV // H, axis=2) * scale
    k = np.repeat(k, HV // H, axis=2)
    S = np.zeros((B, HV, K, v.shape[-1])) if h0 is None else f64(h0).copy()
    o = np.zeros(v.shape)
    for t in range(T):
        S = decay_at(g, t) * S
        kt = k[:, t]
        err = v[:, t] - np.einsum("bhkv,bhk->bhv", S, kt)
        S = S + beta[:, t, :, None, None] * kt[..., None] * err[:, :, None, :]
        o[:, t] = np.einsum("bhk,bhkv->bhv", q[:, t], S)
    return o, S


def ref_dplr(r, k, v, a, b, w, h0=None, scale=1.0):
    """RWKV-7 (fla's dplr form): S_t = diag(exp(w_t)) S_{t-1}
    + b_t (a_t^T S_{t-1}) + k_t v_t^T, o_t = S_t^T (r_t * scale)."""
    r, k, v, a, b, w = map(f64, (r, k, v, a, b, w))
    B, T, H, K = r.shape
    S = np.zeros((B, H, K, v.shape[-1])) if h0 is None else f64(h0).copy()
    o = np.zeros(v.shape)
    for t in range(T):
        read = np.einsum("bhk,bhkv->bhv", a[:, t], S)
        S = (decay_at(w, t) * S + b[:, t, :, :, None] * read[:, :, None, :]
             + k[:, t, :, :, None] * v[:, t, :, None, :])
        o[:, t] = np.einsum("bhk,bhkv->bhv", r[:, t] * scale, S)
    return o, S


def retention_decay(H):
    return np.log(1.0 - 2.0 ** (-5.0 - np.arange(H)))


# --------------------------------------------------------------------------
# Inputs, one maker per function (fla's argument names), bounded states.


def normal(r, *shape, s=1.0):
    return (r.standard_normal(shape) * s).astype(np.float32)


def unit(r, *shape):
    x = r.standard_normal(shape)
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def log_gate(r, *shape, lo=0.01, hi=0.4):
    return (-r.uniform(lo, hi, shape)).astype(np.float32)


def qkv(r, B, T, H, K, V, HV=None):
    return dict(q=normal(r, B, T, H, K), k=normal(r, B, T, H, K, s=0.5),
                v=normal(r, B, T, HV or H, V))


class Case:
    """One fla function: `make(r, B, T, H, K, V)` gives its arguments (by
    fla's names), `ref(args, h0)` the float64 (o, final state)."""

    def __init__(self, name, fn, make, ref, options=None, heads=1, init=True):
        self.name, self.fn, self.make, self.ref = name, fn, make, ref
        self.options = options or {}
        self.heads = heads  # value heads per query head
        self.init = init    # takes initial_state

    def __repr__(self):
        return self.name


def gla_args(r, B, T, H, K, V):
    return dict(qkv(r, B, T, H, K, V), g=log_gate(r, B, T, H, K))


def gk_args(r, B, T, H, K, V):
    """fused_recurrent_gla names the gate gk."""
    a = gla_args(r, B, T, H, K, V)
    a["gk"] = a.pop("g")
    return a


def simple_gla_args(r, B, T, H, K, V):
    return dict(qkv(r, B, T, H, K, V), g=log_gate(r, B, T, H))


def gamma_args(r, B, T, H, K, V):
    return dict(qkv(r, B, T, H, K, V), g_gamma=log_gate(r, H, lo=0.02, hi=0.2))


def positive_args(r, B, T, H, K, V):
    """Positive q, k: the normalizer q . z stays away from 0."""
    return dict(q=r.uniform(0, 1, (B, T, H, K)).astype(np.float32),
                k=r.uniform(0, 1, (B, T, H, K)).astype(np.float32),
                v=normal(r, B, T, H, V))


def rwkv6_args(r, B, T, H, K, V):
    a = qkv(r, B, T, H, K, V)
    return dict(r=a["q"], k=a["k"], v=a["v"], w=log_gate(r, B, T, H, K),
                u=normal(r, H, K, s=0.5))


def delta_args(g_shape, heads=1):
    def make(r, B, T, H, K, V):
        HV = H * heads
        return dict(q=normal(r, B, T, H, K), k=unit(r, B, T, H, K),
                    v=normal(r, B, T, HV, V),
                    g=log_gate(r, B, T, HV, *g_shape(K), lo=0.01, hi=0.3),
                    beta=r.uniform(0.1, 0.9, (B, T, HV)).astype(np.float32))
    return make


def gva_l2norm_args(r, B, T, H, K, V):
    """Two value heads per query head, unnormalized keys (for
    use_qk_l2norm_in_kernel)."""
    a = delta_args(lambda K: (), heads=2)(r, B, T, H, K, V)
    a["k"] = normal(r, B, T, H, K, s=2.0)
    return a


def rwkv7_args(r, B, T, H, K, V):
    kappa = unit(r, B, T, H, K)
    alpha = r.uniform(0, 1, (B, T, H, K)).astype(np.float32)
    return dict(r=normal(r, B, T, H, K), w=log_gate(r, B, T, H, K, hi=0.5),
                k=normal(r, B, T, H, K, s=0.5), v=normal(r, B, T, H, V),
                a=-kappa, b=kappa * alpha)


CASES = [
    Case("chunk_gla", fla.chunk_gla, gla_args,
         lambda a, h0: ref_linear(a["q"], a["k"], a["v"], a["g"], h0=h0)),
    Case("fused_recurrent_gla", fla.fused_recurrent_gla,
         gk_args,
         lambda a, h0: ref_linear(a["q"], a["k"], a["v"], a["gk"], h0=h0)),
    Case("chunk_simple_gla", fla.chunk_simple_gla, simple_gla_args,
         lambda a, h0: ref_linear(a["q"], a["k"], a["v"], a["g"], h0=h0)),
    Case("chunk_simple_gla_g_gamma", fla.chunk_simple_gla, gamma_args,
         lambda a, h0: ref_linear(a["q"], a["k"], a["v"], a["g_gamma"],
                                  h0=h0)),
    Case("chunk_retention", fla.chunk_retention, qkv,
         lambda a, h0: ref_linear(a["q"], a["k"], a["v"],
                                  retention_decay(a["q"].shape[2]), h0=h0)),
    Case("chunk_linear_attn", fla.chunk_linear_attn, qkv,
         lambda a, h0: ref_linear(a["q"], a["k"], a["v"], h0=h0),
         options=dict(normalize=False)),
    Case("chunk_linear_attn_normalize", fla.chunk_linear_attn, positive_args,
         lambda a, h0: ref_linear(a["q"], a["k"], a["v"], normalize=True),
         init=False),
    Case("chunk_rwkv6", fla.chunk_rwkv6, rwkv6_args,
         lambda a, h0: ref_linear(a["r"], a["k"], a["v"], a["w"], a["u"],
                                  h0=h0)),
    Case("chunk_gated_delta_rule", fla.chunk_gated_delta_rule,
         delta_args(lambda K: ()),
         lambda a, h0: ref_delta(a["q"], a["k"], a["v"], a["beta"], a["g"],
                                 h0)),
    Case("chunk_gated_delta_rule_gva_l2norm", fla.chunk_gated_delta_rule,
         gva_l2norm_args,
         lambda a, h0: ref_delta(a["q"], a["k"], a["v"], a["beta"], a["g"],
                                 h0, l2norm=True),
         options=dict(use_qk_l2norm_in_kernel=True), heads=2),
    Case("chunk_kda", fla.chunk_kda, delta_args(lambda K: (K,), heads=2),
         lambda a, h0: ref_delta(a["q"], a["k"], a["v"], a["beta"], a["g"],
                                 h0), heads=2),
    Case("chunk_rwkv7", fla.chunk_rwkv7, rwkv7_args,
         lambda a, h0: ref_dplr(a["r"], a["k"], a["v"], a["a"], a["b"],
                                a["w"], h0)),
]

BY_NAME = {c.name: c for c in CASES}

# (B, T, H, K, V, with initial_state): T = 1 (a decode step), T not a
# multiple of 64 on both sides of it; the first three share one compile per
# function and initial_state choice, the last has other head sizes.
SIZES = [(2, 1, 2, 16, 8, True), (1, 100, 2, 16, 8, False),
         (3, 65, 2, 16, 8, True), (1, 37, 3, 32, 24, False)]


def maybe_torch(x):
    return None if x is None else torch.from_numpy(x)


def torch_args(args):
    return {n: torch.from_numpy(x) for n, x in args.items()}


def initial(r, case, B, H, K, V):
    return normal(r, B, H * case.heads, K, V, s=0.5)


def check(y, ref, what=""):
    """SPEC section 4: max|y - ref| <= 1e-4 * max(1, max|ref|)."""
    y = f64(y)
    assert y.shape == ref.shape, f"{what}: shape {y.shape} != {ref.shape}"
    err = np.max(np.abs(y - ref)) if ref.size else 0.0
    bound = 1e-4 * max(1.0, np.max(np.abs(ref)) if ref.size else 0.0)
    assert err <= bound, f"{what}: max error {err:.3g} > {bound:.3g}"


def state_of(final):
    """The K x V state of `final` (chunk_linear_attn normalized returns
    fla's pair (S, z))."""
    return final[0] if isinstance(final, tuple) else final


# --------------------------------------------------------------------------
# Every function against its reference.


def size_id(s):
    return "B{}T{}H{}K{}V{}".format(*s[:5]) + ("-init" if s[5] else "")


@pytest.mark.parametrize("case", CASES, ids=repr)
@pytest.mark.parametrize("size", SIZES, ids=size_id)
def test_matches_reference(case, size):
    B, T, H, K, V, with_init = size
    with_init = with_init and case.init  # normalize takes no initial_state
    r = np.random.default_rng(zlib.crc32(repr((case.name, size)).encode()))
    args = case.make(r, B, T, H, K, V)
    h0 = initial(r, case, B, H, K, V) if with_init else None
    o, final = case.fn(**torch_args(args), **case.options,
                       initial_state=maybe_torch(h0),
                       output_final_state=True)
    assert isinstance(o, torch.Tensor) and o.dtype == torch.float32
    ref_o, ref_S = case.ref(args, h0)
    check(o, ref_o, "o")
    check(state_of(final), ref_S, "final_state")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_packed_equals_each_sequence_alone(case):
    lengths = [0, 1, 63, 65, 7]
    H, K, V = 2, 16, 8
    r = np.random.default_rng(7)
    cu = np.concatenate([[0], np.cumsum(lengths)])
    args = case.make(r, 1, int(cu[-1]), H, K, V)
    h0 = initial(r, case, len(lengths), H, K, V) if case.init else None
    o, final = case.fn(**torch_args(args), **case.options,
                       initial_state=maybe_torch(h0),
                       output_final_state=True,
                       cu_seqlens=torch.tensor(cu, dtype=torch.long))
    S = state_of(final)
    assert tuple(S.shape) == (len(lengths), H * case.heads, K, V)
    for n, (a, e) in enumerate(zip(cu[:-1], cu[1:])):
        alone = {name: (x[:, a:e] if x.ndim >= 3 else x)
                 for name, x in args.items()}
        ref_o, ref_S = case.ref(alone, None if h0 is None else h0[n:n + 1])
        check(o[:, a:e], ref_o, f"o of sequence {n}")
        check(S[n:n + 1], ref_S, f"final_state of sequence {n}")


def test_linear_attn_normalized_final_state_is_fla_pair():
    r = np.random.default_rng(3)
    args = positive_args(r, 2, 9, 2, 8, 4)
    o, (S, z) = fla.chunk_linear_attn(**torch_args(args),
                                      output_final_state=True)
    assert tuple(z.shape) == (2, 1, 2, 8)
    check(z, f64(args["k"]).sum(1, keepdims=True), "z")
    check(S, ref_linear(args["q"], args["k"], args["v"])[1], "S")
    cu = torch.tensor([0, 0, 4, 9])
    packed = positive_args(r, 1, 9, 2, 8, 4)
    _, (_, z) = fla.chunk_linear_attn(**torch_args(packed), cu_seqlens=cu,
                                      output_final_state=True)
    keys = f64(packed["k"])[0]
    want = np.stack([keys[a:e].sum(0) for a, e in [(0, 0), (0, 4), (4, 9)]])
    check(z, want[:, None], "packed z")


def test_defaults_scale_and_no_final_state():
    r = np.random.default_rng(4)
    args = gla_args(r, 1, 5, 2, 16, 8)
    o, final = fla.chunk_gla(**torch_args(args))
    assert final is None
    o2, _ = fla.chunk_gla(**torch_args(args), scale=16 ** -0.5)
    check(o, f64(o2))
    o3, _ = fla.chunk_gla(**torch_args(args), scale=0.3)
    check(o3, ref_linear(args["q"], args["k"], args["v"], args["g"],
                         scale=0.3)[0])
    # chunk_rwkv7's own default scale is 1.0 (fla's); None means K ** -0.5.
    a7 = rwkv7_args(r, 1, 5, 2, 16, 8)
    o, final = fla.chunk_rwkv7(**torch_args(a7))
    assert final is None
    check(o, ref_dplr(a7["r"], a7["k"], a7["v"], a7["a"], a7["b"], a7["w"])[0])
    o, _ = fla.chunk_rwkv7(**torch_args(a7), scale=None)
    check(o, ref_dplr(a7["r"], a7["k"], a7["v"], a7["a"], a7["b"], a7["w"],
                      scale=16 ** -0.5)[0])


def test_positional_arguments_follow_fla_order():
    r = np.random.default_rng(5)
    a = rwkv7_args(r, 1, 6, 2, 8, 8)
    t = torch_args(a)
    o, _ = fla.chunk_rwkv7(t["r"], t["w"], t["k"], t["v"], t["a"], t["b"])
    check(o, ref_dplr(a["r"], a["k"], a["v"], a["a"], a["b"], a["w"])[0])
    d = delta_args(lambda K: ())(r, 1, 6, 2, 8, 8)
    t = torch_args(d)
    o, _ = fla.chunk_gated_delta_rule(t["q"], t["k"], t["v"], t["g"],
                                      t["beta"])
    check(o, ref_delta(d["q"], d["k"], d["v"], d["beta"], d["g"])[0])


def test_state_v_first():
    r = np.random.default_rng(6)
    args = gla_args(r, 2, 10, 2, 16, 8)
    h0 = initial(r, BY_NAME["chunk_gla"], 2, 2, 16, 8)
    o, S = fla.chunk_gla(**torch_args(args), state_v_first=True,
                         initial_state=torch.from_numpy(h0).transpose(-1, -2),
                         output_final_state=True)
    ref_o, ref_S = ref_linear(args["q"], args["k"], args["v"], args["g"],
                              h0=h0)
    assert tuple(S.shape) == (2, 2, 8, 16)
    check(o, ref_o)
    check(S, ref_S.swapaxes(-1, -2))


@pytest.mark.parametrize("packed", [False, True])
def test_fused_recurrent_gla_reverse(packed):
    r = np.random.default_rng(8)
    lengths = [3, 0, 40, 1]
    T = sum(lengths) if packed else 20
    B = 1 if packed else 2
    args = gk_args(r, B, T, 2, 8, 8)
    N = len(lengths) if packed else B
    h0 = normal(r, N, 2, 8, 8, s=0.5)
    cu = np.concatenate([[0], np.cumsum(lengths)]) if packed else None
    o, S = fla.fused_recurrent_gla(
        **torch_args(args), initial_state=torch.from_numpy(h0), reverse=True,
        output_final_state=True,
        cu_seqlens=None if cu is None else torch.tensor(cu))
    spans = list(zip(cu[:-1], cu[1:])) if packed else [(0, T)]
    for n, (a, e) in enumerate(spans):
        flipped = {name: x[:, a:e][:, ::-1] for name, x in args.items()}
        start = h0[n:n + 1] if packed else h0
        ref_o, ref_S = ref_linear(flipped["q"], flipped["k"], flipped["v"],
                                  flipped["gk"], h0=start)
        check(o[:, a:e], ref_o[:, ::-1], f"o of span {n}")
        check(S[n:n + 1] if packed else S, ref_S, f"final_state of span {n}")


def test_fused_recurrent_gla_without_gate():
    r = np.random.default_rng(9)
    a = qkv(r, 1, 12, 2, 8, 8)
    o, _ = fla.fused_recurrent_gla(**torch_args(a))
    check(o, ref_linear(a["q"], a["k"], a["v"])[0])


def test_strided_views_are_read_in_place():
    """q, k, v as views of a (B, H, T, K) buffer and of one fused qkv
    projection: seqc reads the strides, no copies."""
    r = np.random.default_rng(10)
    B, T, H, K = 2, 33, 2, 16
    qkv_buf = torch.from_numpy(normal(r, B, T, H, 3 * K))
    q, k, v = qkv_buf[..., :K], qkv_buf[..., K:2 * K], qkv_buf[..., 2 * K:]
    g = torch.from_numpy(log_gate(r, B, H, T, K)).transpose(1, 2)
    assert not q.is_contiguous() and not g.is_contiguous()
    o, S = fla.chunk_gla(q, k, v, g, output_final_state=True)
    ref_o, ref_S = ref_linear(q, k, v, g)
    check(o, ref_o)
    check(S, ref_S)


def test_numpy_in_numpy_out():
    r = np.random.default_rng(11)
    a = delta_args(lambda K: (K,))(r, 1, 9, 2, 8, 8)
    o, S = fla.chunk_kda(**a, output_final_state=True)
    assert isinstance(o, np.ndarray) and isinstance(S, np.ndarray)
    ref_o, ref_S = ref_delta(a["q"], a["k"], a["v"], a["beta"], a["g"])
    check(o, ref_o)
    check(S, ref_S)
    o, _ = fla.chunk_kda(**a, cu_seqlens=np.array([0, 4, 9]))
    assert isinstance(o, np.ndarray)
    o, _ = fla.chunk_kda(**torch_args(a))
    assert isinstance(o, torch.Tensor)


def test_one_compile_serves_every_length():
    r = np.random.default_rng(12)
    H, K, V = 3, 8, 16
    before = _common.compiled_count()
    for T in (1, 64, 150):
        a = simple_gla_args(r, 2, T, H, K, V)
        o, _ = fla.chunk_simple_gla(**torch_args(a))
        check(o, ref_linear(a["q"], a["k"], a["v"], a["g"])[0], f"T={T}")
    assert _common.compiled_count() - before <= 1
    # a different batch size reuses it too
    a = simple_gla_args(r, 3, 5, H, K, V)
    fla.chunk_simple_gla(**torch_args(a))
    assert _common.compiled_count() - before <= 1


def rel_rms(y, ref):
    return np.sqrt(np.mean((f64(y) - ref) ** 2) / np.mean(ref ** 2))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", [BY_NAME[n] for n in (
    "chunk_gla", "chunk_retention", "chunk_rwkv6", "chunk_gated_delta_rule",
    "chunk_kda", "chunk_rwkv7")], ids=repr)
def test_low_precision(case, dtype):
    """bf16 / f16 inputs (f32 states): relative RMS <= 1e-2 against float64
    on the rounded inputs (SPEC section 4); o has the inputs' dtype."""
    r = np.random.default_rng(13)
    B, T, H, K, V = 1, 70, 2, 16, 16
    args = {n: torch.from_numpy(x).to(dtype)
            for n, x in case.make(r, B, T, H, K, V).items()}
    h0 = initial(r, case, B, H, K, V)
    o, S = case.fn(**args, initial_state=torch.from_numpy(h0),
                   output_final_state=True)
    assert o.dtype == dtype and S.dtype == torch.float32
    ref_o, ref_S = case.ref({n: f64(x) for n, x in args.items()}, h0)
    assert rel_rms(o, ref_o) <= 1e-2
    assert rel_rms(S, ref_S) <= 1e-2


# --------------------------------------------------------------------------
# Bad inputs: clear errors naming the argument, never a crash.


def small(r=None, B=1, T=6, H=2, K=8, V=4):
    return torch_args(gla_args(r or np.random.default_rng(0), B, T, H, K, V))


def test_wrong_dtype_names_the_argument():
    a = small()
    with pytest.raises(TypeError, match="g has dtype float64"):
        fla.chunk_gla(a["q"], a["k"], a["v"], a["g"].double())
    with pytest.raises(seqc.ArgumentTypeError,
                       match="v has dtype float16.*float32"):
        fla.chunk_gla(a["q"], a["k"], a["v"].half(), a["g"])
    with pytest.raises(TypeError, match="initial_state has dtype bfloat16"):
        fla.chunk_gla(**a, initial_state=torch.zeros(
            1, 2, 8, 4, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="cu_seqlens"):
        fla.chunk_gla(**a, cu_seqlens=torch.tensor([0.0, 6.0]))
    with pytest.raises(TypeError, match="k is a list"):
        fla.chunk_gla(a["q"], [[1.0]], a["v"], a["g"])
    with pytest.raises(TypeError, match="q is None"):
        fla.chunk_gla(None, a["k"], a["v"], a["g"])


def test_wrong_shape_names_the_argument():
    a = small()
    with pytest.raises(seqc.CallError, match="g must have shape 1x6x2x8"):
        fla.chunk_gla(a["q"], a["k"], a["v"], a["g"][..., :4])
    with pytest.raises(ValueError, match="v must have shape 1x6x2x"):
        fla.chunk_gla(a["q"], a["k"], a["v"][:, :5], a["g"])
    with pytest.raises(ValueError, match="q must have shape"):
        fla.chunk_gla(a["q"][0], a["k"], a["v"], a["g"])
    with pytest.raises(ValueError, match="initial_state must have shape "
                       "1x2x8x4"):
        fla.chunk_gla(**a, initial_state=torch.zeros(1, 2, 4, 8))
    with pytest.raises(ValueError, match="initial_state must have shape "
                       "1x2x4x8"):
        fla.chunk_gla(**a, initial_state=torch.zeros(1, 2, 8, 4),
                      state_v_first=True)
    with pytest.raises(ValueError, match="u must have shape 2x8"):
        fla.chunk_rwkv6(a["q"], a["k"], a["v"], a["g"], torch.zeros(8))
    d = torch_args(delta_args(lambda K: ())(np.random.default_rng(0),
                                            1, 6, 2, 8, 4))
    with pytest.raises(ValueError, match="v has 3 heads"):
        fla.chunk_gated_delta_rule(d["q"], d["k"], torch.zeros(1, 6, 3, 4),
                                   d["g"], d["beta"])
    with pytest.raises(ValueError, match="beta must have shape 1x6x2"):
        fla.chunk_gated_delta_rule(d["q"], d["k"], d["v"], d["g"],
                                   d["beta"][..., :1])


def test_bad_cu_seqlens():
    a = small()
    with pytest.raises(ValueError, match="batch size must be 1"):
        fla.chunk_gla(**small(B=2), cu_seqlens=torch.tensor([0, 6]))
    with pytest.raises(ValueError, match="initial_state must have shape "
                       "2x2x8x4"):
        fla.chunk_gla(**a, cu_seqlens=torch.tensor([0, 2, 6]),
                      initial_state=torch.zeros(1, 2, 8, 4))
    with pytest.raises(ValueError, match="cu_seqlens"):
        fla.chunk_gla(**a, cu_seqlens=torch.tensor([0, 9]))
    with pytest.raises(ValueError, match="cu_seqlens must be a 1-D"):
        fla.chunk_gla(**a, cu_seqlens=torch.tensor([[0, 6]]))
    # not monotone, not from 0, not to T: seqc's run-time checks
    for cu in ([0, 4, 3, 6], [1, 6], [0, 5]):
        with pytest.raises(seqc.CallError):
            fla.chunk_gla(**a, cu_seqlens=torch.tensor(cu))


def test_unsupported_options_raise():
    a = small()
    q, k, v, g = a["q"], a["k"], a["v"], a["g"]
    beta = torch.rand(1, 6, 2)
    g3 = -torch.rand(1, 6, 2)
    cases = [
        lambda: fla.fused_recurrent_gla(q, k, v, g, gv=torch.zeros_like(v)),
        lambda: fla.chunk_simple_gla(q, k, v, g3, g_gamma=torch.zeros(2)),
        lambda: fla.chunk_linear_attn(q, k, v,
                                      initial_state=torch.zeros(1, 2, 8, 4)),
        lambda: fla.chunk_gated_delta_rule(q, k, v, g3, beta,
                                           use_beta_sigmoid_in_kernel=True),
        lambda: fla.chunk_gated_delta_rule(q, k, v, g3, beta,
                                           use_gate_in_kernel=True),
        lambda: fla.chunk_kda(q, k, v, g, beta, use_gate_in_kernel=True),
        lambda: fla.chunk_kda(q, k, v, g, beta,
                              return_intermediate_states=True),
        lambda: fla.chunk_rwkv7(q, g, k, v, k, k, cp_context=object()),
        lambda: fla.chunk_gla(q, k, v, g, head_first=True),
    ]
    for call in cases:
        with pytest.raises(NotImplementedError):
            call()
    with pytest.raises(TypeError, match="unexpected keyword"):
        fla.chunk_gla(q, k, v, g, no_such_option=1)
    # algorithm hints are accepted and change nothing
    o1, _ = fla.chunk_kda(q, k, v, g, beta, safe_gate=True, chunk_size=32,
                          disable_recompute=True)
    o2, _ = fla.chunk_kda(q, k, v, g, beta)
    check(o1, f64(o2))


def test_device_and_autograd_inputs():
    """seqc computes no gradients: a tensor that requires grad is an error
    while autograd records, and is read detached under torch.no_grad()."""
    a = small()
    q = a["q"].clone().requires_grad_()
    with pytest.raises(TypeError, match="q requires grad"):
        fla.chunk_gla(q, a["k"], a["v"], a["g"])
    with torch.no_grad():
        o, _ = fla.chunk_gla(q, a["k"], a["v"], a["g"])
    assert not o.requires_grad
    check(o, ref_linear(a["q"], a["k"], a["v"], a["g"])[0])


def test_required_gates_are_required():
    """fla's required gates may not be None (that would compute another
    recurrence); its optional ones (fused_recurrent_gla's gk,
    chunk_simple_gla's g) may."""
    a = small()
    q, k, v, g = a["q"], a["k"], a["v"], a["g"]
    beta = torch.rand(1, 6, 2)
    for call, name in [
            (lambda: fla.chunk_gla(q, k, v, None), "g"),
            (lambda: fla.chunk_rwkv6(q, k, v, g, None), "u"),
            (lambda: fla.chunk_rwkv6(q, k, v, None, torch.zeros(2, 8)), "w"),
            (lambda: fla.chunk_gated_delta_rule(q, k, v, None, beta), "g"),
            (lambda: fla.chunk_kda(q, k, v, g, None), "beta"),
            (lambda: fla.chunk_rwkv7(q, None, k, v, k, k), "w")]:
        with pytest.raises(TypeError, match=f" {name} is None"):
            call()
    o, _ = fla.chunk_simple_gla(q, k, v)
    check(o, ref_linear(q, k, v)[0])
