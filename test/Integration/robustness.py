# Numerical robustness, on both pipelines against float64 references:
#   decays at the edges (dt*A near 0 and below -80, where exp underflows),
#   huge and tiny dt before softplus (its overflow path), NaN and Inf inputs
#   (they propagate as IEEE says, only where the recurrence carries them,
#   and nothing hangs), router ties, every token routed to one expert past
#   its capacity, and empty batches (B = 0, T = 0) for every op.
# RUN: %python %s
import math

import numpy as np
from refs import (attention, causal_conv1d, linear_attention, linear_scan, moe_ffn, route,
                  selective_scan, semiseparable_mask, softplus, ssd)
from seqc_testing import Checker, f32, rng, run_seqc, type_of

c = Checker()


def ty(a):
    return type_of(a)


def one_op(op, inputs, results, optional=(), attrs="", dyn_results=None):
    """A @main running one seq op on its arguments (in order: required, then
    optional groups), returning every result."""
    names = [f"%a{i}" for i in range(len(inputs))]
    nreq = len(inputs) - len(optional)
    text = ", ".join(names[:nreq])
    for j, kw in enumerate(optional):
        text += f" {kw}({names[nreq + j]})"
    attr = f" {{{attrs}}}" if attrs else ""
    sig = ", ".join(f"{n}: {ty(a)}" for n, a in zip(names, inputs))
    rt = ", ".join(results)
    lhs = "%r" if len(results) == 1 else f"%r:{len(results)}"
    rets = ["%r"] if len(results) == 1 else [f"%r#{i}" for i in range(len(results))]
    return (f"func.func @main({sig}) -> ({rt}) {{\n"
            f"  {lhs} = seq.{op} {text}{attr} : ({', '.join(ty(a) for a in inputs)}) -> ({rt})\n"
            f"  return {', '.join(rets)} : {rt}\n}}\n")


# -- decays at the edges -------------------------------------------------------

def extreme_decays():
    r = rng(1)
    Bs, T, H, P, N = 1, 70, 3, 4, 5
    x = f32(r.standard_normal((Bs, T, H, P)))
    B = f32(r.standard_normal((Bs, T, 1, N)))
    C = f32(r.standard_normal((Bs, T, 1, N)))
    # Head 0: dt*A ~ -1e-7 (decay ~1: no forgetting), head 1: ~ -0.5,
    # head 2: dt*A ~ -200 (exp underflows to 0: no memory at all).
    dt = f32(np.stack([np.full((Bs, T), 1e-7), np.full((Bs, T), 0.5),
                       np.full((Bs, T), 2.0)], axis=-1))
    A = f32([-1.0, -1.0, -100.0])
    out = [ty(x), f"tensor<{Bs}x{H}x{P}x{N}xf32>"]
    y, last = run_seqc(one_op("ssd", [x, dt, A, B, C], out), [x, dt, A, B, C])
    ry, rl = ssd(x, dt, A, B, C)
    c.close("ssd with dt*A from -1e-7 to -200", y, ry)
    c.close("ssd final state", last, rl)
    # Selective scan: dt*A below -80 for some channels.
    u = f32(r.standard_normal((1, T, 4)))
    delta = f32(np.full((1, T, 4), 1.0))
    A2 = f32(np.array([[-1e-8] * 3, [-1.0] * 3, [-90.0] * 3, [-1e4] * 3]))
    B2 = f32(r.standard_normal((1, T, 1, 3)))
    C2 = f32(r.standard_normal((1, T, 1, 3)))
    out = [ty(u), "tensor<1x4x3xf32>"]
    # D = 4 channels in one group: narrower than a vector, so the CPU kernel
    # declines and the reference lowering runs (not strict on the CPU).
    y, last = run_seqc(one_op("selective_scan", [u, delta, A2, B2, C2], out,
                              attrs="discretization = #seq.discretization<zoh>"),
                       [u, delta, A2, B2, C2], cpu_strict=False)
    ry, rl = selective_scan(u, delta, A2, B2, C2, zoh=True)
    c.close("selective_scan (zoh) with dt*A from -1e-8 to -1e4", y, ry)
    # A semiseparable mask whose partial sums reach -3e4.
    log_a = f32(np.full((1, 600), -50.0))
    (L,) = [run_seqc(one_op("semiseparable_mask", [log_a], ["tensor<1x600x600xf32>"]), [log_a])[0]]
    c.close("semiseparable_mask with segment sums to -3e4", L, semiseparable_mask(log_a))


# -- softplus overflow -------------------------------------------------------------

def softplus_edges():
    T, H = 12, 1
    vals = [-1e30, -200.0, -20.0, -1e-6, 0.0, 1e-6, 19.9, 20.0, 20.1, 88.0, 200.0, 1e30]
    dt = f32(np.array(vals).reshape(1, T, H))
    r = rng(2)
    x = f32(r.standard_normal((1, T, H, 2)))
    B = f32(r.standard_normal((1, T, 1, 2)))
    C = f32(r.standard_normal((1, T, 1, 2)))
    # A tiny A keeps dt*A finite for dt = 1e30 (-1e-30 * 1e30 = -1).
    A = f32([-1e-30])
    out = [ty(x), "tensor<1x1x2x2xf32>"]
    y, last = run_seqc(one_op("ssd", [x, dt, A, B, C], out, attrs="dt_softplus = true"),
                       [x, dt, A, B, C])
    ry, rl = ssd(x, dt, A, B, C, softplus_dt=True)
    # dt up to 1e30 multiplies x: compare relative to the reference's size.
    c.close("ssd softplus of dt in [-1e30, 1e30]", y, ry)
    c.expect("no NaN or Inf from softplus overflow", bool(np.all(np.isfinite(y))))


# -- NaN / Inf --------------------------------------------------------------------------

def nan_inf():
    T, S = 20, 4
    a = f32(np.full((1, T, S), 0.5))
    b = f32(np.ones((1, T, S)))
    b[0, 5, 1] = np.nan
    b[0, 7, 2] = np.inf
    a[0, 9, 3] = np.nan
    out = [ty(a), f"tensor<1x{S}xf32>"]
    h, last = run_seqc(one_op("linear_scan", [a, b], out), [a, b])
    rh, rl = linear_scan(a, b)
    c.equal("linear_scan NaN/Inf positions", np.isnan(h), np.isnan(rh))
    c.equal("linear_scan Inf positions", np.isinf(h), np.isinf(rh))
    c.close("linear_scan finite part", np.where(np.isfinite(rh), h, 0), np.where(np.isfinite(rh), rh, 0))
    # Attention: a NaN query row gives a NaN output row, nothing else.
    r = rng(3)
    q = f32(r.standard_normal((1, 6, 2, 4)))
    k = f32(r.standard_normal((1, 6, 2, 4)))
    v = f32(r.standard_normal((1, 6, 2, 4)))
    q[0, 3, 1, 2] = np.nan
    (o,) = [run_seqc(one_op("attention", [q, k, v], [ty(q)]), [q, k, v])[0]]
    ro = attention(q, k, v)
    c.equal("attention NaN positions", np.isnan(o), np.isnan(ro))
    c.close("attention finite part", np.nan_to_num(o), np.nan_to_num(ro))


# -- routing -----------------------------------------------------------------------------

def routing():
    T, E = 9, 4
    logits = f32(np.zeros((T, E)))  # every expert ties
    out = [f"tensor<{T}x2xf32>", f"tensor<{T}x2xi32>", "tensor<f32>"]
    w, idx, aux = run_seqc(one_op("route", [logits], out, attrs="k = 2 : i64, aux_loss_coef = 0.01 : f32"),
                           [logits])
    rw, ridx, raux = route(logits, 2, aux_loss_coef=0.01)
    c.equal("route ties go to the lower expert index", idx, ridx)
    c.close("route tie weights", w, rw)
    c.close("route aux of uniform logits", aux, raux)
    # Every token prefers expert 2; capacity 1.0 gives ceil(1 * 2 * 9 / 4) = 5
    # slots: tokens after the fifth lose their first choice.
    r = rng(4)
    D, F = 6, 5
    x = f32(r.standard_normal((T, D)))
    wts = f32(np.full((T, 2), 0.5))
    idx = np.array([[2, 1]] * T, dtype=np.int32)
    up = f32(r.standard_normal((E, D, F)))
    down = f32(r.standard_normal((E, F, D)))
    out = [ty(x), f"tensor<{E}xi64>"]
    y, load = run_seqc(one_op("moe_ffn", [x, wts, idx, up, down], out,
                              attrs="capacity_factor = 1.0 : f32"), [x, wts, idx, up, down])
    ry, rload = moe_ffn(x, wts, idx, up, down, capacity_factor=1.0)
    c.equal("all tokens to one expert: load per expert", load, rload)
    c.close("all tokens to one expert: outputs with drops", y, ry)


# -- empty batches ------------------------------------------------------------------------

def empty():
    for Bs, T in ((0, 5), (2, 0), (0, 0)):
        a = f32(np.zeros((Bs, T, 3)))
        out = [ty(a), f"tensor<{Bs}x3xf32>"]
        h, last = run_seqc(one_op("linear_scan", [a, a], out), [a, a])
        c.expect(f"linear_scan B={Bs} T={T} shapes", h.shape == a.shape and last.shape == (Bs, 3))
        x = f32(np.zeros((Bs, T, 2, 4)))
        dt = f32(np.zeros((Bs, T, 2)))
        A = f32([-1.0, -1.0])
        B = f32(np.zeros((Bs, T, 1, 3)))
        y, st = run_seqc(one_op("ssd", [x, dt, A, B, B], [ty(x), f"tensor<{Bs}x2x4x3xf32>"]),
                         [x, dt, A, B, B])
        c.expect(f"ssd B={Bs} T={T}", y.shape == x.shape and st.shape == (Bs, 2, 4, 3)
                 and not np.any(st))
        q = f32(np.zeros((Bs, T, 2, 4)))
        (o,) = [run_seqc(one_op("attention", [q, q, q], [ty(q)]), [q, q, q])[0]]
        c.expect(f"attention B={Bs} T={T}", o.shape == q.shape)
        o, S = run_seqc(one_op("linear_attention", [q, q, q], [ty(q), f"tensor<{Bs}x2x4x4xf32>"]),
                        [q, q, q])
        c.expect(f"linear_attention B={Bs} T={T}", o.shape == q.shape and not np.any(S))
        xc = f32(np.zeros((Bs, T, 3)))
        wc = f32(np.ones((3, 4)))
        y, last = run_seqc(one_op("causal_conv1d", [xc, wc], [ty(xc), f"tensor<{Bs}x3x3xf32>"]),
                           [xc, wc])
        c.expect(f"causal_conv1d B={Bs} T={T}", y.shape == xc.shape and last.shape == (Bs, 3, 3))
    # T = 0 tokens for the router and the experts.
    logits = f32(np.zeros((0, 4)))
    w, idx, aux = run_seqc(one_op("route", [logits], ["tensor<0x2xf32>", "tensor<0x2xi32>", "tensor<f32>"],
                                  attrs="k = 2 : i64, aux_loss_coef = 0.01 : f32"), [logits])
    c.expect("route with no tokens", w.shape == (0, 2) and float(aux) == 0.0)


c.run("extreme decays", extreme_decays)
c.run("softplus edges", softplus_edges)
c.run("NaN and Inf", nan_inf)
c.run("routing", routing)
c.run("empty batches", empty)
c.finish()
