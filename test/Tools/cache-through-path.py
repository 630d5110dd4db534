# The disk cache hits when seqc-run is started by its bare name through $PATH
# (its build identity comes from the executable itself, not from argv[0]),
# and the cache stays within $SEQC_CACHE_MAX_MB, least recently used out
# first.
# RUN: %python %s
import os
import shutil
import subprocess
import tempfile

from seqc_testing import Checker

c = Checker()
tmp = tempfile.mkdtemp(prefix="seqc-cache-path-")
cache = os.path.join(tmp, "cache")
tools = os.path.dirname(shutil.which("seqc-run"))


def graph(name, scale):
    path = os.path.join(tmp, name + ".mlir")
    with open(path, "w") as f:
        f.write(f"""func.func @main(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {{
  %s = arith.constant dense<{scale}.0> : tensor<64x64xf32>
  %y = arith.mulf %x, %s : tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}}
""")
    return path


def run_by_name(path, max_mb=None, cwd=tmp):
    env = dict(os.environ, PATH=tools + os.pathsep + "/usr/bin:/bin", SEQC_CACHE_DIR=cache)
    env.pop("SEQC_CACHE_MAX_MB", None)
    if max_mb is not None:
        env["SEQC_CACHE_MAX_MB"] = max_mb
    # argv[0] is the bare name, and the working directory has no seqc-run.
    return subprocess.run(["seqc-run", path, "--random-inputs", "-v"], env=env, cwd=cwd,
                          capture_output=True, text=True)


def entries():
    return sorted(f for f in os.listdir(cache) if f.endswith(".seqc")) if os.path.isdir(cache) else []


a = graph("a", 2)
first = run_by_name(a)
c.expect("first run compiles", first.returncode == 0 and "not in the cache" in first.stderr,
         first.stderr)
c.expect("first run stores one entry", len(entries()) == 1, entries())
second = run_by_name(a)
c.expect("second run through PATH hits the disk cache",
         second.returncode == 0 and "disk cache hit" in second.stderr, second.stderr)
c.expect("second run adds no entry", len(entries()) == 1, entries())
c.expect("-v prints the compile stages", "MLIR passes (CPU pipeline)" in first.stderr
         and "code generation" in first.stderr and "JIT link" in first.stderr, first.stderr)

# Bounded: each entry is a few kB; a bound below two entries keeps one.
size = os.path.getsize(os.path.join(cache, entries()[0]))
bound = str(1.5 * size / 1048576)
b = graph("b", 3)
run_by_name(b, bound)
kept = entries()
c.expect("past the bound the least recently used entry goes", len(kept) == 1, kept)
hit_b = run_by_name(b, bound)
c.expect("the newest entry is the one kept", "disk cache hit" in hit_b.stderr, hit_b.stderr)
bad = run_by_name(a, "lots")
c.expect("a malformed SEQC_CACHE_MAX_MB is reported, the run still succeeds",
         bad.returncode == 0 and "SEQC_CACHE_MAX_MB must be a size in megabytes" in bad.stderr,
         bad.stderr)
c.finish()
