"""Matrix products on BLAS (NumPy's ``matmul``): 1-D, 2-D and batched with broadcasting."""

from __future__ import annotations

import numpy as np

from .. import devices
from ..amp.autocast_mode import autocast_op
from ..kernels.blas_batch import batched_matmul
from ..kernels.parallel import note_blas
from ..shapes import broadcast_shapes, fmt_shape
from ..tensor import Tensor
from .api import api
from .arithmetic import ADD, MUL
from .dispatch import as_tensor_arg, call
from .eager_kernels import PREPARED, prepare_process
from .inplace import write_out
from .registry import OPAQUE, defop

__all__ = ["matmul", "mm", "mv", "dot", "bmm", "outer", "linear"]


def _node_name(p) -> str:
    if p.get("bmm"):
        return "BmmBackward0"
    na, nb = p["ndims"]
    if na == 1 and nb == 1:
        return "DotBackward0"
    if na == 2 and nb == 1:
        return "MvBackward0"
    if na == 2 and nb == 2:
        return "MmBackward0"
    if na == 1 and nb == 2:
        return "SqueezeBackward4"
    return "UnsafeViewBackward0"


_F16 = np.dtype(np.float16)


def _half_via_float(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A float16 product on the host: float32 BLAS over the exactly widened operands, rounded
    once to float16 (PyTorch's CPU and cuBLAS accumulate float16 products in float32;
    NumPy's own float16 matmul rounds every partial sum and runs no BLAS: ~100x slower)."""
    return _blas_matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)


def _blas_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` through NumPy's BLAS, noting the call (see ``kernels.parallel.note_blas``);
    a batch of small matrices with the batch split across the pool (the same GEMM per
    matrix: ``kernels.blas_batch``)."""
    if not PREPARED:
        prepare_process()
    if a.dtype.kind == "c":  # (complex: NumPy's own product, never the float kernels)
        return np.matmul(a, b)
    if a.dtype == _F16 and isinstance(a, np.ndarray):
        return _half_via_float(a, b)
    if a.ndim > 2 or b.ndim > 2:
        out = batched_matmul(a, b)
        if out is not None:
            return out
    out = np.matmul(a, b)
    if type(out) is not np.ndarray and devices.is_cpu_array(out):  # a NumPy scalar
        out = np.asarray(out)
    note_blas(out.size * (a.shape[-1] if a.ndim else 1))
    return out


def _blas_matmul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray, **params) -> np.ndarray:
    """``a @ b`` written into ``out`` (C-contiguous, the product's shape and dtype): the same
    BLAS call as :func:`_blas_matmul`, storing where a plan placed the value."""
    if not PREPARED:
        prepare_process()
    if a.dtype == _F16 and isinstance(a, np.ndarray):
        out[...] = _half_via_float(a, b)
        return out
    if (a.ndim > 2 or b.ndim > 2) and batched_matmul(a, b, out) is not None:
        return out
    np.matmul(a, b, out=out)
    note_blas(out.size * (a.shape[-1] if a.ndim else 1))
    return out


def _matmul_vjp(g, ins, out, p, n):
    a, b = ins
    na, nb = p["ndims"]
    # lift 1-D operands to matrices, as matmul does, so one rule covers every case
    a2 = a.unsqueeze(0) if na == 1 else a
    b2 = b.unsqueeze(-1) if nb == 1 else b
    shape2 = list(g._data.shape)
    if nb == 1:
        shape2.append(1)
    if na == 1:
        shape2.insert(len(shape2) - 1, 1)
    g2 = g.reshape(shape2) if len(shape2) != g._data.ndim else g
    ga = gb = None
    if n[0]:
        ga = matmul(g2, b2.transpose(-1, -2))
        ga = _reduce_to(ga, a2._data.shape)
        if na == 1:
            ga = ga.reshape(a._data.shape)
    if n[1]:
        gb = rhs_grad(a2, g2, b2)
        gb = _reduce_to(gb, b2._data.shape)
        if nb == 1:
            gb = gb.reshape(b._data.shape)
    return ga, gb


def rhs_grad(a: Tensor, g: Tensor, b: Tensor) -> Tensor:
    """The gradient of ``b`` in ``a @ b`` for the output gradient ``g``: ``a.T @ g``, or, for
    a transposed 2-D ``b`` (a linear layer's ``weight.t()``), ``(g.T @ a).T``: the product
    then comes out in the weight's own layout, so its ``.grad`` and the optimizer read it
    contiguously, as PyTorch computes a linear layer's weight gradient. Eager and compiled
    mode both take this rule, so both make the same BLAS call (the two forms differ in the
    last bit on some BLAS builds: ``compiler.passes.transposed_product_exact``). The choice
    follows ``b``'s memory layout when the function is traced; each argument's layout is
    part of a compiled function's key (``jit.function.layout_class``), so an argument
    passed in another layout traces again. A captured tensor whose array is replaced by
    one of another layout (``p.data = w.t()``) is not re-checked: its plan keeps the traced
    form, and on such BLAS builds its gradient may differ from eager mode's in the last
    bit."""
    bd = b._data
    if a.ndim == 2 and bd.ndim == 2 and bd.flags.f_contiguous and not bd.flags.c_contiguous:
        return matmul(g.transpose(-1, -2), a).transpose(-1, -2)
    return matmul(a.transpose(-1, -2), g)


def _reduce_to(g: Tensor, shape) -> Tensor:
    gs = g._data.shape
    if gs == shape:
        return g
    lead = len(gs) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and gs[lead + i] != 1)
    r = g.sum(dim=axes, keepdim=True)
    return r.reshape(shape)


MATMUL = defop(name="matmul", kind=OPAQUE, inputs=("a", "b"), params=("ndims",),
               node=_node_name, ref=lambda a, b, ndims, bmm=False: _blas_matmul(a, b),
               vjp=_matmul_vjp, save=(0, 1), cast_grads=True, matmul=True,
               complex="holomorphic",
               extra={"into": _blas_matmul_into})


def _check_shapes(sa, sb) -> None:
    na, nb = len(sa), len(sb)
    if na == 0 or nb == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {na}D and {nb}D"
        )
    if na == 1 and nb == 1:
        if sa[0] != sb[0]:
            raise RuntimeError(
                f"inconsistent tensor size, expected tensor [{sa[0]}] and src [{sb[0]}] to have "
                f"the same number of elements, but got {sa[0]} and {sb[0]} elements respectively"
            )
        return
    if na == 2 and nb == 1:
        if sa[1] != sb[0]:
            raise RuntimeError(
                f"size mismatch, got input ({sa[0]}), mat ({sa[0]}x{sa[1]}), vec ({sb[0]})"
            )
        return
    k_a = sa[-1]
    k_b = sb[-2] if nb >= 2 else sb[0]
    if k_a != k_b:
        if na <= 2 and nb <= 2:
            ma = f"{sa[0]}x{sa[1]}" if na == 2 else f"1x{sa[0]}"
            raise RuntimeError(
                f"mat1 and mat2 shapes cannot be multiplied ({ma} and {sb[0]}x{sb[1]})"
            )
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: "
            f"[{fmt_shape(sa[:-2])[1:-1]}, {k_a}] but got: [{fmt_shape(sb[:-2])[1:-1]}, {k_b}]; "
            f"matmul shapes {fmt_shape(sa)} and {fmt_shape(sb)} cannot be multiplied"
        )
    if na > 2 or nb > 2:
        broadcast_shapes(sa[:-2] if na > 1 else (), sb[:-2] if nb > 1 else (), "matmul")


@api(MATMUL, method=("matmul", "__matmul__"), export="matmul")
@autocast_op
def matmul(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """Matrix product with NumPy/PyTorch semantics (1-D, 2-D, batched, broadcast batch dims);
    written into ``out`` when given."""
    input = as_tensor_arg(input, "input")
    other = as_tensor_arg(other, "other")
    sa, sb = input._data.shape, other._data.shape
    _check_shapes(sa, sb)
    if input._data.dtype != other._data.dtype:
        if len(sa) == len(sb) == 1:  # (PyTorch's dot)
            raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                               f"{input.dtype.tensor_type[:-6]} and "
                               f"{other.dtype.tensor_type[:-6]}")
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {input.dtype.cpp_name} != "
            f"{other.dtype.cpp_name}"
        )
    r = call(MATMUL, (input, other), {"ndims": (len(sa), len(sb))})
    return r if out is None else write_out(out, r, "matmul")


@api(MATMUL, method="__rmatmul__")
def _rmatmul(self, other):
    """``other @ self``."""
    return matmul(other, self)


@api(MATMUL, method="mm", export="mm")
@autocast_op
def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Product of two matrices."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(
            f"mm: expected 2D tensors, got {input.ndim}D and {mat2.ndim}D tensors"
        )
    return matmul(input, mat2)


@api(MATMUL, method="mv", export="mv")
@autocast_op
def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix-vector product."""
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(
            f"vector + matrix @ vector expected, got {input.ndim}, {vec.ndim}"
        )
    return matmul(input, vec)


@api(MATMUL, method="dot", export="dot")
@autocast_op
def dot(input: Tensor, other: Tensor) -> Tensor:
    """Inner product of two 1-D tensors."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(
            f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors"
        )
    return matmul(input, other)


@api(MATMUL, method="bmm", export="bmm")
@autocast_op
def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched product of 3-D tensors (no broadcasting)."""
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if input.ndim != 3
                           else "batch2 must be a 3D tensor")
    sa, sb = input._data.shape, mat2._data.shape
    if sb[0] != sa[0] or sb[1] != sa[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{sa[0]}, {sa[2]}] but got: [{sb[0]}, {sb[1]}].")
    if input._data.dtype != mat2._data.dtype:
        raise RuntimeError(f"expected scalar type {input.dtype.tensor_type[:-6]} but found "
                           f"{mat2.dtype.tensor_type[:-6]}")
    return call(MATMUL, (input, mat2), {"ndims": (3, 3), "bmm": True})


@api(MUL, method="outer", export="outer")
def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two 1-D tensors."""
    for name, t in (("self", input), ("vec2", vec2)):
        if t.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.ndim}-D")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


@api(MATMUL, ADD)
@autocast_op
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``."""
    out = matmul(input, weight.t() if weight.ndim == 2 else weight)
    return out + bias if bias is not None else out
