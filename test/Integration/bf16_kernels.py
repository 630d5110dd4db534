# bf16 operands with f32 states through the GPU kernels (emulated on the
# host, so this runs everywhere): the graphs of bench/gpu.sh at small sizes,
# against float64 numpy on the bf16-rounded inputs, within the SPEC's bf16
# bound (relative RMS error <= 1e-2). The three pipelines must also agree.
# RUN: %python %s
import math
import os
import sys

import numpy as np
from refs import attention, linear_attention, linear_scan, moe_ffn, selective_scan, ssd
from seqc_testing import Checker, bf16, f16, rel_rms, rng, run_seqc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import gpu_graphs  # noqa: E402

c = Checker()


def check(name, got, ref):
    err = rel_rms(got, ref)
    c.expect(f"{name}: relative RMS {err:.2e} <= 1e-2", err <= 1e-2)


def case_linear_scan():
    r = rng(11)
    a = r.uniform(0.8, 1.0, (2, 300, 70)).astype(np.float32)
    b = r.standard_normal((2, 300, 70)).astype(np.float32)
    h, last = run_seqc(gpu_graphs.linear_scan(2, 300, 70), [a, b], tol=2e-2,
                       results_of="cuda-emulated")
    rh, rlast = linear_scan(bf16(a), bf16(b))
    check("linear_scan h", h, rh)
    check("linear_scan last", last, rlast)


def case_selective_scan():
    r = rng(12)
    B, T, D, N = 2, 150, 32, 16
    u = r.standard_normal((B, T, D)).astype(np.float32)
    dl = r.uniform(-3, 0, (B, T, D)).astype(np.float32)
    A = (-np.exp(r.uniform(-1, 1, (D, N)))).astype(np.float32)
    Bm = r.standard_normal((B, T, 1, N)).astype(np.float32)
    Cm = r.standard_normal((B, T, 1, N)).astype(np.float32)
    y, last = run_seqc(gpu_graphs.selective_scan(B, T, D, N), [u, dl, A, Bm, Cm], tol=2e-2,
                       results_of="cuda-emulated")
    ry, rlast = selective_scan(bf16(u), bf16(dl), A, bf16(Bm), bf16(Cm), softplus_dt=True)
    check("selective_scan y", y, ry)
    check("selective_scan last", last, rlast)


def case_ssd(B=1, T=130, H=2, P=16, N=32, seed=13):
    r = rng(seed)
    x = r.standard_normal((B, T, H, P)).astype(np.float32)
    dt = r.uniform(-3, 0.5, (B, T, H)).astype(np.float32)
    A = (-np.exp(r.uniform(-1, 1, H))).astype(np.float32)
    Bm = r.standard_normal((B, T, 1, N)).astype(np.float32)
    Cm = r.standard_normal((B, T, 1, N)).astype(np.float32)
    y, last = run_seqc(gpu_graphs.ssd(B, T, H, P, N), [x, dt, A, Bm, Cm], tol=2e-2,
                       results_of="cuda-emulated")
    ry, rlast = ssd(bf16(x), bf16(dt), A, bf16(Bm), bf16(Cm), softplus_dt=True)
    check(f"ssd y (B={B} T={T} H={H} P={P} N={N})", y, ry)
    check(f"ssd last (B={B} T={T} H={H} P={P} N={N})", last, rlast)


def mma_matmul(elt, M, K, N, batch=None, out="f32", seed=20):
    """A matmul of `elt` operands (bf16 or f16: tensor-core tiles, mma.sync
    m16n8k16) whose result is `out`, against float64 numpy on the rounded
    operands. Products are exact in f32 and summed in f32, so the results
    must agree far more closely than the bf16 bound; a misplaced fragment
    value would be off by O(1)."""
    r = rng(seed)
    lead = [batch] if batch else []
    a = r.standard_normal(lead + [M, K]).astype(np.float32)
    b = r.standard_normal(lead + [K, N]).astype(np.float32)
    init = r.standard_normal(lead + [M, N]).astype(np.float32)
    t = lambda shape, e="f32": f"tensor<{'x'.join(map(str, shape))}x{e}>"
    op = "linalg.batch_matmul" if batch else "linalg.matmul"
    ta, tb, tc = lead + [M, K], lead + [K, N], lead + [M, N]
    lines = [f"func.func @main(%a: {t(ta)}, %b: {t(tb)}, %c: {t(tc)}) -> {t(tc)} {{",
             f"  %an = arith.truncf %a : {t(ta)} to {t(ta, elt)}",
             f"  %bn = arith.truncf %b : {t(tb)} to {t(tb, elt)}"]
    if out == "f32":
        lines.append(f"  %r = {op} ins(%an, %bn : {t(ta, elt)}, {t(tb, elt)}) "
                     f"outs(%c : {t(tc)}) -> {t(tc)}")
    else:
        lines += [f"  %cn = arith.truncf %c : {t(tc)} to {t(tc, out)}",
                  f"  %rn = {op} ins(%an, %bn : {t(ta, elt)}, {t(tb, elt)}) "
                  f"outs(%cn : {t(tc, out)}) -> {t(tc, out)}",
                  f"  %r = arith.extf %rn : {t(tc, out)} to {t(tc)}"]
    lines += [f"  return %r : {t(tc)}", "}", ""]
    (got,) = run_seqc("\n".join(lines), [a, b, init], tol=2e-2,
                      results_of="cuda-emulated")
    rnd = bf16 if elt == "bf16" else f16
    cin = init if out == "f32" else (bf16 if out == "bf16" else f16)(init)
    ref = cin.astype(np.float64) + np.matmul(rnd(a).astype(np.float64), rnd(b))
    name = f"{op} {elt} {'x'.join(map(str, lead + [M, K, N]))} -> {out}"
    if out == "f32":
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        c.expect(f"{name}: max error {err:.1e} <= 1e-5 of max |ref|", err <= 1e-5)
    else:
        check(name, got, ref)


def case_mma():
    # One tile; partial tiles at every edge, K not a multiple of 16 or 32;
    # several tiles each way; batches; narrow results.
    mma_matmul("bf16", 64, 32, 64)
    mma_matmul("bf16", 100, 70, 90)
    mma_matmul("bf16", 200, 150, 130, seed=21)
    mma_matmul("f16", 100, 70, 90, seed=22)
    mma_matmul("bf16", 33, 17, 41, batch=3, seed=23)
    mma_matmul("bf16", 70, 40, 66, out="bf16", seed=24)
    mma_matmul("f16", 70, 40, 66, batch=2, out="f16", seed=25)
    # The CPU's B packed once (more rows than a task's block, even on
    # AVX-512), widened to f32 in its panels.
    mma_matmul("bf16", 1040, 300, 70, seed=26)


def case_moe():
    # Tensor-core grouped GEMMs: several 64-row tiles, experts whose rows end
    # mid-tile (padding rows), an expert with no rows, columns past F and D.
    r = rng(14)
    T, D, F, E, k = 150, 70, 90, 5, 2
    x = r.standard_normal((T, D)).astype(np.float32)
    w = r.uniform(0.1, 1.0, (T, k)).astype(np.float32)
    idx = np.stack([r.integers(0, E - 1, T), r.integers(0, E - 1, T)], 1).astype(np.int32)
    idx[:, 1] = np.where(idx[:, 1] == idx[:, 0], (idx[:, 0] + 1) % (E - 1), idx[:, 1])
    up = (r.standard_normal((E, D, F)) / np.sqrt(D)).astype(np.float32)
    down = (r.standard_normal((E, F, D)) / np.sqrt(F)).astype(np.float32)
    gate = (r.standard_normal((E, D, F)) / np.sqrt(D)).astype(np.float32)
    for cf in (0.0, 1.1):
        y, load = run_seqc(gpu_graphs.moe_ffn(T, D, F, E, k, capacity_factor=cf),
                           [x, w, idx, up, down, gate], tol=2e-2, results_of="cuda-emulated")
        ry, rload = moe_ffn(bf16(x), bf16(w), idx, bf16(up), bf16(down), bf16(gate),
                            capacity_factor=cf)
        check(f"moe_ffn y (capacity factor {cf})", y, ry)
        c.expect(f"moe_ffn load (capacity factor {cf}): {list(load)}",
                 np.array_equal(load, rload) and rload[E - 1] == 0 and
                 (cf == 0 or rload.max() == math.ceil(float(np.float32(cf)) * k * T / E)))


def attention_case(Bs, T, S, H, Hkv, K, V, causal=True, window=0, elt="bf16", seed=30):
    """Attention on bf16 (or f16) q, k, v: tensor-core scores and P V."""
    r = rng(seed)
    q = r.standard_normal((Bs, T, H, K)).astype(np.float32)
    k = r.standard_normal((Bs, S, Hkv, K)).astype(np.float32)
    v = r.standard_normal((Bs, S, Hkv, V)).astype(np.float32)
    t = lambda a, e="f32": f"tensor<{'x'.join(map(str, a.shape))}x{e}>"
    to = f"tensor<{Bs}x{T}x{H}x{V}x{{}}>"
    mlir = "\n".join([
        f"func.func @main(%q: {t(q)}, %k: {t(k)}, %v: {t(v)}) -> {to.format('f32')} {{",
        f"  %qn = arith.truncf %q : {t(q)} to {t(q, elt)}",
        f"  %kn = arith.truncf %k : {t(k)} to {t(k, elt)}",
        f"  %vn = arith.truncf %v : {t(v)} to {t(v, elt)}",
        f"  %o = seq.attention %qn, %kn, %vn {{causal = {str(causal).lower()}, "
        f"window = {window} : i64}} : ({t(q, elt)}, {t(k, elt)}, {t(v, elt)}) -> "
        f"{to.format(elt)}",
        f"  %of = arith.extf %o : {to.format(elt)} to {to.format('f32')}",
        f"  return %of : {to.format('f32')}", "}", ""])
    (o,) = run_seqc(mlir, [q, k, v], tol=2e-2, results_of="cuda-emulated")
    rnd = bf16 if elt == "bf16" else f16
    check(f"attention {elt} B={Bs} T={T} S={S} H={H} Hkv={Hkv} K={K} V={V} "
          f"causal={causal} window={window}", o, attention(rnd(q), rnd(k), rnd(v), causal, window))


def case_attention():
    # Several query, key, channel and V tiles, partial at every edge; GQA and
    # a KV cache; windows; non-causal; f16; V wider than one 64-column tile.
    attention_case(1, 100, 150, 4, 2, 40, 70)
    attention_case(2, 70, 70, 2, 2, 64, 128, seed=31)
    attention_case(1, 90, 90, 2, 1, 32, 32, window=20, seed=32)
    attention_case(1, 33, 50, 2, 2, 16, 24, causal=False, seed=33)
    attention_case(1, 40, 40, 2, 2, 48, 40, elt="f16", seed=34)


def linear_attention_case(Bs, T, H, K, V, decay_rank=3, causal=True, normalize=False,
                          feature="identity", seed=40):
    """Linear attention on bf16 q, k, v (and decay): tensor-core chunk
    states, q' k'^T (scalar decays) and G v."""
    r = rng(seed)
    q = (0.5 * r.standard_normal((Bs, T, H, K))).astype(np.float32)
    k = (0.5 * r.standard_normal((Bs, T, H, K))).astype(np.float32)
    v = r.standard_normal((Bs, T, H, V)).astype(np.float32)
    g = {0: None, 3: -r.uniform(0.01, 0.5, (Bs, T, H)),
         4: -r.uniform(0.01, 0.5, (Bs, T, H, K))}[decay_rank]
    ins = [q, k, v] + ([g.astype(np.float32)] if g is not None else [])
    t = lambda a, e="f32": f"tensor<{'x'.join(map(str, a.shape))}x{e}>"
    names = ["q", "k", "v", "g"][:len(ins)]
    lines = [f"func.func @main({', '.join(f'%{n}: {t(a)}' for n, a in zip(names, ins))}) -> "
             f"(tensor<{Bs}x{T}x{H}x{V}xf32>, tensor<{Bs}x{H}x{K}x{V}xf32>) {{"]
    for n, a in zip(names, ins):
        lines.append(f"  %{n}n = arith.truncf %{n} : {t(a)} to {t(a, 'bf16')}")
    decay = " decay(%gn)" if g is not None else ""
    to = f"tensor<{Bs}x{T}x{H}x{V}x{{}}>"
    tl = f"tensor<{Bs}x{H}x{K}x{V}xf32>"
    lines += [f"  %o, %last = seq.linear_attention %qn, %kn, %vn{decay} {{feature_map = "
              f"#seq.feature_map<{feature}>, causal = {str(causal).lower()}, normalize = "
              f"{str(normalize).lower()}}} : ({', '.join(t(a, 'bf16') for a in ins)}) -> "
              f"({to.format('bf16')}, {tl})",
              f"  %of = arith.extf %o : {to.format('bf16')} to {to.format('f32')}",
              f"  return %of, %last : {to.format('f32')}, {tl}", "}", ""]
    o, last = run_seqc("\n".join(lines), ins, tol=2e-2, results_of="cuda-emulated")
    ro, rl = linear_attention(bf16(q), bf16(k), bf16(v), None if g is None else bf16(g),
                              None, feature, causal, normalize)
    tag = (f"B={Bs} T={T} H={H} K={K} V={V} decay={decay_rank} causal={causal} "
           f"normalize={normalize} phi={feature}")
    check("linear_attention o " + tag, o, ro)
    check("linear_attention last " + tag, last, rl)


def case_linear_attention():
    # Several chunks, key and value tiles (32 wide), partial at the edges;
    # GLA's per-channel decay (q' k'^T stays f32 there); normalized (the
    # ones column), non-causal.
    linear_attention_case(1, 100, 2, 40, 70)
    linear_attention_case(2, 70, 2, 48, 33, decay_rank=4, seed=41)
    linear_attention_case(1, 90, 2, 32, 40, decay_rank=0, normalize=True,
                          feature="elu_plus_one", seed=42)
    linear_attention_case(1, 50, 2, 24, 16, decay_rank=0, causal=False, normalize=True,
                          feature="relu", seed=43)


c.run("tensor-core matmuls", case_mma)
c.run("linear_attention", case_linear_attention)
c.run("attention", case_attention)
c.run("moe_ffn", case_moe)
c.run("linear_scan", case_linear_scan)
c.run("selective_scan", case_selective_scan)
c.run("ssd", case_ssd)
# Several P and N tiles (32 wide), partial at the edges, and three chunks.
c.run("ssd tiles", lambda: case_ssd(2, 150, 2, 40, 48, seed=15))
c.finish()
