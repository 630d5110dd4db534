"""Weights for the example blocks, initialized as their papers' reference
code does, written as .safetensors (or .npz), plus an input sequence.

  python3 examples/blocks/weights.py BLOCK --out W.safetensors
          [--input-out U.npy --tokens T] [--d-model D] [--seed S] [--npz]

BLOCK is one of generate.py's blocks (mamba1, mamba2, gla, performer, moe,
hybrid, gdn, kda, rwkv7, rwkv6, qwen3next). The tensors are
named like the block's arguments (their seq.name), so
`seqc-run BLOCK.mlir --weights W.safetensors --input U.npy` binds them.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate  # noqa: E402


def specs(kind, d_model=128, func="main", d_state=64, headdim=32):
    """(name, shape) of every weight argument of `func` in the block file."""
    _, _, funcs = generate.build(kind, d_model, d_state, headdim)
    fn = next((f for f in funcs if f.name == func), None)
    if fn is None:
        raise ValueError(f"the {kind} block has no function @{func} "
                         f"(it has {', '.join('@' + f.name for f in funcs if not f.private)})")
    out = []
    for v, seq_name in fn.args:
        if seq_name and seq_name not in ("u", "cu") and not any(
                seq_name.endswith(s) for s in ("state", "cache", "normalizer")):
            out.append((seq_name, tuple(v.shape)))
    return out


def init(name, shape, rng):
    """One tensor, by the role its name gives it."""
    base = name.split(".")[-1] if not name.endswith(".weight") else name.split(".")[-2]
    if name.endswith("norm.weight") or name.endswith("ln_x.weight"):
        return 1.0 + 0.1 * rng.standard_normal(shape)
    # RWKV-6 / RWKV-7, as their reference code initializes a middle layer
    # (the zero-initialized low-rank factors random instead, so the
    # data-dependent paths are exercised).
    if base.startswith("x_") or (base.startswith("time_maa_") and len(shape) == 1):
        return rng.uniform(0, 1, shape)  # token-shift mixes
    if base == "w0":  # RWKV-7: decay speeds -7 + 5 (n / (C-1))^(0.85 + 0.5^0.5), + 0.5
        n = np.arange(shape[0]) / (shape[0] - 1)
        return -7 + 5 * n ** (0.85 + 0.5 ** 0.5) + 0.5
    if base == "time_decay":  # RWKV-6: -6 + 5 (n / (C-1))^(0.7 + 1.3 * 0.5)
        n = np.arange(shape[0]) / (shape[0] - 1)
        return -6 + 5 * n ** (0.7 + 1.3 * 0.5)
    if base == "time_decay_w2":  # small, so the log-decay stays about -exp(time_decay)
        return 0.1 * rng.standard_normal(shape) / math.sqrt(shape[-2])
    if base == "time_faaaa":  # RWKV-6's bonus u: 0.5 (1 - n / (C-1)) + zigzag
        n = np.arange(int(np.prod(shape)))
        return (0.5 * (1 - n / (n.size - 1)) + ((n + 1) % 3 - 1) * 0.1).reshape(shape)
    if base == "k_k":
        return 0.85 + 0.05 * rng.standard_normal(shape)
    if base == "k_a":
        return 1.0 + 0.05 * rng.standard_normal(shape)
    if base == "r_k":
        return 0.1 * rng.standard_normal(shape)
    if base == "A_log":
        if len(shape) == 2:  # Mamba-1: S4D-real, A = -(1..N)
            return np.log(np.tile(np.arange(1, shape[1] + 1, dtype=np.float64), (shape[0], 1)))
        return np.log(rng.uniform(1, 16, shape))  # Mamba-2
    if base in ("dt_bias", "bias") and ("dt_proj" in name or base == "dt_bias"):
        dt = np.exp(rng.uniform(math.log(1e-3), math.log(1e-1), shape))
        return dt + np.log(-np.expm1(-dt))  # softplus^-1(dt)
    if base == "D":
        return np.ones(shape)
    if "conv1d" in name:
        bound = 1 / math.sqrt(shape[-1])
        return rng.uniform(-bound, bound, shape)
    if base == "omega":  # FAVOR+: orthogonal blocks, chi-distributed norms
        K, M = shape
        blocks = []
        for _ in range(math.ceil(M / K)):
            q, _ = np.linalg.qr(rng.standard_normal((K, K)))
            blocks.append(q * np.sqrt(rng.chisquare(K, K))[None, :])
        return np.concatenate(blocks, axis=1)[:, :M]
    if len(shape) == 1:  # other biases
        return 0.1 * rng.standard_normal(shape)
    fan_in = shape[-2]
    return rng.standard_normal(shape) / math.sqrt(fan_in)


def make_weights(kind, d_model=128, seed=0, func="main", d_state=64, headdim=32):
    rng = np.random.default_rng(seed)
    return {n: init(n, s, rng).astype(np.float32)
            for n, s in specs(kind, d_model, func, d_state, headdim)}


def make_input(d_model, tokens, seed=0):
    rng = np.random.default_rng(seed + 1000)
    return rng.standard_normal((1, tokens, d_model)).astype(np.float32)


_DTYPES = {np.float32: "F32", np.float16: "F16", np.int32: "I32", np.int64: "I64"}


def write_safetensors(path, tensors):
    """A .safetensors file: u64 header length, JSON header, data."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": _DTYPES[a.dtype.type], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("block", choices=generate.KINDS)
    ap.add_argument("--out", required=True)
    ap.add_argument("--npz", action="store_true", help="write .npz instead")
    ap.add_argument("--input-out")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--func", default="main", help="the function whose weights to write")
    ap.add_argument("--d-state", type=int, default=64, help="of Mamba-2 layers")
    ap.add_argument("--headdim", type=int, default=32, help="of Mamba-2 layers")
    args = ap.parse_args()
    if args.tokens <= 0:
        ap.error(f"--tokens must be positive, not {args.tokens}")
    try:
        w = make_weights(args.block, args.d_model, args.seed, args.func, args.d_state,
                         args.headdim)
    except ValueError as e:
        ap.error(str(e))
    try:
        if args.npz:
            with open(args.out, "wb") as fh:  # np.savez would append .npz
                np.savez(fh, **w)
        else:
            write_safetensors(args.out, w)
    except OSError as e:
        sys.exit(f"error: {e}")
    n = sum(a.size for a in w.values())
    print(f"{args.out}: {len(w)} tensors, {n} parameters")
    if args.input_out:
        np.save(args.input_out, make_input(args.d_model, args.tokens, args.seed))
        print(f"{args.input_out}: input of {args.tokens} tokens")


if __name__ == "__main__":
    main()
