# An expand_shape with two dynamic sizes in one group (a batch and a length
# both unknown when compiled), of a contiguous tensor and of a column slice:
# MLIR 22's expand-strided-metadata crashed on these (seq-relax-expand-shape
# rewrites them); the values must be numpy's reshape, on every pipeline.
# RUN: %python %s
import numpy as np
from seqc_testing import Checker, f32, rng, run_seqc

c = Checker()

GRAPH = """func.func @main(%m0: tensor<?x8xf32>, %b: tensor<?x1xf32>) -> tensor<?x?x{w}xf32> {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %m0, %c0 : tensor<?x8xf32>
  %m = tensor.extract_slice %m0[0, {lo}] [%n, {w}] [1, 1] : tensor<?x8xf32> to tensor<?x{w}xf32>
  %k = tensor.dim %b, %c0 : tensor<?x1xf32>
  %t = arith.divui %n, %k : index
  %e = tensor.expand_shape %m [[0, 1], [2]] output_shape [%k, %t, {w}]
      : tensor<?x{w}xf32> into tensor<?x?x{w}xf32>
  return %e : tensor<?x?x{w}xf32>
}}
"""


def case(rows, batch, lo, w):
    m = f32(rng(rows).standard_normal((rows, 8)))
    b = f32(np.zeros((batch, 1)))
    got = run_seqc(GRAPH.format(lo=lo, w=w), [m, b])[0]
    c.equal(f"{rows} rows as {batch} x {rows // batch}, columns {lo}..{lo + w}", got,
            m[:, lo:lo + w].reshape(batch, rows // batch, w))


c.run("contiguous", lambda: case(6, 2, 0, 8))
c.run("column slice", lambda: case(12, 3, 2, 4))
c.run("one row", lambda: case(5, 5, 1, 6))
c.finish()
