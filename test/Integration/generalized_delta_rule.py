# seq.generalized_delta_rule against float64: RWKV-7-like inputs (a = -kappa^,
# b = kappa^ * a_rwkv, g = -exp(w)) with and without the per-key decay, with
# init, scale, odd K and V, T = 1 decodes, chunk-sized T, generic small random
# a and b over short T, the state carried in two pieces, and one bf16 case.
# RUN: %python %s
import numpy as np
from refs import generalized_delta_rule
from seqc_testing import (Checker, bf16, f32, func, growing_log_decays, mlir_type, rel_rms, rng,
                          run_aot, run_seqc, seq_op, steep_log_decays, type_of)

c = Checker()
REQ = ("q", "k", "v", "a", "b")


def make(Bs, T, H, K, V, decay, seed, generic=False, g_fn=None):
    """RWKV-7-like: kappa^ L2-normalized over K, a_rwkv in (0, 1), so that
    diag(w) + b a^T = diag(w) - (a_rwkv kappa^) kappa^T keeps the state
    bounded; g = -exp(w) in about [-1.5, -0.1]. `generic`: a and b standard
    normal * 0.3 (for short T). `g_fn(r, shape)`, when given, makes g."""
    r = rng(seed)
    v = dict(q=f32(r.standard_normal((Bs, T, H, K)) * 0.5),
             k=f32(r.standard_normal((Bs, T, H, K)) * K ** -0.5),
             v=f32(r.standard_normal((Bs, T, H, V))),
             S0=f32(r.standard_normal((Bs, H, K, V)) * 0.5))
    if generic:
        v["a"] = f32(r.standard_normal((Bs, T, H, K)) * 0.3)
        v["b"] = f32(r.standard_normal((Bs, T, H, K)) * 0.3)
    else:
        kap = r.standard_normal((Bs, T, H, K))
        kap /= np.linalg.norm(kap, axis=-1, keepdims=True)
        a_rwkv = 1.0 / (1.0 + np.exp(-r.standard_normal((Bs, T, H, K))))
        v["a"] = f32(-kap)
        v["b"] = f32(kap * a_rwkv)
    if decay:
        shape = (Bs, T, H, K)
        v["g"] = f32(g_fn(r, shape) if g_fn else -np.exp(r.uniform(-2.3, 0.4, shape)))
    return v


def graph(v, use_decay, use_init, attrs, prefix="", init_from=None):
    args = [(prefix + n, type_of(v[n])) for n in REQ]
    opt = []
    if use_decay:
        args.append((prefix + "g", type_of(v["g"])))
        opt.append(("decay", ["%" + prefix + "g"]))
    if init_from:
        opt.append(("init", [init_from]))
    elif use_init:
        args.append((prefix + "S0", type_of(v["S0"])))
        opt.append(("init", ["%" + prefix + "S0"]))
    tys = [t for _, t in args] + ([type_of(v["S0"])] if init_from else [])
    out = [type_of(v["v"]), type_of(v["S0"])]
    line = seq_op(prefix + "r", "generalized_delta_rule", ["%" + prefix + n for n in REQ], opt,
                  attrs, tys, out)
    return args, line, out


def attr_text(scale):
    return f"scale = {scale!r} : f32" if scale != 1.0 else ""


def case(Bs, T, H, K, V, decay=False, init=False, scale=1.0, generic=False, seed=0, g_fn=None):
    scale = float(np.float32(scale))
    v = make(Bs, T, H, K, V, decay, seed, generic, g_fn)
    args, line, out = graph(v, decay, init, attr_text(scale))
    o, last = run_seqc(func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])]),
                       [v[n] for n, _ in args])
    ro, rl = generalized_delta_rule(*(v[n] for n in REQ), v.get("g"), v["S0"] if init else None,
                                    scale)
    tag = (f"B={Bs} T={T} H={H} K={K} V={V} decay={decay} init={init} scale={scale:.4g} "
           f"{'generic' if generic else 'rwkv7'}{' g=' + g_fn.__name__ if g_fn else ''}")
    c.close("o " + tag, o, ro)
    c.close("last " + tag, last, rl)


def aot_case(cpu, T, K, V, seed=0, g_fn=None):
    """The recurrence through an AOT library for `cpu` (strict, no fallback:
    that level's vector width and register file, whatever the host's)
    against float64."""
    v = make(1, T, 2, K, V, True, seed, g_fn=g_fn)
    args, line, out = graph(v, True, True, attr_text(0.25))
    o, last = run_aot(func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])]),
                      [v[n] for n, _ in args], cpu)
    ro, rl = generalized_delta_rule(*(v[n] for n in REQ), v["g"], v["S0"], 0.25)
    tag = f"AOT {cpu} T={T} K={K} V={V}{' g=' + g_fn.__name__ if g_fn else ''}"
    c.close("o " + tag, o, ro)
    c.close("last " + tag, last, rl)


def pieces(Bs, T, H, K, V, decay, split, seed=41):
    v = make(Bs, T, H, K, V, decay, seed)
    halves = []
    for sl in (slice(0, split), slice(split, T)):
        w = dict(v)
        for n in REQ + (("g",) if decay else ()):
            w[n] = v[n][:, sl]
        halves.append(w)
    a1, l1, o1 = graph(halves[0], decay, True, "", prefix="p")
    a2, l2, o2 = graph(halves[1], decay, False, "", prefix="q", init_from="%pr#1")
    mlir = func(a1 + a2, [l1, l2], [("%pr#0", o1[0]), ("%qr#0", o2[0]), ("%qr#1", o2[1])])
    inputs = [halves[0][n[1:]] for n, _ in a1] + [halves[1][n[1:]] for n, _ in a2]
    o1v, o2v, last = run_seqc(mlir, inputs)
    ro, rl = generalized_delta_rule(*(v[n] for n in REQ), v.get("g"), v["S0"])
    tag = f"T={T} decay={decay} split={split}"
    c.close("pieces o " + tag, np.concatenate([o1v, o2v], axis=1), ro)
    c.close("pieces last " + tag, last, rl)


def case_bf16(T=70, seed=60):
    """bf16 q, k, v, a, b and g (rounded inside the graph), f32 init and
    state; o in bf16. Relative RMS error <= 1e-2 against float64 on the
    rounded inputs."""
    Bs, H, K, V = 1, 2, 16, 16
    v = make(Bs, T, H, K, V, True, seed)
    names = REQ + ("g", "S0")
    args = [(n, type_of(v[n])) for n in names]
    body, tys = [], []
    for n in names[:-1]:
        tb = mlir_type(v[n].shape, "bf16")
        body.append(f"  %{n}n = arith.truncf %{n} : {type_of(v[n])} to {tb}")
        tys.append(tb)
    tys.append(type_of(v["S0"]))
    ob = mlir_type(v["v"].shape, "bf16")
    body.append(seq_op("r", "generalized_delta_rule", [f"%{n}n" for n in REQ],
                       [("decay", ["%gn"]), ("init", ["%S0"])], "", tys, [ob, type_of(v["S0"])]))
    body.append(f"  %o = arith.extf %r#0 : {ob} to {type_of(v['v'])}")
    o, last = run_seqc(func(args, body, [("%o", type_of(v["v"])), ("%r#1", type_of(v["S0"]))]),
                       [v[n] for n in names], tol=2e-2)
    ro, rl = generalized_delta_rule(*(bf16(v[n]) for n in REQ), bf16(v["g"]), v["S0"])
    for name, got, ref in (("o", o, ro), ("last", last, rl)):
        err = rel_rms(got, ref)
        c.expect(f"bf16 T={T} {name}: relative RMS {err:.2e} <= 1e-2", err <= 1e-2)


c.run("no decay", lambda: case(2, 16, 2, 8, 8, scale=8 ** -0.5))
c.run("decay", lambda: case(2, 19, 2, 8, 8, decay=True, seed=1))
c.run("decay init odd K V", lambda: case(1, 23, 3, 12, 20, decay=True, init=True, scale=0.3,
                                         seed=2))
c.run("no decay init K=5 V=7", lambda: case(2, 17, 1, 5, 7, init=True, seed=3))
c.run("generic decay init", lambda: case(2, 8, 2, 4, 6, decay=True, init=True, generic=True,
                                         seed=4))
c.run("generic no decay", lambda: case(1, 6, 2, 5, 3, generic=True, scale=0.5, seed=5))
c.run("decode", lambda: case(3, 1, 2, 8, 8, decay=True, init=True, scale=8 ** -0.5, seed=6))
c.run("decode no decay", lambda: case(1, 1, 2, 12, 20, init=True, seed=7))
# Chunk-sized T (chunks of 32 or 64 with a partial last one).
c.run("chunks T=100", lambda: case(1, 100, 2, 32, 32, decay=True, init=True, seed=10))
c.run("chunks T=129 no decay", lambda: case(1, 129, 1, 16, 24, seed=11))
c.run("chunks T=200", lambda: case(1, 200, 1, 20, 20, decay=True, scale=20 ** -0.5, seed=12))
# The CPU defers the decay (S = c U): steps of exp(-80) fold c back into
# the state; so do decays that grow it.
c.run("decays exp(-80)", lambda: case(1, 60, 2, 16, 24, decay=True, init=True,
                                      g_fn=steep_log_decays, seed=13))
c.run("growth", lambda: case(1, 50, 1, 16, 16, decay=True, init=True, g_fn=growing_log_decays,
                             seed=14))
# AVX2's 8 lanes and 16 registers (four blocks of columns at V = 64) on any
# host; ragged K and V.
c.run("AOT x86-64-v3", lambda: aot_case("x86-64-v3", 150, 64, 64, seed=15))
c.run("AOT x86-64-v3 K=20 V=70 steep", lambda: aot_case("x86-64-v3", 90, 20, 70, seed=16,
                                                        g_fn=steep_log_decays))
# The state carried across two calls, split inside a chunk.
c.run("pieces decay", lambda: pieces(1, 90, 2, 8, 8, True, 37))
c.run("pieces no decay", lambda: pieces(2, 50, 1, 6, 10, False, 21))
c.run("bf16 decay", case_bf16)
c.finish()
