"""Shape helpers: broadcasting, reduction axes, dimension wrapping (pure, no tensors)."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

Shape = tuple[int, ...]


def fmt_shape(shape: Sequence[int]) -> str:
    """A shape as PyTorch writes it in messages: ``[2, 3]``."""
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


def broadcast_shapes(a: Shape, b: Shape, op: str = "") -> Shape:
    """NumPy/PyTorch broadcast of two shapes, with PyTorch's error when they do not
    (:func:`broadcast_error`; ``op`` is not part of it, as in PyTorch's)."""
    if a == b:
        return a
    na, nb = len(a), len(b)
    n = max(na, nb)
    out = []
    for i in range(n):
        da = a[na - n + i] if na - n + i >= 0 else 1
        db = b[nb - n + i] if nb - n + i >= 0 else 1
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            raise broadcast_error(a, b)
    return tuple(out)


def broadcast_error(a: Shape, b: Shape) -> RuntimeError:
    """PyTorch's error for shapes ``a`` and ``b`` that do not broadcast (``infer_size``): the
    first mismatch from the trailing dimension, numbered in the broadcast shape ("The size of
    tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1")."""
    na, nb = len(a), len(b)
    n = max(na, nb)
    for i in range(n - 1, -1, -1):
        off = n - 1 - i
        da = a[na - 1 - off] if na - 1 - off >= 0 else 1
        db = b[nb - 1 - off] if nb - 1 - off >= 0 else 1
        if da != db and da != 1 and db != 1:
            return RuntimeError(f"The size of tensor a ({da}) must match the size of tensor b "
                                f"({db}) at non-singleton dimension {i}")
    return RuntimeError(f"shapes {fmt_shape(a)} and {fmt_shape(b)} cannot be broadcast")


def broadcast_sizes(a: Shape, b: Shape) -> Shape:
    """The broadcast of shapes ``a`` and ``b`` with PyTorch's own message when they do not
    broadcast ("The size of tensor a (2) must match the size of tensor b (3) at
    non-singleton dimension 0")."""
    return broadcast_shapes(tuple(a), tuple(b))


def broadcast_many(shapes: Sequence[Shape], op: str = "") -> Shape:
    """Broadcast any number of shapes."""
    out: Shape = ()
    for s in shapes:
        out = broadcast_shapes(out, tuple(s), op)
    return out


def sum_axes_to(shape: Shape, target: Shape) -> tuple[tuple[int, ...], bool]:
    """Axes to sum so an array of ``shape`` reduces to ``target`` (its broadcast source).

    Returns ``(axes, needs_reshape)``: sum over ``axes`` with keepdims, then reshape to
    ``target`` when ``needs_reshape`` (leading broadcast dimensions were added).
    """
    lead = len(shape) - len(target)
    axes = list(range(lead))
    for i, t in enumerate(target):
        if t == 1 and shape[lead + i] != 1:
            axes.append(lead + i)
    return tuple(axes), lead > 0


def wrap_dim(dim: int, ndim: int, op: str = "") -> int:
    """Wrap a possibly negative ``dim`` into ``[0, ndim)``; 0-d tensors accept -1 and 0."""
    n = ndim if ndim > 0 else 1
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim + n if dim < 0 else dim


def wrap_dims(dim, ndim: int, op: str = "") -> tuple[int, ...]:
    """Normalise ``dim`` (None, int or sequence) into a sorted tuple of axes."""
    if dim is None:
        return tuple(range(ndim))
    if type(dim) is int and 0 <= dim < ndim:  # the common case
        return (dim,)
    if isinstance(dim, int):
        dims = (dim,)
    else:
        dims = tuple(dim)
    out = sorted({wrap_dim(d, ndim, op) for d in dims})
    if len(out) != len(dims):
        raise RuntimeError(f"{op}: dim {dims} appears multiple times in the list of dims")
    return tuple(d for d in out if ndim > 0)


def infer_size(shape: Sequence[int], numel: int) -> Shape:
    """Resolve a single ``-1`` in ``shape`` for a tensor of ``numel`` elements."""
    shape = tuple(map(int, shape))
    known, neg, bad = 1, None, None  # product of the known sizes, where -1 is, a bad one
    for i, s in enumerate(shape):
        if s >= 0:
            known *= s
        elif s != -1:
            if bad is None:
                bad = i
        elif neg is None:
            neg = i
        else:
            raise RuntimeError("only one dimension can be inferred")
    if bad is not None:
        raise RuntimeError(f"invalid shape dimension {shape[bad]} at index {bad} of shape "
                           f"{fmt_shape(shape)}")
    if neg is None:
        if known != numel:
            raise RuntimeError(f"shape '{fmt_shape(shape)}' is invalid for input of size {numel}")
        return shape
    if known == 0 or numel % known:
        raise RuntimeError(f"shape '{fmt_shape(shape)}' is invalid for input of size {numel}")
    return shape[:neg] + (numel // known,) + shape[neg + 1:]


def keyword_sizes(args: tuple, given, fn: str, name: str) -> tuple:
    """The sizes or dims of a method that takes them as numbers (``x.flip(0, 1)``), one
    sequence (``x.flip((0, 1))``) or PyTorch's keyword (``x.flip(dims=(0, 1))``: ``given``),
    as the positional form."""
    if given is None:
        return args
    if args:
        raise TypeError(f"{fn}() got multiple values for argument '{name}'")
    return (given,)


def as_shape(args) -> Shape:
    """Accept ``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])`` alike (a size may be a NumPy
    integer or a 0-d integer tensor: ``ones(t.sum())``, as PyTorch)."""
    if len(args) == 1 and not isinstance(args[0], int) and \
            getattr(args[0], "ndim", None) != 0:
        args = args[0]
    try:
        return tuple(map(_size_int, args))
    except TypeError:
        raise TypeError(f"size must be a sequence of ints, got {args!r}") from None


def _size_int(x) -> int:
    """A size as an int: an int, bool or integer NumPy value or 0-d tensor; a float (the
    ``x.view(B, C / 2)`` slip) raises, as PyTorch's, where ``int()`` truncated it."""
    if type(x) is int:
        return x
    dt = getattr(x, "dtype", None)  # (a tensor or NumPy value: an integer one)
    if dt is not None and np.dtype(getattr(dt, "np", dt)).kind not in "iub":
        raise TypeError(f"a size must be an integer, got a {dt} value")
    return operator.index(x)
