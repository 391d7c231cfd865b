"""``jitgrad.backends``: PyTorch's ``torch.backends`` flags and availability checks, so
scripts that query or set them run unchanged.

jitgrad runs its own kernels (generated Numba code on the CPU, generated CUDA kernels and
CuPy's cuBLAS on a GPU): it has no cuDNN, oneDNN (MKL-DNN), OpenMP or Metal (MPS) backend,
and those report unavailable. The flags scripts set (``cudnn.benchmark``,
``cudnn.deterministic``, ``cuda.matmul.allow_tf32``...) are stored and read back with
PyTorch's defaults, and change nothing: jitgrad's results never depend on autotuning (no
algorithm choice to benchmark), its kernels are deterministic (sums in a fixed order, no
float atomics), and float32 matmuls run in float32 (never TF32). Each submodule says so for
its flags.

>>> import jitgrad as torch
>>> torch.backends.mps.is_available()
False
>>> torch.backends.cudnn.is_available(), torch.backends.cuda.matmul.allow_tf32
(False, False)
"""

from __future__ import annotations

import warnings

from . import cuda, cudnn, mha, mkldnn, mps, openmp

__all__ = ["cuda", "cudnn", "mha", "mkldnn", "mps", "openmp", "get_float32_matmul_precision",
           "set_float32_matmul_precision"]

_PRECISIONS = ("highest", "high", "medium")
_matmul_precision = "highest"


def get_float32_matmul_precision() -> str:
    """The float32 matmul precision last set (``"highest"`` by default)."""
    return _matmul_precision


def set_float32_matmul_precision(precision: str) -> None:
    """PyTorch's ``torch.set_float32_matmul_precision``: ``"highest"``, ``"high"`` or
    ``"medium"``, stored and read back. It changes nothing: jitgrad computes float32 matmuls
    in float32 (``"highest"``) whatever is asked. Another value warns and is ignored, as in
    PyTorch."""
    global _matmul_precision
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.", UserWarning,
                      stacklevel=2)
        return
    _matmul_precision = precision
