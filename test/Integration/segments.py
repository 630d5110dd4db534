# Packed variable-length batches (segments) and state checkpoints
# (checkpoint_every) on every op that takes them (SPEC section 1), against
# float64 numpy run on each sequence alone: lengths 0, 1, chunk sizes +- 1
# and boundaries inside chunks, with and without init, reverse scans,
# attention with its own key offsets (a KV cache per sequence), dynamic
# shapes, the unpacked checkpoint form, and the run-time offset checks.
# RUN: %python %s
import math

import numpy as np
import refs
from seqc_testing import (Checker, f32, func, mlir_type, rng, run_seqc, seq_op,
                          type_of)

c = Checker()

# Lengths with zero-length sequences, 1, 16 +- 1 and 64 +- 1 (the CPU's and
# the GPU's chunk sizes), so that in one packed tensor boundaries fall inside
# every chunk grid.
LENGTHS = [0, 1, 15, 17, 65, 3, 0, 63, 16, 2]


class Op:
    """One op: its operands (step tensors are B x T x ..., parameters are
    shared), its state shape, and a float64 reference on one sequence."""

    def __init__(self, name, operands, state, ref, steps_out=1, attrs="",
                 reverse=False):
        self.name, self.operands, self.state = name, operands, state
        self.ref, self.steps_out, self.attrs = ref, steps_out, attrs
        self.reverse = reverse


def step(kw, *shape, scale=1.0, shift=0.0):
    """A B x T x shape operand, `kw` None for a required one."""
    return ("step", kw, shape, scale, shift)


def param(kw, *shape, scale=1.0, shift=0.0):
    return ("param", kw, shape, scale, shift)


def draw(op, r, Bs, T):
    arrays = []
    for kind, _, shape, scale, shift in op.operands:
        full = (Bs, T) + shape if kind == "step" else shape
        arrays.append(f32(r.standard_normal(full) * scale + shift))
    return arrays


def window(op, arrays, b, lo, hi):
    return [a[b:b + 1, lo:hi] if kind == "step" else a
            for (kind, *_), a in zip(op.operands, arrays)]


def op_text(op, names, types, state_name, state_type, segments, out_types, every):
    required = [n for (kind, kw, *_), n in zip(op.operands, names) if kw is None]
    optional = [(kw, [n]) for (kind, kw, *_), n in zip(op.operands, names) if kw is not None]
    in_types = [t for (kind, kw, *_), t in zip(op.operands, types) if kw is None]
    in_types += [t for (kind, kw, *_), t in zip(op.operands, types) if kw is not None]
    if state_name:
        optional.append(("init", [state_name]))
        in_types.append(state_type)
    if segments:
        optional.append(("segments", ["%cu"]))
        in_types.append(mlir_type([None], "i32") if segments == "dynamic"
                        else type_of(np.zeros(segments, np.int32)))
    attrs = [a for a in [op.attrs, f"checkpoint_every = {every}" if every else ""] if a]
    return seq_op("r", op.name, required, optional, ", ".join(attrs), in_types, out_types)


def reference(op, arrays, b, lo, hi, s0, every):
    """Outputs, last and checkpoints of steps [lo, hi) of row b alone."""
    outs = op.ref(window(op, arrays, b, lo, hi), s0)
    steps, last = outs[:-1], outs[-1]
    checkpoints = []
    n = hi - lo
    for j in range(math.ceil(n / every) if every else 0):
        m = min((j + 1) * every, n)
        part = (lo + n - m, hi) if op.reverse else (lo, lo + m)
        checkpoints.append(op.ref(window(op, arrays, b, *part), s0)[-1])
    return steps, last, checkpoints


def packed(op, lengths, init=True, every=0, dynamic=False, seed=0):
    r = rng(seed)
    T, S = sum(lengths), len(lengths)
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    arrays = draw(op, r, 1, T)
    s0 = f32(r.standard_normal((S,) + op.state)) if init and op.state else None
    names = [f"%x{i}" for i in range(len(arrays))]
    types = [mlir_type([1, None] + list(a.shape[2:]) if dynamic and kind == "step"
                       else a.shape)
             for (kind, *_), a in zip(op.operands, arrays)]
    state_type = mlir_type([None if dynamic else S] + list(op.state))
    steps_types = [mlir_type([1, None if dynamic else T] + list(s)) for s in op.steps_out_shapes]
    out = list(steps_types)
    if op.state:
        out.append(state_type)
    longest = max(lengths) if lengths else 0
    if every:
        out.append(mlir_type([None if dynamic else S,
                              None if dynamic else math.ceil(longest / every)] + list(op.state)))
    args = [(n[1:], t) for n, t in zip(names, types)]
    inputs = list(arrays)
    if s0 is not None:
        args.append(("s0", state_type))
        inputs.append(s0)
    args.append(("cu", mlir_type([None if dynamic else S + 1], "i32")))
    inputs.append(cu)
    line = op_text(op, names, types, "%s0" if s0 is not None else None, state_type,
                   "dynamic" if dynamic else S + 1, out, every)
    results = [(f"%r#{i}" if len(out) > 1 else "%r", t) for i, t in enumerate(out)]
    got = run_seqc(func(args, [line], results), inputs)

    want_steps = [np.zeros((1, T) + tuple(s)) for s in op.steps_out_shapes]
    want_last = np.zeros((S,) + op.state)
    want_ck = np.zeros((S, math.ceil(longest / every) if every else 0) + op.state)
    for s in range(S):
        lo, hi = int(cu[s]), int(cu[s + 1])
        init_s = s0[s:s + 1] if s0 is not None else None
        if hi == lo:
            want_last[s] = 0.0 if init_s is None else init_s[0]
            continue
        steps, last, ck = reference(op, arrays, 0, lo, hi, init_s, every)
        for w, y in zip(want_steps, steps):
            w[:, lo:hi] = y
        if op.state:
            want_last[s] = last[0]
        for j, state in enumerate(ck):
            want_ck[s, j] = state[0]
    tag = f"{op.name} lengths={lengths} init={s0 is not None} every={every} dynamic={dynamic}"
    for i, w in enumerate(want_steps):
        c.close(f"output {i} " + tag, got[i], w)
    if op.state:
        c.close("last " + tag, got[len(want_steps)], want_last)
    if every:
        c.close("checkpoints " + tag, got[-1], want_ck)


def unpacked_checkpoints(op, Bs, T, every, seed=1):
    r = rng(seed)
    arrays = draw(op, r, Bs, T)
    s0 = f32(r.standard_normal((Bs,) + op.state))
    names = [f"%x{i}" for i in range(len(arrays))]
    types = [type_of(a) for a in arrays]
    state_type = mlir_type([Bs] + list(op.state))
    out = [mlir_type([Bs, T] + list(s)) for s in op.steps_out_shapes]
    out += [state_type, mlir_type([Bs, math.ceil(T / every)] + list(op.state))]
    args = [(n[1:], t) for n, t in zip(names, types)] + [("s0", state_type)]
    line = op_text(op, names, types, "%s0", state_type, None, out, every)
    got = run_seqc(func(args, [line], [(f"%r#{i}", t) for i, t in enumerate(out)]),
                   arrays + [s0])
    tag = f"{op.name} B={Bs} T={T} every={every}"
    for b in range(Bs):
        steps, last, ck = reference(op, arrays, b, 0, T, s0[b:b + 1], every)
        for i, y in enumerate(steps):
            c.close(f"output {i} row {b} " + tag, got[i][b:b + 1], y)
        c.close(f"last row {b} " + tag, got[len(steps)][b], last[0])
        c.close(f"checkpoints row {b} " + tag, got[-1][b], np.stack([s[0] for s in ck]))


# The ops, with operand scales that keep the recurrences bounded.
H, P, N, K, V, D, W = 2, 4, 8, 8, 4, 6, 4


def with_outs(op, *shapes):
    op.steps_out_shapes = shapes
    return op


OPS = [
    with_outs(Op("linear_scan", [step(None, D, scale=0.3, shift=0.6), step(None, D)], (D,),
                 lambda a, s0: refs.linear_scan(a[0], a[1], s0)), (D,)),
    with_outs(Op("linear_scan", [step(None, D, scale=0.3, shift=0.6), step(None, D)], (D,),
                 lambda a, s0: refs.linear_scan(a[0], a[1], s0, reverse=True),
                 attrs="reverse = true", reverse=True), (D,)),
    with_outs(Op("selective_scan",
                 [step(None, D, scale=0.5), step(None, D, scale=0.5), param(None, D, N, scale=0.5, shift=-1.0),
                  step(None, 1, N), step(None, 1, N), param("skip", D)],
                 (D, N),
                 lambda a, s0: refs.selective_scan(*a[:5], D=a[5], h0=s0, softplus_dt=True),
                 attrs="delta_softplus = true"), (D,)),
    with_outs(Op("ssd",
                 [step(None, H, P), step(None, H, scale=0.5), param(None, H, scale=0.5, shift=-1.0),
                  step(None, 1, N), step(None, 1, N), param("skip", H)],
                 (H, P, N),
                 lambda a, s0: refs.ssd(*a[:5], D=a[5], h0=s0, softplus_dt=True),
                 attrs="dt_softplus = true"), (H, P)),
    with_outs(Op("linear_attention",
                 [step(None, H, K, scale=0.3), step(None, H, K, scale=0.3), step(None, H, V),
                  step("decay", H, scale=0.1, shift=-0.2)],
                 (H, K, V),
                 lambda a, s0: refs.linear_attention(a[0], a[1], a[2], decay=a[3], S0=s0)),
              (H, V)),
    with_outs(Op("delta_rule",
                 [step(None, 1, K), step(None, 1, K), step(None, H, V),
                  step(None, H, scale=0.2, shift=0.5), step("decay", H, scale=0.1, shift=-0.2)],
                 (H, K, V),
                 lambda a, s0: refs.delta_rule(a[0], a[1], a[2], a[3], g=a[4], S0=s0,
                                               qk_l2norm=True),
                 attrs="qk_l2norm = true"), (H, V)),
    with_outs(Op("generalized_delta_rule",
                 [step(None, H, K, scale=0.3), step(None, H, K, scale=0.3), step(None, H, V),
                  step(None, H, K, scale=0.1), step(None, H, K, scale=0.1),
                  step("decay", H, K, scale=0.1, shift=-0.3)],
                 (H, K, V),
                 lambda a, s0: refs.generalized_delta_rule(*a[:5], g=a[5], S0=s0)), (H, V)),
    with_outs(Op("causal_conv1d", [step(None, D), param(None, D, W), param("bias", D)],
                 (D, W - 1),
                 lambda a, s0: refs.causal_conv1d(a[0], a[1], a[2], s0, "silu"),
                 attrs="activation = #seq.activation<silu>"), (D,)),
]

for i, op in enumerate(OPS):
    c.run(f"{op.name} packed", lambda op=op, i=i: packed(op, LENGTHS, seed=i))
    c.run(f"{op.name} packed, no init", lambda op=op, i=i: packed(op, LENGTHS, init=False,
                                                                    seed=10 + i))
    c.run(f"{op.name} packed, checkpoints", lambda op=op, i=i: packed(op, LENGTHS, every=16,
                                                                        seed=20 + i))
    c.run(f"{op.name} unpacked checkpoints", lambda op=op, i=i: unpacked_checkpoints(
        op, 2, 37, 8, seed=30 + i))

# Dynamic shapes (T, S unknown when compiled) and a single sequence.
c.run("ssd dynamic", lambda: packed(OPS[3], LENGTHS, every=5, dynamic=True, seed=40))
c.run("delta_rule dynamic", lambda: packed(OPS[5], [3, 0, 70], dynamic=True, seed=41))
c.run("linear_scan one sequence", lambda: packed(OPS[0], [29], every=29, seed=42))
# A checkpoint_every near the index range: one slot, no overflow.
c.run("linear_scan huge checkpoint_every", lambda: packed(OPS[0], LENGTHS, every=2**62, seed=44))
c.run("linear_scan huge checkpoint_every unpacked", lambda: unpacked_checkpoints(
    OPS[0], 2, 37, 2**62, seed=45))
# Checkpoints every chunk (the kernels' chunk sizes), a length not a multiple.
c.run("ssd checkpoints every 64", lambda: unpacked_checkpoints(OPS[3], 1, 200, 64, seed=43))


# associative_scan (no state): the running max restarts at each boundary.
def assoc_packed(lengths, seed=50):
    r = rng(seed)
    T = sum(lengths)
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    x = f32(r.standard_normal((1, T, 3)))
    t = type_of(x)
    text = (f"func.func @main(%x: {t}, %cu: {type_of(cu)}) -> {t} {{\n"
            f"  %r = seq.associative_scan %x segments(%cu) {{dim = 1 : i64}}"
            f" : ({t}, {type_of(cu)}) -> {t} {{\n"
            "  ^bb0(%p: f32, %n: f32):\n"
            "    %m = arith.maximumf %p, %n : f32\n"
            "    seq.yield %m : f32\n"
            "  }\n"
            f"  return %r : {t}\n}}\n")
    got = run_seqc(text, [x, cu])[0]
    want = np.zeros_like(x)
    for s in range(len(lengths)):
        lo, hi = cu[s], cu[s + 1]
        want[:, lo:hi] = np.maximum.accumulate(x[:, lo:hi], axis=1)
    c.close(f"associative_scan max lengths={lengths}", got, want)


c.run("associative_scan packed", lambda: assoc_packed(LENGTHS))


# attention: varlen flash attention, keys packed like the queries or by
# their own offsets (a KV cache per sequence, queries at its end).
def attention_packed(q_lengths, k_lengths=None, window=0, seed=60):
    r = rng(seed)
    Hq, Hk, Kd = 4, 2, 8
    T = sum(q_lengths)
    cu = np.concatenate([[0], np.cumsum(q_lengths)]).astype(np.int32)
    kl = q_lengths if k_lengths is None else k_lengths
    Sk = sum(kl)
    cuk = np.concatenate([[0], np.cumsum(kl)]).astype(np.int32)
    q = f32(r.standard_normal((1, T, Hq, Kd)))
    k = f32(r.standard_normal((1, Sk, Hk, Kd)))
    v = f32(r.standard_normal((1, Sk, Hk, Kd)))
    groups = ["segments(%cu)"] + (["kv_segments(%cuk)"] if k_lengths else [])
    in_types = [type_of(q), type_of(k), type_of(v), type_of(cu)] + (
        [type_of(cuk)] if k_lengths else [])
    args = ", ".join([f"%q: {type_of(q)}", f"%k: {type_of(k)}", f"%v: {type_of(v)}",
                      f"%cu: {type_of(cu)}"] + ([f"%cuk: {type_of(cuk)}"] if k_lengths else []))
    attrs = f" {{window = {window} : i64}}" if window else ""
    text = (f"func.func @main({args}) -> {type_of(q)} {{\n"
            f"  %o = seq.attention %q, %k, %v {' '.join(groups)}{attrs}"
            f" : ({', '.join(in_types)}) -> {type_of(q)}\n"
            f"  return %o : {type_of(q)}\n}}\n")
    got = run_seqc(text, [q, k, v, cu] + ([cuk] if k_lengths else []))[0]
    want = np.zeros_like(q, dtype=np.float64)
    for s in range(len(q_lengths)):
        lo, hi, klo, khi = cu[s], cu[s + 1], cuk[s], cuk[s + 1]
        # A query that sees no key (its sequence has none) gives 0.
        if hi > lo and khi > klo:
            want[:, lo:hi] = refs.attention(q[:, lo:hi], k[:, klo:khi], v[:, klo:khi],
                                            window=window)
    c.close(f"attention q={q_lengths} k={k_lengths} window={window}", got, want)


c.run("attention packed", lambda: attention_packed(LENGTHS))
c.run("attention packed window", lambda: attention_packed(LENGTHS, window=5, seed=61))
c.run("attention kv_segments", lambda: attention_packed(
    [1, 4, 0, 17, 2], [30, 4, 6, 70, 2], seed=62))
c.run("attention kv_segments, a sequence without keys", lambda: attention_packed(
    [3, 2, 5], [4, 0, 9], seed=63))


# Run-time checks: each bad offset vector is an error naming the op and
# the value, with exit status 1 on every pipeline.
def bad_offsets(cu, lengths_total, batch=1, init_rows=None, want=""):
    r = rng(70)
    T = lengths_total
    x = f32(r.standard_normal((batch, T, D)))
    a = f32(r.uniform(0.5, 1.0, (batch, T, D)))
    cu = np.asarray(cu, np.int32)
    dyn = mlir_type([None, None, D])
    st = mlir_type([None, D])
    args = [("a", dyn), ("b", dyn), ("cu", mlir_type([None], "i32"))]
    inputs = [a, x, cu]
    opt = []
    if init_rows is not None:
        args.append(("s0", st))
        inputs.append(f32(np.zeros((init_rows, D))))
        opt = [("init", ["%s0"])]
    opt.append(("segments", ["%cu"]))
    tys = [dyn, dyn] + ([st] if init_rows is not None else []) + [mlir_type([None], "i32")]
    line = seq_op("r", "linear_scan", ["%a", "%b"], opt, "", tys, [dyn, st])
    msg = run_seqc(func(args, [line], [("%r#0", dyn), ("%r#1", st)]), inputs,
                   expect_error=True)
    c.expect(f"error for cu={list(cu)}: {msg!r}", "seq.linear_scan" in msg and want in msg)


c.run("offsets not from 0", lambda: bad_offsets([1, 3, 5], 5,
                                               want="segments must start at 0, but segments[0] = 1"))
c.run("offsets decrease", lambda: bad_offsets([0, 4, 2, 5], 5,
                                             want="must not decrease, but segments[2] = 2 < segments[1] = 4"))
c.run("offsets short of T", lambda: bad_offsets([0, 2, 4], 5,
                                               want="must end at the packed length 5, but segments[2] = 4"))
c.run("offsets past T", lambda: bad_offsets([0, 2, 9], 5,
                                           want="must end at the packed length 5, but segments[2] = 9"))
c.run("B != 1", lambda: bad_offsets([0, 2, 5], 5, batch=2,
                                    want="segments requires B = 1 (the sequences are packed along T), but B = 2"))
c.run("init rows", lambda: bad_offsets([0, 2, 5], 5, init_rows=3,
                                       want="dimension 0 (S+1) of segments is 3 but init has S = 3"))
c.run("no offsets", lambda: bad_offsets([], 0, want="needs at least one offset"))


def keys_not_packed_like_queries():
    """Attention with segments but no kv_segments: the keys must have the
    queries' length (a dynamic mismatch is caught at run time)."""
    r = rng(71)
    q = f32(r.standard_normal((1, 8, 2, 4)))
    k = f32(r.standard_normal((1, 5, 2, 4)))
    cu = np.array([0, 3, 8], np.int32)
    t = mlir_type([1, None, 2, 4])
    cut = mlir_type([None], "i32")
    text = (f"func.func @main(%q: {t}, %k: {t}, %cu: {cut}) -> {t} {{\n"
            f"  %o = seq.attention %q, %k, %k segments(%cu) : ({t}, {t}, {t}, {cut}) -> {t}\n"
            f"  return %o : {t}\n}}\n")
    msg = run_seqc(text, [q, k, cu], expect_error=True)
    c.expect(f"error for keys shorter than the queries: {msg!r}",
             "seq.attention" in msg and "the keys have 5 steps and the queries 8" in msg)


c.run("keys not packed like the queries", keys_not_packed_like_queries)
c.finish()
