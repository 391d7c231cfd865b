"""Automatic differentiation: the backward engine, grad modes, custom Functions, gradcheck."""

from . import graph
from .anomaly import anomaly_mode, detect_anomaly, set_detect_anomaly
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
    if name in ("functional", "profiler", "forward_ad"):  # loaded on first use
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "backward", "grad", "Function", "FunctionCtx", "once_differentiable", "gradcheck",
    "gradgradcheck", "GradcheckError", "no_grad", "enable_grad", "set_grad_enabled",
    "inference_mode", "is_grad_enabled", "is_inference_mode_enabled", "Node",
    "set_detect_anomaly", "detect_anomaly", "anomaly_mode", "Variable", "graph",
]

