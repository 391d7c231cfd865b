"""PyTorch top-level names loaded on first use (``jitgrad``'s module ``__getattr__``):
``empty_permuted`` and ``cond``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import creation
from .devices import is_cpu_array
from .tensor import Tensor

__all__ = ["empty_permuted", "cond"]


def empty_permuted(size: Sequence[int], physical_layout: Sequence[int], *, dtype=None,
                   layout=None, device=None, requires_grad: bool = False,
                   pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor of logical shape ``size`` whose memory holds its dims in the
    order ``physical_layout`` (outermost first): ``empty_permuted((N, C, H, W), (0, 2, 3,
    1))`` is channels-last. The dims of ``size`` are those of an ``empty`` of the permuted
    shape, permuted back; a leaf (``requires_grad`` as given).

    >>> import jitgrad
    >>> jitgrad.empty_permuted((2, 3), (1, 0)).stride()
    (1, 2)
    """
    size, perm = tuple(int(s) for s in size), tuple(int(p) for p in physical_layout)
    if len(size) != len(perm):
        raise RuntimeError("Number of dimensions in size does not match the length of the "
                           f"physical_layout; i.e. len(size) = {len(size)} is not equal to "
                           f"len(physical_layout) = {len(perm)}")
    seen = set()
    for i, p in enumerate(perm):
        if not 0 <= p < len(size):
            raise RuntimeError(f"Dimension out of range (expected to be between 0 and "
                               f"{len(size) - 1}, but got {p} at index {i}).  NB: negative "
                               "dims not currently supported; file an issue if you want it.")
        if p in seen:
            raise RuntimeError("Duplicate dim not allowed")
        seen.add(p)
    physical = creation.empty(tuple(size[p] for p in perm), dtype=dtype, device=device,
                              layout=layout, pin_memory=pin_memory)
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    out = physical.permute(*inverse) if perm else physical
    return out.requires_grad_(requires_grad) if requires_grad else out


def cond(pred, true_fn: Callable, false_fn: Callable, operands: tuple | list = ()) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (``torch.cond``):
    ``pred`` a Python bool / number, or a one-element tensor; ``operands`` a tuple or list
    of (possibly nested dict / list / tuple of) tensors. Autograd goes through the branch
    that ran.

    A tensor predicate is a value read: under ``jitgrad.compile`` it ends the trace there,
    as ``if`` on a tensor does (a graph break; the branch is chosen eagerly at every call),
    unless the predicate is a constant the compiled function built, so a compiled function
    never freezes one branch into its plan. Only the chosen branch runs: PyTorch traces
    both and rejects branches whose outputs differ in structure, shape or dtype; here a
    program that PyTorch accepts gives the same results.

    >>> import jitgrad
    >>> x = jitgrad.tensor([1.0, -2.0, 3.0])
    >>> jitgrad.cond(x.sum() > 0, lambda a: a * 2, lambda a: a - 1, (x,))
    tensor([ 2., -4.,  6.])
    """
    if isinstance(pred, (bool, int, float)):
        return true_fn(*operands) if pred else false_fn(*operands)
    from .func._pytree import tree_flatten

    if not isinstance(pred, (bool, Tensor)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                           f"{pred}.")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    if not isinstance(operands, (tuple, list)) or not all(
            isinstance(t, Tensor) for t in tree_flatten(list(operands))[0]):
        raise RuntimeError("Expect operands to be a tuple of possibly nested dict/list/tuple "
                           f"that only consists of tensor leaves, but got {operands}.")
    from .trace.tracer import needs_value

    needs_value(pred, "torch.cond's predicate (which branch runs)")
    data = pred._data
    if not is_cpu_array(data):  # a CUDA tensor: read through the host
        data = pred.detach().cpu()._data
    taken = bool(data.reshape(()))
    return true_fn(*operands) if taken else false_fn(*operands)
