"""Reading and writing at index positions, written with the indexing ops (so
differentiable as PyTorch's, on CUDA and compilable): ``take`` / ``put`` (positions in the
flattened tensor), ``index_copy``, ``index_fill``, ``index_put`` (``accumulate`` adds, with
repeated positions summed), ``masked_scatter`` and the ``*_scatter`` functions that write a
tensor into a select / slice / diagonal of a copy (``select_scatter``, ``slice_scatter``,
``diagonal_scatter``), each with its method and in-place form where PyTorch has them.

Indices are op inputs (gathers, scatter-adds and a scatter-max), never values baked into a
compiled plan, so a compiled function follows the indices it is given. A write picks, for
each position, the last value written there (``scatter_reduce``'s ``amax`` of the writes'
order) and gathers it: the input's gradient is zero where written, a value's is the gradient
where it landed. An accumulating write is ``index_add`` (a scatter-add, deterministic).
Indices are checked with PyTorch's errors.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..devices import array_namespace, first_outside, to_host
from ..shapes import wrap_dim
from ..tensor import Tensor
from ..trace.tracer import needs_value
from . import samples as S
from .api import api
from .diagonals import DIAGONAL_BACKWARD, _diagonal_backward_ref, diagonal_backward
from .dispatch import as_tensor_arg, call
from .inplace import INDEX_PUT, apply_inplace
from .registry import OPAQUE, defop
from .scatter_reduce import SCATTER_REDUCE
from .scattering import _kind
from .selection import WHERE, where
from .sorting import GATHER, GATHER_BACKWARD, gather

__all__ = ["take", "put", "put_", "index_copy", "index_copy_", "index_fill", "index_fill_",
           "index_put", "index_put_", "masked_scatter", "masked_scatter_", "select_scatter",
           "slice_scatter", "diagonal_scatter"]


def _shape(s) -> str:
    return "[" + ", ".join(str(int(n)) for n in s) + "]"


def _long_index(index, fn: str) -> Tensor:
    index = as_tensor_arg(index, "index")
    if index.dtype.name != "int64":
        raise RuntimeError(f"{fn}: Expected a long tensor for index, but got {_kind(index)}")
    return index


def _check_flat(index: Tensor, n: int) -> None:
    v = first_outside(index._data, -n, n)
    if v is not None:
        raise IndexError(f"out of range: tried to access index {v} on a tensor of {n} "
                         f"elements.")


def _last_writes(x: Tensor, pos: Tensor, src: Tensor) -> Tensor:
    """``x`` with its slice ``pos[i]`` along dim 0 replaced by ``src[i]`` (``pos`` in
    ``[0, len(x))``; at a repeated position the last write wins)."""
    from ..creation import arange, full

    n, k = x.shape[0], pos.shape[0]
    if not n or not k:
        return x.clone()
    src = src if src.dtype is x.dtype else src.to(x.dtype)
    last = full((n,), -1, dtype=dtypes.int64, device=x.device).scatter_reduce(
        0, pos, arange(k, device=x.device), "amax", include_self=True)
    lead = (n,) + (1,) * (x.dim() - 1)
    picked = gather(src, 0, last.clamp_min(0).reshape(lead).expand(*x.shape))
    return where((last >= 0).reshape(lead), picked, x)


def _hits(n: int, pos: Tensor, device) -> Tensor:
    """A bool vector of length ``n``, true at the positions ``pos``."""
    from ..creation import ones, zeros

    counts = zeros(n, dtype=dtypes.int64, device=device)
    return counts.index_add(0, pos, ones(pos.shape[0], dtype=dtypes.int64, device=device)) > 0


def _wrapped(index: Tensor, n: int) -> Tensor:
    """``index`` flattened, negative positions moved into ``[0, n)``."""
    flat = index.reshape(-1)
    return where(flat < 0, flat + n, flat)


# ------------------------------------------------------------------------ take / put
@api(GATHER, method="take", export="take")
def take(input: Tensor, index: Tensor) -> Tensor:
    """The elements of the flattened ``input`` at ``index`` (negative counts from the end),
    in ``index``'s shape."""
    input = as_tensor_arg(input)
    index = _long_index(index, "take()")
    n = input.numel()
    _check_flat(index, n)
    if not index.numel():
        return input.reshape(-1)[:0].reshape(tuple(index.shape))
    return gather(input.reshape(-1), 0, _wrapped(index, n)).reshape(tuple(index.shape))


@api(SCATTER_REDUCE, GATHER, GATHER_BACKWARD, method="put", export="put")
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of ``input`` with ``source``'s elements written at the positions ``index`` of
    its flattened form (``accumulate``: added, repeated positions summed)."""
    input = as_tensor_arg(input)
    index = _long_index(index, "put_()")
    source = as_tensor_arg(source, "source")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {_kind(input)} and source.dtype = {_kind(source)}")
    if source.numel() != index.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source.numel()}, "
                         f"index.numel() = {index.numel()}")
    n = input.numel()
    _check_flat(index, n)
    flat, pos, src = input.reshape(-1), _wrapped(index, n), source.reshape(-1)
    out = flat.index_add(0, pos, src) if accumulate else _last_writes(flat, pos, src)
    return out.reshape(tuple(input.shape))


@api(SCATTER_REDUCE, GATHER, GATHER_BACKWARD, method="put_")
def put_(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """In-place :func:`put`."""
    return apply_inplace(input, put(input, index, source, accumulate))


# ------------------------------------------------------------- index_copy / index_fill
def _index_copy_ref(input, index, source, dim=0):
    """``input`` with its slices ``index[i]`` along ``dim`` replaced by ``source``'s slices
    ``i``; at a repeated position the last write wins (``source`` has ``input``'s rank)."""
    xp = array_namespace(input)
    out = input.copy()
    idx = to_host(index).reshape(-1)
    if idx.size:
        # the last occurrence of each position: a deterministic write on every device
        last = idx.size - 1 - np.unique(idx[::-1], return_index=True)[1]
        where_ = (slice(None),) * dim
        out[where_ + (xp.asarray(idx[last]),)] = source[where_ + (xp.asarray(last),)]
    return out


def _index_copy_vjp(g, ins, out, p, n):
    """PyTorch's ``IndexCopyBackward0``: the input's gradient is zero where written, the
    source's the gradient at each of its positions (repeated positions too)."""
    index, d = ins[1], p["dim"]
    gs = None
    if n[2]:  # gathered at the positions, the index an op input (a plan follows it)
        shape = list(g._data.shape)
        shape[d] = index._data.shape[0]
        lead = [1] * len(shape)
        lead[d] = shape[d]
        gs = gather(g, d, index.reshape(lead).expand(*shape))
    return (g.index_fill(d, index, 0.0) if n[0] else None, None, gs)


INDEX_COPY = defop(name="index_copy", kind=OPAQUE, node="IndexCopyBackward0",
                   inputs=("input", "index", "source"), params=("dim",), ref=_index_copy_ref,
                   vjp=_index_copy_vjp, save=(1,), samples=S.index_copy)


@api(INDEX_COPY, method="index_copy", export="index_copy")
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """A copy of ``input`` whose slices ``index[i]`` along ``dim`` are ``source``'s slices
    ``i``."""
    input = as_tensor_arg(input)
    index = _long_index(index, "index_copy_()")
    source = as_tensor_arg(source, "source")
    if index.dim() > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got "
                         f"{index.dim()})")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {_kind(input)} and (source) {_kind(source)}")
    d = wrap_dim(dim, max(input.dim(), 1))
    if source.dim() and input.dim() and source.dim() != input.dim():
        raise IndexError(f"index_copy_(): When source and destination are not scalars, their "
                         f"dimensionality must match. Source dimensionality ({source.dim()}), "
                         f"destination dimensionality ({input.dim()})")
    if input.dim() > 1:
        mine = [n for k, n in enumerate(input.shape) if k != d]
        theirs = [n for k, n in enumerate(source.shape) if k != d]
        if mine != theirs:
            raise RuntimeError(
                f"index_copy_(): Source/destination tensor must have same slice shapes. "
                f"Destination slice shape: {', '.join(map(str, mine))} at dimension {d} and "
                f"source slice shape: {', '.join(map(str, theirs))} at dimension 0.")
    count = source.shape[d] if source.dim() else 1
    if index.numel() != count:
        raise IndexError(f"index_copy_(): Number of indices ({index.numel()}) should be equal "
                         f"to source.size(dim) ({count})")
    size = input.shape[d] if input.dim() else 1
    v = first_outside(index._data, 0, size)
    if v is not None:
        raise IndexError(f"index_copy_(): index {v} is out of bounds for dimension {d} with "
                         f"size {size}")
    base = input if input.dim() else input.reshape(1)
    src = source if source.dim() else source.reshape(1)
    out = call(INDEX_COPY, (base, index.reshape(-1), src), {"dim": d})
    return out if input.dim() else out.reshape(())


@api(INDEX_COPY, method="index_copy_")
def index_copy_(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """In-place :func:`index_copy`."""
    return apply_inplace(input, index_copy(input, dim, index, source))


@api(WHERE, GATHER_BACKWARD, method="index_fill", export="index_fill")
def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """A copy of ``input`` with ``value`` (a number or a 0-d tensor, whose gradient is the
    sum over the filled elements) in its slices ``index`` along ``dim``."""
    input = as_tensor_arg(input)
    index = as_tensor_arg(index, "index")
    if index.dtype.name != "int64":
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if isinstance(value, Tensor) and value.dim():
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.dim()} dimension(s).")
    d = wrap_dim(dim, max(input.dim(), 1))
    size = input.shape[d] if input.dim() else 1
    v = first_outside(index._data, -size, size)
    if v is not None:
        raise IndexError(f"index {v} is out of bounds for dimension {d} with size {size}")
    if isinstance(value, Tensor):
        value = value if value.dtype is input.dtype else value.to(input.dtype)
    else:  # a number in the input's dtype (2.5 fills an integer tensor with 2)
        value = input.dtype.np.type(value).item()
    if not index.numel():
        return input.clone()
    hit = _hits(size, _wrapped(index, size), input.device)
    shape = [1] * input.dim()
    if input.dim():
        shape[d] = size
    return where(hit.reshape(shape), value, input)


@api(WHERE, GATHER_BACKWARD, method="index_fill_")
def index_fill_(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """In-place :func:`index_fill`."""
    return apply_inplace(input, index_fill(input, dim, index, value))


# ------------------------------------------------------------------------- index_put
def _index_tuple(indices, input: Tensor) -> list:
    if isinstance(indices, Tensor):
        indices = (indices,)
    out = []
    for i, ix in enumerate(indices):
        if not isinstance(ix, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(ix).__name__}")
        out.append(ix)
    if len(out) > input.dim():
        raise IndexError(f"too many indices for tensor of dimension {input.dim()} (got "
                         f"{len(out)})")
    return out


def _positions(idx: list, input: Tensor) -> list:
    """Boolean masks as the integer positions they select; integer indices checked."""
    out, d = [], 0
    for ix in idx:
        if ix.dtype.name == "bool":
            for k in range(ix.dim()):
                if ix.shape[k] != input.shape[d + k]:
                    raise IndexError(f"The shape of the mask {_shape(ix.shape)} at index {k} "
                                     f"does not match the shape of the indexed tensor "
                                     f"{_shape(input.shape)} at index {d + k}")
            out.extend(ix.nonzero(as_tuple=True) if ix.dim() else [ix.long()])
            d += max(ix.dim(), 1)
            continue
        if ix.dtype.is_floating_point:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        n = input.shape[d]
        v = first_outside(ix._data, -n, n)
        if v is not None:
            raise IndexError(f"index {v} is out of bounds for dimension {d} with size {n}")
        out.append(ix.long())
        d += 1
    return out


@api(INDEX_PUT, SCATTER_REDUCE, GATHER, GATHER_BACKWARD, method="index_put", export="index_put")
def index_put(input: Tensor, indices, values: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of ``input`` with ``values`` written at ``input[indices]`` (a tuple of index
    tensors for the leading dims, integer or boolean); ``accumulate`` adds them instead,
    repeated positions summed."""
    input = as_tensor_arg(input)
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' (position 2) must be Tensor, not "
                        f"{type(values).__name__}")
    if values.dtype is not input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_kind(input)} for the destination and {_kind(values)} for the "
                           f"source.")
    pos = _positions(_index_tuple(indices, input), input)
    k = len(pos)
    if not k:  # no index: every element written
        return (input + values) if accumulate else values.expand(*input.shape).clone()
    lead, rest = tuple(input.shape[:k]), tuple(input.shape[k:])
    from ..shapes import fmt_shape

    try:
        bshape = np.broadcast_shapes(*(tuple(p.shape) for p in pos))
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes " + ", ".join(fmt_shape(p.shape) for p in pos)) from None
    linear = None
    stride = 1
    for p, n in zip(reversed(pos), reversed(lead)):
        p = where(p < 0, p + n, p).expand(*bshape)
        linear = p * stride if linear is None else linear + p * stride
        stride *= n
    vals = values.expand(*bshape, *rest).reshape(-1, *rest)
    flat, linear = input.reshape(-1, *rest), linear.reshape(-1)
    out = flat.index_add(0, linear, vals) if accumulate else _last_writes(flat, linear, vals)
    return out.reshape(tuple(input.shape))


@api(INDEX_PUT, SCATTER_REDUCE, GATHER, GATHER_BACKWARD, method="index_put_")
def index_put_(input: Tensor, indices, values: Tensor, accumulate: bool = False) -> Tensor:
    """In-place :func:`index_put`."""
    return apply_inplace(input, index_put(input, indices, values, accumulate))


# -------------------------------------------------------------------- masked_scatter
@api(GATHER, WHERE, method="masked_scatter", export="masked_scatter")
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of ``input`` (broadcast with ``mask``) whose elements where ``mask`` is true
    are ``source``'s first elements, in order."""
    input, mask = as_tensor_arg(input), as_tensor_arg(mask, "mask")
    source = as_tensor_arg(source, "source")
    if mask.dtype.name != "bool":
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {_kind(mask)}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got{_kind(input)} and {_kind(source)}")
    from ..shapes import broadcast_shapes

    shape = tuple(broadcast_shapes(tuple(mask.shape), tuple(input.shape)))  # (PyTorch's order)
    m = mask.expand(*shape).reshape(-1)
    needs_value(mask, "masked_scatter's mask (how many values it takes from source)")
    count = int(array_namespace(m._data).count_nonzero(m._data))
    if count > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    x = input.expand(*shape).reshape(-1)
    if not count:
        return x.clone().reshape(shape)
    # the element a true position takes: source's running count of true positions before it
    taken = (m.long().cumsum(0) - 1).clamp_min(0)
    picked = gather(source.reshape(-1)[:count], 0, taken)
    return where(m, picked, x).reshape(shape)


@api(GATHER, WHERE, method="masked_scatter_")
def masked_scatter_(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """In-place :func:`masked_scatter` (``mask`` broadcasts to ``input``)."""
    return apply_inplace(input, masked_scatter(input, mask, source))


# ------------------------------------------------- select / slice / diagonal _scatter
def _check_src(src: Tensor, slice_shape) -> None:
    if tuple(src.shape) != tuple(slice_shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size "
                           f"= {_shape(src.shape)}, slice size = {_shape(slice_shape)}")


def _written(input: Tensor, index, src: Tensor) -> Tensor:
    src = src if src.dtype is input.dtype else src.to(input.dtype)
    out = input.clone()
    out[index] = src
    return out


@api(INDEX_PUT, method="select_scatter", export="select_scatter")
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy of ``input`` with ``input.select(dim, index)`` replaced by ``src``."""
    input, src = as_tensor_arg(input), as_tensor_arg(src, "src")
    d = wrap_dim(dim, input.dim())
    n = input.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{_shape(input.shape)} at dimension {d}")
    _check_src(src, input.shape[:d] + input.shape[d + 1:])
    i = int(index) + (n if index < 0 else 0)
    return _written(input, (slice(None),) * d + (i,), src)


@api(INDEX_PUT, method="slice_scatter", export="slice_scatter")
def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> Tensor:
    """A copy of ``input`` with the slice ``start:end:step`` of ``dim`` replaced by
    ``src``."""
    input, src = as_tensor_arg(input), as_tensor_arg(src, "src")
    d = wrap_dim(dim, max(input.dim(), 1))
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    cut = (slice(None),) * d + (slice(start, end, step),)
    shape = list(input.shape)
    shape[d] = len(range(*slice(start, end, step).indices(shape[d])))
    _check_src(src, shape)
    return _written(input, cut, src)


@api(DIAGONAL_BACKWARD, WHERE, method="diagonal_scatter", export="diagonal_scatter")
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0,
                     dim2: int = 1) -> Tensor:
    """A copy of ``input`` with its diagonal ``input.diagonal(offset, dim1, dim2)`` replaced
    by ``src``."""
    from ..creation import tensor

    input, src = as_tensor_arg(input), as_tensor_arg(src, "src")
    diag = input.diagonal(offset, dim1, dim2)  # PyTorch's errors for the dims
    _check_src(src, diag.shape)
    src = src if src.dtype is input.dtype else src.to(input.dtype)
    nd = input.dim()
    d1, d2 = wrap_dim(dim1, nd), wrap_dim(dim2, nd)
    mask = _diagonal_backward_ref(np.ones(tuple(diag.shape), dtype=bool), tuple(input.shape),
                                  int(offset), d1, d2)
    embedded = diagonal_backward(src, tuple(input.shape), offset, d1, d2)
    return where(tensor(mask, device=input.device), embedded, input)
