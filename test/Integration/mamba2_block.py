# The README's main job: the Mamba-2 block of examples/ runs through seqc-run
# and matches a numpy implementation of the whole block (in-projection, conv
# with SiLU, SSD with dt bias / softplus / skip / gate, RMSNorm,
# out-projection), written from the seeds' equations.
# RUN: %python %s %seqc_src/examples/mamba2_block.mlir
import sys

import numpy as np
from refs import causal_conv1d, silu, ssd
from seqc_testing import Checker, f32, rng, run_seqc

c = Checker()
path = sys.argv[1]
mlir = open(path).read()

r = rng(0)
T, Dm, Di, H, P, N = 256, 128, 256, 8, 32, 64
u = f32(r.standard_normal((1, T, Dm)))
w_in = f32(r.uniform(-1, 1, (Dm, 2 * Di + 2 * N + H)))
conv_w = f32(r.uniform(-1, 1, (Di + 2 * N, 4)))
conv_b = f32(r.uniform(-1, 1, Di + 2 * N))
dt_bias = f32(r.uniform(-1, 1, H))
A_log = f32(r.uniform(-1, 1, H))
D = f32(r.uniform(-1, 1, H))
norm_w = f32(r.uniform(0.5, 1.5, Di))
w_out = f32(r.uniform(-1, 1, (Di, Dm)) / np.sqrt(Di))
inputs = [u, w_in, conv_w, conv_b, dt_bias, A_log, D, norm_w, w_out]

out, state = run_seqc(mlir, inputs)

zxbcdt = (u[0].astype(np.float64) @ w_in) / np.sqrt(Dm)
z, xbc, dt = zxbcdt[:, :Di], zxbcdt[:, Di:Di + Di + 2 * N], zxbcdt[:, Di + Di + 2 * N:]
conv, _ = causal_conv1d(xbc[None], conv_w, conv_b, None, "silu")
x = conv[:, :, :Di].reshape(1, T, H, P)
B = conv[:, :, Di:Di + N].reshape(1, T, 1, N)
C = conv[:, :, Di + N:].reshape(1, T, 1, N)
A = -np.exp(A_log.astype(np.float64))
y, ref_state = ssd(x, dt[None], A, B, C, D, z.reshape(1, T, H, P), dt_bias, None, True)
y2 = y.reshape(T, Di)
normed = y2 / np.sqrt(np.mean(y2 * y2, axis=1, keepdims=True) + 1e-5) * norm_w
ref_out = (normed @ w_out)[None]

c.close("block output", out, ref_out)
c.close("final SSM state", state, ref_state)
c.finish()
