# Expert parallelism (seqc-run --parallel experts under mpirun, SPEC
# section 3): moe_ffn's experts split over R = 1, 2, 4 processes, each
# routing its share of the tokens to their experts' ranks and back, equals
# float64 numpy and the single-process run, loads included. Capacity that
# drops choices (its order across ranks is token order), no capacity,
# plain and gated experts, every activation, fewer tokens than ranks,
# routing that leaves ranks without rows, a router in the graph, bf16
# tokens and experts, the hybrid stack example with experts split alone
# and together with every other op's steps, and the bad inputs: E that does not split over R,
# an index outside [0, E) (every rank names it, no hang). The second run is
# the same on the emulated GPU target: its kernels, the exchanges through
# the NCCL entry points (carried out by MPI on host buffers).
# REQUIRES: mpi
# RUN: %python %s
# RUN: env SEQC_MPI_TEST_TARGET=cuda-emulated %python %s
import os

import numpy as np
import refs
from seqc_mpi import run
from seqc_testing import (Checker, bf16, error_lines, f32, func, mlir_type, rel_rms, rng,
                          seq_op, type_of)

c = Checker()


def moe_graph(x, w, idx, wu, wd, wg, act, cf, dtype="f32"):
    """One moe_ffn; with dtype bf16 its f32 arguments are rounded to bf16
    in the graph and y widened back (.npy has no bf16)."""
    def ty(a, elt=None):
        return mlir_type(a.shape, elt or ("i32" if a.dtype == np.int32 else "f32"))
    names = ["x", "w", "i", "wu", "wd"] + (["wg"] if wg is not None else [])
    arrays = [x, w, idx, wu, wd] + ([wg] if wg is not None else [])
    args = [(n, ty(a)) for n, a in zip(names, arrays)]
    body, operands = [], []
    for n, a in zip(names, arrays):
        if dtype == "f32" or a.dtype == np.int32:
            operands.append((f"%{n}", ty(a)))
            continue
        body.append(f"%{n}b = arith.truncf %{n} : {ty(a)} to {ty(a, dtype)}")
        operands.append((f"%{n}b", ty(a, dtype)))
    opt = [("gate_proj", [operands[5][0]])] if wg is not None else []
    y_type = ty(x, dtype if dtype != "f32" else None)
    out = [y_type, mlir_type([wu.shape[0]], "i64")]
    body.append(seq_op("r", "moe_ffn", [o for o, _ in operands[:5]], opt,
                       f"activation = #seq.activation<{act}>, capacity_factor = {cf} : f32",
                       [t for _, t in operands], out))
    y = "%r#0"
    if dtype != "f32":
        body.append(f"%y = arith.extf %r#0 : {y_type} to {ty(x)}")
        y = "%y"
    return func(args, body, [(y, ty(x)), ("%r#1", out[1])])


def weights(r, T, D, F, E, k, gated, idx=None):
    x = f32(r.standard_normal((T, D)))
    w = f32(r.uniform(0.1, 1.0, (T, k)))
    if idx is None:
        idx = np.stack([r.permutation(E)[:k] for _ in range(T)]).astype(np.int32)
    wu = f32(r.standard_normal((E, D, F)) / np.sqrt(D))
    wd = f32(r.standard_normal((E, F, D)) / np.sqrt(F))
    wg = f32(r.standard_normal((E, D, F)) / np.sqrt(D)) if gated else None
    return x, w, idx, wu, wd, wg


def case(name, T, D, F, E, k, gated=False, act="silu", cf=0.0, idx=None, seed=0,
         ranks=(1, 2, 4), dtype="f32"):
    def body():
        x, w, idx_, wu, wd, wg = weights(rng(seed), T, D, F, E, k, gated, idx)
        inputs = [x, w, idx_, wu, wd] + ([wg] if gated else [])
        mlir = moe_graph(x, w, idx_, wu, wd, wg, act, cf, dtype)
        if dtype == "bf16":
            rounded = [bf16(a) if a is not None and a.dtype != np.int32 else a
                       for a in (x, w, idx_, wu, wd, wg)]
            ry, rload = refs.moe_ffn(*rounded, act, cf)
            tol = 1e-2
        else:
            ry, rload = refs.moe_ffn(x, w, idx_, wu, wd, wg, act, cf)
            tol = 1e-4
        single = run(mlir, inputs, 0)
        for R in ranks:
            y, load = run(mlir, inputs, R, parallel="experts")
            if dtype == "bf16":
                err = rel_rms(y, ry)
                c.expect(f"{name} R={R} y vs float64 (relative RMS)", err <= tol, f"{err:.3g}")
            else:
                c.close(f"{name} R={R} y vs float64", y, ry, tol)
            c.close(f"{name} R={R} y vs one process", y, single[0], tol)
            c.equal(f"{name} R={R} load", load, rload)
    c.run(name, body)


# Capacity that drops choices: ceil(1.0 * 2 * 37 / 4) = 19 slots.
case("gated silu, capacity 1.0", 37, 16, 24, 4, 2, gated=True, cf=1.0)
# No capacity, plain experts, more experts per rank.
case("plain gelu, no capacity", 29, 8, 12, 8, 2, act="gelu", seed=1)
case("relu, k = 1, capacity 1.25", 40, 8, 16, 4, 1, act="relu", cf=1.25, seed=2)
# Fewer tokens than ranks: some ranks route none.
case("T = 3", 3, 8, 8, 4, 2, gated=True, cf=1.0, seed=3)
# Every token chooses experts 0 then 1 (rank 0's at R = 2 and 4): the
# other ranks receive no rows, and the capacity keeps the first tokens.
skew = np.zeros((24, 2), np.int32)
skew[:, 1] = 1
case("all tokens to two experts", 24, 8, 16, 4, 2, gated=True, cf=1.5, idx=skew, seed=4)
# A token that chooses one expert twice.
twice = np.stack([np.array([t % 4, t % 4]) for t in range(16)]).astype(np.int32)
case("a repeated choice", 16, 8, 8, 4, 2, cf=1.0, idx=twice, seed=5)


def routed_layer():
    """A MoE layer with its router: logits -> seq.route -> moe_ffn; the
    router runs on every rank, the experts split."""
    r = rng(6)
    T, D, F, E, k = 33, 16, 32, 4, 2
    x, _, _, wu, wd, wg = weights(r, T, D, F, E, k, True)
    wr = f32(r.standard_normal((D, E)))
    logits = f32(x @ wr)
    rw, ridx, _ = refs.route(logits, k)
    ry, rload = refs.moe_ffn(x, rw, ridx, wu, wd, wg, "silu", 1.25)
    tt = lambda *s: mlir_type(s, "f32")
    body = [f"%e = tensor.empty() : {tt(T, E)}",
            f"%z = arith.constant 0.0 : f32",
            f"%f = linalg.fill ins(%z : f32) outs(%e : {tt(T, E)}) -> {tt(T, E)}",
            f"%l = linalg.matmul ins(%x, %wr : {tt(T, D)}, {tt(D, E)}) outs(%f : {tt(T, E)}) -> {tt(T, E)}",
            seq_op("g", "route", ["%l"], [], "k = 2 : i64", [tt(T, E)],
                   [tt(T, k), mlir_type([T, k], "i32"), "tensor<f32>"]),
            seq_op("r", "moe_ffn", ["%x", "%g#0", "%g#1", "%wu", "%wd"], [("gate_proj", ["%wg"])],
                   "capacity_factor = 1.25 : f32",
                   [tt(T, D), tt(T, k), mlir_type([T, k], "i32"), type_of(wu), type_of(wd),
                    type_of(wg)], [tt(T, D), mlir_type([E], "i64")])]
    mlir = func([("x", tt(T, D)), ("wr", tt(D, E)), ("wu", type_of(wu)), ("wd", type_of(wd)),
                 ("wg", type_of(wg))], body, [("%r#0", tt(T, D)), ("%r#1", mlir_type([E], "i64"))])
    inputs = [x, wr, wu, wd, wg]
    for R in (2, 4):
        y, load = run(mlir, inputs, R, parallel="experts")
        c.close(f"routed layer R={R} y vs float64", y, ry, 1e-4)
        c.equal(f"routed layer R={R} load", load, rload)


def hybrid_stack():
    """examples/hybrid_stack.mlir (Mamba-2, attention, MLP and MoE layers)
    with random weights at T = 48: experts split, and experts split with
    every other op's steps (--parallel sequence+experts), equal one
    process."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "hybrid_stack.mlir")
    with open(path) as f:
        mlir = f.read()
    extra = ["-e", "main", "--random-inputs", "--dynamic-size", "48"]
    single = run(mlir, [], 0, extra)
    for mode in ("experts", "sequence+experts"):
        for R in (2, 4):
            got = run(mlir, [], R, extra, parallel=mode, timeout=600)
            c.expect(f"hybrid stack --parallel {mode} R={R}: as many results",
                     len(got) == len(single), f"{len(got)} vs {len(single)}")
            for i, (g, ref) in enumerate(zip(got, single)):
                c.close(f"hybrid stack --parallel {mode} R={R} result{i} vs one process",
                        g, ref, 1e-4)


def bad_inputs():
    x, w, idx, wu, wd, _ = weights(rng(7), 8, 4, 4, 6, 2, False)
    mlir = moe_graph(x, w, idx, wu, wd, None, "silu", 0.0)
    code, err = run(mlir, [x, w, idx, wu, wd], 4, expect_error=True, parallel="experts")
    # (Every rank fails its compile alike; mpirun may end the others before
    # they print, so one line is what is sure to come.)
    lines = [l for l in error_lines(err).splitlines() if l.startswith("error:")]
    c.expect("E = 6 over 4 ranks is an error naming the rank counts, exit non-zero",
             code != 0 and len(lines) >= 1 and
             all("seq.moe_ffn: E = 6 experts do not split over 4 ranks" in l and
                 "1, 2, 3 or 6 ranks split it" in l for l in lines), str(lines[:1]))
    bad = idx.copy()
    bad[5, 1] = 6
    code, err = run(mlir, [x, w, bad, wu, wd], 2, expect_error=True, parallel="experts")
    lines = [l for l in error_lines(err).splitlines() if "outside [0, 6)" in l]
    c.expect("an index outside [0, E) is named (before any exchange), exit non-zero",
             code != 0 and len(lines) >= 1 and "indices[5, 1]" in lines[0], str(lines[:1]))


c.run("routed layer", routed_layer)
c.run("hybrid stack", hybrid_stack)
case("bf16 tokens and experts", 37, 16, 32, 4, 2, gated=True, cf=1.0, seed=8, ranks=(2,),
     dtype="bf16")
c.run("bad inputs", bad_inputs)
c.finish()
