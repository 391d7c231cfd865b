"""Anomaly detection (``torch.autograd.detect_anomaly`` / ``set_detect_anomaly``).

While it is on, nodes made by :func:`jitgrad.autograd.node.make_node` keep the stack of the
forward call that made them, and the backward engine runs node by node (no fused regions,
no chain fast path), checking each node's results: a node whose gradient holds a NaN
raises PyTorch's "Function 'SqrtBackward0' returned nan values in its 0th output." (when
``check_nan``), and a node that raises or returns NaN first warns "Error detected in
SqrtBackward0." with that forward stack -- or, for a node made while it was off (or by the
C fast path of element-wise ops), "No forward pass information available".
"""

from __future__ import annotations

import os
import traceback
import warnings

import numpy as np

from .._thread_modes import TRACING

__all__ = ["set_detect_anomaly", "detect_anomaly", "anomaly_mode", "MODE"]

#: ``[enabled, check_nan]``, read on the per-node paths
MODE = [False, True]


def anomaly_mode() -> tuple[bool, bool]:
    """``(enabled, check_nan)``."""
    return MODE[0], MODE[1]


#: what anomaly mode puts in ``_thread_modes.TRACING`` while it is on: the C fast path of
#: element-wise operators then takes its Python fallback, whose nodes keep a forward stack
_SLOW_PATH = "anomaly detection"


def _set(mode: bool, check_nan: bool) -> None:
    MODE[0], MODE[1] = bool(mode), bool(check_nan)
    if MODE[0] and _SLOW_PATH not in TRACING:
        TRACING.append(_SLOW_PATH)
    elif not MODE[0] and _SLOW_PATH in TRACING:
        TRACING.remove(_SLOW_PATH)


class set_detect_anomaly:  # noqa: N801 -- PyTorch's name
    """Turn anomaly detection on or off: as a call (it stays so) or as a context manager /
    decorator (the previous setting comes back at exit), as PyTorch's."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = anomaly_mode()
        _set(mode, check_nan)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        _set(*self.prev)

    def __call__(self, fn):
        mode = anomaly_mode()

        def wrapper(*args, **kwargs):
            with set_detect_anomaly(*mode):
                return fn(*args, **kwargs)
        return wrapper


class detect_anomaly:  # noqa: N801 -- PyTorch's name
    """Context manager / decorator that turns anomaly detection on (see the module)."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the "
                      "runtime and should only be enabled for debugging.", UserWarning,
                      stacklevel=2)

    def __enter__(self) -> None:
        self.prev = anomaly_mode()
        _set(True, self.check_nan)

    def __exit__(self, *exc) -> None:
        _set(*self.prev)

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def forward_stack() -> list:
    """The stack of the forward call making a node, without jitgrad's own frames."""
    return [f for f in traceback.extract_stack() if not f.filename.startswith(_PACKAGE)]


def _warn_forward(node) -> None:
    stack = getattr(node, "_forward_stack", None)
    if stack:
        where = "Traceback of forward call that caused the error:\n" + "".join(
            traceback.format_list(stack))
    else:
        where = ("No forward pass information available. Enable detect anomaly during "
                 "forward pass for more information.")
    warnings.warn(f"Error detected in {node.name()}. {where}", UserWarning, stacklevel=4)


def apply_checked(node, grads: list, retain: bool):
    """``node``'s rule on ``grads`` under anomaly detection (see the module)."""
    try:
        out = node.apply(grads) if retain else node.apply_final(grads)
    except Exception:
        _warn_forward(node)
        raise
    if MODE[1]:
        for i, g in enumerate(out):
            d = getattr(g, "_data", None)
            if d is not None and d.dtype.kind == "f" and bool(np.isnan(d).any()):
                _warn_forward(node)
                raise RuntimeError(f"Function '{node.name()}' returned nan values in its "
                                   f"{i}th output.")
    return out
