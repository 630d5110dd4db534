# A kernel's inputs are read when it runs, not when the graph first hands
# them to a kernel: here three matmuls read the same tensor %x while
# elementwise ops in between reuse buffers in place (arith on tensors
# becomes linalg.generic with an operand as its init). Regression test for
# CSE of bufferization.to_buffer and folding of to_buffer(to_tensor), which
# let later kernels read a buffer an in-place op had overwritten.
# RUN: %python %s
import numpy as np
from seqc_testing import Checker, f32, rng, run_seqc

MLIR = """
func.func @main(%a: tensor<?x64xf32>, %w1: tensor<64x64xf32>, %w2: tensor<64x64xf32>,
                %w3: tensor<64x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %T = tensor.dim %a, %c0 : tensor<?x64xf32>
  %x = arith.mulf %a, %a : tensor<?x64xf32>
  %e = tensor.empty(%T) : tensor<?x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x64xf32>) -> tensor<?x64xf32>
  %p = linalg.matmul ins(%x, %w1 : tensor<?x64xf32>, tensor<64x64xf32>) outs(%z : tensor<?x64xf32>) -> tensor<?x64xf32>
  %p2 = arith.addf %p, %x : tensor<?x64xf32>
  %y = arith.mulf %x, %p2 : tensor<?x64xf32>
  %q = linalg.matmul ins(%x, %w2 : tensor<?x64xf32>, tensor<64x64xf32>) outs(%z : tensor<?x64xf32>) -> tensor<?x64xf32>
  %q2 = arith.subf %q, %y : tensor<?x64xf32>
  %r = linalg.matmul ins(%x, %w3 : tensor<?x64xf32>, tensor<64x64xf32>) outs(%z : tensor<?x64xf32>) -> tensor<?x64xf32>
  %r2 = arith.addf %r, %q2 : tensor<?x64xf32>
  return %p2, %q2, %r2 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
}
"""

c = Checker()
r = rng(7)
a = f32(r.standard_normal((37, 64)))
w1, w2, w3 = (f32(r.standard_normal((64, 64)) / 8) for _ in range(3))
p2, q2, r2 = run_seqc(MLIR, [a, w1, w2, w3])
x = a.astype(np.float64) ** 2
ref_p2 = x @ w1 + x
ref_q2 = x @ w2 - x * ref_p2
ref_r2 = x @ w3 + ref_q2
c.close("p2", p2, ref_p2)
c.close("q2", q2, ref_q2)
c.close("r2", r2, ref_r2)
c.finish()
