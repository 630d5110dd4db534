"""numpy (float64) implementations of the example blocks, written from the
papers' equations with the op references of refs.py. `W` maps weight names
to arrays; `p` is the name prefix of a layer's weights. Every layer takes
the hidden states [1, T, D] and its states (None: zero) and returns the new
hidden states and states, like the MLIR layer functions."""
import math

import numpy as np
from refs import (attention, causal_conv1d, d, linear_attention, moe_ffn,
                  random_features, route, selective_scan, sigmoid, silu, softplus, ssd)


def rmsnorm(x, w, eps=1e-5):
    x = d(x)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * d(w)


def logsigmoid(x):
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


def mamba1(h, W, p="", conv0=None, ssm0=None):
    h2 = d(h[0])
    D = h2.shape[1]
    E, N, R = 2 * D, 16, math.ceil(D / 16)
    xn = rmsnorm(h2, W[p + "norm.weight"])
    xz = xn @ W[p + "mixer.in_proj.weight"]
    x, z = xz[:, :E], xz[:, E:]
    xc, conv1 = causal_conv1d(x[None], W[p + "mixer.conv1d.weight"],
                              W[p + "mixer.conv1d.bias"], conv0, "silu")
    xdbl = xc[0] @ W[p + "mixer.x_proj.weight"]
    dt = xdbl[:, :R] @ W[p + "mixer.dt_proj.weight"]
    B, C = xdbl[:, R:R + N], xdbl[:, R + N:]
    A = -np.exp(d(W[p + "mixer.A_log"]))
    y, ssm1 = selective_scan(xc, dt[None], A, B[None, :, None, :], C[None, :, None, :],
                             D=W[p + "mixer.D"], z=z[None], db=W[p + "mixer.dt_proj.bias"],
                             h0=ssm0, softplus_dt=True)
    out = h2 + y[0] @ W[p + "mixer.out_proj.weight"]
    return out[None], conv1, ssm1


def mamba2(h, W, p="", conv0=None, ssm0=None, d_state=64, headdim=32):
    h2 = d(h[0])
    T, D = h2.shape
    E, N, P = 2 * D, d_state, headdim
    H = E // P
    xn = rmsnorm(h2, W[p + "norm.weight"])
    zxbcdt = xn @ W[p + "mixer.in_proj.weight"]
    z, xbc, dt = zxbcdt[:, :E], zxbcdt[:, E:2 * E + 2 * N], zxbcdt[:, 2 * E + 2 * N:]
    conv, conv1 = causal_conv1d(xbc[None], W[p + "mixer.conv1d.weight"],
                                W[p + "mixer.conv1d.bias"], conv0, "silu")
    conv = conv[0]
    x = conv[:, :E].reshape(1, T, H, P)
    B = conv[:, E:E + N].reshape(1, T, 1, N)
    C = conv[:, E + N:].reshape(1, T, 1, N)
    A = -np.exp(d(W[p + "mixer.A_log"]))
    y, ssm1 = ssd(x, dt[None], A, B, C, D=W[p + "mixer.D"], z=z.reshape(1, T, H, P),
                  db=W[p + "mixer.dt_bias"], h0=ssm0, softplus_dt=True)
    yn = rmsnorm(y.reshape(T, E), W[p + "mixer.norm.weight"])
    out = h2 + yn @ W[p + "mixer.out_proj.weight"]
    return out[None], conv1, ssm1


def gla(h, W, p="", S0=None, heads=4):
    h2 = d(h[0])
    T, D = h2.shape
    dk, dv = D // 2, D
    K, V = dk // heads, dv // heads
    xn = rmsnorm(h2, W[p + "norm.weight"])
    q = (xn @ W[p + "attn.q_proj.weight"]).reshape(1, T, heads, K)
    k = (xn @ W[p + "attn.k_proj.weight"]).reshape(1, T, heads, K)
    v = (xn @ W[p + "attn.v_proj.weight"]).reshape(1, T, heads, V)
    gk = logsigmoid(xn @ W[p + "attn.gk_proj.weight"] + d(W[p + "attn.gk_proj.bias"])) / 16
    o, S1 = linear_attention(q, k, v, decay=gk.reshape(1, T, heads, K), S0=S0,
                             scale=K ** -0.5)
    on = rmsnorm(o[0], W[p + "attn.g_norm.weight"]).reshape(T, dv)
    gated = silu(xn @ W[p + "attn.g_proj.weight"]) * on
    out = h2 + gated @ W[p + "attn.o_proj.weight"]
    return out[None], S1


def performer(h, W, p="", S0=None, Z0=None, heads=4, carried=True):
    """carried=False: the op's normalize on a whole sequence (returns only
    h); otherwise numerator and normalizer as two carried linear
    attentions."""
    h2 = d(h[0])
    T, D = h2.shape
    K = D // heads
    xn = rmsnorm(h2, W[p + "norm.weight"])
    omega = W[p + "attn.omega"]
    pq = random_features((xn @ W[p + "attn.q_proj.weight"]).reshape(1, T, heads, K) * K ** -0.25, omega)
    pk = random_features((xn @ W[p + "attn.k_proj.weight"]).reshape(1, T, heads, K) * K ** -0.25, omega)
    v = (xn @ W[p + "attn.v_proj.weight"]).reshape(1, T, heads, K)
    if not carried:
        o, _ = linear_attention(pq, pk, v, normalize=True)
        return (h2 + o.reshape(T, D) @ W[p + "attn.o_proj.weight"])[None]
    num, S1 = linear_attention(pq, pk, v, S0=S0)
    den, Z1 = linear_attention(pq, pk, np.ones((1, T, heads, 1)), S0=Z0)
    o = num / (den + 1e-6)
    out = h2 + o.reshape(T, D) @ W[p + "attn.o_proj.weight"]
    return out[None], S1, Z1


def attention_layer(h, W, p="", k_cache=None, v_cache=None, heads=4, kv_heads=2):
    h2 = d(h[0])
    T, D = h2.shape
    K = D // heads
    xn = rmsnorm(h2, W[p + "norm.weight"])
    q = (xn @ W[p + "attn.q_proj.weight"]).reshape(1, T, heads, K)
    k = (xn @ W[p + "attn.k_proj.weight"]).reshape(1, T, kv_heads, K)
    v = (xn @ W[p + "attn.v_proj.weight"]).reshape(1, T, kv_heads, K)
    if k_cache is not None:
        k = np.concatenate([d(k_cache), k], axis=1)
        v = np.concatenate([d(v_cache), v], axis=1)
    o = attention(q, k, v, causal=True)
    out = h2 + o.reshape(T, D) @ W[p + "attn.o_proj.weight"]
    return out[None], k, v


def swiglu(x, wg, wu, wd):
    return (silu(x @ d(wg)) * (x @ d(wu))) @ d(wd)


def mlp(h, W, p=""):
    h2 = d(h[0])
    xn = rmsnorm(h2, W[p + "norm.weight"])
    return (h2 + swiglu(xn, W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"],
                        W[p + "mlp.down_proj.weight"]))[None]


def moe(h, W, p="", k=2, router="softmax", capacity_factor=1.25):
    """Returns (h, aux, load)."""
    h2 = d(h[0])
    xn = rmsnorm(h2, W[p + "norm.weight"])
    logits = xn @ W[p + "moe.router.weight"]
    if router == "softmax":
        w, idx, aux = route(logits, k, aux_loss_coef=0.01)
    else:
        w, idx, aux = route(logits, k, bias=W[p + "moe.router.bias"], score="sigmoid",
                            normalize=True, routed_scale=2.5)
    y, load = moe_ffn(xn, w, idx, W[p + "moe.experts.up_proj"], W[p + "moe.experts.down_proj"],
                      w_gate=W[p + "moe.experts.gate_proj"], capacity_factor=capacity_factor)
    shared = swiglu(xn, W[p + "moe.shared.gate_proj.weight"], W[p + "moe.shared.up_proj.weight"],
                    W[p + "moe.shared.down_proj.weight"])
    return (h2 + y + shared)[None], aux, load


def hybrid(u, W, layout, states=None):
    """The hybrid stack. `states` (None: zero) is the flat list of per-layer
    states in the order of the MLIR @step arguments; returns (out, aux,
    new states)."""
    x = u
    aux = 0.0
    new = []
    it = iter(states) if states is not None else None
    for i, (mixer, ffn) in enumerate(layout):
        p = f"layers.{i}."
        s0 = (next(it), next(it)) if it else (None, None)
        if mixer == "mamba2":
            x, a, b = mamba2(x, W, p, *s0)
        else:
            x, a, b = attention_layer(x, W, p, *s0)
        new += [a, b]
        if ffn == "mlp":
            x = mlp(x, W, p + "ffn.")
        else:
            x, a_, _ = moe(x, W, p + "ffn.", capacity_factor=0.0)
            aux += a_
    out = rmsnorm(x[0], W["final_norm.weight"])[None]
    return out, aux, new


# -- delta-rule family ------------------------------------------------------
# The recurrences of seq.delta_rule, seq.generalized_delta_rule and
# seq.linear_attention's bonus, step by step in float64 from the SPEC's
# equations (states K x V per head), independent of refs.py's op references.


def _log_decay_at(g, t, shape):
    """exp(g) at step t broadcast to (B, H, K): g of shape H, B x T x H or
    B x T x H x K; None: no decay."""
    if g is None:
        return np.ones(shape)
    if g.ndim == 1:
        return np.broadcast_to(np.exp(g)[None, :, None], shape)
    if g.ndim == 3:
        return np.broadcast_to(np.exp(g[:, t])[:, :, None], shape)
    return np.exp(g[:, t])


def _delta_rule(q, k, v, beta, g=None, S0=None, qk_l2norm=False, scale=1.0, eps=1e-6):
    """S~ = diag(exp(g_t)) S_{t-1}; S_t = S~ + beta_t k_t (v_t - S~^T k_t)^T;
    o_t = S_t^T (q_t scale); value head j reads q/k head j / (HV / H)."""
    q, k, v, beta, g = d(q), d(k), d(v), d(beta), d(g)
    Bs, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if qk_l2norm:
        q = q / np.sqrt(np.sum(q * q, axis=-1, keepdims=True) + eps)
        k = k / np.sqrt(np.sum(k * k, axis=-1, keepdims=True) + eps)
    q = np.repeat(q * scale, HV // H, axis=2)
    k = np.repeat(k, HV // H, axis=2)
    S = np.zeros((Bs, HV, K, V)) if S0 is None else d(S0).copy()
    o = np.zeros((Bs, T, HV, V))
    for t in range(T):
        S = _log_decay_at(g, t, (Bs, HV, K))[..., None] * S
        kt = k[:, t]
        err = v[:, t] - np.einsum("bhk,bhkv->bhv", kt, S)
        S = S + beta[:, t, :, None, None] * kt[..., None] * err[:, :, None, :]
        o[:, t] = np.einsum("bhk,bhkv->bhv", q[:, t], S)
    return o, S


def _generalized_delta_rule(q, k, v, a, b, g=None, S0=None, scale=1.0):
    """S_t = diag(exp(g_t)) S_{t-1} + b_t (a_t^T S_{t-1}) + k_t v_t^T;
    o_t = S_t^T (q_t scale)."""
    q, k, v, a, b, g = d(q), d(k), d(v), d(a), d(b), d(g)
    Bs, T, H, K = q.shape
    V = v.shape[-1]
    S = np.zeros((Bs, H, K, V)) if S0 is None else d(S0).copy()
    o = np.zeros((Bs, T, H, V))
    for t in range(T):
        aS = np.einsum("bhk,bhkv->bhv", a[:, t], S)
        S = (_log_decay_at(g, t, (Bs, H, K))[..., None] * S
             + b[:, t, :, :, None] * aS[:, :, None, :]
             + k[:, t, :, :, None] * v[:, t, :, None, :])
        o[:, t] = np.einsum("bhk,bhkv->bhv", q[:, t] * scale, S)
    return o, S


def _linear_attention_bonus(q, k, v, g, u, S0=None, scale=1.0):
    """RWKV-6: o_t = q'_t S_{t-1} + (sum_c q'_t[c] u[c] k_t[c]) v_t;
    S_t = exp(g_t) S_{t-1} + k_t v_t^T (q' = q scale)."""
    q, k, v, g, u = d(q) * scale, d(k), d(v), d(g), d(u)
    Bs, T, H, K = q.shape
    V = v.shape[-1]
    S = np.zeros((Bs, H, K, V)) if S0 is None else d(S0).copy()
    o = np.zeros((Bs, T, H, V))
    for t in range(T):
        now = np.sum(q[:, t] * u[None] * k[:, t], axis=-1)
        o[:, t] = np.einsum("bhk,bhkv->bhv", q[:, t], S) + now[..., None] * v[:, t]
        S = _log_decay_at(g, t, (Bs, H, K))[..., None] * S + k[:, t, :, :, None] * v[:, t, :, None, :]
    return o, S


def _group_norm(x, heads, w, b, eps):
    """GroupNorm(heads, C) of [T, C] (biased variance), then w x + b."""
    T, C = x.shape
    xh = x.reshape(T, heads, C // heads)
    mean = xh.mean(axis=-1, keepdims=True)
    var = ((xh - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((xh - mean) / np.sqrt(var + eps)).reshape(T, C) * d(w) + d(b)


def _token_shift(x, x0):
    """(x_{t-1} - x_t, the last token) of rows x [T, D], x_{-1} = x0 [1, D]."""
    prev = np.concatenate([np.zeros((1, x.shape[1])) if x0 is None else d(x0), x], axis=0)
    return prev[:-1] - x, prev[-1:]


def gdn(h, W, p="", conv0=None, S0=None, heads=2, v_heads=4):
    """Gated DeltaNet, Qwen3-Next's layer (columns of in_proj_qkvz in
    (q, k, v, z) order, of in_proj_ba in (b, a) order)."""
    h2 = d(h[0])
    T, D = h2.shape
    H, HV = heads, v_heads
    K = V = D // 4
    dk, dv = H * K, HV * V
    xn = rmsnorm(h2, W[p + "norm.weight"])
    qkvz = xn @ d(W[p + "linear_attn.in_proj_qkvz.weight"])
    ba = xn @ d(W[p + "linear_attn.in_proj_ba.weight"])
    conv, conv1 = causal_conv1d(qkvz[None, :, :2 * dk + dv], W[p + "linear_attn.conv1d.weight"],
                                None, conv0, "silu")
    conv = conv[0]
    q = conv[:, :dk].reshape(1, T, H, K)
    k = conv[:, dk:2 * dk].reshape(1, T, H, K)
    v = conv[:, 2 * dk:].reshape(1, T, HV, V)
    z = qkvz[:, 2 * dk + dv:]
    beta = sigmoid(ba[:, :HV])[None]
    g = (-np.exp(d(W[p + "linear_attn.A_log"])) *
         softplus(ba[:, HV:] + d(W[p + "linear_attn.dt_bias"])))[None]
    o, S1 = _delta_rule(q, k, v, beta, g, S0, qk_l2norm=True, scale=K ** -0.5)
    on = rmsnorm(o[0].reshape(T * HV, V), W[p + "linear_attn.norm.weight"], eps=1e-6)
    out = h2 + (on.reshape(T, dv) * silu(z)) @ d(W[p + "linear_attn.out_proj.weight"])
    return out[None], conv1, S1


def kda(h, W, p="", qconv0=None, kconv0=None, vconv0=None, S0=None, heads=4):
    """Kimi Delta Attention (fla's KimiDeltaAttention)."""
    h2 = d(h[0])
    T, D = h2.shape
    H = heads
    K = V = D // 4
    xn = rmsnorm(h2, W[p + "norm.weight"])
    qkv, convs1 = [], []
    for c, s0, P in (("q", qconv0, K), ("k", kconv0, K), ("v", vconv0, V)):
        y, c1 = causal_conv1d((xn @ d(W[p + f"attn.{c}_proj.weight"]))[None],
                              W[p + f"attn.{c}_conv1d.weight"], None, s0, "silu")
        qkv.append(y.reshape(1, T, H, P))
        convs1.append(c1)
    f = xn @ d(W[p + "attn.f_proj.0.weight"]) @ d(W[p + "attn.f_proj.1.weight"])
    A = np.repeat(np.exp(d(W[p + "attn.A_log"])), K)
    g = (-A * softplus(f + d(W[p + "attn.dt_bias"]))).reshape(1, T, H, K)
    beta = sigmoid(xn @ d(W[p + "attn.b_proj.weight"]))[None]
    o, S1 = _delta_rule(*qkv, beta, g, S0, qk_l2norm=True, scale=K ** -0.5)
    on = rmsnorm(o[0].reshape(T * H, V), W[p + "attn.o_norm.weight"], eps=1e-6).reshape(T, H * V)
    gate = (xn @ d(W[p + "attn.g_proj.0.weight"]) @ d(W[p + "attn.g_proj.1.weight"])
            + d(W[p + "attn.g_proj.1.bias"]))
    out = h2 + (sigmoid(gate) * on) @ d(W[p + "attn.o_proj.weight"])
    return (out[None], *convs1, S1)


def rwkv7(h, W, p="", x0=None, S0=None, heads=4):
    """RWKV-7 time mixing as the reference code's first layer (no value
    residual), RMSNorm pre-norm."""
    h2 = d(h[0])
    T, D = h2.shape
    H, K = heads, D // heads
    P = lambda n: d(W[p + "att." + n])  # noqa: E731
    xn = rmsnorm(h2, W[p + "norm.weight"])
    xx, x1 = _token_shift(xn, x0)
    xm = {c: xn + xx * P("x_" + c) for c in "rwkvag"}
    r = xm["r"] @ P("receptance.weight")
    k = xm["k"] @ P("key.weight")
    v = xm["v"] @ P("value.weight")
    w = -softplus(-(P("w0") + np.tanh(xm["w"] @ P("w1")) @ P("w2"))) - 0.5
    a = sigmoid(P("a0") + xm["a"] @ P("a1") @ P("a2"))
    g = sigmoid(xm["g"] @ P("g1")) @ P("g2")
    kk = (k * P("k_k")).reshape(T, H, K)
    kk = (kk / np.maximum(np.linalg.norm(kk, axis=-1, keepdims=True), 1e-12)).reshape(T, D)
    k = k * (1 + (a - 1) * P("k_a"))
    hd = lambda x: x.reshape(1, T, H, K)  # noqa: E731
    o, S1 = _generalized_delta_rule(hd(r), hd(k), hd(v), hd(-kk), hd(kk * a), hd(-np.exp(w)), S0)
    on = _group_norm(o[0].reshape(T, D), H, P("ln_x.weight"), P("ln_x.bias"), 64e-5)
    bonus = (np.sum((r * k).reshape(T, H, K) * P("r_k")[None], axis=-1, keepdims=True)
             * v.reshape(T, H, K)).reshape(T, D)
    out = h2 + ((on + bonus) * g) @ P("output.weight")
    return out[None], x1, S1


def rwkv6(h, W, p="", x0=None, S0=None, heads=4):
    """RWKV-6 time mixing, RMSNorm pre-norm."""
    h2 = d(h[0])
    T, D = h2.shape
    H, K = heads, D // heads
    Rm = D // 8
    P = lambda n: d(W[p + "att." + n])  # noqa: E731
    xn = rmsnorm(h2, W[p + "norm.weight"])
    xx, x1 = _token_shift(xn, x0)
    lora = np.tanh((xn + xx * P("time_maa_x")) @ P("time_maa_w1"))
    w2 = P("time_maa_w2")
    xm = {c: xn + xx * (P("time_maa_" + c) + lora[:, i * Rm:(i + 1) * Rm] @ w2[i])
          for i, c in enumerate("wkvrg")}
    r = xm["r"] @ P("receptance.weight")
    k = xm["k"] @ P("key.weight")
    v = xm["v"] @ P("value.weight")
    gate = silu(xm["g"] @ P("gate.weight"))
    w = -np.exp(P("time_decay") + np.tanh(xm["w"] @ P("time_decay_w1")) @ P("time_decay_w2"))
    hd = lambda x: x.reshape(1, T, H, K)  # noqa: E731
    o, S1 = _linear_attention_bonus(hd(r), hd(k), hd(v), hd(w), P("time_faaaa"), S0)
    on = _group_norm(o[0].reshape(T, D), H, P("ln_x.weight"), P("ln_x.bias"), 64e-5)
    out = h2 + (on * gate) @ P("output.weight")
    return out[None], x1, S1


def gated_attention_layer(h, W, p="", k_cache=None, v_cache=None, heads=4, kv_heads=2):
    """Qwen3-Next's gated attention, without RoPE."""
    h2 = d(h[0])
    T, D = h2.shape
    K = D // heads
    xn = rmsnorm(h2, W[p + "norm.weight"])
    q = rmsnorm((xn @ d(W[p + "attn.q_proj.weight"])).reshape(T, heads, K),
                W[p + "attn.q_norm.weight"], eps=1e-6)[None]
    k = rmsnorm((xn @ d(W[p + "attn.k_proj.weight"])).reshape(T, kv_heads, K),
                W[p + "attn.k_norm.weight"], eps=1e-6)[None]
    v = (xn @ d(W[p + "attn.v_proj.weight"])).reshape(1, T, kv_heads, K)
    if k_cache is not None:
        k = np.concatenate([d(k_cache), k], axis=1)
        v = np.concatenate([d(v_cache), v], axis=1)
    o = attention(q, k, v, causal=True)
    gate = sigmoid(xn @ d(W[p + "attn.gate_proj.weight"]))
    out = h2 + (gate * o.reshape(T, D)) @ d(W[p + "attn.o_proj.weight"])
    return out[None], k, v


def qwen3next(u, W, layout, states=None):
    """The Qwen3-Next-layout stack. `states` (None: zero) is the flat list
    of per-layer states in @step's order; returns (out, aux, new states)."""
    x = u
    aux = 0.0
    new = []
    it = iter(states) if states is not None else None
    for i, (mixer, _) in enumerate(layout):
        p = f"layers.{i}."
        s0 = (next(it), next(it)) if it else (None, None)
        layer = gdn if mixer == "gdn" else gated_attention_layer
        x, a, b = layer(x, W, p, *s0)
        new += [a, b]
        x, a_, _ = moe(x, W, p + "ffn.", capacity_factor=0.0)
        aux += a_
    out = rmsnorm(x[0], W["final_norm.weight"])[None]
    return out, aux, new
