"""seqc.compile(..., ranks=R) under mpirun: every rank calls the same
function on the same arrays and gets the single-process results (an ssd
with init, T = 50 over 2 ranks); ranks that are not the world's size are a
CompileError. With parallel="experts", a moe_ffn with capacity, its
experts split over 2 ranks, equals one process too. The ssd also runs on
the emulated GPU target (its exchanges through the NCCL entry points,
carried out by MPI)."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

MPIRUN = shutil.which("mpirun")

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import seqc

    T, H, P, N = 50, 2, 3, 4
    x, dt = f"tensor<1x{T}x{H}x{P}xf32>", f"tensor<1x{T}x{H}xf32>"
    bc, st = f"tensor<1x{T}x1x{N}xf32>", f"tensor<1x{H}x{P}x{N}xf32>"
    text = f'''
    func.func @main(%x: {x}, %dt: {dt}, %A: tensor<{H}xf32>, %B: {bc}, %C: {bc},
                    %h0: {st}) -> ({x}, {st}) {{
      %y, %last = seq.ssd %x, %dt, %A, %B, %C init(%h0) {{chunk_size = 16}}
        : ({x}, {dt}, tensor<{H}xf32>, {bc}, {bc}, {st}) -> ({x}, {st})
      return %y, %last : {x}, {st}
    }}
    '''
    r = np.random.default_rng(3)
    args = [r.standard_normal((1, T, H, P)), r.uniform(0.1, 0.8, (1, T, H)),
            -r.uniform(0.5, 1.5, H), r.standard_normal((1, T, 1, N)),
            r.standard_normal((1, T, 1, N)), r.standard_normal((1, H, P, N))]
    args = [np.ascontiguousarray(a, np.float32) for a in args]
    target = sys.argv[2]
    split = seqc.compile(text, target, ranks=int(sys.argv[1])).main(*args)
    whole = seqc.compile(text, target).main(*args)
    for got, ref in zip(split, whole):
        err = float(np.max(np.abs(got - ref)))
        assert err <= 1e-4 * max(1.0, float(np.max(np.abs(ref)))), err
    try:
        seqc.compile(text, ranks=int(sys.argv[1]) + 1)
        print("a module for more ranks than processes compiled")
    except seqc.CompileError as e:
        assert "compiled for" in str(e), str(e)
    print("agree")
""")


@pytest.mark.skipif(MPIRUN is None, reason="needs OpenMPI's mpirun")
@pytest.mark.parametrize("ranks", [2])
@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
def test_ranks_agree_with_one_process(tmp_path, ranks, target):
    script = tmp_path / "split.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, OMPI_MCA_btl="self,vader",
               OMPI_MCA_btl_vader_single_copy_mechanism="none",
               SEQC_NUM_THREADS="1")
    proc = subprocess.run(
        [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
         sys.executable, str(script), str(ranks), target],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("agree") == ranks, proc.stdout



EXPERTS_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import seqc

    T, D, F, E, k = 45, 8, 16, 4, 2
    text = f'''
    func.func @main(%x: tensor<{T}x{D}xf32>, %w: tensor<{T}x{k}xf32>,
                    %i: tensor<{T}x{k}xi32>, %up: tensor<{E}x{D}x{F}xf32>,
                    %down: tensor<{E}x{F}x{D}xf32>)
        -> (tensor<{T}x{D}xf32>, tensor<{E}xi64>) {{
      %y, %load = seq.moe_ffn %x, %w, %i, %up, %down {{capacity_factor = 1.0 : f32}}
        : (tensor<{T}x{D}xf32>, tensor<{T}x{k}xf32>, tensor<{T}x{k}xi32>,
           tensor<{E}x{D}x{F}xf32>, tensor<{E}x{F}x{D}xf32>)
          -> (tensor<{T}x{D}xf32>, tensor<{E}xi64>)
      return %y, %load : tensor<{T}x{D}xf32>, tensor<{E}xi64>
    }}
    '''
    r = np.random.default_rng(4)
    idx = np.stack([r.permutation(E)[:k] for _ in range(T)]).astype(np.int32)
    args = [r.standard_normal((T, D)), r.uniform(0.1, 1.0, (T, k)), idx,
            r.standard_normal((E, D, F)) / 3, r.standard_normal((E, F, D)) / 4]
    args = [a if a.dtype == np.int32 else np.ascontiguousarray(a, np.float32)
            for a in args]
    ranks = int(sys.argv[1])
    y, load = seqc.compile(text, ranks=ranks, parallel="experts").main(*args)
    y1, load1 = seqc.compile(text).main(*args)
    err = float(np.max(np.abs(y - y1)))
    assert err <= 1e-4 * max(1.0, float(np.max(np.abs(y1)))), err
    assert np.array_equal(load, load1), (load, load1)
    try:
        seqc.compile(text, ranks=ranks, parallel="tokens")
        print("an unknown parallel compiled")
    except ValueError as e:
        assert "sequence, experts or sequence+experts" in str(e), str(e)
    print("agree")
""")


@pytest.mark.skipif(MPIRUN is None, reason="needs OpenMPI's mpirun")
def test_experts_agree_with_one_process(tmp_path):
    script = tmp_path / "experts.py"
    script.write_text(EXPERTS_SCRIPT)
    env = dict(os.environ, OMPI_MCA_btl="self,vader",
               OMPI_MCA_btl_vader_single_copy_mechanism="none",
               SEQC_NUM_THREADS="1")
    proc = subprocess.run(
        [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2",
         sys.executable, str(script), "2"],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("agree") == 2, proc.stdout
