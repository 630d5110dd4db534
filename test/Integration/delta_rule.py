# seq.delta_rule against float64: DeltaNet (no decay), a decay per head, Gated
# DeltaNet (B x T x HV) and KDA (B x T x HV x K), with and without init and
# qk_l2norm, scale, grouped value heads (HV = 2H, 4H), odd K and V, K = V = 64,
# T = 1 decodes, chunk-sized T with partial last chunks, numerics stress
# (betas in (0, 2), unnormalized keys with beta |k|^2 up to 2 and, over a short
# T, up to 3, decays down to exp(-20) per step, T = 2048 and 16384), the state
# carried in two pieces, one bf16 case, and the identity with the generalized
# rule (references only).
# RUN: %python %s
import numpy as np
from refs import delta_rule, generalized_delta_rule
from seqc_testing import (Checker, bf16, f32, func, growing_log_decays, mild_log_decays,
                          mlir_type, rel_rms, rng, run_aot, run_seqc, seq_op, steep_log_decays,
                          type_of)

c = Checker()


def make(Bs, T, H, HV, K, V, decay_rank, seed, l2norm=False, knorm=(0.5, 1.5), bk=(0.05, 1.95),
         g_range=(0.01, 0.5), g_floor=0.0, g_fn=None):
    """Inputs of one case. With qk_l2norm, q and k are standard normal * 0.5
    and beta is uniform in `bk`. Without it, each key has a norm uniform in
    `knorm` and beta_t = c_t / |k_t|^2 with c_t uniform in `bk`, so that
    beta |k|^2 (the size of the update, < 2 for a stable recurrence) is
    controlled. g is -uniform(g_range); `g_floor` is the fraction of steps
    whose g is exactly -g_range[1]. `g_fn(r, shape)`, when given, makes g."""
    r = rng(seed)
    v = dict(q=f32(r.standard_normal((Bs, T, H, K)) * 0.5),
             k=r.standard_normal((Bs, T, H, K)),
             v=f32(r.standard_normal((Bs, T, HV, V))),
             S0=f32(r.standard_normal((Bs, HV, K, V)) * 0.5))
    cb = r.uniform(bk[0], bk[1], (Bs, T, HV))
    if l2norm:
        v["k"] = f32(v["k"] * 0.5)
        v["beta"] = f32(cb)
    else:
        n = r.uniform(knorm[0], knorm[1], (Bs, T, H, 1))
        v["k"] = f32(v["k"] / np.linalg.norm(v["k"], axis=-1, keepdims=True) * n)
        kk = np.sum(np.asarray(v["k"], np.float64) ** 2, axis=-1)  # B T H
        v["beta"] = f32(cb / kk[:, :, np.arange(HV) // (HV // H)])
    shape = {1: (HV,), 3: (Bs, T, HV), 4: (Bs, T, HV, K)}.get(decay_rank)
    if shape:
        g = -r.uniform(g_range[0], g_range[1], shape)
        if g_floor:
            g = np.where(r.uniform(0, 1, shape) < g_floor, -g_range[1], g)
        v["g"] = f32(g_fn(r, shape) if g_fn else g)
    return v


def graph(v, use_decay, use_init, attrs, prefix="", init_from=None):
    req = ("q", "k", "v", "beta")
    args = [(prefix + n, type_of(v[n])) for n in req]
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
    Bs, T, HV, V = v["v"].shape
    out = [mlir_type((Bs, T, HV, V)), type_of(v["S0"])]
    line = seq_op(prefix + "r", "delta_rule", ["%" + prefix + n for n in req], opt, attrs, tys,
                  out)
    return args, line, out


def attr_text(l2norm, scale, eps=None, chunk=0):
    attrs = [f"chunk_size = {chunk} : i64"] if chunk else []
    if l2norm:
        attrs.append("qk_l2norm = true")
    if scale != 1.0:
        attrs.append(f"scale = {scale!r} : f32")
    if eps is not None:
        attrs.append(f"eps = {eps!r} : f32")
    return ", ".join(attrs)


def options(kw):
    """A case's extra options for its tag (functions by name)."""
    return "".join(f" {k}={getattr(v, '__name__', v)}" for k, v in kw.items())


def case(Bs, T, H, HV, K, V, decay_rank=0, init=False, l2norm=False, scale=1.0, seed=0,
         eps=None, chunk=0, **kw):
    scale = float(np.float32(scale))
    v = make(Bs, T, H, HV, K, V, decay_rank, seed, l2norm=l2norm, **kw)
    args, line, out = graph(v, decay_rank > 0, init, attr_text(l2norm, scale, eps, chunk))
    o, last = run_seqc(func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])]),
                       [v[n] for n, _ in args])
    ro, rl = delta_rule(v["q"], v["k"], v["v"], v["beta"], v.get("g"),
                        v["S0"] if init else None, l2norm, scale,
                        1e-6 if eps is None else eps)
    tag = (f"B={Bs} T={T} H={H} HV={HV} K={K} V={V} decay={decay_rank} init={init} "
           f"l2norm={l2norm} scale={scale:.4g}{options(kw)}")
    c.close("o " + tag, o, ro)
    c.close("last " + tag, last, rl)


def aot_case(cpu, T, K, V, decay_rank, seed=0, **kw):
    """The recurrence through an AOT library for `cpu` (strict, no fallback:
    that level's vector width and register file, whatever the host's), the
    recurrent plan pinned, against float64."""
    v = make(1, T, 2, 2, K, V, decay_rank, seed, l2norm=True, **kw)
    attrs = attr_text(True, K ** -0.5) + ", seq.plan = #seq.plan<recurrent>"
    args, line, out = graph(v, decay_rank > 0, True, attrs)
    o, last = run_aot(func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])]),
                      [v[n] for n, _ in args], cpu)
    ro, rl = delta_rule(v["q"], v["k"], v["v"], v["beta"], v.get("g"), v["S0"], True,
                        float(np.float32(K ** -0.5)))
    tag = f"AOT {cpu} T={T} K={K} V={V} decay={decay_rank}{options(kw)}"
    c.close("o " + tag, o, ro)
    c.close("last " + tag, last, rl)


def pieces(Bs, T, H, HV, K, V, decay_rank, split, l2norm=True, seed=41):
    v = make(Bs, T, H, HV, K, V, decay_rank, seed, l2norm=l2norm)
    halves = []
    for sl in (slice(0, split), slice(split, T)):
        w = dict(v)
        for n in ("q", "k", "v", "beta"):
            w[n] = v[n][:, sl]
        if decay_rank >= 3:
            w["g"] = v["g"][:, sl]
        halves.append(w)
    attrs = attr_text(l2norm, 1.0)
    a1, l1, o1 = graph(halves[0], decay_rank > 0, True, attrs, prefix="p")
    a2, l2, o2 = graph(halves[1], decay_rank > 0, False, attrs, prefix="q", init_from="%pr#1")
    mlir = func(a1 + a2, [l1, l2], [("%pr#0", o1[0]), ("%qr#0", o2[0]), ("%qr#1", o2[1])])
    inputs = [halves[0][n[1:]] for n, _ in a1] + [halves[1][n[1:]] for n, _ in a2]
    o1v, o2v, last = run_seqc(mlir, inputs)
    ro, rl = delta_rule(v["q"], v["k"], v["v"], v["beta"], v.get("g"), v["S0"], l2norm)
    tag = f"T={T} HV={HV} decay={decay_rank} split={split}"
    c.close("pieces o " + tag, np.concatenate([o1v, o2v], axis=1), ro)
    c.close("pieces last " + tag, last, rl)


def identity(seed=50):
    """References only: the delta rule is the generalized rule with
    k -> beta k, a = alpha * k, b = -beta k (v kept), on the value heads'
    expanded (and normalized) keys."""
    Bs, T, H, HV, K, V = 2, 21, 2, 4, 6, 5
    v = make(Bs, T, H, HV, K, V, 4, seed, l2norm=True)
    ro, rl = delta_rule(v["q"], v["k"], v["v"], v["beta"], v["g"], v["S0"], True, 0.3)
    heads = np.arange(HV) // (HV // H)
    unit = lambda x: x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + 1e-6)
    q = unit(np.asarray(v["q"], np.float64))[:, :, heads]
    k = unit(np.asarray(v["k"], np.float64))[:, :, heads]
    beta = np.asarray(v["beta"], np.float64)[..., None]
    g = np.asarray(v["g"], np.float64)
    go, gl = generalized_delta_rule(q, beta * k, v["v"], np.exp(g) * k, -beta * k, g, v["S0"],
                                    0.3)
    c.close("identity o (delta rule = generalized rule)", go, ro, tol=1e-12)
    c.close("identity last (delta rule = generalized rule)", gl, rl, tol=1e-12)


def case_bf16(T=70, seed=60):
    """bf16 q, k, v, beta and g (rounded inside the graph), f32 init and
    state; o in bf16. Relative RMS error <= 1e-2 against float64 on the
    rounded inputs."""
    Bs, H, HV, K, V = 1, 1, 2, 16, 16
    v = make(Bs, T, H, HV, K, V, 3, seed, l2norm=True)
    names = ("q", "k", "v", "beta", "g", "S0")
    args = [(n, type_of(v[n])) for n in names]
    body, tys = [], []
    for n in names[:-1]:
        tb = mlir_type(v[n].shape, "bf16")
        body.append(f"  %{n}n = arith.truncf %{n} : {type_of(v[n])} to {tb}")
        tys.append(tb)
    tys.append(type_of(v["S0"]))
    ob = mlir_type((Bs, T, HV, V), "bf16")
    body.append(seq_op("r", "delta_rule", ["%qn", "%kn", "%vn", "%betan"],
                       [("decay", ["%gn"]), ("init", ["%S0"])], "qk_l2norm = true", tys,
                       [ob, type_of(v["S0"])]))
    body.append(f"  %o = arith.extf %r#0 : {ob} to {mlir_type((Bs, T, HV, V))}")
    o, last = run_seqc(func(args, body, [("%o", mlir_type((Bs, T, HV, V))),
                                         ("%r#1", type_of(v["S0"]))]),
                       [v[n] for n in names], tol=2e-2)
    ro, rl = delta_rule(bf16(v["q"]), bf16(v["k"]), bf16(v["v"]), bf16(v["beta"]), bf16(v["g"]),
                        v["S0"], True)
    for name, got, ref in (("o", o, ro), ("last", last, rl)):
        err = rel_rms(got, ref)
        c.expect(f"bf16 T={T} {name}: relative RMS {err:.2e} <= 1e-2", err <= 1e-2)


c.run("identity with the generalized rule", identity)
# DeltaNet, the three decay shapes, init, qk_l2norm, scale, grouped heads.
c.run("DeltaNet", lambda: case(2, 16, 2, 2, 8, 8))
c.run("DeltaNet l2norm init", lambda: case(1, 23, 2, 2, 12, 20, init=True, l2norm=True,
                                           scale=12 ** -0.5, seed=1))
c.run("decay HV", lambda: case(2, 19, 1, 2, 5, 7, decay_rank=1, init=True, l2norm=True, seed=2))
c.run("Gated DeltaNet HV=4H", lambda: case(2, 21, 2, 8, 8, 6, decay_rank=3, l2norm=True,
                                           scale=8 ** -0.5, seed=3))
c.run("KDA HV=4H init", lambda: case(1, 17, 1, 4, 6, 5, decay_rank=4, init=True, l2norm=True,
                                     seed=4))
c.run("KDA no l2norm", lambda: case(2, 13, 2, 2, 4, 4, decay_rank=4, scale=0.7, seed=5))
c.run("Gated no l2norm init", lambda: case(1, 15, 2, 4, 5, 7, decay_rank=3, init=True, seed=6))
# Decodes: T = 1 from a state.
c.run("decode gated", lambda: case(3, 1, 2, 4, 8, 8, decay_rank=3, init=True, l2norm=True,
                                   scale=8 ** -0.5, seed=7))
c.run("decode KDA", lambda: case(2, 1, 1, 2, 12, 20, decay_rank=4, init=True, seed=8))
# Chunk-sized T (chunks of 32 or 64 with a partial last one), K = V = 64.
c.run("K=V=64 gated", lambda: case(1, 70, 1, 2, 64, 64, decay_rank=3, init=True, l2norm=True,
                                   scale=0.125, seed=10))
c.run("chunks gated T=100", lambda: case(1, 100, 2, 2, 32, 32, decay_rank=3, init=True,
                                         l2norm=True, seed=11))
c.run("chunks DeltaNet T=129", lambda: case(1, 129, 1, 2, 16, 24, l2norm=True, seed=12))
c.run("chunks KDA T=200", lambda: case(1, 200, 1, 1, 20, 20, decay_rank=4, init=True,
                                       l2norm=True, scale=20 ** -0.5, seed=13))
c.run("chunks decay HV T=100", lambda: case(2, 100, 1, 2, 16, 16, decay_rank=1, seed=14))
# The CPU's strategy takes the recurrence for states that fit in half of L1
# (all of the above): chunk_size asks for its chunked form (and the GPU's
# 16-step chunks), over whole and partial chunks and steep decays.
c.run("chunk_size 16 gated T=100", lambda: case(1, 100, 2, 2, 32, 32, decay_rank=3, init=True,
                                                l2norm=True, seed=11, chunk=16))
c.run("chunk_size 16 DeltaNet T=129", lambda: case(1, 129, 1, 2, 16, 24, l2norm=True, seed=12,
                                                   chunk=16))
c.run("chunk_size 16 decay exp(-20)", lambda: case(1, 100, 1, 2, 16, 16, decay_rank=3,
                                                   init=True, l2norm=True,
                                                   g_range=(0.01, 20.0), g_floor=0.1, seed=23,
                                                   chunk=16))
# Numerics stress: unnormalized keys of norm 1..3 with beta |k|^2 in (0, 2)
# (betas themselves in (0, 2) under qk_l2norm above); beta |k|^2 up to 3 (an
# expansive step) over a short T; decays down to exp(-20) per step, some
# steps exactly -20.
c.run("stress keys gated", lambda: case(1, 100, 1, 2, 16, 16, decay_rank=3, init=True,
                                        knorm=(1.0, 3.0), seed=20))
c.run("stress keys DeltaNet", lambda: case(1, 90, 1, 1, 12, 20, knorm=(1.0, 3.0), seed=21))
c.run("stress expansive", lambda: case(1, 12, 1, 2, 8, 8, init=True, knorm=(1.0, 3.0),
                                       bk=(0.05, 3.0), seed=22))
c.run("stress decay exp(-20) gated", lambda: case(1, 100, 1, 2, 16, 16, decay_rank=3, init=True,
                                                  l2norm=True, g_range=(0.01, 20.0),
                                                  g_floor=0.1, seed=23))
c.run("stress decay exp(-20) KDA", lambda: case(1, 100, 1, 1, 16, 16, decay_rank=4, init=True,
                                                l2norm=True, g_range=(0.01, 20.0), g_floor=0.1,
                                                seed=24))
# The CPU defers the decay (S = c U): decays that take c out of
# [2^-32, 2^32] within a step or two (exp(-80), a constant exp(-12) per
# head, growth) fold it back; mild ones over a long T never do (c down to
# about 2^-26 at the most).
for rank, name in ((3, "gated"), (4, "KDA")):
    c.run(f"decays exp(-80) {name}", lambda: case(1, 60, 1, 2, 16, 24, decay_rank=rank,
                                                   init=True, l2norm=True,
                                                   g_fn=steep_log_decays, seed=30))
    c.run(f"growth {name}", lambda: case(1, 50, 1, 1, 16, 16, decay_rank=rank, init=True,
                                         l2norm=True, g_fn=growing_log_decays, seed=32))
    c.run(f"mild decays T=3000 {name}", lambda: case(1, 3000, 1, 1, 64, 64, decay_rank=rank,
                                                     init=True, l2norm=True,
                                                     g_fn=mild_log_decays, seed=33))
c.run("decay HV exp(-12)", lambda: case(1, 30, 1, 2, 8, 12, decay_rank=1, init=True,
                                        l2norm=True, g_fn=lambda r, shape: np.full(shape, -12.0),
                                        seed=36))
# AVX2's 8 lanes and 16 registers (three blocks of columns at V = 64) on
# any host; ragged K and V.
for rank in (0, 3, 4):
    c.run(f"AOT x86-64-v3 decay={rank}", lambda: aot_case("x86-64-v3", 150, 64, 64, rank,
                                                         seed=34))
c.run("AOT x86-64-v3 K=20 V=70 steep", lambda: aot_case("x86-64-v3", 90, 20, 70, 4, seed=35,
                                                        g_fn=steep_log_decays))
c.run("long T=2048", lambda: case(1, 2048, 1, 1, 8, 8, decay_rank=3, init=True, seed=25))
c.run("long T=16384", lambda: case(1, 16384, 1, 1, 4, 4, decay_rank=3, l2norm=True, seed=26))
# The state carried across two calls, split inside a chunk.
c.run("pieces DeltaNet", lambda: pieces(1, 90, 1, 2, 8, 8, 0, 37))
c.run("pieces gated", lambda: pieces(2, 90, 2, 4, 8, 6, 3, 37))
c.run("pieces KDA", lambda: pieces(1, 90, 1, 1, 12, 10, 4, 37, l2norm=False))
# eps = 0 with a partial last chunk: padding rows must not divide by zero.
c.run("l2norm eps=0 partial chunk", lambda: case(1, 40, 1, 2, 8, 8, decay_rank=3, init=True,
                                                 l2norm=True, eps=0.0, seed=27))
c.run("bf16 gated", case_bf16)
c.finish()
