"""Helpers for seqc's integration tests: build MLIR, run seqc-run, compare.

Every test computes its expectation with numpy in float64 from the SPEC's
equations (refs.py) and checks seqc's f32 results with the SPEC's rule
max|y - ref| <= tol * max(1, max|ref|).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SEQC_RUN = shutil.which("seqc-run") or "seqc-run"
SEQC_COMPILE = shutil.which("seqc-compile") or "seqc-compile"
SEQC_AOT_RUN = shutil.which("seqc-aot-run") or "seqc-aot-run"

_NP_TO_MLIR = {np.float32: "f32", np.float16: "f16", np.int32: "i32", np.int64: "i64"}


def mlir_type(shape, dtype="f32"):
    dims = "".join(("?" if d is None or d < 0 else str(d)) + "x" for d in shape)
    return f"tensor<{dims}{dtype}>"


def type_of(array):
    return mlir_type(array.shape, _NP_TO_MLIR[array.dtype.type])


class SeqcError(Exception):
    def __init__(self, returncode, stderr):
        super().__init__(f"seqc-run exited with {returncode}: {stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


# Every run compiles through both CPU pipelines: the fast one (the default)
# and the reference lowering, and through the CUDA lowering with its kernels
# emulated on the host (the GPU kernels' arithmetic, without a GPU). Their
# results must agree to the SPEC's tolerance, so every integration case also
# proves fast == reference == GPU kernels.
PIPELINES = ([], ["--reference"], ["--target", "cuda-emulated"])
PIPELINE_NAMES = ("fast", "reference", "cuda-emulated")


def save_inputs(inputs, directory, prefix=""):
    """Saves `inputs` (numpy arrays, in argument order) as .npy files in
    `directory`; returns the --input arguments that bind them."""
    args = []
    for i, a in enumerate(inputs):
        path = os.path.join(directory, f"{prefix}in{i}.npy")
        np.save(path, np.ascontiguousarray(a))
        args += ["--input", path]
    return args


def load_results(directory):
    """The result<i>.npy files a run wrote into `directory`, in order."""
    results, i = [], 0
    while os.path.exists(os.path.join(directory, f"result{i}.npy")):
        results.append(np.load(os.path.join(directory, f"result{i}.npy")))
        i += 1
    return results


def _run_once(mlir, input_args, func, extra, tmp, tag):
    src = os.path.join(tmp, "graph.mlir")
    if not os.path.exists(src):
        with open(src, "w") as f:
            f.write(mlir)
    out = os.path.join(tmp, "out-" + tag)
    cmd = [SEQC_RUN, src, "--output-dir", out]
    if func:
        cmd += ["-e", func]
    cmd += input_args + list(extra)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc, out, load_results(out)


def _compare(fast, other, name, tol):
    if len(fast) != len(other):
        raise AssertionError(f"the fast and {name} pipelines return different numbers "
                             "of results")
    for i, (f, r) in enumerate(zip(fast, other)):
        if f.shape != r.shape or f.dtype != r.dtype:
            raise AssertionError(f"result {i}: fast {f.shape} {f.dtype} vs {name} "
                                 f"{r.shape} {r.dtype}")
        if np.issubdtype(f.dtype, np.integer):
            if not np.array_equal(f, r):
                raise AssertionError(f"result {i}: fast and {name} pipelines differ")
            continue
        # NaNs must sit at the same places; every other element is compared
        # (one shared NaN must not hide the others' differences).
        if not np.array_equal(np.isnan(f), np.isnan(r)):
            raise AssertionError(f"result {i}: fast and {name} pipelines have NaNs at "
                                 "different places")
        finite = ~np.isnan(f)
        fv = f[finite].astype(np.float64)
        rv = r[finite].astype(np.float64)
        # inf - inf is NaN: equal infinities count as no difference.
        diff = np.where(fv == rv, 0.0, np.abs(fv - rv))
        err = float(np.max(diff)) if diff.size else 0.0
        big = np.abs(rv[np.isfinite(rv)])
        scale = max(1.0, float(np.max(big))) if big.size else 1.0
        if not err <= tol * scale:
            raise AssertionError(f"result {i}: fast pipeline differs from the {name} one "
                                 f"by {err:.3g} (limit {tol * scale:.3g})")


def _strict_flags(cpu_strict, gpu_strict):
    """--strict for the fast runs that claim a fast path, so that an op
    falling back to the reference lowering fails the test instead of
    passing as a success: both targets' fast kernels take f32, bf16 and
    f16."""
    return (["--strict"] if cpu_strict else [], [],
            ["--strict"] if gpu_strict else [])


def error_lines(stderr):
    """The error lines: not the remarks about fallbacks (they differ between
    pipelines) nor seqc-run's notice of a compilation that takes over a
    second (it depends on the machine's load)."""
    return "\n".join(l for l in stderr.splitlines()
                     if not l.startswith(("remark: ", "seqc-run: compiling ")))


def run_seqc(mlir, inputs, func=None, extra=(), expect_error=False, tol=1e-4,
             results_of="fast", cpu_strict=True, gpu_strict=True):
    """Runs `mlir` through seqc-run with `inputs` (numpy arrays, in argument
    order), on every pipeline of PIPELINES, and returns the results of
    `results_of` (a name of PIPELINE_NAMES) as numpy arrays after checking
    that the others agree with the fast one. The fast CPU and GPU runs are
    strict (every op must take its fast kernel) unless `cpu_strict` /
    `gpu_strict` say otherwise (for shapes a kernel declines on purpose).
    With
    expect_error, every run must fail with status 1, the same message and no
    output file; the message is returned."""
    strict = (([], [], []) if expect_error
              else _strict_flags(cpu_strict, gpu_strict))
    with tempfile.TemporaryDirectory(prefix="seqc-test-") as tmp:
        input_args = save_inputs(inputs, tmp)
        runs = [_run_once(mlir, input_args, func, list(extra) + p + strict[n], tmp, f"p{n}")
                for n, p in enumerate(PIPELINES)]
        if expect_error:
            messages = set()
            for proc, out, _ in runs:
                if proc.returncode != 1:
                    raise AssertionError(
                        f"expected exit status 1, got {proc.returncode}: {proc.stderr}")
                if os.path.exists(out) and os.listdir(out):
                    raise AssertionError("a failing run wrote output files")
                messages.add(error_lines(proc.stderr))
            if len(messages) != 1:
                raise AssertionError(f"the pipelines report different errors: {messages}")
            return error_lines(runs[0][0].stderr)
        for proc, _, _ in runs:
            if proc.returncode != 0:
                raise SeqcError(proc.returncode, proc.stderr)
        fast = runs[0][2]
        for name, (_, _, other) in zip(PIPELINE_NAMES[1:], runs[1:]):
            _compare(fast, other, name, tol)
        return runs[PIPELINE_NAMES.index(results_of)][2]


def run_aot(mlir, inputs, cpu):
    """Compiles `mlir` ahead of time for `cpu` (an x86-64 CPU or level:
    its vector width and register file; strict, no fallback), runs it
    through seqc-aot-run with `inputs` and returns its results."""
    with tempfile.TemporaryDirectory(prefix="seqc-aot-") as tmp:
        src, lib = os.path.join(tmp, "graph.mlir"), os.path.join(tmp, "graph.so")
        with open(src, "w") as f:
            f.write(mlir)
        p = subprocess.run([SEQC_COMPILE, src, "-o", lib, "--cpu", cpu,
                            "--fallback-cpu", "none", "--strict"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise AssertionError(f"seqc-compile --cpu {cpu}: {p.stderr}")
        cmd = [SEQC_AOT_RUN, lib, "--output-dir", tmp] + save_inputs(inputs, tmp)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise AssertionError(f"seqc-aot-run ({cpu}): {p.stderr}")
        return load_results(tmp)


class Checker:
    """Collects comparisons; exits non-zero at the end if any failed."""

    def __init__(self):
        self.failures = 0
        self.count = 0

    def close(self, name, got, ref, tol=1e-4):
        self.count += 1
        got = np.asarray(got, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        if got.shape != ref.shape:
            print(f"FAIL {name}: shape {got.shape} != expected {ref.shape}")
            self.failures += 1
            return False
        if ref.size == 0:
            print(f"ok   {name}: empty")
            return True
        err = float(np.max(np.abs(got - ref)))
        scale = max(1.0, float(np.max(np.abs(ref))))
        ok = err <= tol * scale and np.all(np.isfinite(got) == np.isfinite(ref))
        print(f"{'ok  ' if ok else 'FAIL'} {name}: max|err| = {err:.3g} (limit {tol * scale:.3g})")
        if not ok:
            self.failures += 1
        return ok

    def equal(self, name, got, ref):
        self.count += 1
        ok = np.array_equal(np.asarray(got), np.asarray(ref))
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        if not ok:
            print("  got:", np.asarray(got).ravel()[:16])
            print("  ref:", np.asarray(ref).ravel()[:16])
            self.failures += 1
        return ok

    def expect(self, name, condition, detail=""):
        self.count += 1
        print(f"{'ok  ' if condition else 'FAIL'} {name} {detail}")
        if not condition:
            self.failures += 1

    def run(self, name, fn):
        """Runs one case; an exception counts as a failure."""
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - report and continue
            self.count += 1
            self.failures += 1
            print(f"FAIL {name}: {e}")

    def finish(self):
        print(f"{self.count - self.failures}/{self.count} checks passed")
        sys.exit(1 if self.failures else 0)


def rng(seed):
    return np.random.default_rng(seed)


def f32(x):
    return np.asarray(x, dtype=np.float32)


# Log decays g (alpha = exp(g)) for the recurrences that defer their decay
# (the state held as c U, c a product of decays kept in [2^-32, 2^32]):
# each takes a generator r and a shape.
def steep_log_decays(r, shape):
    """A fifth of the steps exp(-80): c leaves the range within a step."""
    return np.where(r.uniform(0, 1, shape) < 0.2, -80.0, -r.uniform(0.01, 0.5, shape))


def growing_log_decays(r, shape):
    """g in (0, 0.9): c grows out of the range (outside SPEC 4's decays)."""
    return r.uniform(0.0, 0.9, shape)


def mild_log_decays(r, shape):
    """g in (-0.006, -0.001): c stays in the range for 3697 steps or more."""
    return -r.uniform(0.001, 0.006, shape)


def bf16(a):
    """Rounds f32 to the nearest bf16 (ties to even), as arith.truncf does."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def f16(a):
    """Rounds f32 to the nearest f16 (back in f32)."""
    return np.asarray(a, dtype=np.float32).astype(np.float16).astype(np.float32)


def rel_rms(got, ref):
    """The SPEC's error measure for bf16/f16 inputs: RMS(got - ref) / RMS(ref)."""
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.sqrt(np.mean((got - ref) ** 2)) / max(np.sqrt(np.mean(ref ** 2)), 1e-30))


def seq_op(result, op, required, optional=(), attrs="", in_types=(), out_types=()):
    """One `%result = seq.op ...` line in the SPEC's custom syntax.
    `optional` is a list of (keyword, [ssa names])."""
    text = ", ".join(required)
    for kw, names in optional:
        text += f" {kw}({', '.join(names)})"
    attr = f" {{{attrs}}}" if attrs else ""
    lhs = f"%{result}:{len(out_types)}" if len(out_types) > 1 else f"%{result}"
    return (f"  {lhs} = seq.{op} {text}{attr} : ({', '.join(in_types)}) -> "
            f"({', '.join(out_types)})")


def func(args, body, results, name="main"):
    """`func.func @name(args) -> (types) { body; return results }` where args
    is a list of (ssa name, type) and results a list of (ssa value, type)."""
    sig = ", ".join(f"%{n}: {t}" for n, t in args)
    rtypes = ", ".join(t for _, t in results)
    rvals = ", ".join(v for v, _ in results)
    lines = [f"func.func @{name}({sig}) -> ({rtypes}) {{"]
    lines += body
    lines.append(f"  return {rvals} : {rtypes}")
    lines.append("}")
    return "\n".join(lines) + "\n"
