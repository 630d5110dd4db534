# seq.ssd against a float64 recurrence and against the quadratic form
# Y = (L o C B^T)(dt o X) (an independent check of the reference itself):
# G > 1, T = 1, odd sizes, every optional operand, chunk_size hints (which
# must not change results), dynamic T and the carried state in two pieces.
# RUN: %python %s
import numpy as np
from refs import semiseparable_mask, softplus, ssd
from seqc_testing import Checker, f32, func, mlir_type, rng, run_seqc, seq_op, type_of

c = Checker()


def make(Bs, T, H, P, N, G, seed):
    r = rng(seed)
    return dict(
        x=f32(r.standard_normal((Bs, T, H, P))),
        dt=f32(r.uniform(-3.0, 0.5, (Bs, T, H))),
        A=f32(-np.exp(r.uniform(-1.0, 1.0, H))),
        B=f32(r.standard_normal((Bs, T, G, N))),
        C=f32(r.standard_normal((Bs, T, G, N))),
        D=f32(r.standard_normal(H)),
        z=f32(r.standard_normal((Bs, T, H, P))),
        db=f32(r.uniform(-0.5, 0.5, H)),
        h0=f32(r.standard_normal((Bs, H, P, N))),
    )


OPTIONAL = [("skip", "D"), ("gate", "z"), ("dt_bias", "db"), ("init", "h0")]
REQUIRED = ["x", "dt", "A", "B", "C"]


def graph(v, use, attrs, prefix="", init_from=None, dynamic_t=False):
    def ty(n):
        shape = list(v[n].shape)
        if dynamic_t and n in ("x", "dt", "B", "C", "z"):
            shape[1] = -1
        return mlir_type(shape)
    args = [(prefix + n, ty(n)) for n in REQUIRED]
    opt = []
    for kw, n in OPTIONAL:
        if n not in use:
            continue
        if kw == "init" and init_from:
            opt.append((kw, [init_from]))
            continue
        args.append((prefix + n, ty(n)))
        opt.append((kw, ["%" + prefix + n]))
    tys = [t for _, t in args] + ([type_of(v["h0"])] if init_from else [])
    out = [ty("x"), type_of(v["h0"])]
    return args, seq_op(prefix + "r", "ssd", ["%" + prefix + n for n in REQUIRED], opt, attrs, tys, out), out


def case(Bs, T, H, P, N, G, use=(), softplus_dt=False, chunk=0, dynamic_t=False, seed=0,
         skip_hp=False, dt_range=None, plan=None):
    v = make(Bs, T, H, P, N, G, seed)
    if not softplus_dt and dt_range is None:  # the given dt must already be positive
        v["dt"] = f32(softplus(v["dt"]))
    if skip_hp:  # mamba_ssm's D_has_hdim
        v["D"] = f32(rng(seed + 100).standard_normal((H, P)))
    lo, hi = dt_range if dt_range else (0.0, float("inf"))
    attrs = ", ".join((["dt_softplus = true"] if softplus_dt else []) +
                      ([f"chunk_size = {chunk} : i64"] if chunk else []) +
                      ([f"dt_min = {lo:e} : f32"] if dt_range and lo != 0.0 else []) +
                      ([f"dt_max = {hi:e} : f32"] if dt_range and hi != float("inf") else []) +
                      ([f"seq.plan = #seq.plan<{plan}>"] if plan else []))
    args, line, out = graph(v, use, attrs, dynamic_t=dynamic_t)
    y, last = run_seqc(func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])]),
                       [v[n] for n, _ in args])
    get = lambda n: v[n] if n in use else None
    ry, rl = ssd(v["x"], v["dt"], v["A"], v["B"], v["C"], get("D"), get("z"), get("db"),
                 get("h0"), softplus_dt, lo, hi)
    tag = (f"B={Bs} T={T} H={H} P={P} N={N} G={G} opt={','.join(use)} chunk={chunk} "
           f"dynT={dynamic_t} skipHP={skip_hp} dt_range={dt_range} plan={plan}")
    c.close("y " + tag, y, ry)
    c.close("last " + tag, last, rl)


def quadratic_form_agrees(seed=21):
    """The recurrence reference equals the SSD matrix form (SPEC 2.4)."""
    Bs, T, H, P, N, G = 1, 24, 2, 3, 4, 1
    v = make(Bs, T, H, P, N, G, seed)
    ry, _ = ssd(v["x"], v["dt"], v["A"], v["B"], v["C"])
    dt = v["dt"].astype(np.float64)
    for h in range(H):
        L = semiseparable_mask(dt[0, :, h] * v["A"][h])
        CB = v["C"][0, :, 0].astype(np.float64) @ v["B"][0, :, 0].astype(np.float64).T
        Y = (L * CB) @ (dt[0, :, h, None] * v["x"][0, :, h])
        c.close(f"quadratic form head {h}", Y, ry[0, :, h], tol=1e-9)


def pieces(Bs, T, H, P, N, G, split, seed=31):
    v = make(Bs, T, H, P, N, G, seed)
    use = ("D", "z", "db")
    halves = []
    for sl in (slice(0, split), slice(split, T)):
        w = dict(v)
        for n in ("x", "dt", "B", "C", "z"):
            w[n] = v[n][:, sl]
        halves.append(w)
    a1, l1, o1 = graph(halves[0], use, "dt_softplus = true", prefix="p")
    a2, l2, o2 = graph(halves[1], use + ("h0",), "dt_softplus = true", prefix="q", init_from="%pr#1")
    mlir = func(a1 + a2, [l1, l2], [("%pr#0", o1[0]), ("%qr#0", o2[0]), ("%qr#1", o2[1])])
    inputs = [halves[0][n[1:]] for n, _ in a1] + [halves[1][n[1:]] for n, _ in a2]
    y1, y2, last = run_seqc(mlir, inputs)
    ry, rl = ssd(v["x"], v["dt"], v["A"], v["B"], v["C"], v["D"], v["z"], v["db"], None, True)
    c.close(f"pieces y split={split}", np.concatenate([y1, y2], axis=1), ry)
    c.close(f"pieces last split={split}", last, rl)


c.run("plain", lambda: case(2, 16, 4, 8, 6, 1))
c.run("all optional", lambda: case(2, 21, 6, 5, 7, 3, use=("D", "z", "db", "h0"), softplus_dt=True, seed=1))
c.run("T=1 decode", lambda: case(1, 1, 4, 8, 16, 2, use=("D", "z", "db", "h0"), softplus_dt=True, seed=2))
c.run("odd chunks", lambda: case(1, 37, 3, 4, 5, 1, use=("D",), chunk=8, seed=3))
c.run("chunk > T", lambda: case(2, 10, 2, 3, 4, 2, use=("db",), softplus_dt=True, chunk=64, seed=4))
c.run("chunk_size far beyond any stack (taken as 256)",
      lambda: case(1, 700, 2, 16, 32, 1, chunk=1 << 20, seed=12))
c.run("G = H", lambda: case(1, 13, 4, 2, 3, 4, use=("z",), seed=5))
c.run("dynamic T", lambda: case(2, 17, 2, 4, 4, 1, use=("D", "h0"), dynamic_t=True, seed=6))
c.run("quadratic form", quadratic_form_agrees)
# mamba_ssm parity: D per head and channel (D_has_hdim) and dt_limit, on the
# chunked and the recurrent kernels; dt_min alone also lifts a negative dt.
for plan in ("chunked, 16", "recurrent"):
    c.run(f"skip H x P {plan}", lambda plan=plan: case(
        2, 40, 3, 5, 6, 1, use=("D", "z", "h0"), softplus_dt=True, skip_hp=True, plan=plan, seed=30))
    c.run(f"dt_limit {plan}", lambda plan=plan: case(
        1, 45, 2, 4, 8, 2, use=("D", "db"), softplus_dt=True, dt_range=(0.05, 0.4), plan=plan,
        seed=31))
    c.run(f"dt_min only {plan}", lambda plan=plan: case(
        1, 33, 2, 3, 4, 1, use=("D",), dt_range=(0.01, float("inf")), plan=plan, seed=32))
    c.run(f"dt_max only, skip H x P {plan}", lambda plan=plan: case(
        2, 20, 4, 8, 4, 2, use=("D", "db"), softplus_dt=True, skip_hp=True,
        dt_range=(0.0, 0.2), plan=plan, seed=33))
c.run("pieces", lambda: pieces(2, 29, 4, 4, 6, 2, 12))
c.run("pieces decode", lambda: pieces(1, 10, 2, 4, 4, 1, 9))
# Several chunks and P / N tiles in the GPU kernels (64-step chunks, 32-wide
# tiles), partial at every edge.
c.run("chunks + tiles", lambda: case(1, 150, 2, 40, 70, 2, use=("D", "z", "db", "h0"),
                                     softplus_dt=True, seed=20))
c.run("long", lambda: case(1, 4096, 2, 2, 4, 1, use=("D",), softplus_dt=True, seed=7))
c.finish()
# The GPU kernels follow the plan's chunk size (16, 32, 64 steps), and short
# sequences are the recurrence there too (a thread per (batch, head, p)).
c.run("chunk_size 16", lambda: case(1, 70, 2, 20, 24, 1, use=("D", "h0"), chunk=16, seed=8))
c.run("chunk_size 32", lambda: case(2, 45, 2, 8, 40, 2, use=("z", "db"), softplus_dt=True,
                                    chunk=32, seed=9))
c.run("short recurrent", lambda: case(2, 9, 4, 33, 20, 2, use=("D", "z", "db", "h0"),
                                      softplus_dt=True, seed=10))
