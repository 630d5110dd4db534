# seq.causal_conv1d against float64: bias, SiLU, width 1..5, T shorter than
# the filter, initial history, and decoding in pieces (the carried history).
# RUN: %python %s
import numpy as np
from refs import causal_conv1d
from seqc_testing import Checker, f32, func, mlir_type, rng, run_seqc, seq_op, type_of

c = Checker()


def case(Bs, T, D, W, bias=False, init=False, act="none", seed=0):
    r = rng(seed)
    x = f32(r.standard_normal((Bs, T, D)))
    w = f32(r.standard_normal((D, W)))
    b = f32(r.standard_normal(D))
    s0 = f32(r.standard_normal((Bs, D, W - 1)))
    args = [("x", type_of(x)), ("w", type_of(w))]
    inputs = [x, w]
    opt = []
    if bias:
        args.append(("b", type_of(b)))
        inputs.append(b)
        opt.append(("bias", ["%b"]))
    if init:
        args.append(("s0", type_of(s0)))
        inputs.append(s0)
        opt.append(("init", ["%s0"]))
    out = [type_of(x), mlir_type([Bs, D, W - 1])]
    line = seq_op("r", "causal_conv1d", ["%x", "%w"], opt, f"activation = #seq.activation<{act}>",
                  [t for _, t in args], out)
    y, last = run_seqc(func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])]), inputs)
    ry, rl = causal_conv1d(x, w, b if bias else None, s0 if init else None, act)
    tag = f"B={Bs} T={T} D={D} W={W} bias={bias} init={init} act={act}"
    c.close("y " + tag, y, ry)
    c.close("last " + tag, last, rl)


def decode(Bs, T, D, W, seed=21):
    """A prefill of 3 steps, then one token at a time, carrying the history."""
    r = rng(seed)
    x = f32(r.standard_normal((Bs, T, D)))
    w = f32(r.standard_normal((D, W)))
    b = f32(r.standard_normal(D))
    ts = mlir_type([Bs, D, W - 1])
    pieces = [(0, 3)] + [(t, t + 1) for t in range(3, T)]
    args = [("w", type_of(w)), ("b", type_of(b))]
    body, rets, state = [], [], None
    for n, (lo, hi) in enumerate(pieces):
        tx = mlir_type([Bs, hi - lo, D])
        args.append((f"x{n}", tx))
        opt = [("bias", ["%b"])] + ([("init", [state])] if state else [])
        tys = [tx, type_of(w), type_of(b)] + ([ts] if state else [])
        body.append(seq_op(f"r{n}", "causal_conv1d", [f"%x{n}", "%w"], opt,
                           "activation = #seq.activation<silu>", tys, [tx, ts]))
        rets.append((f"%r{n}#0", tx))
        state = f"%r{n}#1"
    rets.append((state, ts))
    outs = run_seqc(func(args, body, rets), [w, b] + [x[:, lo:hi] for lo, hi in pieces])
    ry, rl = causal_conv1d(x, w, b, None, "silu")
    c.close(f"decode y W={W}", np.concatenate(outs[:-1], axis=1), ry)
    c.close(f"decode last W={W}", outs[-1], rl)


c.run("plain", lambda: case(2, 16, 8, 4))
c.run("bias silu init", lambda: case(2, 13, 6, 4, bias=True, init=True, act="silu", seed=1))
c.run("width 1", lambda: case(1, 5, 3, 1, bias=True, seed=2))
c.run("T < W-1", lambda: case(2, 2, 5, 5, init=True, seed=3))
c.run("T=1", lambda: case(3, 1, 7, 4, init=True, act="silu", seed=4))
c.run("odd", lambda: case(1, 37, 11, 3, bias=True, act="silu", seed=5))
c.run("decode", lambda: decode(2, 9, 6, 4))
c.finish()
