"""seqc from Python: compile MLIR sequence-model graphs and call them on numpy
arrays and PyTorch tensors without copies.

    import seqc
    m = seqc.compile(open("block.mlir").read())      # or a path
    y, last = m.main(x, dt, A, B, C)                 # numpy in, numpy out

Arguments are read in place with their strides (numpy's buffer protocol,
PyTorch's DLPack); results are seqc's buffers handed over without a copy:
numpy arrays when every argument is numpy, PyTorch tensors when one is a
PyTorch tensor. One result is returned as is, several as a tuple.

Models are written with `seqc.graph` (no MLIR by hand); the peers' function
names live in `seqc.compat.mamba_ssm`, `seqc.compat.causal_conv1d` and
`seqc.compat.fla`.
"""

import os as _os
import sys as _sys

from . import _core


class Error(Exception):
    """A failure seqc reported (its message is the exception's text)."""


class CompileError(Error):
    """The source did not parse, verify or compile."""


class CallError(Error, ValueError):
    """A call's arguments did not fit the function (shape, count, layout) or
    one of its run-time checks failed."""


class ArgumentTypeError(Error, TypeError):
    """An argument of a type seqc does not take (a dtype the function does
    not declare, an object that is neither an array nor a tensor)."""


class WeightsError(Error, OSError):
    """A weights or .npy file could not be read."""


_core._set_error_classes(CompileError, CallError, ArgumentTypeError,
                         WeightsError)

Tensor = _core.Tensor
set_num_threads = _core.set_num_threads
get_num_threads = _core.get_num_threads

_TARGETS = ("cpu", "cuda", "cuda-emulated")


def _looks_like_path(text):
    return "\n" not in text and "{" not in text and (
        text.endswith(".mlir") or _os.path.exists(text))


class Module:
    """A compiled module: each public function is an attribute (and an
    item), called with arrays or tensors."""

    def __init__(self, core):
        self._core = core
        self._functions = {}
        # Functions the module has but cannot call (a signature seqc cannot
        # pass, no rank-local form under local_steps): using one raises why.
        self._uncallable = {}
        for name in core.names:
            try:
                fn = core.function(name)
            except CallError as e:
                self._uncallable[name] = e
                continue
            self._functions[name] = fn
            if name.isidentifier() and not hasattr(Module, name):
                # The function itself: no Python frame between the caller
                # and the C call.
                setattr(self, name, fn)

    def __getattr__(self, name):
        # Only names that are not attributes: the uncallable functions.
        uncallable = self.__dict__.get("_uncallable", {})
        if name in uncallable:
            raise CallError(str(uncallable[name]))
        raise AttributeError(f"seqc: the module has no public function "
                             f"'{name}'")

    def __getitem__(self, name):
        if name in self._uncallable:
            raise CallError(str(self._uncallable[name]))
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"seqc: the module has no public function '{name}' "
                           f"(it has {', '.join(self._functions) or 'none'})"
                           ) from None

    def __contains__(self, name):
        return name in self._functions or name in self._uncallable

    @property
    def functions(self):
        """The public functions' names."""
        return list(self._functions)

    @property
    def cache_status(self):
        """'compiled', 'memory' (the engine had it) or 'disk'."""
        return self._core.cache_status

    def __repr__(self):
        return f"<seqc.Module {', '.join(self._functions)}>"


def compile(text_or_path, target="cpu", *, name=None, reference=False,
            opt_level=3, num_threads=0, cache=True, cache_dir=None, fuse=True,
            strict=False, memory_limit=0, ranks=0, bf16_products="auto",
            parallel="sequence", bind_weights=None, communicator=None,
            local_steps=False, call_timeout=0):
    """Compiles MLIR text (or the file at a path) for `target` ("cpu",
    "cuda", "cuda-emulated").

    Options mirror seqc-run's: `reference` (the reference lowering),
    `opt_level` (0-3), `num_threads` (0 keeps the pool's), `cache` (memory
    and disk compile cache; repeated compiles of the same text are served
    from it), `cache_dir`, `fuse` (elementwise glue fused into ops), `strict`
    (an op without its fast lowering is an error), `memory_limit` (bytes one
    call may hold, 0 for the machine's memory), `ranks` (sequence
    parallelism over MPI_COMM_WORLD's `ranks` processes, under mpirun: every
    process compiles and calls with the same whole arguments and gets the
    whole results, docs/distributed.md; with target="cuda" one GPU per
    process, the exchanges on NCCL; 0, the default: one process),
    `parallel` (what the ranks split: "sequence", the default, every op's
    steps; "experts", moe_ffn's experts with the routed tokens exchanged
    all-to-all; "sequence+experts", both), `communicator` (with `ranks`:
    an mpi4py communicator of `ranks` processes, which call the module
    collectively, instead of MPI_COMM_WORLD: groups of processes can run
    modules of their own; mpi4py must run on the MPI library seqc opens,
    docs/distributed.md), `local_steps` (with `ranks` and "sequence" or
    "sequence+experts", the experts then split each rank's own tokens: each
    process passes only its own steps of the arguments with steps and gets
    back its own steps of the results with steps, rank r's after rank
    r - 1's in the whole, any number on each; weights and states stay
    whole; the compile fails naming the op where the graph mixes steps),
    `call_timeout` (with `ranks` > 1: a call that has not returned after
    that many seconds prints an error and ends every process of the job,
    where a rank that stopped inside it would leave the others waiting for
    ever; 0, the default: no limit),
    `bf16_products` (how the CPU kernels multiply bf16 operands: "amx",
    AMX tiles in matmuls and experts, an error where the CPU lacks AMX or
    Linux refuses its tile data; "amx-emulated", the same kernels with the
    tiles emulated (any CPU, for tests); "dot", AVX-512 BF16 on bf16 pairs,
    an error where the CPU lacks it; "widen", f32 FMAs; "auto", the
    default: $SEQC_CPU_BF16 if set, else amx where the CPU has it, else
    dot on AMD CPUs with AVX-512 BF16, else widen), `bind_weights` (the
    path of a .safetensors or .npz file whose tensors are bound when
    compiling: each argument whose seq.name is a tensor's name becomes that
    tensor, a constant of the module, and the function no longer takes it;
    matmuls pack such a weight once, when compiling). Raises CompileError
    with seqc's diagnostics."""
    if target not in _TARGETS:
        raise ValueError(f"seqc: unknown target '{target}' "
                         f"(one of {', '.join(_TARGETS)})")
    if not isinstance(text_or_path, (str, _os.PathLike)):
        raise TypeError("seqc.compile takes MLIR text or a path, not "
                        f"{type(text_or_path).__name__}")
    source = _os.fspath(text_or_path)
    is_path = isinstance(text_or_path, _os.PathLike) or _looks_like_path(
        source)
    core = _core.compile(source, is_path, name or "", target, bool(reference),
                         int(opt_level), int(num_threads), bool(cache),
                         _os.fspath(cache_dir) if cache_dir else "",
                         bool(fuse), bool(strict), int(memory_limit),
                         int(ranks), str(bf16_products), str(parallel),
                         _os.fspath(bind_weights) if bind_weights else "",
                         _communicator_handle(communicator, ranks),
                         bool(local_steps), float(call_timeout))
    return Module(core)


def _communicator_handle(communicator, ranks):
    """The MPI_Comm handle of an mpi4py communicator as the C API takes it,
    unsigned (OpenMPI's pointer, or MPICH's int sign-extended to 64 bits);
    0 for None (MPI_COMM_WORLD)."""
    if communicator is None:
        return 0
    if not ranks:
        raise ValueError("seqc: a communicator is for a distributed module "
                         "(ranks > 0)")
    # mpi4py is loaded if `communicator` is its; importing it here would
    # start MPI for nothing.
    MPI = _sys.modules.get("mpi4py.MPI")
    if MPI is None or not isinstance(communicator, MPI.Comm):
        raise TypeError("seqc: communicator is an mpi4py communicator "
                        "(mpi4py.MPI.Comm), not "
                        f"{type(communicator).__name__}")
    if communicator == MPI.COMM_NULL:
        raise ValueError("seqc: communicator is MPI.COMM_NULL")
    if communicator.Is_inter():
        raise ValueError("seqc: communicator is an intercommunicator; the "
                         "ranks of a module are one group")
    # mpi4py gives the handle unsigned and pointer-wide (MPICH's negative
    # ints, split communicators from 0x84000000, arrive sign-extended); the
    # mask keeps a signed reading in range too.
    return MPI._handleof(communicator) & 0xFFFFFFFFFFFFFFFF


def load_weights(path, framework="numpy"):
    """The tensors of a .safetensors or .npz file by name, viewing the file's
    buffer (no copy). With framework="torch", PyTorch tensors (bf16 tensors
    keep their type); numpy has no bf16, so a bf16 tensor with numpy is an
    ArgumentTypeError naming it."""
    if framework not in ("numpy", "torch"):
        raise ValueError("seqc.load_weights: framework is 'numpy' or 'torch'")
    raw = _core.load_weights(_os.fspath(path))
    out = {}
    for key, value in raw.items():
        bf16 = isinstance(value, tuple)
        if framework == "numpy":
            if bf16:
                raise ArgumentTypeError(
                    f"seqc: {path}: tensor '{key}' is bf16, which numpy has "
                    "no type for (load it with framework='torch')")
            out[key] = value
            continue
        import torch
        if bf16:
            out[key] = torch.from_numpy(value[1].view("int16")).view(
                torch.bfloat16)
        else:
            out[key] = torch.from_numpy(value)
    return out


from . import graph  # noqa: E402,F401  (seqc.graph, which uses compile)
