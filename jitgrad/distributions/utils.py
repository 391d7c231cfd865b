"""Helpers shared by the distributions (``torch.distributions.utils``): broadcasting of
parameters, probabilities <-> logits, lazily computed attributes, noise from jitgrad's
generator, and the triangular solve the multivariate normal needs."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from functools import update_wrapper
from typing import Any

import numpy as np

import jitgrad

from ..tensor import Size, Tensor

__all__ = ["broadcast_all", "logits_to_probs", "clamp_probs", "probs_to_logits",
           "lazy_property", "tril_matrix_to_vec", "vec_to_tril_matrix", "euler_constant"]

euler_constant: float = 0.57721566490153286060  # Euler-Mascheroni constant


def _is_number(v: object) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, Tensor)


def broadcast_all(*values: Tensor | float) -> tuple[Tensor, ...]:
    """``values`` broadcast to one shape (``jitgrad.broadcast_tensors``); Python numbers
    become tensors of the first tensor's dtype and device (the default dtype when all are
    numbers).

    >>> import jitgrad
    >>> from jitgrad.distributions.utils import broadcast_all
    >>> [t.shape for t in broadcast_all(jitgrad.zeros(2, 3), 1.0)]
    [jitgrad.Size([2, 3]), jitgrad.Size([2, 3])]
    """
    if not all(isinstance(v, Tensor) or _is_number(v) for v in values):
        raise ValueError("Input arguments must all be instances of Number, "
                         "torch.Tensor or objects implementing __torch_function__.")
    if not all(isinstance(v, Tensor) for v in values):
        options: dict[str, Any] = {"dtype": jitgrad.get_default_dtype()}
        for value in values:
            if isinstance(value, Tensor):
                options = {"dtype": value.dtype, "device": value.device}
                break
        values = tuple(v if isinstance(v, Tensor) else jitgrad.tensor(v, **options)
                       for v in values)
    return tuple(jitgrad.broadcast_tensors(*values))


def finfo(dtype) -> np.finfo:
    """NumPy's floating-point limits of a jitgrad floating dtype (``torch.finfo``'s
    ``eps``, ``tiny``, ``max``, ``min``)."""
    return np.finfo(dtype.np)


def _standard_normal(shape: Sequence[int], dtype, device) -> Tensor:
    """Standard normal noise of ``shape`` from jitgrad's default generator."""
    return jitgrad.randn(Size(shape), dtype=dtype, device=device)


def _uniform(shape: Sequence[int], dtype, device) -> Tensor:
    """Uniform noise in ``[0, 1)`` of ``shape`` from jitgrad's default generator."""
    return jitgrad.rand(Size(shape), dtype=dtype, device=device)


def _sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """``value`` summed over its ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    required_shape = tuple(value.shape[:-dim]) + (-1,)
    return value.reshape(required_shape).sum(-1)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities from logits: ``sigmoid`` for the binary case (log-odds), else a
    softmax over the last dimension (unnormalised log probabilities)."""
    if is_binary:
        return jitgrad.sigmoid(logits)
    return jitgrad.softmax(logits, dim=-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """``probs`` clamped to ``[eps, 1 - eps]`` (``eps`` of its dtype).

    >>> import jitgrad
    >>> from jitgrad.distributions.utils import clamp_probs
    >>> clamp_probs(jitgrad.tensor([0.0, 0.5, 1.0]))
    tensor([1.1921e-07, 5.0000e-01, 1.0000e+00])
    """
    eps = float(finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Logits from probabilities (clamped away from 0 and 1 first): log-odds for the
    binary case, else the log probabilities."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return jitgrad.log(ps_clamped) - jitgrad.log1p(-ps_clamped)
    return jitgrad.log(ps_clamped)


class lazy_property:
    """A non-data descriptor computing an attribute on first access (with grad enabled)
    and caching it on the instance (``probs`` from ``logits`` and the reverse)."""

    def __init__(self, wrapped: Callable[[Any], Any]) -> None:
        self.wrapped = wrapped
        update_wrapper(self, wrapped)  # type: ignore[arg-type]

    def __get__(self, instance: Any, obj_type: Any = None) -> Any:
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with jitgrad.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):
    """A lazy property seen on the class: a ``property`` for documentation tools, a
    ``lazy_property`` for argument validation (which skips those not computed yet)."""

    def __init__(self, wrapped: Callable[[Any], Any]) -> None:
        property.__init__(self, wrapped)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The lower-triangular elements (from diagonal ``diag`` down) of a (batched) square
    matrix, in row order."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    rows, cols = np.tril_indices(n, diag)
    return mat[..., jitgrad.tensor(rows), jitgrad.tensor(cols)]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The inverse of :func:`tril_matrix_to_vec`: a (batched) ``D x D`` lower-triangular
    matrix holding ``vec``'s elements in row order."""
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * vec.shape[-1]
                            + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    eps = float(finfo(vec.dtype).eps)
    if round(n) - n > eps:
        raise ValueError(f"The size of last dimension is {vec.shape[-1]} which cannot be "
                         "expressed as the lower triangular part of a square D x D matrix.")
    n = round(n)
    rows, cols = np.tril_indices(n, diag)
    flat = np.full((n, n), len(rows), dtype=np.int64)  # len(rows): the appended zero
    flat[rows, cols] = np.arange(len(rows))
    padded = jitgrad.cat([vec, vec.new_zeros(tuple(vec.shape[:-1]) + (1,))], dim=-1)
    index = jitgrad.tensor(flat.reshape(-1))
    return padded.index_select(-1, index).reshape(tuple(vec.shape[:-1]) + (n, n))


# ------------------------------------------------------------------ linear algebra
def solve_tril(L: Tensor, B: Tensor) -> Tensor:
    """``X`` with ``L @ X = B`` for lower-triangular ``L`` (the upper triangle of ``L`` is
    not read, nor given a gradient), broadcasting batch dimensions:
    ``torch.linalg.solve_triangular(L, B, upper=False)``. Uses
    ``jitgrad.linalg.solve_triangular`` when jitgrad has it, else ``jitgrad.linalg.solve``
    on ``L.tril()``."""
    native = getattr(jitgrad.linalg, "solve_triangular", None)
    if native is not None:
        return native(L, B, upper=False)
    return jitgrad.linalg.solve(L.tril(), B)
