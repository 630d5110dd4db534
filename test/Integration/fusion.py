# Elementwise glue written as linalg.generic around seq ops (softplus(dt +
# bias) before SSD, y * silu(z) after it, silu after a conv, elu + 1 on q and
# k) gives the same results when the fast pipeline folds it into the ops as
# when the reference pipeline computes it separately, and as numpy.
# RUN: %python %s %seqc_src/test/Passes/fuse-elementwise.mlir
import re
import sys

import numpy as np
from refs import causal_conv1d, linear_attention, silu, softplus, ssd
from seqc_testing import Checker, f32, rng, run_seqc

c = Checker()
source = open(sys.argv[1]).read()
source = "\n".join(l for l in source.splitlines() if not l.startswith("//"))


def only(name):
    """The file with @name renamed to @main (the other functions stay)."""
    return re.sub(rf"@{name}\b", "@main", source)


r = rng(0)


def ssd_glue():
    x = f32(r.standard_normal((1, 8, 2, 4)))
    dt = f32(r.standard_normal((1, 8, 2)))
    A = f32(-np.exp(r.uniform(-1, 1, 2)))
    bias = f32(r.uniform(-1, 1, 2))
    B = f32(r.standard_normal((1, 8, 1, 3)))
    z = f32(r.standard_normal((1, 8, 2, 4)))
    (y,) = run_seqc(only("ssd_glue"), [x, dt, A, bias, B, z])
    ref, _ = ssd(x, dt, A, B, B, None, z, bias, None, True)
    c.close("softplus(dt + bias) -> ssd -> y * silu(z)", y, ref)


def conv_silu():
    x = f32(r.standard_normal((1, 8, 6)))
    w = f32(r.standard_normal((6, 4)))
    (y,) = run_seqc(only("conv_silu"), [x, w])
    ref, _ = causal_conv1d(x, w, None, None, "silu")
    c.close("causal_conv1d -> silu", y, ref)


def feature_map():
    q = f32(r.standard_normal((1, 4, 2, 3)))
    k = f32(r.standard_normal((1, 4, 2, 3)))
    v = f32(r.standard_normal((1, 4, 2, 5)))
    (o,) = run_seqc(only("feature_map"), [q, k, v])
    ref, _ = linear_attention(q, k, v, feature="elu_plus_one")
    c.close("elu+1 on q, k -> linear_attention", o, ref)


c.run("ssd glue", ssd_glue)
c.run("conv silu", conv_silu)
c.run("feature map", feature_map)
c.finish()
