"""``jitgrad.backends.cuda``: whether jitgrad's CUDA backend is installed, PyTorch's CUDA
matmul flags and its scaled-dot-product-attention backend switches.

``matmul.allow_tf32`` (default False), ``matmul.allow_fp16_reduced_precision_reduction`` and
``matmul.allow_bf16_reduced_precision_reduction`` (default True) are stored for scripts that
set them and change nothing: jitgrad's float32 matmuls always run in float32 (CuPy's cuBLAS
without TF32), so results are those of ``allow_tf32 = False``.

The SDPA switches (``enable_flash_sdp``, ``enable_mem_efficient_sdp``, ``enable_math_sdp``,
``enable_cudnn_sdp``, their ``*_sdp_enabled`` queries, the deprecated ``sdp_kernel`` context
and :func:`jitgrad.nn.attention.sdpa_kernel`) choose which of PyTorch's attention kernels
may run. jitgrad has one implementation, the math one, which computes the same function; it
honours the switches as PyTorch's CPU dispatch does: attention runs when the math or the
flash kernel is allowed (PyTorch has both on the CPU; on a GPU any allowed kernel), and
raises PyTorch's "No viable backend" error otherwise.
"""

from __future__ import annotations

import contextlib
import warnings
from importlib.util import find_spec

__all__ = ["is_built", "matmul", "enable_flash_sdp", "flash_sdp_enabled",
           "enable_mem_efficient_sdp", "mem_efficient_sdp_enabled", "enable_math_sdp",
           "math_sdp_enabled", "enable_cudnn_sdp", "cudnn_sdp_enabled", "sdp_kernel",
           "allow_fp16_bf16_reduction_math_sdp", "fp16_bf16_reduction_math_sdp_allowed",
           "is_ck_sdpa_available"]


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


#: which of PyTorch's SDPA kernels may run (all by default, as PyTorch's)
SDP_ENABLED = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}
_FP16_BF16_REDUCTION = [False]


def enable_flash_sdp(enabled: bool) -> None:
    """Allow (or forbid) the flash attention kernel."""
    SDP_ENABLED["flash"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    """Whether the flash attention kernel may run."""
    return SDP_ENABLED["flash"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Allow (or forbid) the memory-efficient attention kernel."""
    SDP_ENABLED["mem_efficient"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    """Whether the memory-efficient attention kernel may run."""
    return SDP_ENABLED["mem_efficient"]


def enable_math_sdp(enabled: bool) -> None:
    """Allow (or forbid) the math attention kernel (jitgrad's one implementation)."""
    SDP_ENABLED["math"] = bool(enabled)


def math_sdp_enabled() -> bool:
    """Whether the math attention kernel may run."""
    return SDP_ENABLED["math"]


def enable_cudnn_sdp(enabled: bool) -> None:
    """Allow (or forbid) the cuDNN attention kernel."""
    SDP_ENABLED["cudnn"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    """Whether the cuDNN attention kernel may run."""
    return SDP_ENABLED["cudnn"]


def allow_fp16_bf16_reduction_math_sdp(enabled: bool) -> None:
    """PyTorch's switch for reduced-precision reductions in the math kernel (stored; jitgrad
    reduces float16 in float32 either way)."""
    _FP16_BF16_REDUCTION[0] = bool(enabled)


def fp16_bf16_reduction_math_sdp_allowed() -> bool:
    """The value set by :func:`allow_fp16_bf16_reduction_math_sdp`."""
    return _FP16_BF16_REDUCTION[0]


def is_ck_sdpa_available() -> bool:
    """Whether AMD's Composable Kernel attention is built: never."""
    return False


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True,
               enable_mem_efficient: bool = True, enable_cudnn: bool = True):
    """Deprecated context manager setting the four SDPA switches for its block (use
    :func:`jitgrad.nn.attention.sdpa_kernel`); restores them after."""
    warnings.warn("`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this "
                  "context manager will be removed. Please see "
                  "`torch.nn.attention.sdpa_kernel()` for the new context manager, with "
                  "updated signature.", FutureWarning, stacklevel=3)
    with sdp_switches({"flash": enable_flash, "math": enable_math,
                       "mem_efficient": enable_mem_efficient, "cudnn": enable_cudnn}):
        yield


@contextlib.contextmanager
def sdp_switches(values: dict):
    """The SDPA switches set to ``values`` for a block, restored after."""
    before = dict(SDP_ENABLED)
    SDP_ENABLED.update({k: bool(v) for k, v in values.items()})
    try:
        yield
    finally:
        SDP_ENABLED.update(before)


def sdp_state() -> tuple:
    """The four switches, as a compiled function's guard reads them."""
    return tuple(SDP_ENABLED.values())


def check_sdp_backend(on_gpu: bool) -> None:
    """PyTorch's error when no allowed SDPA kernel exists for the device (the CPU has the
    math and the flash kernels). A traced call records the switches as a setting it read:
    a later change retraces (and raises there, as eager mode would)."""
    from ..trace.state import STATE

    if STATE.tracer is not None:
        STATE.tracer.on_read_setting(sdp_state, sdp_state())
    allowed = SDP_ENABLED["math"] or SDP_ENABLED["flash"] or (on_gpu and (
        SDP_ENABLED["mem_efficient"] or SDP_ENABLED["cudnn"]))
    if not allowed:
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. "
                           "This is likely due to turning off both the math kernel and the "
                           "fused kernels.")
