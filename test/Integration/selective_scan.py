# seq.selective_scan against a float64 recurrence: both discretizations,
# softplus with its linear tail, every optional operand, G > 1, T = 1, odd
# sizes, A = 0 entries (the ZOH limit), the carried state in two pieces, and
# the CPU kernel's chunks and channel blocks.
# RUN: %python %s
import os
import subprocess
import tempfile

import numpy as np
from refs import selective_scan, softplus as softplus_fn
from seqc_testing import (SEQC_AOT_RUN, Checker, f32, func, rng, run_seqc, seq_op,
                          type_of)

c = Checker()


def make(Bs, T, D, N, G, seed):
    r = rng(seed)
    return dict(
        u=f32(r.standard_normal((Bs, T, D))),
        delta=f32(r.uniform(-2.0, 1.0, (Bs, T, D))),
        A=f32(-np.exp(r.uniform(-1.0, 1.0, (D, N)))),
        B=f32(r.standard_normal((Bs, T, G, N))),
        C=f32(r.standard_normal((Bs, T, G, N))),
        D=f32(r.standard_normal(D)),
        z=f32(r.standard_normal((Bs, T, D))),
        db=f32(r.uniform(-0.5, 0.5, D)),
        h0=f32(r.standard_normal((Bs, D, N))),
    )


OPTIONAL = [("skip", "D"), ("gate", "z"), ("delta_bias", "db"), ("init", "h0")]


def graph(v, use, attrs, name="main", prefix="", init_from=None):
    names = ["u", "delta", "A", "B", "C"]
    args = [(prefix + n, type_of(v[n])) for n in names]
    opt = []
    for kw, n in OPTIONAL:
        if n in use:
            if kw == "init" and init_from:
                opt.append((kw, [init_from]))
                continue
            args.append((prefix + n, type_of(v[n])))
            opt.append((kw, ["%" + prefix + n]))
    tys = [t for _, t in args]
    if init_from:
        tys.append(type_of(v["h0"]))
    out = [type_of(v["u"]), type_of(v["h0"])]
    line = seq_op(prefix + "r", "selective_scan", ["%" + prefix + n for n in names], opt, attrs, tys, out)
    return args, line, out


def case(Bs, T, D, N, G, use=(), softplus=False, zoh=False, zero_a=False, seed=0):
    v = make(Bs, T, D, N, G, seed)
    if not softplus:  # without softplus the given delta must already be positive
        v["delta"] = f32(softplus_fn(v["delta"]))
    if zero_a:
        v["A"][::3, ::2] = 0.0
    attrs = []
    if softplus:
        attrs.append("delta_softplus = true")
    if zoh:
        attrs.append("discretization = #seq.discretization<zoh>")
    args, line, out = graph(v, use, ", ".join(attrs))
    mlir = func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])])
    # The CPU kernel keeps a group's channels in whole vectors: grouped B/C
    # with D / G not a multiple of the widest vector (16 lanes) may decline.
    y, last = run_seqc(mlir, [v[n] for n, _ in args],
                       cpu_strict=G == 1 or (D // G) % 16 == 0)
    get = lambda n: v[n] if n in use else None
    ry, rl = selective_scan(v["u"], v["delta"], v["A"], v["B"], v["C"], get("D"), get("z"),
                            get("db"), get("h0"), softplus, zoh)
    tag = f"B={Bs} T={T} D={D} N={N} G={G} opt={','.join(use)} softplus={softplus} zoh={zoh} zeroA={zero_a}"
    c.close("y " + tag, y, ry)
    c.close("last " + tag, last, rl)


def pieces(Bs, T, D, N, G, split, zoh=False, seed=11):
    v = make(Bs, T, D, N, G, seed)
    use = ("D", "z", "db")
    attrs = "delta_softplus = true" + (", discretization = #seq.discretization<zoh>" if zoh else "")
    halves = []
    for part, sl in (("p", slice(0, split)), ("q", slice(split, T))):
        w = dict(v)
        for n in ("u", "delta", "B", "C", "z"):
            w[n] = v[n][:, sl]
        halves.append(w)
    a1, l1, o1 = graph(halves[0], use, attrs, prefix="p")
    a2, l2, o2 = graph(halves[1], use + ("h0",), attrs, prefix="q", init_from="%pr#1")
    mlir = func(a1 + a2, [l1, l2], [("%pr#0", o1[0]), ("%qr#0", o2[0]), ("%qr#1", o2[1])])
    inputs = [halves[0][n.lstrip("p")] for n, _ in a1] + [halves[1][n.lstrip("q")] for n, _ in a2]
    y1, y2, last = run_seqc(mlir, inputs, cpu_strict=G == 1 or (D // G) % 16 == 0)
    ry, rl = selective_scan(v["u"], v["delta"], v["A"], v["B"], v["C"], v["D"], v["z"], v["db"],
                            None, True, zoh)
    c.close(f"pieces y split={split} zoh={zoh}", np.concatenate([y1, y2], axis=1), ry)
    c.close(f"pieces last split={split} zoh={zoh}", last, rl)


c.run("plain", lambda: case(2, 16, 8, 4, 1))
c.run("all optional", lambda: case(2, 19, 12, 5, 3, use=("D", "z", "db", "h0"), softplus=True, seed=1))
c.run("zoh", lambda: case(1, 23, 6, 4, 2, use=("D", "db"), softplus=True, zoh=True, seed=2))
c.run("zoh A=0 limit", lambda: case(2, 9, 6, 4, 1, zoh=True, zero_a=True, seed=3))
c.run("T=1", lambda: case(3, 1, 10, 16, 5, use=("D", "z", "h0"), softplus=True, seed=4))
c.run("gate only", lambda: case(1, 7, 4, 3, 4, use=("z",), seed=5))
c.run("delta bias only", lambda: case(2, 5, 4, 2, 2, use=("db",), softplus=True, seed=6))
c.run("init only", lambda: case(1, 33, 9, 7, 1, use=("h0",), seed=7))
c.run("skip only", lambda: case(1, 6, 8, 4, 2, use=("D",), seed=8))
c.run("pieces", lambda: pieces(2, 31, 8, 4, 2, 17))
c.run("pieces zoh decode", lambda: pieces(1, 12, 6, 3, 3, 11, zoh=True))
c.run("64 states", lambda: case(1, 40, 8, 64, 2, use=("D", "z", "db", "h0"), softplus=True,
                                seed=20))
c.run("long", lambda: case(1, 1024, 4, 4, 1, use=("D",), softplus=True, seed=9))
# The CPU kernel runs the sequence in chunks of 32 steps: whole vectors of
# channels (D a multiple of 16), several blocks, a last partial chunk, a
# ragged last block, and grouped B/C on the fast path (D / G = 32).
c.run("whole blocks, 3 chunks", lambda: case(2, 70, 48, 16, 1, use=("D", "z", "db", "h0"),
                                              softplus=True, seed=12))
c.run("ragged block, zoh, 2 chunks", lambda: case(1, 64, 40, 8, 1, use=("D", "h0"), softplus=True,
                                                   zoh=True, seed=13))
c.run("groups on the fast path", lambda: case(1, 45, 64, 16, 2, use=("D", "z"), softplus=True,
                                               seed=14))
# Wide rows: a task takes up to four adjacent blocks of 16 channels (with
# few threads; CpuSelectiveScan's splitTasks): a last task with
# fewer blocks and a ragged last block, tasks whose blocks straddle two B/C
# groups (288 channels per group), two blocks per task (N = 32), the
# zero-order hold.
c.run("wide tasks, ragged", lambda: case(2, 70, 550, 16, 1, use=("D", "z", "db", "h0"),
                                         softplus=True, seed=15))
c.run("wide tasks across groups", lambda: case(1, 40, 576, 16, 2, use=("D",), softplus=True,
                                               seed=16))
# No states (N = 0): y is the skip term alone; the kernel's step blocking
# once divided by N at compile time.
c.run("no states", lambda: case(1, 9, 40, 0, 1, use=("D",), softplus=True, seed=18))
c.run("wide tasks, 32 states, zoh", lambda: case(1, 37, 550, 32, 1, use=("D", "h0"),
                                                 softplus=True, zoh=True, seed=17))


def split_by_threads(D, N, zoh, seed):
    """The CPU kernel picks its channel blocks per task (4, 2 or 1) when it
    runs, from the threads of the pool: one AOT library (and one JIT
    module) run on 1, 3 and 8 threads takes every split. Each channel's
    arithmetic is the same in every split, so the results must agree bit
    for bit, and with the float64 recurrence."""
    T = 45
    v = make(2, T, D, N, 1, seed)
    use = ("D", "z", "db", "h0")
    attrs = "delta_softplus = true" + (", discretization = #seq.discretization<zoh>" if zoh else "")
    args, line, out = graph(v, use, attrs)
    mlir = func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])])
    inputs = [v[n] for n, _ in args]
    ry, rl = selective_scan(v["u"], v["delta"], v["A"], v["B"], v["C"], v["D"], v["z"], v["db"],
                            v["h0"], True, zoh)
    runs = {}
    for threads in (1, 3, 8):
        runs[f"JIT threads={threads}"] = run_seqc(mlir, inputs, extra=["--threads", str(threads)])
    with tempfile.TemporaryDirectory(prefix="seqc-ss-") as tmp:
        src, lib = os.path.join(tmp, "ss.mlir"), os.path.join(tmp, "ss.so")
        with open(src, "w") as f:
            f.write(mlir)
        p = subprocess.run(["seqc-compile", src, "-o", lib, "--strict"], capture_output=True,
                           text=True)
        if p.returncode != 0:
            raise AssertionError(f"seqc-compile: {p.stderr}")
        cmd = [SEQC_AOT_RUN, lib]
        for i, a in enumerate(inputs):
            np.save(os.path.join(tmp, f"in{i}.npy"), a)
            cmd += ["--input", os.path.join(tmp, f"in{i}.npy")]
        for threads in (1, 3, 8):
            outdir = os.path.join(tmp, f"out{threads}")
            env = dict(os.environ, SEQC_NUM_THREADS=str(threads))
            p = subprocess.run(cmd + ["--output-dir", outdir], capture_output=True, text=True,
                               env=env)
            if p.returncode != 0:
                raise AssertionError(f"seqc-aot-run on {threads} threads: {p.stderr}")
            runs[f"AOT threads={threads}"] = [
                np.load(os.path.join(outdir, f"result{i}.npy")) for i in range(2)]
    first, (y0, last0) = next(iter(runs.items()))
    tag = f"D={D} N={N} zoh={zoh}"
    for name, (y, last) in runs.items():
        c.expect(f"{name} equals {first} bit for bit, {tag}",
                 np.array_equal(y, y0) and np.array_equal(last, last0))
    c.close("y " + tag, y0, ry)
    c.close("last " + tag, last0, rl)


# D = 550: 35 blocks of 16 lanes, four per task on 1 thread, two on 3, one
# on 8 (a ragged last block in each); N = 32 allows two per task at most.
c.run("split by the run's threads", lambda: split_by_threads(550, 16, False, 19))
c.run("split by the run's threads, 32 states, zoh",
      lambda: split_by_threads(550, 32, True, 21))
c.finish()
