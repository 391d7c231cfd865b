"""``jitgrad.backends.cuda``: whether jitgrad's CUDA backend is installed, and PyTorch's
CUDA matmul flags.

``matmul.allow_tf32`` (default False), ``matmul.allow_fp16_reduced_precision_reduction`` and
``matmul.allow_bf16_reduced_precision_reduction`` (default True) are stored for scripts that
set them and change nothing: jitgrad's float32 matmuls always run in float32 (CuPy's cuBLAS
without TF32), so results are those of ``allow_tf32 = False``.
"""

from __future__ import annotations

from importlib.util import find_spec

__all__ = ["is_built", "matmul"]


def is_built() -> bool:
    """Whether this install has jitgrad's CUDA backend (``pip install jitgrad[cuda]``, or
    numba-cuda for the simulator). As PyTorch's, it does not mean a GPU is there:
    :func:`jitgrad.cuda.is_available` says that."""
    return find_spec("numba_cuda") is not None


class _MatmulFlags:
    """``torch.backends.cuda.matmul``: stored flags, with no effect on jitgrad (see the
    module docstring)."""

    def __init__(self) -> None:
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __repr__(self) -> str:
        return (f"matmul(allow_tf32={self.allow_tf32}, allow_fp16_reduced_precision_reduction="
                f"{self.allow_fp16_reduced_precision_reduction}, "
                f"allow_bf16_reduced_precision_reduction="
                f"{self.allow_bf16_reduced_precision_reduction})")


matmul = _MatmulFlags()
