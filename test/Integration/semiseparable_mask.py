# seq.semiseparable_mask: segment sums against float64, leading batch dims,
# T = 1, and the accuracy case of SPEC 2.5 (4096 steps of -0.5, where a
# difference of two long prefix sums would lose every digit near the diagonal).
# RUN: %python %s
import numpy as np
from refs import semiseparable_mask
from seqc_testing import Checker, f32, func, mlir_type, rng, run_seqc, seq_op, type_of

c = Checker()


def case(shape, seed=0, values=None, dynamic=False):
    la = f32(rng(seed).uniform(-1.0, 0.0, shape)) if values is None else values
    tin = mlir_type([-1] * len(shape)) if dynamic else type_of(la)
    tout = mlir_type([-1] * (len(shape) + 1)) if dynamic else mlir_type(list(shape) + [shape[-1]])
    mlir = func([("la", tin)], [seq_op("L", "semiseparable_mask", ["%la"], [], "", [tin], [tout])],
                [("%L", tout)])
    (L,) = run_seqc(mlir, [la])
    return la, L


def compare(shape, seed=0, dynamic=False):
    la, L = case(shape, seed, dynamic=dynamic)
    c.close(f"mask shape={shape} dynamic={dynamic}", L, semiseparable_mask(la))


def long_sequence():
    T = 4096
    la = f32(np.full((T,), -0.5))
    _, L = case((T,), values=la)
    i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    ref = np.where(i >= j, np.exp(-0.5 * (i - j)), 0.0)
    # Relative accuracy where the value is representable (i - j <= 150).
    band = (i >= j) & (i - j <= 150)
    rel = np.max(np.abs(L[band] - ref[band]) / ref[band])
    c.expect("long: relative error near the diagonal", rel < 1e-4, f"(max {rel:.3g})")
    c.close("long: whole mask", L, ref)
    c.expect("long: upper triangle is exactly 0", np.all(L[i < j] == 0.0))


c.run("basic", lambda: compare((2, 16)))
c.run("batch dims", lambda: compare((2, 3, 9), seed=1))
c.run("T=1", lambda: compare((4, 1), seed=2))
c.run("rank 1", lambda: compare((13,), seed=3))
c.run("dynamic", lambda: compare((3, 11), seed=4, dynamic=True))
c.run("long", long_sequence)
c.finish()
