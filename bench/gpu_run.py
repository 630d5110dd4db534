#!/usr/bin/env python3
"""The GPU check itself, on the GPU machine (bench/gpu.sh run): device tests
and benchmarks from a folder made by gpu_pack.py. Needs python3 with numpy;
PyTorch (where installed) measures the ceilings and the baselines.

  gpu_run.py PACKDIR OUTDIR [--tests-only]

Prints (and writes to OUTDIR/summary.txt) one line per test and benchmark.
Benchmarks are whole calls of seqc-aot-run --bench (inputs staged in managed
memory once; results stay there): the op's kernels plus launch overheads.
"""
import glob
import os
import re
import subprocess
import sys
import time

import numpy as np

if len(sys.argv) < 3:
    sys.exit("usage: gpu_run.py PACKDIR OUTDIR [--tests-only]")
PACK, OUT = sys.argv[1], sys.argv[2]
TESTS_ONLY = "--tests-only" in sys.argv[3:]
RUNNER = os.path.join(PACK, "bin", "seqc-aot-run")
os.makedirs(OUT, exist_ok=True)
summary = open(os.path.join(OUT, "summary.txt"), "a")


def say(line):
    print(line, flush=True)
    summary.write(line + "\n")
    summary.flush()


def runner(args, timeout=900):
    return subprocess.run([RUNNER] + args, capture_output=True, text=True, timeout=timeout)


# Device tests.
failures = 0
tests = sorted(glob.glob(os.path.join(PACK, "tests", "*")))
if not tests or not os.access(RUNNER, os.X_OK):
    say(f"FAIL no device tests or no runner in {PACK} (make it with bench/gpu.sh pack)")
    sys.exit(1)
for d in tests:
    name = os.path.basename(d)
    if not os.path.exists(os.path.join(d, "meta")):
        failures += 1
        say(f"FAIL test {name}: incomplete pack (no meta; make it again with bench/gpu.sh pack)")
        continue
    kind = open(os.path.join(d, "meta")).read().strip()
    ins = sorted(glob.glob(os.path.join(d, "in*.npy")), key=lambda p: int(p[len(d) + 3:-4]))
    out = os.path.join(OUT, "tests", name)
    args = [os.path.join(d, "lib.so"), "--output-dir", out]
    for p in ins:
        args += ["--input", p]
    p = runner(args)
    if p.returncode != 0:
        failures += 1
        say(f"FAIL test {name}: {p.stderr.strip()}")
        continue
    expected = len(glob.glob(os.path.join(d, "expect*.npy")))
    produced = len(glob.glob(os.path.join(out, "result*.npy")))
    if expected == 0 or produced != expected:
        failures += 1
        say(f"FAIL test {name}: {produced} results for {expected} expected")
        continue
    for i in range(expected):
        e = np.load(os.path.join(d, f"expect{i}.npy")).astype(np.float64)
        got = np.load(os.path.join(out, f"result{i}.npy")).astype(np.float64)
        if np.issubdtype(np.load(os.path.join(d, f"expect{i}.npy")).dtype, np.integer):
            ok, detail = np.array_equal(got, e), "exact"
        elif kind == "f32":
            err = float(np.max(np.abs(got - e))) if e.size else 0.0
            lim = 2e-4 * max(1.0, float(np.max(np.abs(e)))) if e.size else 0.0
            ok, detail = err <= lim, f"max|err| {err:.3g} (limit {lim:.3g})"
        else:
            # The SPEC's bf16 bound on the whole result, and no element far
            # off (one wrong tile would hide in a global RMS).
            rms = float(np.sqrt(np.mean((got - e) ** 2)) / max(np.sqrt(np.mean(e ** 2)), 1e-30))
            err = float(np.max(np.abs(got - e))) if e.size else 0.0
            lim = 2e-2 * max(1.0, float(np.max(np.abs(e)))) if e.size else 0.0
            ok = rms <= 1e-2 and err <= lim
            detail = f"relative RMS {rms:.3g} (limit 1e-2), max|err| {err:.3g} (limit {lim:.3g})"
        failures += 0 if ok else 1
        say(f"{'ok  ' if ok else 'FAIL'} test {name} result {i}: {detail}")
say(f"device tests: {'all passed' if failures == 0 else f'{failures} failed'}")


def nccl_probe():
    """What the NCCL path of --parallel on --target cuda would find here
    (test/Integration/distributed_cuda.py needs two GPUs and libnccl)."""
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        gpus = count.value if cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 else 0
    except OSError:
        gpus = 0
    try:
        nccl = ctypes.CDLL("libnccl.so.2")
        version = ctypes.c_int(0)
        nccl.ncclGetVersion(ctypes.byref(version))
        found = f"libnccl.so.2 {version.value}"
    except OSError:
        found = "no libnccl.so.2 on the loader path"
    say(f"nccl: {found}; {gpus} GPU(s) (seqc's NCCL path runs from 2)")


nccl_probe()
if TESTS_ONLY:
    sys.exit(1 if failures else 0)

# Ceilings and baselines.
try:
    import torch
    have_torch = torch.cuda.is_available()
except Exception:
    have_torch = False


def timed(fn, reps=10):
    fn(); fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps


bw = tf = None
if have_torch:
    x = torch.empty(2 * 1024**3 // 4, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    bw = 2 * x.numel() * 4 / timed(lambda: y.copy_(x)) / 1e9
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn_like(a)
    tf = 2 * 8192**3 / timed(lambda: a @ b) / 1e12
    del x, y, a, b
    say(f"ceilings: device-to-device copy {bw:.0f} GB/s, bf16 matmul {tf:.0f} TFLOP/s")
else:
    say("ceilings: PyTorch with CUDA is not installed: ceilings and baselines missing")


def bench(name):
    lib = os.path.join(PACK, "bench", name + ".so")
    p = runner([lib, "--random-inputs", "--bench", "5"])
    with open(os.path.join(OUT, name + ".log"), "w") as f:
        f.write(p.stdout + p.stderr)
    m = re.search(r"median_ms=([0-9.e+-]+)", p.stdout)
    if p.returncode != 0 or not m:
        say(f"{name}: seqc-aot-run failed: {p.stderr.strip()[:300]}")
        return None
    return float(m.group(1)) / 1e3


def report(what, s, detail, ratio=None, baseline=None, baseline_name="PyTorch"):
    if s is None:
        return
    line = f"{what}: {s * 1e3:.3f} ms, {detail}"
    if ratio is not None:
        line += f" = {ratio:.3f} of the ceiling"
    if baseline:
        line += f"; {baseline_name} {baseline * 1e3:.3f} ms ({baseline / s:.2f}x seqc's time)"
    say(line)


Mm = 8192
s = bench("matmul")
if s:
    report(f"matmul bf16 {Mm}x{Mm}x{Mm} (f32 result)", s,
           f"{2 * Mm**3 / s / 1e12:.2f} TFLOP/s", 2 * Mm**3 / s / 1e12 / tf if tf else None)

B, T, D, N = 8, 8192, 2048, 16
s = bench("linear_scan")
base = None
if have_torch and s:
    a = torch.rand(B, T, D, device="cuda", dtype=torch.bfloat16)
    bb = torch.rand_like(a)
    def eager_scan():
        # PyTorch has no scan primitive: eager code steps through time.
        h = torch.zeros(B, D, device="cuda")
        out = torch.empty(B, T, D, device="cuda", dtype=torch.bfloat16)
        for j in range(T):
            h = a[:, j].float() * h + bb[:, j].float()
            out[:, j] = h.to(torch.bfloat16)
        return out
    base = timed(eager_scan, 1)
    del a, bb
if s:
    gbs = 3 * B * T * D * 2 / s / 1e9
    report(f"linear_scan B={B} T={T} D={D}", s, f"{gbs:.0f} GB/s (a, b, h in bf16)",
           gbs / bw if bw else None, base, "PyTorch eager loop")

s = bench("selective_scan")
if s:
    gbs = 3 * B * T * D * 2 / s / 1e9
    report(f"selective_scan B={B} T={T} D={D} N={N}", s, f"{gbs:.0f} GB/s (u, delta, y in bf16)",
           gbs / bw if bw else None)

H, P, NS, Q = 32, 64, 128, 64
s = bench("ssd")
flops = B * H * (T // Q) * (2 * Q * Q * NS + 2 * Q * Q * P + 4 * Q * P * NS)
base = None
if have_torch and s:
    x = torch.randn(B, T, H, P, device="cuda", dtype=torch.bfloat16)
    dt = torch.rand(B, T, H, device="cuda") * 0.1
    A = -torch.rand(H, device="cuda")
    Bm = torch.randn(B, T, NS, device="cuda", dtype=torch.bfloat16)
    Cm = torch.randn_like(Bm)
    def eager_ssd():
        # The chunked SSD in einsums (as mamba_ssm's minimal reference).
        C = T // Q
        xs = x.float().view(B, C, Q, H, P)
        cs = (dt * A).view(B, C, Q, H).permute(0, 3, 1, 2).cumsum(-1)
        Bc = Bm.float().view(B, C, Q, NS)
        Cc = Cm.float().view(B, C, Q, NS)
        causal = torch.ones(Q, Q, dtype=torch.bool, device="cuda").tril()
        L = torch.exp((cs.unsqueeze(-1) - cs.unsqueeze(-2)).masked_fill(~causal, -float("inf")))
        dtx = xs * dt.view(B, C, Q, H, 1)
        y = torch.einsum("bcln,bcsn,bhcls,bcshp->bclhp", Cc, Bc, L, dtx)
        states = torch.einsum("bcln,bhcl,bclhp->bchpn", Bc, torch.exp(cs[..., -1:] - cs), dtx)
        decay = torch.exp(cs[..., -1])
        s_in, ins = torch.zeros(B, H, P, NS, device="cuda"), []
        for c in range(C):
            ins.append(s_in)
            s_in = decay[:, :, c, None, None] * s_in + states[:, c]
        y = y + torch.einsum("bcln,bchpn,bhcl->bclhp", Cc, torch.stack(ins, 1), torch.exp(cs))
        return y.reshape(B, T, H, P)
    try:
        base = timed(eager_ssd, 2)
    except Exception as e:  # memory: the einsums materialize large tensors
        say(f"PyTorch eager SSD failed: {e}")
    del x, dt, Bm, Cm
if s:
    report(f"ssd B={B} T={T} H={H} P={P} N={NS}", s, f"{flops / s / 1e12:.2f} TFLOP/s useful",
           flops / s / 1e12 / tf if tf else None, base, "PyTorch eager chunked SSD")

K = V = 128
QL = 32
s = bench("linear_attention")
flops = B * H * (T // QL) * (2 * QL * QL * K + 2 * QL * QL * V + 4 * QL * K * V)
if s:
    report(f"linear_attention B={B} T={T} H={H} K=V={K}", s,
           f"{flops / s / 1e12:.2f} TFLOP/s useful", flops / s / 1e12 / tf if tf else None)

Ba = 4
s = bench("attention")
flops = 4 * Ba * H * T * T * K / 2  # causal: half of the scores
base = None
if have_torch and s:
    q = torch.randn(Ba, H, T, K, device="cuda", dtype=torch.bfloat16)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    base = timed(lambda: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True), 3)
    del q, k, v
if s:
    report(f"attention causal B={Ba} T={T} H={H} K=V={K}", s,
           f"{flops / s / 1e12:.2f} TFLOP/s useful", flops / s / 1e12 / tf if tf else None,
           base, "PyTorch SDPA")

Tm, Dm, F, E, k = 8192, 4096, 1408, 64, 6
s = bench("moe_ffn")
flops = Tm * k * 6 * Dm * F
if s:
    report(f"moe_ffn T={Tm} D={Dm} F={F} E={E} k={k} (random indices: experts 0-3)", s,
           f"{flops / s / 1e12:.2f} TFLOP/s useful", flops / s / 1e12 / tf if tf else None)

# Gated DeltaNet (qk_l2norm, HV = H): the target is 0.25 of the bf16
# matmul ceiling, counting the recurrence's 6 K V FLOPs per step and value
# head. Random inputs: betas and log decays uniform in [-1, 1).
HV = 32
s = bench("delta_rule")
flops = 6 * B * T * HV * K * V
if s:
    report(f"delta_rule (Gated DeltaNet) B={B} T={T} H={H} K=V={K}", s,
           f"{flops / s / 1e12:.2f} TFLOP/s useful", flops / s / 1e12 / tf if tf else None)
sys.exit(1 if failures else 0)
