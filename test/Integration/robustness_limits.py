# Long sequences and resource limits:
#   T = 65536 recurrences (linear_scan, selective_scan, ssd) stay within the
#   SPEC's tolerance of a float64 evaluation, with decays close to 1 so
#   errors would accumulate;
#   a shape whose buffers exceed the machine's memory is refused with an
#   error before anything is allocated (not an OOM kill), on both pipelines;
#   a cache directory that cannot be written is no error for seqc-run.
# RUN: %python %s
import os
import subprocess
import tempfile

import numpy as np
from refs import linear_scan, selective_scan, ssd
from seqc_testing import SEQC_RUN, Checker, error_lines, f32, rng, run_seqc, type_of

c = Checker()
T = 65536


def long_scans():
    r = rng(5)
    a = f32(r.uniform(0.999, 1.0, (1, T, 8)))
    b = f32(r.standard_normal((1, T, 8)))
    text = (f"func.func @main(%a: {type_of(a)}, %b: {type_of(b)}) -> ({type_of(a)}, tensor<1x8xf32>) {{\n"
            f"  %h, %l = seq.linear_scan %a, %b : ({type_of(a)}, {type_of(b)}) -> ({type_of(a)}, tensor<1x8xf32>)\n"
            f"  return %h, %l : {type_of(a)}, tensor<1x8xf32>\n}}\n")
    h, last = run_seqc(text, [a, b])
    rh, rl = linear_scan(a, b)
    c.close("linear_scan T=65536, decays in [0.999, 1]", h, rh)
    c.close("linear_scan T=65536 final state", last, rl)

    u = f32(r.standard_normal((1, T, 4)))
    delta = f32(r.uniform(0.0, 0.01, (1, T, 4)))
    A = f32(-r.uniform(0.01, 1.0, (4, 4)))
    B = f32(r.standard_normal((1, T, 1, 4)))
    C = f32(r.standard_normal((1, T, 1, 4)))
    tys = [type_of(x) for x in (u, delta, A, B, C)]
    text = (f"func.func @main(%u: {tys[0]}, %d: {tys[1]}, %A: {tys[2]}, %B: {tys[3]}, %C: {tys[4]})"
            f" -> ({tys[0]}, tensor<1x4x4xf32>) {{\n"
            f"  %y, %l = seq.selective_scan %u, %d, %A, %B, %C : ({', '.join(tys)}) -> ({tys[0]}, tensor<1x4x4xf32>)\n"
            f"  return %y, %l : {tys[0]}, tensor<1x4x4xf32>\n}}\n")
    y, last = run_seqc(text, [u, delta, A, B, C])
    ry, rl = selective_scan(u, delta, A, B, C)
    c.close("selective_scan T=65536", y, ry)
    c.close("selective_scan T=65536 final state", last, rl)

    x = f32(r.standard_normal((1, T, 2, 4)))
    dt = f32(r.uniform(0.0, 0.01, (1, T, 2)))
    A = f32([-0.1, -1.0])
    tys = [type_of(v) for v in (x, dt, A, B, C)]
    text = (f"func.func @main(%x: {tys[0]}, %dt: {tys[1]}, %A: {tys[2]}, %B: {tys[3]}, %C: {tys[4]})"
            f" -> ({tys[0]}, tensor<1x2x4x4xf32>) {{\n"
            f"  %y, %l = seq.ssd %x, %dt, %A, %B, %C : ({', '.join(tys)}) -> ({tys[0]}, tensor<1x2x4x4xf32>)\n"
            f"  return %y, %l : {tys[0]}, tensor<1x2x4x4xf32>\n}}\n")
    y, last = run_seqc(text, [x, dt, A, B, C])
    ry, rl = ssd(x, dt, A, B, C)
    c.close("ssd T=65536", y, ry)
    c.close("ssd T=65536 final state", last, rl)


def seqc_run(args, env=None):
    return subprocess.run([SEQC_RUN] + args, capture_output=True, text=True, env=env)


def memory_limits():
    with tempfile.TemporaryDirectory() as tmp:
        # A 200000 x 200000 mask is 160 GB.
        mlir = os.path.join(tmp, "mask.mlir")
        with open(mlir, "w") as f:
            f.write("func.func @main(%l: tensor<1x?xf32>) -> tensor<1x?x?xf32> {\n"
                    "  %m = seq.semiseparable_mask %l : (tensor<1x?xf32>) -> tensor<1x?x?xf32>\n"
                    "  return %m : tensor<1x?x?xf32>\n}\n")
        npy = os.path.join(tmp, "l.npy")
        np.save(npy, np.zeros((1, 200000), np.float32))
        for extra in ([], ["--reference"]):
            p = seqc_run([mlir, "--input", npy, "--output-dir", os.path.join(tmp, "out")] + extra)
            lines = error_lines(p.stderr.strip()).splitlines()
            c.expect(f"160 GB mask refused {' '.join(extra)}",
                     p.returncode == 1 and len(lines) == 1 and "out of memory" in lines[0]
                     and "exceeds the memory limit" in lines[0], repr(p.stderr.strip()))
        # A matmul whose result would be 4e10 floats.
        mlir = os.path.join(tmp, "mm.mlir")
        with open(mlir, "w") as f:
            f.write("func.func @main(%a: tensor<?x1xf32>, %b: tensor<1x?xf32>) -> tensor<?x?xf32> {\n"
                    "  %c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n"
                    "  %z = arith.constant 0.0 : f32\n"
                    "  %m = tensor.dim %a, %c0 : tensor<?x1xf32>\n  %n = tensor.dim %b, %c1 : tensor<1x?xf32>\n"
                    "  %e = tensor.empty(%m, %n) : tensor<?x?xf32>\n"
                    "  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>\n"
                    "  %p = linalg.matmul ins(%a, %b : tensor<?x1xf32>, tensor<1x?xf32>) outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>\n"
                    "  return %p : tensor<?x?xf32>\n}\n")
        np.save(os.path.join(tmp, "a.npy"), np.ones((200000, 1), np.float32))
        np.save(os.path.join(tmp, "b.npy"), np.ones((1, 200000), np.float32))
        p = seqc_run([mlir, "--input", os.path.join(tmp, "a.npy"), "--input", os.path.join(tmp, "b.npy")])
        c.expect("160 GB matmul result refused", p.returncode == 1 and "out of memory" in p.stderr,
                 repr(p.stderr.strip()))

        # A cache directory under a regular file cannot exist: a note in the
        # engine, no error for the tool.
        blocker = os.path.join(tmp, "file")
        open(blocker, "w").write("x")
        env = dict(os.environ, SEQC_CACHE_DIR=os.path.join(blocker, "cache"))
        small = os.path.join(tmp, "s.npy")
        np.save(small, np.ones((3, 1), np.float32))
        np.save(os.path.join(tmp, "b2.npy"), np.ones((1, 2), np.float32))
        p = seqc_run([mlir, "--input", small, "--input", os.path.join(tmp, "b2.npy"), "--print"], env=env)
        c.expect("unwritable cache directory: compiles and runs", p.returncode == 0, repr(p.stderr))


c.run("long scans", long_scans)
c.run("memory limits", memory_limits)
c.finish()
