# seq.moe_ffn against numpy: plain and gated (SwiGLU) experts, silu/gelu/relu,
# capacity with overflow (all tokens to one expert), capacity_factor = 0, and
# out-of-range expert indices as run-time errors.
# RUN: %python %s
import numpy as np
from refs import moe_ffn
from seqc_testing import Checker, f32, func, mlir_type, rng, run_seqc, seq_op, type_of

c = Checker()


def graph(x, w, idx, wu, wd, wg, act, cf):
    args = [("x", type_of(x)), ("w", type_of(w)), ("i", type_of(idx)), ("wu", type_of(wu)),
            ("wd", type_of(wd))]
    opt = []
    if wg is not None:
        args.append(("wg", type_of(wg)))
        opt.append(("gate_proj", ["%wg"]))
    out = [type_of(x), mlir_type([wu.shape[0]], "i64")]
    line = seq_op("r", "moe_ffn", ["%x", "%w", "%i", "%wu", "%wd"], opt,
                  f"activation = #seq.activation<{act}>, capacity_factor = {cf} : f32",
                  [t for _, t in args], out)
    return func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])])


def case(T, D, F, E, k, gated=False, act="silu", cf=0.0, idx=None, seed=0):
    r = rng(seed)
    x = f32(r.standard_normal((T, D)))
    w = f32(r.uniform(0.0, 1.0, (T, k)))
    if idx is None:
        idx = np.stack([r.permutation(E)[:k] for _ in range(T)]).astype(np.int32)
    wu = f32(r.standard_normal((E, D, F)) / np.sqrt(D))
    wd = f32(r.standard_normal((E, F, D)) / np.sqrt(F))
    wg = f32(r.standard_normal((E, D, F)) / np.sqrt(D)) if gated else None
    inputs = [x, w, idx, wu, wd] + ([wg] if gated else [])
    y, load = run_seqc(graph(x, w, idx, wu, wd, wg, act, cf), inputs)
    ry, rload = moe_ffn(x, w, idx, wu, wd, wg, act, cf)
    tag = f"T={T} D={D} F={F} E={E} k={k} gated={gated} act={act} cf={cf}"
    c.close("y " + tag, y, ry)
    c.equal("load " + tag, load, rload)
    return load


def overflow():
    T, E, k = 12, 4, 2
    idx = np.zeros((T, k), dtype=np.int32)
    idx[:, 1] = 1  # every token's choices: expert 0 then expert 1
    load = case(T, 8, 16, E, k, gated=True, cf=1.0, idx=idx, seed=5)
    cap = int(np.ceil(1.0 * k * T / E))
    c.equal("overflow: loads are capped", load, np.array([cap, cap, 0, 0], np.int64))


def bad_index(value):
    T, D, F, E, k = 4, 4, 4, 3, 2
    r = rng(7)
    idx = np.zeros((T, k), np.int32)
    idx[2, 1] = value
    x, w = f32(r.standard_normal((T, D))), f32(r.uniform(0, 1, (T, k)))
    wu, wd = f32(r.standard_normal((E, D, F))), f32(r.standard_normal((E, F, D)))
    err = run_seqc(graph(x, w, idx, wu, wd, None, "silu", 0.0), [x, w, idx, wu, wd],
                   expect_error=True)
    # The message names the op and its source line.
    line = err.strip()
    expected = f": expert index {value} at indices[2, 1] is outside [0, 3)"
    ok = (line.startswith("error: seq.moe_ffn at ") and "graph.mlir:" in line
          and line.endswith(expected))
    c.expect(f"index {value} is a run-time error", ok, repr(line))


c.run("plain silu", lambda: case(16, 8, 12, 4, 2))
c.run("gated silu", lambda: case(13, 6, 10, 5, 2, gated=True, seed=1))
c.run("gelu", lambda: case(9, 4, 7, 3, 1, act="gelu", seed=2))
c.run("relu gated", lambda: case(11, 5, 6, 6, 3, gated=True, act="relu", seed=3))
c.run("capacity 1.25", lambda: case(24, 4, 8, 4, 2, cf=1.25, seed=4))
# Several 32-row tiles of expert-sorted choices (tiles spanning experts) and
# 32-wide D / F tiles in the GPU kernels, with drops.
c.run("tiles", lambda: case(100, 70, 50, 6, 2, gated=True, cf=1.0, seed=20))
c.run("tiles ungated", lambda: case(67, 33, 65, 3, 3, act="gelu", seed=21))
c.run("overflow", overflow)
c.run("index too large", lambda: bad_index(3))
c.run("negative index", lambda: bad_index(-1))
c.finish()
