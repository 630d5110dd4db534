# A reduced dimension of size 0 (SSD's state size N, linear attention's key
# size K): every sum over it is 0. The GPU kernels accumulate such sums in
# shared memory tile by tile and once read buffers no tile had written (NaN
# from the emulated SSD kernel); all three pipelines must give numpy's.
# RUN: %python %s
import numpy as np
from refs import linear_attention, ssd
from seqc_testing import Checker, f32, rng, run_seqc

c = Checker()
r = rng(3)


def case_ssd():
    x = f32(r.standard_normal((1, 70, 2, 3)))
    dt = f32(r.standard_normal((1, 70, 2)))
    A = f32(-np.exp(r.uniform(-1, 1, 2)))
    B = f32(np.zeros((1, 70, 1, 0)))
    mlir = """func.func @main(%x: tensor<1x70x2x3xf32>, %dt: tensor<1x70x2xf32>, %A: tensor<2xf32>,
                %B: tensor<1x70x1x0xf32>, %C: tensor<1x70x1x0xf32>) -> tensor<1x70x2x3xf32> {
  %y, %l = seq.ssd %x, %dt, %A, %B, %C : (tensor<1x70x2x3xf32>, tensor<1x70x2xf32>, tensor<2xf32>,
    tensor<1x70x1x0xf32>, tensor<1x70x1x0xf32>) -> (tensor<1x70x2x3xf32>, tensor<1x2x3x0xf32>)
  return %y : tensor<1x70x2x3xf32>
}
"""
    (y,) = run_seqc(mlir, [x, dt, A, B, B])
    c.close("ssd with N = 0", y, ssd(x, dt, A, B, B)[0])


def case_linear_attention():
    q = f32(np.zeros((1, 40, 2, 0)))
    v = f32(r.standard_normal((1, 40, 2, 5)))
    mlir = """func.func @main(%q: tensor<1x40x2x0xf32>, %k: tensor<1x40x2x0xf32>,
                %v: tensor<1x40x2x5xf32>) -> tensor<1x40x2x5xf32> {
  %o, %l = seq.linear_attention %q, %k, %v : (tensor<1x40x2x0xf32>, tensor<1x40x2x0xf32>,
    tensor<1x40x2x5xf32>) -> (tensor<1x40x2x5xf32>, tensor<1x2x0x5xf32>)
  return %o : tensor<1x40x2x5xf32>
}
"""
    (o,) = run_seqc(mlir, [q, q, v])
    c.close("linear_attention with K = 0", o, linear_attention(q, q, v)[0])


c.run("ssd", case_ssd)
c.run("linear_attention", case_linear_attention)
c.finish()
