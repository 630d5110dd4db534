# seq.linear_scan against a float64 recurrence: several shapes (odd sizes,
# T = 1, several state dims, reverse), the carried state across two pieces, a
# 4096-step scan, and dynamic shapes.
# RUN: %python %s
import numpy as np
from refs import linear_scan
from seqc_testing import Checker, f32, func, rng, run_seqc, seq_op, type_of, mlir_type

c = Checker()


def case(shape, reverse=False, init=True, dynamic=False, seed=0):
    r = rng(seed)
    a = f32(r.uniform(0.5, 1.0, shape))
    b = f32(r.standard_normal(shape))
    state = (shape[0],) + shape[2:]
    h0 = f32(r.standard_normal(state))
    inputs = [a, b] + ([h0] if init else [])
    tys = [mlir_type([-1] * len(x.shape)) if dynamic else type_of(x) for x in inputs]
    out = [tys[0], mlir_type([-1] * len(state)) if dynamic else type_of(h0)]
    body = [seq_op("r", "linear_scan", ["%a", "%b"], [("init", ["%h0"])] if init else [],
                   "reverse = true" if reverse else "", tys, out)]
    mlir = func(list(zip(["a", "b", "h0"], tys)), body, [("%r#0", out[0]), ("%r#1", out[1])])
    h, last = run_seqc(mlir, inputs)
    rh, rl = linear_scan(a, b, h0 if init else None, reverse)
    tag = f"shape={shape} reverse={reverse} init={init} dynamic={dynamic}"
    c.close(f"h {tag}", h, rh)
    c.close(f"last {tag}", last, rl)


def pieces(shape, split, reverse=False, seed=1):
    """Running [0, split) then [split, T) with the carried state equals the whole."""
    r = rng(seed)
    a = f32(r.uniform(0.5, 1.0, shape))
    b = f32(r.standard_normal(shape))
    first, second = (a[:, :split], b[:, :split]), (a[:, split:], b[:, split:])
    if reverse:  # a reversed scan consumes the end first
        first, second = (a[:, split:], b[:, split:]), (a[:, :split], b[:, :split])
    t1, t2 = type_of(first[0]), type_of(second[0])
    st = type_of(f32(np.zeros((shape[0],) + shape[2:])))
    attrs = "reverse = true" if reverse else ""
    body = [seq_op("p", "linear_scan", ["%a1", "%b1"], [], attrs, [t1, t1], [t1, st]),
            seq_op("q", "linear_scan", ["%a2", "%b2"], [("init", ["%p#1"])], attrs,
                   [t2, t2, st], [t2, st])]
    mlir = func([("a1", t1), ("b1", t1), ("a2", t2), ("b2", t2)], body,
                [("%p#0", t1), ("%q#0", t2), ("%q#1", st)])
    h1, h2, last = run_seqc(mlir, [first[0], first[1], second[0], second[1]])
    rh, rl = linear_scan(a, b, None, reverse)
    whole = np.concatenate([h2, h1] if reverse else [h1, h2], axis=1)
    c.close(f"pieces shape={shape} split={split} reverse={reverse}", whole, rh)
    c.close(f"pieces last shape={shape} split={split} reverse={reverse}", last, rl)


c.run("basic", lambda: case((2, 16, 8)))
c.run("odd", lambda: case((3, 37, 5), seed=2))
c.run("T=1", lambda: case((2, 1, 7), seed=3))
c.run("reverse", lambda: case((2, 19, 3), reverse=True, seed=4))
c.run("rank2", lambda: case((4, 23), seed=5))
c.run("rank4", lambda: case((2, 11, 3, 4), init=False, seed=6))
c.run("dynamic", lambda: case((2, 13, 6), dynamic=True, seed=7))
c.run("pieces", lambda: pieces((2, 29, 6), 13))
c.run("pieces reverse", lambda: pieces((2, 29, 6), 10, reverse=True))
c.run("pieces T=1 decode", lambda: pieces((1, 9, 4), 8))
# 4096 steps with decays in (0, 1]: no drift beyond the SPEC tolerance.
c.run("long reverse", lambda: case((2, 300, 5), reverse=True, seed=20))
c.run("long", lambda: case((1, 4096, 3), seed=8))
c.finish()
