#!/usr/bin/env python3
"""Sequence parallelism on this machine: strong scaling of one long ssd over
1 and 2 MPI ranks, and the bytes each rank exchanges against the minimum.

Runs `seqc-run --parallel sequence --bench N` under `mpirun -np R` (the
single-process run without mpirun is the baseline, in the same sitting) and
prints the medians, the speedups, and per rank the bytes handed to
MPI_Allreduce: the state exchange (R rows of state and transition: LASP-2's
all-gather as a sum of zero-padded rows) and the whole results (every rank
returns them), against one state per rank, the minimum sequence
parallelism needs.

  bench/distributed.py [--seqc-run PATH] [--T N] [--runs N]
"""
import argparse
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
ENV = dict(os.environ, OMPI_MCA_btl="self,vader")


def ssd_module(T, H, P, N):
    x, dt, st = f"tensor<1x{T}x{H}x{P}xf32>", f"tensor<1x{T}x{H}xf32>", f"tensor<1x{H}x{P}x{N}xf32>"
    bc = f"tensor<1x{T}x1x{N}xf32>"
    return f"""
func.func @main(%x: {x}, %dt: {dt}, %A: tensor<{H}xf32>, %B: {bc}, %C: {bc}) -> ({x}, {st}) {{
  %y, %last = seq.ssd %x, %dt, %A, %B, %C {{chunk_size = 64}}
    : ({x}, {dt}, tensor<{H}xf32>, {bc}, {bc}) -> ({x}, {st})
  return %y, %last : {x}, {st}
}}
"""


def bench(cmd, env):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    m = re.search(r"bench: median_ms=([0-9.]+) min_ms=([0-9.]+)", proc.stdout)
    return float(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqc-run", default=shutil.which("seqc-run") or "build/bin/seqc-run")
    ap.add_argument("--T", type=int, default=65536)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    T, H, P, N = args.T, 8, 64, 64
    r = np.random.default_rng(0)
    inputs = [r.standard_normal((1, T, H, P)), r.uniform(0.01, 0.1, (1, T, H)),
              -r.uniform(0.5, 1.5, H), r.standard_normal((1, T, 1, N)),
              r.standard_normal((1, T, 1, N))]
    with tempfile.TemporaryDirectory(prefix="seqc-dist-") as tmp:
        def command(steps):
            src = os.path.join(tmp, f"ssd{steps}.mlir")
            with open(src, "w") as f:
                f.write(ssd_module(steps, H, P, N))
            cmd = [args.seqc_run, src, "--bench", str(args.runs)]
            for i, a in enumerate(inputs):
                path = os.path.join(tmp, f"in{steps}_{i}.npy")
                np.save(path, a[:, :steps].astype(np.float32) if a.ndim > 1 else
                        a.astype(np.float32))
                cmd += ["--input", path]
            return cmd

        base = command(T)
        cores = os.cpu_count() or 1
        rows = []
        one = bench(base, dict(ENV, SEQC_NUM_THREADS=str(cores)))
        rows.append((f"1 process, {cores} threads (no MPI)", one))
        # What one of 2 ranks would take for its steps alone: the split's
        # floor, before the rank's reruns and the exchange.
        threads = max(1, cores // 2)
        rows.append((f"1 process, T/2 steps, {threads} thread(s)",
                     bench(command(T // 2), dict(ENV, SEQC_NUM_THREADS=str(threads)))))
        for R in (1, 2):
            threads = max(1, cores // R)
            cmd = MPIRUN + ["-np", str(R)] + base + ["--parallel", "sequence"]
            rows.append((f"{R} rank{'s' if R > 1 else ''} x {threads} thread{'s' if threads > 1 else ''}",
                         bench(cmd, dict(ENV, SEQC_NUM_THREADS=str(threads)))))
        print(f"ssd T={T} H={H} P={P} N={N} (chunk 64), medians of {args.runs} calls:")
        for name, (med, low) in rows:
            print(f"  {name:34s} {med:9.1f} ms (min {low:.1f})  speedup {one[0] / med:5.2f}x")
        state = 4 * H * P * N
        for R in (2,):
            transition = 4 * H * N  # the ssd's is one decay per head (width P -> 1)
            exchange = R * (state + transition)
            results = 4 * T * H * P
            print(f"  bytes per rank given to MPI_Allreduce at R={R}: states and transitions "
                  f"{exchange / 1e6:.3f} MB (R rows), whole results {results / 1e6:.1f} MB "
                  f"(every rank returns y); minimum: one state, {state / 1e6:.3f} MB")


if __name__ == "__main__":
    main()
