# Every example graph runs with `seqc-run FILE --random-inputs` (dynamic
# dimensions take --dynamic-size, default 32), every public function of it:
# what a new user tries first.
# RUN: %python %s
import glob
import os
import re
import subprocess

from seqc_testing import SEQC_RUN, Checker

c = Checker()
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
files = sorted(glob.glob(os.path.join(root, "*.mlir")) + glob.glob(os.path.join(root, "*", "*.mlir")))
c.expect("examples found", len(files) >= 8, files)
for path in files:
    with open(path) as f:
        text = f.read()
    publics = re.findall(r"^func\.func @(\w+)\(", text, re.M)
    for name in publics:
        proc = subprocess.run([SEQC_RUN, path, "-e", name, "--random-inputs", "--print"],
                              capture_output=True, text=True)
        finite = "nan" not in proc.stdout and "inf" not in proc.stdout
        c.expect(f"{os.path.relpath(path, root)} @{name} runs with --random-inputs",
                 proc.returncode == 0 and "result0:" in proc.stdout and finite,
                 proc.stderr.strip()[-300:])
c.finish()
