# The CUDA target split over ranks, one GPU each, the exchanges on NCCL
# (seqc-run --target cuda --parallel under mpirun): sequence parallelism
# of a scan, an SSD and a linear attention, and the hybrid stack (Mamba-2,
# attention, MLP, MoE) with its experts split, alone and with every other
# op's steps, at R = 2 (and 4 where there
# are 4 GPUs), against float64 numpy and the single-process run on one GPU.
# Needs two GPUs and NCCL (NCCL refuses two ranks on one device); the same
# code's arithmetic and exchanges run everywhere through the emulated
# target (distributed.py and distributed_experts.py, second run).
# REQUIRES: nccl-gpus, mpi
# UNSUPPORTED: sanitizer
# RUN: env SEQC_MPI_TEST_TARGET=cuda %python %s
import ctypes
import os

import numpy as np
import refs
from seqc_mpi import run
from seqc_testing import Checker, f32, func, rng, seq_op, type_of

c = Checker()
r = rng(31)


def gpus():
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuInit(0)
    count = ctypes.c_int(0)
    cuda.cuDeviceGetCount(ctypes.byref(count))
    return count.value


RANKS = [R for R in (2, 4) if R <= gpus()]


def t(*shape):
    return "tensor<" + "".join(f"{s}x" for s in shape) + "f32>"


def one_op(name, op, operands, results, attrs, expected, parallel="sequence"):
    args = [(f"a{i}", type_of(a)) for i, a in enumerate(operands)]
    names = [f"%a{i}" for i in range(len(args))]
    body = [seq_op("r", op, names, [], attrs, [ty for _, ty in args], results)]
    outs = [(f"%r#{i}", ty) for i, ty in enumerate(results)]
    mlir = func(args, body, outs)

    def check():
        single = run(mlir, operands, 0)
        for R in RANKS:
            got = run(mlir, operands, R, parallel=parallel)
            for i, (g, ref) in enumerate(zip(got, expected)):
                c.close(f"{name} R={R} result{i} vs float64", g, ref, 1e-4)
                c.close(f"{name} R={R} result{i} vs one GPU", g, single[i], 1e-4)
    c.run(name, check)


B, T = 2, 301
a = f32(r.uniform(0.6, 1.0, (B, T, 8)))
b = f32(r.standard_normal((B, T, 8)))
one_op("linear_scan", "linear_scan", [a, b], [t(B, T, 8), t(B, 8)], "",
       refs.linear_scan(a, b))

H, P, N = 4, 16, 8
x = f32(r.standard_normal((1, T, H, P)))
dt = f32(r.uniform(0.01, 0.2, (1, T, H)))
A = f32(-r.uniform(0.5, 2.0, H))
Bm = f32(r.standard_normal((1, T, 1, N)))
Cm = f32(r.standard_normal((1, T, 1, N)))
one_op("ssd", "ssd", [x, dt, A, Bm, Cm], [t(1, T, H, P), t(1, H, P, N)],
       "chunk_size = 64", refs.ssd(x, dt, A, Bm, Cm))

q = f32(r.standard_normal((1, T, H, 16)) * 0.3)
k = f32(r.standard_normal((1, T, H, 16)) * 0.3)
v = f32(r.standard_normal((1, T, H, 16)))
one_op("linear_attention", "linear_attention", [q, k, v],
       [t(1, T, H, 16), t(1, H, 16, 16)], "", refs.linear_attention(q, k, v))



def hybrid_stack():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "hybrid_stack.mlir")
    with open(path) as f:
        mlir = f.read()
    extra = ["-e", "main", "--random-inputs", "--dynamic-size", "256"]
    single = run(mlir, [], 0, extra)
    for mode in ("experts", "sequence+experts"):
        for R in RANKS:
            got = run(mlir, [], R, extra, parallel=mode, timeout=600)
            c.expect(f"hybrid stack --parallel {mode} R={R}: as many results",
                     len(got) == len(single), f"{len(got)} vs {len(single)}")
            for i, (g, ref) in enumerate(zip(got, single)):
                c.close(f"hybrid stack --parallel {mode} R={R} result{i} vs one GPU",
                        g, ref, 1e-4)


c.run("hybrid stack", hybrid_stack)
c.finish()
