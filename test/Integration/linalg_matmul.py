# The graph's linalg.matmul / linalg.batch_matmul (projections) on the fast
# path's blocked GEMM: zero-filled and non-zero inits, odd and dynamic sizes,
# sizes over the kernel's blocks, against numpy.
# RUN: %python %s
import numpy as np
from seqc_testing import Checker, f32, mlir_type, rng, run_seqc

c = Checker()


def matmul(M, K, N, init="zero", dynamic=False, seed=0):
    r = rng(seed)
    a = f32(r.standard_normal((M, K)))
    b = f32(r.standard_normal((K, N)))
    cinit = f32(r.standard_normal((M, N)))
    ta = mlir_type([-1, -1] if dynamic else [M, K])
    tb = mlir_type([-1, -1] if dynamic else [K, N])
    tc = mlir_type([-1, -1] if dynamic else [M, N])
    if init == "zero":
        body = f"""
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : {ta}
  %n = tensor.dim %b, %c1 : {tb}
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %fc = tensor.cast %f : tensor<?x?xf32> to {tc}
  %r = linalg.matmul ins(%a, %b : {ta}, {tb}) outs(%fc : {tc}) -> {tc}"""
        args, inputs, ref = f"%a: {ta}, %b: {tb}", [a, b], a.astype(np.float64) @ b
    else:
        body = f"""
  %r = linalg.matmul ins(%a, %b : {ta}, {tb}) outs(%c : {tc}) -> {tc}"""
        args = f"%a: {ta}, %b: {tb}, %c: {tc}"
        inputs, ref = [a, b, cinit], cinit + a.astype(np.float64) @ b
    mlir = f"func.func @main({args}) -> {tc} {{{body}\n  return %r : {tc}\n}}\n"
    (out,) = run_seqc(mlir, inputs)
    c.close(f"matmul M={M} K={K} N={N} init={init} dynamic={dynamic}", out, ref)


def batch_matmul(Bt, M, K, N, seed=0):
    r = rng(seed)
    a = f32(r.standard_normal((Bt, M, K)))
    b = f32(r.standard_normal((Bt, K, N)))
    cinit = f32(r.standard_normal((Bt, M, N)))
    ta, tb, tc = mlir_type([Bt, M, K]), mlir_type([Bt, K, N]), mlir_type([Bt, M, N])
    mlir = (f"func.func @main(%a: {ta}, %b: {tb}, %c: {tc}) -> {tc} {{\n"
            f"  %r = linalg.batch_matmul ins(%a, %b : {ta}, {tb}) outs(%c : {tc}) -> {tc}\n"
            f"  return %r : {tc}\n}}\n")
    (out,) = run_seqc(mlir, [a, b, cinit])
    c.close(f"batch_matmul B={Bt} M={M} K={K} N={N}", out,
            cinit + np.einsum("bmk,bkn->bmn", a.astype(np.float64), b))


c.run("small", lambda: matmul(5, 7, 3))
c.run("blocks", lambda: matmul(130, 300, 530, seed=1))
c.run("accumulate", lambda: matmul(67, 33, 45, init="given", seed=2))
c.run("dynamic", lambda: matmul(19, 260, 41, dynamic=True, seed=3))
c.run("K = 1", lambda: matmul(9, 1, 17, seed=4))
c.run("batch", lambda: batch_matmul(3, 21, 35, 70, seed=5))
# More rows than one task's block (GemmBlocking::packedRows, 252 on AVX2, 512
# on AVX-512): B is packed once into panels by its own kernel, the row
# blocks are evened out, K spans several reduction blocks, and the last
# column panel is partial.
c.run("packed B", lambda: matmul(600, 520, 300, seed=6))
c.run("packed B, accumulate", lambda: matmul(1100, 257, 70, init="given", seed=7))
c.run("packed B, dynamic", lambda: matmul(1031, 40, 33, dynamic=True, seed=8))
c.run("packed B, batch", lambda: batch_matmul(2, 1030, 270, 50, seed=9))
c.finish()
