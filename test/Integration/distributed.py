# Sequence parallelism (seqc-run --parallel sequence under mpirun, SPEC
# section 3): every op with a time axis split over R = 1, 2, 4 processes
# equals float64 numpy on the whole sequence, and the single-process run.
# Lengths that do not divide by R (37), fewer steps than ranks (3: some
# ranks have none), init states, reverse scans, the delta rules' matrix
# transitions, the conv's halo, attention's keys (GQA, S > T, a window), a
# graph with glue around two ops, and the bad inputs: ranks that disagree on
# the inputs, a rank that dies, a rank that fails alone. The second run is
# the same on the emulated GPU target: its kernels, the exchanges through
# the NCCL entry points (carried out by MPI on host buffers). The third runs
# the CPU's on MPICH (its launcher, libmpich.so.12, code for its ABI; not in
# the sanitized suite, for time: that runs the OpenMPI ones).
# REQUIRES: mpi
# RUN: %python %s
# RUN: env SEQC_MPI_TEST_TARGET=cuda-emulated %python %s
# RUN: %if mpich && !sanitizer %{ env SEQC_MPI_TEST_MPI=mpich %python %s %}
import os
import subprocess
import tempfile

import numpy as np
import refs
from seqc_mpi import ENV, MPIRUN, RANK_VAR, TARGET, run
from seqc_testing import (SEQC_RUN, Checker, error_lines, f32, func, rng,
                          seq_op, type_of)

c = Checker()
r = rng(20)

def case(name, mlir, inputs, refs_out, ranks=(1, 2, 4), tol=1e-4):
    def body():
        single = run(mlir, inputs, 0)
        for R in ranks:
            got = run(mlir, inputs, R)
            for i, (g, ref) in enumerate(zip(got, refs_out)):
                c.close(f"{name} R={R} result{i} vs float64", g, ref, tol)
                c.close(f"{name} R={R} result{i} vs one process", g, single[i], tol)
    c.run(name, body)


def op_module(op, operands, optional, results, attrs=""):
    """A function of one op: `operands` and `optional` (keyword, array) its
    arguments in order, `results` the result types."""
    args = [(f"a{i}", type_of(a)) for i, (_, a) in enumerate(operands + optional)]
    names = [f"%a{i}" for i in range(len(args))]
    required = names[:len(operands)]
    opt = [(kw, [n]) for (kw, _), n in zip(optional, names[len(operands):])]
    body = [seq_op("r", op, required, opt, attrs, [t for _, t in args], results)]
    outs = [(f"%r#{i}" if len(results) > 1 else "%r", t) for i, t in enumerate(results)]
    return func(args, body, outs), [a for _, a in operands + optional]


def t(*shape):
    return "tensor<" + "".join(f"{s}x" for s in shape) + "f32>"


for T in (37, 3):
    B = 2
    # linear_scan, forward and reverse, with a state of two dims.
    a = f32(r.uniform(0.6, 1.0, (B, T, 3, 2)))
    b = f32(r.standard_normal((B, T, 3, 2)))
    h0 = f32(r.standard_normal((B, 3, 2)))
    for reverse in (False, True):
        mlir, ins = op_module("linear_scan", [("", a), ("", b)], [("init", h0)],
                              [t(B, T, 3, 2), t(B, 3, 2)],
                              f"reverse = {str(reverse).lower()}")
        case(f"linear_scan T={T} reverse={reverse}", mlir, ins,
             refs.linear_scan(a, b, h0, reverse))

    # selective_scan with skip, gate, bias and init.
    D, N = 6, 4
    u = f32(r.standard_normal((B, T, D)))
    delta = f32(r.standard_normal((B, T, D)) * 0.5)
    A = f32(-r.uniform(0.5, 1.5, (D, N)))
    Bm = f32(r.standard_normal((B, T, 1, N)))
    Cm = f32(r.standard_normal((B, T, 1, N)))
    Dk = f32(r.standard_normal(D))
    z = f32(r.standard_normal((B, T, D)))
    db = f32(r.standard_normal(D) * 0.1)
    hs = f32(r.standard_normal((B, D, N)))
    mlir, ins = op_module("selective_scan", [("", u), ("", delta), ("", A), ("", Bm), ("", Cm)],
                          [("skip", Dk), ("gate", z), ("delta_bias", db), ("init", hs)],
                          [t(B, T, D), t(B, D, N)], "delta_softplus = true")
    case(f"selective_scan T={T}", mlir, ins,
         refs.selective_scan(u, delta, A, Bm, Cm, Dk, z, db, hs, softplus_dt=True))

    # ssd with a per-head-and-channel skip, a gate and init.
    H, P, N = 2, 3, 4
    x = f32(r.standard_normal((B, T, H, P)))
    dt = f32(r.uniform(0.1, 0.8, (B, T, H)))
    Ah = f32(-r.uniform(0.5, 1.5, H))
    Bs = f32(r.standard_normal((B, T, 1, N)))
    Cs = f32(r.standard_normal((B, T, 1, N)))
    Dhp = f32(r.standard_normal((H, P)))
    zs = f32(r.standard_normal((B, T, H, P)))
    h0s = f32(r.standard_normal((B, H, P, N)))
    mlir, ins = op_module("ssd", [("", x), ("", dt), ("", Ah), ("", Bs), ("", Cs)],
                          [("skip", Dhp), ("gate", zs), ("init", h0s)],
                          [t(B, T, H, P), t(B, H, P, N)], "chunk_size = 16")
    case(f"ssd T={T}", mlir, ins, refs.ssd(x, dt, Ah, Bs, Cs, Dhp, zs, None, h0s))

    # linear_attention: per-key decay (GLA) with init, scalar decay with a
    # bonus (RWKV-6).
    H, K, V = 2, 4, 3
    q = f32(r.standard_normal((B, T, H, K)))
    k = f32(r.standard_normal((B, T, H, K)))
    v = f32(r.standard_normal((B, T, H, V)))
    gk = f32(-r.uniform(0.05, 0.5, (B, T, H, K)))
    S0 = f32(r.standard_normal((B, H, K, V)))
    mlir, ins = op_module("linear_attention", [("", q), ("", k), ("", v)],
                          [("decay", gk), ("init", S0)], [t(B, T, H, V), t(B, H, K, V)])
    case(f"linear_attention GLA T={T}", mlir, ins,
         refs.linear_attention(q, k, v, gk, S0))
    gs = f32(-r.uniform(0.05, 0.5, (B, T, H)))
    bonus = f32(r.standard_normal((H, K)))
    mlir, ins = op_module("linear_attention", [("", q), ("", k), ("", v)],
                          [("decay", gs), ("bonus", bonus)], [t(B, T, H, V), t(B, H, K, V)],
                          "scale = 0.5 : f32")
    case(f"linear_attention bonus T={T}", mlir, ins,
         refs.linear_attention(q, k, v, gs, scale=0.5, bonus=bonus))

    # delta_rule: Gated DeltaNet with HV = 2 H, l2-normalized q and k, init;
    # KDA's per-key decay.
    H, HV, K, V = 1, 2, 4, 5
    q = f32(r.standard_normal((B, T, H, K)))
    k = f32(r.standard_normal((B, T, H, K)))
    v = f32(r.standard_normal((B, T, HV, V)))
    beta = f32(r.uniform(0.1, 0.9, (B, T, HV)))
    g = f32(-r.uniform(0.01, 0.3, (B, T, HV)))
    S0 = f32(r.standard_normal((B, HV, K, V)))
    mlir, ins = op_module("delta_rule", [("", q), ("", k), ("", v), ("", beta)],
                          [("decay", g), ("init", S0)], [t(B, T, HV, V), t(B, HV, K, V)],
                          "qk_l2norm = true, scale = 0.5 : f32")
    case(f"delta_rule gated T={T}", mlir, ins,
         refs.delta_rule(q, k, v, beta, g, S0, qk_l2norm=True, scale=0.5))
    gkk = f32(-r.uniform(0.01, 0.3, (B, T, HV, K)))
    mlir, ins = op_module("delta_rule", [("", q), ("", k), ("", v), ("", beta)],
                          [("decay", gkk)], [t(B, T, HV, V), t(B, HV, K, V)],
                          "qk_l2norm = true")
    case(f"delta_rule KDA T={T}", mlir, ins,
         refs.delta_rule(q, k, v, beta, gkk, qk_l2norm=True))

    # generalized_delta_rule (RWKV-7's a = -kappa, b = kappa * a_rwkv).
    H, K, V = 2, 4, 3
    q = f32(r.standard_normal((B, T, H, K)))
    k = f32(r.standard_normal((B, T, H, K)) * 0.5)
    v = f32(r.standard_normal((B, T, H, V)))
    kappa = r.standard_normal((B, T, H, K))
    kappa /= np.linalg.norm(kappa, axis=-1, keepdims=True)
    ga = f32(-kappa)
    gb = f32(kappa * r.uniform(0.0, 1.0, (B, T, H, K)))
    gw = f32(-r.uniform(0.01, 0.3, (B, T, H, K)))
    S0 = f32(r.standard_normal((B, H, K, V)))
    mlir, ins = op_module("generalized_delta_rule",
                          [("", q), ("", k), ("", v), ("", ga), ("", gb)],
                          [("decay", gw), ("init", S0)], [t(B, T, H, V), t(B, H, K, V)])
    case(f"generalized_delta_rule T={T}", mlir, ins,
         refs.generalized_delta_rule(q, k, v, ga, gb, gw, S0))

    # causal_conv1d, W = 4 (halos of 3 steps), with bias, init and SiLU.
    D, W = 5, 4
    xc = f32(r.standard_normal((B, T, D)))
    wc = f32(r.standard_normal((D, W)))
    bc = f32(r.standard_normal(D))
    s0 = f32(r.standard_normal((B, D, W - 1)))
    mlir, ins = op_module("causal_conv1d", [("", xc), ("", wc)],
                          [("bias", bc), ("init", s0)], [t(B, T, D), t(B, D, W - 1)],
                          "activation = #seq.activation<silu>")
    case(f"causal_conv1d T={T}", mlir, ins, refs.causal_conv1d(xc, wc, bc, s0, "silu"))

    # attention: causal GQA with more keys than queries (a KV prefix), a
    # window, and non-causal.
    H, Hkv, K, S = 4, 2, 8, T + 5
    qa = f32(r.standard_normal((B, T, H, K)))
    ka = f32(r.standard_normal((B, S, Hkv, K)))
    va = f32(r.standard_normal((B, S, Hkv, K)))
    for attrs, causal, window in (("causal = true", True, 0),
                                  ("causal = true, window = 6", True, 6),
                                  ("causal = false", False, 0)):
        mlir, ins = op_module("attention", [("", qa), ("", ka), ("", va)], [],
                              [t(B, T, H, K)], attrs + ", scale = 0.3 : f32")
        case(f"attention {attrs} T={T}", mlir, ins,
             [refs.attention(qa, ka, va, causal, window, 0.3)])

# A conv shorter than its window (T = 2 < W - 1): `last` keeps init's
# newest input, which every rank computes from the sequence's tail.
xt = f32(r.standard_normal((2, 2, 5)))
wt = f32(r.standard_normal((5, 4)))
st = f32(r.standard_normal((2, 5, 3)))
mlir, ins = op_module("causal_conv1d", [("", xt), ("", wt)], [("init", st)],
                      [t(2, 2, 5), t(2, 5, 3)])
case("causal_conv1d T=2 < W - 1", mlir, ins, refs.causal_conv1d(xt, wt, None, st))

# A graph: glue (a matmul and SiLU) around a conv and an ssd whose results
# feed each other, dynamic T.
T, D, H, P, N = 45, 6, 2, 3, 4
xg = f32(r.standard_normal((1, T, D)))
wg = f32(r.standard_normal((D, D)) * 0.4)
wconv = f32(r.standard_normal((D, 4)))
dtg = f32(r.uniform(0.1, 0.8, (1, T, H)))
Ag = f32(-r.uniform(0.5, 1.5, H))
Bg = f32(r.standard_normal((1, T, 1, N)))
Cg = f32(r.standard_normal((1, T, 1, N)))
graph = f"""
func.func @main(%x: tensor<1x?x{D}xf32>, %w: tensor<{D}x{D}xf32>, %wc: tensor<{D}x4xf32>,
                %dt: tensor<1x?x{H}xf32>, %A: tensor<{H}xf32>, %B: tensor<1x?x1x{N}xf32>,
                %C: tensor<1x?x1x{N}xf32>) -> tensor<1x?x{H}x{P}xf32> {{
  %c1 = arith.constant 1 : index
  %T = tensor.dim %x, %c1 : tensor<1x?x{D}xf32>
  %x2 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x?x{D}xf32> into tensor<?x{D}xf32>
  %e = tensor.empty(%T) : tensor<?x{D}xf32>
  %zero = arith.constant 0.0 : f32
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x{D}xf32>) -> tensor<?x{D}xf32>
  %m = linalg.matmul ins(%x2, %w : tensor<?x{D}xf32>, tensor<{D}x{D}xf32>) outs(%z : tensor<?x{D}xf32>) -> tensor<?x{D}xf32>
  %m3 = tensor.expand_shape %m [[0, 1], [2]] output_shape [1, %T, {D}] : tensor<?x{D}xf32> into tensor<1x?x{D}xf32>
  %y, %last = seq.causal_conv1d %m3, %wc {{activation = #seq.activation<silu>}}
    : (tensor<1x?x{D}xf32>, tensor<{D}x4xf32>) -> (tensor<1x?x{D}xf32>, tensor<1x{D}x3xf32>)
  %xs = tensor.expand_shape %y [[0], [1], [2, 3]] output_shape [1, %T, {H}, {P}] : tensor<1x?x{D}xf32> into tensor<1x?x{H}x{P}xf32>
  %o, %h = seq.ssd %xs, %dt, %A, %B, %C {{chunk_size = 8}}
    : (tensor<1x?x{H}x{P}xf32>, tensor<1x?x{H}xf32>, tensor<{H}xf32>, tensor<1x?x1x{N}xf32>, tensor<1x?x1x{N}xf32>)
      -> (tensor<1x?x{H}x{P}xf32>, tensor<1x{H}x{P}x{N}xf32>)
  return %o : tensor<1x?x{H}x{P}xf32>
}}
"""
yg, _ = refs.causal_conv1d((xg[0] @ wg)[None], wconv, activation="silu")
og, _ = refs.ssd(yg.reshape(1, T, H, P), dtg, Ag, Bg, Cg)
case("graph conv -> ssd", graph, [xg, wg, wconv, dtg, Ag, Bg, Cg], [og])


def bad_inputs():
    mlir, ins = op_module("linear_scan", [("", a), ("", b)], [], [t(2, 3, 3, 2), t(2, 3, 2)])
    with tempfile.TemporaryDirectory(prefix="seqc-mpi-") as tmp:
        src = os.path.join(tmp, "g.mlir")
        with open(src, "w") as f:
            f.write(mlir)
        paths = []
        for i, arr in enumerate(ins):
            paths.append(os.path.join(tmp, f"in{i}.npy"))
            np.save(paths[-1], arr)
        other = os.path.join(tmp, "other.npy")
        np.save(other, ins[1] + 1)
        # Rank 1 reads other inputs than rank 0: every rank says so, exit 1.
        script = (f'if [ "${RANK_VAR}" = 1 ]; then b={other}; else b={paths[1]}; fi; '
                  f'exec {SEQC_RUN} {src} --target {TARGET} --input {paths[0]} --input "$b" --parallel sequence')
        proc = subprocess.run(MPIRUN + ["-np", "2", "sh", "-c", script],
                              capture_output=True, text=True, env=ENV, timeout=120)
        lines = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
        c.expect("disagreeing ranks exit non-zero", proc.returncode != 0, str(proc.returncode))
        c.expect("every rank names the disagreement",
                 len(lines) == 2 and all("disagree" in l for l in lines), str(lines))
        # A rank that dies before its first collective: the others do not
        # hang (mpirun ends the job, or their --timeout does).
        script = (f'if [ "${RANK_VAR}" = 1 ]; then exit 3; fi; '
                  f'exec {SEQC_RUN} {src} --target {TARGET} --input {paths[0]} --input {paths[1]} '
                  f'--parallel sequence --timeout 30')
        proc = subprocess.run(MPIRUN + ["-np", "2", "sh", "-c", script],
                              capture_output=True, text=True, env=ENV, timeout=120)
        # (The dead rank's own status makes the run fail; what this checks is
        # that the others do not hang: subprocess's timeout would raise.)
        c.expect("a dead rank ends the run without a hang", proc.returncode != 0,
                 str(proc.returncode))
        # A rank that fails on its own (an input it cannot read) says why and
        # the run ends at once (it does not wait in MPI_Finalize for ranks
        # that wait for it).
        script = (f'if [ "${RANK_VAR}" = 1 ]; then b=/nonexistent.npy; '
                  f'else b={paths[1]}; fi; '
                  f'exec {SEQC_RUN} {src} --target {TARGET} --input {paths[0]} --input "$b" --parallel sequence')
        proc = subprocess.run(MPIRUN + ["-np", "2", "sh", "-c", script],
                              capture_output=True, text=True, env=ENV, timeout=120)
        c.expect("a rank's own error ends the run", proc.returncode != 0 and
                 "error: cannot open '/nonexistent.npy'" in proc.stderr, proc.stderr[-300:])
    # An MPI library that does not open, or is not one: the error names it.
    code, err = run(mlir, ins, 2, expect_error=True, env={"SEQC_LIBMPI": "/nonexistent/libmpi.so"})
    c.expect("an MPI library that does not open is named, exit non-zero",
             code != 0 and "error: distributed runs need MPI (cannot open /nonexistent/libmpi.so" in err,
             err[-300:])
    code, err = run(mlir, ins, 2, expect_error=True, env={"SEQC_LIBMPI": "libm.so.6"})
    c.expect("a library without MPI is named, exit non-zero",
             code != 0 and "error: the MPI library libm.so.6 has no MPI_Init_thread" in err, err[-300:])
    # --target cuda splits over GPUs (NCCL): without a device (the toolkit's
    # stub driver) that is the error, one line, exit 1.
    stub = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "stubs",
                        "libcuda.so")
    if os.path.exists(stub):
        with tempfile.TemporaryDirectory(prefix="seqc-mpi-") as tmp:
            src = os.path.join(tmp, "g.mlir")
            with open(src, "w") as f:
                f.write(mlir)
            proc = subprocess.run(
                MPIRUN + ["-np", "2", SEQC_RUN, src,
                          "--random-inputs", "--target", "cuda", "--parallel", "sequence"],
                capture_output=True, text=True, env=dict(ENV, SEQC_LIBCUDA=stub),
                timeout=120)
            # Each rank fails on its own, and the launcher may end the other
            # before it prints (MPICH's Hydra does once MPI has started): no
            # rank says anything else.
            lines = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
            c.expect("--parallel on cuda without a device says so on the ranks that report",
                     proc.returncode != 0 and 1 <= len(lines) <= 2 and
                     set(lines) == {"error: no CUDA device"}, f"{proc.returncode} {lines}")
    code, err = run(mlir, ins, 0, ["--parallel", "tokens"], expect_error=True)
    c.expect("an unknown --parallel mode is an error", code == 1 and "sequence, experts or sequence+experts" in err,
             err)


def bf16_results():
    """A bf16 op's results are all-gathered as their bytes: R = 2 equals one
    process (random inputs: .npy has no bf16)."""
    T = 29
    mlir = func([("a", f"tensor<2x{T}x3xbf16>"), ("b", f"tensor<2x{T}x3xbf16>")],
                [seq_op("r", "linear_scan", ["%a", "%b"], [], "",
                        [f"tensor<2x{T}x3xbf16>"] * 2,
                        [f"tensor<2x{T}x3xbf16>", "tensor<2x3xf32>"])],
                [("%r#0", f"tensor<2x{T}x3xbf16>"), ("%r#1", "tensor<2x3xf32>")])
    single = run(mlir, [], 0, ["--random-inputs"])
    split = run(mlir, [], 2, ["--random-inputs"])
    for i, (g, ref) in enumerate(zip(split, single)):
        c.close(f"bf16 linear_scan R=2 result{i} vs one process", g, ref, 1e-2)


def pieces():
    """Exchanges past the count one MPI call takes go in pieces, and an
    all-gather as a broadcast per rank: SEQC_MPI_MAX_COUNT=16 (2^30 by
    default) sends the exchanges of a linear scan and of a conv that way,
    and R = 2 and 4 still equal float64."""
    T, B = 37, 2
    a = f32(r.uniform(0.6, 1.0, (B, T, 3, 2)))
    b = f32(r.standard_normal((B, T, 3, 2)))
    mlir, ins = op_module("linear_scan", [("", a), ("", b)], [],
                          [t(B, T, 3, 2), t(B, 3, 2)])
    want = refs.linear_scan(a, b, None, False)
    x = f32(r.standard_normal((B, T, 5)))
    w = f32(r.standard_normal((5, 4)) * 0.5)
    conv, conv_ins = op_module("causal_conv1d", [("", x), ("", w)], [],
                               [t(B, T, 5), t(B, 5, 3)])
    conv_want = refs.causal_conv1d(x, w)
    for R in (2, 4):
        for label, module, inputs, refs_out in (
                ("linear_scan", mlir, ins, want),
                ("causal_conv1d", conv, conv_ins, conv_want)):
            got = run(module, inputs, R, env={"SEQC_MPI_MAX_COUNT": "16"})
            for i, (g, ref) in enumerate(zip(got, refs_out)):
                c.close(f"{label} in pieces R={R} result{i} vs float64", g,
                        ref, 1e-4)
    # A count that is not one is an error.
    code, err = run(mlir, ins, 2, env={"SEQC_MPI_MAX_COUNT": "0"},
                    expect_error=True)
    # (Each rank fails on its own: the launcher may end one before it says so.)
    lines = [l for l in err.splitlines() if l.startswith("error:")]
    c.expect("SEQC_MPI_MAX_COUNT=0 is an error on the ranks that report, exit non-zero",
             code != 0 and 1 <= len(lines) <= 2 and all(
                 "SEQC_MPI_MAX_COUNT='0' is not a count from 1 to 2^30" in l
                 for l in lines), str(lines))


def run_local(mlir, inputs, axes, counts, expect_error=False,
              parallel="sequence"):
    """seqc-run --local-steps on len(counts) ranks: rank r reads counts[r]
    steps of each input whose entry of `axes` is an axis (along it, after
    the ranks' before it; a {rank} path), the others whole. Each rank's
    results (DIR/rank<r>), or (returncode, stderr) with expect_error."""
    R = len(counts)
    starts = np.cumsum((0,) + tuple(counts))
    with tempfile.TemporaryDirectory(prefix="seqc-mpi-") as tmp:
        src = os.path.join(tmp, "graph.mlir")
        with open(src, "w") as f:
            f.write(mlir)
        cmd = MPIRUN + ["-np", str(R), SEQC_RUN, src, "--target", TARGET]
        for i, (a, axis) in enumerate(zip(inputs, axes)):
            if axis is None:
                np.save(os.path.join(tmp, f"in{i}.npy"), a)
                cmd += ["--input", os.path.join(tmp, f"in{i}.npy")]
                continue
            for rank in range(R):
                own = np.take(a, range(starts[rank], starts[rank + 1]), axis)
                np.save(os.path.join(tmp, f"in{i}.{rank}.npy"), own)
            cmd += ["--input", os.path.join(tmp, f"in{i}.{{rank}}.npy")]
        cmd += ["--output-dir", os.path.join(tmp, "out"),
                "--parallel", parallel, "--local-steps"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV,
                              timeout=240)
        if expect_error:
            return proc.returncode, proc.stderr
        if proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}: {proc.stderr[-2000:]}")
        results = []
        for rank in range(R):
            out, mine = os.path.join(tmp, "out", f"rank{rank}"), []
            while os.path.exists(os.path.join(out, f"result{len(mine)}.npy")):
                mine.append(np.load(os.path.join(out, f"result{len(mine)}.npy")))
            results.append(mine)
        return results


def local_steps():
    """--local-steps: each rank reads its own steps ({rank} in the input
    paths), any number of them, and writes its own steps of the results
    (DIR/rank<r>): a conv (whose W - 1 = 3 inputs before a rank may span
    ranks with fewer steps) and a scan over its output, B = 2, equal to
    float64 numpy on the whole and to one process."""
    B, C = 2, 5
    td = f"tensor<{B}x?x{C}xf32>"
    mlir = f"""
func.func @main(%x: {td}, %w: tensor<{C}x4xf32>, %a: {td})
    -> ({td}, tensor<{B}x{C}x3xf32>, {td}, tensor<{B}x{C}xf32>) {{
  %y, %l = seq.causal_conv1d %x, %w
    : ({td}, tensor<{C}x4xf32>) -> ({td}, tensor<{B}x{C}x3xf32>)
  %h, %hl = seq.linear_scan %a, %y : ({td}, {td}) -> ({td}, tensor<{B}x{C}xf32>)
  return %y, %l, %h, %hl : {td}, tensor<{B}x{C}x3xf32>, {td}, tensor<{B}x{C}xf32>
}}
"""
    for counts in ((20, 17), (5, 1, 0, 31)):
        T, R = sum(counts), len(counts)
        x = f32(r.standard_normal((B, T, C)))
        w = f32(r.standard_normal((C, 4)) * 0.5)
        a = f32(r.uniform(0.6, 1.0, (B, T, C)))
        y, last = refs.causal_conv1d(x, w)
        h, hl = refs.linear_scan(a, y)
        single = run(mlir, [x, w, a], 0)
        ranks = run_local(mlir, [x, w, a], [1, None, 1], counts)
        got = [np.concatenate([mine[0] for mine in ranks], axis=1),
               ranks[-1][1],
               np.concatenate([mine[2] for mine in ranks], axis=1),
               ranks[-1][3]]
        for rank in range(R - 1):
            c.close(f"local steps {counts}: rank {rank}'s last = the last rank's",
                    ranks[rank][1], got[1], 0)
        for i, (g, ref) in enumerate(zip(got, (y, last, h, hl))):
            c.close(f"local steps {counts} result{i} vs float64", g, ref, 1e-4)
            c.close(f"local steps {counts} result{i} vs one process", g, single[i], 1e-4)
    # Local steps go with sequence parallelism only.
    code, err = run(mlir, [x, w, a], 2, ["--local-steps"], expect_error=True,
                    parallel="experts")
    c.expect("--local-steps with --parallel experts is an error",
             code == 1 and "--local-steps goes with --parallel sequence or "
             "sequence+experts" in err, err)
    # Every rank reading the same file would pass the same steps as its own.
    code, err = run(mlir, [x, w, a], 2, ["--local-steps"], expect_error=True)
    c.expect("--local-steps without {rank} in an input path is an error",
             code == 1 and "--local-steps needs {rank} in the path" in err, err)


def local_tokens():
    """A MoE layer on each rank's own tokens, every expert on every rank
    (--parallel sequence) or the experts split (sequence+experts): route's
    aux loss over every rank's, moe_ffn's capacity (1.25: some choices
    dropped) in token order across ranks and its load, equal to float64
    numpy and one process; a bad expert index on one rank fails every
    rank."""
    D, E, F = 6, 4, 8
    mlir = f"""
func.func @main(%x: tensor<?x{D}xf32>, %logits: tensor<?x{E}xf32>,
                %up: tensor<{E}x{D}x{F}xf32>, %down: tensor<{E}x{F}x{D}xf32>,
                %gate: tensor<{E}x{D}x{F}xf32>)
    -> (tensor<?x{D}xf32>, tensor<f32>, tensor<{E}xi64>) {{
  %w, %i, %aux = seq.route %logits {{k = 2 : i64, aux_loss_coef = 0.01 : f32}}
    : (tensor<?x{E}xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>, tensor<f32>)
  %y, %load = seq.moe_ffn %x, %w, %i, %up, %down gate_proj(%gate)
    {{capacity_factor = 1.25 : f32}}
    : (tensor<?x{D}xf32>, tensor<?x2xf32>, tensor<?x2xi32>,
       tensor<{E}x{D}x{F}xf32>, tensor<{E}x{F}x{D}xf32>,
       tensor<{E}x{D}x{F}xf32>) -> (tensor<?x{D}xf32>, tensor<{E}xi64>)
  return %y, %aux, %load : tensor<?x{D}xf32>, tensor<f32>, tensor<{E}xi64>
}}
"""
    for counts in ((20, 17), (9, 0, 30, 1)):
        T = sum(counts)
        x = f32(r.standard_normal((T, D)))
        # Skewed towards expert 0, so that its capacity drops choices.
        logits = f32(r.standard_normal((T, E)) + np.array([1.5, 0, 0, 0]))
        up, down, gate = (f32(r.standard_normal(s) * 0.3)
                          for s in ((E, D, F), (E, F, D), (E, D, F)))
        w, idx, aux = refs.route(logits, 2, aux_loss_coef=0.01)
        y, load = refs.moe_ffn(x, w, idx, up, down, gate, capacity_factor=1.25)
        c.expect(f"local tokens {counts}: capacity drops choices",
                 load.sum() < 2 * T, str(load))
        inputs = [x, logits, up, down, gate]
        single = run(mlir, inputs, 0)
        for parallel in ("sequence", "sequence+experts"):
            name = f"local tokens {counts} {parallel}"
            ranks = run_local(mlir, inputs, [0, 0, None, None, None], counts,
                              parallel=parallel)
            got = [np.concatenate([mine[0] for mine in ranks]), ranks[0][1],
                   ranks[0][2]]
            for rank in range(1, len(counts)):
                for i in (1, 2):
                    c.close(f"{name}: rank {rank}'s result{i} = rank 0's",
                            ranks[rank][i], got[i], 0)
            for i, (g, ref) in enumerate(zip(got, (y, aux, load))):
                c.close(f"{name} result{i} vs float64", g, ref, 1e-4)
                c.close(f"{name} result{i} vs one process", g, single[i], 1e-4)
    # An expert index outside [0, E) on rank 1's tokens only.
    bad = f"""
func.func @main(%x: tensor<?x{D}xf32>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>,
                %up: tensor<{E}x{D}x{F}xf32>, %down: tensor<{E}x{F}x{D}xf32>)
    -> tensor<?x{D}xf32> {{
  %y, %load = seq.moe_ffn %x, %w, %i, %up, %down
    : (tensor<?x{D}xf32>, tensor<?x2xf32>, tensor<?x2xi32>,
       tensor<{E}x{D}x{F}xf32>, tensor<{E}x{F}x{D}xf32>) -> (tensor<?x{D}xf32>, tensor<{E}xi64>)
  return %y : tensor<?x{D}xf32>
}}
"""
    T = 8
    indices = np.tile(np.array([[0, 1]], np.int32), (T, 1))
    indices[6, 1] = E
    for parallel in ("sequence", "sequence+experts"):
        code, err = run_local(bad, [x[:T], f32(np.ones((T, 2))), indices, up,
                                    down],
                              [0, 0, 0, None, None], (4, 4), expect_error=True,
                              parallel=parallel)
        c.expect(f"local tokens {parallel}: a bad index on one rank fails "
                 "every rank",
                 code == 1 and err.count("1 expert indices of the ranks' "
                                         f"tokens are outside [0, {E})") == 2,
                 err)


c.run("local steps", local_steps)
c.run("local tokens", local_tokens)
c.run("bf16 results", bf16_results)
c.run("exchanges in pieces", pieces)
c.run("bad inputs", bad_inputs)
c.finish()
