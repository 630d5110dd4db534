#!/usr/bin/env python3
"""Fits the CPU kernels' exp polynomial (KernelBuilder::expPolynomial):
e^r ~ 1 + r + r^2 q(r) on [-ln2/2, ln2/2], q of degree 3 chosen by the
Remez exchange for the least maximum relative error, then measures the
error of the f32 Horner evaluation with FMAs (each step rounded once).
Prints q's coefficients (highest first) and both errors, next to the
degree-6 Taylor polynomial's.  Usage: scripts/fit-exp-polynomial.py"""
import numpy as np

HALF_LN2 = np.log(2) / 2
DEGREE = 3  # of q
GRID = np.linspace(-HALF_LN2, HALF_LN2, 400001)


def relative_error(coefs, r):
    """(p(r) - e^r) / e^r for q's coefficients c2.. (lowest first)."""
    p = 1 + r + sum(c * r ** (2 + k) for k, c in enumerate(coefs))
    return (p - np.exp(r)) / np.exp(r)


def remez():
    n = DEGREE + 2  # coefficients and the levelled error
    x = HALF_LN2 * np.cos(np.pi * np.arange(n)[::-1] / (n - 1))
    for _ in range(40):
        a = np.zeros((n, n))
        for i in range(n):
            a[i, :n - 1] = x[i] ** (2 + np.arange(n - 1))
            a[i, n - 1] = -((-1) ** i) * np.exp(x[i])
        coefs = np.linalg.solve(a, np.exp(x) - 1 - x)[:n - 1]
        err = relative_error(coefs, GRID)
        # One extremum per run of equal sign: the next reference points.
        edges = np.flatnonzero(np.diff(np.sign(err))) + 1
        runs = np.split(np.arange(len(GRID)), edges)
        ext = [run[np.argmax(np.abs(err[run]))] for run in runs]
        # More runs than points: keep the largest extrema.
        ext = sorted(sorted(ext, key=lambda i: -abs(err[i]))[:n])
        x = GRID[ext]
    return coefs


def f32_horner_error(highest_first, tail):
    """Max relative error of the f32 evaluation: fma(p, r, c) per
    coefficient of `highest_first`, then per value of `tail`."""
    r = GRID.astype(np.float32)
    fma = lambda p, c: np.float32(p.astype(np.float64) * r + np.float64(c))
    p = np.full_like(r, np.float32(highest_first[0]))
    for c in list(highest_first[1:]) + list(tail):
        p = fma(p, np.float32(c)).astype(np.float32)
    exact = np.exp(r.astype(np.float64))
    return np.max(np.abs(p - exact) / exact)


q = remez()
print("q (highest first):", [repr(float(np.float32(c))) for c in q[::-1]])
print("max relative error, exact arithmetic: %.3g" % np.abs(relative_error(q, GRID)).max())
print("max relative error, f32 FMAs:         %.3g" % f32_horner_error(q[::-1], [1.0, 1.0]))
taylor = [1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5]
print("degree-6 Taylor, f32 FMAs:            %.3g" % f32_horner_error(taylor, [1.0, 1.0]))
