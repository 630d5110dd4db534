# A matmul whose B is a function constant (a weight written into the
# module) reads B's panels from a constant global packed when the module
# is compiled, instead of packing B in every call (CpuMatmul.cpp,
# packConstantPanels). Against float64 numpy: one row (no row block packs
# B), many row blocks, a reduction of several blocks ending in a ragged one,
# N not a multiple of the panel width, an accumulated init, a fused
# consumer, batch_matmul, a splat constant, and bf16 weights with each of
# the CPU's bf16 products forced (pairs for dot products and AMX, whose
# panels are padded to whole tiles).
# RUN: %python %s
import os

import numpy as np
from seqc_testing import Checker, bf16, f32, rng, run_seqc

c = Checker()


def t(shape, e="f32"):
    return f"tensor<{'x'.join(map(str, shape))}x{e}>"


def dense(values, e="f32"):
    """A dense literal of `values` (float32) as e's raw bytes in hex."""
    if e == "f32":
        raw = values.astype("<f4").tobytes()
    else:  # bf16: the top half of the f32 bits (values are bf16 already)
        raw = (values.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()
    return f'dense<"0x{raw.hex().upper()}"> : {t(values.shape, e)}'


def matmul(M, K, N, batch=None, dtype="f32", init=False, epilogue=False,
           splat=False, seed=0, tol=1e-5):
    r = rng(seed)
    lead = [batch] if batch else []
    a = f32(r.standard_normal(lead + [M, K]))
    w = f32(r.standard_normal(lead + [K, N]))
    if splat:
        w[...] = 0.75
    if dtype == "bf16":
        a, w = bf16(a), bf16(w)
    cinit = f32(r.standard_normal(lead + [M, N]))
    res = f32(r.standard_normal(lead + [M, N]))
    op = "linalg.batch_matmul" if batch else "linalg.matmul"
    ta, tw, tc = lead + [M, K], lead + [K, N], lead + [M, N]
    wlit = f"dense<0.75> : {t(tw, dtype)}" if splat else dense(w, dtype)
    lines = [f"func.func @main(%a: {t(ta)}, %c: {t(tc)}, %res: {t(tc)}) -> {t(tc)} {{",
             f"  %w = arith.constant {wlit}"]
    x = "%a"
    if dtype == "bf16":
        lines.append(f"  %an = arith.truncf %a : {t(ta)} to {t(ta, 'bf16')}")
        x = "%an"
    if init:
        out = "%c"
    else:
        lines += ["  %z = arith.constant 0.0 : f32",
                  f"  %e = tensor.empty() : {t(tc)}",
                  f"  %f = linalg.fill ins(%z : f32) outs(%e : {t(tc)}) -> {t(tc)}"]
        out = "%f"
    lines.append(f"  %p = {op} ins({x}, %w : {t(ta, dtype)}, {t(tw, dtype)}) "
                 f"outs({out} : {t(tc)}) -> {t(tc)}")
    if epilogue:
        lines.append(f"  %r = arith.addf %p, %res : {t(tc)}")
    else:
        lines.append(f"  %r = arith.addf %p, %p : {t(tc)}")
    lines += [f"  return %r : {t(tc)}", "}", ""]
    (got,) = run_seqc("\n".join(lines), [a, cinit, res], tol=tol)
    ref = np.matmul(a.astype(np.float64), w.astype(np.float64))
    if init:
        ref = ref + cinit
    ref = ref + res if epilogue else 2 * ref
    err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
    products = f" ({os.environ['SEQC_CPU_BF16']})" if dtype == "bf16" else ""
    name = (f"{op} {dtype}{products} constant B {'x'.join(map(str, lead + [M, K, N]))}"
            f"{' init' if init else ''}{' residual' if epilogue else ''}"
            f"{' splat' if splat else ''}")
    c.expect(f"{name}: max error {err:.1e} <= 1e-5 of max |ref|", err <= 1e-5)


def host_has(flag):
    with open("/proc/cpuinfo") as f:
        return f" {flag}" in f.read()


c.run("one row", lambda: matmul(1, 300, 45, seed=1))
c.run("row blocks", lambda: matmul(700, 300, 45, seed=2))
c.run("several reduction blocks", lambda: matmul(37, 1100, 70, seed=3))
c.run("init and residual", lambda: matmul(64, 129, 33, init=True, epilogue=True,
                                          seed=4))
c.run("batch", lambda: matmul(21, 70, 35, batch=3, seed=5))
c.run("splat", lambda: matmul(9, 40, 17, splat=True, seed=6))
c.run("K = 1", lambda: matmul(5, 1, 3, seed=7))

products = ["widen", "amx-emulated"]
if host_has("avx512_bf16"):
    products.append("dot")
if host_has("amx_bf16") and host_has("amx_tile"):
    products.append("amx")
for p in products:
    os.environ["SEQC_CPU_BF16"] = p
    c.run(f"bf16 {p} one row",
          lambda: matmul(1, 301, 45, dtype="bf16", seed=8, tol=1e-3))
    c.run(f"bf16 {p} blocks",
          lambda: matmul(130, 1201, 70, dtype="bf16", seed=9, tol=1e-3))
    c.run(f"bf16 {p} batch",
          lambda: matmul(40, 33, 50, batch=2, dtype="bf16", seed=10, tol=1e-3))
del os.environ["SEQC_CPU_BF16"]

c.finish()
