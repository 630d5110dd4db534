# Weights bound when compiling (seqc-run --bind-weights, CompileOptions::
# boundWeights): each argument whose seq.name a tensor of the file names
# becomes that tensor, a constant of the module, and the function takes
# only the other arguments; the matmuls then read panels packed when
# compiled. A two-layer MLP (an up projection, SiLU, a down projection
# whose output width is dynamic in the signature) and a SwiGLU moe_ffn
# (whose experts then read their weights' panels packed when compiled),
# with f32 weights from a .npz and bf16 weights from a .safetensors, equal
# float64 numpy and the same graph with the weights passed in each call, on
# every pipeline. A
# file whose tensor names no argument, has another element type or shape,
# or binds a name twice is an error naming it.
# RUN: %python %s
import json
import os
import struct
import tempfile

import numpy as np
from refs import moe_ffn
from seqc_testing import Checker, bf16, f32, rel_rms, rng, run_seqc

c = Checker()
r = rng(12)
M, D, F = 37, 300, 130


def t(shape, e="f32"):
    return f"tensor<{'x'.join('?' if s < 0 else str(s) for s in shape)}x{e}>"


def mlp(e="f32"):
    """y = silu(x W_up) W_down with the weights named; x and y f32."""
    x, up, down = t((M, D)), t((D, F), e), t((F, -1), e)
    y = t((M, -1))
    cast = [f"  %xn = arith.truncf %x : {x} to {t((M, D), e)}"] if e != "f32" else []
    xa = "%xn" if e != "f32" else "%x"
    return "\n".join([
        f'func.func @main(%x: {x}, %up: {up} {{seq.name = "w_up"}}, '
        f'%down: {down} {{seq.name = "w_down"}}) -> {y} {{',
        "  %c1 = arith.constant 1 : index",
        "  %zero = arith.constant 0.0 : f32",
        f"  %n = tensor.dim %down, %c1 : {down}",
        *cast,
        f"  %he = tensor.empty() : {t((M, F))}",
        f"  %hz = linalg.fill ins(%zero : f32) outs(%he : {t((M, F))}) -> {t((M, F))}",
        f"  %h = linalg.matmul ins({xa}, %up : {t((M, D), e)}, {up}) "
        f"outs(%hz : {t((M, F))}) -> {t((M, F))}",
        f"  %s = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, "
        "affine_map<(i, j) -> (i, j)>], iterator_types = [\"parallel\", \"parallel\"]} "
        f"ins(%h : {t((M, F))}) outs(%he : {t((M, F))}) {{",
        "  ^bb0(%a: f32, %o: f32):",
        "    %na = arith.negf %a : f32",
        "    %ex = math.exp %na : f32",
        "    %one = arith.constant 1.0 : f32",
        "    %den = arith.addf %one, %ex : f32",
        "    %sv = arith.divf %a, %den : f32",
        "    linalg.yield %sv : f32",
        f"  }} -> {t((M, F))}",
        *([f"  %sn = arith.truncf %s : {t((M, F))} to {t((M, F), e)}"]
          if e != "f32" else []),
        f"  %ye = tensor.empty(%n) : {y}",
        f"  %yz = linalg.fill ins(%zero : f32) outs(%ye : {y}) -> {y}",
        f"  %y = linalg.matmul ins({'%sn' if e != 'f32' else '%s'}, %down : "
        f"{t((M, F), e)}, {down}) outs(%yz : {y}) -> {y}",
        f"  return %y : {y}", "}", ""])


def reference(x, up, down, e="f32"):
    xr = bf16(x) if e == "bf16" else x
    h = xr.astype(np.float64) @ up.astype(np.float64)
    s = h / (1 + np.exp(-h))
    if e == "bf16":
        s = bf16(f32(s))
    return s.astype(np.float64) @ down.astype(np.float64)


def write_safetensors(path, tensors):
    """bf16 tensors (float32 arrays of bf16 values) as BF16."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        raw = (np.ascontiguousarray(a, "<f4").view("<u4") >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def experts(T, D, F, E, k, e="f32"):
    """A SwiGLU moe_ffn whose expert weights (of element type e) are named;
    x and the routing weights f32 (rounded to e inside)."""
    ws = {"w_up": (E, D, F), "w_down": (E, F, D), "w_gate": (E, D, F)}
    args = [f"%x: {t((T, D))}", f"%w: {t((T, k))}", f"%idx: {t((T, k), 'i32')}"]
    args += [f'%{n}: {t(s, e)} {{seq.name = "{n}"}}' for n, s in ws.items()]
    lines = [f"func.func @main({', '.join(args)}) -> ({t((T, D))}, {t((E,), 'i64')}) {{"]
    xv, wv, y = "%x", "%w", "%y"
    if e != "f32":
        lines += [f"  %xn = arith.truncf %x : {t((T, D))} to {t((T, D), e)}",
                  f"  %wn = arith.truncf %w : {t((T, k))} to {t((T, k), e)}"]
        xv, wv, y = "%xn", "%wn", "%yf"
    lines.append(
        f"  %y, %load = seq.moe_ffn {xv}, {wv}, %idx, %w_up, %w_down "
        f"gate_proj(%w_gate) : ({t((T, D), e)}, {t((T, k), e)}, "
        f"{t((T, k), 'i32')}, {t(ws['w_up'], e)}, {t(ws['w_down'], e)}, "
        f"{t(ws['w_gate'], e)}) -> ({t((T, D), e)}, {t((E,), 'i64')})")
    if e != "f32":
        lines.append(f"  %yf = arith.extf %y : {t((T, D), e)} to {t((T, D))}")
    lines += [f"  return {y}, %load : {t((T, D))}, {t((E,), 'i64')}", "}", ""]
    return "\n".join(lines)


x = f32(r.standard_normal((M, D)))
up = f32(r.standard_normal((D, F)) / np.sqrt(D))
down = f32(r.standard_normal((F, 70)) / np.sqrt(F))

with tempfile.TemporaryDirectory(prefix="seqc-bound-") as tmp:
    npz = os.path.join(tmp, "mlp.npz")
    np.savez(npz, w_up=up, w_down=down)

    def f32_bound():
        (got,) = run_seqc(mlp(), [x], extra=["--bind-weights", npz])
        (passed,) = run_seqc(mlp(), [x, up, down])
        ref = reference(x, up, down)
        c.close("f32 weights bound vs float64", got, ref, 1e-4)
        err = float(np.max(np.abs(got - passed)))
        c.expect(f"f32 weights bound vs passed: max |diff| {err:.1e} <= 1e-5",
                 err <= 1e-5)

    c.run("f32", f32_bound)

    sft = os.path.join(tmp, "mlp.safetensors")
    upb, downb = bf16(up), bf16(down)
    write_safetensors(sft, {"w_up": upb, "w_down": downb})

    def bf16_bound():
        (got,) = run_seqc(mlp("bf16"), [x], extra=["--bind-weights", sft],
                          tol=1e-3)
        ref = reference(x, upb, downb, "bf16")
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        c.expect(f"bf16 weights bound vs float64 on bf16 operands: max error "
                 f"{err:.1e} <= 1e-2 of max |ref|", err <= 1e-2)

    c.run("bf16", bf16_bound)

    T, DE, FE, E, K = 50, 70, 300, 4, 2
    xe = f32(r.standard_normal((T, DE)))
    we = f32(r.uniform(0.1, 1.0, (T, K)))
    idx = np.stack([r.permutation(E)[:K] for _ in range(T)]).astype(np.int32)
    ew = {"w_up": f32(r.standard_normal((E, DE, FE)) / np.sqrt(DE)),
          "w_down": f32(r.standard_normal((E, FE, DE)) / np.sqrt(FE)),
          "w_gate": f32(r.standard_normal((E, DE, FE)) / np.sqrt(DE))}

    def experts_bound(e):
        if e == "f32":
            path = os.path.join(tmp, "experts.npz")
            np.savez(path, **ew)
            weights = ew
        else:
            path = os.path.join(tmp, "experts.safetensors")
            weights = {n: bf16(a) for n, a in ew.items()}
            write_safetensors(path, weights)
        mlir = experts(T, DE, FE, E, K, e)
        # bf16: the pipelines round the hidden activations at different
        # points (bf16_products.py's tolerance).
        got, load = run_seqc(mlir, [xe, we, idx],
                             extra=["--bind-weights", path],
                             tol=1e-4 if e == "f32" else 2e-2)
        xr, wr = (xe, we) if e == "f32" else (bf16(xe), bf16(we))
        ry, rload = moe_ffn(xr, wr, idx, weights["w_up"], weights["w_down"],
                            weights["w_gate"])
        if e == "f32":
            err = float(np.max(np.abs(got - ry)) / np.max(np.abs(ry)))
            c.expect(f"moe_ffn f32 weights bound vs float64: max error "
                     f"{err:.1e} <= 1e-5 of max |ref|", err <= 1e-5)
        else:  # the hidden activations are rounded to bf16 (SPEC 4)
            err = rel_rms(got, ry)
            c.expect(f"moe_ffn bf16 weights bound vs float64: relative RMS "
                     f"{err:.1e} <= 1e-2", err <= 1e-2)
        c.expect(f"moe_ffn {e} load", np.array_equal(load, rload))
        if e == "f32":
            passed, _ = run_seqc(mlir, [xe, we, idx, ew["w_up"], ew["w_down"],
                                        ew["w_gate"]])
            diff = float(np.max(np.abs(got - passed)))
            c.expect(f"moe_ffn f32 weights bound vs passed: max |diff| "
                     f"{diff:.1e} <= 1e-5", diff <= 1e-5)

    c.run("moe_ffn f32", lambda: experts_bound("f32"))
    c.run("moe_ffn bf16", lambda: experts_bound("bf16"))

    def error(name, arrays, want, ext="npz"):
        path = os.path.join(tmp, f"{name}.npz")
        np.savez(path, **arrays)
        extra = ["--bind-weights", path]
        if ext == "twice":
            extra += ["--bind-weights", path]
        msg = run_seqc(mlp(), [x], extra=extra, expect_error=True)
        c.expect(f"{name}: '{msg}' says '{want}'", want in msg)

    c.run("unknown name", lambda: error(
        "unknown", {"w_upp": up},
        "bound weight 'w_upp' names no argument of a public function"))
    c.run("element type", lambda: error(
        "dtype", {"w_up": up.astype(np.float16)},
        "bound weight 'w_up' is f16 [300, 130] but argument 1 of @main is "
        "tensor<300x130xf32>"))
    c.run("shape", lambda: error(
        "shape", {"w_down": f32(np.zeros((F + 1, 70)))},
        "bound weight 'w_down' is f32 [131, 70] but argument 2 of @main is "
        "tensor<130x?xf32>"))
    c.run("twice", lambda: error(
        "twice", {"w_up": up}, "bound weight 'w_up' is given twice", "twice"))

c.finish()
