"""lit configuration for tests of one's own pipelines against an installed seqc.

A test suite's lit.cfg.py (what `seqc-lit init DIR` writes) calls
configure(config, lit_config, __file__): every `.mlir` (and `.test`) file in
the suite's folder is a test whose RUN lines find seqc-opt, seqc-run and
seqc-compile of this seqc, and LLVM's FileCheck, not and count, on PATH.
"""
import os
import shutil

import lit.formats

_HERE = os.path.dirname(os.path.abspath(__file__))


def _seqc_bin():
    """The tools' folder: $SEQC_BIN (set by seqc-lit), else this install's."""
    for candidate in (os.environ.get("SEQC_BIN"),
                      os.path.normpath(os.path.join(_HERE, "..", "..", "..", "bin"))):
        if candidate and os.path.exists(os.path.join(candidate, "seqc-opt")):
            return candidate
    found = shutil.which("seqc-opt")
    return os.path.dirname(found) if found else None


def _llvm_bin():
    """Where FileCheck is: $LLVM_TOOLS_DIR, PATH, or Debian's LLVM 22."""
    for candidate in (os.environ.get("LLVM_TOOLS_DIR"), "/usr/lib/llvm-22/bin"):
        if candidate and os.path.exists(os.path.join(candidate, "FileCheck")):
            return candidate
    found = shutil.which("FileCheck")
    return os.path.dirname(found) if found else None


def configure(config, lit_config, cfg_file):
    seqc_bin = _seqc_bin()
    if not seqc_bin:
        lit_config.fatal("seqc-lit: seqc-opt not found (set SEQC_BIN to the folder "
                         "of seqc's tools)")
    llvm_bin = _llvm_bin()
    if not llvm_bin:
        lit_config.fatal("seqc-lit: FileCheck not found (install llvm-22-tools, or set "
                         "LLVM_TOOLS_DIR)")
    # A lit.cfg.py may rename its suite after this call.
    config.name = "seqc-user"
    config.test_format = lit.formats.ShTest(execute_external=False)
    config.suffixes = [".mlir", ".test"]
    config.test_source_root = os.path.dirname(os.path.abspath(cfg_file))
    config.environment["PATH"] = os.pathsep.join(
        [seqc_bin, llvm_bin, config.environment.get("PATH", os.environ.get("PATH", ""))])
    # Compiled code of tests is cached beside the results, not in ~/.cache.
    exec_root = getattr(config, "test_exec_root", None) or config.test_source_root
    config.environment["SEQC_CACHE_DIR"] = os.path.join(exec_root, ".seqc-test-cache")
    config.substitutions.append(("%seqc_bin", seqc_bin))
