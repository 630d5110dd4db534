"""What the compat modules share: dtypes, argument checks, the cache of
compiled functions, and `OpCall` (one seq op, compiled once per signature,
called on the caller's arrays) with helpers for views, dtypes, in-place
writes and packed-sequence offsets."""

import numpy as _np

import seqc as _seqc
from seqc.graph import float_attr  # noqa: F401  (the compat modules' too)

_functions = {}


def cached_function(key, make_text):
    """The compiled @main of `make_text()`, compiled once per `key` (a
    hashable of everything the text depends on: the op's options, dtypes and
    static sizes, never T)."""
    fn = _functions.get(key)
    if fn is None:
        fn = _seqc.compile(make_text(), name=f"seqc.compat:{key[0]}")["main"]
        _functions[key] = fn
    return fn


def compiled_count():
    """How many functions the compat modules compiled (tests check that a
    loop over lengths does not recompile)."""
    return len(_functions)


def is_torch(x):
    return type(x).__module__.startswith("torch")


def element_type(x, what):
    """The MLIR element type of array or tensor `x`."""
    if is_torch(x):
        name = str(x.dtype).replace("torch.", "")
    else:
        name = str(_np.asarray(x).dtype)
    types = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
    if name not in types:
        raise _seqc.ArgumentTypeError(
            f"seqc.compat: {what} has dtype {name}; seqc takes float32, "
            "float16 and bfloat16")
    return types[name]


def host(x, what):
    """`x` as an argument seqc reads in place: a PyTorch tensor on the CPU
    (detached: seqc computes no gradients, so one that requires grad is an
    error while autograd records, as in seqc's own calls), or a numpy
    array."""
    if x is None:
        return None
    if is_torch(x):
        if x.device.type != "cpu":
            raise _seqc.CallError(
                f"seqc.compat: {what} is on {x.device}; seqc's CPU kernels "
                "take host tensors (.cpu())")
        if x.requires_grad and _torch_grad_enabled():
            raise _seqc.ArgumentTypeError(
                f"seqc.compat: {what} requires grad: seqc computes no "
                "gradients (call it under torch.no_grad(), or pass "
                ".detach())")
        return x.detach()
    if isinstance(x, _np.ndarray):
        return x
    raise _seqc.ArgumentTypeError(
        f"seqc.compat: {what} is a {type(x).__name__}, not a tensor or array")


def _torch_grad_enabled():
    import torch
    return torch.is_grad_enabled()


def check_shape(x, shape, what):
    """`x` has `shape` (None entries match anything); a CallError naming
    both otherwise."""
    got = tuple(x.shape)
    if len(got) != len(shape) or any(
            want is not None and g != want for g, want in zip(got, shape)):
        want = "x".join("?" if s is None else str(s) for s in shape)
        raise _seqc.CallError(
            f"seqc.compat: {what} must have shape {want}, but has shape "
            f"{'x'.join(str(g) for g in got) or 'scalar'}")


def tensor_type(shape, dtype):
    """`tensor<...>` with None for a dynamic size."""
    dims = "".join(("?" if d is None else str(d)) + "x" for d in shape)
    return f"tensor<{dims}{dtype}>"


class OpCall:
    """One call of a single seq op on host arrays: its operands in the op's
    order, its attributes and its result types. Calling it compiles (once per
    signature; dynamic sizes are None in the types) a `func.func @main`
    holding only that op and runs it on the operands as they are (views,
    strides and all)."""

    def __init__(self, op):
        self.op = op
        self.specs = []   # (keyword or None, name, shape, dtype)
        self.values = []
        self.attrs = []

    def operand(self, keyword, name, value, shape, dtype):
        """Appends operand `%name` (keyword None: a required operand,
        otherwise the optional group `keyword(%name)`) of type
        tensor<shape x dtype>."""
        self.specs.append((keyword, name, tuple(shape), dtype))
        self.values.append(value)

    def attr(self, text):
        self.attrs.append(text)

    def __call__(self, *results):
        """Runs the op; `results` are (shape, dtype) of its results. The
        cache key is the signature as tuples: the MLIR text is written only
        when it is compiled."""
        results = tuple((tuple(s), t) for s, t in results)
        key = (self.op, tuple(self.specs), tuple(self.attrs), results)
        fn = cached_function(key, lambda: self.text(results))
        return fn(*self.values)

    def text(self, results):
        """The MLIR of `func.func @main` running the op."""
        types = [tensor_type(s, t) for _, _, s, t in self.specs]
        args = ", ".join(f"%{spec[1]}: {t}"
                         for spec, t in zip(self.specs, types))
        operands = ", ".join(f"%{n}" for kw, n, _, _ in self.specs
                             if kw is None)
        operands += "".join(f" {kw}(%{n})" for kw, n, _, _ in self.specs
                            if kw is not None)
        attrs = f" {{{', '.join(self.attrs)}}}" if self.attrs else ""
        in_types = ", ".join(types)
        out_types = ", ".join(tensor_type(s, t) for s, t in results)
        count = len(results)
        values = ", ".join(f"%r#{i}" for i in range(count))
        return (f"func.func @main({args}) -> ({out_types}) {{\n"
                f"  %r:{count} = seq.{self.op} {operands}{attrs} : "
                f"({in_types}) -> ({out_types})\n"
                f"  return {values} : {out_types}\n"
                "}\n")


def required(x, what):
    """`host(x)` of an argument the function cannot do without."""
    if x is None:
        raise _seqc.ArgumentTypeError(
            f"seqc.compat: {what} is required (got None)")
    return host(x, what)


def permute(x, *axes):
    """A permuted view of array or tensor `x` (no copy)."""
    return x.permute(*axes) if is_torch(x) else x.transpose(axes)


def to_f32(x):
    """`x` as float32 (itself when it already is): seqc's states are f32."""
    if is_torch(x):
        import torch
        return x.to(torch.float32)
    return x.astype(_np.float32, copy=False)


def cast_like(x, like):
    """`x` in the dtype of tensor or array `like` (`x` is a torch tensor
    whenever `like` is: seqc returns tensors when an argument is one)."""
    if is_torch(x):
        import torch
        if not is_torch(like):
            like = torch.from_numpy(_np.empty(0, like.dtype))
        return x.to(like.dtype)
    return x.astype(like.dtype, copy=False)


def assign(dst, src):
    """Writes `src` into `dst` in place (converting dtype and kind)."""
    if is_torch(dst):
        import torch
        if not is_torch(src):
            src = torch.from_numpy(_np.asarray(src))
        dst.copy_(src)
    else:
        dst[...] = src.numpy() if is_torch(src) else src


def concat_last(a, b):
    """`a` and `b` joined along their last dimension, in `a`'s dtype."""
    b = cast_like(b, a)
    if is_torch(a):
        import torch
        return torch.cat([a, b], dim=-1)
    return _np.concatenate([a, b], axis=-1)


def same_type(x, what, dtype, first):
    """Checks that data operand `x` has the element type `dtype` of the
    op's first data operand `first`."""
    got = element_type(x, what)
    if got != dtype:
        raise _seqc.ArgumentTypeError(
            f"seqc.compat: {what} has dtype {got}, but {first} has {dtype} "
            f"(seqc takes {what} in {first}'s dtype)")
    return got


def param_type(x, what, dtype):
    """The element type of parameter `x`: f32 or the data dtype."""
    got = element_type(x, what)
    if got not in ("f32", dtype):
        raise _seqc.ArgumentTypeError(
            f"seqc.compat: {what} has dtype {got}; seqc takes it in float32 "
            f"or in the data's dtype ({dtype})")
    return got


def check_rank(x, ranks, what, names):
    """Checks that `x` has one of `ranks` dimensions; `names` spells the
    expected layouts for the message."""
    if x.ndim not in ranks:
        raise _seqc.CallError(
            f"seqc.compat: {what} must be {names}, but has shape "
            f"{'x'.join(str(s) for s in x.shape) or 'scalar'}")


def integer_array(x, what):
    """Host integer array or tensor `x` as a numpy int64 array."""
    x = host(x, what)
    values = _np.asarray(x)
    if values.dtype.kind not in "iu":
        raise _seqc.ArgumentTypeError(
            f"seqc.compat: {what} has dtype {values.dtype}; it takes "
            "integers")
    return values.astype(_np.int64)


def cu_seqlens_offsets(cu_seqlens, what="cu_seqlens"):
    """`cu_seqlens` (S+1 offsets of sequences packed in batch 1) as the
    int32 array seqc's `segments` takes (seqc checks the offsets)."""
    cu = integer_array(cu_seqlens, what)
    if cu.ndim != 1 or cu.size < 1:
        raise _seqc.CallError(
            f"seqc.compat: {what} must be a 1-D tensor of S+1 offsets, but "
            f"has shape {'x'.join(str(s) for s in cu.shape) or 'scalar'}")
    return cu.astype(_np.int32)


def seq_idx_offsets(seq_idx, length, what="seq_idx"):
    """The offsets (seqc's `segments`, cu_seqlens' layout) of `seq_idx`, the
    peers' per-token sequence index (batch 1 x seqlen): token t belongs to
    sequence seq_idx[t]. Sequences must be packed in order (seq_idx
    non-decreasing from 0, a skipped index being an empty sequence)."""
    idx = integer_array(seq_idx, what)
    if idx.ndim != 2 or idx.shape[1] != length:
        raise _seqc.CallError(
            f"seqc.compat: {what} must have shape batch x seqlen (seqlen "
            f"{length}), but has shape {'x'.join(str(s) for s in idx.shape)}")
    if idx.shape[0] != 1:
        raise _seqc.CallError(
            f"seqc.compat: {what} with batch {idx.shape[0]}: seqc packs "
            "variable-length sequences in a batch of 1 (seq_idx 1 x seqlen)")
    idx = idx[0]
    if length == 0:
        return _np.zeros(2, _np.int32)
    if idx[0] < 0 or _np.any(_np.diff(idx) < 0):
        raise _seqc.CallError(
            f"seqc.compat: {what} must be non-decreasing from 0 (sequences "
            "packed one after another); seqc cannot express other layouts")
    count = int(idx[-1]) + 1
    return _np.searchsorted(idx, _np.arange(count + 1)).astype(_np.int32)


def seq_idx_of(cu):
    """The per-token sequence index that offsets `cu` describe."""
    return _np.searchsorted(cu[1:], _np.arange(cu[-1]), side="right")
