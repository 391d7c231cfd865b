"""Vector norms: ``linalg.vector_norm`` as one op (PyTorch's ``LinalgVectorNormBackward0``,
with its gradient conventions at zero and at ties), and ``norm`` (``torch.norm``,
``Tensor.norm``) dispatching to it as PyTorch does.

The gradient follows PyTorch's ``norm_backward`` exactly: ``ord=2`` gives 0 where the norm
is 0 (not NaN), ``inf``/``-inf`` split the gradient evenly between the tied extremes (and
NaNs), ``ord=0`` has no gradient.
"""

from __future__ import annotations

import math

import numpy as np

from ..amp.autocast_mode import autocast_op
from ..devices import array_namespace, row_major
from ..tensor import Tensor
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .eager_kernels import use_kernels
from .inplace import write_out
from .reduce_base import Exactly, kept_shape, reduce_params
from .registry import REDUCE, defop

__all__ = ["vector_norm", "norm"]


def _vector_norm_ref(a, dims, keepdim, shape, ord=2.0):
    """NumPy vector norm over ``dims`` in ``a``'s dtype."""
    x = np.abs(a)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if ord == 2.0:
            r = np.sqrt(np.sum(x * x, axis=dims, keepdims=keepdim))
        elif ord == 1.0:
            r = np.sum(x, axis=dims, keepdims=keepdim)
        elif ord == math.inf:
            r = np.max(x, axis=dims, keepdims=keepdim)
        elif ord == -math.inf:
            r = np.min(x, axis=dims, keepdims=keepdim)
        elif ord == 0.0:
            r = np.sum(x != 0, axis=dims, keepdims=keepdim)
        else:
            r = np.sum(x ** ord, axis=dims, keepdims=keepdim) ** (1.0 / ord)
    # (row-major, as PyTorch's: NumPy reduces in the input's memory order)
    return row_major(array_namespace(a).asarray(r, dtype=a.dtype))


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _vector_norm_eager(a, dims, keepdim, shape, ord=2.0):
    """The 2-norm of a whole float array (what ``clip_grad_norm_`` takes of each gradient)
    on one kernel: squares summed in float64 in a fixed order (``kernels/reduce.
    sum_squares``), its square root rounded to ``a``'s dtype; eager mode and plans both run
    it. Other norms, partial reductions, devices: NumPy's formulation."""
    if (ord != 2.0 or type(a) is not np.ndarray or a.dtype not in (_F32, _F64)
            or a.size == 0 or len(dims) != a.ndim or not use_kernels()):
        return _vector_norm_ref(a, dims, keepdim, shape, ord)
    from ..kernels.reduce import sum_squares

    flat = a.reshape(-1) if a.flags.c_contiguous else np.ascontiguousarray(a).reshape(-1)
    r = np.asarray(math.sqrt(sum_squares(flat)), dtype=a.dtype)
    return r.reshape((1,) * a.ndim) if keepdim else r


def _vector_norm_vjp(g, ins, out, p, n):
    """PyTorch's ``norm_backward`` for a real input."""
    x, o = ins[0], out
    ord, dims = p["ord"], p["dims"]
    if ord == 0.0:
        return (None,)
    if not p["keepdim"] and x.ndim:
        g = g.reshape(kept_shape(p["shape"], dims))
        o = o.reshape(kept_shape(p["shape"], dims))
    if ord == 1.0:
        return (x.sign() * g,)
    zero = o == 0.0
    if ord == 2.0:
        return (g * (x / o).masked_fill(zero, 0.0),)
    if math.isinf(ord):
        ax = x.abs()
        mask = (ax == o).logical_or(ax != ax)  # the extremes, and NaNs
        return (x.sign() * ((g / mask.sum(dim=Exactly(dims), keepdim=True)) * mask),)
    if ord < 1.0:
        scaled = x.sign() * x.abs().pow(ord - 1.0).masked_fill(x == 0.0, 0.0)
        return (scaled * g * o.pow(1.0 - ord),)
    scaled = x.sign() * x.abs().pow(ord - 1.0) if ord < 2.0 else x * x.abs().pow(ord - 2.0)
    return (scaled * (g / o.pow(ord - 1.0)).masked_fill(zero, 0.0),)


VECTOR_NORM = defop(
    name="vector_norm", kind=REDUCE, inputs=("a",), params=("dims", "keepdim", "shape", "ord"),
    node="LinalgVectorNormBackward0", ref=_vector_norm_ref, fwd=_vector_norm_eager,
    vjp=_vector_norm_vjp, save=(0,),
    save_out=True, samples=S.vector_norm)


def _type_name(t: Tensor) -> str:
    return t.dtype.tensor_type[:-len("Tensor")]


def _ord_arg(ord) -> float:
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg.vector_norm(): argument 'ord' must be Number, not "
                        f"{type(ord).__name__}")
    return float(ord)


@api(VECTOR_NORM)
def vector_norm(x: Tensor, ord: float = 2, dim=None, keepdim: bool = False, *, dtype=None,
                out=None) -> Tensor:
    """The vector ``ord``-norm of ``x`` over ``dim`` (all elements when None), as
    ``torch.linalg.vector_norm``: ``ord`` 2, 1, ``inf``, ``-inf``, 0 (the count of non-zeros)
    or any other number (``sum(|x|**ord) ** (1/ord)``). ``dtype``: ``x`` is converted to it
    first.

    >>> import jitgrad
    >>> jitgrad.linalg.vector_norm(jitgrad.tensor([3.0, -4.0]))
    tensor(5.)
    >>> jitgrad.linalg.vector_norm(jitgrad.tensor([3.0, -4.0]), ord=float("inf"))
    tensor(4.)
    """
    x = as_tensor_arg(x, "input")
    o = _ord_arg(ord)
    if dtype is not None:
        x = x.to(dtype)
    if x.dtype.is_complex:  # the norm of the moduli (real, the parts' dtype)
        x = x.abs()
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {_type_name(x)}")
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        dim = None
    p = reduce_params(x, dim, keepdim, "linalg.vector_norm")
    p.pop("full")
    p["ord"] = o
    if o < 0.0 or math.isinf(o):
        shape = x._data.shape
        if x._data.size == 0 and dim is None:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty "
                               f"tensor because the operation does not have an identity")
        for d in p["dims"]:
            if shape[d] == 0:
                raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on the "
                                   f"dimension {d}because this dimension is empty and the "
                                   f"operation does not have an identity")
    res = call(VECTOR_NORM, (x,), p)
    return res if out is None else write_out(out, res, "linalg_vector_norm")


def _matrix_norm(x: Tensor, p, dim, keepdim: bool, dtype) -> Tensor:
    """``torch.linalg.matrix_norm``'s argument checks; the Frobenius or nuclear norm over two
    dims."""
    dims = list(range(x.ndim)) if dim is None else ([dim] if isinstance(dim, int) else
                                                     list(dim))
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                           f"{' '.join(str(d) for d in dims)}")
    if p == "fro":
        return vector_norm(x, 2, dims, keepdim, dtype=dtype)
    if p == "nuc":  # the sum of the singular values (linalg.matrix_norm's)
        from .matrix_functions import matrix_norm

        return matrix_norm(x, "nuc", tuple(dims), keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")


@api(VECTOR_NORM, method="norm", export="norm")
@autocast_op
def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, out=None,
         dtype=None) -> Tensor:
    """The ``p``-norm of ``input`` over ``dim`` (all elements when None), as ``torch.norm``:
    ``p`` a number (a vector norm, :func:`vector_norm`), ``"fro"`` (the 2-norm over all
    elements, one or two dims) or ``None`` (2).

    >>> import jitgrad
    >>> x = jitgrad.tensor([[1.0, 2.0, 3.0], [-1.0, 1.0, 4.0]])
    >>> x.norm(dim=1)
    tensor([3.7417, 4.2426])
    >>> jitgrad.norm(x, p=1, dim=1)
    tensor([6., 6.])
    """
    input = as_tensor_arg(input, "input")
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            res = vector_norm(input, 2, dim, keepdim, dtype=dtype)
        else:
            res = _matrix_norm(input, p, dim, keepdim, dtype)
    else:
        res = vector_norm(input, 2.0 if p is None else p, dim, keepdim, dtype=dtype)
    return res if out is None else write_out(out, res, "norm")
