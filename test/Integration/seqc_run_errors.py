# Every bad input of SPEC section 3 makes seqc-run print exactly one
# `error: ...` line naming the problem, exit with status 1, and write no output
# file. Covers the command line, the IR, the .npy files, argument count, type
# and shape, run-time shape checks of dynamic dimensions, and --target cuda.
# RUN: %python %s
import os
import subprocess
import tempfile

import numpy as np
from seqc_testing import SEQC_RUN, Checker, error_lines, f32

c = Checker()
tmp = tempfile.mkdtemp(prefix="seqc-errors-")

SSD = """func.func @main(%x: tensor<?x?x?x?xf32>, %dt: tensor<?x?x?xf32>, %A: tensor<?xf32>,
                %B: tensor<?x?x?x?xf32>, %C: tensor<?x?x?x?xf32>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %y, %l = seq.ssd %x, %dt, %A, %B, %C
    : (tensor<?x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
      -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
  return %y, %l : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
}
"""
STATIC = """func.func @main(%a: tensor<2x8x4xf32>, %b: tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x4xf32>) {
  %h, %l = seq.linear_scan %a, %b : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x4xf32>)
  return %h, %l : tensor<2x8x4xf32>, tensor<2x4xf32>
}
func.func @other(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
"""
CAST = """func.func @main(%a: tensor<?x4xf32>) -> tensor<3x4xf32> {
  %c = tensor.cast %a : tensor<?x4xf32> to tensor<3x4xf32>
  return %c : tensor<3x4xf32>
}
"""


def write(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def npy(name, array):
    path = os.path.join(tmp, name)
    np.save(path, array)
    return path


def raw(name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def expect_error(name, args, fragment):
    out = os.path.join(tmp, "out-" + name.replace(" ", "_"))
    if "--output-dir" not in args:
        args = args + ["--output-dir", out]
    proc = subprocess.run([SEQC_RUN] + args, capture_output=True, text=True)
    # Remarks (an op taking the reference lowering) and the notice of a
    # compilation that takes over a second may precede the error.
    lines = error_lines(proc.stderr.strip()).splitlines()
    ok = (proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ")
          and fragment in lines[0] and not os.path.exists(out))
    c.expect(name, ok, f"(status {proc.returncode}, stderr {proc.stderr.strip()!r})")


ssd = write("ssd.mlir", SSD)
static = write("static.mlir", STATIC)
cast = write("cast.mlir", CAST)
a = npy("a.npy", f32(np.ones((2, 8, 4))))


def ssd_inputs(T_dt=8, G=1, H=4, A_len=None):
    r = np.random.default_rng(0)
    return [npy("x.npy", f32(r.standard_normal((1, 8, H, 2)))),
            npy("dt.npy", f32(np.ones((1, T_dt, H)) * 0.1)),
            npy("A.npy", f32(-np.ones(A_len or H))),
            npy("B.npy", f32(r.standard_normal((1, 8, G, 3)))),
            npy("C.npy", f32(r.standard_normal((1, 8, G, 3))))]


def inputs(paths):
    return sum([["--input", p] for p in paths], [])


# The command line.
expect_error("no file", [], "no input file")
expect_error("missing file", [os.path.join(tmp, "nope.mlir")], "cannot read")
expect_error("unknown option", [static, "--frobnicate"], "unknown option '--frobnicate'")
expect_error("bad target", [static, "--target", "tpu"], "unknown target 'tpu'")
expect_error("bench 0", [static, "--bench", "0"], "--bench needs a positive number")
expect_error("bad seed", [static, "--random-inputs", "--seed", "x"], "--seed needs")
expect_error("random and input", [static, "--random-inputs", "--input", a], "cannot be combined")
# The IR.
expect_error("unparsable IR", [write("bad.mlir", "func.func @main( {")], "bad.mlir:1:")
expect_error("invalid IR",
             [write("invalid.mlir", STATIC.replace("tensor<2x8x4xf32>, tensor<2x4xf32>)\n  return",
                                                   "tensor<2x7x4xf32>, tensor<2x4xf32>)\n  return"))],
             "")
expect_error("unknown function", [static, "-e", "nope"], "no public function @nope")
# Arguments.
expect_error("too few inputs", [static, "--input", a],
             "argument 1 of @main ('arg1', tensor<2x8x4xf32>) is not bound: 1 --input file binds "
             "the arguments before it (@main takes 2 arguments)")
expect_error("too many inputs", [static, "--input", a, "--input", a, "--input", a],
             "@main has 2 arguments but 3 --input files were given")
expect_error("wrong dtype", [static] + inputs([a, npy("i.npy", np.ones((2, 8, 4), np.int32))]),
             "argument 1 (arg1) must have element type f32 but has i32")
expect_error("wrong rank", [static] + inputs([a, npy("r.npy", f32(np.ones((2, 8))))]),
             "argument 1 (arg1) must have rank 3")
expect_error("wrong shape", [static] + inputs([a, npy("s.npy", f32(np.ones((2, 9, 4))))]),
             "argument 1 (arg1) must be tensor<2x8x4xf32> but dimension 1 is 9")
# Weights: a tensor missing from the files names the argument and the files.
WEIGHTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tools", "Inputs",
                       "weights.mlir")
npz = os.path.join(tmp, "proj.npz")
np.savez(npz, **{"proj.w": f32(np.ones((4, 3)))})
x24 = npy("x24.npy", f32(np.ones((2, 4))))
expect_error("weight missing from .npz", [WEIGHTS, "--weights", npz, "--input", x24],
             "argument 2 of @main ('proj.b', tensor<3xf32>) is in none of the --weights files ('"
             + npz + "') and 1 --input file binds the arguments before it")
expect_error(".npy given to --weights", [WEIGHTS, "--weights", x24],
             "is a .npy file (one unnamed array), not a file of named tensors")
expect_error("bad --dynamic-size", [ssd, "--random-inputs", "--dynamic-size", "x"],
             "--dynamic-size needs a non-negative size")
expect_error("bad --threads", [static, "--random-inputs", "--threads", "0"],
             "--threads needs a number of threads")
expect_error("bad --memory-limit", [static, "--random-inputs", "--memory-limit", "12Q"],
             "--memory-limit needs a positive size")
expect_error("--memory-limit exceeded", [static, "--random-inputs", "--memory-limit", "64"],
             "memory")
# .npy files.
expect_error("npy missing", [static, "--input", os.path.join(tmp, "none.npy"), "--input", a],
             "cannot open")
expect_error("npy bad magic", [static, "--input", raw("m.npy", b"hello world"), "--input", a],
             "not a .npy file")
header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 8, 4), }".ljust(117) + b"\n"
good = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header
expect_error("npy truncated", [static, "--input", raw("t.npy", good + b"\0" * 10), "--input", a],
             "expected 256 bytes of data")
expect_error("npy big endian", [static, "--input", raw("be.npy", good.replace(b"<f4", b">f4")),
                                "--input", a], "unsupported element type '>f4'")
expect_error("npy fortran", [static, "--input",
                             raw("fo.npy", good.replace(b"False", b"True ") + b"\0" * 256),
                             "--input", a], "Fortran-order")
expect_error("npy f64", [static, "--input", npy("f8.npy", np.ones((2, 8, 4))), "--input", a],
             "unsupported element type '<f8'")
expect_error("npy bad header", [static, "--input", raw("h.npy", good.replace(b"'shape'", b"'shap' ")),
                                "--input", a], "malformed .npy header")
expect_error("npy version", [static, "--input", raw("v.npy", good.replace(b"\x01\x00", b"\x09\x00", 1)),
                             "--input", a], "unsupported .npy version")
# Run-time checks of dynamic dimensions (the verifier cannot see them).
expect_error("dynamic T mismatch", [ssd] + inputs(ssd_inputs(T_dt=9)),
             "seq.ssd at " + ssd + ":3:12: dimension 1 (T) of dt is 9 but x has 8")
expect_error("dynamic H % G", [ssd] + inputs(ssd_inputs(G=3, H=4)),
             "H = 4 is not a multiple of G = 3")
expect_error("dynamic A length", [ssd] + inputs(ssd_inputs(A_len=5)),
             "dimension 0 (H) of A is 5 but x has 4")
expect_error("tensor.cast of a dynamic size", [cast, "--input", npy("c.npy", f32(np.ones((5, 4))))],
             "tensor.cast at " + cast + ":2:8: size mismatch of dim 0")
MATMUL = """func.func @main(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""
matmul = write("matmul.mlir", MATMUL)
expect_error("linalg.matmul with mismatched dynamic sizes",
             [matmul, "--input", npy("ma.npy", f32(np.ones((3, 4)))), "--input",
              npy("mb.npy", f32(np.ones((5, 2))))], "linalg.matmul at " + matmul + ":9:")

# No device.
if not os.path.exists("/dev/nvidia0"):
    expect_error("no CUDA device", [static, "--random-inputs", "--target", "cuda"], "no CUDA device")

# The output directory is a file.
expect_error("output dir is a file", [static, "--random-inputs", "--output-dir", a], "is not a directory")

# Dynamic shapes run with --random-inputs (--dynamic-size, default 32).
proc = subprocess.run([SEQC_RUN, ssd, "--random-inputs", "--dynamic-size", "5", "--print"],
                      capture_output=True, text=True)
c.expect("--random-inputs with dynamic shapes", proc.returncode == 0 and
         "tensor<5x5x5x5xf32>" in proc.stdout, proc.stderr)
c.finish()
