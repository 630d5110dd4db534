"""numpy (float64) implementations of the example blocks, written from the
papers' equations with the op references of refs.py. `W` maps weight names
to arrays; `p` is the name prefix of a layer's weights. Every layer takes
the hidden states [1, T, D] and its states (None: zero) and returns the new
hidden states and states, like the MLIR layer functions."""
import math

import numpy as np
from refs import (attention, causal_conv1d, d, linear_attention, moe_ffn,
                  random_features, route, selective_scan, silu, ssd)


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
