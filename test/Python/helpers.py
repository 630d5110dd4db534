"""What the Python tests share."""

import numpy as np
import torch


def f64(x):
    """Array or tensor `x` as a float64 numpy array (None stays None)."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float64).numpy()
    return np.asarray(x, np.float64)
