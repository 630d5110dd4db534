#!/usr/bin/env python3
"""Writes the PTX that seqc's CUDA pipeline embedded (format=isa) to files and
reports what ptxas makes of each kernel.

  seqc-opt graph.mlir --seqc-cuda-pipeline="chip=sm_90a format=isa" -o out.mlir
  scripts/ptx-report.py out.mlir OUTDIR [--ptxas PTXAS --arch sm_90a]

Every gpu.binary becomes OUTDIR/<name>.ptx. With --ptxas, each is assembled
with `ptxas -v` and one line per kernel is printed:
  kernel <name>: registers R, shared S bytes, spill stores A bytes, spill loads B bytes
A ptxas failure is printed and makes the exit status 1.
"""
import os
import re
import subprocess
import sys


def unescape(s):
    # MLIR prints string attributes with \XX hex escapes and \\ / \".
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            nxt = s[i + 1]
            if nxt in "\\\"":
                out.append(ord(nxt))
                i += 2
                continue
            out.append(int(s[i + 1:i + 3], 16))
            i += 3
            continue
        out += c.encode()
        i += 1
    return out.decode()


def binaries(text):
    pattern = re.compile(r'gpu\.binary @(\w+)\s*\[#gpu\.object<.*?assembly = "((?:[^"\\]|\\.)*)"',
                         re.S)
    return [(m.group(1), unescape(m.group(2))) for m in pattern.finditer(text)]


def main(argv):
    args = argv[1:]
    ptxas = arch = None
    if "--ptxas" in args:
        i = args.index("--ptxas")
        ptxas = args[i + 1]
        del args[i:i + 2]
    if "--arch" in args:
        i = args.index("--arch")
        arch = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    with open(args[0]) as f:
        found = binaries(f.read())
    if not found:
        sys.exit("error: no gpu.binary with PTX (format=isa) in " + args[0])
    os.makedirs(args[1], exist_ok=True)
    status = 0
    for name, ptx in found:
        path = os.path.join(args[1], name + ".ptx")
        with open(path, "w") as f:
            f.write(ptx)
        if not ptxas:
            continue
        proc = subprocess.run([ptxas, "-v", "-arch=" + (arch or "sm_90a"), path, "-o",
                               os.devnull], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"kernel {name}: ptxas failed: {proc.stderr.strip()}")
            status = 1
            continue
        # One block per entry function (a file may hold several); ptxas
        # leaves "N bytes smem" out when it is 0.
        blocks = re.split(r"(?=ptxas info\s*: Compiling entry function)", proc.stderr)
        for block in blocks:
            fn = re.search(r"Compiling entry function '(\w+)'", block)
            if not fn:
                continue
            regs = re.search(r"Used (\d+) registers", block)
            smem = re.search(r"(\d+) bytes smem", block)
            spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", block)
            if not regs or not spills:
                print(f"kernel {fn.group(1)}: ptxas report not understood")
                status = 1
                continue
            print(f"kernel {fn.group(1)}: registers {regs.group(1)}, shared "
                  f"{smem.group(1) if smem else 0} bytes, spill stores {spills.group(1)} "
                  f"bytes, spill loads {spills.group(2)} bytes")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
