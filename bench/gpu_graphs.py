"""Graphs of bench/gpu.sh: one seq op on bf16 operands with f32 states.

`ins` / `outs` are lists of (shape, is_bf16). Three forms (`form`):
  "f32"      everything f32 (the device tests' f32 graphs);
  "narrowed" f32 arguments narrowed to bf16 inside and bf16 results widened
             back (for seqc-run, whose .npy files have no bf16);
  "bf16"     bf16 arguments and results as they are (seqc-aot-run makes bf16
             inputs itself): the op alone, for timing.
"""

FORM = "narrowed"  # the default form; set by callers


def tensor(shape, elt="f32"):
    return "tensor<" + "x".join(str(d) for d in shape) + "x" + elt + ">"


def graph(op, ins, outs, attrs="", keywords=None, form=None):
    """`keywords` maps an operand position to its optional group's keyword
    (decay, init, ...): those operands are printed as `kw(%v)`."""
    form = form or FORM
    keywords = keywords or {}
    if form == "f32":
        ins = [(s, False) for s, _ in ins]
        outs = [(s, False) for s, _ in outs]
    direct = form == "bf16"
    elt = lambda bf16: "bf16" if bf16 and direct else "f32"
    args = ", ".join(f"%a{i}: {tensor(s, elt(bf))}" for i, (s, bf) in enumerate(ins))
    body, operands = [], []
    for i, (s, bf16) in enumerate(ins):
        if bf16 and direct:
            operands.append((f"%a{i}", tensor(s, "bf16")))
        elif bf16:
            body.append(f"  %b{i} = arith.truncf %a{i} : {tensor(s)} to {tensor(s, 'bf16')}")
            operands.append((f"%b{i}", tensor(s, "bf16")))
        else:
            operands.append((f"%a{i}", tensor(s)))
    out_types = [tensor(s, "bf16" if bf16 else "f32") for s, bf16 in outs]
    attr = f" {{{attrs}}}" if attrs else ""
    plain = ", ".join(v for i, (v, _) in enumerate(operands) if i not in keywords)
    groups = "".join(f" {keywords[i]}({v})" for i, (v, _) in enumerate(operands)
                     if i in keywords)
    body.append(f"  %r:{len(outs)} = seq.{op} {plain}{groups}{attr} : "
                f"({', '.join(t for _, t in operands)}) -> ({', '.join(out_types)})")
    results = []
    for i, (s, bf16) in enumerate(outs):
        if bf16 and direct:
            results.append(f"%r#{i}")
        elif bf16:
            body.append(f"  %f{i} = arith.extf %r#{i} : {tensor(s, 'bf16')} to {tensor(s)}")
            results.append(f"%f{i}")
        else:
            results.append(f"%r#{i}")
    types = ", ".join(tensor(s, elt(bf)) for s, bf in outs)
    return (f"func.func @main({args}) -> ({types}) {{\n" + "\n".join(body) +
            f"\n  return {', '.join(results)} : {types}\n}}\n")


def linear_scan(B, T, D):
    return graph("linear_scan", [((B, T, D), True), ((B, T, D), True)],
                 [((B, T, D), True), ((B, D), False)])


def selective_scan(B, T, D, N):
    return graph("selective_scan",
                 [((B, T, D), True), ((B, T, D), True), ((D, N), False),
                  ((B, T, 1, N), True), ((B, T, 1, N), True)],
                 [((B, T, D), True), ((B, D, N), False)], "delta_softplus = true")


def ssd(B, T, H, P, N):
    return graph("ssd",
                 [((B, T, H, P), True), ((B, T, H), True), ((H,), False),
                  ((B, T, 1, N), True), ((B, T, 1, N), True)],
                 [((B, T, H, P), True), ((B, H, P, N), False)], "dt_softplus = true")


def attention(B, T, H, K, V, causal=True):
    return graph("attention",
                 [((B, T, H, K), True), ((B, T, H, K), True), ((B, T, H, V), True)],
                 [((B, T, H, V), True)], f"causal = {str(causal).lower()}")


def linear_attention(B, T, H, K, V):
    """Gated (data-dependent scalar decay per step and head, as Mamba-2 /
    simple GLA)."""
    return graph("linear_attention",
                 [((B, T, H, K), True), ((B, T, H, K), True), ((B, T, H, V), True),
                  ((B, T, H), True)],
                 [((B, T, H, V), True), ((B, H, K, V), False)], keywords={3: "decay"})


def delta_rule(B, T, H, HV, K, V):
    """Gated DeltaNet: L2-normed q and k (H heads) for HV value heads, a
    write strength and a log decay per step and value head."""
    return graph("delta_rule",
                 [((B, T, H, K), True), ((B, T, H, K), True), ((B, T, HV, V), True),
                  ((B, T, HV), True), ((B, T, HV), True)],
                 [((B, T, HV, V), True), ((B, HV, K, V), False)],
                 f"qk_l2norm = true, scale = {K ** -0.5} : f32", keywords={4: "decay"})


def generalized_delta_rule(B, T, H, K, V):
    """RWKV-7's DPLR transition with a per-key log decay."""
    return graph("generalized_delta_rule",
                 [((B, T, H, K), True)] * 2 + [((B, T, H, V), True)] +
                 [((B, T, H, K), True)] * 3,
                 [((B, T, H, V), True), ((B, H, K, V), False)], keywords={5: "decay"})


def matmul(M, K, N, form=None):
    """linalg.matmul of bf16 operands (tensor cores) into an f32 result."""
    form = form or FORM
    elt = "f32" if form in ("f32", "narrowed") else "bf16"
    op = "f32" if form == "f32" else "bf16"
    ta, tb, tc = tensor((M, K), elt), tensor((K, N), elt), tensor((M, N))
    lines = []
    a, b = "%a", "%b"
    if elt != op:
        lines += [f"  %an = arith.truncf %a : {ta} to {tensor((M, K), op)}",
                  f"  %bn = arith.truncf %b : {tb} to {tensor((K, N), op)}"]
        a, b = "%an", "%bn"
    lines += [f"  %e = tensor.empty() : {tc}",
              "  %z = arith.constant 0.0 : f32",
              f"  %c = linalg.fill ins(%z : f32) outs(%e : {tc}) -> {tc}",
              f"  %r = linalg.matmul ins({a}, {b} : {tensor((M, K), op)}, "
              f"{tensor((K, N), op)}) outs(%c : {tc}) -> {tc}"]
    return (f"func.func @main(%a: {ta}, %b: {tb}) -> {tc} {{\n" + "\n".join(lines) +
            f"\n  return %r : {tc}\n}}\n")


def moe_ffn(T, D, F, E, k, form=None, capacity_factor=0.0):
    """SwiGLU experts; the expert indices are an i32 argument."""
    form = form or FORM
    nb = form != "f32"             # bf16 operands?
    direct = form == "bf16"
    def ty(shape, bf=True):
        return tensor(shape, "bf16" if (bf and nb and direct) else "f32")
    def op_ty(shape, bf=True):
        return tensor(shape, "bf16" if (bf and nb) else "f32")
    names = [("x", (T, D)), ("w", (T, k)), ("up", (E, D, F)), ("down", (E, F, D)),
             ("gate", (E, D, F))]
    args = ", ".join([f"%{n}: {ty(s)}" for n, s in names[:2]] +
                     [f"%idx: {tensor((T, k), 'i32')}"] +
                     [f"%{n}: {ty(s)}" for n, s in names[2:]])
    lines, v = [], {}
    for n, s in names:
        if nb and not direct:
            lines.append(f"  %{n}b = arith.truncf %{n} : {tensor(s)} to {tensor(s, 'bf16')}")
            v[n] = f"%{n}b"
        else:
            v[n] = f"%{n}"
    lines.append(f"  %y, %load = seq.moe_ffn {v['x']}, {v['w']}, %idx, {v['up']}, {v['down']} "
                 f"gate_proj({v['gate']})" +
                 (f" {{capacity_factor = {capacity_factor} : f32}}" if capacity_factor else "") +
                 f" : ({op_ty((T, D))}, {op_ty((T, k))}, "
                 f"{tensor((T, k), 'i32')}, {op_ty((E, D, F))}, {op_ty((E, F, D))}, "
                 f"{op_ty((E, D, F))}) -> ({op_ty((T, D))}, {tensor((E,), 'i64')})")
    y = "%y"
    if nb and not direct:
        lines.append(f"  %yf = arith.extf %y : {tensor((T, D), 'bf16')} to {tensor((T, D))}")
        y = "%yf"
    return (f"func.func @main({args}) -> ({ty((T, D))}, {tensor((E,), 'i64')}) {{\n" +
            "\n".join(lines) +
            f"\n  return {y}, %load : {ty((T, D))}, {tensor((E,), 'i64')}\n}}\n")
