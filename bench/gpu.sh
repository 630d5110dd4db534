#!/usr/bin/env bash
# The GPU check for an NVIDIA machine (an H200 is the reference), in one run:
#   bench/gpu.sh OUTDIR
# 1. builds seqc (scripts/build.sh, or reuses build/),
# 2. runs the lit suite, device tests included (REQUIRES: cuda-device),
# 3. measures the machine's ceilings in the same run: device-to-device copy
#    bandwidth, and bf16 matmul TFLOP/s through PyTorch where installed,
# 4. times each seq op with a GPU kernel through `seqc-run --target cuda
#    --bench` at the issue's shapes (bf16 operands, f32 state) and the same
#    op written in PyTorch eager (where installed),
# and writes everything under OUTDIR (summary.txt, lit.txt, per-op logs).
# Note: seqc-run's timing covers a whole call, including the copy of the
# inputs into managed memory; the ratios are therefore lower bounds.
set -uo pipefail
OUT=${1:?usage: bench/gpu.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
ROOT=$PWD
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

say "== seqc GPU check $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$SUMMARY"

if [ ! -x build/bin/seqc-run ]; then
  ./scripts/build.sh >"$OUT/build.txt" 2>&1 || { say "build failed (see build.txt)"; exit 1; }
else
  (cd build && ninja) >"$OUT/build.txt" 2>&1 || { say "build failed (see build.txt)"; exit 1; }
fi
say "== lit (device tests included)"
/usr/lib/llvm-22/bin/lit build/test -v >"$OUT/lit.txt" 2>&1
say "lit exit $? : $(grep -E '^(  Passed|  Failed|  Unsupported)' "$OUT/lit.txt" | tr -s ' ' | tr '\n' ';')"

PY=/usr/bin/python3
ROOT=$ROOT SEQC_RUN=$ROOT/build/bin/seqc-run OUT=$OUT timeout 900 $PY - <<'PYEOF' 2>&1 | tee -a "$SUMMARY"
import os, subprocess, sys, time, re
OUT = os.environ["OUT"]; RUN = os.environ["SEQC_RUN"]
sys.path.insert(0, os.path.join(os.environ["ROOT"], "bench"))
import gpu_graphs
try:
    import torch
    have_torch = torch.cuda.is_available()
except Exception:
    have_torch = False

def ceilings():
    if not have_torch:
        print("ceilings: PyTorch with CUDA not installed; copy bandwidth and matmul ceilings missing")
        return None, None
    x = torch.empty(2 * 1024**3 // 4, dtype=torch.float32, device="cuda"); y = torch.empty_like(x)
    for _ in range(3): y.copy_(x)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(20): y.copy_(x)
    torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 20
    bw = 2 * x.numel() * 4 / dt / 1e9
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda"); b = torch.randn_like(a)
    for _ in range(3): a @ b
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(20): a @ b
    torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 20
    tf = 2 * 8192**3 / dt / 1e12
    print(f"ceilings: copy {bw:.0f} GB/s, bf16 matmul {tf:.0f} TFLOP/s")
    return bw, tf

def bench(name, mlir):
    path = os.path.join(OUT, name + ".mlir")
    open(path, "w").write(mlir)
    p = subprocess.run([RUN, path, "--target", "cuda", "--random-inputs", "--bench", "5"],
                       capture_output=True, text=True, timeout=600)
    open(os.path.join(OUT, name + ".log"), "w").write(p.stdout + p.stderr)
    m = re.search(r"median_ms=([0-9.]+)", p.stdout)
    if p.returncode != 0 or not m:
        print(f"{name}: seqc-run failed: {p.stderr.strip()[:300]}")
        return None
    return float(m.group(1)) / 1e3

bw, tf = ceilings()
B, T, D, N = 8, 8192, 2048, 16
s = bench("linear_scan", gpu_graphs.linear_scan(B, T, D))
if s: print(f"linear_scan B={B} T={T} D={D}: {s*1e3:.2f} ms, {3*B*T*D*2/s/1e9:.0f} GB/s" + (f" = {3*B*T*D*2/s/1e9/bw:.2f} of copy" if bw else ""))
s = bench("selective_scan", gpu_graphs.selective_scan(B, T, D, N))
if s: print(f"selective_scan B={B} T={T} D={D} N={N}: {s*1e3:.2f} ms, {3*B*T*D*2/s/1e9:.0f} GB/s" + (f" = {3*B*T*D*2/s/1e9/bw:.2f} of copy" if bw else ""))
H, P, NS = 32, 64, 128
s = bench("ssd", gpu_graphs.ssd(B, T, H, P, NS))
Q = 64
flops = B * H * (T // Q) * (2 * Q * Q * NS + 2 * Q * Q * P + 2 * 2 * Q * P * NS)
if s: print(f"ssd B={B} T={T} H={H} P={P} N={NS}: {s*1e3:.2f} ms, {flops/s/1e12:.2f} TFLOP/s useful" + (f" = {flops/s/1e12/tf:.3f} of bf16 matmul" if tf else ""))
if have_torch:
    import torch
    x = torch.randn(B, T, H, P, device="cuda", dtype=torch.bfloat16); dt = torch.rand(B, T, H, device="cuda") * 0.1
    A = -torch.rand(H, device="cuda"); Bm = torch.randn(B, T, 1, NS, device="cuda", dtype=torch.bfloat16); Cm = torch.randn_like(Bm)
    def chunked_ssd():
        # The intra-chunk part of the chunked SSD: (L o C B^T)(dt x) per chunk.
        xs = x.float().view(B, T // Q, Q, H, P); dA = (dt * A).view(B, T // Q, Q, H)
        cs = dA.cumsum(2)
        Bc = Bm.float().view(B, T // Q, Q, NS); Cc = Cm.float().view(B, T // Q, Q, NS)
        seg = cs.unsqueeze(3) - cs.unsqueeze(2)              # [b, c, l, s, h]
        causal = torch.ones(Q, Q, device="cuda").tril().view(1, 1, Q, Q, 1)
        L = torch.exp(seg.clamp(max=0)) * causal
        G = torch.einsum("bcln,bcsn->bcls", Cc, Bc)
        return torch.einsum("bcls,bclsh,bcsh,bcshp->bclhp", G, L, dt.view(B, T // Q, Q, H), xs)
    try:
        for _ in range(2): chunked_ssd()
        torch.cuda.synchronize(); t0 = time.perf_counter(); chunked_ssd(); torch.cuda.synchronize()
        te = time.perf_counter() - t0
        print(f"PyTorch eager chunked SSD (intra-chunk part only): {te*1e3:.2f} ms" + (f"; seqc / eager = {te/s:.2f}x" if s else ""))
    except Exception as e:
        print(f"PyTorch eager SSD failed: {e}")
print("linear_attention, attention, moe_ffn: no GPU kernels yet (they run on the host over managed memory); not benchmarked")
PYEOF
say "== done; results in $OUT"
