#!/usr/bin/env python3
"""The Python package's benchmark (bench/run.sh runs it after seqc-bench):

1. per-call overhead from Python: a 4-element function called with numpy
   arrays and with PyTorch tensors, against the same call's time inside
   seqc (a C++ caller's floor is seqc-bench-embedding's); the target is
   under 20 us;
2. seqc.compat against the pure-PyTorch recurrence a CPU user falls back to
   without the peers' CUDA kernels (mamba_ssm's and fla's reference loops,
   written here from their definitions), at bench/run.sh's shapes, in the
   same run.

  PYTHONPATH=build/python python3 bench/python.py [--quick]
"""
import argparse
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

import seqc
from seqc.compat import fla, mamba_ssm

TINY = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
"""


def per_call_us(fn, *args, calls=20000):
    for _ in range(100):
        fn(*args)
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls // 5):
            fn(*args)
        rounds.append((time.perf_counter() - start) / (calls // 5) * 1e6)
    return statistics.median(rounds)


def overhead():
    main = seqc.compile(TINY).main
    x = np.ones(4, np.float32)
    t = torch.ones(4)
    print("per-call overhead from Python (4-element function, median us):")
    print(f"  numpy arrays:    {per_call_us(main, x):6.2f} us (target < 20)")
    print(f"  PyTorch tensors: {per_call_us(main, t):6.2f} us (target < 20)")
    print(f"  an empty Python function call: "
          f"{per_call_us(lambda v: v, x):6.2f} us")


# -- the pure-PyTorch references (the peers' definitions, one step at a time)


def selective_scan_torch(u, delta, A, B, C, D, delta_bias):
    """mamba_ssm's selective_scan_ref: u, delta (b, d, l), B, C (b, n, l)."""
    delta = F.softplus(delta + delta_bias[:, None])
    state = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for t in range(u.shape[2]):
        dA = torch.exp(delta[:, :, t, None] * A)
        dBu = delta[:, :, t, None] * B[:, None, :, t] * u[:, :, t, None]
        state = dA * state + dBu
        ys.append(torch.einsum("bdn,bn->bd", state, C[:, :, t]))
    return torch.stack(ys, dim=2) + u * D[:, None]


def ssd_torch(x, dt, A, B, C, D, dt_bias):
    """Mamba-2's recurrence: x (b, l, h, p), B, C (b, l, 1, n)."""
    dt = F.softplus(dt + dt_bias)
    state = x.new_zeros(x.shape[0], x.shape[2], x.shape[3], B.shape[-1])
    ys = []
    for t in range(x.shape[1]):
        decay = torch.exp(dt[:, t] * A)[:, :, None, None]
        state = decay * state + (dt[:, t, :, None, None] * x[:, t, :, :, None]
                                 * B[:, t, :, None, :])
        ys.append(torch.einsum("bhpn,bn->bhp", state, C[:, t, 0]))
    return torch.stack(ys, dim=1) + x * D[:, None]


def gla_torch(q, k, v, gk, scale):
    """fla's naive recurrent GLA: S = diag(exp(gk)) S + k v^T, o = q S."""
    b, T, h, K = q.shape
    state = q.new_zeros(b, h, K, v.shape[-1])
    os = []
    for t in range(T):
        state = torch.exp(gk[:, t, :, :, None]) * state + (
            k[:, t, :, :, None] * v[:, t, :, None, :])
        os.append(torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, state))
    return torch.stack(os, dim=1)


def gated_delta_torch(q, k, v, g, beta, scale):
    """fla's naive recurrent Gated DeltaNet."""
    b, T, h, K = q.shape
    state = q.new_zeros(b, h, K, v.shape[-1])
    os = []
    for t in range(T):
        state = torch.exp(g[:, t, :, None, None]) * state
        kt = k[:, t]
        error = v[:, t] - torch.einsum("bhk,bhkv->bhv", kt, state)
        state = state + beta[:, t, :, None, None] * (
            kt[:, :, :, None] * error[:, :, None, :])
        os.append(torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, state))
    return torch.stack(os, dim=1)


def best_ms(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3, out


def row(name, shape, seqc_fn, torch_fn, repeats):
    seqc_fn()  # compile
    ms_seqc, got = best_ms(seqc_fn, repeats)
    ms_torch, want = best_ms(torch_fn, 1)
    got = got[0] if isinstance(got, tuple) else got
    err = (got - want).abs().max().item() / max(1.0, want.abs().max().item())
    print(f"  {name:26s} {shape:28s} seqc {ms_seqc:9.1f} ms   PyTorch "
          f"{ms_torch:9.1f} ms   {ms_torch / ms_seqc:6.1f}x   (error {err:.1e})")


def compat(quick):
    # The same threads on both sides (Debian's torch may start with fewer).
    torch.set_num_threads(seqc.get_num_threads())
    torch.manual_seed(0)
    T = 1024 if quick else 4096
    Ts = 512 if quick else 2048
    repeats = 3
    print("\nseqc.compat vs the pure-PyTorch recurrence (best of "
          f"{repeats} / one run, {torch.get_num_threads()} threads):")

    d, n = 1536, 16
    u, delta = torch.randn(1, d, Ts), torch.randn(1, d, Ts) - 1
    A = -torch.rand(d, n) - 0.5
    Bm, Cm = torch.randn(1, n, Ts), torch.randn(1, n, Ts)
    D, db = torch.randn(d), torch.zeros(d)
    row("selective_scan_fn", f"T={Ts} D={d} N={n}",
        lambda: mamba_ssm.selective_scan_fn(u, delta, A, Bm, Cm, D,
                                            delta_bias=db,
                                            delta_softplus=True),
        lambda: selective_scan_torch(u, delta, A, Bm, Cm, D, db), repeats)

    h, p, n = 16, 64, 128
    x, dt = torch.randn(1, T, h, p), torch.randn(1, T, h) - 2
    A = -torch.rand(h) - 0.5
    Bm, Cm = torch.randn(1, T, 1, n), torch.randn(1, T, 1, n)
    D, db = torch.randn(h), torch.zeros(h)
    row("mamba_chunk_scan_combined", f"T={T} H={h} P={p} N={n}",
        lambda: mamba_ssm.mamba_chunk_scan_combined(
            x, dt, A, Bm, Cm, 64, D=D, dt_bias=db, dt_softplus=True),
        lambda: ssd_torch(x, dt, A, Bm, Cm, D, db), repeats)

    K = V = 64
    q, k = torch.randn(1, T, h, K), torch.randn(1, T, h, K)
    v = torch.randn(1, T, h, V)
    gk = F.logsigmoid(torch.randn(1, T, h, K)) / 16
    row("chunk_gla", f"T={T} H={h} K=V={K}",
        lambda: fla.chunk_gla(q, k, v, gk),
        lambda: gla_torch(q, k, v, gk, K ** -0.5), repeats)

    g = F.logsigmoid(torch.randn(1, T, h))
    beta = torch.rand(1, T, h)
    kn = F.normalize(k, dim=-1)
    row("chunk_gated_delta_rule", f"T={T} H={h} K=V={K}",
        lambda: fla.chunk_gated_delta_rule(q, kn, v, g, beta),
        lambda: gated_delta_torch(q, kn, v, g, beta, K ** -0.5), repeats)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    overhead()
    compat(args.quick)


if __name__ == "__main__":
    main()
