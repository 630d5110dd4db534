#!/usr/bin/env python3
"""Packs everything the GPU check needs into one folder (bench/gpu.sh pack).

A GPU machine may have no MLIR or LLVM: the check there runs ahead-of-time
libraries (seqc-compile --target cuda) with seqc-aot-run, which links only
seqc's runtime. This script, on a machine with seqc built, writes:
  bin/seqc-aot-run
  tests/NAME/{lib.so, inN.npy, expectN.npy, meta}  device tests: each op on
      inputs drawn here, expected outputs from the CPU JIT (seqc-run, whose
      results the lit suite checks against numpy); f32 and bf16 forms
  bench/NAME.so, bench/NAME.txt   the issue's shapes (bf16 operands, f32
      states); inputs are drawn on the device by seqc-aot-run

  gpu_pack.py PACKDIR [--chip sm_90a] [--cpu x86-64-v2] [--target cpu]
                      [--tests-only]

--target cpu packs CPU libraries instead: the harness itself (runner, files,
comparisons) can then be checked on a machine without a GPU.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gpu_graphs as g  # noqa: E402

BIN = os.path.join(ROOT, "build", "bin")


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)}: {p.stderr.strip()}")
    return p.stdout


def rng(seed):
    return np.random.default_rng(seed)


def f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


# Device tests: (name, graph builder(form), inputs(rng)) at sizes of a few
# MB that still span many blocks, chunks and tiles.
def scan_inputs(r):
    return [f32(r.uniform(0.5, 1.0, (2, 600, 256))), f32(r.standard_normal((2, 600, 256)))]


def selective_inputs(r):
    B, T, D, N = 2, 400, 128, 16
    return [f32(r.standard_normal((B, T, D))), f32(r.uniform(-3, 0, (B, T, D))),
            f32(-np.exp(r.uniform(-1, 1, (D, N)))), f32(r.standard_normal((B, T, 1, N))),
            f32(r.standard_normal((B, T, 1, N)))]


def ssd_inputs(r):
    B, T, H, P, N = 1, 300, 4, 64, 128
    return [f32(r.standard_normal((B, T, H, P))), f32(r.uniform(-3, 0.5, (B, T, H))),
            f32(-np.exp(r.uniform(-1, 1, H))), f32(r.standard_normal((B, T, 1, N))),
            f32(r.standard_normal((B, T, 1, N)))]


def la_inputs(r):
    B, T, H, K = 1, 300, 4, 64
    return [f32(0.5 * r.standard_normal((B, T, H, K))), f32(0.5 * r.standard_normal((B, T, H, K))),
            f32(r.standard_normal((B, T, H, K))), f32(-r.uniform(0.01, 0.5, (B, T, H)))]


def delta_inputs(r):
    B, T, H, HV, K = 1, 300, 2, 4, 64
    return [f32(r.standard_normal((B, T, H, K))), f32(r.standard_normal((B, T, H, K))),
            f32(r.standard_normal((B, T, HV, K))), f32(r.uniform(0.05, 1.0, (B, T, HV))),
            f32(-r.uniform(0.01, 0.5, (B, T, HV)))]


def dplr_inputs(r):
    B, T, H, K = 1, 300, 4, 64
    kappa = r.standard_normal((B, T, H, K))
    kappa /= np.linalg.norm(kappa, axis=-1, keepdims=True)
    a_rwkv = r.uniform(0.1, 0.9, (B, T, H, K))
    return [f32(0.5 * r.standard_normal((B, T, H, K))), f32(0.1 * r.standard_normal((B, T, H, K))),
            f32(r.standard_normal((B, T, H, K))), f32(-kappa), f32(kappa * a_rwkv),
            f32(-r.uniform(0.05, 1.0, (B, T, H, K)))]


def attention_inputs(r):
    shape = (1, 300, 4, 64)
    return [f32(r.standard_normal(shape)) for _ in range(3)]


def moe_inputs(r):
    T, D, F, E, k = 200, 64, 96, 8, 2
    idx = np.stack([r.permutation(E)[:k] for _ in range(T)]).astype(np.int32)
    return [f32(r.standard_normal((T, D))), f32(r.uniform(0, 1, (T, k))), idx,
            f32(0.1 * r.standard_normal((E, D, F))), f32(0.1 * r.standard_normal((E, F, D))),
            f32(0.1 * r.standard_normal((E, D, F)))]


def matmul_inputs(r):
    return [f32(r.standard_normal((300, 200))), f32(r.standard_normal((200, 250)))]


TESTS = [
    ("matmul", lambda: g.matmul(300, 200, 250), matmul_inputs),
    ("linear_scan", lambda: g.linear_scan(2, 600, 256), scan_inputs),
    ("selective_scan", lambda: g.selective_scan(2, 400, 128, 16), selective_inputs),
    ("ssd", lambda: g.ssd(1, 300, 4, 64, 128), ssd_inputs),
    ("linear_attention", lambda: g.linear_attention(1, 300, 4, 64, 64), la_inputs),
    ("attention", lambda: g.attention(1, 300, 4, 64, 64), attention_inputs),
    ("moe_ffn", lambda: g.moe_ffn(200, 64, 96, 8, 2), moe_inputs),
    ("delta_rule", lambda: g.delta_rule(1, 300, 2, 4, 64, 64), delta_inputs),
    ("generalized_delta_rule", lambda: g.generalized_delta_rule(1, 300, 4, 64, 64),
     dplr_inputs),
]

# The shapes.
BENCH = [
    ("matmul", lambda: g.matmul(8192, 8192, 8192)),
    ("linear_scan", lambda: g.linear_scan(8, 8192, 2048)),
    ("selective_scan", lambda: g.selective_scan(8, 8192, 2048, 16)),
    ("ssd", lambda: g.ssd(8, 8192, 32, 64, 128)),
    ("linear_attention", lambda: g.linear_attention(8, 8192, 32, 128, 128)),
    ("attention", lambda: g.attention(4, 8192, 32, 128, 128)),
    ("moe_ffn", lambda: g.moe_ffn(8192, 4096, 1408, 64, 6)),
    ("delta_rule", lambda: g.delta_rule(8, 8192, 32, 32, 128, 128)),
]


def main(argv):
    args = argv[1:]
    chip, cpu, target = "sm_90a", "x86-64-v2", "cuda"
    tests_only = "--tests-only" in args
    if tests_only:
        args.remove("--tests-only")
    if "--target" in args:
        i = args.index("--target"); target = args[i + 1]; del args[i:i + 2]
    if "--chip" in args:
        i = args.index("--chip"); chip = args[i + 1]; del args[i:i + 2]
    if "--cpu" in args:
        i = args.index("--cpu"); cpu = args[i + 1]; del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    pack = args[0]
    os.makedirs(os.path.join(pack, "bin"), exist_ok=True)
    shutil.copy2(os.path.join(BIN, "seqc-aot-run"), os.path.join(pack, "bin"))
    compile_cuda = [os.path.join(BIN, "seqc-compile"), "--target", target]
    if target == "cuda":
        # Libraries that travel: a portable host CPU (CPU packs run here).
        compile_cuda += ["--chip", chip, "--cpu", cpu]
    with tempfile.TemporaryDirectory(prefix="seqc-pack-") as tmp:
        for name, build, inputs in TESTS:
            for form in ("f32", "narrowed"):
                g.FORM = form
                tag = f"{name}_{'f32' if form == 'f32' else 'bf16'}"
                d = os.path.join(pack, "tests", tag)
                os.makedirs(d, exist_ok=True)
                src = os.path.join(tmp, tag + ".mlir")
                with open(src, "w") as f:
                    f.write(build())
                cmd = [os.path.join(BIN, "seqc-run"), src, "--output-dir", os.path.join(tmp, tag)]
                for i, a in enumerate(inputs(rng(7))):
                    p = os.path.join(d, f"in{i}.npy")
                    np.save(p, a)
                    cmd += ["--input", p]
                run(cmd)
                i = 0
                while os.path.exists(os.path.join(tmp, tag, f"result{i}.npy")):
                    shutil.copy2(os.path.join(tmp, tag, f"result{i}.npy"),
                                 os.path.join(d, f"expect{i}.npy"))
                    i += 1
                run(compile_cuda + [src, "-o", os.path.join(d, "lib.so")])
                with open(os.path.join(d, "meta"), "w") as f:
                    f.write("bf16\n" if form != "f32" else "f32\n")
        g.FORM = "bf16"
        os.makedirs(os.path.join(pack, "bench"), exist_ok=True)
        for name, build in ([] if tests_only else BENCH):
            src = os.path.join(pack, "bench", name + ".mlir")
            with open(src, "w") as f:
                f.write(build())
            run(compile_cuda + [src, "-o", os.path.join(pack, "bench", name + ".so")])
    print(f"packed {len(TESTS) * 2} device tests and {0 if tests_only else len(BENCH)} "
          f"benchmarks for {chip if target == 'cuda' else 'the CPU'} into {pack}")


if __name__ == "__main__":
    main(sys.argv)
