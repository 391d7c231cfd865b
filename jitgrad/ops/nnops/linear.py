"""``addmm`` (bias + mat1 @ mat2 in one BLAS call plus an in-place bias add) and ``linear``,
which records the same nodes as PyTorch (``AddmmBackward0`` for a 2-D input with bias,
``MmBackward0`` without, a view around ``addmm`` for other ranks)."""

from __future__ import annotations

import numpy as np

from ...amp.autocast_mode import autocast_op
from ...kernels.parallel import note_blas
from ...shapes import broadcast_shapes, fmt_shape
from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..dispatch import as_tensor_arg, call
from ..linalg import MATMUL, _blas_matmul, matmul, rhs_grad
from ..registry import OPAQUE, defop

__all__ = ["addmm", "linear"]


def _addmm_ref(bias, a, b):
    return (np.matmul(a, b) + bias).astype(np.result_type(a.dtype, b.dtype), copy=False)


def _addmm_eager(bias, a, b):
    if a.dtype == np.float16 and isinstance(a, np.ndarray):  # float32 sums, one rounding
        f32 = np.float32
        return (_blas_matmul(a.astype(f32), b.astype(f32)) + bias.astype(f32)).astype(a.dtype)
    out = np.matmul(a, b)
    note_blas(out.size * a.shape[-1])
    out += bias  # in place: saves the pass and the allocation of a separate add
    return out


def _addmm_vjp(g, ins, out, p, n):
    _, a, b = ins
    return (g if n[0] else None,
            matmul(g, b.t()) if n[1] else None,
            rhs_grad(a, g, b) if n[2] else None)


ADDMM = defop(name="addmm", kind=OPAQUE, node="AddmmBackward0", inputs=("bias", "mat1", "mat2"),
              ref=_addmm_ref, fwd=_addmm_eager, vjp=_addmm_vjp, save=(1, 2), cast_grads=True,
              samples=S.addmm, complex="holomorphic",
              # a plan may run it as matmul + add, the add fused into the readers' kernel
              extra={"fresh_output": True, "epilogue": ("matmul", "add")})


@api(ADDMM, MATMUL, method="addmm", export="addmm")
@autocast_op
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` for matrices ``mat1``, ``mat2`` (``input``
    broadcasts; with ``beta`` 0 it is ignored, NaNs included, as in PyTorch). The default
    scales are one op (``AddmmBackward0``), others a product, a scale and a sum.

    >>> import jitgrad
    >>> jitgrad.addmm(jitgrad.ones(2), jitgrad.eye(2), jitgrad.eye(2))
    tensor([[2., 1.],
            [1., 2.]])
    """
    input = as_tensor_arg(input, "input")
    mat1 = as_tensor_arg(mat1, "mat1")
    mat2 = as_tensor_arg(mat2, "mat2")
    sa, sb = mat1._data.shape, mat2._data.shape
    if len(sa) != 2 or len(sb) != 2:
        raise RuntimeError(f"addmm: expected 2-D matrices, got mat1 {fmt_shape(sa)} and mat2 "
                           f"{fmt_shape(sb)}")
    if sa[1] != sb[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({sa[0]}x{sa[1]} and "
                           f"{sb[0]}x{sb[1]})")
    try:
        broadcast_shapes(input._data.shape, (sa[0], sb[1]))
    except RuntimeError:
        raise RuntimeError(
            f"addmm: input of shape {fmt_shape(input._data.shape)} cannot be broadcast to the "
            f"product's shape {fmt_shape((sa[0], sb[1]))}") from None
    for name, t in (("self", input), ("mat1", mat1)):  # (PyTorch's order and messages)
        if t._data.dtype != mat2._data.dtype:  # (NumPy dtypes: one per jitgrad dtype)
            raise RuntimeError(f"{name} and mat2 must have the same dtype, but got "
                               f"{t.dtype.tensor_type[:-6]} and {mat2.dtype.tensor_type[:-6]}")
    if beta == 1 and alpha == 1:
        return call(ADDMM, (input, mat1, mat2))
    product = matmul(mat1, mat2)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return input * beta + product


@api(ADDMM, MATMUL)
@autocast_op
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` over the last dimension of ``input``.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.linear(jitgrad.ones(1, 2), jitgrad.ones(3, 2), jitgrad.zeros(3))
    tensor([[2., 2., 2.]])
    """
    input = as_tensor_arg(input, "input")
    nd, wnd = input._data.ndim, weight.ndim
    wt = weight.t() if wnd == 2 else weight
    if bias is None and nd > 2 and wnd == 2 and \
            input._data.shape[-1] == weight._data.shape[1]:
        # rows of every batch in one GEMM, as PyTorch's linear: the weight's gradient is one
        # product in its own layout (rhs_grad), not a batched product summed over the batch
        from ..views import _reshape

        shape = input._data.shape
        out = matmul(input.reshape(-1, shape[-1]), wt)
        # (PyTorch's matmul folds the batch into mm and unfolds with _unsafe_view)
        return _reshape(out, (*shape[:-1], weight._data.shape[0]), "UnsafeViewBackward0")
    if bias is None or nd == 0:
        out = matmul(input, wt)
        return out if bias is None else out + bias
    shape = input._data.shape
    if wnd == 2 and shape[-1] != weight._data.shape[1]:
        rows = int(np.prod(shape[:-1], dtype=np.int64))
        o, i = weight._data.shape
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{shape[-1]} and "
                           f"{i}x{o})")
    if nd == 2 and wnd == 2:
        return addmm(bias, input, wt)
    if wnd != 2:
        return matmul(input, wt) + bias
    out = addmm(bias, input.reshape(-1, shape[-1]), wt)
    return out.reshape(*shape[:-1], weight._data.shape[0])
