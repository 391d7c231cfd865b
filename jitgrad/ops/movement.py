"""Movement ops: reshape family (view, flatten, squeeze, unsqueeze), permute family
(transpose, t, T), expand, indexing, cat/stack, clone, dtype conversion.

Results that NumPy can express as views share memory (and the version counter) with their
input, as PyTorch views do.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..shapes import as_shape, fmt_shape, infer_size, wrap_dim
from ..tensor import Tensor, wrap
from .dispatch import call, record
from .registry import MOVEMENT, defop

__all__ = ["reshape", "view", "flatten", "unflatten", "squeeze", "unsqueeze", "permute",
           "transpose", "t", "expand", "expand_as", "getitem", "cat", "concatenate", "stack",
           "clone", "to_dtype", "contiguous", "select", "narrow", "split", "chunk", "unbind",
           "movedim", "swapaxes"]


# ------------------------------------------------------------------------- reshape
def _reshape_fwd(a, shape, in_shape, node, copy=False):
    if node == "ViewBackward0" and not copy:
        v = a.view()
        try:
            v.shape = shape
        except AttributeError:
            raise RuntimeError(
                "view size is not compatible with input tensor's size and stride (at least one "
                "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
            ) from None
        return v
    return np.reshape(a, shape)


RESHAPE = defop(name="reshape", kind=MOVEMENT, inputs=("a",),
                params=("shape", "in_shape", "node"), node=lambda p: p["node"],
                ref=_reshape_fwd, view=True, keeps_order=True,
                vjp=lambda g, ins, out, p, n: (g.reshape(p["in_shape"]),))


def _reshape(input: Tensor, shape, node: str, must_view: bool = False) -> Tensor:
    a = input._data
    if shape == a.shape:
        p = {"shape": shape, "in_shape": a.shape, "node": node}
        return call(RESHAPE, (input,), p, view_of=input)
    if must_view:
        p = {"shape": shape, "in_shape": a.shape, "node": node}
        return call(RESHAPE, (input,), p, view_of=input)
    res = np.reshape(a, shape)
    copied = a.size > 1 and not np.may_share_memory(res, a)
    if copied and node == "ViewBackward0":
        node = "UnsafeViewBackward0"
    p = {"shape": shape, "in_shape": a.shape, "node": node}
    out = wrap(res)
    if not copied:
        out._vc = input._vc
        out._base = input._base if input._base is not None else input
    return record(RESHAPE, out, (input,), p)


def reshape(input: Tensor, *shape) -> Tensor:
    """Same data in a new shape (a view when possible, one ``-1`` inferred)."""
    return _reshape(input, infer_size(as_shape(shape), input._data.size), "ViewBackward0")


def view(input: Tensor, *shape) -> Tensor:
    """A view with a new shape; raises if the strides do not allow a view."""
    if len(shape) == 1 and isinstance(shape[0], dtypes.DType):
        raise NotImplementedError("view(dtype) is not supported; use .to(dtype)")
    return _reshape(input, infer_size(as_shape(shape), input._data.size), "ViewBackward0",
                    must_view=True)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims ``start_dim..end_dim`` into one."""
    s = input._data.shape
    if not s:
        return _reshape(input, (1,), "ViewBackward0")
    a, b = wrap_dim(start_dim, len(s)), wrap_dim(end_dim, len(s))
    if a > b:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if a == b:
        return input
    n = 1
    for d in s[a:b + 1]:
        n *= d
    return _reshape(input, s[:a] + (n,) + s[b + 1:], "ViewBackward0")


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    """Split dim ``dim`` into ``sizes``."""
    s = input._data.shape
    d = wrap_dim(dim, len(s))
    sizes = infer_size(tuple(sizes), s[d])
    return _reshape(input, s[:d] + sizes + s[d + 1:], "ViewBackward0")


def squeeze(input: Tensor, dim=None) -> Tensor:
    """Remove size-1 dims (all, or those in ``dim``)."""
    s = input._data.shape
    if dim is None:
        return _reshape(input, tuple(x for x in s if x != 1), "SqueezeBackward0")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = {wrap_dim(d, len(s)) for d in dims}
    new = tuple(x for i, x in enumerate(s) if not (i in dims and x == 1))
    node = "SqueezeBackward1" if isinstance(dim, int) else "SqueezeBackward2"
    return _reshape(input, new, node)


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim``."""
    s = input._data.shape
    d = wrap_dim(dim, len(s) + 1)
    return _reshape(input, s[:d] + (1,) + s[d:], "UnsqueezeBackward0")


# ------------------------------------------------------------------------- permute
def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


PERMUTE = defop(name="permute", kind=MOVEMENT, inputs=("a",), params=("dims", "node"),
                node=lambda p: p["node"], view=True, permutes=True,
                ref=lambda a, dims, node: np.transpose(a, dims),
                vjp=lambda g, ins, out, p, n: (permute(g, _inverse(p["dims"])),))


def _permute(input: Tensor, dims, node) -> Tensor:
    return call(PERMUTE, (input,), {"dims": tuple(dims), "node": node}, view_of=input)


def permute(input: Tensor, *dims) -> Tensor:
    """Reorder dims."""
    dims = as_shape(dims)
    nd = input._data.ndim
    if len(dims) != nd:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {nd} is not equal "
            f"to len(dims) = {len(dims)}"
        )
    w = tuple(wrap_dim(d, nd) for d in dims)
    if len(set(w)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return _permute(input, w, "PermuteBackward0")


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dims."""
    nd = input._data.ndim
    if nd == 0:
        return _permute(input, (), "TransposeBackward0")
    a, b = wrap_dim(dim0, nd), wrap_dim(dim1, nd)
    perm = list(range(nd))
    perm[a], perm[b] = perm[b], perm[a]
    return _permute(input, perm, "TransposeBackward0")


swapaxes = transpose


def t(input: Tensor) -> Tensor:
    """Transpose of a tensor with at most 2 dims."""
    nd = input._data.ndim
    if nd > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {nd}D")
    return _permute(input, tuple(reversed(range(nd))), "TBackward0")


def T(input: Tensor) -> Tensor:
    """All dims reversed (``tensor.T``)."""
    return _permute(input, tuple(reversed(range(input._data.ndim))), "PermuteBackward0")


def movedim(input: Tensor, source: int, destination: int) -> Tensor:
    """Move dim ``source`` to position ``destination``."""
    nd = input._data.ndim
    s, d = wrap_dim(source, nd), wrap_dim(destination, nd)
    perm = [i for i in range(nd) if i != s]
    perm.insert(d, s)
    return _permute(input, perm, "PermuteBackward0")


# -------------------------------------------------------------------------- expand
def _sum_to_shape(g: Tensor, shape) -> Tensor:
    from ..shapes import sum_axes_to

    axes, needs_reshape = sum_axes_to(g._data.shape, shape)
    r = g.sum(dim=axes, keepdim=True) if axes else g
    return r.reshape(shape) if needs_reshape else r


EXPAND = defop(name="expand", kind=MOVEMENT, inputs=("a",), params=("shape", "in_shape"),
               node="ExpandBackward0", view=True, broadcast=True,
               ref=lambda a, shape, in_shape: np.broadcast_to(a, shape),
               vjp=lambda g, ins, out, p, n: (_sum_to_shape(g, p["in_shape"]),))


def expand(input: Tensor, *sizes) -> Tensor:
    """Broadcast to ``sizes`` without copying (-1 keeps a dim)."""
    sizes = as_shape(sizes)
    s = input._data.shape
    if len(sizes) < len(s):
        raise RuntimeError(
            f"expand(jitgrad.FloatTensor{{{fmt_shape(s)}}}, size={fmt_shape(sizes)}): the number "
            f"of sizes provided ({len(sizes)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({len(s)})"
        )
    lead = len(sizes) - len(s)
    target = []
    for i, want in enumerate(sizes):
        have = s[i - lead] if i >= lead else None
        if want == -1:
            if have is None:
                raise RuntimeError(
                    f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                    f"non-existing dimension {i}"
                )
            want = have
        if have is not None and have != want and have != 1:
            raise RuntimeError(
                f"The expanded size of the tensor ({want}) must match the existing size ({have}) "
                f"at non-singleton dimension {i}.  Target sizes: {fmt_shape(sizes)}.  Tensor "
                f"sizes: {fmt_shape(s)}"
            )
        target.append(want)
    return call(EXPAND, (input,), {"shape": tuple(target), "in_shape": s}, view_of=input)


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    """Expand to ``other``'s shape."""
    return expand(input, other._data.shape)


# ------------------------------------------------------------------------ indexing
def _index_kind(index) -> str:
    """PyTorch's node for ``x[index]``: advanced indexing runs last (IndexBackward0);
    otherwise the last basic step that does something names the node (full ``:`` slices
    after it are skipped)."""
    if type(index) is _TwoStep:
        return "IndexBackward0"
    items = index if isinstance(index, tuple) else (index,)
    last = Ellipsis  # "no step yet"
    for it in items:
        if it is Ellipsis or (isinstance(it, slice) and it == slice(None)):
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


def _take(a, index):
    if type(index) is _TwoStep:
        return a[index[0]][index[1]]
    return a[index]


def _getitem_bwd_ref(g, index, shape, advanced):
    out = np.zeros(shape, dtype=g.dtype)
    if type(index) is _TwoStep:
        np.add.at(out[index[0]], index[1], g)
    elif advanced:
        np.add.at(out, index, g)
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


def _getitem_backward(g: Tensor, p) -> Tensor:
    return call(GETITEM_BACKWARD, (g,), {"index": p["index"], "shape": p["shape"],
                                         "advanced": p["advanced"]})


def _normalise_index(index, shape):
    """Convert tensors in an index to arrays and check bounds with PyTorch's messages."""
    items = index if isinstance(index, tuple) else (index,)
    out = []
    advanced = False
    for it in items:
        if isinstance(it, Tensor):
            it = it._data
            if it.ndim == 0 and it.dtype.kind in "iu":  # a 0-d integer tensor acts as an int
                it = int(it)
        elif isinstance(it, (list,)) and not all(isinstance(x, slice) for x in it):
            it = np.asarray(it)
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
    dim = 0
    n_real = sum(1 for it in out if it is not None and it is not Ellipsis and not (
        isinstance(it, np.ndarray) and it.dtype == np.bool_) and not isinstance(it, bool))
    n_real += sum(it.ndim for it in out if isinstance(it, np.ndarray) and it.dtype == np.bool_)
    if n_real > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    for it in out:
        if it is Ellipsis:
            dim = len(shape) - (n_real - dim)
            continue
        if it is None:
            continue
        if isinstance(it, (int, np.integer)) and not isinstance(it, bool):
            size = shape[dim]
            if not -size <= it < size:
                raise IndexError(
                    f"index {it} is out of bounds for dimension {dim} with size {size}"
                )
        if isinstance(it, np.ndarray) and it.dtype == np.bool_:
            dim += it.ndim
        elif not isinstance(it, bool):
            dim += 1
    if advanced and any(isinstance(it, (int, np.integer)) and not isinstance(it, bool)
                        for it in out):
        return _split_ints(out, len(shape)), True
    index = tuple(out) if isinstance(index, tuple) or len(out) != 1 else out[0]
    return index, advanced


def getitem(input: Tensor, index, _node: str | None = None) -> Tensor:
    """``input[index]``: ints, slices, None, Ellipsis, integer and boolean tensors/arrays."""
    a = input._data
    if a.ndim == 0 and not (index is Ellipsis or index is None or isinstance(index, tuple)):
        if not isinstance(index, (Tensor, np.ndarray, list, bool)):
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    index, advanced = _normalise_index(index, a.shape)
    p = {"index": index, "shape": a.shape, "advanced": advanced,
         "node": _node or _index_kind(index)}
    res = _take(a, index)
    if not isinstance(res, np.ndarray):
        res = np.asarray(res)
    out = wrap(res)
    if not advanced:
        out._vc = input._vc
        out._base = input._base if input._base is not None else input
    return record(GETITEM, out, (input,), p)


def select(input: Tensor, dim: int, index: int, _node: str = "SelectBackward0") -> Tensor:
    """``input`` indexed with ``index`` along ``dim`` (the dim is removed)."""
    d = wrap_dim(dim, input._data.ndim)
    return getitem(input, (slice(None),) * d + (index,), _node)


def narrow(input: Tensor, dim: int, start: int, length: int,
           _node: str = "SliceBackward0") -> Tensor:
    """``length`` entries of dim ``dim`` from ``start``."""
    d = wrap_dim(dim, input._data.ndim)
    return getitem(input, (slice(None),) * d + (slice(start, start + length),), _node)


# -------------------------------------------------------------------------- cat/stack
def _cat_vjp(g, ins, out, p, n):
    d = p["dim"]
    res = []
    start = 0
    for size, need in zip(p["sizes"], n):
        if need:
            res.append(narrow(g, d, start, size))
        else:
            res.append(None)
        start += size
    return tuple(res)


CAT = defop(name="cat", kind=MOVEMENT, inputs=("*tensors",), params=("dim", "sizes"),
            node="CatBackward0", ref=lambda *arrs, dim, sizes: np.concatenate(arrs, axis=dim),
            vjp=_cat_vjp)
STACK = defop(name="stack", kind=MOVEMENT, inputs=("*tensors",), params=("dim", "sizes"),
              node="StackBackward0", ref=lambda *arrs, dim, sizes: np.stack(arrs, axis=dim),
              vjp=lambda g, ins, out, p, n: tuple(select(g, p["dim"], i) if need else None
                                                  for i, need in enumerate(n)))


def _seq_tensors(tensors, name):
    if isinstance(tensors, Tensor):
        raise TypeError(f"{name}(): argument 'tensors' must be tuple of Tensors, not Tensor")
    ts = list(tensors)
    if not ts:
        raise RuntimeError(f"{name}(): expected a non-empty list of Tensors")
    from .dispatch import as_tensor_arg

    return [as_tensor_arg(t, "tensors") for t in ts]


def _common_dtype(ts):
    d = dtypes.result_type(*ts)
    return [t if t._data.dtype == d.np else t.to(d) for t in ts]


def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate along an existing dim."""
    ts = _seq_tensors(tensors, "cat")
    ts = [t for t in ts if not (t._data.ndim == 1 and t._data.size == 0)] or ts[:1]
    ref = ts[0]._data
    if ref.ndim == 0:
        raise RuntimeError(
            "zero-dimensional tensor (at position 0) cannot be concatenated"
        )
    d = wrap_dim(dim, ref.ndim)
    for i, t in enumerate(ts[1:], 1):
        s = t._data.shape
        if len(s) != ref.ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {ref.ndim} and {len(s)}"
            )
        for k in range(ref.ndim):
            if k != d and s[k] != ref.shape[k]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{ref.shape[k]} but got size {s[k]} for tensor number {i} in the list."
                )
    ts = _common_dtype(ts)
    p = {"dim": d, "sizes": tuple(t._data.shape[d] for t in ts)}
    return call(CAT, tuple(ts), p)


concatenate = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """Stack along a new dim."""
    ts = _seq_tensors(tensors, "stack")
    s0 = ts[0]._data.shape
    for i, t in enumerate(ts[1:], 1):
        if t._data.shape != s0:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {fmt_shape(s0)} at entry 0 "
                f"and {fmt_shape(t._data.shape)} at entry {i}"
            )
    d = wrap_dim(dim, len(s0) + 1)
    ts = _common_dtype(ts)
    return call(STACK, tuple(ts), {"dim": d, "sizes": (1,) * len(ts)})


def split(input: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Split into chunks of ``split_size`` (or the given section sizes) along ``dim``."""
    d = wrap_dim(dim, input._data.ndim)
    n = input._data.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        sizes = [min(step, n - s) for s in range(0, n, step)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size "
                f"at dimension {d}), but got split_sizes={sizes}"
            )
    out, start = [], 0
    for s in sizes:
        out.append(narrow(input, d, start, s, "SplitBackward0"))
        start += s
    return tuple(out)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split into ``chunks`` nearly equal parts along ``dim``."""
    n = input._data.shape[wrap_dim(dim, input._data.ndim)]
    step = -(-n // chunks)
    return split(input, max(step, 1), dim)


def unbind(input: Tensor, dim: int = 0) -> tuple:
    """All slices along ``dim``, the dim removed."""
    d = wrap_dim(dim, input._data.ndim)
    return tuple(select(input, d, i, "UnbindBackward0") for i in range(input._data.shape[d]))


# -------------------------------------------------------------------- copies / dtype
CLONE = defop(name="clone", kind=MOVEMENT, inputs=("a",), node="CloneBackward0",
              ref=lambda a: np.array(a, copy=True, order="C"),
              vjp=lambda g, ins, out, p, n: (g,))


def clone(input: Tensor) -> Tensor:
    """A copy that stays in the graph."""
    return call(CLONE, (input,), None)


def contiguous(input: Tensor) -> Tensor:
    """``input`` itself when C-contiguous, else a contiguous copy."""
    if input._data.flags.c_contiguous:
        return input
    return clone(input)


TO_DTYPE = defop(name="to_dtype", kind=MOVEMENT, inputs=("a",), params=("dtype", "in_dtype"),
                 node="ToCopyBackward0", ref=lambda a, dtype, in_dtype: a.astype(dtype),
                 vjp=lambda g, ins, out, p, n: (to_dtype(g, dtypes.from_numpy_dtype(
                     p["in_dtype"])) if np.dtype(p["in_dtype"]).kind == "f" else None,))


def to_dtype(input: Tensor, dtype, copy: bool = False) -> Tensor:
    """Convert to ``dtype`` (``input`` itself when already of it, unless ``copy``)."""
    d = dtypes.to_dtype(dtype)
    if input._data.dtype == d.np and not copy:
        return input
    return call(TO_DTYPE, (input,), {"dtype": d.np, "in_dtype": input._data.dtype})
