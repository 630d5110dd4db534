"""compare_results.py A B TOL: the result<i>.npy files seqc-run wrote in
directories A and B (--output-dir) agree within TOL relative to A's
largest magnitude; exits 1 naming the first that does not (or a count
that differs)."""
import os
import sys

import numpy as np


def results(directory):
    found = []
    while os.path.exists(os.path.join(directory, f"result{len(found)}.npy")):
        found.append(np.load(os.path.join(directory, f"result{len(found)}.npy")))
    return found


def main():
    a_dir, b_dir, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    a, b = results(a_dir), results(b_dir)
    if not a or len(a) != len(b):
        sys.exit(f"error: {len(a)} results in {a_dir}, {len(b)} in {b_dir}")
    for i, (x, y) in enumerate(zip(a, b)):
        scale = max(float(np.max(np.abs(x))), 1e-30)
        err = float(np.max(np.abs(x.astype(np.float64) - y))) / scale
        if x.shape != y.shape or not err <= tol:
            sys.exit(f"error: result{i}: shapes {x.shape} {y.shape}, "
                     f"relative error {err:.3g} > {tol}")
    print(f"{len(a)} results agree")


main()
