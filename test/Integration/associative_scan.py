# seq.associative_scan with user combiners (the affine pair of a linear
# recurrence, a running max of integers, logaddexp) along several dims, in
# reverse, against numpy.
# RUN: %python %s
import numpy as np
from refs import associative_scan, linear_scan
from seqc_testing import Checker, f32, rng, run_seqc, type_of

c = Checker()

AFFINE = """
  ^bb0(%a1: f32, %b1: f32, %a2: f32, %b2: f32):
    %a = arith.mulf %a1, %a2 : f32
    %t = arith.mulf %a2, %b1 : f32
    %b = arith.addf %t, %b2 : f32
    seq.yield %a, %b : f32, f32
"""
MAXI = """
  ^bb0(%p: i32, %n: i32):
    %m = arith.maxsi %p, %n : i32
    seq.yield %m : i32
"""
LOGADDEXP = """
  ^bb0(%p: f32, %n: f32):
    %m = arith.maximumf %p, %n : f32
    %d1 = arith.subf %p, %m : f32
    %d2 = arith.subf %n, %m : f32
    %e1 = math.exp %d1 : f32
    %e2 = math.exp %d2 : f32
    %s = arith.addf %e1, %e2 : f32
    %l = math.log %s : f32
    %r = arith.addf %m, %l : f32
    seq.yield %r : f32
"""


def graph(inputs, body, dim, reverse):
    tys = [type_of(x) for x in inputs]
    args = ", ".join(f"%x{i}: {t}" for i, t in enumerate(tys))
    names = ", ".join(f"%x{i}" for i in range(len(inputs)))
    n = len(inputs)
    lhs = f"%r:{n}" if n > 1 else "%r"
    attrs = f"dim = {dim} : i64" + (", reverse = true" if reverse else "")
    rets = ", ".join(f"%r#{i}" for i in range(n)) if n > 1 else "%r"
    return (f"func.func @main({args}) -> ({', '.join(tys)}) {{\n"
            f"  {lhs} = seq.associative_scan {names} {{{attrs}}} : ({', '.join(tys)}) -> ({', '.join(tys)}) {{{body}  }}\n"
            f"  return {rets} : {', '.join(tys)}\n}}\n")


def affine(shape, dim=1, reverse=False, seed=0):
    r = rng(seed)
    a = f32(r.uniform(0.5, 1.0, shape))
    b = f32(r.standard_normal(shape))
    ga, gb = run_seqc(graph([a, b], AFFINE, dim, reverse), [a, b])
    ra, rb = associative_scan([a, b], lambda a1, b1, a2, b2: (a1 * a2, a2 * b1 + b2), dim, reverse)
    tag = f"affine shape={shape} dim={dim} reverse={reverse}"
    c.close(tag + " a", ga, ra)
    c.close(tag + " b", gb, rb)
    if dim == 1 and not reverse:  # the affine scan is the linear scan
        c.close(tag + " = linear_scan", gb, linear_scan(a, b)[0])


def running_max(shape, dim, reverse=False, seed=0):
    x = rng(seed).integers(-1000, 1000, shape).astype(np.int32)
    (got,) = run_seqc(graph([x], MAXI, dim, reverse), [x])
    (ref,) = associative_scan([x], np.maximum, dim, reverse)
    c.equal(f"max shape={shape} dim={dim} reverse={reverse}", got, ref.astype(np.int32))


def logaddexp(shape, dim, seed=0):
    x = f32(rng(seed).standard_normal(shape) * 3)
    (got,) = run_seqc(graph([x], LOGADDEXP, dim, False), [x])
    (ref,) = associative_scan([x], np.logaddexp, dim)
    c.close(f"logaddexp shape={shape} dim={dim}", got, ref)


CAPTURING = """
func.func @main(%x: tensor<2x50x3xf32>, %w: tensor<1xf32>) -> tensor<2x50x3xf32> {
  %c0 = arith.constant 0 : index
  %s = tensor.extract %w[%c0] : tensor<1xf32>
  %half = arith.constant 0.5 : f32
  %r = seq.associative_scan %x {dim = 1 : i64} : (tensor<2x50x3xf32>) -> (tensor<2x50x3xf32>) {
  ^bb0(%p: f32, %n: f32):
    %m = arith.mulf %p, %s : f32
    %h = arith.mulf %m, %half : f32
    %a = arith.addf %h, %n : f32
    seq.yield %a : f32
  }
  return %r : tensor<2x50x3xf32>
}
"""


def capturing(seed=8):
    """A combiner using values from outside its region (a function value and
    a constant): the GPU kernel (emulated in its own function) must carry
    them."""
    x = f32(rng(seed).standard_normal((2, 50, 3)))
    w = f32([0.9])
    (got,) = run_seqc(CAPTURING, [x, w])
    (ref,) = associative_scan([x], lambda p, n: p * 0.9 * 0.5 + n, 1)
    c.close("combiner capturing outer values", got, ref)


c.run("affine", lambda: affine((2, 33, 5)))
c.run("combiner capturing outer values", capturing)
c.run("affine reverse", lambda: affine((3, 17, 2), reverse=True, seed=1))
c.run("affine dim 0", lambda: affine((9, 4), dim=0, seed=2))
c.run("affine T=1", lambda: affine((2, 1, 3), seed=3))
c.run("max dim 2", lambda: running_max((3, 5, 7), 2, seed=4))
c.run("max reverse dim 0", lambda: running_max((11, 3), 0, reverse=True, seed=5))
c.run("logaddexp", lambda: logaddexp((4, 50), 1, seed=6))
c.run("logaddexp rank 1", lambda: logaddexp((31,), 0, seed=7))
c.finish()
