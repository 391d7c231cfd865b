"""``torch.linalg`` functions written with other jitgrad functions, so their gradients (and
``create_graph``, and ``jitgrad.compile``) are those functions': ``cond`` (the 2-norms
through ``svdvals``, the other norms as ``norm(A) * norm(inv(A))``, PyTorch's way),
``vander`` (a running product of powers), ``diagonal``, ``tensorinv`` (``inv`` of a
reshape) and ``tensorsolve`` (``solve`` of a reshape), with PyTorch's checks and errors.
"""

from __future__ import annotations

import math

from ..tensor import Tensor
from .decompositions import LinAlgError, _type_name
from .dispatch import as_tensor_arg

__all__ = ["cond", "vander", "diagonal", "tensorinv", "tensorsolve"]


def _write(out, r: Tensor, name: str) -> Tensor:
    if out is None:
        return r
    from .inplace import write_out

    return write_out(out, r, name)


def _cond_square(A: Tensor, name: str) -> None:
    """PyTorch's ``squareCheckInputs`` (no dtype check: the norms raise theirs)."""
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _cond_by_inverse(A: Tensor, ord) -> Tensor:  # noqa: A002 - PyTorch's name
    """``norm(A) * norm(inv(A))``: an infinite inverse where ``A`` is singular, and
    ``0 * inf`` taken as ``inf`` (PyTorch's ``_linalg_cond_helper``)."""
    from .decompositions import inv_ex
    from .matrix_functions import matrix_norm
    from .selection import where
    from .value_tests import nan_to_num

    inverse, info = inv_ex(A)
    inverse = where((info > 0).unsqueeze(-1).unsqueeze(-1), math.inf, inverse)
    r = matrix_norm(A, ord) * matrix_norm(inverse, ord)
    return nan_to_num(r, math.inf, math.inf, -math.inf)


def _fmt(ord) -> str:  # noqa: A002
    """A number as C++ streams a double (``3``, ``2.5``, ``inf``)."""
    return f"{float(ord):g}"


def cond(A: Tensor, p=None, *, out=None) -> Tensor:
    """The condition number of each matrix of ``A`` in the norm ``p``
    (``torch.linalg.cond``): ``None`` / ``2`` / ``-2`` the ratio of its largest and smallest
    singular values (any shape), ``'fro'``, ``'nuc'``, ``1``, ``-1``, ``inf``, ``-inf``
    ``norm(A) * norm(A^-1)`` (square matrices; ``inf`` where ``A`` is singular). An empty
    matrix's is 0.

    >>> import jitgrad
    >>> jitgrad.linalg.cond(jitgrad.tensor([[2.0, 0.0], [0.0, 0.5]]))
    tensor(4.)
    """
    from ..creation import zeros
    from .decompositions import svdvals

    A = as_tensor_arg(A, "A")
    if isinstance(p, str):
        _cond_square(A, f"linalg.cond(ord={p})")
        if p not in ("fro", "nuc"):
            raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
        if A.numel() == 0:
            return _write(out, zeros(*A.shape[:-2], dtype=A.dtype, device=A.device),
                          "linalg.cond")
        if p == "nuc":  # (matrix_norm's 'nuc' of an infinite inverse would raise)
            s = svdvals(A)
            return _write(out, s.sum(-1) * s.reciprocal().sum(-1), "linalg.cond")
        return _write(out, _cond_by_inverse(A, p), "linalg.cond")
    if A.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    ord = 2 if p is None else p  # noqa: A001
    if isinstance(ord, bool) or abs(ord) not in (1, 2, math.inf):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {_fmt(ord)}")
    if A.numel() == 0:
        return _write(out, zeros(*A.shape[:-2], dtype=A.dtype, device=A.device), "linalg.cond")
    if abs(ord) == 2:
        s = svdvals(A)
        k = s.shape[-1]
        s_max, s_min = s.narrow(-1, 0, 1), s.narrow(-1, k - 1, 1)
        r = s_min / s_max if ord < 0 else s_max / s_min
        return _write(out, r.squeeze(-1), "linalg.cond")
    shown = (f"{float(ord):f}" if isinstance(ord, float) and math.isfinite(ord)
             else _fmt(ord) if isinstance(ord, float) else str(int(ord)))
    _cond_square(A, f"linalg.cond(ord={shown})")
    return _write(out, _cond_by_inverse(A, ord), "linalg.cond")


def vander(x: Tensor, *, N: int | None = None) -> Tensor:  # noqa: N803 - PyTorch's name
    """The Vandermonde matrices of the vectors ``x`` (``(..., n)`` -> ``(..., n, N)``):
    column ``j`` is ``x ** j`` (increasing powers; ``N`` columns, default ``n``), as a
    running product (``torch.linalg.vander``; integers give int64).

    >>> import jitgrad
    >>> jitgrad.linalg.vander(jitgrad.tensor([1, 2, 3]))
    tensor([[1, 1, 1],
            [1, 2, 4],
            [1, 3, 9]])
    """
    from .. import dtypes
    from ..creation import ones
    from .concat import cat

    x = as_tensor_arg(x, "x")
    dt = x.dtype
    if dt.is_floating_point and dt.np.itemsize < 4 or dt == dtypes.bool_:
        raise RuntimeError(f"linalg.vander supports floating point, complex, and integer "
                           f"tensors, but got {_type_name(x)}")
    x = x.unsqueeze(-1) if x.ndim == 0 else x
    n = x.shape[-1] if N is None else int(N)
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    if not (dt.is_floating_point or dt.is_complex):
        x = x.to(dtypes.int64)
    powers = x.unsqueeze(-1).expand(*x.shape, n - 1).cumprod(-1)
    return cat([ones(*x.shape, 1, dtype=x.dtype, device=x.device), powers], -1)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonal ``offset`` of the matrices of ``A`` over ``dim1`` and ``dim2`` (the last
    two by default), a view (``torch.linalg.diagonal``: ``torch.diagonal``'s defaults)."""
    from ..shapes import wrap_dim
    from .diagonals import diagonal as torch_diagonal

    A = as_tensor_arg(A, "A")
    wrap_dim(dim1, A.ndim)  # (PyTorch's IndexError for dims out of range, 1-D inputs too)
    wrap_dim(dim2, A.ndim)
    return torch_diagonal(A, offset, dim1, dim2)


def tensorinv(A: Tensor, ind: int = 2, *, out=None) -> Tensor:
    """The tensor ``X`` with ``tensordot(X, A, ind) == I``: the inverse of ``A`` reshaped to
    a square matrix ``prod(A.shape[:ind])`` x ``prod(A.shape[ind:])``, reshaped to
    ``A.shape[ind:] + A.shape[:ind]`` (``torch.linalg.tensorinv``)."""
    from .matrix_functions import inv

    A = as_tensor_arg(A, "A")
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    end, start = tuple(A.shape[ind:]), tuple(A.shape[:ind])
    p_end, p_start = math.prod(end), math.prod(start)
    if p_end != p_start:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {p_end} != {p_start}")
    try:
        r = inv(A.reshape(p_end, p_end))
    except LinAlgError as e:  # PyTorch names the check "inv" here
        raise LinAlgError(str(e).replace("linalg.inv: ", "inv: ", 1)) from None
    return _write(out, r.reshape(*end, *start), "linalg.tensorinv")


def tensorsolve(A: Tensor, B: Tensor, dims=None, *, out=None) -> Tensor:
    """The tensor ``X`` with ``tensordot(A, X, X.ndim) == B``: ``A`` (its ``dims`` moved to
    the end first) reshaped to a square matrix ``prod(B.shape)`` x
    ``prod(A.shape[B.ndim:])``, solved against ``B`` flattened, reshaped to
    ``A.shape[B.ndim:]`` (``torch.linalg.tensorsolve``)."""
    from ..shapes import wrap_dim
    from .matrix_functions import solve

    A, B = as_tensor_arg(A, "A"), as_tensor_arg(B, "B")
    nd = A.ndim
    if dims is not None:
        moved = [wrap_dim(d, nd) for d in ((dims,) if isinstance(dims, int) else dims)]
        rest = [d for d in range(nd) if d not in moved]
        A = A.permute(*rest, *moved)
    shape = tuple(A.shape[B.ndim:])
    p_res, p_other = math.prod(shape), math.prod(tuple(B.shape))
    if p_res != p_other:
        raise RuntimeError(f"Expected self to satisfy the requirement "
                           f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), "
                           f"but got {p_res} != {p_other}")
    r = solve(A.reshape(p_res, p_res), B.reshape(-1))
    return _write(out, r.reshape(*shape) if shape else r.reshape(()), "linalg.tensorsolve")

