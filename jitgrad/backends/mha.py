"""``jitgrad.backends.mha``: PyTorch's switch of the "fast path" of ``MultiheadAttention``
and ``TransformerEncoder(Layer)`` in inference.

jitgrad has no fused inference kernels; with the switch on (the default) its modules give
the fast path's *results* where PyTorch would take it: a fully masked query row gives NaN
(the explicit softmax) rather than zeros, and ``TransformerEncoder`` returns zeros at padded
positions (PyTorch's nested-tensor conversion). Off, they give the general path's."""

from __future__ import annotations

__all__ = ["get_fastpath_enabled", "set_fastpath_enabled"]

_is_fastpath_enabled: bool = True


def get_fastpath_enabled() -> bool:
    """Whether the fast path of ``TransformerEncoder`` and ``MultiheadAttention`` is on."""
    return _is_fastpath_enabled


def set_fastpath_enabled(value: bool) -> None:
    """Turn the fast path of ``TransformerEncoder`` and ``MultiheadAttention`` on or off."""
    global _is_fastpath_enabled
    _is_fastpath_enabled = bool(value)
