"""The Python example: a Mamba-2 block in plain PyTorch whose scan is
seqc.compat.mamba_ssm's, against the same block with a PyTorch recurrence."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "examples", "python"))

import mamba2_block  # noqa: E402


def test_mamba2_block_matches_the_pytorch_recurrence():
    for seqlen in (1, 67, 300):
        diff, scale, _, _ = mamba2_block.compare(seqlen, d_model=64, repeats=1)
        assert diff <= 1e-4 * max(1.0, scale), (seqlen, diff)
