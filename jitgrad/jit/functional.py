"""Functional gradients: ``jitgrad.grad`` and ``jitgrad.value_and_grad`` (they compose with
``jitgrad.compile``: compiled, the backward runs inside the plan)."""

from __future__ import annotations

import functools

from ..autograd import grad_mode
from ..tensor import Tensor

__all__ = ["grad", "value_and_grad"]


def grad(fn, argnums=0):
    """The gradient function of scalar-valued ``fn`` w.r.t. argument(s) ``argnums``.

    >>> import jitgrad
    >>> df = jitgrad.grad(lambda x: (x ** 3).sum())
    >>> df(jitgrad.tensor([2.0]))
    tensor([12.])
    """
    vg = value_and_grad(fn, argnums)

    @functools.wraps(fn)
    def g(*args, **kwargs):
        return vg(*args, **kwargs)[1]
    return g


def value_and_grad(fn, argnums=0):
    """``(fn(*args), gradient)`` of scalar-valued ``fn`` w.r.t. argument(s) ``argnums``."""
    from ..autograd.engine import grad as autograd_grad

    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    @functools.wraps(fn)
    def vg(*args, **kwargs):
        args = list(args)
        for i in nums:
            a = args[i]
            if not isinstance(a, Tensor):
                raise TypeError(f"grad: argument {i} must be a Tensor, got {type(a).__name__}")
            args[i] = a.detach().requires_grad_(True)
        with grad_mode.enable_grad():
            out = fn(*args, **kwargs)
            if not isinstance(out, Tensor) or out._data.size != 1:
                raise RuntimeError("grad: the function must return a one-element tensor")
            gs = autograd_grad(out, [args[i] for i in nums], allow_unused=True,
                               materialize_grads=True)
        g = gs[0] if isinstance(argnums, int) else tuple(gs)
        return out.detach(), g
    return vg
