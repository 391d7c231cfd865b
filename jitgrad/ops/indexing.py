"""Indexing: ``x[index]`` (ints, slices, None, Ellipsis, integer and boolean tensors) and what
is built on it: select, narrow, split, chunk, unbind. Basic indexing gives views, advanced
indexing copies, as in PyTorch."""

from __future__ import annotations

import numpy as np

from ..autograd import grad_mode
from ..devices import add_at, array_namespace, first_outside, is_cpu_array, to_host
from ..shapes import fmt_shape, wrap_dim
from ..tensor import Tensor, mark_view, wrap
from ..trace.state import STATE as _TRACE
from ..trace.tracer import needs_value
from .api import api
from .dispatch import call, record
from .registry import MOVEMENT, defop
from .tensor_index import has_index_tensors, index_with_tensors

_GRAD = grad_mode.STATE

__all__ = ["getitem", "select", "narrow", "split", "chunk", "unbind"]


# ------------------------------------------------------------------------------- getitem
def _index_kind(index) -> str:
    """PyTorch's node for ``x[index]``: advanced indexing runs last (IndexBackward0);
    otherwise the last basic step that does something names the node (full ``:`` slices
    after it are skipped)."""
    if type(index) is _TwoStep:
        return "IndexBackward0"
    items = index if isinstance(index, tuple) else (index,)
    last = Ellipsis  # "no step yet"
    for it in items:
        if it is Ellipsis or (isinstance(it, slice) and it.start is None and it.stop is None
                              and it.step is None):  # (== would compare tensor bounds)
            continue
        if not (it is None or isinstance(it, (int, np.integer, slice))) or isinstance(it, bool):
            return "IndexBackward0"
        last = it
    if last is Ellipsis:
        return "SliceBackward0" if any(isinstance(it, slice) for it in items) \
            else "AliasBackward0"
    if last is None:
        return "UnsqueezeBackward0"
    return "SliceBackward0" if isinstance(last, slice) else "SelectBackward0"


class _TwoStep(tuple):
    """``(basic, rest)``: PyTorch applies integer indices as selects before advanced indexing
    (NumPy would treat them as advanced indices too, which moves dims differently)."""

    __slots__ = ()


def put_at(a, index, v) -> None:
    """``a[index] = v`` for a normalised ``index`` (a :class:`_TwoStep` one writes through
    the view its integer selects make)."""
    if type(index) is _TwoStep:
        a[index[0]][index[1]] = v
    else:
        a[index] = v


def take_at(x, index):
    """``x[index]`` for a normalised ``index`` (a :class:`_TwoStep` one selects first), on a
    tensor (differentiable) or an array."""
    return x[index[0]][index[1]] if type(index) is _TwoStep else x[index]


def _take(a, index):
    """``a[index]`` as an array. An element read by integers alone is a 0-d *view* of
    ``a`` (``a[0, ...]``), as PyTorch's ``x[0]`` is: a later write to ``a`` shows through
    it (NumPy's ``a[0]`` would be a scalar, a copy)."""
    res = a[index[0]][index[1]] if type(index) is _TwoStep else a[index]
    if not isinstance(res, np.ndarray) and type(index) is not _TwoStep:
        try:
            res = a[(index if type(index) is tuple else (index,)) + (Ellipsis,)]
        except (IndexError, TypeError):  # (an index that already has an Ellipsis)
            pass
    if not isinstance(res, np.ndarray):
        res = array_namespace(a).asarray(res)
    return res


def _getitem_bwd_ref(g, index, shape, advanced):
    out = array_namespace(g).zeros(shape, dtype=g.dtype)
    if type(index) is _TwoStep:
        add_at(out[index[0]], index[1], g)
    elif advanced:
        add_at(out, index, g)
    else:
        out[index] = g
    return out


def _split_ints(items: list, ndim: int) -> _TwoStep:
    """Split an index mixing integers and arrays into PyTorch's select-then-index steps."""
    def width(it):
        if it is None or it is Ellipsis:
            return 0
        if isinstance(it, np.ndarray) and it.dtype == np.bool_:
            return it.ndim
        return 1

    if any(it is Ellipsis for it in items):
        i = next(k for k, it in enumerate(items) if it is Ellipsis)
        fill = ndim - sum(width(it) for it in items)
        items = items[:i] + [slice(None)] * fill + items[i + 1:]
    basic, rest = [], []
    for it in items:
        if isinstance(it, (int, np.integer)) and not isinstance(it, bool):
            basic.append(it)
        elif isinstance(it, np.ndarray):
            basic.extend([slice(None)] * width(it))
            rest.append(it)
        else:  # slice or None
            basic.append(it)
            rest.append(slice(None))
    return _TwoStep((tuple(basic), tuple(rest)))


GETITEM = defop(name="getitem", kind=MOVEMENT, inputs=("a",),
                params=("index", "shape", "advanced", "node"), node=lambda p: p["node"],
                view=True, ref=lambda a, index, shape, advanced, node: _take(a, index),
                vjp=lambda g, ins, out, p, n: (_getitem_backward(g, p),))
GETITEM_BACKWARD = defop(
    name="getitem_backward", kind=MOVEMENT, inputs=("g",), params=("index", "shape", "advanced"),
    node="IndexPutBackward0", ref=_getitem_bwd_ref,
    vjp=lambda g, ins, out, p, n: (call(GETITEM, (g,), {
        "index": p["index"], "shape": g._data.shape, "advanced": p["advanced"],
        "node": "IndexBackward0"}),))


@api(GETITEM_BACKWARD)
def _getitem_backward(g: Tensor, p) -> Tensor:
    return call(GETITEM_BACKWARD, (g,), {"index": p["index"], "shape": p["shape"],
                                         "advanced": p["advanced"]})


def _assemble_ref(*grads, indices, shape):
    """The sum of ``getitem_backward(g_i, index_i)`` over pairwise disjoint basic slices
    ``index_i`` of one ``shape``, as the backward's accumulation adds compute it: each
    ``g_i + 0`` in its slice (the added zeros turn -0.0 into +0.0), +0.0 where no slice
    reaches; one pass over the output instead of a zero-filled array per slice and the adds."""
    xp = array_namespace(grads[0])
    dt = grads[0].dtype
    covered = sum(_box_size(box) for box in _boxes(indices, shape)) == int(np.prod(shape))
    out = xp.empty(shape, dt) if covered else xp.zeros(shape, dt)
    zero = dt.type(0)
    for g, index in zip(grads, indices):
        xp.add(g, zero, out=out[index])
    return out


def slice_box(index, shape) -> tuple | None:
    """``index`` (basic slices of step 1, the trailing dims implied) as per-dim
    ``(start, stop)`` ranges of ``shape``; None for any other index."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) > len(shape) or not all(type(it) is slice for it in items):
        return None
    box = []
    for d, n in enumerate(shape):
        if d >= len(items):
            box.append((0, n))
            continue
        start, stop, step = items[d].indices(n)
        if step != 1:
            return None
        box.append((start, max(start, stop)))
    return tuple(box)


def _boxes(indices, shape) -> list:
    return [slice_box(i, shape) for i in indices]


def _box_size(box) -> int:
    return int(np.prod([hi - lo for lo, hi in box]))


def boxes_disjoint(boxes) -> bool:
    """Whether no two of these per-dim ranges share an element."""
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if all(max(a0, b0) < min(a1, b1) for (a0, a1), (b0, b1) in zip(a, b)):
                return False
    return True


def _assemble_vjp(gg, ins, out, p, n):
    return tuple(getitem(gg, index) if need else None for index, need in zip(p["indices"], n))


def _assemble_samples(rng, dt):
    """A split in three along the last dim (covered: no zero fill), two of three blocks of
    the first dim (an uncovered part: zeros), and one slice alone."""
    def r(*shape):
        return np.asarray(rng.uniform(-2, 2, size=shape), dtype=dt)
    full = slice(None)
    return [
        ((r(2, 3, 2), r(2, 3, 1), r(2, 3, 2)),
         {"indices": ((full, full, slice(0, 2)), (full, full, slice(2, 3)),
                      (full, full, slice(3, 5))), "shape": (2, 3, 5)}),
        ((r(1, 4), r(2, 4)), {"indices": ((slice(0, 1),), (slice(2, 4),)), "shape": (5, 4)}),
        ((r(2, 2),), {"indices": ((slice(1, 3), slice(0, 2)),), "shape": (3, 3)}),
    ]


ASSEMBLE_SLICES = defop(
    name="assemble_slices", kind=MOVEMENT, inputs=("*grads",), params=("indices", "shape"),
    node="IndexPutBackward0", ref=_assemble_ref, vjp=_assemble_vjp,
    samples=_assemble_samples)


@api(ASSEMBLE_SLICES)
def assemble_slices(grads, indices, shape) -> Tensor:
    """The sum of the gradients of ``x[indices[i]]`` for output gradients ``grads[i]``
    (``x`` of ``shape``; pairwise disjoint basic slices of step 1): what a compiled plan
    runs for the adds of a split's gradients (``compiler.passes.assemble_slice_grads``)."""
    grads = list(grads)
    boxes = _boxes(indices, shape)
    if any(b is None for b in boxes) or not boxes_disjoint(boxes):
        raise ValueError("assemble_slices: indices must be disjoint basic slices of step 1")
    for g, box in zip(grads, boxes):
        if tuple(g._data.shape) != tuple(hi - lo for lo, hi in box):
            raise ValueError(f"assemble_slices: a gradient of shape {tuple(g._data.shape)} "
                             f"for the slice {box}")
    return call(ASSEMBLE_SLICES, tuple(grads), {"indices": tuple(indices),
                                                "shape": tuple(shape)})


def _normalise_index(index, shape):
    """Convert tensors in an index to arrays and check bounds with PyTorch's messages."""
    items = index if isinstance(index, tuple) else (index,)
    if type(index) is not _TwoStep and _check_basic(items, shape):
        return (tuple(items) if isinstance(index, tuple) else index), False
    out = []
    advanced = False
    for it in items:
        if isinstance(it, Tensor):
            t, it = it, to_host(it._data)  # checked on the host; moved to the data by index_on
            if it.ndim == 0 and it.dtype.kind in "iu":  # a 0-d integer tensor acts as an int
                needs_value(t, "using a tensor's value as an index")
                it = int(it)
        elif isinstance(it, (list, tuple)) and not all(isinstance(x, slice) for x in it):
            it = np.asarray(it)  # (a tuple inside the index tuple: a sequence, as a list)
        if isinstance(it, np.ndarray):
            advanced = True
            if it.dtype.kind == "f":
                raise IndexError(
                    "tensors used as indices must be long, int, byte or bool tensors"
                )
        elif isinstance(it, bool):
            advanced = True
        out.append(it)
    # bounds check for plain integers
    if _dims_taken(out) > len(shape):
        raise _too_many_indices(shape)
    arrays = 0  # index arrays seen so far
    for it, dim in index_dims(out, shape):
        if it is None or it is Ellipsis:
            continue
        if isinstance(it, (int, np.integer)) and not isinstance(it, bool):
            size = shape[dim]
            if not -size <= it < size:
                raise _out_of_bounds(it, dim, size)
        elif isinstance(it, np.ndarray) and it.dtype.kind in "iu":
            # integer arrays too (they are on the host here): NumPy would raise its own
            # message and CuPy, indexing CUDA memory, wraps a bad index around. PyTorch
            # names the dim by the array's place among the index arrays.
            size = shape[dim]
            v = first_outside(it, -size, size)
            if v is not None:
                raise IndexError(f"index {v} is out of bounds for dimension {arrays} with "
                                 f"size {size}")
        if isinstance(it, np.ndarray) and it.dtype == np.bool_:
            for k, n in enumerate(it.shape):  # PyTorch's message (NumPy's otherwise)
                if n != shape[dim + k]:
                    raise IndexError(f"The shape of the mask {list(it.shape)} at index {k} "
                                     f"does not match the shape of the indexed tensor "
                                     f"{list(shape)} at index {dim + k}")
        if isinstance(it, np.ndarray):
            arrays += it.ndim if it.dtype == np.bool_ else 1
    if arrays > 1:
        _check_index_shapes(out)
    if advanced and any(isinstance(it, (int, np.integer)) and not isinstance(it, bool)
                        for it in out):
        return _split_ints(out, len(shape)), True
    index = tuple(out) if isinstance(index, tuple) or len(out) != 1 else out[0]
    return index, advanced


def _check_basic(items: tuple, shape) -> bool:
    """For index items that are all Python ints, slices, None and Ellipsis (the basic
    indexing :func:`_normalise_index` leaves as it is): check them (PyTorch's errors, as
    that function raises them) and return True; False for any other index."""
    taken = 0  # dims the items take (ints and slices: one each)
    for it in items:
        t = type(it)
        if t is int or t is slice:
            taken += 1
        elif it is not None and it is not Ellipsis:
            return False
    n = len(shape)
    if taken > n:
        raise _too_many_indices(shape)
    dim = 0
    for it in items:
        t = type(it)
        if t is int:
            size = shape[dim]
            if not -size <= it < size:
                raise _out_of_bounds(it, dim, size)
            dim += 1
        elif t is slice:
            dim += 1
        elif it is Ellipsis:  # (it fills the dims the others leave)
            dim = n - (taken - dim)
    return True


def _too_many_indices(shape) -> IndexError:
    return IndexError(f"too many indices for tensor of dimension {len(shape)}")


def _out_of_bounds(index: int, dim: int, size: int) -> IndexError:
    return IndexError(f"index {index} is out of bounds for dimension {dim} with size {size}")


def _width(it) -> int:
    """How many dims of the indexed tensor an item of a normalised index takes."""
    if it is None or it is Ellipsis or isinstance(it, bool):
        return 0
    return it.ndim if isinstance(it, np.ndarray) and it.dtype == np.bool_ else 1


def _dims_taken(items) -> int:
    return sum(_width(it) for it in items)


def index_dims(items, shape):
    """``(item, the dim of shape it starts at)`` for each item of a normalised index tuple
    (Ellipsis, which fills the dims the others leave, with None)."""
    total = _dims_taken(items)
    dim = 0
    for it in items:
        if it is Ellipsis:
            dim = len(shape) - (total - dim)
            yield it, None
            continue
        yield it, dim
        dim += _width(it)


def _check_index_shapes(items) -> None:
    """PyTorch's error for index arrays that do not broadcast together (a boolean mask
    counts as its nonzero positions, one array per dim)."""
    shapes = []
    for it in items:
        if isinstance(it, np.ndarray):
            if it.dtype == np.bool_:
                shapes += [(int(np.count_nonzero(it)),)] * it.ndim
            else:
                shapes.append(it.shape)
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes " + ", ".join(fmt_shape(s) for s in shapes)) from None


def value_shape_error(target: tuple, vshape: tuple, advanced: bool) -> Exception:
    """PyTorch's error for ``x[index] = value`` where ``value`` (of shape ``vshape``) does not
    broadcast to the indexed part (``target``)."""
    if advanced:
        return RuntimeError(f"shape mismatch: value tensor of shape {fmt_shape(vshape)} cannot "
                            f"be broadcast to indexing result of shape {fmt_shape(target)}")
    from .views import expand

    while vshape and vshape[0] == 1 and len(vshape) > len(target):
        vshape = vshape[1:]  # (PyTorch drops the value's leading 1s)
    try:
        expand(wrap(np.broadcast_to(np.zeros((), np.float32), vshape)), *target)
    except RuntimeError as e:
        return e
    return RuntimeError(f"shape mismatch: value tensor of shape {fmt_shape(vshape)} cannot "
                        f"be broadcast to indexing result of shape {fmt_shape(target)}")


def index_on(index, a):
    """A normalised ``index`` whose arrays live on array ``a``'s device (``index`` itself
    for host arrays): CUDA arrays are indexed, and their gradients scattered, with device
    index arrays."""
    if is_cpu_array(a):
        return index
    xp = array_namespace(a)

    def move(it):
        if isinstance(it, np.ndarray) and is_cpu_array(it):
            return xp.asarray(it)
        if type(it) is tuple or type(it) is _TwoStep:
            return type(it)(move(x) for x in it)
        return it

    return move(index)


@api(GETITEM, method="__getitem__")
def getitem(input: Tensor, index, _node: str | None = None) -> Tensor:
    """``input[index]``: ints, slices, None, Ellipsis, integer and boolean tensors/arrays."""
    a = input._data
    if a.ndim == 0 and not (index is Ellipsis or index is None or isinstance(index, tuple)):
        if not isinstance(index, (Tensor, np.ndarray, list, bool)):
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    if type(index) is not slice and type(index) is not int and (
            _TRACE.tracer is not None or input._requires_grad and _GRAD.enabled) \
            and has_index_tensors(index):
        # integer tensors: the op's input, not a param (a compiled plan reads them; a
        # backward holds them); without a node to record, getitem below (the same values)
        return index_with_tensors(input, index, _node)
    index, advanced = _normalise_index(index, a.shape)
    if advanced:
        index = index_on(index, a)
    p = {"index": index, "shape": a.shape, "advanced": advanced,
         "node": _node or _index_kind(index)}
    res = _take(a, index)
    if advanced and not res.flags.c_contiguous:  # a copy: row-major, as PyTorch's (NumPy
        res = array_namespace(res).ascontiguousarray(res)  # puts indexed dims first)
    out = wrap(res)
    if not advanced:
        mark_view(out, input)
    return record(GETITEM, out, (input,), p)


# ---------------------------------------------------------------------- built on getitem
@api(GETITEM, method="select", export="select")
def select(input: Tensor, dim: int, index: int, _node: str = "SelectBackward0") -> Tensor:
    """``input`` indexed with ``index`` along ``dim`` (the dim is removed)."""
    shape = input._data.shape
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, len(shape))
    if not -shape[d] <= index < shape[d]:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(shape)} at dimension {d}")
    return getitem(input, (slice(None),) * d + (index,), _node)


@api(GETITEM, method="narrow", export="narrow")
def narrow(input: Tensor, dim: int, start: int, length: int,
           _node: str = "SliceBackward0") -> Tensor:
    """``length`` entries of dim ``dim`` from ``start`` (a negative one counts from the end;
    a 0-d tensor counts as its number), with PyTorch's checks."""
    d = wrap_dim(dim, input._data.ndim)
    n = input._data.shape[d]
    if isinstance(start, Tensor):
        start = int(start.item())
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but "
                         f"got {start})")
    if start < 0:
        start += n
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({n}).")
    return getitem(input, (slice(None),) * d + (slice(start, start + length),), _node)


@api(GETITEM, method="split", export="split")
def split(input: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Split into chunks of ``split_size`` (or the given section sizes) along ``dim``."""
    if input._data.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, input._data.ndim)
    n = input._data.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got "
                               f"split_size={step}")
        if step == 0 and n:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        sizes = [min(step, n - s) for s in range(0, n, step)] if n else [0]
    else:
        sizes = list(split_size_or_sections)
        if any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative "
                               f"entries, but got split_sizes={sizes}")
        if sum(sizes) != n:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size "
                f"at dimension {d}), but got split_sizes={sizes}"
            )
    node = "SplitBackward0" if isinstance(split_size_or_sections, int) else \
        "SplitWithSizesBackward0"
    out, start = [], 0
    for s in sizes:
        out.append(narrow(input, d, start, s, node))
        start += s
    return _multi_output(out, node[:-len("Backward0")])


def _multi_output(outs, name: str) -> tuple:
    """``outs``, marked as the outputs of one function returning several views (made in
    grad mode): PyTorch forbids in-place ops on them under autograd
    (``inplace.multi_view_error``)."""
    for i, o in enumerate(outs):
        if o._view_kind == "grad":
            o._multi_view = (name, i)
    return tuple(outs)


def unmark_multi_output(outs) -> tuple:
    """``outs`` without the multi-output marks (PyTorch's ``unsafe_split``, ``unsafe_chunk``)."""
    for o in outs:
        o.__dict__.pop("_multi_view", None)
    return outs


@api(GETITEM, method="chunk", export="chunk")
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split into ``chunks`` nearly equal parts along ``dim``."""
    if input._data.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input._data.shape[wrap_dim(dim, input._data.ndim)]
    step = -(-n // chunks)
    return split(input, max(step, 1), dim)


@api(GETITEM, method="unbind", export="unbind")
def unbind(input: Tensor, dim: int = 0) -> tuple:
    """All slices along ``dim``, the dim removed."""
    d = wrap_dim(dim, input._data.ndim)
    return _multi_output([select(input, d, i, "UnbindBackward0")
                          for i in range(input._data.shape[d])], "Unbind")
