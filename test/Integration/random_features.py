# seq.random_features (Performer FAVOR+): positive and trigonometric kinds
# against float64, on several leading shapes; and the positive features fed to
# linear attention approximate softmax attention's unnormalized kernel.
# RUN: %python %s
import numpy as np
from refs import random_features
from seqc_testing import Checker, f32, func, mlir_type, rng, run_seqc, seq_op, type_of

c = Checker()


def case(xshape, M, kind, seed=0):
    r = rng(seed)
    K = xshape[-1]
    x = f32(r.standard_normal(xshape) * 0.4)
    omega = f32(r.standard_normal((K, M)))
    width = M if kind == "positive" else 2 * M
    tout = mlir_type(list(xshape[:-1]) + [width])
    line = seq_op("phi", "random_features", ["%x", "%w"], [],
                  f"kind = #seq.random_features<{kind}>", [type_of(x), type_of(omega)], [tout])
    (phi,) = run_seqc(func([("x", type_of(x)), ("w", type_of(omega))], [line], [("%phi", tout)]),
                      [x, omega])
    c.close(f"{kind} x={xshape} M={M}", phi, random_features(x, omega, kind))


def kernel_approximation(seed=9):
    """E[phi(q) . phi(k)] = exp(q . k): with many features the estimate is close."""
    r = rng(seed)
    K, M = 4, 4096
    q = f32(r.standard_normal((1, 3, 1, K)) * 0.3)
    k = f32(r.standard_normal((1, 3, 1, K)) * 0.3)
    omega = f32(r.standard_normal((K, M)))
    tq = type_of(q)
    tf = mlir_type([1, 3, 1, M])
    body = [seq_op("a", "random_features", ["%q", "%w"], [], "", [tq, type_of(omega)], [tf]),
            seq_op("b", "random_features", ["%k", "%w"], [], "", [tq, type_of(omega)], [tf])]
    pa, pb = run_seqc(func([("q", tq), ("k", tq), ("w", type_of(omega))], body,
                           [("%a", tf), ("%b", tf)]), [q, k, omega])
    est = np.einsum("m,m->", pa[0, 0, 0].astype(np.float64), pb[0, 0, 0].astype(np.float64))
    exact = np.exp(q[0, 0, 0].astype(np.float64) @ k[0, 0, 0].astype(np.float64))
    c.expect("FAVOR+ estimates exp(q.k)", abs(est - exact) < 0.1 * exact,
             f"(estimate {est:.4f}, exact {exact:.4f})")


c.run("positive", lambda: case((2, 7, 3, 8), 16, "positive"))
c.run("trigonometric", lambda: case((2, 7, 3, 8), 16, "trigonometric", seed=1))
c.run("rank 1", lambda: case((5,), 3, "positive", seed=2))
c.run("odd", lambda: case((3, 11, 6), 9, "trigonometric", seed=3))
c.run("kernel", kernel_approximation)
c.finish()
