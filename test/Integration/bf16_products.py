# The CPU's products of bf16 operands, each forced (SEQC_CPU_BF16): AMX
# tiles where the host has AMX and, on every host, the same AMX kernels with
# the tiles emulated (seq-emulate-amx); AVX-512 BF16 dot products of bf16
# pairs where the host has them; f32 FMAs on widened operands everywhere. Matmuls, batch matmuls, experts and
# attention (odd head sizes, a last key tile of odd length, GQA, a KV cache,
# windows, non-causal) at
# the edges of every block (M, N, K not multiples of 16 or 32, an odd K, a
# reduction longer than one block ending in a single step, B packed once,
# A packed once, fused producers and consumers, bf16 results), against
# float64 numpy on the rounded operands. Asking for the dot product or AMX
# in code for a CPU without it is an error that names the feature.
# RUN: %python %s
import os
import subprocess
import sys
import tempfile

import numpy as np
from refs import attention, moe_ffn
from seqc_testing import Checker, bf16, rel_rms, rng, run_seqc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import gpu_graphs  # noqa: E402

c = Checker()


def host_has_dot():
    with open("/proc/cpuinfo") as f:
        return " avx512_bf16" in f.read()


def host_has_amx():
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return " amx_tile" in flags and " amx_bf16" in flags


def t(shape, e="f32"):
    return f"tensor<{'x'.join(map(str, shape))}x{e}>"


def matmul(products, M, K, N, batch=None, out="f32", prologue=True, epilogue=False,
           seed=40):
    """init + A B with bf16 A and B; `prologue`: A rounded inside the matmul
    (a fused producer), else A is also returned (materialized);
    `epilogue`: a residual added to the product (a fused consumer)."""
    r = rng(seed)
    lead = [batch] if batch else []
    a = r.standard_normal(lead + [M, K]).astype(np.float32)
    b = r.standard_normal(lead + [K, N]).astype(np.float32)
    init = r.standard_normal(lead + [M, N]).astype(np.float32)
    res = r.standard_normal(lead + [M, N]).astype(np.float32)
    op = "linalg.batch_matmul" if batch else "linalg.matmul"
    ta, tb, tc = lead + [M, K], lead + [K, N], lead + [M, N]
    results = [t(tc)] + ([] if prologue else [t(ta, "bf16")])
    lines = [f"func.func @main(%a: {t(ta)}, %b: {t(tb)}, %c: {t(tc)}, %res: {t(tc)}) -> "
             f"({', '.join(results)}) {{",
             f"  %an = arith.truncf %a : {t(ta)} to {t(ta, 'bf16')}",
             f"  %bn = arith.truncf %b : {t(tb)} to {t(tb, 'bf16')}"]
    if out == "f32":
        lines.append(f"  %p = {op} ins(%an, %bn : {t(ta, 'bf16')}, {t(tb, 'bf16')}) "
                     f"outs(%c : {t(tc)}) -> {t(tc)}")
    else:
        lines += [f"  %cn = arith.truncf %c : {t(tc)} to {t(tc, out)}",
                  f"  %pn = {op} ins(%an, %bn : {t(ta, 'bf16')}, {t(tb, 'bf16')}) "
                  f"outs(%cn : {t(tc, out)}) -> {t(tc, out)}",
                  f"  %p = arith.extf %pn : {t(tc, out)} to {t(tc)}"]
    if epilogue:
        lines.append(f"  %r = arith.addf %p, %res : {t(tc)}")
    else:
        lines.append(f"  %r = arith.addf %p, %p : {t(tc)}")
    rets = ["%r"] + ([] if prologue else ["%an"])
    lines += [f"  return {', '.join(rets)} : {', '.join(results)}", "}", ""]
    got = run_seqc("\n".join(lines), [a, b, init, res], tol=2e-2)[0]
    cin = init if out == "f32" else bf16(init)
    ref = cin.astype(np.float64) + np.matmul(bf16(a).astype(np.float64), bf16(b))
    if out != "f32":
        ref = bf16(ref.astype(np.float32)).astype(np.float64)
    ref = ref + res if epilogue else 2 * ref
    name = (f"{products}: {op} bf16 {'x'.join(map(str, lead + [M, K, N]))} -> {out}"
            f"{'' if prologue else ', A materialized'}{', residual' if epilogue else ''}")
    if out == "f32":
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        c.expect(f"{name}: max error {err:.1e} <= 1e-5 of max |ref|", err <= 1e-5)
    else:
        err = rel_rms(got, ref)
        c.expect(f"{name}: relative RMS {err:.2e} <= 1e-2", err <= 1e-2)


def experts(products, T, D, F, E, k, seed=41):
    r = rng(seed)
    x = r.standard_normal((T, D)).astype(np.float32)
    w = r.uniform(0.1, 1.0, (T, k)).astype(np.float32)
    idx = np.stack([r.integers(0, E - 1, T), r.integers(0, E - 1, T)], 1).astype(np.int32)
    idx[:, 1] = np.where(idx[:, 1] == idx[:, 0], (idx[:, 0] + 1) % (E - 1), idx[:, 1])
    up = (r.standard_normal((E, D, F)) / np.sqrt(D)).astype(np.float32)
    down = (r.standard_normal((E, F, D)) / np.sqrt(F)).astype(np.float32)
    gate = (r.standard_normal((E, D, F)) / np.sqrt(D)).astype(np.float32)
    y, load = run_seqc(gpu_graphs.moe_ffn(T, D, F, E, k, form="narrowed"),
                       [x, w, idx, up, down, gate], tol=2e-2)
    ry, rload = moe_ffn(bf16(x), bf16(w), idx, bf16(up), bf16(down), bf16(gate))
    err = rel_rms(y, ry)
    c.expect(f"{products}: moe_ffn bf16 T={T} D={D} F={F} E={E}: relative RMS "
             f"{err:.2e} <= 1e-2", err <= 1e-2)
    c.expect(f"{products}: moe_ffn load {list(load)}", np.array_equal(load, rload))


def attention_case(products, Bs, T, S, H, Hkv, K, V, causal=True, window=0, seed=60):
    """The CPU's result (not the GPU emulation's) against float64."""
    r = rng(seed)
    q = r.standard_normal((Bs, T, H, K)).astype(np.float32)
    k = r.standard_normal((Bs, S, Hkv, K)).astype(np.float32)
    v = r.standard_normal((Bs, S, Hkv, V)).astype(np.float32)
    to = t((Bs, T, H, V), "{}")
    mlir = "\n".join([
        f"func.func @main(%q: {t(q.shape)}, %k: {t(k.shape)}, %v: {t(v.shape)}) -> "
        f"{to.format('f32')} {{",
        f"  %qn = arith.truncf %q : {t(q.shape)} to {t(q.shape, 'bf16')}",
        f"  %kn = arith.truncf %k : {t(k.shape)} to {t(k.shape, 'bf16')}",
        f"  %vn = arith.truncf %v : {t(v.shape)} to {t(v.shape, 'bf16')}",
        f"  %o = seq.attention %qn, %kn, %vn {{causal = {str(causal).lower()}, "
        f"window = {window} : i64}} : ({t(q.shape, 'bf16')}, {t(k.shape, 'bf16')}, "
        f"{t(v.shape, 'bf16')}) -> {to.format('bf16')}",
        f"  %of = arith.extf %o : {to.format('bf16')} to {to.format('f32')}",
        f"  return %of : {to.format('f32')}", "}", ""])
    (o,) = run_seqc(mlir, [q, k, v], tol=2e-2)
    err = rel_rms(o, attention(bf16(q), bf16(k), bf16(v), causal, window))
    c.expect(f"{products}: attention bf16 B={Bs} T={T} S={S} H={H} Hkv={Hkv} K={K} "
             f"V={V} causal={causal} window={window}: relative RMS {err:.2e} <= 1e-2",
             err <= 1e-2)


def cases(products):
    os.environ["SEQC_CPU_BF16"] = products
    matmul(products, 1, 1, 1)
    matmul(products, 17, 33, 15, seed=42)
    matmul(products, 100, 70, 90, seed=43)
    # A reduction of several blocks whose last is one step (kc is 256
    # steps with dot products), B packed once for many row blocks.
    matmul(products, 1040, 513, 70, seed=44)
    # Blocks of 256 or 384 steps (AMX with a 32 or 48 KiB L1), the last of
    # one step: a tile of 31 zero steps.
    matmul(products, 70, 769, 40, seed=50)
    # A packed once for several column blocks.
    matmul(products, 40, 301, 600, seed=45)
    matmul(products, 33, 17, 41, batch=3, seed=46)
    matmul(products, 70, 40, 66, out="bf16", seed=47)
    matmul(products, 65, 129, 47, prologue=False, seed=48)
    matmul(products, 65, 129, 47, epilogue=True, seed=49)
    experts(products, 150, 70, 90, 5, 2)
    experts(products, 64, 33, 47, 3, 2, seed=50)
    attention_case(products, 1, 100, 151, 4, 2, 41, 33)
    attention_case(products, 2, 70, 70, 2, 2, 64, 128, seed=61)
    attention_case(products, 1, 90, 90, 2, 1, 32, 32, window=20, seed=62)
    attention_case(products, 1, 33, 51, 2, 2, 17, 24, causal=False, seed=63)
    attention_case(products, 1, 1, 129, 2, 1, 128, 64, seed=64)


def case_dot_needs_the_feature():
    src = "\n".join([
        f"func.func @main(%a: {t([8, 8], 'bf16')}, %b: {t([8, 8], 'bf16')}, %c: {t([8, 8])}) "
        f"-> {t([8, 8])} {{",
        f"  %r = linalg.matmul ins(%a, %b : {t([8, 8], 'bf16')}, {t([8, 8], 'bf16')}) "
        f"outs(%c : {t([8, 8])}) -> {t([8, 8])}",
        f"  return %r : {t([8, 8])}", "}", ""])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.mlir")
        with open(path, "w") as f:
            f.write(src)
        env = dict(os.environ, SEQC_CPU_BF16="dot")
        p = subprocess.run(["seqc-compile", path, "-o", os.path.join(tmp, "m.o"),
                            "--cpu", "x86-64-v3"], env=env, capture_output=True, text=True)
        c.expect(f"dot products for x86-64-v3: exit 1 naming avx512bf16 ({p.stderr.strip()})",
                 p.returncode == 1 and "error:" in p.stderr and "avx512bf16" in p.stderr)
        env["SEQC_CPU_BF16"] = "amx"
        p = subprocess.run(["seqc-compile", path, "-o", os.path.join(tmp, "m.o"),
                            "--cpu", "x86-64-v3"], env=env, capture_output=True, text=True)
        c.expect(f"AMX for x86-64-v3: exit 1 naming amx-tile ({p.stderr.strip()})",
                 p.returncode == 1 and "error:" in p.stderr and "amx-tile" in p.stderr)
        env["SEQC_CPU_BF16"] = "tiles"
        p = subprocess.run(["seqc-compile", path, "-o", os.path.join(tmp, "m.o")],
                           env=env, capture_output=True, text=True)
        c.expect(f"SEQC_CPU_BF16=tiles: exit 1 naming the value ({p.stderr.strip()})",
                 p.returncode == 1 and "SEQC_CPU_BF16='tiles'" in p.stderr)
        # AMX code for a CPU with it (whatever this host is) compiles.
        env["SEQC_CPU_BF16"] = "amx"
        p = subprocess.run(["seqc-compile", path, "-o", os.path.join(tmp, "m.o"),
                            "--cpu", "sapphirerapids"], env=env, capture_output=True,
                           text=True)
        c.expect(f"AMX for sapphirerapids compiles ({p.stderr.strip()})", p.returncode == 0)
        env["SEQC_CPU_BF16"] = "widen"
        p = subprocess.run(["seqc-compile", path, "-o", os.path.join(tmp, "m.o"),
                            "--cpu", "x86-64-v3"], env=env, capture_output=True, text=True)
        c.expect(f"widen for x86-64-v3 compiles ({p.stderr.strip()})", p.returncode == 0)


c.run("widened products", lambda: cases("widen"))
c.run("AMX tiles, emulated", lambda: cases("amx-emulated"))
if host_has_amx():
    c.run("AMX tiles", lambda: cases("amx"))
else:
    print("note: the host lacks AMX; its kernels ran emulated only")
if host_has_dot():
    c.run("AVX-512 BF16 dot products", lambda: cases("dot"))
else:
    print("note: the host lacks AVX-512 BF16; only the widened products ran")
c.run("forcing the dot product", case_dot_needs_the_feature)
c.finish()
