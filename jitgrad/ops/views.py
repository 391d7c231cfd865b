"""Movement ops whose results are views of their input: the reshape family (view, flatten,
squeeze, unsqueeze...), the permute family (transpose, t, ``T``, movedim) and expand.

Results share memory (and the version counter) with their input, as PyTorch views do;
a reshape NumPy cannot express as a view copies (``UnsafeViewBackward0``)."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..shapes import as_shape, fmt_shape, infer_size, keyword_sizes, wrap_dim
from ..tensor import Tensor, mark_view, wrap
from .api import api
from .dispatch import call, record
from .registry import MOVEMENT, defop

_ndarray = np.ndarray

__all__ = [
    "reshape", "view", "flatten", "unflatten", "squeeze", "unsqueeze", "permute",
    "transpose", "swapaxes", "t", "T", "movedim", "expand", "expand_as", "meshgrid",
]


# ------------------------------------------------------------------------------- reshape
def _reshape_fwd(a, shape, in_shape, node, strict=False):
    """``a`` in ``shape``: a view when the strides allow one, else a copy; with ``strict``
    (``view()``), PyTorch's error instead of the copy."""
    if strict:
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
                params=("shape", "in_shape", "node", "strict"), node=lambda p: p["node"],
                ref=_reshape_fwd, view=True, keeps_order=True,
                vjp=lambda g, ins, out, p, n: (g.reshape(p["in_shape"]),))


def _reshape(input: Tensor, shape, node: str, must_view: bool = False) -> Tensor:
    a = input._data
    if shape == a.shape or must_view:
        p = {"shape": shape, "in_shape": a.shape, "node": node, "strict": must_view}
        if type(a) is _ndarray and a.dtype.kind != "c":  # (what call() does, inline)
            out = wrap(_reshape_fwd(a, shape, a.shape, node, must_view))
            mark_view(out, input)
            return record(RESHAPE, out, (input,), p)
        return call(RESHAPE, (input,), p, view_of=input)
    if a.flags.c_contiguous:  # (a view, always)
        res, copied = a.reshape(shape), False
    else:
        res = np.reshape(a, shape)
        copied = a.size > 1 and not np.may_share_memory(res, a)
    if copied and node == "ViewBackward0":
        node = "UnsafeViewBackward0"
    p = {"shape": shape, "in_shape": a.shape, "node": node, "strict": False}
    out = wrap(res)
    if not copied:
        mark_view(out, input)
    return record(RESHAPE, out, (input,), p)


@api(RESHAPE, method="reshape", export="reshape")
def reshape(input: Tensor, *args, shape=None) -> Tensor:
    """Same data in a new shape (a view when possible, one ``-1`` inferred)."""
    if shape is None and _all_ints(args):  # (the common x.reshape(n, -1))
        return _reshape(input, infer_size(args, input._data.size), "ViewBackward0")
    shape = keyword_sizes(args, shape, "reshape", "shape")
    return _reshape(input, infer_size(as_shape(shape), input._data.size), "ViewBackward0")


@api(RESHAPE, method="view")
def view(input: Tensor, *args, size=None, dtype=None) -> Tensor:
    """A view with a new shape; raises if the strides do not allow a view. ``view(dtype)``:
    the same memory read as another dtype (see :func:`_view_dtype`)."""
    if dtype is not None and not args and size is None:
        return _view_dtype(input, dtype)
    if size is None and dtype is None and _all_ints(args):  # (the common x.view(n, -1))
        return _reshape(input, infer_size(args, input._data.size), "ViewBackward0",
                        must_view=True)
    shape = keyword_sizes(args, size, "view", "size")
    if len(shape) == 1 and isinstance(shape[0], (dtypes.DType, dtypes.UnsupportedDType)):
        return _view_dtype(input, shape[0])
    return _reshape(input, infer_size(as_shape(shape), input._data.size), "ViewBackward0",
                    must_view=True)


def _all_ints(args: tuple) -> bool:
    """Whether ``args`` are one or more Python ints (sizes given as numbers)."""
    for x in args:
        if type(x) is not int:
            return False
    return bool(args)


def _view_dtype(input: Tensor, dtype) -> Tensor:
    """``input.view(dtype)``: the same memory read as ``dtype`` (PyTorch's ``view.dtype``).
    Of another element size, the last dim is rescaled (it must have stride 1; PyTorch's
    errors otherwise). As PyTorch's, the result shares the version counter but is no
    differentiable view: it never requires grad."""
    if isinstance(dtype, dtypes.UnsupportedDType):
        raise dtype.error()
    a = input._data
    src = dtypes.from_numpy_dtype(a.dtype)
    new, old = dtype.np.itemsize, a.dtype.itemsize
    if new != old:
        what = (f"to view {src.tensor_type[:-6]} as {dtype.tensor_type[:-6]} (different "
                f"element sizes)")
        if a.ndim == 0:
            raise RuntimeError(f"self.dim() cannot be 0 {what}")
        strides = input.stride()
        if new > old:
            ratio = new // old
            if a.shape[-1] % ratio:
                raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {what}, but got "
                                   f"{a.shape[-1]}")
        if a.shape[-1] > 1 and a.strides[-1] != old:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
        if new > old:
            off = input.storage_offset()
            if off % ratio:
                raise RuntimeError(f"self.storage_offset() must be divisible by {ratio} {what}, "
                                   f"but got {off}")
            for d, st in enumerate(strides[:-1]):
                if st % ratio:
                    raise RuntimeError(f"self.stride({d}) must be divisible by {ratio} {what}, "
                                       f"but got {st}")
        if not a.flags.c_contiguous or a.strides[-1] != old:
            # the last dim is dense (checked): NumPy wants it so in its strides too
            a = np.lib.stride_tricks.as_strided(
                a, a.shape, a.strides[:-1] + (old,))
    from ..trace.state import STATE as _TRACE

    if _TRACE.tracer is not None:  # (a reinterpretation of memory: nothing a plan replays)
        _TRACE.tracer.graph_break("view(dtype) reinterprets a tensor's memory")
    out = wrap(a.view(dtype.np))
    out._vc = input._vc  # (PyTorch: a view sharing the version counter, not differentiable)
    return out


@api(RESHAPE, method="flatten", export="flatten")
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


@api(RESHAPE, method="unflatten", export="unflatten")
def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    """Split dim ``dim`` into ``sizes``."""
    s = input._data.shape
    d = wrap_dim(dim, len(s))
    sizes = tuple(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    known = int(np.prod([n for n in sizes if n != -1], dtype=np.int64))
    if (known != s[d]) if -1 not in sizes else (known == 0 or s[d] % known):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {d} ({s[d]}) in the input tensor")
    sizes = infer_size(sizes, s[d])
    return _reshape(input, s[:d] + sizes + s[d + 1:], "ViewBackward0")


@api(RESHAPE, method="squeeze", export="squeeze")
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


@api(RESHAPE, method="unsqueeze", export="unsqueeze")
def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim``."""
    s = input._data.shape
    d = wrap_dim(dim, len(s) + 1)
    return _reshape(input, s[:d] + (1,) + s[d:], "UnsqueezeBackward0")


@api(RESHAPE, method="view_as")
def _view_as(self, other):
    """A view of ``self`` with ``other``'s shape."""
    return view(self, other._data.shape)


@api(RESHAPE, method="reshape_as")
def _reshape_as(self, other):
    """``self`` reshaped to ``other``'s shape."""
    return reshape(self, other._data.shape)


# ------------------------------------------------------------------------------- permute
def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


PERMUTE = defop(name="permute", kind=MOVEMENT, inputs=("a",), params=("dims", "node"),
                node=lambda p: p["node"], view=True, permutes=True,
                ref=lambda a, dims, node: a.transpose(dims),
                vjp=lambda g, ins, out, p, n: (permute(g, _inverse(p["dims"])),))


def _permute(input: Tensor, dims, node) -> Tensor:
    return call(PERMUTE, (input,), {"dims": tuple(dims), "node": node}, view_of=input)


@api(PERMUTE, method="permute", export="permute")
def permute(input: Tensor, *args, dims=None) -> Tensor:
    """Reorder dims."""
    dims = as_shape(keyword_sizes(args, dims, "permute", "dims"))
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


@api(PERMUTE, method=("transpose", "swapaxes", "swapdims"),
     export=("transpose", "swapaxes", "swapdims"))
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


@api(PERMUTE, method="t", export="t")
def t(input: Tensor) -> Tensor:
    """Transpose of a tensor with at most 2 dims."""
    nd = input._data.ndim
    if nd > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {nd}D")
    return _permute(input, tuple(reversed(range(nd))), "TBackward0")


@api(PERMUTE)
def T(input: Tensor) -> Tensor:
    """All dims reversed (``tensor.T``)."""
    return _permute(input, tuple(reversed(range(input._data.ndim))), "PermuteBackward0")


@api(PERMUTE, method=("movedim", "moveaxis"), export=("movedim", "moveaxis"))
def movedim(input: Tensor, source, destination) -> Tensor:
    """Move dim ``source`` to position ``destination`` (ints, or sequences of as many dims:
    each source dim goes to its destination, the others keep their order)."""
    nd = input._data.ndim
    src = [source] if isinstance(source, (int, np.integer)) else list(source)
    dst = [destination] if isinstance(destination, (int, np.integer)) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} "
                           "dims)")
    s = [wrap_dim(i, nd) for i in src]
    d = [wrap_dim(i, nd) for i in dst]
    for name, dims, given in (("source", s, src), ("destination", d, dst)):
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({given})")
    perm = [-1] * nd
    for i, j in zip(s, d):
        perm[j] = i
    rest = iter(i for i in range(nd) if i not in s)
    perm = [next(rest) if p < 0 else p for p in perm]
    return _permute(input, perm, "PermuteBackward0")


# -------------------------------------------------------------------------------- expand
def _expand_fwd(a, shape, in_shape):
    """``np.broadcast_to(a, shape)``: the same read-only view (strides, flags, base), built
    directly for a non-empty C-contiguous host array, without NumPy's per-call iterator setup
    (~2 us, the whole cost of a loss gradient's expand); other arrays go to NumPy."""
    if type(a) is not np.ndarray or not a.flags.c_contiguous or a.size == 0 or \
            a.dtype.hasobject:
        return np.broadcast_to(a, shape)
    s = a.shape
    if s:  # (broadcast_to gives every size-1 dim of the input stride 0, as the new ones)
        strides = (0,) * (len(shape) - len(s)) + tuple(
            0 if n == 1 else st for n, st in zip(s, a.strides))
    else:
        strides = (0,) * len(shape)
    out = np.ndarray(shape, a.dtype, a, 0, strides)
    out.flags.writeable = False
    return out


def _expand_vjp(g, ins, out, p, n):
    from .sums import sum_to

    return (sum_to(g, p["in_shape"]),)


EXPAND = defop(name="expand", kind=MOVEMENT, inputs=("a",), params=("shape", "in_shape"),
               node="ExpandBackward0", view=True, broadcast=True,
               ref=lambda a, shape, in_shape: np.broadcast_to(a, shape), fwd=_expand_fwd,
               vjp=_expand_vjp)


def expand_to(input: Tensor, shape: tuple) -> Tensor:
    """``input.expand(shape)`` for a ``shape`` known to be a valid target (a tuple of sizes,
    no -1: a reduction's input shape, an operand's broadcast shape): the same op and view,
    without the public function's checks of its arguments."""
    return call(EXPAND, (input,), {"shape": shape, "in_shape": input._data.shape},
                view_of=input)


@api(EXPAND, method="expand", export="expand")
def expand(input: Tensor, *sizes, size=None) -> Tensor:
    """Broadcast to ``sizes`` (or ``size=``) without copying (-1 keeps a dim)."""
    sizes = as_shape(keyword_sizes(sizes, size, "expand", "size"))
    s = input._data.shape
    if len(sizes) < len(s):
        raise RuntimeError(
            f"expand(jitgrad.FloatTensor{{{fmt_shape(s)}}}, size={fmt_shape(sizes)}): the number "
            f"of sizes provided ({len(sizes)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({len(s)})"
        )
    lead = len(sizes) - len(s)
    target = []
    for i in range(len(sizes) - 1, -1, -1):  # (PyTorch checks from the trailing dim)
        want = sizes[i]
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
    target.reverse()
    return expand_to(input, tuple(target))


@api(EXPAND, method="expand_as")
def expand_as(input: Tensor, other: Tensor) -> Tensor:
    """Expand to ``other``'s shape."""
    return expand(input, other._data.shape)


@api(RESHAPE, EXPAND, export="meshgrid")
def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """Coordinate grids of 1-D ``tensors``: the ``i``-th result holds ``tensors[i]`` along
    dim ``i`` and repeats it along the others (``indexing="ij"``; ``"xy"`` swaps the first
    two dims, as NumPy's default). Each is an expanded view. Without ``indexing``, "ij" with
    PyTorch's warning.

    >>> import jitgrad
    >>> [g.tolist() for g in jitgrad.meshgrid(jitgrad.arange(2), jitgrad.arange(3),
    ...                                        indexing="ij")][0]
    [[0, 0, 0], [1, 1, 1]]
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        import warnings

        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass "
                      "the indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                         f"received: {indexing}")
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t._data.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {t}")
    if len({t.dtype for t in tensors}) > 1:
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    ts = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    sizes = tuple(t._data.shape[0] for t in ts)
    grids = []
    for i, t in enumerate(ts):
        shape = [1] * len(ts)
        shape[i] = sizes[i]
        grids.append(t.reshape(*shape).expand(*sizes))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)
