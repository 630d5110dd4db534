"""Runs one example block of examples/ through seqc-run with weights from a
.safetensors file and checks it against the numpy implementation in
blocks_ref.py, on the fast CPU pipeline, the reference lowering and the
CUDA kernels emulated on the host; then
decodes it with @step in pieces (a prompt chunk, single tokens, another
chunk; weights from .npz this time) and checks that the outputs and final
states equal the whole-sequence run; then runs sequences of lengths
PACKED_LENGTHS (one of them empty) packed into one batch through @packed on
every pipeline and checks that its outputs and per-sequence states equal
each sequence run alone through @main.

  block_check.py KIND EXAMPLES_DIR
"""
import itertools
import os
import subprocess
import sys
import tempfile

import blocks_ref as ref
import numpy as np
from seqc_testing import SEQC_AOT_RUN, SEQC_COMPILE, SEQC_RUN, Checker, load_results, save_inputs

import blocks
import weights as wgen

D = 128
FILES = {"hybrid": "hybrid_stack.mlir", "qwen3next": "qwen3next_stack.mlir"}
STACKS = ("hybrid", "qwen3next")  # (h, aux loss, states): T 100, tolerance 2e-4
PIPELINES = (("fast", []), ("reference", ["--reference"]),
             ("cuda-emulated", ["--target", "cuda-emulated"]))
PACKED_LENGTHS = [5, 0, 33, 17]  # with an empty sequence; not multiples of any chunk
# Ahead-of-time libraries for older x86-64 levels, which run on any host
# that runs the tests: their kernels take that CPU's vector width (8 f32
# lanes with AVX2, 4 with SSE), not this machine's.
AOT_CPUS = ("x86-64-v3", "x86-64-v2")


def seqc_run(path, func, weight_file, inputs, tmp, tag, extra=(), runner=SEQC_RUN):
    """Runs @func with the weights file and `inputs` (arrays bound in order
    to the arguments the weights do not name); returns the results."""
    out = os.path.join(tmp, "out-" + tag)
    cmd = [runner, path, "-e", func, "--weights", weight_file, "--output-dir", out]
    cmd += save_inputs(inputs, tmp, prefix=f"{tag}-")
    proc = subprocess.run(cmd + list(extra), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"seqc-run {' '.join(cmd[1:])}: {proc.stderr.strip()}")
    return load_results(out)


def seqc_aot_run(path, func, weight_file, inputs, tmp, cpu):
    """Like seqc_run, through a library compiled for `cpu` (no fallback)."""
    lib = os.path.join(tmp, f"{cpu}.so")
    if not os.path.exists(lib):
        proc = subprocess.run([SEQC_COMPILE, path, "-o", lib, "--cpu", cpu,
                               "--fallback-cpu", "none", "--strict"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"seqc-compile {path} --cpu {cpu}: {proc.stderr.strip()}")
    return seqc_run(lib, func, weight_file, inputs, tmp, f"{func}-{cpu}",
                    runner=SEQC_AOT_RUN)


def reference(kind, u, W, func="main"):
    """The numpy block: (out, *states) like @main (MoE: (h, aux, load))."""
    if kind == "mamba1":
        return ref.mamba1(u, W)
    if kind == "mamba2":
        return ref.mamba2(u, W)
    if kind == "gla":
        return ref.gla(u, W)
    if kind == "performer":
        return (ref.performer(u, W, carried=False),)
    if kind == "moe":
        return ref.moe(u, W, router="softmax" if func == "main" else "sigmoid")
    if kind == "hybrid":
        out, aux, states = ref.hybrid(u, W, blocks.hybrid_layout())
        return (out, aux, *states)
    if kind in ("gdn", "kda", "rwkv7", "rwkv6"):
        return getattr(ref, kind)(u, W)
    if kind == "qwen3next":
        out, aux, states = ref.qwen3next(u, W, blocks.qwen3next_layout())
        return (out, aux, *states)
    raise ValueError(kind)


def zero_states(kind, W):
    """Zero states in @step's argument order."""
    if kind == "mamba1":
        return [np.zeros((1, 2 * D, 3), np.float32), np.zeros((1, 2 * D, 16), np.float32)]
    if kind == "mamba2":
        return [np.zeros((1, 2 * D + 128, 3), np.float32), np.zeros((1, 8, 32, 64), np.float32)]
    if kind == "gla":
        return [np.zeros((1, 4, 16, 32), np.float32)]
    if kind == "performer":
        return [np.zeros((1, 4, 64, 32), np.float32), np.zeros((1, 4, 64, 1), np.float32)]
    if kind == "gdn":
        return [np.zeros((1, 256, 3), np.float32), np.zeros((1, 4, 32, 32), np.float32)]
    if kind == "kda":
        return [np.zeros((1, 128, 3), np.float32)] * 3 + [np.zeros((1, 4, 32, 32), np.float32)]
    if kind in ("rwkv7", "rwkv6"):
        return [np.zeros((1, D), np.float32), np.zeros((1, 4, 32, 32), np.float32)]
    if kind == "qwen3next":
        out = []
        for mixer, _ in blocks.qwen3next_layout():
            if mixer == "gdn":
                out += zero_states("gdn", W)
            else:
                out += [np.zeros((1, 0, 2, 32), np.float32)] * 2
        return out
    if kind == "hybrid":
        out = []
        for mixer, _ in blocks.hybrid_layout():
            if mixer == "mamba2":
                out += zero_states("mamba2", W)
            else:
                out += [np.zeros((1, 0, 2, 32), np.float32)] * 2
        return out
    raise ValueError(kind)


def main():
    kind, examples = sys.argv[1], sys.argv[2]
    path = os.path.join(examples, FILES.get(kind, f"{kind}_block.mlir"))
    c = Checker()
    T = 100 if kind in STACKS else 200
    u = wgen.make_input(D, T, seed=3)
    tol = 2e-4 if kind in STACKS else 1e-4
    with tempfile.TemporaryDirectory(prefix=f"seqc-{kind}-") as tmp:
        funcs = ["main", "deepseek"] if kind == "moe" else ["main"]
        whole = None
        for func in funcs:
            W = wgen.make_weights(kind, D, seed=1, func=func)
            wfile = os.path.join(tmp, f"{func}.safetensors")
            wgen.write_safetensors(wfile, W)
            expect = reference(kind, u, W, func)
            runs = itertools.chain(
                ((name, seqc_run(path, func, wfile, [u], tmp, f"{func}-{name}", extra))
                 for name, extra in PIPELINES),
                ((f"aot {cpu}", seqc_aot_run(path, func, wfile, [u], tmp, cpu))
                 for cpu in AOT_CPUS))
            for pipeline, got in runs:
                c.expect(f"@{func} {pipeline}: {len(expect)} results", len(got) == len(expect),
                         f"(got {len(got)})")
                for i, (g, e) in enumerate(zip(got, expect)):
                    if np.issubdtype(g.dtype, np.integer):
                        c.equal(f"@{func} {pipeline} result {i} (expert load)", g, e)
                    else:
                        c.close(f"@{func} {pipeline} result {i}", g, e, tol)
                if pipeline == "fast" and func == "main":
                    whole = got
        if kind == "moe":
            c.finish()

        # Decode: a prompt chunk, single tokens, then the rest, with the
        # states of each call feeding the next; weights from an .npz file.
        W = wgen.make_weights(kind, D, seed=1)
        npz = os.path.join(tmp, "w.npz")
        np.savez(npz, **W)
        states = zero_states(kind, W)
        pieces = [37, 1, 1, 1, T - 40]
        outs, t = [], 0
        for n, size in enumerate(pieces):
            res = seqc_run(path, "step", npz, [u[:, t:t + size]] + states, tmp, f"step{n}")
            t += size
            outs.append(res[0])
            # The stacks also return their aux loss (a mean over the
            # call's tokens, so not compared piecewise).
            states = res[2:] if kind in STACKS else res[1:]
        c.close("step-by-step outputs == whole", np.concatenate(outs, axis=1), whole[0], tol)
        first_state = 2 if kind in STACKS else 1
        final = list(whole[first_state:])
        if kind == "performer":
            # @main normalizes with the op's own `normalize` and returns no
            # states; the carried numerator and normalizer come from numpy.
            final = list(ref.performer(u, W, carried=True)[1:])
        c.expect("one final state per carried state", len(states) == len(final) > 0,
                 f"({len(states)} carried, {len(final)} to compare)")
        for i, (s, w) in enumerate(zip(states, final)):
            c.close(f"step-by-step state {i} == whole", s, w, tol)

        check_packed(c, kind, path, tmp, tol)
    c.finish()


def state_kinds(kind):
    """How @packed lays out each state it returns: "rows" (row s is
    sequence s's state) or "steps" (a KV cache packed like u: sequence s at
    steps cu[s] .. cu[s+1]-1)."""
    if kind in STACKS:
        out = []
        for mixer, _ in (blocks.hybrid_layout() if kind == "hybrid" else blocks.qwen3next_layout()):
            out += ["steps"] * 2 if mixer == "attention" else ["rows"] * 2
        return out
    return ["rows"] * len(zero_states(kind, None))


def check_packed(c, kind, path, tmp, tol):
    """@packed on PACKED_LENGTHS == each sequence alone through @main (the
    fast pipeline; an empty sequence too: zero states, an empty cache):
    outputs concatenated along T, states per sequence. The stacks' aux loss
    is a mean over the call's tokens, so not compared."""
    lengths = PACKED_LENGTHS
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    u = wgen.make_input(D, int(cu[-1]), seed=5)
    W = wgen.make_weights(kind, D, seed=2, func="packed")
    wfile = os.path.join(tmp, "packed.safetensors")
    wgen.write_safetensors(wfile, W)
    first_state = 2 if kind in STACKS else 1
    alone = []
    for s in range(len(lengths)):
        res = seqc_run(path, "main", wfile, [u[:, cu[s]:cu[s + 1]]], tmp, f"alone{s}")
        outs = res[first_state:]
        if kind == "performer":
            # @main returns no states: the carried ones from numpy.
            outs = list(ref.performer(u[:, cu[s]:cu[s + 1]], W, carried=True)[1:])
        alone.append((res[0], outs))
    want_out = np.concatenate([o for o, _ in alone], axis=1)
    layout = state_kinds(kind)
    for pipeline, extra in PIPELINES:
        tag = f"@packed {pipeline} lengths={lengths}"
        got = seqc_run(path, "packed", wfile, [u, cu], tmp, f"packed-{pipeline}", extra)
        c.expect(f"{tag}: {first_state + len(layout)} results",
                 len(got) == first_state + len(layout), f"(got {len(got)})")
        c.close(f"{tag} output == each sequence alone", got[0], want_out, tol)
        for i, (how, g) in enumerate(zip(layout, got[first_state:])):
            for s in range(len(lengths)):
                w = alone[s][1][i]
                part = g[s:s + 1] if how == "rows" else g[:, cu[s]:cu[s + 1]]
                c.close(f"{tag} state {i} of sequence {s} == alone", part, w, tol)


if __name__ == "__main__":
    main()
