"""``Parameter``: a tensor flagged as a module parameter.

A parameter is an ordinary :class:`~jitgrad.Tensor` (so every op and the compiler treat it
like any tensor) with ``_is_param`` set; ``isinstance(t, nn.Parameter)`` checks that flag.
It requires grad by default, shares memory with the data it wraps, and prints as
``Parameter containing:``.
"""

from __future__ import annotations

from ..tensor import Tensor, wrap

__all__ = ["Parameter", "zero_grads",
           # loaded on first use (module __getattr__ below)
           "Buffer", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]  # noqa: F822

# PyTorch's other names of ``torch.nn.parameter``, loaded on first use
_LAZY = {"Buffer": "buffer", "UninitializedParameter": "lazy", "UninitializedBuffer": "lazy",
         "is_lazy": "lazy"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


class _ParameterMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj._is_param


class Parameter(metaclass=_ParameterMeta):
    """A tensor that is a module parameter (registered on assignment to a Module).

    >>> import jitgrad
    >>> p = jitgrad.nn.Parameter(jitgrad.ones(2))
    >>> p
    Parameter containing:
    tensor([1., 1.], requires_grad=True)
    >>> isinstance(p, jitgrad.nn.Parameter), isinstance(p * 2, jitgrad.nn.Parameter)
    (True, False)
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Tensor:
        if data is None:
            from ..creation import empty

            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter data must be a Tensor, got {type(data).__name__}")
        t = wrap(data._data)
        t._vc = data._vc  # the same storage: in-place changes show through both
        t._is_param = True
        if requires_grad and not (t.is_floating_point() or t.is_complex()):
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        t.requires_grad_(requires_grad)
        return t


def zero_grads(params, set_to_none: bool = True) -> None:
    """Reset the ``.grad`` of ``params`` (``Module.zero_grad`` and ``Optimizer.zero_grad``):
    to None without reading it first (so a compiled step need not guard ``.grad``), or
    detached and zeroed in place."""
    for p in params:
        if set_to_none:
            p.grad = None
            continue
        g = p.grad
        if g is None:
            continue
        if g.grad_fn is not None:
            g.detach_()
        else:
            g.requires_grad_(False)
        g.zero_()
