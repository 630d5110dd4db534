"""A Mamba-2 block in plain PyTorch whose scan runs on seqc's CPU kernels.

The block is written the way mamba_ssm's `Mamba2` module is (in_proj,
depthwise causal conv, SSD, gated RMSNorm, out_proj), and calls
`mamba_chunk_scan_combined` where mamba_ssm's module would; the only change
is the import. The same block with a pure-PyTorch scan (the step-by-step
recurrence a CPU user falls back to without CUDA) gives the reference, and
both are timed:

    PYTHONPATH=build/python python3 examples/python/mamba2_block.py [--seqlen T]
"""

import argparse
import time

import torch
import torch.nn.functional as F

from seqc.compat.causal_conv1d import causal_conv1d_fn
from seqc.compat.mamba_ssm import mamba_chunk_scan_combined


def torch_chunk_scan(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None,
                     dt_softplus=False):
    """The SSD recurrence in PyTorch, one step at a time (what
    `mamba_chunk_scan_combined` computes): x (b, l, h, p), dt (b, l, h),
    A (h), B and C (b, l, g, n)."""
    del chunk_size  # the recurrence has no chunks
    b, L, h, p = x.shape
    g = B.shape[2]
    dt = dt + dt_bias if dt_bias is not None else dt
    if dt_softplus:
        dt = F.softplus(dt)
    Bh = B.repeat_interleave(h // g, dim=2)
    Ch = C.repeat_interleave(h // g, dim=2)
    state = x.new_zeros(b, h, p, B.shape[-1])
    ys = []
    for t in range(L):
        decay = torch.exp(dt[:, t] * A)[:, :, None, None]
        state = decay * state + (dt[:, t, :, None, None] * x[:, t, :, :, None]
                                 * Bh[:, t, :, None, :])
        ys.append(torch.einsum("bhpn,bhn->bhp", state, Ch[:, t]))
    y = torch.stack(ys, dim=1)
    if D is not None:
        y = y + x * D[:, None]
    if z is not None:
        y = y * F.silu(z)
    return y


class Mamba2Block(torch.nn.Module):
    """mamba_ssm's Mamba2 layer (no fused kernels): d_state N, head dim P,
    one group, conv width 4, gated RMSNorm before out_proj."""

    def __init__(self, d_model, d_state=64, headdim=32, expand=2, d_conv=4,
                 chunk_size=64, scan=mamba_chunk_scan_combined):
        super().__init__()
        self.d_inner = expand * d_model
        self.nheads = self.d_inner // headdim
        self.headdim, self.d_state, self.chunk_size = headdim, d_state, chunk_size
        self.scan = scan
        conv_dim = self.d_inner + 2 * d_state
        self.in_proj = torch.nn.Linear(
            d_model, 2 * self.d_inner + 2 * d_state + self.nheads, bias=False)
        self.conv_weight = torch.nn.Parameter(
            torch.randn(conv_dim, d_conv) / d_conv)
        self.conv_bias = torch.nn.Parameter(torch.zeros(conv_dim))
        self.dt_bias = torch.nn.Parameter(torch.rand(self.nheads) - 4.0)
        self.A_log = torch.nn.Parameter(
            torch.log(torch.linspace(1.0, 16.0, self.nheads)))
        self.D = torch.nn.Parameter(torch.ones(self.nheads))
        self.norm_weight = torch.nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = torch.nn.Linear(self.d_inner, d_model, bias=False)

    def forward(self, u):
        b, L, _ = u.shape
        zxbcdt = self.in_proj(u)
        z, xBC, dt = torch.split(
            zxbcdt, [self.d_inner, self.d_inner + 2 * self.d_state,
                     self.nheads], dim=-1)
        xBC = causal_conv1d_fn(xBC.transpose(1, 2), self.conv_weight,
                               self.conv_bias, activation="silu")
        xBC = xBC.transpose(1, 2)
        x, B, C = torch.split(
            xBC, [self.d_inner, self.d_state, self.d_state], dim=-1)
        y = self.scan(
            x.reshape(b, L, self.nheads, self.headdim), dt,
            -torch.exp(self.A_log), B.reshape(b, L, 1, self.d_state),
            C.reshape(b, L, 1, self.d_state), self.chunk_size, D=self.D,
            dt_bias=self.dt_bias, dt_softplus=True)
        y = y.reshape(b, L, self.d_inner) * F.silu(z)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5)
        return self.out_proj(y * self.norm_weight)


def compare(seqlen, d_model=256, repeats=3):
    """Runs the block with seqc's scan and with the PyTorch recurrence on the
    same weights; returns (max abs difference, max |reference|, seconds
    with seqc, seconds with PyTorch)."""
    torch.manual_seed(0)
    fast = Mamba2Block(d_model)
    slow = Mamba2Block(d_model, scan=torch_chunk_scan)
    slow.load_state_dict(fast.state_dict())
    u = torch.randn(1, seqlen, d_model)
    with torch.no_grad():
        y_fast, y_slow = fast(u), slow(u)

        def best(block):
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                block(u)
                times.append(time.perf_counter() - start)
            return min(times)

        t_fast, t_slow = best(fast), best(slow)
    diff = (y_fast - y_slow).abs().max().item()
    return diff, y_slow.abs().max().item(), t_fast, t_slow


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqlen", type=int, default=2048)
    parser.add_argument("--d-model", type=int, default=256)
    args = parser.parse_args()
    diff, scale, t_fast, t_slow = compare(args.seqlen, args.d_model)
    print(f"Mamba-2 block, T={args.seqlen}, d_model={args.d_model}: "
          f"max |seqc - torch| = {diff:.2e} (max |y| = {scale:.2f})")
    print(f"  block with seqc's scan: {t_fast * 1e3:.1f} ms; with the "
          f"PyTorch recurrence: {t_slow * 1e3:.1f} ms "
          f"({t_slow / t_fast:.1f}x)")
    if diff > 1e-3 * max(1.0, scale):
        raise SystemExit("error: the two blocks disagree")


if __name__ == "__main__":
    main()
