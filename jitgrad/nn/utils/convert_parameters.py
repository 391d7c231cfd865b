"""``parameters_to_vector`` / ``vector_to_parameters``: a model's parameters as one flat
vector and back, as ``torch.nn.utils``."""

from __future__ import annotations

from collections.abc import Iterable

from ...ops.concat import cat
from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _same_device(param: Tensor, first: Tensor | None) -> Tensor:
    """PyTorch's TypeError when the parameters are on different devices; the first one."""
    if first is not None and param.device != first.device:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return param if first is None else first


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one vector (differentiable).

    >>> import jitgrad
    >>> parameters_to_vector(jitgrad.nn.Linear(2, 3).parameters()).shape
    jitgrad.Size([9])
    """
    first = None
    flat = []
    for p in parameters:
        first = _same_device(p, first)
        flat.append(p.view(-1))
    return cat(flat)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Set the parameters' data to consecutive slices of ``vec`` (the inverse of
    :func:`parameters_to_vector`); each parameter's ``.data`` becomes a view of ``vec``."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__module__}."
                        f"{type(vec).__qualname__}" if type(vec).__module__ != "builtins"
                        else f"expected torch.Tensor, but got: {type(vec).__qualname__}")
    first = None
    start = 0
    for p in parameters:
        first = _same_device(p, first)
        n = p.numel()
        p.data = vec[start:start + n].view_as(p).data
        start += n
