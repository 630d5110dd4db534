#!/usr/bin/env python3
"""The peers column of bench/run.sh: the matmuls of seqc-bench's results
(--results FILE) timed through numpy (OpenBLAS) and PyTorch's CPU backend
(Debian's python3-torch, oneDNN), at the same shapes, threads and element
types, with seqc's time as a ratio of each.

  peers.py RESULTS.tsv

Each peer runs in a subprocess of its own, so that an environment setting
meant for one library (OPENBLAS_CORETYPE) reaches that command only. In it
the peer and seqc (through its Python package, the same product on the same
arrays) are timed in interleaved rounds, one call of each per round: a
shared host's speed drifts by tens of percent within a sitting, and a ratio
of two times taken minutes apart measured the drift as much as the code.
"""
import os
import re
import subprocess
import sys

RUNS = 9

# seqc-bench case -> [(peer label, peer key)]
PEERS = {
    "matmul_f32": [("numpy f32 (OpenBLAS)", "numpy_f32"),
                   ("PyTorch f32", "torch_f32")],
    "matmul_bf16": [("PyTorch bf16", "torch_bf16")],
}


def host_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def seqc_product(n, elt, threads):
    """seqc's n x n x n product of `elt` operands into f32 (seqc-bench's
    matmul graph), compiled through the Python package."""
    import seqc
    t = f"tensor<{n}x{n}x{elt}>"
    c = f"tensor<{n}x{n}xf32>"
    text = (f"func.func @main(%a: {t}, %b: {t}) -> {c} {{\n"
            f"  %z = arith.constant 0.0 : f32\n"
            f"  %e = tensor.empty() : {c}\n"
            f"  %f = linalg.fill ins(%z : f32) outs(%e : {c}) -> {c}\n"
            f"  %r = linalg.matmul ins(%a, %b : {t}, {t}) outs(%f : {c}) -> {c}\n"
            f"  return %r : {c}\n}}\n")
    return seqc.compile(text, num_threads=threads).main


def time_peer(key, n, threads):
    """Median ms of an n x n x n product through peer `key` and through
    seqc, timed in interleaved rounds (in this process: called by the
    subprocess)."""
    import statistics
    import time
    import numpy as np
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    if key == "numpy_f32":
        peer = lambda: a @ b
        ours = seqc_product(n, "f32", threads)
        mine = lambda: ours(a, b)
    else:
        import torch
        torch.set_num_threads(threads)
        dtype = torch.bfloat16 if key == "torch_bf16" else torch.float32
        ta, tb = torch.from_numpy(a).to(dtype), torch.from_numpy(b).to(dtype)
        peer = lambda: torch.matmul(ta, tb)
        ours = seqc_product(n, "bf16" if key == "torch_bf16" else "f32",
                            threads)
        mine = lambda: ours(ta, tb)
    peer(), mine()  # warm-up
    times = {"peer": [], "seqc": []}
    for _ in range(RUNS):
        for name, product in (("peer", peer), ("seqc", mine)):
            # Both libraries' worker threads spin a while after a call
            # (OpenBLAS for about 0.1 s): a pause lets them sleep before the
            # other library's call, which they would otherwise slow.
            time.sleep(0.3)
            t0 = time.perf_counter()
            product()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times["peer"]), statistics.median(times["seqc"])


def run_peer(key, n, threads):
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    # OpenBLAS's SkylakeX kernels where the host has AVX-512 (its runtime
    # detection does not always pick them in a VM); never elsewhere, where
    # they would not run.
    if key == "numpy_f32" and "avx512f" in host_flags():
        env["OPENBLAS_CORETYPE"] = "SkylakeX"
    build = os.environ.get("SEQC_BUILD_DIR", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(build, "python")] +
        [p for p in [os.environ.get("PYTHONPATH")] if p])
    proc = subprocess.run(
        [sys.executable, __file__, "--peer", key, str(n), str(threads)],
        env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return None, None, last
    peer_ms, seqc_ms = map(float, proc.stdout.split())
    return peer_ms, seqc_ms, ""


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--peer":
        peer_ms, seqc_ms = time_peer(sys.argv[2], int(sys.argv[3]),
                                     int(sys.argv[4]))
        print(f"{peer_ms:.4f} {seqc_ms:.4f}")
        return 0
    if len(sys.argv) != 2:
        sys.exit("usage: peers.py RESULTS.tsv")
    threads = os.cpu_count() or 1
    rows = []
    with open(sys.argv[1]) as f:
        for line in f:
            name, ms, rate, shape = line.rstrip("\n").split("\t")
            if name in PEERS:
                rows.append((name, float(ms), shape))
    if not rows:
        print("peers: no case of seqc-bench's results has a peer")
        return 0
    print(f"\npeers, same shapes, {threads} threads, medians of {RUNS} "
          f"interleaved rounds of seqc and the peer (seqc's speed as a "
          f"multiple of the peer's: > 1 is faster):")
    print(f"{'op':<14} {'seqc ms':>9}  {'peer':<22} {'peer ms':>9} "
          f"{'seqc/peer':>10}")
    for name, ms, shape in rows:
        m = re.search(r"M=N=K=(\d+)", shape)
        if not m:
            continue
        n = int(m.group(1))
        for label, key in PEERS[name]:
            peer_ms, seqc_ms, why = run_peer(key, n, threads)
            if peer_ms is None:
                print(f"{name:<14} {ms:9.3f}  {label:<22} {'-':>9} "
                      f"{'-':>10}  ({why})")
            else:
                print(f"{name:<14} {seqc_ms:9.3f}  {label:<22} "
                      f"{peer_ms:9.3f} {peer_ms / seqc_ms:9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
