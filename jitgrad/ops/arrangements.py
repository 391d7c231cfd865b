"""Rearranging tensors, written with views and ``cat``: ``repeat``, ``tile``,
``broadcast_to`` / ``broadcast_tensors`` / ``broadcast_shapes``, ``atleast_1d/2d/3d``,
``hstack`` / ``vstack`` / ``dstack`` / ``column_stack`` / ``row_stack``, ``ravel``, ``diff``,
the splits, ``rot90``, ``block_diag``, ``cartesian_prod``, ``combinations``.
Differentiable, traceable and on every device through the ops they call."""

from __future__ import annotations

import numpy as np

from ..creation import check_sizes
from ..shapes import as_shape, keyword_sizes
from ..tensor import Size, Tensor
from .api import api
from .concat import CAT, cat
from .dispatch import as_tensor_arg
from .indexing import GETITEM
from .padding import CONSTANT_PAD
from .reorder import FLIP
from .views import EXPAND, PERMUTE, RESHAPE

__all__ = ["repeat", "tile", "broadcast_to", "broadcast_tensors", "broadcast_shapes",
           "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack",
           "dstack", "column_stack", "ravel", "diff", "tensor_split", "hsplit", "vsplit",
           "rot90", "block_diag", "cartesian_prod", "combinations"]


@api(RESHAPE, EXPAND, method="repeat")
def repeat(input: Tensor, *sizes, repeats=None) -> Tensor:
    """``input`` repeated ``sizes[i]`` times along dim ``i`` (more sizes than dims add
    leading dims), as a new tensor.

    >>> import jitgrad
    >>> jitgrad.tensor([1, 2]).repeat(2, 2)
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    reps = as_shape(keyword_sizes(sizes, repeats, "repeat", "repeats"))
    shape = tuple(input.shape)
    if len(reps) < len(shape):
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than "
                           "number of dimensions of tensor")
    shape = (1,) * (len(reps) - len(shape)) + shape
    if any(r < 0 for r in reps):  # (PyTorch's message names the result's shape)
        check_sizes(tuple(r * s for r, s in zip(reps, shape)))
    interleaved = [n for pair in zip((1,) * len(shape), shape) for n in pair]
    expanded = [n for pair in zip(reps, shape) for n in pair]
    out = input.reshape(*interleaved).expand(*expanded)
    out = out.reshape(*[r * s for r, s in zip(reps, shape)])
    # a new tensor, as PyTorch's: where the reshape could view its input (nothing
    # repeated, or a repeat the strides express) the result is copied, contiguous
    return out if out._base is None else out.clone()


@api(RESHAPE, EXPAND, method="tile", export="tile")
def tile(input: Tensor, *args, dims=None) -> Tensor:
    """``input`` repeated ``dims[i]`` times along dim ``i`` (a tuple, or numbers as the
    method takes them); fewer ``dims`` than dims of ``input`` are padded with leading ones
    (NumPy's ``tile``)."""
    dims = as_shape(keyword_sizes(args, dims, "tile", "dims"))
    nd = input.dim()
    if len(dims) < nd:
        dims = (1,) * (nd - len(dims)) + tuple(dims)
    return repeat(input, *dims)


def broadcast_shapes(*shapes) -> Size:
    """The shape the given shapes (or sizes) broadcast to; PyTorch's error when they do not.

    >>> import jitgrad
    >>> jitgrad.broadcast_shapes((2, 1), (3,), 1)
    jitgrad.Size([2, 3])
    """
    norm = [(int(s),) if isinstance(s, (int, np.integer)) else tuple(as_shape(s))
            for s in shapes]
    result = [1] * max((len(s) for s in norm), default=0)
    for i, s in enumerate(norm):
        for k in range(1, len(s) + 1):
            n = s[-k]
            if result[-k] == 1:
                result[-k] = n
            elif n != 1 and n != result[-k]:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {n} at "
                                   f"{-k}! Mismatching argument at index {i} had {s}; but "
                                   f"expected shape should be broadcastable to {result}")
    return Size(result)


@api(EXPAND, method="broadcast_to", export="broadcast_to")
def broadcast_to(input: Tensor, size) -> Tensor:
    """``input.expand(size)``: a view."""
    return input.expand(*as_shape(size))


@api(EXPAND, export="broadcast_tensors")
def broadcast_tensors(*tensors) -> tuple:
    """The tensors expanded to their common shape (views)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    from ..shapes import broadcast_many

    shape = broadcast_many([tuple(t.shape) for t in tensors])  # (PyTorch's message)
    return tuple(t if tuple(t.shape) == tuple(shape) else t.expand(*shape) for t in tensors)


def _at_least(n: int, tensors):
    single = len(tensors) == 1 and not isinstance(tensors[0], (list, tuple))
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) \
        else tensors
    out = []
    for t in ts:
        t = as_tensor_arg(t)
        nd = t.dim()
        if nd >= n:
            out.append(t)
        elif n == 1 or nd == 0:
            out.append(t.reshape(*((1,) * n)))
        elif n == 2:
            out.append(t.unsqueeze(0))
        else:  # 3-D: (n,) -> (1, n, 1); (a, b) -> (a, b, 1)
            out.append(t.reshape(1, -1, 1) if nd == 1 else t.unsqueeze(-1))
    return out[0] if single else tuple(out)


@api(RESHAPE, export="atleast_1d")
def atleast_1d(*tensors):
    """Each tensor with at least one dim (0-d becomes shape (1,))."""
    return _at_least(1, tensors)


@api(RESHAPE, export="atleast_2d")
def atleast_2d(*tensors):
    """Each tensor with at least two dims (a vector becomes a row)."""
    return _at_least(2, tensors)


@api(RESHAPE, export="atleast_3d")
def atleast_3d(*tensors):
    """Each tensor with at least three dims (NumPy's rule)."""
    return _at_least(3, tensors)


def _listed(tensors, name: str) -> list:
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"expected a sequence of tensors, got {type(tensors).__name__}")
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return list(tensors)


@api(CAT, RESHAPE, export="hstack")
def hstack(tensors) -> Tensor:
    """Concatenated horizontally: along dim 1, or dim 0 for 1-D tensors."""
    ts = _at_least(1, (_listed(tensors, "hstack"),))
    return cat(list(ts), 0 if ts[0].dim() == 1 else 1)


@api(CAT, RESHAPE, export=("vstack", "row_stack"))
def vstack(tensors) -> Tensor:
    """Concatenated vertically (along dim 0), vectors taken as rows."""
    return cat(list(_at_least(2, (_listed(tensors, "vstack"),))), 0)


row_stack = vstack


@api(CAT, RESHAPE, export="dstack")
def dstack(tensors) -> Tensor:
    """Concatenated in depth (along dim 2), after :func:`atleast_3d`."""
    return cat(list(_at_least(3, (_listed(tensors, "dstack"),))), 2)


@api(CAT, RESHAPE, export="column_stack")
def column_stack(tensors) -> Tensor:
    """Vectors (and 0-d tensors) as columns, then concatenated along dim 1."""
    ts = [t.reshape(-1, 1) if t.dim() <= 1 else t
          for t in (as_tensor_arg(t) for t in _listed(tensors, "column_stack"))]
    return cat(ts, 1)


@api(RESHAPE, method="ravel", export="ravel")
def ravel(input: Tensor) -> Tensor:
    """The elements as a 1-D tensor (a view when possible)."""
    return input.reshape(-1)


@api(GETITEM, CAT, method="diff", export="diff")
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (``prepend`` / ``append`` joined
    first); bool tensors give ``!=`` of neighbours, as PyTorch's."""
    input = as_tensor_arg(input)
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    d = dim % input.ndim
    parts = [t for t in (prepend, input, append) if t is not None]
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        length = x.shape[d]
        if length == 0:
            break
        hi, lo = x.narrow(d, 1, length - 1), x.narrow(d, 0, length - 1)
        x = hi != lo if x.dtype.name == "bool" else hi - lo
    return x


def _split_points(n: int, sections) -> list[int]:
    """Cut points of ``tensor_split``: ``sections`` parts (the first ``n % sections`` one
    longer), or the given indices."""
    if isinstance(sections, int):
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        size, extra = divmod(n, sections)
        points, start = [], 0
        for i in range(sections - 1):
            start += size + (1 if i < extra else 0)
            points.append(start)
        return points
    return [int(i) for i in sections]


@api(GETITEM, method="tensor_split", export="tensor_split")
def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple:
    """``input`` cut along ``dim`` into ``sections`` nearly equal parts, or at the given
    indices (views)."""
    input = as_tensor_arg(input)
    d = dim % max(input.ndim, 1)
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    n = input.shape[d]
    bounds = [0] + _split_points(n, indices_or_sections) + [n]
    out = []
    for lo, hi in zip(bounds, bounds[1:]):
        lo, hi = min(max(lo, 0), n), min(max(hi, 0), n)
        out.append(input.narrow(d, lo, max(hi - lo, 0)))
    return tuple(out)


def _even_split(name: str, input: Tensor, sections, dim: int) -> tuple:
    if isinstance(sections, int) and input.shape[dim] % sections:
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the "
                           f"size of the dimension {input.shape[dim]} is not divisible by the "
                           f"split_size {sections}!")
    return tensor_split(input, sections, dim)


@api(GETITEM, method="hsplit", export="hsplit")
def hsplit(input: Tensor, sections) -> tuple:
    """Split horizontally: along dim 1 (dim 0 for a vector)."""
    return _even_split("hsplit", input, sections, 1 if input.ndim > 1 else 0)


@api(GETITEM, method="vsplit", export="vsplit")
def vsplit(input: Tensor, sections) -> tuple:
    """Split vertically: along dim 0 (at least 2 dims)."""
    if input.ndim < 2:
        raise RuntimeError(f"torch.vsplit requires a tensor with at least 2 dimension, but got "
                           f"a tensor with {input.ndim} dimensions!")
    return _even_split("vsplit", input, sections, 0)


@api(FLIP, PERMUTE, method="rot90", export="rot90")
def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotate by ``k`` quarter turns in the plane of ``dims`` (from the first dim towards
    the second): flips and a transpose, as PyTorch's."""
    from .reorder import flip

    input = as_tensor_arg(input)
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (d % input.ndim for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    k %= 4
    if k == 1:
        return flip(input, d1).transpose(d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return flip(input, d0).transpose(d0, d1)
    return input.clone()


@api(CAT, CONSTANT_PAD, export="block_diag")
def block_diag(*tensors) -> Tensor:
    """The block-diagonal matrix of ``tensors`` (0-D: 1x1, 1-D: one row, 2-D: as they are);
    zeros elsewhere; the dtypes promoted."""
    from .. import dtypes
    from ..creation import zeros
    from .padding import pad

    mats = []
    for i, t in enumerate(tensors):
        t = as_tensor_arg(t, "tensors")
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.ndim} dimensions")
        mats.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not mats:
        return zeros(1, 0)
    dt = dtypes.result_type(*mats)
    width = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        c = m.shape[1]
        rows.append(pad(m.to(dt), (left, width - left - c)))
        left += c
    return cat(rows, 0)


@api(RESHAPE, EXPAND, export="cartesian_prod")
def cartesian_prod(*tensors) -> Tensor:
    """The Cartesian product of 1-D ``tensors``: one row per combination (first tensor
    slowest); one tensor is returned as it is."""
    from .views import meshgrid

    ts = [as_tensor_arg(t, "tensors") for t in tensors]
    for t in ts:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(ts) == 1:
        return ts[0]
    from .concat import stack

    return stack([g.reshape(-1) for g in meshgrid(*ts, indexing="ij")], 1)


@api(GETITEM, export="combinations")
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of the 1-D ``input``'s elements (in order; with
    repeats when ``with_replacement``), one per row."""
    import itertools

    from ..creation import tensor
    from .concat import stack

    input = as_tensor_arg(input)
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_zeros((0,))
    pick = (itertools.combinations_with_replacement if with_replacement
            else itertools.combinations)
    idx = np.array(list(pick(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    if idx.shape[0] == 0:
        return input.new_zeros((0, r))
    cols = [input.index_select(0, tensor(idx[:, j], device=input.device)) for j in range(r)]
    return stack(cols, 1)
