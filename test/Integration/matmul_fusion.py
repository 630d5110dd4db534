# Elementwise neighbours of a matmul computed inside its kernel: an RMSNorm
# producing A (rows packed per reduction block: K = 300 spans two blocks),
# and consumers of the result reading it with a residual (m, n), a bias (n)
# and a row scale (m), on sizes that are not multiples of the tiles; and a
# result with two users, which must not fuse. Fast pipeline == reference ==
# numpy.
# RUN: %python %s
import os
import shutil
import subprocess
import tempfile

import numpy as np
from seqc_testing import Checker, f32, rng, run_seqc

MLIR = """
#full = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>
func.func @main(%x: tensor<?x300xf32>, %g: tensor<300xf32>, %w: tensor<300x45xf32>,
                %res: tensor<?x45xf32>, %bias: tensor<45xf32>, %scale: tensor<?xf32>)
    -> (tensor<?x45xf32>, tensor<?x45xf32>, tensor<?x45xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %T = tensor.dim %x, %c0 : tensor<?x300xf32>
  %e = tensor.empty(%T) : tensor<?xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %ss = linalg.generic {indexing_maps = [#full, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x300xf32>) outs(%z : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %en = tensor.empty(%T) : tensor<?x300xf32>
  %xn = linalg.generic {indexing_maps = [#full, #row, #col, #full], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss, %g : tensor<?x300xf32>, tensor<?xf32>, tensor<300xf32>) outs(%en : tensor<?x300xf32>) {
  ^bb0(%a: f32, %s: f32, %gg: f32, %o: f32):
    %inv = arith.constant 0.00333333333 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.mulf %s, %inv : f32
    %v = arith.addf %m, %eps : f32
    %r = math.rsqrt %v : f32
    %n = arith.mulf %a, %r : f32
    %y = arith.mulf %n, %gg : f32
    linalg.yield %y : f32
  } -> tensor<?x300xf32>
  %eo = tensor.empty(%T) : tensor<?x45xf32>
  %zo = linalg.fill ins(%zero : f32) outs(%eo : tensor<?x45xf32>) -> tensor<?x45xf32>
  %p = linalg.matmul ins(%xn, %w : tensor<?x300xf32>, tensor<300x45xf32>) outs(%zo : tensor<?x45xf32>) -> tensor<?x45xf32>
  %out = linalg.generic {indexing_maps = [#full, #full, #col, #row, #full], iterator_types = ["parallel", "parallel"]}
      ins(%p, %res, %bias, %scale : tensor<?x45xf32>, tensor<?x45xf32>, tensor<45xf32>, tensor<?xf32>) outs(%eo : tensor<?x45xf32>) {
  ^bb0(%pp: f32, %rr: f32, %bb: f32, %sc: f32, %o: f32):
    %t = arith.addf %pp, %bb : f32
    %u = arith.mulf %t, %sc : f32
    %y = arith.addf %u, %rr : f32
    linalg.yield %y : f32
  } -> tensor<?x45xf32>
  // Two users of %q: no fusion.
  %q = linalg.matmul ins(%x, %w : tensor<?x300xf32>, tensor<300x45xf32>) outs(%zo : tensor<?x45xf32>) -> tensor<?x45xf32>
  %q2 = linalg.generic {indexing_maps = [#full, #full], iterator_types = ["parallel", "parallel"]}
      ins(%q : tensor<?x45xf32>) outs(%eo : tensor<?x45xf32>) {
  ^bb0(%a: f32, %o: f32):
    %y = arith.mulf %a, %a : f32
    linalg.yield %y : f32
  } -> tensor<?x45xf32>
  return %out, %q, %q2 : tensor<?x45xf32>, tensor<?x45xf32>, tensor<?x45xf32>
}
"""

c = Checker()
# The kernels the fast pipeline makes: one fused matmul, one plain matmul
# (each with the kernels that pack its A and its B when several column or
# row blocks read them),
# an elementwise kernel for the square and the row sum of the norm.
with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "g.mlir")
    with open(src, "w") as f:
        f.write(MLIR)
    ir = subprocess.run([shutil.which("seqc-opt"), src, "--convert-elementwise-to-linalg",
                         "--seq-lower-to-cpu"], capture_output=True, text=True).stdout
kernels = sorted({w.split("(")[0] for w in ir.split() if w.startswith("@__seqc_")})
c.expect("kernels", kernels == ["@__seqc_elementwise", "@__seqc_matmul",
                                "@__seqc_matmul_pack_a", "@__seqc_matmul_pack_b",
                                "@__seqc_matmul_prologue_epilogue",
                                "@__seqc_matmul_prologue_epilogue_pack_a",
                                "@__seqc_matmul_prologue_epilogue_pack_b",
                                "@__seqc_row_sum"],
         str(kernels))
r = rng(11)
# N = 45: one column block, each task packs (and normalizes) its own rows
# of A. N = 530 with T = 600: several column and row blocks, so the
# normalized A and the weight are each packed once by their own kernels.
for T, N in ((1, 45), (67, 45), (130, 45), (600, 530)):
    x = f32(r.standard_normal((T, 300)))
    g = f32(r.uniform(0.5, 1.5, 300))
    w = f32(r.standard_normal((300, N)) / 17)
    res = f32(r.standard_normal((T, N)))
    bias = f32(r.standard_normal(N))
    scale = f32(r.uniform(0.5, 2, T))
    out, q, q2 = run_seqc(MLIR.replace("45", str(N)), [x, g, w, res, bias, scale])
    x64 = x.astype(np.float64)
    xn = x64 / np.sqrt(np.mean(x64 * x64, axis=1, keepdims=True) + 1e-5) * g
    ref = ((xn @ w) + bias) * scale[:, None] + res
    c.close(f"T={T} N={N} norm -> matmul -> bias, scale, residual", out, ref)
    c.close(f"T={T} N={N} plain matmul", q, x64 @ w)
    c.close(f"T={T} N={N} its square", q2, (x64 @ w) ** 2)

# A producer used twice by the matmul (n(x) n(x)^T's square form n @ n):
# it must stay a value of its own, not be folded into A's packing only.
SQUARE = """
#full = affine_map<(m, n) -> (m, n)>
func.func @main(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x?xf32>
  %e = tensor.empty(%n, %n) : tensor<?x?xf32>
  %p = linalg.generic {indexing_maps = [#full, #full], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  } -> tensor<?x?xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %y = linalg.matmul ins(%p, %p : tensor<?x?xf32>, tensor<?x?xf32>) outs(%z : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
"""
for n in (1, 37):
    x = f32(r.standard_normal((n, n)))
    (y,) = run_seqc(SQUARE, [x])
    t = np.tanh(x.astype(np.float64))
    c.close(f"n={n} tanh(x) @ tanh(x)", y, t @ t)

# The kernel takes M and N from the init: an init of the wrong size is an
# error, not a write past the buffer.
MISMATCH = """
func.func @main(%a: tensor<?x8xf32>, %b: tensor<8x?xf32>, %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x?xf32>) outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
"""
for rows, cols, what in ((5, 4, "rows"), (4, 6, "columns")):
    a = f32(r.standard_normal((4, 8)))
    b = f32(r.standard_normal((8, 4)))
    init = f32(np.zeros((rows, cols)))
    err = run_seqc(MISMATCH, [a, b, init], expect_error=True)
    c.expect(f"init with wrong {what} is an error", what in str(err) or "dimension" in str(err), str(err))
c.finish()
