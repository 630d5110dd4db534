# The CPU kernels' inline exp (KernelBuilder::polynomialExp) across the
# whole float range, on each way it scales by 2^n: AVX-512 scalef for
# the 16-lane vectors of an AVX-512 host, the exponent bits for 8 and 4
# lanes (AOT libraries for x86-64-v3 and x86-64-v2). The carrier is a
# selective scan of one step with dt = 1, B = C = 1, u = 0 and h0 = 1, so
# y = exp(dt A) = exp(A) lane by lane. Expected: exp in float64 rounded to
# f32 within 4e-7 relative, 0 exactly where n = round(x / ln 2) <= -126
# (below about -86.99: e^x under sqrt(2) FLT_MIN, no subnormals), +inf exactly
# where float32 exp overflows (past 88.72283172607421875), NaN for NaN.
# RUN: %python %s
import os
import subprocess
import tempfile

import numpy as np
from seqc_testing import Checker, f32, func, seq_op, type_of

c = Checker()

# -86.98997497558594 and -86.98996734619141 are the f32 neighbours either
# side of the flush (n = -126 and -125).
EDGES = [-np.inf, -1e30, -1000.0, -103.9, -87.4, -87.3, -87.29, -87.0, -86.98997497558594,
         -86.98996734619141, -86.98, -86.0, -80.0, -20.0,
         -1.0, -0.3466, -1e-8, 0.0, 1e-8, 0.3466, 0.5, 1.0, 10.0, 80.0, 87.9, 88.0,
         88.3, 88.5, 88.7, 88.72283172607421875, 88.72283935546875, 88.8, 89.0, 100.0,
         1e30, np.inf, np.nan]


def inputs(D, seed):
    r = np.random.default_rng(seed)
    a = f32(r.uniform(-95.0, 95.0, D))
    a[:len(EDGES)] = f32(EDGES)
    return dict(u=np.zeros((1, 1, D), np.float32), delta=np.ones((1, 1, D), np.float32),
                A=a.reshape(D, 1), B=np.ones((1, 1, 1, 1), np.float32),
                C=np.ones((1, 1, 1, 1), np.float32), h0=np.ones((1, D, 1), np.float32))


def graph(v):
    names = ["u", "delta", "A", "B", "C", "h0"]
    args = [(n, type_of(v[n])) for n in names]
    out = [type_of(v["u"]), type_of(v["h0"])]
    line = seq_op("r", "selective_scan", ["%" + n for n in names[:5]], [("init", ["%h0"])],
                  "", [t for _, t in args], out)
    return func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])]), [v[n] for n in names]


def flushed(a):
    """Where the kernel's exp is 0: n = round(x / ln 2) <= -126, n as the
    kernel rounds it (x times ln 2's f32 reciprocal, exact in float64, to
    the nearest even integer)."""
    with np.errstate(invalid="ignore"):
        n = np.rint(a.astype(np.float64) * np.float64(f32(1.4426950408889634)))
    return (n <= -126) | (a < f32(-87.3))


def expected(a):
    with np.errstate(over="ignore"):
        e = f32(np.exp(a.astype(np.float64)))
    e[flushed(a)] = 0.0
    return e


def check(tag, y, a):
    y, ref = y.ravel(), expected(a)
    c.equal(f"{tag}: NaN exactly for NaN", np.isnan(y), np.isnan(ref))
    c.equal(f"{tag}: +inf exactly where f32 exp overflows", np.isposinf(y), np.isposinf(ref))
    c.equal(f"{tag}: 0 exactly where n <= -126", y == 0.0, ref == 0.0)
    finite = np.isfinite(ref) & (ref != 0.0)
    rel = np.abs(y[finite].astype(np.float64) / ref[finite] - 1.0)
    worst = float(rel.max())
    c.expect(f"{tag}: relative error {worst:.3g} <= 4e-7", worst <= 4e-7,
             f"at A = {a[finite][rel.argmax()]!r}")


def run(tool_args, args, tmp):
    """Runs seqc-run or seqc-aot-run on `args`; returns result0 and result1."""
    cmd = list(tool_args) + ["--output-dir", tmp]
    for i, a in enumerate(args):
        np.save(os.path.join(tmp, f"in{i}.npy"), a)
        cmd += ["--input", os.path.join(tmp, f"in{i}.npy")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(tool_args)}: {p.stderr}")
    return [np.load(os.path.join(tmp, f"result{i}.npy")) for i in range(2)]


def compiled(D, seed, cpu=None):
    """The JIT's fast kernels for this host (cpu None), or an AOT library
    for `cpu`. Only the fast CPU pipeline: it alone has this exp (the
    reference calls libm, whose exp keeps subnormals)."""
    v = inputs(D, seed)
    mlir, args = graph(v)
    with tempfile.TemporaryDirectory(prefix="seqc-exp-") as tmp:
        src = os.path.join(tmp, "exp.mlir")
        with open(src, "w") as f:
            f.write(mlir)
        if cpu is None:
            tag, tool = f"JIT D={D}", ["seqc-run", src, "--strict"]
        else:
            lib = os.path.join(tmp, "exp.so")
            p = subprocess.run(["seqc-compile", src, "-o", lib, "--cpu", cpu, "--strict"],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise AssertionError(f"seqc-compile --cpu {cpu}: {p.stderr}")
            tag, tool = f"AOT {cpu} D={D}", ["seqc-aot-run", lib]
        y, last = run(tool, args, tmp)
    check(tag, y, v["A"].ravel())
    check(tag + " state", last, v["A"].ravel())


# D = 48 is whole vectors of every width; 45 leaves a masked last block.
c.run("JIT, whole vectors", lambda: compiled(48, 1))
c.run("JIT, masked last block", lambda: compiled(45, 2))
c.run("AOT x86-64-v3 (8 lanes)", lambda: compiled(48, 3, "x86-64-v3"))
c.run("AOT x86-64-v2 (4 lanes)", lambda: compiled(45, 4, "x86-64-v2"))
c.finish()
