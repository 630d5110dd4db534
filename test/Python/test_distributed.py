"""seqc.compile(..., ranks=R) under mpirun: every rank calls the same
function on the same arrays and gets the single-process results (an ssd
with init, T = 50 over 2 ranks); ranks that are not the world's size are a
CompileError. With parallel="experts", a moe_ffn with capacity, its
experts split over 2 ranks, equals one process too. The ssd also runs on
the emulated GPU target (its exchanges through the NCCL entry points,
carried out by MPI)."""

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

MPIRUN = shutil.which("mpirun")


def run_ranks(tmp_path, script_text, ranks, *args):
    """Runs `script_text` under mpirun on `ranks` processes (one thread
    each) with `args`, and checks that every rank printed "agree"."""
    script = tmp_path / "script.py"
    script.write_text(script_text)
    env = dict(os.environ, OMPI_MCA_btl="self,vader",
               OMPI_MCA_btl_vader_single_copy_mechanism="none",
               SEQC_NUM_THREADS="1")
    proc = subprocess.run(
        [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
         sys.executable, str(script)] + [str(a) for a in args],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("agree") == ranks, proc.stdout


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
        raise AssertionError("a module for more ranks than processes compiled")
    except seqc.CompileError as e:
        assert "compiled for" in str(e), str(e)
    print("agree")
""")


@pytest.mark.skipif(MPIRUN is None, reason="needs OpenMPI's mpirun")
@pytest.mark.parametrize("ranks", [2])
@pytest.mark.parametrize("target", ["cpu", "cuda-emulated"])
def test_ranks_agree_with_one_process(tmp_path, ranks, target):
    run_ranks(tmp_path, SCRIPT, ranks, ranks, target)


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
        raise AssertionError("an unknown parallel compiled")
    except ValueError as e:
        assert "sequence, experts or sequence+experts" in str(e), str(e)
    print("agree")
""")


@pytest.mark.skipif(MPIRUN is None, reason="needs OpenMPI's mpirun")
def test_experts_agree_with_one_process(tmp_path):
    run_ranks(tmp_path, EXPERTS_SCRIPT, 2, 2)


COMMUNICATOR_SCRIPT = textwrap.dedent("""
    import numpy as np
    from mpi4py import MPI
    import seqc

    T, C = 37, 3
    t = f"tensor<1x{T}x{C}xf32>"
    text = f'''
    func.func @main(%a: {t}, %b: {t}) -> ({t}, tensor<1x{C}xf32>) {{
      %y, %last = seq.linear_scan %a, %b : ({t}, {t}) -> ({t}, tensor<1x{C}xf32>)
      return %y, %last : {t}, tensor<1x{C}xf32>
    }}
    '''
    world = MPI.COMM_WORLD
    # Two groups of two (ranks 0 and 2, 1 and 3), each on its own data.
    color = world.Get_rank() % 2
    group = world.Split(color, world.Get_rank())
    r = np.random.default_rng(10 + color)
    a = r.uniform(0.5, 1.0, (1, T, C)).astype(np.float32)
    b = r.standard_normal((1, T, C)).astype(np.float32)
    split = seqc.compile(text, ranks=2, communicator=group).main(a, b)
    whole = seqc.compile(text).main(a, b)
    for got, ref in zip(split, whole):
        err = float(np.max(np.abs(got - ref)))
        assert err <= 1e-5 * max(1.0, float(np.max(np.abs(ref)))), err
    try:
        seqc.compile(text, ranks=4, communicator=group)
        raise AssertionError("a module for 4 ranks compiled on a communicator of 2")
    except seqc.CompileError as e:
        assert "compiled for 4 ranks, but its communicator has 2" in str(e), str(e)
    try:
        seqc.compile(text, ranks=2, communicator=MPI.COMM_NULL)
        raise AssertionError("MPI.COMM_NULL was taken")
    except ValueError as e:
        assert "COMM_NULL" in str(e), str(e)
    group.Free()
    print("agree")
""")


@pytest.mark.skipif(MPIRUN is None or importlib.util.find_spec("mpi4py") is None,
                    reason="needs OpenMPI's mpirun and mpi4py")
def test_mpi4py_communicator_groups(tmp_path):
    # seqc.compile(..., communicator=comm) with mpi4py communicators: the
    # world's 4 processes in two groups of 2, each splitting a linear_scan
    # over its own communicator on its own data, equal one process.
    run_ranks(tmp_path, COMMUNICATOR_SCRIPT, 4)


def test_communicator_is_checked_before_mpi():
    import seqc
    text = ("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
            "  return %a : tensor<4xf32>\n}\n")
    with pytest.raises(ValueError, match="ranks > 0"):
        seqc.compile(text, communicator=object())
    with pytest.raises(TypeError, match="mpi4py communicator"):
        seqc.compile(text, ranks=2, communicator=object())


LOCAL_SCRIPT = textwrap.dedent("""
    import os
    import sys
    import numpy as np
    import seqc

    # Rank-local steps: each rank passes its own steps of u (any number on
    # each, one rank possibly none, fewer than the conv's W - 1 on others)
    # and gets back its steps of the block's output; the states are whole.
    counts = [int(c) for c in sys.argv[1].split(",")]
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    start, mine = sum(counts[:rank]), counts[rank]

    def check(text, seed):
        one = seqc.compile(text).main
        rng = np.random.default_rng(seed)
        T = sum(counts)
        args = [np.ascontiguousarray(
                    rng.standard_normal([T if d < 0 else d for d in shape])
                    * 0.3, np.float32) for _, _, shape in one.inputs]
        whole = one(*args)
        split = seqc.compile(text, ranks=len(counts), local_steps=True).main
        own = [a[:, start:start + mine]
               if any(d < 0 for d in shape) else a
               for a, (_, _, shape) in zip(args, one.inputs)]
        got = split(*[np.ascontiguousarray(a) for a in own])
        for g, w, (_, _, shape) in zip(got, whole, one.outputs):
            if any(d < 0 for d in shape):
                w = w[:, start:start + mine]
            assert g.shape == w.shape, (g.shape, w.shape)
            if w.size:
                err = float(np.max(np.abs(g - w)))
                assert err <= 1e-4 * max(1.0, float(np.max(np.abs(w)))), err

    # The example's @main and @step run rank-local; its @packed (a packed
    # batch) has none and is left out: calling it says why.
    example = open(sys.argv[2]).read()
    check(example, 6)
    module = seqc.compile(example, ranks=len(counts), local_steps=True)
    try:
        module.packed
        raise AssertionError("a packed batch compiled rank-local")
    except seqc.CallError as e:
        assert "no rank-local form" in str(e), str(e)
        assert "takes packed sequences (segments)" in str(e), str(e)

    # Attention over every rank's keys (causal and not), a delta rule, a
    # linear scan, a conv of width 1 (no state to carry).
    t = lambda *d: "tensor<1x?x" + "x".join(map(str, d)) + "xf32>"
    text = f'''
    func.func @main(%q: {t(2, 8)}, %k: {t(1, 8)}, %v: {t(1, 8)},
                    %kn: {t(1, 8)}, %beta: {t(1)}, %a: {t(3)},
                    %w1: tensor<3x1xf32>)
        -> ({t(2, 8)}, {t(1, 8)}, tensor<1x1x8x8xf32>, {t(3)}, {t(2, 8)},
            {t(3)}) {{
      %o = seq.attention %q, %k, %v {{causal = true}}
        : ({t(2, 8)}, {t(1, 8)}, {t(1, 8)}) -> {t(2, 8)}
      %every = seq.attention %q, %k, %v {{causal = false}}
        : ({t(2, 8)}, {t(1, 8)}, {t(1, 8)}) -> {t(2, 8)}
      %c, %cl = seq.causal_conv1d %a, %w1
        : ({t(3)}, tensor<3x1xf32>) -> ({t(3)}, tensor<1x3x0xf32>)
      %d, %s = seq.delta_rule %kn, %kn, %v, %beta
        : ({t(1, 8)}, {t(1, 8)}, {t(1, 8)}, {t(1)})
          -> ({t(1, 8)}, tensor<1x1x8x8xf32>)
      %y, %l = seq.linear_scan %a, %a : ({t(3)}, {t(3)}) -> ({t(3)}, tensor<1x3xf32>)
      return %o, %d, %s, %y, %every, %c : {t(2, 8)}, {t(1, 8)},
          tensor<1x1x8x8xf32>, {t(3)}, {t(2, 8)}, {t(3)}
    }}
    '''
    check(text, 7)

    try:
        seqc.compile(example, ranks=len(counts), local_steps=True,
                     strict=True)
        raise AssertionError("a packed batch compiled rank-local, strict")
    except seqc.CompileError as e:
        assert "takes packed sequences (segments)" in str(e), str(e)
    try:
        seqc.compile(text, ranks=len(counts), parallel="experts",
                     local_steps=True)
        raise AssertionError("local steps compiled with experts")
    except seqc.CompileError as e:
        assert "with the experts' split" in str(e), str(e)
    print("agree")
""")


@pytest.mark.skipif(MPIRUN is None, reason="needs OpenMPI's mpirun")
@pytest.mark.parametrize("counts", ["30,47", "10,0,3,40"])
def test_rank_local_steps_agree_with_one_process(tmp_path, counts):
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                           "mamba2_block.mlir")
    run_ranks(tmp_path, LOCAL_SCRIPT, len(counts.split(",")), counts, example)


EXAMPLE_LOCAL_SCRIPT = textwrap.dedent("""
    import os
    import sys
    import numpy as np
    import seqc

    # An example block's function with rank-local steps equals one process
    # on the whole; a block that cannot take a rank's own steps says why.
    counts = [int(c) for c in sys.argv[1].split(",")]
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    start, mine = sum(counts[:rank]), counts[rank]
    text = open(sys.argv[2]).read()
    name = sys.argv[3]
    refused = sys.argv[4] if len(sys.argv) > 4 else ""
    parallel = sys.argv[5] if len(sys.argv) > 5 else "sequence"
    module = seqc.compile(text, ranks=len(counts), local_steps=True,
                          parallel=parallel)
    if refused:
        try:
            getattr(module, name)
            raise AssertionError("a block without a rank-local form ran")
        except seqc.CallError as e:
            assert refused in str(e), str(e)
        print("agree")
        sys.exit(0)
    one = getattr(seqc.compile(text), name)
    rng = np.random.default_rng(8)
    # A KV cache (an argument named so) holds 13 earlier steps, whole on
    # every rank.
    def cache(arg):
        return "cache" in arg
    def length(arg):
        return 13 if cache(arg) else sum(counts)
    # States (the token shift's, the scans') start away from zero.
    args = [np.ascontiguousarray(
                rng.standard_normal([length(arg) if d < 0 else d
                                     for d in shape]) * 0.2, np.float32)
            for arg, _, shape in one.inputs]
    whole = one(*args)
    own = [np.ascontiguousarray(a[:, start:start + mine])
           if any(d < 0 for d in shape) and not cache(arg) else a
           for a, (arg, _, shape) in zip(args, one.inputs)]
    for g, w, (_, _, shape) in zip(getattr(module, name)(*own), whole,
                                   one.outputs):
        # The rank's own steps of a result with steps; a new KV cache (the
        # cache and every step) whole.
        if any(d < 0 for d in shape) and w.shape[1] == sum(counts):
            w = w[:, start:start + mine]
        assert g.shape == w.shape, (g.shape, w.shape)
        err = float(np.max(np.abs(g - w), initial=0.0))
        assert err <= 1e-4 * max(1.0, float(np.max(np.abs(w), initial=0.0))), err
    print("agree")
""")


@pytest.mark.skipif(MPIRUN is None, reason="needs OpenMPI's mpirun")
@pytest.mark.parametrize("block,function,counts,refused", [
    ("mamba1_block", "main", "23,18", ""),  # selective_scan
    ("gla_block", "main", "23,18", ""),  # gated linear attention
    ("gdn_block", "main", "23,18", ""),  # gated delta rule
    ("kda_block", "main", "23,18", ""),  # generalized delta rule
    # A MoE layer on each rank's own tokens: the aux loss, the load and the
    # capacity (1.25, in token order across ranks) count all of them.
    ("moe_block", "main", "23,18", ""),
    ("moe_block", "deepseek", "7,0,30,11", ""),
    # RWKV's token shift reads the step before, on the rank before (or the
    # shift state passed in, where every rank before holds none).
    ("rwkv6_block", "main", "23,18", ""),
    ("rwkv6_block", "step", "1,0,2,20", ""),
    ("rwkv7_block", "step", "23,18", ""),
    ("rwkv7_block", "step", "0,3,0,9", ""),
    # Hybrid stacks (Mamba-2, attention, MoE; Gated DeltaNet in Qwen3-Next)
    # from an empty KV cache, and after one of 13 steps (whole on every
    # rank; each gathers every rank's new keys and values after it).
    ("hybrid_stack", "main", "23,18", ""),
    ("qwen3next_stack", "main", "5,0,30", ""),
    ("hybrid_stack", "step", "23,18", ""),
    ("hybrid_stack", "step", "0,5,1,9", ""),
    ("qwen3next_stack", "step", "5,0,30", ""),
    # Packed batches do not split over ranks: the function is left out.
    ("hybrid_stack", "packed", "23,18", "takes packed sequences"),
])
def test_rank_local_example_blocks(tmp_path, block, function, counts,
                                   refused):
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                           block + ".mlir")
    run_ranks(tmp_path, EXAMPLE_LOCAL_SCRIPT, len(counts.split(",")), counts,
              example, function, *([refused] if refused else []))


@pytest.mark.skipif(MPIRUN is None, reason="needs OpenMPI's mpirun")
@pytest.mark.parametrize("block,function,counts", [
    ("moe_block", "main", "23,18"),
    # Capacity drops choices; a rank without tokens.
    ("moe_block", "deepseek", "7,0,30,11"),
    ("hybrid_stack", "main", "23,18"),
    ("hybrid_stack", "step", "5,12"),  # after a KV cache
])
def test_rank_local_expert_parallelism(tmp_path, block, function, counts):
    """Rank-local steps with the experts split over the ranks (each rank
    routes its own tokens to the experts' ranks and back, DeepEP's
    setting), against one process."""
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                           block + ".mlir")
    run_ranks(tmp_path, EXAMPLE_LOCAL_SCRIPT, len(counts.split(",")), counts,
              example, function, "", "sequence+experts")


DISAGREE_SCRIPT = textwrap.dedent("""
    import os
    import sys
    import numpy as np
    import seqc

    # Ranks that pass disagreeing shapes all stop with the same error at the
    # call's start (seq-check-rank-agreement), not one rank at a shape check
    # while the others wait in an exchange.
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    text = '''
    func.func @main(%a: tensor<1x?x?xf32>, %x: tensor<1x?x?xf32> {seq.name = "x"})
        -> (tensor<1x?x?xf32>, tensor<1x?xf32>) {
      %y, %last = seq.linear_scan %a, %x
        : (tensor<1x?x?xf32>, tensor<1x?x?xf32>) -> (tensor<1x?x?xf32>, tensor<1x?xf32>)
      return %y, %last : tensor<1x?x?xf32>, tensor<1x?xf32>
    }
    '''
    def call(module, steps, channels_a, channels_x):
        a = np.full((1, steps, channels_a), 0.5, np.float32)
        x = np.ones((1, steps, channels_x), np.float32)
        try:
            module.main(a, x)
        except seqc.CallError as e:
            return str(e)
        return ""

    local = seqc.compile(text, ranks=2, local_steps=True)
    # Each rank's own number of steps (3 and 5, or none) is not a
    # disagreement.
    assert call(local, 3 + 2 * rank, 4, 4) == ""
    assert call(local, 4 * rank, 4, 4) == ""
    # Rank 1's channels differ: on both ranks, the same error.
    error = call(local, 4, 4 + rank, 4 + rank)
    assert ("the ranks disagree on dimension 2 of argument 0: 5 on rank 1, 4 "
            "on rank 0 (every rank passes the same shapes, but for its own "
            "number of steps)") in error, error
    # A rank whose own arguments count different steps (x one step longer
    # than a on rank 1): on both ranks, the same error, before the scan's
    # check could stop rank 1 alone.
    a = np.full((1, 4, 4), 0.5, np.float32)
    x = np.ones((1, 4 + rank, 4), np.float32)
    try:
        local.main(a, x)
        raise AssertionError("disagreeing steps ran")
    except seqc.CallError as e:
        assert ("rank 1's arguments count different numbers of steps: 5 in "
                "dimension 1 of argument 1 (x), 4 in dimension 1 of argument "
                "0") in str(e), e
    # With whole arguments every dynamic size is compared, the steps too.
    whole = seqc.compile(text, ranks=2)
    assert call(whole, 6, 4, 4) == ""
    error = call(whole, 6 + rank, 4, 4)
    assert ("the ranks disagree on dimension 1 of argument 0: 7 on rank 1, 6 "
            "on rank 0 (every rank passes the same shapes)") in error, error
    # A rank whose argument the host refuses (a static size, a rank) stops
    # every rank with its error, before the call's first exchange.
    a, x = np.ones((1 + rank, 4, 4), np.float32), np.ones((1, 4, 4), np.float32)
    for module in (local, whole):
        try:
            module.main(a, x)
            raise AssertionError("a refused argument ran")
        except seqc.CallError as e:
            assert ("rank 1 of 2 cannot make the call: argument 0 (arg0) must "
                    "be tensor<1x?x?xf32> but dimension 0 is 2") in str(e), e
    try:
        local.main(a[0] if rank else a, x)
        raise AssertionError("a refused argument ran")
    except seqc.CallError as e:
        assert ("rank 1 of 2 cannot make the call: argument 0 (arg0) must "
                "have rank 3") in str(e), e
    # The binding's own checks (a dtype) take part too: rank 1's TypeError
    # becomes the same CallError on both ranks.
    try:
        local.main(a[:1].astype(np.float64) if rank else a[:1], x)
        raise AssertionError("a refused argument ran")
    except seqc.CallError as e:
        assert ("rank 1 of 2 cannot make the call: seqc: main: argument 0 "
                "(arg0) has dtype float64") in str(e), e
    # Ranks that call different functions, or compiled different modules.
    other = text + text.replace("@main", "@other")
    both = seqc.compile(other, ranks=2)
    try:
        (both.other if rank else both.main)(a[:1], x)
        raise AssertionError("different functions ran")
    except seqc.CallError as e:
        assert ("the ranks call different functions: @other on rank 1, @main "
                "on rank 0") in str(e), e
    changed = seqc.compile(text + ("// rank 1" if rank else ""), ranks=2)
    try:
        changed.main(a[:1], x)
        raise AssertionError("different modules ran")
    except seqc.CallError as e:
        assert "rank 1 of 2 compiled another module than rank 0" in str(e), e
    # Disagreeing ranks leave nothing half done: the next call runs.
    assert call(local, 2, 3, 3) == ""
    assert call(whole, 2, 3, 3) == ""
    print("agree")
""")


@pytest.mark.skipif(MPIRUN is None, reason="needs OpenMPI's mpirun")
def test_disagreeing_ranks_stop_alike(tmp_path):
    run_ranks(tmp_path, DISAGREE_SCRIPT, 2)


TIMEOUT_SCRIPT = textwrap.dedent("""
    import os
    import time
    import numpy as np
    import seqc

    # Rank 1 never makes its last call: rank 0 waits in the call's first
    # exchange until its timeout ends the job, instead of for ever.
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    text = '''
    func.func @main(%a: tensor<1x?x4xf32>, %x: tensor<1x?x4xf32>)
        -> (tensor<1x?x4xf32>, tensor<1x4xf32>) {
      %y, %last = seq.linear_scan %a, %x
        : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> (tensor<1x?x4xf32>, tensor<1x4xf32>)
      return %y, %last : tensor<1x?x4xf32>, tensor<1x4xf32>
    }
    '''
    for bad in (-1, float("nan"), 1e300):
        try:
            seqc.compile(text, ranks=2, call_timeout=bad)
            raise AssertionError(f"call_timeout={bad} compiled")
        except seqc.CompileError as e:
            assert "the call timeout must be a number of seconds" in str(e), e
    module = seqc.compile(text, ranks=2, call_timeout=2)
    a = np.full((1, 8, 4), 0.5, np.float32)
    # Calls that return in time are not affected.
    for _ in range(3):
        module.main(a, a)
    print("called", flush=True)
    if rank == 1:
        time.sleep(120)
    else:
        module.main(a, a)
    print("not ended")
""")


@pytest.mark.skipif(MPIRUN is None, reason="needs OpenMPI's mpirun")
def test_call_timeout_ends_every_rank(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(TIMEOUT_SCRIPT)
    env = dict(os.environ, OMPI_MCA_btl="self,vader",
               OMPI_MCA_btl_vader_single_copy_mechanism="none",
               SEQC_NUM_THREADS="1")
    start = time.monotonic()
    proc = subprocess.run(
        [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2",
         sys.executable, str(script)],
        capture_output=True, text=True, env=env, timeout=300)
    elapsed = time.monotonic() - start
    assert proc.returncode != 0, proc.stdout
    assert proc.stdout.count("called") == 2, proc.stdout + proc.stderr[-2000:]
    assert "not ended" not in proc.stdout
    assert ("error: rank 0 of 2: @main did not return within 2 s (the call "
            "timeout)") in proc.stderr, proc.stderr[-2000:]
    # Ended by the timeout, not by the end of rank 1's sleep.
    assert elapsed < 100, elapsed
