# An ahead-of-time library records the x86-64 features its code was
# generated for. Called on a CPU without one of them, its entry points run
# the fallback code it carries (x86-64-v2, bf16 products widened) with the
# same results; without a fallback (--fallback-cpu none) the call fails
# with an error naming the feature (not an illegal instruction).
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
    base_out = os.path.join(tmp, "base")
    p = run(["seqc-aot-run", base, "--random-inputs", "--output-dir", base_out])
    lacking = [(cpu, f) for cpu, f, flag in CANDIDATES if flag not in flags]
    for cpu, feature in lacking[:1]:
        lib = os.path.join(tmp, cpu + ".so")
        p = run(["seqc-compile", SOURCE, "-o", lib, "--cpu", cpu])
        expect(f"{cpu} library compiles", p.returncode == 0, p.stderr)
        out = os.path.join(tmp, cpu)
        p = run(["seqc-aot-run", lib, "--random-inputs", "--output-dir", out])
        same = p.returncode == 0 and all(
            open(os.path.join(out, f), "rb").read() ==
            open(os.path.join(base_out, f), "rb").read()
            for f in os.listdir(base_out))
        expect(f"{cpu} library on this CPU runs its fallback, results as x86-64-v2's",
               same, p.stderr)
        bare = os.path.join(tmp, cpu + "-bare.so")
        p = run(["seqc-compile", SOURCE, "-o", bare, "--cpu", cpu, "--fallback-cpu", "none"])
        expect(f"{cpu} library without fallback compiles", p.returncode == 0, p.stderr)
        p = run(["seqc-aot-run", bare, "--random-inputs"])
        msg = p.stderr.strip()
        expect(f"{cpu} library without fallback on this CPU: exit 1 naming {feature} ({msg})",
               p.returncode == 1 and msg.startswith("error: ") and
               "compiled for a CPU with" in msg and feature in msg and
               "which this CPU lacks" in msg)
        # A relocatable object carries both too.
        obj = os.path.join(tmp, cpu + ".o")
        p = run(["seqc-compile", SOURCE, "-o", obj, "--cpu", cpu])
        syms = run(["nm", obj]).stdout
        expect(f"{cpu} object defines seqc_main and seqc_fallback__main",
               p.returncode == 0 and " T seqc_main" in syms and
               " T seqc_fallback__main" in syms, p.stderr)
    if not lacking:
        print("note: this CPU has every candidate's feature; the error is not exercised")

    # The kernels' vectors are as wide as the named CPU's registers, not this
    # machine's. LLVM would split vectors wider than the CPU's registers (so
    # no register check could tell), but each op of a 16-lane kernel would
    # become 2 (AVX2) or 4 (SSE) instructions: the vector instructions of
    # kernels of the right width stay close in number.
    block = os.path.join(HERE, "..", "..", "examples", "gla_block.mlir")
    vector_instructions = {}
    for cpu, register in (("skylake-avx512", "zmm"), ("x86-64-v3", "ymm"),
                          ("x86-64-v2", "xmm")):
        obj = os.path.join(tmp, cpu + "-block.o")
        p = run(["seqc-compile", block, "-o", obj, "--cpu", cpu, "--fallback-cpu", "none"])
        asm = run(["objdump", "-d", "--no-show-raw-insn", obj]).stdout.splitlines()
        widest = [r for r in ("zmm", "ymm", "xmm") if any("%" + r in l for l in asm)]
        n = sum(1 for l in asm if any(f"%{r}" in l for r in ("xmm", "ymm", "zmm")))
        vector_instructions[cpu] = n
        expect(f"{cpu} kernels' widest registers are {register}",
               p.returncode == 0 and widest[:1] == [register], f"({widest}) {p.stderr}")
    base = vector_instructions["skylake-avx512"]
    for cpu in ("x86-64-v3", "x86-64-v2"):
        ratio = vector_instructions[cpu] / max(base, 1)
        expect(f"{cpu} kernels are written for its width: {vector_instructions[cpu]} vector "
               f"instructions, {ratio:.2f}x AVX-512's", ratio < 1.5)
sys.exit(1 if failures else 0)
