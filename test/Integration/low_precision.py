# bf16 and f16 operands through every pipeline, the fast CPU one strict (its
# kernels widen loads to f32, keep sums and states in f32, and round the
# results once; states stay f32, SPEC 1): the op families bf16_kernels.py
# does not cover, and the chunked form's variants (normalized, per-key
# recurrent, non-causal), against float64 numpy on the rounded inputs within
# the SPEC's bound (relative RMS error <= 1e-2).
# RUN: %python %s
import numpy as np
from refs import (causal_conv1d, linear_attention, linear_scan, random_features, route,
                  semiseparable_mask, ssd)
from seqc_testing import Checker, bf16, f16, f32, func, mlir_type, rel_rms, rng, run_seqc, seq_op

c = Checker()
ROUND = {"bf16": bf16, "f16": f16}


def check(name, got, ref):
    err = rel_rms(got, ref)
    c.expect(f"{name}: relative RMS {err:.2e} <= 1e-2", err <= 1e-2)


def run_narrow(op, elt, inputs, narrow_in, outs, optional=(), attrs=""):
    """seq.<op> on `inputs` (f32 arrays; those flagged in `narrow_in` are
    rounded to `elt` inside the graph) with results `outs` (shape, dtype
    name) where "n" means `elt` (widened back to f32 for the result file).
    `optional` is a list of (keyword, input index)."""
    args, body, names, in_types = [], [], [], []
    for i, (a, narrow) in enumerate(zip(inputs, narrow_in)):
        t = mlir_type(list(a.shape))
        args.append((f"a{i}", t))
        if narrow:
            tn = mlir_type(list(a.shape), elt)
            body.append(f"  %n{i} = arith.truncf %a{i} : {t} to {tn}")
            names.append(f"%n{i}")
            in_types.append(tn)
        else:
            names.append(f"%a{i}")
            in_types.append(t)
    optional_idx = {i for _, i in optional}
    required = [n for i, n in enumerate(names) if i not in optional_idx]
    req_types = [t for i, t in enumerate(in_types) if i not in optional_idx]
    opt_types = [in_types[i] for _, i in optional]
    out_types = [mlir_type(list(s), elt if e == "n" else e) for s, e in outs]
    body.append(seq_op("r", op, required, [(kw, [names[i]]) for kw, i in optional], attrs,
                       req_types + opt_types, out_types))
    results = []
    for j, ((s, e), t) in enumerate(zip(outs, out_types)):
        v = f"%r#{j}" if len(outs) > 1 else "%r"
        if e == "n":
            body.append(f"  %w{j} = arith.extf {v} : {t} to {mlir_type(list(s))}")
            results.append((f"%w{j}", mlir_type(list(s))))
        else:
            results.append((v, t))
    return run_seqc(func(args, body, results), inputs, tol=2e-2)


def case_conv(elt):
    r = rng(1)
    B, T, D, W = 2, 37, 19, 4
    x = f32(r.standard_normal((B, T, D)))
    w = f32(r.standard_normal((D, W)))
    b = f32(r.standard_normal(D))
    s0 = f32(r.standard_normal((B, D, W - 1)))
    y, last = run_narrow("causal_conv1d", elt, [x, w, b, s0], [True, True, True, False],
                         [((B, T, D), "n"), ((B, D, W - 1), "f32")],
                         optional=[("bias", 2), ("init", 3)],
                         attrs="activation = #seq.activation<silu>")
    rd = ROUND[elt]
    ry, rl = causal_conv1d(rd(x), rd(w), rd(b), s0, "silu")
    check(f"causal_conv1d {elt} y", y, ry)
    check(f"causal_conv1d {elt} last", last, rl)


def case_mask(elt):
    la = f32(rng(2).uniform(-1.0, 0.0, (2, 33)))
    (L,) = run_narrow("semiseparable_mask", elt, [la], [True], [((2, 33, 33), "n")])
    check(f"semiseparable_mask {elt}", L, semiseparable_mask(ROUND[elt](la)))


def case_route(elt):
    logits = f32(rng(3).standard_normal((29, 6)))
    w, idx, _ = run_narrow("route", elt, [logits], [True],
                           [((29, 2), "n"), ((29, 2), "i32"), ((), "f32")], attrs="k = 2 : i64")
    rw, ridx, _ = route(ROUND[elt](logits), 2)
    c.expect(f"route {elt}: the same experts", np.array_equal(idx, ridx))
    check(f"route {elt} weights", w, rw)


def case_random_features(elt):
    r = rng(4)
    x = f32(0.3 * r.standard_normal((2, 11, 8)))
    omega = f32(r.standard_normal((8, 24)))
    (phi,) = run_narrow("random_features", elt, [x, omega], [True, True], [((2, 11, 24), "n")],
                        attrs="kind = #seq.random_features<positive>")
    rd = ROUND[elt]
    check(f"random_features {elt}", phi, random_features(rd(x), rd(omega)))


def case_linear_scan(elt):
    r = rng(5)
    a = f32(r.uniform(0.8, 1.0, (2, 90, 21)))
    b = f32(r.standard_normal((2, 90, 21)))
    h, last = run_narrow("linear_scan", elt, [a, b], [True, True],
                         [((2, 90, 21), "n"), ((2, 21), "f32")])
    rd = ROUND[elt]
    rh, rl = linear_scan(rd(a), rd(b))
    check(f"linear_scan {elt} h", h, rh)
    check(f"linear_scan {elt} last", last, rl)


def case_ssd(elt, T):
    """Chunked for long T, the recurrence for short T, from an initial
    state."""
    r = rng(6 + T)
    B, H, P, N = 1, 4, 12, 16
    x = f32(r.standard_normal((B, T, H, P)))
    dt = f32(r.uniform(-3, 0.5, (B, T, H)))
    A = f32(-np.exp(r.uniform(-1, 1, H)))
    Bm = f32(r.standard_normal((B, T, 2, N)))
    Cm = f32(r.standard_normal((B, T, 2, N)))
    D = f32(r.standard_normal(H))
    h0 = f32(r.standard_normal((B, H, P, N)))
    y, last = run_narrow("ssd", elt, [x, dt, A, Bm, Cm, D, h0],
                         [True, True, False, True, True, False, False],
                         [((B, T, H, P), "n"), ((B, H, P, N), "f32")],
                         optional=[("skip", 5), ("init", 6)], attrs="dt_softplus = true")
    rd = ROUND[elt]
    ry, rl = ssd(rd(x), rd(dt), A, rd(Bm), rd(Cm), D=D, h0=h0, softplus_dt=True)
    tag = f"ssd {elt} T={T}"
    check(tag + " y", y, ry)
    check(tag + " last", last, rl)


def case_linear_attention(elt, T, decay_rank, causal, normalize):
    r = rng(7 + T)
    B, H, K, V = 2, 2, 8, 10
    q = f32(r.standard_normal((B, T, H, K)))
    k = f32(r.standard_normal((B, T, H, K)))
    v = f32(r.standard_normal((B, T, H, V)))
    shape = {3: (B, T, H), 4: (B, T, H, K)}.get(decay_rank)
    inputs, narrow, optional = [q, k, v], [True] * 3, []
    g = None
    if shape:
        g = f32(r.uniform(-0.3, 0.0, shape))
        inputs.append(g)
        narrow.append(True)
        optional.append(("decay", 3))
    attrs = (f"feature_map = #seq.feature_map<elu_plus_one>, causal = {str(causal).lower()}, "
             f"normalize = {str(normalize).lower()}")
    o, last = run_narrow("linear_attention", elt, inputs, narrow,
                         [((B, T, H, V), "n"), ((B, H, K, V), "f32")], optional=optional,
                         attrs=attrs)
    rd = ROUND[elt]
    ro, rl = linear_attention(rd(q), rd(k), rd(v), decay=rd(g) if g is not None else None,
                              feature="elu_plus_one", causal=causal, normalize=normalize)
    tag = f"linear_attention {elt} T={T} decay={decay_rank} causal={causal} norm={normalize}"
    check(tag + " o", o, ro)
    check(tag + " last", last, rl)


for elt in ("bf16", "f16"):
    c.run(f"causal_conv1d {elt}", lambda: case_conv(elt))
    c.run(f"semiseparable_mask {elt}", lambda: case_mask(elt))
    c.run(f"route {elt}", lambda: case_route(elt))
    c.run(f"random_features {elt}", lambda: case_random_features(elt))
    c.run(f"linear_scan {elt}", lambda: case_linear_scan(elt))
    c.run(f"ssd {elt} chunked", lambda: case_ssd(elt, 70))
    c.run(f"ssd {elt} recurrent", lambda: case_ssd(elt, 5))
    c.run(f"linear_attention {elt} chunked normalized",
          lambda: case_linear_attention(elt, 70, 3, True, True))
    c.run(f"linear_attention {elt} per-key recurrent",
          lambda: case_linear_attention(elt, 40, 4, True, False))
    c.run(f"linear_attention {elt} non-causal",
          lambda: case_linear_attention(elt, 33, 0, False, True))
c.finish()
