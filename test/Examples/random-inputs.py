# Every example graph runs with `seqc-run FILE --random-inputs` (dynamic
# dimensions take --dynamic-size, default 32), every public function of it:
# what a new user tries first. Packed-sequence offsets (an argument named
# `cu`, the `segments` of examples/serving) cannot be random, so those are
# bound by name to valid offsets of 32 sequences over the 32 steps.
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t
import glob
import os
import re
import subprocess
import sys

import numpy as np
from seqc_testing import SEQC_RUN, Checker

c = Checker()
# 33 offsets: S = 32 (the states' dynamic rows), ending at T = 32, with
# zero-length sequences.
cu_file = os.path.join(sys.argv[1], "cu.npz")
cu = np.array([0, 0, 5, 5] + list(range(6, 33)) + [32, 32], np.int32)
np.savez(cu_file, cu=cu)
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
files = sorted(glob.glob(os.path.join(root, "*.mlir")) + glob.glob(os.path.join(root, "*", "*.mlir")))
c.expect("examples found", len(files) >= 8, files)
for path in files:
    with open(path) as f:
        text = f.read()
    publics = re.findall(r"^func\.func @(\w+)\((.*?)\)\s*->", text, re.M | re.S)
    for name, params in publics:
        bind = ["--weights", cu_file] if 'seq.name = "cu"' in params else []
        proc = subprocess.run([SEQC_RUN, path, "-e", name, "--random-inputs", "--print"] + bind,
                              capture_output=True, text=True)
        finite = "nan" not in proc.stdout and "inf" not in proc.stdout
        c.expect(f"{os.path.relpath(path, root)} @{name} runs with --random-inputs",
                 proc.returncode == 0 and "result0:" in proc.stdout and finite,
                 proc.stderr.strip()[-300:])
c.finish()
