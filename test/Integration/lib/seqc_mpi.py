"""seqc-run under mpirun on this machine, for the distributed tests:
`run` compiles and calls a graph with --parallel on R ranks (or in one
process) and returns the results rank 0 wrote. SEQC_MPI_TEST_TARGET names
the target of every run (default: the CPU; cuda-emulated runs the GPU
target's kernels and NCCL entry points on the host). SEQC_MPI_TEST_MPI
names the MPI that runs the ranks: openmpi (default: OpenMPI's mpirun and
libmpi.so.40) or mpich (MPICH's Hydra mpiexec and libmpich.so.12, which
seqc picks under Hydra: the MPICH ABI)."""
import os
import subprocess
import tempfile

from seqc_testing import SEQC_RUN, load_results, save_inputs

MPI = os.environ.get("SEQC_MPI_TEST_MPI", "openmpi")
if MPI == "mpich":
    MPIRUN = ["mpiexec.mpich"]
    # Each rank's place, as the launcher tells the processes.
    RANK_VAR = "PMI_RANK"
else:
    MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
    RANK_VAR = "OMPI_COMM_WORLD_RANK"
TARGET = os.environ.get("SEQC_MPI_TEST_TARGET", "cpu")
# Shared memory between the ranks on this machine; no single-copy (CMA
# needs ptrace rights containers often lack). Under the sanitizers, the
# ranks' ASan options as lit.cfg.py gives them (no leak check: OpenMPI
# unloads its components, whose allocations LSan cannot place).
ENV = dict(os.environ, OMPI_MCA_btl="self,vader",
           OMPI_MCA_btl_vader_single_copy_mechanism="none",
           OMPI_MCA_rmaps_base_oversubscribe="1")
if "SEQC_MPI_ASAN_OPTIONS" in os.environ:
    ENV["ASAN_OPTIONS"] = os.environ["SEQC_MPI_ASAN_OPTIONS"]


def run(mlir, inputs, ranks, extra=(), expect_error=False, timeout=240,
        parallel="sequence", env=None):
    """seqc-run under mpirun -np ranks with --parallel `parallel` (ranks 0:
    one process, without mpirun or --parallel), with `env` added to the
    environment; the results rank 0 wrote, or (returncode, stderr) with
    expect_error."""
    with tempfile.TemporaryDirectory(prefix="seqc-mpi-") as tmp:
        src = os.path.join(tmp, "graph.mlir")
        with open(src, "w") as f:
            f.write(mlir)
        cmd = [SEQC_RUN, src, "--output-dir", os.path.join(tmp, "out"),
               "--target", TARGET]
        cmd += save_inputs(inputs, tmp) + list(extra)
        if ranks:
            cmd = MPIRUN + ["-np", str(ranks)] + cmd + ["--parallel", parallel]
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env=dict(ENV, **(env or {})), timeout=timeout)
        if expect_error:
            return proc.returncode, proc.stderr
        if proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}: {proc.stderr[-2000:]}")
        return load_results(os.path.join(tmp, "out"))
