"""Contractions written with matrix products: ``einsum``, ``tensordot``, ``inner``, ``kron``,
``cdist``, ``dist``, ``vdot``, ``cross``, ``multi_dot`` / ``chain_matmul`` (PyTorch's cheapest
order) and the scaled-sum products ``addmv``, ``addr``, ``addbmm`` and ``baddbmm`` (``addmm`` is
an op of its own: ``nnops/linear.py``). Each is a
composite of jitgrad ops (permute, reshape, expand, sums, ``matmul``), so it is
differentiable, traceable by ``jitgrad.compile`` and runs on every device the ops do; its
gradient nodes are those ops' (PyTorch's einsum composes the same way).

``einsum`` follows PyTorch's rules: an equation of subscripts (letters), ``...`` for
broadcast dims, an optional ``->`` output (without it, the letters seen once, sorted, after
the ``...`` dims); a letter repeated within one operand takes its diagonal; a dim of size 1
broadcasts against the same letter's other sizes. Operands are contracted left to right,
each pair as one batched matrix product; letters no later operand or the output needs are
summed out first.
"""

from __future__ import annotations

import string

import numpy as np

from ..amp.autocast_mode import autocast_op
from ..tensor import Tensor
from .api import api
from .arithmetic import ADD, MUL
from .dispatch import as_tensor_arg
from .linalg import MATMUL, bmm, matmul
from .norms import VECTOR_NORM
from .norms import vector_norm as linalg_vector_norm
from .sums import SUM
from .views import EXPAND, PERMUTE, RESHAPE

__all__ = ["einsum", "addmv", "baddbmm", "tensordot", "inner", "kron", "cdist", "vdot", "addr",
           "addbmm", "multi_dot", "chain_matmul", "cross", "linalg_cross", "dist"]

_LETTERS = set(string.ascii_letters)


# ---------------------------------------------------------------------------- equation
def _parse(equation: str, operands: list) -> tuple[list[str], str]:
    """Each operand's subscripts and the output's, ``...`` spelled out as one character per
    broadcast dim (characters outside the ASCII letters)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the "
                         "equation" if len(operands) > len(terms) else
                         "einsum(): fewer operands were provided than specified in the "
                         "equation")
    ell_dims = 0
    subs = []
    for k, (term, t) in enumerate(zip(terms, operands)):
        nd = t._data.ndim
        if "." in term.replace("...", "", 1):
            raise RuntimeError(f"einsum(): found '.' for operand {k} that is not part of any "
                               "ellipsis")
        if "..." in term:
            head, _, tail = term.partition("...")
            n_ell = nd - len(head) - len(tail)
            if n_ell < 0:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                                   f"({len(head) + len(tail)}) is more than the number of "
                                   f"dimensions ({nd}) for operand {k}")
            ell_dims = max(ell_dims, n_ell)
            term = head + "".join(chr(0x100 + ell_dims - n_ell + i) for i in range(n_ell)) \
                + tail
        elif len(term) != nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                               f"({len(term)}) does not match the number of dimensions ({nd}) "
                               f"for operand {k} and no ellipsis was given")
        for c in term:
            if c in string.punctuation or (c.isascii() and c not in _LETTERS):
                raise RuntimeError(f"einsum(): invalid subscript given at index "
                                   f"{eq.index(c)} in the equation string, subscripts must "
                                   f"be in [a-zA-Z]")
        subs.append(term)
    ell = "".join(chr(0x100 + i) for i in range(ell_dims))
    if arrow:
        if "..." in rhs:  # (an output without it sums the broadcast dims, as PyTorch's)
            head, _, tail = rhs.partition("...")
            rhs = head + ell + tail
        for c in rhs:
            if c in _LETTERS and not any(c in s for s in subs):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                 "equation for any input operand")
        for c in rhs:
            if rhs.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in "
                                 "the output")
        out = rhs
    else:
        counts: dict[str, int] = {}
        for s in subs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c in _LETTERS))
    return subs, out


def _diagonal(t: Tensor, sub: str, k: int) -> tuple[Tensor, str]:
    """``t`` with each repeated subscript reduced to its diagonal (``"ii" -> "i"``)."""
    while len(set(sub)) != len(sub):
        c = next(c for c in sub if sub.count(c) > 1)
        i, j = sub.index(c), sub.index(c, sub.index(c) + 1)
        n = t._data.shape[i]
        if t._data.shape[j] != n:
            raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but the "
                               f"sizes don't match, {t._data.shape[j]} != {n}")
        rest = [d for d in range(t._data.ndim) if d not in (i, j)]
        t = t.permute(*rest, i, j)  # the pair last, then pick (k, k)
        from ..creation import arange

        idx = arange(n, device=t.device)
        t = t[(Ellipsis, idx, idx)]
        sub = "".join(sub[d] for d in rest) + c
    return t, sub


def _align(t: Tensor, sub: str, order: str) -> Tensor:
    """``t`` (subscripts ``sub``) permuted to the subscripts of ``order`` that it has."""
    perm = [sub.index(c) for c in order if c in sub]
    return t if perm == list(range(len(perm))) else t.permute(*perm)


def _sum_out(t: Tensor, sub: str, keep: set) -> tuple[Tensor, str]:
    drop = [i for i, c in enumerate(sub) if c not in keep]
    if not drop:
        return t, sub
    return t.sum(dim=tuple(drop)), "".join(c for c in sub if c in keep)


def _contract(a: Tensor, sa: str, b: Tensor, sb: str, keep: set,
              sizes: dict) -> tuple[Tensor, str]:
    """The product of two operands over their shared subscripts not in ``keep``, as one
    batched matrix product: ``(batch, left, k) @ (batch, k, right)``."""
    batch = [c for c in sa if c in sb and c in keep]
    summed = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    a = _broadcast(_align(a, sa, batch + left + summed), batch + left + summed, sizes)
    b = _broadcast(_align(b, sb, batch + summed + right), batch + summed + right, sizes)

    def size(cs):
        return int(np.prod([sizes[c] for c in cs], dtype=np.int64))
    nb, nl, nk, nr = size(batch), size(left), size(summed), size(right)
    out = bmm(a.reshape(nb, nl, nk), b.reshape(nb, nk, nr))
    subs = "".join(batch + left + right)
    return out.reshape(*[sizes[c] for c in subs]), subs


def _broadcast(t: Tensor, subs: list, sizes: dict) -> Tensor:
    shape = tuple(sizes[c] for c in subs)
    return t if tuple(t._data.shape) == shape else t.expand(*shape)


def _sublist_letters(sublist) -> str:
    out = ""
    for s in sublist:
        if s is Ellipsis:
            out += "..."
            continue
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or not 0 <= s < 52:
            raise ValueError("einsum(): subscript in subscript list is not within the valid "
                             "range [0, 52)")
        out += chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26)
    return out


def _sublist_equation(args: tuple) -> tuple:
    """PyTorch's sublist form ``einsum(op1, sublist1, op2, sublist2, ..., [out])`` as an
    equation and its operands (subscripts 0-25 are A-Z, 26-51 a-z, ``...`` an ellipsis)."""
    operands, subs = args[0::2], args[1::2]
    out = None
    if len(args) % 2:  # an output sublist at the end
        operands, out = operands[:-1], operands[-1]
    eq = ",".join(_sublist_letters(s) for s in subs)
    if out is not None:
        eq += "->" + _sublist_letters(out)
    return eq, tuple(operands)


@api(PERMUTE, RESHAPE, EXPAND, SUM, MATMUL, export="einsum")
def einsum(equation: str, *operands) -> Tensor:
    """Sum of products of ``operands``' elements as ``equation`` labels their dims
    (``einsum("bij,bjk->bik", a, b)`` is ``a @ b``; see the module docstring for the rules).

    >>> import jitgrad
    >>> jitgrad.einsum("ii", jitgrad.eye(3))
    tensor(3.)
    """
    if not isinstance(equation, str):  # einsum(a, [0, 1], b, [1, 2], [0, 2])
        equation, operands = _sublist_equation((equation, *operands))
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ts = [as_tensor_arg(t, "operands") for t in operands]
    if not ts:
        raise RuntimeError("einsum(): must provide at least one operand")
    subs, out = _parse(equation, ts)
    pairs = [_diagonal(t, s, k) for k, (t, s) in enumerate(zip(ts, subs))]
    sizes: dict[str, int] = {}
    for k, (t, s) in enumerate(pairs):
        for c, n in zip(s, t._data.shape):
            if sizes.get(c, 1) not in (1, n) and n != 1:
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {k} "
                                   f"which does not broadcast with previously seen size "
                                   f"{sizes[c]}")
            sizes[c] = max(sizes.get(c, 1), n)
    # letters each operand shares with what comes after it (later operands, the output)
    needed_after = []
    later: set = set(out)
    for _, s in reversed(pairs):
        needed_after.append(set(later))
        later |= set(s)
    needed_after.reverse()
    acc, sacc = _sum_out(*pairs[0], needed_after[0])
    for k in range(1, len(pairs)):
        t, s = _sum_out(*pairs[k], needed_after[k] | set(sacc))
        acc, sacc = _contract(acc, sacc, t, s, needed_after[k], sizes)
    acc, sacc = _sum_out(acc, sacc, set(out))
    acc = _broadcast(_align(acc, sacc, out), list(out), sizes) if sacc else acc
    if len(ts) > 1 and acc._base is not None and not acc._data.flags.c_contiguous:
        acc = acc.contiguous()  # a product's result is row-major, as PyTorch's (a .view()
    return acc                  # of it works)


# ------------------------------------------------------------------ scaled-sum products
def _scaled_sum(input: Tensor, product: Tensor, beta, alpha) -> Tensor:
    """``beta * input + alpha * product``, ``input`` broadcast to the product's shape (and
    ignored when ``beta`` is 0: its NaNs do not reach the result, as PyTorch's)."""
    shape = tuple(product._data.shape)
    try:
        ok = np.broadcast_shapes(tuple(input._data.shape), shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"The expanded size of the tensor ({shape[-1]}) must match the "
                           f"existing size ({input._data.shape[-1]}) at non-singleton "
                           f"dimension {len(shape) - 1}.  Target sizes: {list(shape)}.  "
                           f"Tensor sizes: {list(input._data.shape)}")
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return (input if beta == 1 else input * beta) + product


@api(MATMUL, MUL, ADD, method="addmv", export="addmv")
@autocast_op
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)`` for a matrix ``mat`` and a vector ``vec``."""
    mat, vec = as_tensor_arg(mat, "mat"), as_tensor_arg(vec, "vec")
    if mat._data.ndim != 2 or vec._data.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, "
                           f"{mat._data.ndim}, {vec._data.ndim}")
    return _scaled_sum(as_tensor_arg(input), matmul(mat, vec), beta, alpha)


@api(MATMUL, MUL, ADD, method="baddbmm", export="baddbmm")
@autocast_op
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)`` for 3-D ``batch1``, ``batch2``."""
    return _scaled_sum(as_tensor_arg(input), bmm(as_tensor_arg(batch1, "batch1"),
                                                 as_tensor_arg(batch2, "batch2")), beta, alpha)


@api(PERMUTE, RESHAPE, MATMUL, export="tensordot")
@autocast_op
def tensordot(a: Tensor, b: Tensor, dims=2, out=None) -> Tensor:
    """The sum of products over ``dims``: the last ``dims`` dims of ``a`` with the first of
    ``b`` (a number), or the listed dims (``([1, 2], [0, 1])``)."""
    a, b = as_tensor_arg(a, "a"), as_tensor_arg(b, "b")
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(-dims, 0)), list(range(dims))  # PyTorch's (negative) numbering
    else:
        da, db = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                  [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[i]} in dim {i} and second has size {b.shape[j]} in "
                               f"dim {j}")
    da, db = [d % a.ndim for d in da], [d % b.ndim for d in db]
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = int(np.prod([a.shape[d] for d in da], dtype=np.int64))
    left = a.permute(*free_a, *da).reshape(-1, k)
    right = b.permute(*db, *free_b).reshape(k, -1)
    res = matmul(left, right).reshape(*[a.shape[d] for d in free_a],
                                      *[b.shape[d] for d in free_b])
    return res if out is None else out.copy_(res)


@api(MUL, MATMUL, method="inner", export="inner")
def inner(input: Tensor, other: Tensor) -> Tensor:
    """The sum of products over the last dims of ``input`` and ``other`` (a product when
    either is 0-d)."""
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return tensordot(input, other, ([-1], [-1]))


@api(MUL, RESHAPE, method="kron", export="kron")
def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: block ``(i, j)`` of the result is ``input[i, j] * other``
    (any number of dims; the fewer-dim operand gets leading ones)."""
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + tuple(input.shape)
    sb = (1,) * (nd - other.ndim) + tuple(other.shape)
    a = input.reshape(*[n for s in sa for n in (s, 1)])
    b = other.reshape(*[n for s in sb for n in (1, s)])
    return (a * b).reshape(*[x * y for x, y in zip(sa, sb)])


@api(VECTOR_NORM, export="cdist")
@autocast_op
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` (``(*, P, M)``) and each row of
    ``x2`` (``(*, R, M)``): ``(*, P, R)``, computed directly (no Gram-matrix shortcut; the
    norm's gradient at a zero distance is 0, as PyTorch's)."""
    x1, x2 = as_tensor_arg(x1, "x1"), as_tensor_arg(x2, "x2")
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return linalg_vector_norm(diff, p, -1)


@api(MUL, SUM, method="vdot", export="vdot")
def vdot(input: Tensor, other: Tensor) -> Tensor:
    """Dot product of two 1-D tensors, the first conjugated (real tensors: ``dot``)."""
    from .complex_functions import conj
    from .linalg import dot

    return dot(conj(input), other)


@api(MATMUL, MUL, ADD, method="addr", export="addr")
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)``."""
    vec1, vec2 = as_tensor_arg(vec1, "vec1"), as_tensor_arg(vec2, "vec2")
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.ndim}-D"
                           if vec1.ndim != 1 else
                           f"addr: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    return _scaled_sum(as_tensor_arg(input), vec1.unsqueeze(1) * vec2.unsqueeze(0), beta, alpha)


@api(MATMUL, MUL, ADD, method="addbmm", export="addbmm")
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``: the batch of products
    summed."""
    b1, b2 = as_tensor_arg(batch1, "batch1"), as_tensor_arg(batch2, "batch2")
    if b1.ndim != 3 or b2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if b1.ndim != 3 else
                           "batch2 must be a 3D tensor")
    return _scaled_sum(as_tensor_arg(input), bmm(b1, b2).sum(0), beta, alpha)


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The split points of the cheapest product order of matrices ``dims[i] x dims[i+1]``
    (the textbook dynamic programme, as PyTorch's ``multi_dot``)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


@api(MATMUL)
def multi_dot(tensors) -> Tensor:
    """The product of a chain of matrices in the cheapest order (the first may be a row
    vector, the last a column vector, as 1-D tensors) -- ``torch.linalg.multi_dot``."""
    ts = [as_tensor_arg(t, "tensors") for t in tensors]
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_vec:
        ts[0] = ts[0].unsqueeze(0)
    if last_vec:
        ts[-1] = ts[-1].unsqueeze(1)
    for i, t in enumerate(ts):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    for i in range(len(ts) - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            a, b = ts[i].shape, ts[i + 1].shape
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"({a[0]}, {a[1]}) and ({b[0]}, {b[1]}) cannot be multiplied")
    split = _chain_order([ts[0].shape[0]] + [t.shape[1] for t in ts])

    def product(i: int, j: int) -> Tensor:
        if i == j:
            return ts[i]
        k = split[i][j]
        return matmul(product(i, k), product(k + 1, j))
    out = product(0, len(ts) - 1)
    if first_vec:
        out = out.squeeze(0)
    if last_vec:
        out = out.squeeze(-1)
    return out


@api(MATMUL, export="chain_matmul")
def chain_matmul(*matrices) -> Tensor:
    """``linalg.multi_dot(matrices)`` (PyTorch's deprecated spelling, with its warning)."""
    import warnings

    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch "
                  "release. Use torch.linalg.multi_dot instead, which accepts a list of two "
                  "or more tensors rather than multiple parameters.", UserWarning, stacklevel=2)
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


@api(MUL, ADD, method="cross", export="cross")
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (default: the first dim of size 3, with
    PyTorch's deprecation warning; ``linalg.cross`` uses the last)."""
    a, b = as_tensor_arg(input), as_tensor_arg(other, "other")
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if dim is None:
        import warnings

        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use torch.linalg.cross."
                      "\nThe default value of dim will change to agree with that of "
                      "linalg.cross in a future release.", UserWarning, stacklevel=2)
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(a, b, dim=dim)


@api(MUL, ADD)
def linalg_cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (the operands broadcast)."""
    from .concat import cat

    a, b = as_tensor_arg(input), as_tensor_arg(other, "other")
    d = dim % max(a.ndim, 1)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d]} and {b.shape[d]}")

    def c(t, i):
        return t.narrow(d, i, 1)
    a0, a1, a2 = c(a, 0), c(a, 1), c(a, 2)
    b0, b1, b2 = c(b, 0), c(b, 1), c(b, 2)
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


@api(VECTOR_NORM, method="dist", export="dist")
def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The ``p``-norm of ``input - other`` (broadcast), over every element."""
    return linalg_vector_norm((as_tensor_arg(input) - other).reshape(-1), p)
