# An ahead-of-time library records the x86-64 features its code was
# generated for; called on a CPU without one of them it fails with an error
# naming it (not an illegal instruction). Code for the baseline runs here.
# RUN: %python %s
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "Inputs", "weights.mlir")
# CPUs LLVM knows, each with a feature (LLVM's name, /proc/cpuinfo's) that
# some x86-64 hosts lack.
CANDIDATES = [("sapphirerapids", "amx-tile", "amx_tile"),
              ("tigerlake", "avx512vp2intersect", "avx512_vp2intersect"),
              ("znver4", "avx512bf16", "avx512_bf16")]

with open("/proc/cpuinfo") as f:
    flags = set(f.read().split())
failures = 0


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def expect(what, ok, detail=""):
    global failures
    print(f"{'ok  ' if ok else 'FAIL'} {what} {detail}")
    failures += 0 if ok else 1


with tempfile.TemporaryDirectory() as tmp:
    base = os.path.join(tmp, "base.so")
    p = run(["seqc-compile", SOURCE, "-o", base, "--cpu", "x86-64-v2"])
    expect("x86-64-v2 library compiles", p.returncode == 0, p.stderr)
    p = run(["seqc-aot-run", base, "--random-inputs"])
    expect("x86-64-v2 library runs", p.returncode == 0, p.stderr)
    lacking = [(cpu, f) for cpu, f, flag in CANDIDATES if flag not in flags]
    for cpu, feature in lacking[:1]:
        lib = os.path.join(tmp, cpu + ".so")
        p = run(["seqc-compile", SOURCE, "-o", lib, "--cpu", cpu])
        expect(f"{cpu} library compiles", p.returncode == 0, p.stderr)
        p = run(["seqc-aot-run", lib, "--random-inputs"])
        msg = p.stderr.strip()
        expect(f"{cpu} library on this CPU: exit 1 naming {feature} ({msg})",
               p.returncode == 1 and msg.startswith("error: ") and
               f"compiled for a CPU with" in msg and feature in msg and
               "which this CPU lacks" in msg)
    if not lacking:
        print("note: this CPU has every candidate's feature; the error is not exercised")
sys.exit(1 if failures else 0)
