# lit configuration of seqc's tests: dialect round trips and diagnostics,
# pass structure, and integration tests against numpy references.
import ctypes
import ctypes.util
import os

import lit.formats

config.name = "seqc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test", ".py"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "lib", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.seqc_obj_root, "test")

# seqc's tools first, then FileCheck, not, count from LLVM.
config.environment["PATH"] = os.pathsep.join(
    [config.seqc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.environment["PYTHONPATH"] = os.pathsep.join([
    os.path.join(config.test_source_root, "Integration", "lib"),
    os.path.join(config.seqc_src_root, "examples", "blocks")])
# Compiled code is cached under the build tree, never in the user's home.
config.environment["SEQC_CACHE_DIR"] = os.path.join(config.seqc_obj_root, "test-cache")
# Tests are deterministic and sized for a small machine.
config.environment["SEQC_NUM_THREADS"] = os.environ.get("SEQC_NUM_THREADS", "2")

config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%seqc_src", config.seqc_src_root))
config.substitutions.append(("%seqc_obj", config.seqc_obj_root))


def cuda_device_count():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        if cuda.cuInit(0) != 0:
            return 0
        count = ctypes.c_int(0)
        return count.value if cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 else 0
    except OSError:
        return 0


# Sanitizer builds (scripts/sanitize.sh) have no installable package.
if getattr(config, "seqc_sanitize", ""):
    config.available_features.add("sanitizer")
    config.environment["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "")
    config.environment["UBSAN_OPTIONS"] = os.environ.get("UBSAN_OPTIONS", "")
    config.environment["LSAN_OPTIONS"] = os.environ.get("LSAN_OPTIONS", "")

cuda_devices = cuda_device_count()
if cuda_devices > 0:
    config.available_features.add("cuda-device")
# NCCL's collectives need a GPU per rank: two for the smallest real split.
if cuda_devices > 1 and ctypes.util.find_library("nccl"):
    config.available_features.add("nccl-gpus")
cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
ptxas = os.path.join(cuda_home, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
    config.environment["CUDA_HOME"] = cuda_home

# Distributed runs need OpenMPI's mpirun and libmpi (scripts/setup.sh).
import shutil  # noqa: E402
if shutil.which("mpirun") and ctypes.util.find_library("mpi"):
    config.available_features.add("mpi")
# How the distributed tests start ranks (%mpirun here, seqc_mpi.py for the
# Python ones): shared memory between the ranks of this machine, no
# single-copy (CMA needs ptrace rights containers often lack). Under the
# sanitizers the ranks keep every ASan and UBSan check but the leak check:
# OpenMPI unloads its components (mca_*.so) in MPI_Finalize, so LSan meets
# their allocations with stacks it cannot read or tell from seqc's.
mpi_env = ["OMPI_MCA_btl=self,vader", "OMPI_MCA_btl_vader_single_copy_mechanism=none"]
if getattr(config, "seqc_sanitize", ""):
    rank_asan = [o for o in config.environment["ASAN_OPTIONS"].split(":")
                 if o and not o.startswith("detect_leaks=")] + ["detect_leaks=0"]
    config.environment["SEQC_MPI_ASAN_OPTIONS"] = ":".join(rank_asan)
    rank_env = ["ASAN_OPTIONS=" + ":".join(rank_asan)]
else:
    rank_env = []
config.substitutions.append(
    ("%mpirun", "env " + " ".join(mpi_env + rank_env) + " mpirun --allow-run-as-root --oversubscribe"))
# MPICH's launcher (Hydra) and library, where installed: the same runs on
# MPICH's ABI (seqc picks libmpich.so.12 under Hydra). Hydra runs more ranks
# than cores and as root without options.
if shutil.which("mpiexec.mpich") and shutil.which("mpicc.mpich") and \
        ctypes.util.find_library("mpich"):
    config.available_features.add("mpich")
config.substitutions.append(
    ("%mpiexec-mpich", " ".join(["env"] + rank_env + ["mpiexec.mpich"])))

# The CPU's bf16 dot-product path runs where the host has AVX-512 BF16
# (seqc's own choice reads LLVM's host features; /proc/cpuinfo says the same).
try:
    with open("/proc/cpuinfo") as f:
        if " avx512_bf16" in f.read():
            config.available_features.add("avx512bf16")
except OSError:
    pass
