"""What the reduction modules share: reduction params, the reduced gradient's broadcast back
and the call of a reduction's eager forward."""

from __future__ import annotations

from ..devices import row_major
from ..shapes import wrap_dims
from ..tensor import Tensor, wrap
from .dispatch import record, recording
from .views import _reshape, expand_to

__all__ = ["ALL", "kept_shape", "expand_back", "count", "reduce_params", "call_reduce"]

ALL = object()  # "no dim given": PyTorch picks the whole-tensor overload (SumBackward0...)


def kept_shape(shape, dims):
    """``shape`` with the reduced ``dims`` kept as size 1 (a ``keepdim=True`` result)."""
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def expand_back(g: Tensor, p: dict) -> Tensor:
    """Broadcast a reduced gradient back to the input shape: reshaped to the kept shape
    (``keepdim=False``), then expanded. A 0-d gradient (a full reduction's: a loss's) when
    nothing records (:func:`~jitgrad.ops.dispatch.recording`: grad mode off, no tracer) is
    expanded directly: the reshape's only other effects are a node and a traced op, and the
    result is the same view (strides 0, ``g``'s memory, base and version counter)."""
    shape, dims = p["shape"], p["dims"]
    if not p["keepdim"] and (g._data.ndim or recording()):
        g = _reshape(g, kept_shape(shape, dims), "ViewBackward0")
    return expand_to(g, shape)


def count(shape, dims) -> int:
    """How many elements a reduction over ``dims`` of ``shape`` combines into one."""
    n = 1
    for d in dims:
        n *= shape[d]
    return n


class Exactly(tuple):
    """Dims as a reduction's params hold them, for the rules that reduce by them again: an
    empty one reduces nothing (a 0-d operand's), where a public ``dim=()`` is every dim."""

    __slots__ = ()


def reduce_params(a: Tensor, dim, keepdim, name):
    """The params of a reduction of ``a`` over ``dim`` (``ALL``: the whole-tensor overload):
    ``dims`` (wrapped, a tuple), ``keepdim``, the input ``shape`` and ``full``."""
    nd = a._data.ndim
    full = dim is ALL
    if full:
        dim, keepdim = None, False
    if dim is None or (type(dim) in (tuple, list) and not dim):  # PyTorch's (): every dim
        dims = tuple(range(nd))
    else:
        dims = wrap_dims(dim, nd, name)
    return {"dims": dims, "keepdim": bool(keepdim), "shape": a._data.shape, "full": full}


def call_reduce(op, a, p):
    """Run reduction ``op`` eagerly on ``a`` with params ``p`` and record its node."""
    if a._data.dtype.kind == "c":
        from .complex_ops import reduce

        return reduce(op, a, p)
    # (row-major, as PyTorch's results: NumPy reduces in the input's memory order)
    res = row_major((op.fwd or op.ref)(a._data, p["dims"], p["keepdim"], p["shape"]))
    return record(op, wrap(res), (a,), p)
