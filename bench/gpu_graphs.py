"""Graphs of bench/gpu.sh: one seq op on bf16 operands with f32 states.

seqc-run's .npy inputs are f32, so a graph takes f32 arguments, narrows the
bf16 ones inside (arith.truncf on tensors becomes a kernel of its own) and
widens bf16 results back. `ins` / `outs` are lists of (shape, is_bf16).
"""


def tensor(shape, elt="f32"):
    return "tensor<" + "x".join(str(d) for d in shape) + "x" + elt + ">"


def graph(op, ins, outs, attrs=""):
    args = ", ".join(f"%a{i}: {tensor(s)}" for i, (s, _) in enumerate(ins))
    body, operands = [], []
    for i, (s, bf16) in enumerate(ins):
        if bf16:
            body.append(f"  %b{i} = arith.truncf %a{i} : {tensor(s)} to {tensor(s, 'bf16')}")
            operands.append((f"%b{i}", tensor(s, "bf16")))
        else:
            operands.append((f"%a{i}", tensor(s)))
    out_types = [tensor(s, "bf16" if bf16 else "f32") for s, bf16 in outs]
    attr = f" {{{attrs}}}" if attrs else ""
    body.append(f"  %r:{len(outs)} = seq.{op} {', '.join(v for v, _ in operands)}{attr} : "
                f"({', '.join(t for _, t in operands)}) -> ({', '.join(out_types)})")
    results = []
    for i, (s, bf16) in enumerate(outs):
        if bf16:
            body.append(f"  %f{i} = arith.extf %r#{i} : {tensor(s, 'bf16')} to {tensor(s)}")
            results.append(f"%f{i}")
        else:
            results.append(f"%r#{i}")
    types = ", ".join(tensor(s) for s, _ in outs)
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
