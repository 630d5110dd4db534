# seqc-run --target cuda on a GPU: the scan / SSD kernels against the
# float64 numpy references at sizes that fill the device (T not a multiple
# of the chunk, G > 1, every optional operand), then every example model
# block (Mamba-1, Mamba-2, GLA, Performer, MoE, the hybrid stack: the graph's
# matmuls and norms as GPU kernels too) against its numpy implementation.
# Skipped without a GPU; test/Integration/*.py check the same kernels'
# arithmetic everywhere through --target cuda-emulated.
# REQUIRES: cuda-device
# RUN: %python %s
import os
import subprocess
import tempfile

import numpy as np
from refs import linear_scan, selective_scan, ssd
from seqc_testing import (SEQC_RUN, Checker, f32, func, load_results, mlir_type, rng, save_inputs,
                          seq_op, type_of)

c = Checker()
# SEQC_CUDA_TEST_TARGET=cuda-emulated checks this file itself without a GPU.
TARGET = os.environ.get("SEQC_CUDA_TEST_TARGET", "cuda")


def run_cuda(mlir, inputs):
    with tempfile.TemporaryDirectory(prefix="seqc-cuda-") as tmp:
        src = os.path.join(tmp, "g.mlir")
        with open(src, "w") as f:
            f.write(mlir)
        cmd = [SEQC_RUN, src, "--target", TARGET, "--output-dir", os.path.join(tmp, "out")]
        cmd += save_inputs(inputs, tmp)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise AssertionError(f"seqc-run --target cuda failed: {proc.stderr}")
        return load_results(os.path.join(tmp, "out"))


def case_linear_scan():
    r = rng(1)
    a = f32(r.uniform(0.5, 1.0, (3, 1000, 517)))
    b = f32(r.standard_normal((3, 1000, 517)))
    h0 = f32(r.standard_normal((3, 517)))
    body = [seq_op("r", "linear_scan", ["%a", "%b"], [("init", ["%h0"])],
                   in_types=[type_of(a), type_of(b), type_of(h0)],
                   out_types=[type_of(a), type_of(h0)])]
    mlir = func([("a", type_of(a)), ("b", type_of(b)), ("h0", type_of(h0))], body,
                [("%r#0", type_of(a)), ("%r#1", type_of(h0))])
    h, last = run_cuda(mlir, [a, b, h0])
    rh, rlast = linear_scan(a, b, h0)
    c.close("linear_scan h", h, rh)
    c.close("linear_scan last", last, rlast)


def case_selective_scan():
    r = rng(2)
    Bs, T, D, N, G = 2, 777, 256, 16, 2
    u = f32(r.standard_normal((Bs, T, D)))
    dl = f32(r.uniform(-3, 0, (Bs, T, D)))
    A = f32(-np.exp(r.uniform(-1, 1, (D, N))))
    B = f32(r.standard_normal((Bs, T, G, N)))
    C = f32(r.standard_normal((Bs, T, G, N)))
    Dk = f32(r.standard_normal(D))
    z = f32(r.standard_normal((Bs, T, D)))
    db = f32(r.uniform(-0.5, 0.5, D))
    h0 = f32(r.standard_normal((Bs, D, N)))
    vals = [u, dl, A, B, C, Dk, z, db, h0]
    names = ["u", "dl", "A", "B", "C", "Dk", "z", "db", "h0"]
    body = [seq_op("r", "selective_scan", ["%u", "%dl", "%A", "%B", "%C"],
                   [("skip", ["%Dk"]), ("gate", ["%z"]), ("delta_bias", ["%db"]),
                    ("init", ["%h0"])], attrs="delta_softplus = true",
                   in_types=[type_of(v) for v in vals],
                   out_types=[type_of(u), type_of(h0)])]
    mlir = func(list(zip(names, [type_of(v) for v in vals])), body,
                [("%r#0", type_of(u)), ("%r#1", type_of(h0))])
    y, last = run_cuda(mlir, vals)
    ry, rlast = selective_scan(u, dl, A, B, C, D=Dk, z=z, db=db, h0=h0, softplus_dt=True)
    c.close("selective_scan y", y, ry)
    c.close("selective_scan last", last, rlast)


def case_ssd():
    r = rng(3)
    Bs, T, H, P, N, G = 2, 333, 4, 64, 128, 2
    x = f32(r.standard_normal((Bs, T, H, P)))
    dt = f32(r.uniform(-3, 0.5, (Bs, T, H)))
    A = f32(-np.exp(r.uniform(-1, 1, H)))
    B = f32(r.standard_normal((Bs, T, G, N)))
    C = f32(r.standard_normal((Bs, T, G, N)))
    Dk = f32(r.standard_normal(H))
    z = f32(r.standard_normal((Bs, T, H, P)))
    db = f32(r.uniform(-0.5, 0.5, H))
    h0 = f32(r.standard_normal((Bs, H, P, N)))
    vals = [x, dt, A, B, C, Dk, z, db, h0]
    names = ["x", "dt", "A", "B", "C", "Dk", "z", "db", "h0"]
    body = [seq_op("r", "ssd", ["%x", "%dt", "%A", "%B", "%C"],
                   [("skip", ["%Dk"]), ("gate", ["%z"]), ("dt_bias", ["%db"]),
                    ("init", ["%h0"])], attrs="dt_softplus = true",
                   in_types=[type_of(v) for v in vals],
                   out_types=[type_of(x), type_of(h0)])]
    mlir = func(list(zip(names, [type_of(v) for v in vals])), body,
                [("%r#0", type_of(x)), ("%r#1", type_of(h0))])
    y, last = run_cuda(mlir, vals)
    ry, rlast = ssd(x, dt, A, B, C, D=Dk, z=z, db=db, h0=h0, softplus_dt=True)
    c.close("ssd y", y, ry)
    c.close("ssd last", last, rlast)


def case_blocks():
    import block_check
    import weights as wgen
    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    with tempfile.TemporaryDirectory(prefix="seqc-cuda-blocks-") as tmp:
        for kind in ("mamba1", "mamba2", "gla", "performer", "moe", "hybrid"):
            path = os.path.join(examples, block_check.FILES.get(kind, f"{kind}_block.mlir"))
            u = wgen.make_input(block_check.D, 300, seed=3)
            W = wgen.make_weights(kind, block_check.D, seed=1)
            wfile = os.path.join(tmp, f"{kind}.safetensors")
            wgen.write_safetensors(wfile, W)
            expect = block_check.reference(kind, u, W)
            got = block_check.seqc_run(path, "main", wfile, [u], tmp, kind,
                                       ["--target", TARGET])
            c.expect(f"{kind}: {len(expect)} results", len(got) == len(expect))
            for i, (g, e) in enumerate(zip(got, expect)):
                if np.issubdtype(g.dtype, np.integer):
                    c.equal(f"{kind} result {i}", g, e)
                else:
                    c.close(f"{kind} result {i}", g, e, 2e-4)


c.run("linear_scan", case_linear_scan)
c.run("selective_scan", case_selective_scan)
c.run("ssd", case_ssd)
c.run("model blocks", case_blocks)
c.finish()
