#!/usr/bin/env python3
"""Sequence and expert parallelism on this machine: strong scaling of one
long ssd and of one MoE layer over 1 and 2 MPI ranks, and the bytes each
rank exchanges against the minimum.

Runs `seqc-run --parallel sequence --bench N` under `mpirun -np R` (the
single-process run without mpirun is the baseline, in the same sitting) and
prints the medians, the speedups, and per rank the bytes it gives to
MPI_Allgather and receives: its state and transition (LASP-2's all-gather)
and its steps of the results (every rank returns them whole), against one
state per rank, the minimum sequence parallelism needs; and that exchange
alone on MPI three ways (bench/state_exchange.c: an all-reduce of
zero-padded rows, seqc's former exchange; MPI_Allgather, seqc's;
MPI_Exscan with a user-defined combine). A further row runs the split with
rank-local steps (`--local-steps`: each rank reads its own half of the
steps and returns its own half of y, nothing gathered but the states).
The MoE layer (`--parallel experts`, T 1024, D 1024,
F 2048, E 8, top-2, SwiGLU, capacity 1.25) prints per rank the rows it
sends to other ranks' experts and receives back (the minimum expert
parallelism needs, from the routing), the R x E counts, and the whole
result every rank returns.

With `--mpi mpich` every run is on MPICH instead of OpenMPI (its mpiexec,
its mpicc; seqc opens libmpich.so.12 and compiles for MPICH's ABI), so the
two can be compared on one machine.

  bench/distributed.py [--seqc-run PATH] [--T N] [--runs N] [--only ssd|moe]
                       [--mpi openmpi|mpich]
"""
import argparse
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

# The launcher and compiler of the MPI the runs use (--mpi).
LAUNCHERS = {
    "openmpi": (["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"],
                "mpicc"),
    # Hydra binds no process unless asked.
    "mpich": (["mpiexec.mpich"], "mpicc.mpich"),
}
MPIRUN, MPICC = LAUNCHERS["openmpi"]
ENV = dict(os.environ, OMPI_MCA_btl="self,vader")


def ssd_module(T, H, P, N):
    """T None: a dynamic number of steps (each rank's own under
    --local-steps)."""
    T = "?" if T is None else T
    x, dt, st = f"tensor<1x{T}x{H}x{P}xf32>", f"tensor<1x{T}x{H}xf32>", f"tensor<1x{H}x{P}x{N}xf32>"
    bc = f"tensor<1x{T}x1x{N}xf32>"
    return f"""
func.func @main(%x: {x}, %dt: {dt}, %A: tensor<{H}xf32>, %B: {bc}, %C: {bc}) -> ({x}, {st}) {{
  %y, %last = seq.ssd %x, %dt, %A, %B, %C {{chunk_size = 64}}
    : ({x}, {dt}, tensor<{H}xf32>, {bc}, {bc}) -> ({x}, {st})
  return %y, %last : {x}, {st}
}}
"""


def moe_module(T, D, F, E, k, cf):
    """The MoE layer over T tokens (None: a dynamic number, for rank-local
    tokens)."""
    T = "?" if T is None else T
    x, w, i = f"tensor<{T}x{D}xf32>", f"tensor<{T}x{k}xf32>", f"tensor<{T}x{k}xi32>"
    up, down = f"tensor<{E}x{D}x{F}xf32>", f"tensor<{E}x{F}x{D}xf32>"
    return f"""
func.func @main(%x: {x}, %w: {w}, %i: {i}, %up: {up}, %down: {down}, %gate: {up})
    -> ({x}, tensor<{E}xi64>) {{
  %y, %load = seq.moe_ffn %x, %w, %i, %up, %down gate_proj(%gate) {{capacity_factor = {cf} : f32}}
    : ({x}, {w}, {i}, {up}, {down}, {up}) -> ({x}, tensor<{E}xi64>)
  return %y, %load : {x}, tensor<{E}xi64>
}}
"""


def accepted_rows(idx, E, R, cf):
    """rows[p][q]: the accepted choices rank p's tokens send to rank q's
    experts (capacity in token order, as the op applies it)."""
    T, k = idx.shape
    cap = int(np.ceil(cf * k * T / E)) if cf > 0 else T * k
    load = np.zeros(E, np.int64)
    rows = np.zeros((R, R), np.int64)
    for t in range(T):
        p = t * R // T
        while (p + 1) * T // R <= t:
            p += 1
        for j in range(k):
            e = int(idx[t, j])
            if load[e] < cap:
                load[e] += 1
                rows[p][e // (E // R)] += 1
    return rows


def bench(cmd, env):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    m = re.search(r"bench: median_ms=([0-9.]+) min_ms=([0-9.]+)", proc.stdout)
    return float(m.group(1)), float(m.group(2))


def local_command(args, tmp, inputs, R):
    """seqc-run of the dynamic-T ssd with rank r's even share of the steps
    of every input with steps in its own files ({rank} in the paths)."""
    src = os.path.join(tmp, "ssd_local.mlir")
    with open(src, "w") as f:
        f.write(ssd_module(None, 8, 64, 64))
    T = inputs[0].shape[1]
    cmd = [args.seqc_run, src, "--bench", str(args.runs)]
    for i, a in enumerate(inputs):
        if a.ndim == 1:
            path = os.path.join(tmp, f"local_in{i}.npy")
            np.save(path, a.astype(np.float32))
        else:
            for r in range(R):
                np.save(os.path.join(tmp, f"local_in{i}_{r}.npy"),
                        a[:, r * T // R:(r + 1) * T // R].astype(np.float32))
            path = os.path.join(tmp, f"local_in{i}_{{rank}}.npy")
        cmd += ["--input", path]
    return cmd


def ssd_scaling(args):
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
        # Rank-local steps: each rank reads its own T/2 steps and returns
        # its own steps of y (no gather of y, half the memory a rank).
        R, threads = 2, max(1, cores // 2)
        rows.append((f"{R} ranks x {threads} thread{'s' if threads > 1 else ''}, rank-local steps",
                     bench(MPIRUN + ["-np", str(R)] + local_command(args, tmp, inputs, R)
                           + ["--parallel", "sequence", "--local-steps"],
                           dict(ENV, SEQC_NUM_THREADS=str(threads)))))
        print(f"ssd T={T} H={H} P={P} N={N} (chunk 64), medians of {args.runs} calls:")
        for name, (med, low) in rows:
            print(f"  {name:34s} {med:9.1f} ms (min {low:.1f})  speedup {one[0] / med:5.2f}x")
        state = 4 * H * P * N
        print(f"  rank-local steps at R=2: state and transition only "
              f"({(4 * H * P * N + 4 * H * N) / 1e6:.3f} MB given, as above), "
              f"no results gathered; each rank holds {4 * (T // 2) * (2 * H * P + H + 2 * N) / 1e6:.1f} MB "
              f"of x, dt, B, C and y against {4 * T * (2 * H * P + H + 2 * N) / 1e6:.1f} MB whole")
        for R in (2,):
            transition = 4 * H * N  # the ssd's is one decay per head (width P -> 1)
            pair = state + transition
            mine = 4 * (T // R) * H * P
            print(f"  bytes per rank at R={R}, MPI_Allgather: state and transition "
                  f"{pair / 1e6:.3f} MB given, {(R - 1) * pair / 1e6:.3f} MB received; "
                  f"results (every rank returns y) {mine / 1e6:.1f} MB given, "
                  f"{(R - 1) * mine / 1e6:.1f} MB received; minimum: one state, "
                  f"{state / 1e6:.3f} MB")



def state_exchange(args):
    """The exchange alone, on MPI (bench/state_exchange.c): an all-reduce
    of zero-padded rows (seqc's former exchange) against MPI_Allgather
    (seqc's) and MPI_Exscan with a user-defined combine, for the ssd's
    pair."""
    mpicc = shutil.which(MPICC)
    if not mpicc:
        print(f"  state exchange: no {MPICC} (libopenmpi-dev, libmpich-dev), not measured")
        return
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory(prefix="seqc-dist-") as tmp:
        exe = os.path.join(tmp, "state_exchange")
        subprocess.run([mpicc, "-O2", "-std=c99", os.path.join(here, "state_exchange.c"),
                        "-o", exe], check=True)
        for R in (2, 4):
            proc = subprocess.run(MPIRUN + ["-np", str(R), exe], capture_output=True,
                                  text=True, env=ENV, timeout=600)
            print("  " + (proc.stdout.strip() or proc.stderr[-500:]))


def moe_scaling(args):
    T, D, F, E, k, cf = 1024, 1024, 2048, 8, 2, 1.25
    r = np.random.default_rng(1)
    idx = np.stack([r.permutation(E)[:k] for _ in range(T)]).astype(np.int32)
    inputs = [r.standard_normal((T, D)), r.uniform(0.1, 1.0, (T, k)), idx,
              r.standard_normal((E, D, F)) / 32, r.standard_normal((E, F, D)) / 45,
              r.standard_normal((E, D, F)) / 32]
    with tempfile.TemporaryDirectory(prefix="seqc-dist-") as tmp:
        src = os.path.join(tmp, "moe.mlir")
        with open(src, "w") as f:
            f.write(moe_module(T, D, F, E, k, cf))
        base = [args.seqc_run, src, "--bench", str(args.runs)]
        for i, a in enumerate(inputs):
            path = os.path.join(tmp, f"in{i}.npy")
            np.save(path, a if a.dtype == np.int32 else a.astype(np.float32))
            base += ["--input", path]
        cores = os.cpu_count() or 1
        rows = []
        one = bench(base, dict(ENV, SEQC_NUM_THREADS=str(cores)))
        rows.append((f"1 process, {cores} threads (no MPI)", one))
        for R in (1, 2):
            threads = max(1, cores // R)
            cmd = MPIRUN + ["-np", str(R)] + base + ["--parallel", "experts"]
            rows.append((f"{R} rank{'s' if R > 1 else ''} x {threads} thread{'s' if threads > 1 else ''}",
                         bench(cmd, dict(ENV, SEQC_NUM_THREADS=str(threads)))))
        # Rank-local tokens: each rank reads its own T/2 tokens and returns
        # their results; the experts split over the ranks (DeepEP's
        # setting), or every expert on every rank.
        R = 2
        local_src = os.path.join(tmp, "moe_local.mlir")
        with open(local_src, "w") as f:
            f.write(moe_module(None, D, F, E, k, cf))
        local = [args.seqc_run, local_src, "--bench", str(args.runs)]
        for i, a in enumerate(inputs):
            a = a if a.dtype == np.int32 else a.astype(np.float32)
            if i < 3:
                for rank in range(R):
                    np.save(os.path.join(tmp, f"local{i}_{rank}.npy"),
                            a[rank * T // R:(rank + 1) * T // R])
                local += ["--input", os.path.join(tmp, f"local{i}_{{rank}}.npy")]
            else:
                local += ["--input", os.path.join(tmp, f"in{i}.npy")]
        threads = max(1, cores // R)
        for parallel, what in (("sequence+experts", "experts split"),
                               ("sequence", "every expert on each")):
            cmd = (MPIRUN + ["-np", str(R)] + local
                   + ["--parallel", parallel, "--local-steps"])
            rows.append((f"{R} ranks x {threads} thread{'s' if threads > 1 else ''}, "
                         f"own tokens, {what}",
                         bench(cmd, dict(ENV, SEQC_NUM_THREADS=str(threads)))))
        flops = 2 * 3 * T * k * D * F
        print(f"moe_ffn T={T} D={D} F={F} E={E} k={k} SwiGLU capacity {cf} "
              f"({flops / 1e9:.1f} GFLOP if no choice dropped), medians of {args.runs} calls:")
        for name, (med, low) in rows:
            print(f"  {name:52s} {med:9.1f} ms (min {low:.1f})  speedup {one[0] / med:5.2f}x")
        sent = accepted_rows(idx, E, R, cf)
        for p in range(R):
            away = int(sent[p].sum() - sent[p][p])
            back = int(sent[:, p].sum() - sent[p][p])
            # Each row travels with its routing weight; results come back.
            out_bytes = away * (4 * D + 4) + back * 4 * D
            minimum = (away + back) * 4 * D
            print(f"  rank {p} of {R}: sends {away} rows to the other rank's experts and "
                  f"{back} results back: {out_bytes / 1e6:.2f} MB sent by MPI_Send "
                  f"(minimum, the routed tokens there and back: {minimum / 1e6:.2f} MB); "
                  f"counts {8 * R * (E + 2)} B; its {T // R} rows of the result "
                  f"({4 * (T // R) * D / 1e6:.1f} MB) to MPI_Allgather, the other "
                  f"{(R - 1) * 4 * (T // R) * D / 1e6:.1f} MB received (every rank "
                  f"returns y; with its own tokens, none)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqc-run", default=shutil.which("seqc-run") or "build/bin/seqc-run")
    ap.add_argument("--T", type=int, default=65536)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", choices=["ssd", "moe"])
    ap.add_argument("--mpi", choices=sorted(LAUNCHERS), default="openmpi")
    args = ap.parse_args()
    global MPIRUN, MPICC
    MPIRUN, MPICC = LAUNCHERS[args.mpi]
    print(f"MPI: {args.mpi} ({MPIRUN[0]})")
    if args.only != "moe":
        ssd_scaling(args)
        state_exchange(args)
    if args.only != "ssd":
        moe_scaling(args)


if __name__ == "__main__":
    main()
