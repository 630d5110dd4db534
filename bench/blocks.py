"""End-to-end time of every example block at a realistic size on the CPU
pipeline, against the sum of its ops run separately and against the
reference lowering, with the memory fusion keeps out of the picture.

  /usr/bin/python3 bench/blocks.py [--d-model 1024] [--tokens 2048]
        [--runs 5] [--blocks mamba1 mamba2 ...] [--no-reference]

For each block (generated at --d-model, Mamba-2 layers with d_state 128 and
head dimension 64 as in mamba2-370m; weights from examples/blocks/weights.py)
it runs seqc-run four ways:
  fused       the default pipeline (--bench N)
  ops apart   --profile=ops: every op moved into a function of its own and
              timed; the sum of the ops is "the ops run separately"
  unfused     --no-fuse: the whole graph without elementwise fusion
  reference   --reference, one call
and reports the medians and the bytes each variant allocates per call: the
difference between unfused and fused is the intermediates fusion never
writes (and never reads back).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples", "blocks"))
import generate  # noqa: E402
import weights as wgen  # noqa: E402

import numpy as np  # noqa: E402


def run(cmd, timeout=None):
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {proc.stderr.strip()}")
    return proc.stdout, time.time() - t0


def number(pattern, text):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--blocks", nargs="*", default=generate.KINDS)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    seqc_run = os.path.join(args.build, "bin", "seqc-run")
    D, T = args.d_model, args.tokens
    rows = []
    with tempfile.TemporaryDirectory(prefix="seqc-blocks-") as tmp:
        u = os.path.join(tmp, "u.npy")
        np.save(u, wgen.make_input(D, T, seed=3))
        for kind in args.blocks:
            name, text, _ = generate.build(kind, D, d_state=128, headdim=64)
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            w = os.path.join(tmp, kind + ".safetensors")
            wgen.write_safetensors(w, wgen.make_weights(kind, D, seed=1, d_state=128,
                                                        headdim=64))
            base = [seqc_run, path, "--weights", w, "--input", u]
            print(f"{kind}: fused ...", file=sys.stderr, flush=True)
            fused, _ = run(base + ["--bench", str(args.runs), "--profile"])
            print(f"{kind}: ops apart ...", file=sys.stderr, flush=True)
            ops, _ = run(base + ["--bench", str(args.runs), "--profile=ops"])
            print(f"{kind}: unfused ...", file=sys.stderr, flush=True)
            unfused, _ = run(base + ["--bench", str(args.runs), "--profile", "--no-fuse"])
            ref_ms = float("nan")
            if not args.no_reference:
                print(f"{kind}: reference (one call) ...", file=sys.stderr, flush=True)
                ref, _ = run(base + ["--reference", "--profile"])
                ref_ms = number(r"whole call\s+([0-9.]+) ms", ref)
            row = {
                "block": kind,
                "fused": number(r"bench: median_ms=([0-9.]+)", fused),
                "ops": number(r"\(sum of ops\)\s+([0-9.]+) ms", ops),
                "unfused": number(r"bench: median_ms=([0-9.]+)", unfused),
                "ref": ref_ms,
                "mb_fused": number(r"allocated per call: ([0-9.]+) MB", fused),
                "mb_ops": number(r"allocated per call: ([0-9.]+) MB", ops),
                "mb_unfused": number(r"allocated per call: ([0-9.]+) MB", unfused),
            }
            rows.append(row)
            print(f"{kind}: {row}", file=sys.stderr, flush=True)

    print(f"\nseqc blocks, d_model {D}, {T} tokens, batch 1, "
          f"{os.cpu_count()} threads; medians of {args.runs} calls (reference: one call)\n")
    print("| block | fused ms | ops apart ms | fused / ops | unfused ms | reference ms "
          "| ref / fused | MB fused | MB unfused | MB ops apart |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['block']} | {r['fused']:.1f} | {r['ops']:.1f} | "
              f"{r['fused'] / r['ops']:.2f} | {r['unfused']:.1f} | {r['ref']:.0f} | "
              f"{r['ref'] / r['fused']:.0f}x | {r['mb_fused']:.0f} | {r['mb_unfused']:.0f} | "
              f"{r['mb_ops']:.0f} |")


if __name__ == "__main__":
    main()
