"""seqc.graph: model graphs in Python, emitted as MLIR (no MLIR by hand).

    from seqc.graph import Graph
    g = Graph()
    f = g.function("main")
    x = f.arg("x", [1, "T", 8, 32])              # "T": a dynamic length
    dt = f.arg("dt", [1, "T", 8])
    A = f.arg("A", [8])
    B = f.arg("B", [1, "T", 1, 64])
    y, last = f.ssd(x, dt, A, B, B, dt_softplus=True)
    f.ret(y, last)
    module = g.compile()                          # seqc.compile(g.text())
    y, last = module.main(x_array, dt_array, ...)

A Function holds arguments, ops and a return. Every op method returns
Values (an SSA name, a shape and an element type) whose shapes it derives
from its operands; a string in a shape is a dynamic dimension ("T" the
sequence length, any other name another one), bound at run time from the
argument that first has it.

- The seq ops of SPEC section 2 under their own names and operand names:
  linear_scan, selective_scan, ssd, linear_attention, delta_rule,
  generalized_delta_rule, attention, causal_conv1d (optional operands and
  attributes as keywords: `init=`, `segments=`, `checkpoint_every=`,
  `dt_softplus=True`, ...). `op(...)` writes any other op.
- Glue on rows (tensors [T, C], batch 1): matmul, rmsnorm, layernorm,
  groupnorm, l2norm, elementwise (add, mul, scale, silu, sigmoid, tanh,
  softplus_bias, ...), column slices, concat, and `heads`/`to_seq` and
  `from_seq` reshapes between rows and the seq ops' [1, T, H, P] layouts.
"""


class Value:
    def __init__(self, name, shape, dtype="f32"):
        self.name = name
        self.shape = list(shape)
        self.dtype = dtype

    @property
    def type(self):
        return tensor_type(self.shape, self.dtype)

    def __str__(self):
        return self.name


def tensor_type(shape, dtype="f32"):
    dims = "".join(("?" if isinstance(d, str) else str(d)) + "x" for d in shape)
    return f"tensor<{dims}{dtype}>"


def _float(x):
    """An MLIR float literal (a '.' is required before any exponent)."""
    s = repr(float(x))
    mantissa, _, exponent = s.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exponent if exponent else "")


def float_attr(x):
    """An MLIR f32 attribute; infinities and NaN as their bit patterns
    (MLIR has no literal for them)."""
    specials = {"inf": "0x7F800000", "-inf": "0xFF800000", "nan": "0x7FC00000"}
    text = specials.get(repr(float(x)))
    return f"{text or _float(x)} : f32"


# -- seq ops with shapes derived from their operands ---------------------------


def _attr_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value} : i64"
    if isinstance(value, float):
        return float_attr(value)
    return str(value)  # an MLIR attribute written out (#seq.feature_map<...>)


def _attrs(**kwargs):
    return ", ".join(f"{k} = {_attr_text(v)}" for k, v in kwargs.items()
                     if v is not None)


class _SeqOps:
    """The typed seq op methods of Function (mixed in below)."""

    def _stateful(self, name, operands, optional, out_shape, state_shape,
                  dtype, segments, checkpoint_every, attrs):
        """An op with `y`-like and state results; `segments` makes the
        states per sequence, `checkpoint_every` adds the checkpoints."""
        rows = (state_shape[0] if segments is None else
                self._segment_count(segments))
        state = [rows] + list(state_shape[1:])
        results = [(out_shape, dtype), (state, dtype)]
        if checkpoint_every is not None:
            results.append(([rows, "NC"] + list(state_shape[1:]), dtype))
        optional = list(optional) + [("segments", segments)]
        text = _attrs(checkpoint_every=checkpoint_every, **attrs)
        return self.op(name, operands, results, optional, text)

    def _segment_count(self, segments):
        n = segments.shape[0]
        return n - 1 if isinstance(n, int) else "S"

    def linear_scan(self, a, b, *, init=None, segments=None,
                    checkpoint_every=None, reverse=None):
        """h_t = a_t h_{t-1} + b_t -> (h, last)."""
        return self._stateful(
            "linear_scan", [a, b], [("init", init)], a.shape,
            [a.shape[0]] + a.shape[2:], a.dtype, segments, checkpoint_every,
            dict(reverse=reverse))

    def selective_scan(self, u, delta, A, B, C, *, skip=None, gate=None,
                       delta_bias=None, init=None, segments=None,
                       checkpoint_every=None, delta_softplus=None,
                       discretization=None):
        """Mamba-1 (SPEC 2.3): u [B, T, D], A [D, N] -> (y, last [B, D, N])."""
        if discretization is not None:
            discretization = f"#seq.discretization<{discretization}>"
        return self._stateful(
            "selective_scan", [u, delta, A, B, C],
            [("skip", skip), ("gate", gate), ("delta_bias", delta_bias),
             ("init", init)], u.shape, [u.shape[0], u.shape[2], A.shape[1]],
            u.dtype, segments, checkpoint_every,
            dict(delta_softplus=delta_softplus, discretization=discretization))

    def ssd(self, x, dt, A, B, C, *, skip=None, gate=None, dt_bias=None,
            init=None, segments=None, checkpoint_every=None, dt_softplus=None,
            chunk_size=None, dt_min=None, dt_max=None):
        """Mamba-2 (SPEC 2.4): x [B, T, H, P], B [B, T, G, N] ->
        (y, last [B, H, P, N])."""
        return self._stateful(
            "ssd", [x, dt, A, B, C],
            [("skip", skip), ("gate", gate), ("dt_bias", dt_bias),
             ("init", init)], x.shape,
            [x.shape[0], x.shape[2], x.shape[3], B.shape[3]], x.dtype,
            segments, checkpoint_every,
            dict(dt_softplus=dt_softplus, chunk_size=chunk_size,
                 dt_min=dt_min, dt_max=dt_max))

    def linear_attention(self, q, k, v, *, decay=None, bonus=None, init=None,
                         segments=None, checkpoint_every=None,
                         feature_map=None, causal=None, normalize=None,
                         scale=None, eps=None):
        """SPEC 2.6: q, k [B, T, H, K], v [B, T, H, V] ->
        (o [B, T, H, V], last [B, H, K, V])."""
        if feature_map is not None:
            feature_map = f"#seq.feature_map<{feature_map}>"
        Bsz, T, H, K = q.shape
        V = v.shape[3]
        return self._stateful(
            "linear_attention", [q, k, v],
            [("decay", decay), ("bonus", bonus), ("init", init)],
            [Bsz, T, H, V], [Bsz, H, K, V], q.dtype, segments,
            checkpoint_every,
            dict(feature_map=feature_map, causal=causal, normalize=normalize,
                 scale=scale, eps=eps))

    def delta_rule(self, q, k, v, beta, *, decay=None, init=None,
                   segments=None, checkpoint_every=None, qk_l2norm=None,
                   scale=None, eps=None, chunk_size=None):
        """SPEC 2.12 (DeltaNet, Gated DeltaNet, KDA): q, k [B, T, H, K],
        v [B, T, HV, V] -> (o [B, T, HV, V], last [B, HV, K, V])."""
        Bsz, T, HV, V = v.shape
        return self._stateful(
            "delta_rule", [q, k, v, beta], [("decay", decay), ("init", init)],
            [Bsz, T, HV, V], [Bsz, HV, q.shape[3], V], q.dtype, segments,
            checkpoint_every,
            dict(qk_l2norm=qk_l2norm, scale=scale, eps=eps,
                 chunk_size=chunk_size))

    def generalized_delta_rule(self, q, k, v, a, b, *, decay=None, init=None,
                               segments=None, checkpoint_every=None,
                               scale=None):
        """SPEC 2.13 (RWKV-7's DPLR state) -> (o, last [B, H, K, V])."""
        Bsz, T, H, V = v.shape
        return self._stateful(
            "generalized_delta_rule", [q, k, v, a, b],
            [("decay", decay), ("init", init)], [Bsz, T, H, V],
            [Bsz, H, q.shape[3], V], q.dtype, segments, checkpoint_every,
            dict(scale=scale))

    def causal_conv1d(self, x, w, *, bias=None, init=None, segments=None,
                      activation=None):
        """SPEC 2.9: x [B, T, D], w [D, W] -> (y, last [B, D, W-1])."""
        if activation is not None:
            activation = f"#seq.activation<{activation}>"
        return self._stateful(
            "causal_conv1d", [x, w], [("bias", bias), ("init", init)],
            x.shape, [x.shape[0], x.shape[2], w.shape[1] - 1], x.dtype,
            segments, None, dict(activation=activation))

    def attention(self, q, k, v, *, segments=None, kv_segments=None,
                  causal=None, window=None, scale=None):
        """SPEC 2.8: q [B, T, H, K], k, v [B, S, Hkv, *] -> o [B, T, H, V]."""
        Bsz, T, H, _ = q.shape
        (o,) = self.op(
            "attention", [q, k, v], [([Bsz, T, H, v.shape[3]], q.dtype)],
            [("segments", segments), ("kv_segments", kv_segments)],
            _attrs(causal=causal, window=window, scale=scale))
        return o


class Function(_SeqOps):
    """One func.func. `args` are (name, shape, seq.name or None); results
    are set by ret()."""

    def __init__(self, name, private=False):
        self.name = name
        self.private = private
        self.args = []
        self.lines = []
        self.counter = 0
        self.dims = {}  # dynamic dimension name -> SSA index value
        self.results = None

    # -- plumbing ---------------------------------------------------------

    def fresh(self, hint="v"):
        self.counter += 1
        return f"%{hint}{self.counter}"

    def emit(self, line):
        self.lines.append("  " + line)

    def comment(self, text):
        self.lines.append("")
        self.lines.append("  // " + text)

    def arg(self, hint, shape, seq_name=None, dtype="f32"):
        v = Value(f"%{hint}", shape, dtype)
        self.args.append((v, seq_name))
        return v

    def bind_dim(self, dim, value, axis):
        """Names the dynamic dimension `dim` as axis `axis` of `value`."""
        if dim in self.dims:
            return
        c = self.index(axis)
        n = f"%{dim}"
        self.emit(f"{n} = tensor.dim {value}, {c} : {value.type}")
        self.dims[dim] = n

    def index(self, i):
        n = f"%c{i}_idx"
        if n not in self.dims.values():
            self.dims[f"__c{i}"] = n
            self.emit(f"{n} = arith.constant {i} : index")
        return n

    def dyn_operands(self, shape):
        return [self.dim(d) for d in shape if isinstance(d, str)]

    def dim(self, name):
        """The SSA index of dynamic dimension `name`, bound on first use
        from the first argument that has it."""
        if name not in self.dims:
            for v, _ in self.args:
                if name in v.shape:
                    self.bind_dim(name, v, v.shape.index(name))
                    break
            else:
                raise ValueError(f"seqc.graph: no argument of @{self.name} "
                                 f"has the dynamic dimension '{name}'")
        return self.dims[name]

    def ret(self, *values):
        self.results = list(values)
        self.emit("return " + ", ".join(v.name for v in values) + " : " +
                  ", ".join(v.type for v in values))

    def text(self):
        args = []
        for v, seq_name in self.args:
            attr = f' {{seq.name = "{seq_name}"}}' if seq_name else ""
            args.append(f"{v.name}: {v.type}{attr}")
        vis = "private " if self.private else ""
        sig = ",\n    ".join(args)
        res = ", ".join(v.type for v in self.results)
        head = f"func.func {vis}@{self.name}(\n    {sig})\n    -> ({res}) {{"
        return head + "\n" + "\n".join(self.lines) + "\n}\n"

    # -- tensors ----------------------------------------------------------

    def empty(self, shape):
        n = self.fresh("e")
        dyn = ", ".join(self.dyn_operands(shape))
        self.emit(f"{n} = tensor.empty({dyn}) : {tensor_type(shape)}")
        return Value(n, shape)

    def full(self, shape, value):
        e = self.empty(shape)
        c = self.fresh("cst")
        self.emit(f"{c} = arith.constant {_float(value)} : f32")
        n = self.fresh("fill")
        self.emit(f"{n} = linalg.fill ins({c} : f32) outs({e} : {e.type}) -> {e.type}")
        return Value(n, shape)

    def cast(self, x, shape):
        n = self.fresh("cast")
        self.emit(f"{n} = tensor.cast {x} : {x.type} to {tensor_type(shape)}")
        return Value(n, shape)

    def cols(self, x, start, size):
        """x[:, start:start+size] of a [T, C] value."""
        rows = x.shape[0]
        n = self.fresh("s")
        rs = self.dim(rows) if isinstance(rows, str) else str(rows)
        self.emit(f"{n} = tensor.extract_slice {x}[0, {start}] [{rs}, {size}] [1, 1]"
                  f" : {x.type} to {tensor_type([rows, size])}")
        return Value(n, [rows, size])

    def _ix(self, v):
        return self.dim(v) if isinstance(v, str) else str(v)

    def rows(self, x, start, size):
        """x[start:start+size, :] of a [R, C] value; start and size are ints
        or the names of dynamic dimensions (e.g. "T")."""
        C = x.shape[1]
        n = self.fresh("s")
        self.emit(f"{n} = tensor.extract_slice {x}[{self._ix(start)}, 0] [{self._ix(size)}, {C}]"
                  f" [1, 1] : {x.type} to {tensor_type([size, C])}")
        return Value(n, [size, C])

    def slab(self, w, i):
        """w[i] of a static [N, R, C] weight, as [R, C]."""
        _, R, C = w.shape
        n = self.fresh("s")
        self.emit(f"{n} = tensor.extract_slice {w}[{i}, 0, 0] [1, {R}, {C}] [1, 1, 1]"
                  f" : {w.type} to {tensor_type([1, R, C])}")
        return self.collapse(Value(n, [1, R, C]), [[0, 1], [2]], [R, C])

    def heads(self, x, P):
        """[T, H * P] (or a seq op's [1, T, H, P]) -> [T * H, P] (one row per
        token and head)."""
        if len(x.shape) == 4:
            xh = self.collapse(x, [[0, 1, 2], [3]], ["TH", P])
            self.bind_dim("TH", xh, 0)
            return xh
        T, C = x.shape
        x3 = self.expand(x, [[0], [1, 2]], [T, C // P, P])
        xh = self.collapse(x3, [[0, 1], [2]], ["TH", P])
        self.bind_dim("TH", xh, 0)
        return xh

    def unheads(self, x, T, C):
        """[T * H, P] -> [T, H * P], the inverse of heads()."""
        P = x.shape[1]
        x3 = self.expand(x, [[0, 1], [2]], [T, C // P, P])
        return self.collapse(x3, [[0], [1, 2]], [T, C])

    def expand(self, x, groups, shape):
        n = self.fresh("x")
        g = ", ".join("[" + ", ".join(map(str, grp)) + "]" for grp in groups)
        out = ", ".join(self.dim(d) if isinstance(d, str) else str(d) for d in shape)
        self.emit(f"{n} = tensor.expand_shape {x} [{g}] output_shape [{out}]"
                  f" : {x.type} into {tensor_type(shape)}")
        return Value(n, shape)

    def collapse(self, x, groups, shape):
        n = self.fresh("x")
        g = ", ".join("[" + ", ".join(map(str, grp)) + "]" for grp in groups)
        self.emit(f"{n} = tensor.collapse_shape {x} [{g}] : {x.type} into {tensor_type(shape)}")
        return Value(n, shape)

    def to_seq(self, x, inner=None):
        """[T, C] -> [1, T, C], or [1, T, C / inner, inner]."""
        T, C = x.shape
        if inner is None:
            return self.expand(x, [[0, 1], [2]], [1, T, C])
        return self.expand(x, [[0, 1], [2, 3]], [1, T, C // inner, inner])

    def from_seq(self, x):
        """[1, T, C] or [1, T, H, P] -> [T, C] / [T, H * P]."""
        if len(x.shape) == 3:
            return self.collapse(x, [[0, 1], [2]], [x.shape[1], x.shape[2]])
        return self.collapse(x, [[0, 1], [2, 3]], [x.shape[1], x.shape[2] * x.shape[3]])

    def concat(self, a, b, dim, shape):
        n = self.fresh("cat")
        self.emit(f"{n} = tensor.concat dim({dim}) {a}, {b} : ({a.type}, {b.type}) -> {tensor_type(shape)}")
        return Value(n, shape)

    # -- linalg -------------------------------------------------------------

    def matmul(self, x, w):
        """[M, K] x [K, N] -> [M, N]."""
        M, N = x.shape[0], w.shape[1]
        acc = self.full([M, N], 0.0)
        n = self.fresh("mm")
        self.emit(f"{n} = linalg.matmul ins({x}, {w} : {x.type}, {w.type}) "
                  f"outs({acc} : {acc.type}) -> {acc.type}")
        return Value(n, [M, N])

    def generic(self, inputs, shape, body, reduce_last=False, out_init=None):
        """A linalg.generic over `shape` (the iteration space). `inputs` are
        (value, kind) with kind "full" (all dims), "col" (the last), "row"
        (all but the last) or "scalar" (a 0-d tensor). `body(args)` gets the
        block arguments' names and returns (lines, result). With
        reduce_last the last dim is a reduction into a [shape[:-1]] output
        that starts from `out_init`."""
        rank = len(shape)
        dims = [f"d{i}" for i in range(rank)]
        allmap = "(" + ", ".join(dims) + ")"

        def amap(kind):
            res = {"full": dims, "col": dims[-1:], "row": dims[:-1], "scalar": []}[kind]
            return f"affine_map<{allmap} -> ({', '.join(res)})>"

        maps = [amap(k) for _, k in inputs]
        out_shape = shape[:-1] if reduce_last else shape
        maps.append(amap("row" if reduce_last else "full"))
        iters = ["parallel"] * rank
        if reduce_last:
            iters[-1] = "reduction"
        out = out_init if out_init is not None else self.empty(out_shape)
        n = self.fresh("g")
        ins = ", ".join(str(v) for v, _ in inputs)
        intypes = ", ".join(v.type for v, _ in inputs)
        self.emit(f"{n} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
                  f"iterator_types = [{', '.join(repr(i).replace(chr(39), chr(34)) for i in iters)}]}}")
        self.emit(f"    ins({ins} : {intypes}) outs({out} : {out.type}) {{")
        names = [f"%a{i}" for i in range(len(inputs))] + ["%acc"]
        self.emit("^bb0(" + ", ".join(f"{a}: f32" for a in names) + "):")
        lines, result = body(names)
        for line in lines:
            self.emit("  " + line)
        self.emit(f"  linalg.yield {result} : f32")
        self.emit(f"}} -> {out.type}")
        return Value(n, out_shape)

    def map(self, fn, *inputs, kinds=None):
        """Elementwise over the shape of the first input."""
        kinds = kinds or ["full"] * len(inputs)
        return self.generic(list(zip(inputs, kinds)), inputs[0].shape, fn)

    # -- layers -------------------------------------------------------------

    def rmsnorm(self, x, w, eps=1e-5):
        """x / sqrt(mean(x^2) + eps) * w over the last dim of [R, C]."""
        R, C = x.shape
        acc = self.full([R], 0.0)
        ss = self.generic([(x, "full")], [R, C],
                          lambda a: (["%sq = arith.mulf %a0, %a0 : f32",
                                      "%s = arith.addf %acc, %sq : f32"], "%s"),
                          reduce_last=True, out_init=acc)
        inv = _float(1.0 / C)
        return self.generic(
            [(x, "full"), (ss, "row"), (w, "col")], [R, C],
            lambda a: ([f"%inv = arith.constant {inv} : f32",
                        f"%eps = arith.constant {_float(eps)} : f32",
                        "%m = arith.mulf %a1, %inv : f32",
                        "%v = arith.addf %m, %eps : f32",
                        "%r = math.rsqrt %v : f32",
                        "%n = arith.mulf %a0, %r : f32",
                        "%y = arith.mulf %n, %a2 : f32"], "%y"))

    def rowsum(self, x, lines, result):
        """sum over the last dim of [R, C] of an elementwise term of the
        generic's inputs: (x, "full") and the block argument %acc."""
        R, C = x.shape
        acc = self.full([R], 0.0)
        return self.generic([(x, "full")], [R, C],
                            lambda a: (lines + [f"%s = arith.addf %acc, {result} : f32"], "%s"),
                            reduce_last=True, out_init=acc)

    def l2norm(self, x, eps=1e-12):
        """x / max(|x|, eps) over the last dim of [R, C] (F.normalize)."""
        ss = self.rowsum(x, ["%sq = arith.mulf %a0, %a0 : f32"], "%sq")
        return self.generic(
            [(x, "full"), (ss, "row")], list(x.shape),
            lambda a: ([f"%eps = arith.constant {_float(eps)} : f32",
                        "%n = math.sqrt %a1 : f32",
                        "%m = arith.maximumf %n, %eps : f32",
                        "%y = arith.divf %a0, %m : f32"], "%y"))

    def layernorm(self, x, eps=1e-5):
        """(x - mean) / sqrt(var + eps) over the last dim of [R, C] (biased
        variance; no affine)."""
        R, C = x.shape
        inv = _float(1.0 / C)
        s = self.rowsum(x, [], "%a0")
        mean = self.map(lambda n: ([f"%inv = arith.constant {inv} : f32",
                                    "%y = arith.mulf %a0, %inv : f32"], "%y"), s)
        acc = self.full([R], 0.0)
        ss = self.generic([(x, "full"), (mean, "row")], [R, C],
                          lambda a: (["%c = arith.subf %a0, %a1 : f32",
                                      "%sq = arith.mulf %c, %c : f32",
                                      "%s = arith.addf %acc, %sq : f32"], "%s"),
                          reduce_last=True, out_init=acc)
        return self.generic(
            [(x, "full"), (mean, "row"), (ss, "row")], [R, C],
            lambda a: ([f"%inv = arith.constant {inv} : f32",
                        f"%eps = arith.constant {_float(eps)} : f32",
                        "%c = arith.subf %a0, %a1 : f32",
                        "%m = arith.mulf %a2, %inv : f32",
                        "%v = arith.addf %m, %eps : f32",
                        "%r = math.rsqrt %v : f32",
                        "%y = arith.mulf %c, %r : f32"], "%y"))

    def groupnorm(self, x, heads, w, b, eps=1e-5):
        """GroupNorm(heads, C) of [T, C]: each head's channels normalized
        (layernorm()), then w * . + b per channel."""
        T, C = x.shape
        xn = self.unheads(self.layernorm(self.heads(x, C // heads), eps), T, C)
        return self.map(lambda n: (["%m = arith.mulf %a0, %a1 : f32",
                                    "%y = arith.addf %m, %a2 : f32"], "%y"),
                        xn, w, b, kinds=["full", "col", "col"])

    def add(self, a, b):
        return self.map(lambda n: (["%y = arith.addf %a0, %a1 : f32"], "%y"), a, b)

    def mul(self, a, b):
        return self.map(lambda n: (["%y = arith.mulf %a0, %a1 : f32"], "%y"), a, b)

    def scale(self, a, s):
        return self.map(lambda n: ([f"%s = arith.constant {_float(s)} : f32",
                                    "%y = arith.mulf %a0, %s : f32"], "%y"), a)

    SILU = ["%one = arith.constant 1.0 : f32",
            "%n = arith.negf %a0 : f32",
            "%e = math.exp %n : f32",
            "%d = arith.addf %one, %e : f32",
            "%s = arith.divf %a0, %d : f32"]

    def silu(self, a):
        return self.map(lambda n: (self.SILU, "%s"), a)

    def silu_mul(self, a, b):
        """silu(a) * b."""
        return self.map(lambda n: (self.SILU + ["%y = arith.mulf %s, %a1 : f32"], "%y"), a, b)

    def softplus_bias(self, x, b):
        """softplus(x + b), b broadcast over the last dimension; linear above
        20 like PyTorch's softplus."""
        return self.map(lambda n: (["%x = arith.addf %a0, %a1 : f32",
                                    "%c = arith.constant 20.0 : f32",
                                    "%big = arith.cmpf ogt, %x, %c : f32",
                                    "%e = math.exp %x : f32",
                                    "%l = math.log1p %e : f32",
                                    "%y = arith.select %big, %x, %l : f32"], "%y"),
                        x, b, kinds=["full", "col"])

    def neg_exp(self, a):
        """-exp(a)."""
        return self.map(lambda n: (["%e = math.exp %a0 : f32",
                                    "%y = arith.negf %e : f32"], "%y"), a)

    def sub(self, a, b):
        return self.map(lambda n: (["%y = arith.subf %a0, %a1 : f32"], "%y"), a, b)

    def neg(self, a):
        return self.map(lambda n: (["%y = arith.negf %a0 : f32"], "%y"), a)

    def mul_col(self, a, c):
        """a * c, c broadcast over the rows of [T, C]."""
        return self.map(lambda n: (["%y = arith.mulf %a0, %a1 : f32"], "%y"),
                        a, c, kinds=["full", "col"])

    SIGMOID = ["%one = arith.constant 1.0 : f32",
               "%n = arith.negf %a0 : f32",
               "%e = math.exp %n : f32",
               "%d = arith.addf %one, %e : f32",
               "%s = arith.divf %one, %d : f32"]

    # tanh(x) = 1 - 2 / (exp(2x) + 1), which saturates to +-1 through inf / 0.
    TANH = ["%one = arith.constant 1.0 : f32",
            "%two = arith.constant 2.0 : f32",
            "%xx = arith.mulf %a0, %two : f32",
            "%e = math.exp %xx : f32",
            "%d = arith.addf %e, %one : f32",
            "%q = arith.divf %two, %d : f32",
            "%t = arith.subf %one, %q : f32"]

    def sigmoid(self, a):
        return self.map(lambda n: (self.SIGMOID, "%s"), a)

    def sigmoid_mul(self, a, b):
        """sigmoid(a) * b."""
        return self.map(lambda n: (self.SIGMOID + ["%y = arith.mulf %s, %a1 : f32"], "%y"), a, b)

    def sigmoid_bias(self, x, b):
        """sigmoid(x + b), b broadcast over the last dimension."""
        return self.map(lambda n: (["%x = arith.addf %a0, %a1 : f32",
                                    "%one = arith.constant 1.0 : f32",
                                    "%n = arith.negf %x : f32",
                                    "%e = math.exp %n : f32",
                                    "%d = arith.addf %one, %e : f32",
                                    "%y = arith.divf %one, %d : f32"], "%y"),
                        x, b, kinds=["full", "col"])

    def tanh(self, a):
        return self.map(lambda n: (self.TANH, "%t"), a)

    def decay_softplus(self, x, b, A_log, per_col=1):
        """-exp(A_log) * softplus(x + b): the log-decay of Mamba-2 / Gated
        DeltaNet / KDA, x [T, C], b [C], A_log [C / per_col] (one per head
        of per_col channels), softplus linear above 20. With per_col > 1,
        A_log is read through a [C] expansion (expand_col())."""
        A = self.expand_col(A_log, per_col) if per_col > 1 else A_log
        return self.map(lambda n: (["%x = arith.addf %a0, %a1 : f32",
                                    "%c = arith.constant 20.0 : f32",
                                    "%big = arith.cmpf ogt, %x, %c : f32",
                                    "%e = math.exp %x : f32",
                                    "%l = math.log1p %e : f32",
                                    "%sp = arith.select %big, %x, %l : f32",
                                    "%ea = math.exp %a2 : f32",
                                    "%m = arith.mulf %ea, %sp : f32",
                                    "%y = arith.negf %m : f32"], "%y"),
                        x, b, A, kinds=["full", "col", "col"])

    def expand_col(self, a, n):
        """[H] -> [H * n], each element repeated n times."""
        H = a.shape[0]
        rep = self.generic([(a, "row")], [H, n], lambda _: ([], "%a0"))
        return self.collapse(rep, [[0, 1]], [H * n])

    def swiglu_ffn(self, x, w_gate, w_up, w_down):
        """(silu(x W_gate) * (x W_up)) W_down."""
        g = self.matmul(x, w_gate)
        u = self.matmul(x, w_up)
        return self.matmul(self.silu_mul(g, u), w_down)

    # -- seq ops ---------------------------------------------------------------

    def op(self, text, operands, results, optional=(), attrs=""):
        """A seq op: `text` is its name, `optional` (keyword, value) groups
        in the op's order, `results` the result shapes."""
        names = [self.fresh("r") for _ in results]
        opnds = ", ".join(str(v) for v in operands)
        groups = "".join(
            f" {kw}({', '.join(str(x) for x in (v if isinstance(v, tuple) else (v,)))})"
            for kw, v in optional if v is not None)
        allv = list(operands)
        for _, v in optional:
            if v is None:
                continue
            allv += list(v) if isinstance(v, tuple) else [v]
        types_in = ", ".join(v.type for v in allv)
        types_out = ", ".join(tensor_type(s, dt) for s, dt in results)
        attr = f" {{{attrs}}}" if attrs else ""
        self.emit(f"{', '.join(names)} = seq.{text} {opnds}{groups}{attr}")
        self.emit(f"    : ({types_in}) -> ({types_out})")
        return [Value(n, s, dt) for n, (s, dt) in zip(names, results)]

    def call(self, fn, args, label=None):
        names = [self.fresh("l") for _ in fn.results]
        attr = f' {{seq.name = "{label}"}}' if label else ""
        self.emit(f"{', '.join(names)} = func.call @{fn.name}({', '.join(str(a) for a in args)}){attr}")
        self.emit(f"    : ({', '.join(a.type for a in args)}) -> "
                  f"({', '.join(r.type for r in fn.results)})")
        return [Value(n, r.shape, r.dtype) for n, r in zip(names, fn.results)]




class Graph:
    """A module of Functions: `function(name)` adds one (public unless
    `private`), `text()` is the MLIR, `compile(**options)` compiles it with
    seqc.compile."""

    def __init__(self):
        self.functions = []

    def function(self, name, private=False):
        fn = Function(name, private=private)
        self.functions.append(fn)
        return fn

    def text(self):
        for fn in self.functions:
            if fn.results is None:
                raise ValueError(f"seqc.graph: @{fn.name} has no ret()")
        return "\n".join(fn.text() for fn in self.functions)

    def compile(self, target="cpu", **options):
        import seqc
        return seqc.compile(self.text(), target, **options)
