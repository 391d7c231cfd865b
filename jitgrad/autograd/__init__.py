"""Automatic differentiation: the backward engine, grad modes, custom Functions, gradcheck."""

from . import graph
from .engine import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .node import Node


def __getattr__(name: str):
    if name == "Variable":  # legacy; defined with the tensor types (it needs Tensor)
        from ..tensor_types import Variable

        return Variable
    if name == "functional":  # torch.autograd.functional, loaded on first use
        import importlib

        return importlib.import_module(f"{__name__}.functional")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "backward", "grad", "Function", "FunctionCtx", "once_differentiable", "gradcheck",
    "gradgradcheck", "GradcheckError", "no_grad", "enable_grad", "set_grad_enabled",
    "inference_mode", "is_grad_enabled", "is_inference_mode_enabled", "Node",
    "set_detect_anomaly", "detect_anomaly", "Variable", "graph",
]

_anomaly = False
_anomaly_check_nan = True


def set_detect_anomaly(mode: bool, check_nan: bool = True) -> None:
    """Accepted for PyTorch compatibility; jitgrad's errors already name the failing op.
    The setting is kept (:func:`anomaly_mode`; ``jitgrad.is_anomaly_enabled``)."""
    global _anomaly, _anomaly_check_nan
    _anomaly = bool(mode)
    _anomaly_check_nan = bool(check_nan)


def anomaly_mode() -> tuple[bool, bool]:
    """``(enabled, check_nan)``: the setting of :func:`set_detect_anomaly`."""
    return _anomaly, _anomaly_check_nan


class detect_anomaly:
    """Context manager accepted for PyTorch compatibility (see :func:`set_detect_anomaly`)."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = anomaly_mode()
        set_detect_anomaly(True, self.check_nan)
        return self

    def __exit__(self, *exc):
        set_detect_anomaly(*self._prev)
