"""float64 numpy references of every seq op, written from SPEC section 2.

These are deliberately independent of seqc's lowerings: plain recurrences and
dense formulas in float64.
"""
import math

import numpy as np


def softplus(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def silu(x):
    return x * sigmoid(x)


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def relu(x):
    return np.maximum(x, 0.0)


def d(x):
    return None if x is None else np.asarray(x, dtype=np.float64)


def linear_scan(a, b, h0=None, reverse=False):
    a, b = d(a), d(b)
    T = a.shape[1]
    h = np.zeros((a.shape[0],) + a.shape[2:]) if h0 is None else d(h0).copy()
    out = np.zeros_like(a)
    steps = range(T - 1, -1, -1) if reverse else range(T)
    for t in steps:
        h = a[:, t] * h + b[:, t]
        out[:, t] = h
    return out, h


def associative_scan(xs, combine, dim=1, reverse=False):
    xs = [np.moveaxis(d(x), dim, 0) for x in xs]
    n = xs[0].shape[0]
    outs = [np.zeros_like(x) for x in xs]
    order = range(n - 1, -1, -1) if reverse else range(n)
    acc = None
    for t in order:
        cur = [x[t] for x in xs]
        if acc is None:
            acc = cur
        else:
            r = combine(*acc, *cur)
            acc = list(r) if isinstance(r, tuple) else [r]
        for o, v in zip(outs, acc):
            o[t] = v
    return [np.moveaxis(o, 0, dim) for o in outs]


def selective_scan(u, delta, A, B, C, D=None, z=None, db=None, h0=None,
                   softplus_dt=False, zoh=False):
    u, delta, A, B, C = d(u), d(delta), d(A), d(B), d(C)
    Bs, T, Dn = u.shape
    N = A.shape[1]
    G = B.shape[2]
    g = np.arange(Dn) // (Dn // G)
    dt = delta + (0.0 if db is None else d(db))
    if softplus_dt:
        dt = softplus(dt)
    h = np.zeros((Bs, Dn, N)) if h0 is None else d(h0).copy()
    y = np.zeros((Bs, T, Dn))
    safeA = np.where(A == 0.0, 1.0, A)
    for t in range(T):
        dA = dt[:, t, :, None] * A[None]
        Bt = B[:, t][:, g, :]
        Ct = C[:, t][:, g, :]
        if zoh:
            w = np.where(A[None] == 0.0, dt[:, t, :, None], np.expm1(dA) / safeA[None])
        else:
            w = dt[:, t, :, None]
        h = np.exp(dA) * h + w * Bt * u[:, t, :, None]
        y[:, t] = np.sum(Ct * h, axis=-1)
    if D is not None:
        y += d(D) * u
    if z is not None:
        y *= silu(d(z))
    return y, h


def ssd(x, dt, A, B, C, D=None, z=None, db=None, h0=None, softplus_dt=False,
        dt_min=0.0, dt_max=float("inf")):
    """SPEC 2.4. D is H or H x P (mamba_ssm's D_has_hdim); dt is clamped to
    [dt_min, dt_max] only when that is not the default (0, inf), as
    mamba_ssm applies dt_limit."""
    x, dt, A, B, C = d(x), d(dt), d(A), d(B), d(C)
    Bs, T, H, P = x.shape
    G, N = B.shape[2], B.shape[3]
    g = np.arange(H) // (H // G)
    dt = dt + (0.0 if db is None else d(db))
    if softplus_dt:
        dt = softplus(dt)
    if (dt_min, dt_max) != (0.0, float("inf")):
        dt = np.clip(dt, dt_min, dt_max)
    a = np.exp(dt * A)  # B T H
    h = np.zeros((Bs, H, P, N)) if h0 is None else d(h0).copy()
    y = np.zeros_like(x)
    for t in range(T):
        Bt = B[:, t][:, g, :]  # B H N
        Ct = C[:, t][:, g, :]
        h = a[:, t, :, None, None] * h + dt[:, t, :, None, None] * x[:, t, :, :, None] * Bt[:, :, None, :]
        y[:, t] = np.einsum("bhpn,bhn->bhp", h, Ct)
    if D is not None:
        Dd = d(D)
        y += (Dd[None, None] if Dd.ndim == 2 else Dd[None, None, :, None]) * x
    if z is not None:
        y *= silu(d(z))
    return y, h


def semiseparable_mask(log_a):
    la = d(log_a)
    T = la.shape[-1]
    L = np.zeros(la.shape + (T,))
    for j in range(T):
        s = np.zeros(la.shape[:-1])
        L[..., j, j] = 1.0
        for i in range(j + 1, T):
            s = s + la[..., i]
            L[..., i, j] = np.exp(s)
    return L


def feature_map(name, x):
    if name == "identity":
        return x
    if name == "elu_plus_one":
        return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))
    if name == "relu":
        return relu(x)
    raise ValueError(name)


def linear_attention(q, k, v, decay=None, S0=None, feature="identity", causal=True,
                     normalize=False, scale=1.0, eps=1e-6, bonus=None):
    """With `bonus` (H x K, RWKV-6's u; causal only, not with normalize) the
    output reads the state before step t's update plus the weighted current
    term: o_t = q'_t (S_{t-1} + diag(u) outer(k'_t, v_t))."""
    if bonus is not None and (normalize or not causal):
        raise ValueError("bonus takes causal = true and normalize = false")
    q, k, v = d(q), d(k), d(v)
    Bs, T, H, K = q.shape
    V = v.shape[-1]
    qp = feature_map(feature, q) * scale
    kp = feature_map(feature, k)
    S = np.zeros((Bs, H, K, V)) if S0 is None else d(S0).copy()
    z = np.zeros((Bs, H, K))
    o = np.zeros((Bs, T, H, V))
    if not causal:
        S = S + np.einsum("bthk,bthv->bhkv", kp, v)
        z = kp.sum(axis=1)
        o = np.einsum("bthk,bhkv->bthv", qp, S)
        if normalize:
            o /= (np.einsum("bthk,bhk->bth", qp, z) + eps)[..., None]
        return o, S
    g = d(decay)
    for t in range(T):
        if g is None:
            f = np.ones((Bs, H, K))
        elif g.ndim == 1:
            f = np.broadcast_to(np.exp(g)[None, :, None], (Bs, H, K))
        elif g.ndim == 3:
            f = np.broadcast_to(np.exp(g[:, t])[:, :, None], (Bs, H, K))
        else:
            f = np.exp(g[:, t])
        if bonus is not None:
            cur = np.sum(qp[:, t] * d(bonus)[None] * kp[:, t], axis=-1)  # B H
            o[:, t] = (np.einsum("bhk,bhkv->bhv", qp[:, t], S) +
                       cur[..., None] * v[:, t])
        S = f[..., None] * S + kp[:, t, :, :, None] * v[:, t, :, None, :]
        z = f * z + kp[:, t]
        if bonus is not None:
            continue
        o[:, t] = np.einsum("bhk,bhkv->bhv", qp[:, t], S)
        if normalize:
            o[:, t] /= (np.einsum("bhk,bhk->bh", qp[:, t], z) + eps)[..., None]
    return o, S


def delta_rule(q, k, v, beta, g=None, S0=None, qk_l2norm=False, scale=1.0, eps=1e-6):
    """SPEC 2.12. q, k: B T H K; v: B T HV V; beta: B T HV; g: HV, B T HV or
    B T HV K; S0: B HV K V. Value head j reads query/key head j // (HV // H)."""
    q, k, v, beta = d(q), d(k), d(v), d(beta)
    Bs, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    heads = np.arange(HV) // (HV // H)
    if qk_l2norm:
        q = q / np.sqrt(np.sum(q * q, axis=-1, keepdims=True) + eps)
        k = k / np.sqrt(np.sum(k * k, axis=-1, keepdims=True) + eps)
    qp = q[:, :, heads] * scale  # B T HV K
    k = k[:, :, heads]
    g = d(g)
    S = np.zeros((Bs, HV, K, V)) if S0 is None else d(S0).copy()
    o = np.zeros((Bs, T, HV, V))
    for t in range(T):
        if g is None:
            alpha = np.ones((Bs, HV, K))
        elif g.ndim == 1:
            alpha = np.broadcast_to(np.exp(g)[None, :, None], (Bs, HV, K))
        elif g.ndim == 3:
            alpha = np.broadcast_to(np.exp(g[:, t])[:, :, None], (Bs, HV, K))
        else:
            alpha = np.exp(g[:, t])
        St = alpha[..., None] * S
        kt = k[:, t]
        u = beta[:, t, :, None] * (v[:, t] - np.einsum("bhk,bhkv->bhv", kt, St))
        S = St + kt[..., None] * u[:, :, None, :]
        o[:, t] = np.einsum("bhk,bhkv->bhv", qp[:, t], S)
    return o, S


def generalized_delta_rule(q, k, v, a, b, g=None, S0=None, scale=1.0):
    """SPEC 2.13. q, k, a, b, g: B T H K; v: B T H V; S0: B H K V.
    S_t = diag(exp(g_t)) S_{t-1} + outer(b_t, a_t^T S_{t-1}) + outer(k_t, v_t)."""
    q, k, v, a, b = d(q), d(k), d(v), d(a), d(b)
    Bs, T, H, K = q.shape
    V = v.shape[-1]
    g = d(g)
    S = np.zeros((Bs, H, K, V)) if S0 is None else d(S0).copy()
    o = np.zeros((Bs, T, H, V))
    for t in range(T):
        aS = np.einsum("bhk,bhkv->bhv", a[:, t], S)
        w = np.ones((Bs, H, K)) if g is None else np.exp(g[:, t])
        S = (w[..., None] * S + b[:, t, :, :, None] * aS[:, :, None, :] +
             k[:, t, :, :, None] * v[:, t, :, None, :])
        o[:, t] = np.einsum("bhk,bhkv->bhv", q[:, t] * scale, S)
    return o, S


def random_features(x, omega, kind="positive"):
    x, omega = d(x), d(omega)
    M = omega.shape[1]
    proj = x @ omega
    half = 0.5 * np.sum(x * x, axis=-1, keepdims=True)
    if kind == "positive":
        return np.exp(proj - half) / math.sqrt(M)
    amp = np.exp(half) / math.sqrt(M)
    return np.concatenate([np.sin(proj) * amp, np.cos(proj) * amp], axis=-1)


def attention(q, k, v, causal=True, window=0, scale=None):
    q, k, v = d(q), d(k), d(v)
    Bs, T, H, K = q.shape
    S, Hkv = k.shape[1], k.shape[2]
    if scale is None:
        scale = 1.0 / math.sqrt(K)
    rep = H // Hkv
    o = np.zeros(q.shape[:3] + (v.shape[-1],))
    for h in range(H):
        hk = h // rep
        s = np.einsum("btk,bsk->bts", q[:, :, h], k[:, :, hk]) * scale
        i = np.arange(T)[:, None] + S - T
        j = np.arange(S)[None, :]
        vis = np.ones((T, S), dtype=bool)
        if causal:
            vis &= j <= i
        if window > 0:
            vis &= (i - j) < window
        s = np.where(vis[None], s, -np.inf)
        m = np.max(s, axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        p = np.where(vis[None], np.exp(s - m), 0.0)
        l = p.sum(-1, keepdims=True)
        # A query that sees no key gives 0; NaN scores propagate (l is NaN).
        seen = l != 0
        o[:, :, h] = np.where(seen, (p @ v[:, :, hk]) / np.where(seen, l, 1.0), 0.0)
    return o


def causal_conv1d(x, w, bias=None, s0=None, activation="none"):
    x, w = d(x), d(w)
    Bs, T, D = x.shape
    W = w.shape[1]
    hist = np.zeros((Bs, D, W - 1)) if s0 is None else d(s0)
    seq = np.concatenate([np.transpose(hist, (0, 2, 1)), x], axis=1)  # B, W-1+T, D
    y = np.zeros_like(x)
    for t in range(T):
        y[:, t] = np.sum(seq[:, t:t + W, :] * w.T[None], axis=1)
    if bias is not None:
        y += d(bias)
    if activation == "silu":
        y = silu(y)
    last = np.transpose(seq[:, T:T + W - 1, :], (0, 2, 1))
    return y, last


def route(logits, k, bias=None, noise=None, score="softmax_topk", normalize=False,
          routed_scale=1.0, aux_loss_coef=0.0):
    """Returns (weights, indices, aux). Selection in float32 like seqc (ties and
    near-ties must resolve identically), weights in float64."""
    logits64 = d(logits)
    T, E = logits64.shape
    h = logits64.copy()
    if noise is not None:
        eps, nl = noise
        h = h + d(eps) * softplus(d(nl))
    # The selection order is decided on the f32 values seqc computes.
    h32 = np.asarray(logits, dtype=np.float32).copy()
    if noise is not None:
        nl32 = np.asarray(noise[1], dtype=np.float32)
        sp32 = np.where(nl32 > 20, nl32, np.log1p(np.exp(np.minimum(nl32, 20)))).astype(np.float32)
        h32 = (h32 + np.asarray(noise[0], dtype=np.float32) * sp32).astype(np.float32)
    sel = h32 + (0 if bias is None else np.asarray(bias, dtype=np.float32))
    idx = np.zeros((T, k), dtype=np.int32)
    w = np.zeros((T, k))
    for t in range(T):
        chosen = []
        for _ in range(k):
            best = -1
            for e in range(E):
                if e in chosen:
                    continue
                if best < 0 or sel[t, e] > sel[t, best]:
                    best = e
            chosen.append(best)
        idx[t] = chosen
        hc = h[t, chosen]
        if score == "softmax_topk":
            p = np.exp(hc - hc.max())
            g = p / p.sum()
        elif score == "softmax":
            p = np.exp(h[t] - h[t].max())
            g = (p / p.sum())[chosen]
        else:
            g = sigmoid(hc)
        if normalize:
            g = g / g.sum()
        w[t] = g * routed_scale
    if T == 0:
        return w, idx, 0.0
    f = np.bincount(idx[:, 0], minlength=E) / T
    p = np.exp(logits64 - logits64.max(axis=1, keepdims=True))
    P = (p / p.sum(axis=1, keepdims=True)).mean(axis=0)
    aux = aux_loss_coef * E * float(np.sum(f * P))
    return w, idx, aux


def moe_ffn(x, w, idx, w_up, w_down, w_gate=None, activation="silu", capacity_factor=0.0):
    x, w, w_up, w_down = d(x), d(w), d(w_up), d(w_down)
    T, D = x.shape
    k = idx.shape[1]
    E = w_up.shape[0]
    act = {"silu": silu, "gelu": gelu, "relu": relu}[activation]
    cap = math.ceil(float(np.float32(capacity_factor)) * k * T / E) if capacity_factor > 0 else T * k
    load = np.zeros(E, dtype=np.int64)
    y = np.zeros((T, D))
    for t in range(T):
        for j in range(k):
            e = int(idx[t, j])
            if load[e] >= cap:
                continue
            load[e] += 1
            up = x[t] @ w_up[e]
            hid = act(x[t] @ d(w_gate)[e]) * up if w_gate is not None else act(up)
            y[t] += w[t, j] * (hid @ w_down[e])
    return y, load
