"""``Tensor.unfold(dimension, size, step)``: the windows of length ``size`` every ``step``
along a dim, as a new last dim -- a view, as PyTorch's (writes through it reach the tensor;
overlapping windows share elements).

``unfold`` is an op whose eager result is a strided view of its input; its gradient is
``unfold_backward`` -- zeros of the input's shape with each window's gradient added back
where the window lies -- whose own gradient is ``unfold`` again, so both are differentiable
to any order (PyTorch's ``UnfoldBackward0`` / ``UnfoldBackwardBackward0``).
"""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace
from ..shapes import wrap_dim
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import call
from .registry import OPAQUE, defop

__all__ = ["unfold", "unfold_backward"]


def _windows(n: int, size: int, step: int) -> int:
    return (n - size) // step + 1


def _unfold_ref(a, dim: int, size: int, step: int, input_shape=None):
    """The strided view of ``a``'s windows (a new last dim of length ``size``)."""
    if a.ndim == 0:
        return a.reshape(1)
    shape = list(a.shape)
    strides = list(a.strides)
    n = _windows(shape[dim], size, step)
    shape[dim] = n
    strides[dim] = a.strides[dim] * step
    shape.append(size)
    strides.append(a.strides[dim])
    if isinstance(a, np.ndarray):
        writeable = np.ndarray.flags.__get__(a).writeable
        v = np.lib.stride_tricks.as_strided(a, tuple(shape), tuple(strides),
                                            writeable=writeable)
        return v if type(a) is np.ndarray else v.view(type(a))
    return array_namespace(a).lib.stride_tricks.as_strided(a, tuple(shape), tuple(strides))


def _unfold_backward_ref(g, input_shape, dim: int, size: int, step: int):
    """Zeros of ``input_shape`` with each window's gradient (``g``'s last dim) added where
    the window lies, one window position at a time (a fixed order)."""
    out = array_namespace(g).zeros(tuple(input_shape), g.dtype)
    if not input_shape:
        out[...] = g.reshape(())
        return out
    n = g.shape[dim]
    for j in range(size):
        if n:
            cut = (slice(None),) * dim + (slice(j, j + step * (n - 1) + 1, step),)
            out[cut] += g[..., j]
    return out


UNFOLD_BACKWARD = defop(
    name="unfold_backward", kind=OPAQUE, inputs=("g",),
    params=("input_shape", "dim", "size", "step"), node="UnfoldBackwardBackward0",
    ref=_unfold_backward_ref, cast_grads=True,
    vjp=lambda gg, ins, out, p, n: (call(UNFOLD, (gg,), {
        "dim": p["dim"], "size": p["size"], "step": p["step"],
        "input_shape": tuple(p["input_shape"])}),),
    samples=S.unfold_backward,
    complex="holomorphic")


def _unfold_vjp(g, ins, out, p, n):
    return (call(UNFOLD_BACKWARD, (g,), {"input_shape": p["input_shape"], "dim": p["dim"],
                                         "size": p["size"], "step": p["step"]}),)


UNFOLD = defop(
    name="unfold", kind=OPAQUE, inputs=("a",), params=("dim", "size", "step", "input_shape"),
    node="UnfoldBackward0", cast_grads=True, vjp=_unfold_vjp, ref=_unfold_ref,
    samples=S.unfold,
    complex="holomorphic")


@api(UNFOLD, method="unfold")
def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """A view of ``input`` holding its windows of ``size`` elements every ``step`` along
    ``dimension``: that dim becomes the number of windows, and a last dim of ``size`` is
    added.

    >>> import jitgrad
    >>> jitgrad.arange(5.).unfold(0, 2, 2)
    tensor([[0., 1.],
            [2., 3.]])
    """
    d = wrap_dim(dimension, input.dim())
    n = input.shape[d] if input.dim() else 1
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is "
                           f"{size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return call(UNFOLD, (input,), {"dim": d, "size": int(size), "step": int(step),
                                   "input_shape": tuple(input.shape)}, view_of=input)


@api(UNFOLD_BACKWARD)
def unfold_backward(grad: Tensor, input_shape, dim: int, size: int, step: int) -> Tensor:
    """The gradient of ``unfold(dim, size, step)`` of a tensor of ``input_shape`` for the
    output gradient ``grad``: each window's gradient added back where the window lies."""
    return call(UNFOLD_BACKWARD, (grad,), {"input_shape": tuple(input_shape),
                                           "dim": wrap_dim(dim, max(len(input_shape), 1)),
                                           "size": int(size), "step": int(step)})
