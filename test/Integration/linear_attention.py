# seq.linear_attention against float64: the three decay shapes, feature maps,
# scale, normalize (causal and not), non-causal with init, T = 1, odd sizes,
# the carried state in two pieces, and RWKV-6's bonus (u) with every decay
# shape (per-key decay + bonus is RWKV-6), and its errors. The CPU's
# recurrences pass over the state's columns in blocks that fit the vector
# registers: wide values take several blocks on every host, and AOT
# libraries for x86-64-v3 (AVX2: 8 lanes, 16 registers) run those blocks
# on any host that runs the tests.
# RUN: %python %s
import numpy as np
from refs import linear_attention
from seqc_testing import Checker, f32, func, rng, run_aot, run_seqc, seq_op, type_of

c = Checker()


def make(Bs, T, H, K, V, decay_rank, seed):
    r = rng(seed)
    v = dict(q=f32(r.standard_normal((Bs, T, H, K)) * 0.5),
             k=f32(r.standard_normal((Bs, T, H, K)) * 0.5),
             v=f32(r.standard_normal((Bs, T, H, V))),
             S0=f32(r.standard_normal((Bs, H, K, V))))
    if decay_rank == 1:
        v["g"] = f32(-r.uniform(0.01, 0.5, H))
    elif decay_rank == 3:
        v["g"] = f32(-r.uniform(0.01, 0.5, (Bs, T, H)))
    elif decay_rank == 4:
        v["g"] = f32(-r.uniform(0.01, 0.5, (Bs, T, H, K)))
    v["u"] = f32(r.standard_normal((H, K)) * 0.5)
    return v


def graph(v, use_decay, use_init, attrs, prefix="", init_from=None, use_bonus=False):
    args = [(prefix + n, type_of(v[n])) for n in ("q", "k", "v")]
    opt = []
    if use_decay:
        args.append((prefix + "g", type_of(v["g"])))
        opt.append(("decay", ["%" + prefix + "g"]))
    if use_bonus:
        args.append((prefix + "u", type_of(v["u"])))
        opt.append(("bonus", ["%" + prefix + "u"]))
    if init_from:
        opt.append(("init", [init_from]))
    elif use_init:
        args.append((prefix + "S0", type_of(v["S0"])))
        opt.append(("init", ["%" + prefix + "S0"]))
    tys = [t for _, t in args] + ([type_of(v["S0"])] if init_from else [])
    Bs, T, H, _ = v["q"].shape
    out = [type_of(f32(np.zeros((Bs, T, H, v["v"].shape[-1])))), type_of(v["S0"])]
    line = seq_op(prefix + "r", "linear_attention", ["%" + prefix + n for n in ("q", "k", "v")],
                  opt, attrs, tys, out)
    return args, line, out


def case(Bs, T, H, K, V, decay_rank=0, init=False, feature="identity", causal=True,
         normalize=False, scale=1.0, seed=0, chunk=0, bonus=False, g=None, recurrent=False):
    v = make(Bs, T, H, K, V, decay_rank, seed)
    if g is not None:
        v["g"] = f32(g)
    attrs = [f"feature_map = #seq.feature_map<{feature}>", f"causal = {str(causal).lower()}",
             f"normalize = {str(normalize).lower()}", f"scale = {scale} : f32"]
    if chunk:
        attrs.append(f"chunk_size = {chunk} : i64")
    if recurrent:
        attrs.append("seq.plan = #seq.plan<recurrent>")
    args, line, out = graph(v, decay_rank > 0, init, ", ".join(attrs), use_bonus=bonus)
    o, last = run_seqc(func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])]),
                       [v[n] for n, _ in args])
    ro, rl = linear_attention(v["q"], v["k"], v["v"], v.get("g"), v["S0"] if init else None,
                              feature, causal, normalize, float(np.float32(scale)),
                              bonus=v["u"] if bonus else None)
    tag = (f"B={Bs} T={T} H={H} K={K} V={V} decay={decay_rank} init={init} phi={feature} "
           f"causal={causal} normalize={normalize} scale={scale} chunk={chunk} bonus={bonus}")
    c.close("o " + tag, o, ro)
    c.close("last " + tag, last, rl)


def aot_case(cpu, Bs, T, H, K, V, decay_rank=0, normalize=False, bonus=False,
             feature="identity", seed=0):
    """The op through an AOT library for `cpu` (strict, no fallback: the
    kernels of that level's vector width and register file) against
    float64."""
    v = make(Bs, T, H, K, V, decay_rank, seed)
    # The recurrent plan, whatever the strategy would choose for the host's
    # caches: the recurrence's blocks are what these cases are for.
    attrs = (f"feature_map = #seq.feature_map<{feature}>, "
             f"normalize = {str(normalize).lower()}, scale = 0.25 : f32, "
             "seq.plan = #seq.plan<recurrent>")
    # (The normalizer's sum is not carried: a normalized op takes no init.)
    args, line, out = graph(v, decay_rank > 0, not normalize, attrs, use_bonus=bonus)
    mlir = func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])])
    o, last = run_aot(mlir, [v[n] for n, _ in args], cpu)
    ro, rl = linear_attention(v["q"], v["k"], v["v"], v.get("g"),
                              None if normalize else v["S0"], feature, True,
                              normalize, 0.25, bonus=v["u"] if bonus else None)
    tag = (f"AOT {cpu} K={K} V={V} decay={decay_rank} normalize={normalize} "
           f"bonus={bonus} phi={feature}")
    c.close("o " + tag, o, ro)
    c.close("last " + tag, last, rl)


def pieces(Bs, T, H, K, V, decay_rank, split, feature="identity", seed=41, bonus=False):
    v = make(Bs, T, H, K, V, decay_rank, seed)
    halves = []
    for sl in (slice(0, split), slice(split, T)):
        w = dict(v)
        for n in ("q", "k", "v"):
            w[n] = v[n][:, sl]
        if decay_rank >= 3:
            w["g"] = v["g"][:, sl]
        halves.append(w)
    attrs = f"feature_map = #seq.feature_map<{feature}>"
    a1, l1, o1 = graph(halves[0], decay_rank > 0, False, attrs, prefix="p", use_bonus=bonus)
    a2, l2, o2 = graph(halves[1], decay_rank > 0, False, attrs, prefix="q", init_from="%pr#1",
                       use_bonus=bonus)
    mlir = func(a1 + a2, [l1, l2], [("%pr#0", o1[0]), ("%qr#0", o2[0]), ("%qr#1", o2[1])])
    inputs = [halves[0][n[1:]] for n, _ in a1] + [halves[1][n[1:]] for n, _ in a2]
    o1v, o2v, last = run_seqc(mlir, inputs)
    ro, rl = linear_attention(v["q"], v["k"], v["v"], v.get("g"), None, feature,
                              bonus=v["u"] if bonus else None)
    tag = f"decay={decay_rank} split={split}" + (" bonus" if bonus else "")
    c.close(f"pieces o {tag}", np.concatenate([o1v, o2v], axis=1), ro)
    c.close(f"pieces last {tag}", last, rl)


def bonus_error(attrs, seed=50):
    """bonus with normalize, or with causal = false, is an error."""
    v = make(1, 5, 2, 4, 3, 0, seed)
    args, line, out = graph(v, False, False, attrs, use_bonus=True)
    msg = run_seqc(func(args, [line], [("%r#0", out[0]), ("%r#1", out[1])]),
                   [v[n] for n, _ in args], expect_error=True)
    c.expect(f"error for bonus with {attrs}", "bonus" in msg, msg.strip()[:200])


c.run("plain", lambda: case(2, 16, 2, 8, 4))
c.run("decay H", lambda: case(1, 23, 3, 5, 7, decay_rank=1, init=True, seed=1))
c.run("decay BTH", lambda: case(2, 19, 2, 8, 8, decay_rank=3, scale=0.35, seed=2))
c.run("decay BTHK (GLA)", lambda: case(1, 17, 2, 6, 5, decay_rank=4, init=True, seed=3))
c.run("elu+1 normalized", lambda: case(2, 21, 2, 4, 6, feature="elu_plus_one", normalize=True, seed=4))
c.run("relu", lambda: case(1, 9, 3, 4, 4, feature="relu", decay_rank=3, seed=5))
c.run("non-causal normalized", lambda: case(2, 13, 2, 4, 3, feature="elu_plus_one", causal=False,
                                            normalize=True, seed=6))
c.run("non-causal with init", lambda: case(1, 11, 2, 3, 5, causal=False, init=True, seed=7))
c.run("T=1", lambda: case(3, 1, 2, 8, 8, decay_rank=4, init=True, seed=8))
# Several 32-step chunks and 32-channel key / value tiles in the GPU kernels,
# with partial tiles at every edge.
c.run("chunks + tiles", lambda: case(1, 100, 2, 40, 70, decay_rank=3, init=True, seed=20))
# The CPU's strategy takes the recurrence for a scalar decay whose state fits
# in half of L1 (as above): chunk_size asks for its chunked form.
c.run("chunk_size 32 + tiles", lambda: case(1, 100, 2, 40, 70, decay_rank=3, init=True,
                                            seed=20, chunk=32))


def steep_decays(Bs, T, H):
    """Log decays of -0.3 with steps of -30 to -80 (one step nearly forgets
    the state) and a run of +3 (the state grows by e^36): the CPU's recurrence keeps the state as
    c U with c in [2^-32, 2^32] and folds c into U where a pair of steps
    would take it out."""
    g = np.full((Bs, T, H), -0.3)
    g[:, 5] = g[:, 17] = -30.0
    g[:, 20:32] = 3.0
    g[:, 40, 0] = -80.0
    g[:, 41, 1] = -40.0
    return g


c.run("steep decays BTH, odd T", lambda: case(2, 45, 3, 16, 24, decay_rank=3, init=True,
                                              seed=60, g=steep_decays(2, 45, 3)))
c.run("steep decays H", lambda: case(1, 33, 3, 16, 16, decay_rank=1, init=True, seed=61,
                                     g=np.array([-25.0, -1e-3, 0.5])))
c.run("no decay, K=V=64, odd T", lambda: case(1, 67, 2, 64, 64, init=True, scale=0.125,
                                              seed=62))
c.run("chunks GLA", lambda: case(1, 77, 2, 36, 33, decay_rank=4, init=True, seed=21))
c.run("chunks decay H normalized", lambda: case(2, 70, 1, 33, 40, decay_rank=1,
                                                feature="elu_plus_one", normalize=True, seed=22))
c.run("chunks non-causal normalized", lambda: case(1, 90, 2, 35, 31, feature="elu_plus_one",
                                                   causal=False, normalize=True, seed=23))
c.run("pieces decay BTH", lambda: pieces(2, 27, 2, 4, 4, 3, 11))
c.run("pieces GLA", lambda: pieces(1, 15, 2, 5, 3, 4, 14, feature="elu_plus_one"))
c.run("pieces no decay", lambda: pieces(1, 12, 1, 4, 4, 0, 5))
# Short sequences take the recurrent plan on both targets (the GPU's block per
# (batch, head)): normalized with elu+1, and a per-key decay over more keys
# than the GPU's chunked kernels take (K = 160 > 128).
c.run("short normalized", lambda: case(2, 7, 2, 5, 6, feature="elu_plus_one", normalize=True,
                                       seed=30))
c.run("decode GLA K=160", lambda: case(2, 2, 2, 160, 9, decay_rank=4, init=True, seed=31))
# The strategy honours chunk_size: 16-step chunks on both targets.
c.run("chunk_size 16", lambda: case(1, 50, 2, 20, 12, decay_rank=3, init=True, seed=32,
                                    chunk=16))
# RWKV-6's bonus: the output reads the state before the step plus
# (q' . u . k') v_t, with every decay shape, feature maps, scale, init, a
# decode, 32-step chunks and the state carried in two pieces.
c.run("bonus no decay", lambda: case(2, 16, 2, 8, 4, bonus=True, seed=40))
c.run("bonus decay H init", lambda: case(1, 23, 3, 5, 7, decay_rank=1, init=True, bonus=True,
                                         seed=41))
c.run("bonus decay BTH elu+1", lambda: case(2, 19, 2, 8, 8, decay_rank=3, feature="elu_plus_one",
                                            scale=0.35, bonus=True, seed=42))
c.run("RWKV-6 (decay BTHK + bonus)", lambda: case(1, 17, 2, 6, 5, decay_rank=4, init=True,
                                                  scale=6 ** -0.5, bonus=True, seed=43))
c.run("RWKV-6 elu+1", lambda: case(2, 13, 1, 4, 6, decay_rank=4, feature="elu_plus_one",
                                   bonus=True, seed=44))
c.run("bonus T=1", lambda: case(3, 1, 2, 8, 8, decay_rank=4, init=True, bonus=True, seed=45))
c.run("bonus chunks BTH", lambda: case(1, 100, 2, 32, 32, decay_rank=3, init=True, bonus=True,
                                       seed=46))
c.run("RWKV-6 chunks", lambda: case(1, 77, 2, 36, 33, decay_rank=4, init=True, bonus=True,
                                    scale=0.25, seed=47))
c.run("pieces RWKV-6", lambda: pieces(1, 90, 2, 8, 8, 4, 37, bonus=True))
c.run("pieces bonus BTH elu+1", lambda: pieces(2, 27, 2, 4, 4, 3, 11, feature="elu_plus_one",
                                               bonus=True))
# Values wider than the register file holds in one pass: V = 100 is 7
# vectors of 16 lanes or 13 of 8 (the deferred decay's two steps carry 4
# registers a vector: two blocks on AVX-512, seven on AVX2), with a masked
# last vector; steep decays take the single steps that fold c into U.
c.run("recurrence, wide values", lambda: case(1, 37, 2, 24, 100, decay_rank=3, init=True,
                                               seed=70, recurrent=True))
c.run("recurrence GLA, wide values", lambda: case(1, 9, 2, 24, 250, decay_rank=4, init=True,
                                                   seed=71, recurrent=True))
c.run("recurrence, wide values, steep decays", lambda: case(
    2, 45, 3, 16, 100, decay_rank=3, init=True, seed=74, g=steep_decays(2, 45, 3),
    recurrent=True))
# AVX2's 16 registers: blocks of 2 value vectors for the deferred decay
# (4 blocks at V = 64, 5 at V = 70), of at most 5 for GLA, the normalizer
# and the bonus (4 + 4 at V = 64, 4 + 5 at V = 70, a masked last vector).
for name, kw in (("scalar decay", dict(decay_rank=3)),
                 ("GLA", dict(decay_rank=4)),
                 ("normalized elu+1", dict(decay_rank=1, normalize=True,
                                           feature="elu_plus_one")),
                 ("RWKV-6", dict(decay_rank=4, bonus=True))):
    c.run(f"AOT x86-64-v3 {name} K=V=64",
          lambda kw=kw: aot_case("x86-64-v3", 1, 21, 2, 64, 64, seed=72, **kw))
    c.run(f"AOT x86-64-v3 {name} K=20 V=70",
          lambda kw=kw: aot_case("x86-64-v3", 2, 15, 1, 20, 70, seed=73, **kw))
c.run("bonus with normalize", lambda: bonus_error("normalize = true"))
c.run("bonus non-causal", lambda: bonus_error("causal = false"))
c.finish()
