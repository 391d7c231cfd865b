"""``torch._foreach_*``: an op applied to every tensor of a list (PyTorch's multi-tensor
functions, which optimizers' ``foreach`` paths and EMA helpers such as timm's ``ModelEmaV3``
call).

Each is a plain loop over jitgrad's own ops -- no fused kernel -- so autograd, version
counters, dtype rules and ``jitgrad.compile`` tracing are those of the per-tensor ops. As in
PyTorch (2.x): the out-of-place functions return a tuple of new tensors; the in-place ones
(a trailing ``_``) write into each tensor, bump its version and return the list they were
given. The second argument takes the forms PyTorch's overloads take: a number, a list of
numbers (one per tensor), a list of tensors (broadcast against each tensor) and, for
``add`` / ``sub`` / ``mul`` / ``div``, a single 0-d tensor. Argument lists are checked up
front with PyTorch's messages (empty list, length mismatch).

>>> import jitgrad
>>> params = [jitgrad.ones(2), jitgrad.zeros(3)]
>>> jitgrad._foreach_mul_(params, 0.5) is params
True
>>> jitgrad._foreach_add(params, [1, 2])
(tensor([1.5000, 1.5000]), tensor([2., 2., 2.]))
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Number

from ..tensor import Tensor

_TensorList = Sequence[Tensor]
_ScalarArg = Number | Sequence[Number] | Sequence[Tensor] | Tensor

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1",
          "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal",
          "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc")

__all__ = [
    *(f"_foreach_{n}{s}" for n in _UNARY for s in ("", "_")),
    *(f"_foreach_{n}{s}" for n in ("add", "sub", "mul", "div", "maximum", "minimum",
                                   "clamp_min", "clamp_max", "pow", "lerp", "addcmul",
                                   "addcdiv") for s in ("", "_")),
    "_foreach_copy_", "_foreach_zero_", "_foreach_norm", "_foreach_max", "_foreach_clone",
    "_foreach_mm",
]


def _named(fn, name: str, inplace: bool, what: str):
    """``fn`` named ``name``, documented as ``what`` and what it returns."""
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = what + (" In place: returns ``self``." if inplace else
                         " Returns a tuple of new tensors.")
    return fn


# ------------------------------------------------------------------- argument checks
def _tensor_list(name: str, self, position: int = 0) -> Sequence[Tensor]:
    """``self`` checked as PyTorch's ``Tensor[]`` argument: a list or tuple of tensors, not
    empty."""
    if not isinstance(self, (list, tuple)):
        raise TypeError(f"{name}(): argument 'self' (position {position + 1}) must be tuple of "
                        f"Tensors, not {type(self).__name__}")
    for i, t in enumerate(self):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument {position}, but got "
                            f"{type(t).__name__}")
    if not self:
        raise RuntimeError("Tensor list must have at least one tensor.")
    return self


def _same_length(self: Sequence, other: Sequence) -> None:
    if len(self) != len(other):
        raise RuntimeError(f"Tensor lists must have the same number of tensors, got "
                           f"{len(self)} and {len(other)}")


def _invalid(name: str, *args, **kwargs) -> TypeError:
    got = ", ".join([type(a).__name__ for a in args] +
                    [f"{k}={type(v).__name__}" for k, v in kwargs.items()])
    return TypeError(f"{name}() received an invalid combination of arguments - got ({got})")


def _per_tensor(name: str, self: Sequence[Tensor], other, tensor_overload: bool = False,
                position: int = 1) -> list:
    """The second argument of a binary op, one item per tensor of ``self``: a number for
    all, a list of numbers (as many as tensors), a list of tensors (as many), or a single
    tensor -- 0-d where ``tensor_overload`` (PyTorch's ``Tensor other`` overload), else read
    as a number (PyTorch's parser takes a 0-d tensor for a ``Scalar``)."""
    n = len(self)
    if isinstance(other, Tensor):
        if tensor_overload and other.ndim != 0:
            raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {other.ndim} "
                               f"dimensions and {other.numel()} elements.")
        if not tensor_overload and other.ndim != 0:
            raise _invalid(name, self, other)
        return [other] * n
    if isinstance(other, (list, tuple)):
        if any(isinstance(o, Tensor) for o in other):  # PyTorch: then all must be tensors
            for i, o in enumerate(other):
                if not isinstance(o, Tensor):
                    raise TypeError(f"expected Tensor as element {i} in argument {position}, "
                                    f"but got {type(o).__name__}")
            _same_length(self, other)
            return list(other)
        for s in other:
            if not isinstance(s, Number):
                raise _invalid(name, self, other)
        if len(other) != n:
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return list(other)
    if isinstance(other, Number):
        return [other] * n
    raise _invalid(name, self, other)


def _write(t: Tensor, result: Tensor) -> None:
    """``result`` (computed out of place from ``t``) written into ``t``, with PyTorch's
    in-place dtype check and autograd history."""
    from .inplace import apply_inplace

    apply_inplace(t, result)


# ------------------------------------------------------------------- unary
def _unary(op: str, inplace: bool):
    name = f"_foreach_{op}{'_' if inplace else ''}"
    if inplace:
        def fn(self: _TensorList) -> _TensorList:
            for t in _tensor_list(name, self):
                getattr(t, op + "_")()
            return self
        doc = (f"Apply :func:`jitgrad.{op}` in place to each tensor of ``self`` (returns "
               f"``self``).")
    else:
        def fn(self: _TensorList) -> tuple[Tensor, ...]:
            return tuple(getattr(t, op)() for t in _tensor_list(name, self))
        doc = f"Apply :func:`jitgrad.{op}` to each tensor of ``self`` (a tuple of new tensors)."
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


for _op in _UNARY:
    globals()[f"_foreach_{_op}"] = _unary(_op, False)
    globals()[f"_foreach_{_op}_"] = _unary(_op, True)
del _op


# ------------------------------------------------------------------- binary arithmetic
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def _arith(op: str, inplace: bool, with_alpha: bool):
    """``add`` / ``sub`` / ``mul`` / ``div``; all but ``sub`` have PyTorch's single-tensor
    overload (a 0-d tensor; ``sub`` reads a 0-d tensor as a number, and takes no ``alpha``
    with it)."""
    name = f"_foreach_{op}{'_' if inplace else ''}"
    tensor_overload = op != "sub"

    def run(self, other, alpha):
        self = _tensor_list(name, self)
        if alpha is not None and isinstance(other, Number):  # PyTorch: no such overload
            raise _invalid(name, self, other, alpha=alpha)
        if alpha is not None and isinstance(other, Tensor) and not tensor_overload:
            raise TypeError(f"{name}(): argument 'other' (position 2) must be tuple of "
                            f"Tensors, not Tensor")
        if alpha is not None and isinstance(other, (list, tuple)):  # a list of tensors, then
            for i, o in enumerate(other):
                if not isinstance(o, Tensor):
                    raise TypeError(f"expected Tensor as element {i} in argument 1, but got "
                                    f"{type(o).__name__}")
        others = _per_tensor(name, self, other, tensor_overload)
        kw = {} if alpha is None else {"alpha": alpha}
        method = op + "_" if inplace else op
        out = tuple(getattr(t, method)(o, **kw) for t, o in zip(self, others))
        return self if inplace else out

    if with_alpha:
        def fn(self: _TensorList, other: _ScalarArg, *, alpha: Number | None = None):
            return run(self, other, alpha)
    else:
        def fn(self: _TensorList, other: _ScalarArg):
            return run(self, other, None)
    what = (f"``self[i] {_SYMBOLS[op]} other``"
            + (" (``other`` times ``alpha`` for tensor forms)" if with_alpha else ""))
    return _named(fn, name, inplace, f"{what} for each tensor of ``self``; ``other``: a "
                  "number, a list of numbers, a list of tensors or a 0-d tensor.")


_foreach_add = _arith("add", False, True)
_foreach_add_ = _arith("add", True, True)
_foreach_sub = _arith("sub", False, True)
_foreach_sub_ = _arith("sub", True, True)
_foreach_mul = _arith("mul", False, False)
_foreach_mul_ = _arith("mul", True, False)
_foreach_div = _arith("div", False, False)
_foreach_div_ = _arith("div", True, False)


# ------------------------------------------------------------------- min / max / clamp / pow
def _bounded(op: str, inplace: bool):
    """``maximum`` / ``minimum`` / ``clamp_min`` / ``clamp_max``: against numbers they are
    ``clamp_min`` / ``clamp_max`` (PyTorch's foreach kernels are), against tensors the
    element-wise ``maximum`` / ``minimum`` (NaN propagating)."""
    name = f"_foreach_{op}{'_' if inplace else ''}"
    clamp = "clamp_min" if op in ("maximum", "clamp_min") else "clamp_max"
    pairwise = "maximum" if clamp == "clamp_min" else "minimum"

    def fn(self: _TensorList, other: _ScalarArg):
        self = _tensor_list(name, self)
        others = _per_tensor(name, self, other)
        out = []
        for t, o in zip(self, others):
            if isinstance(o, Tensor) and o.ndim:
                r = getattr(t, pairwise)(o)
                if inplace:
                    _write(t, r)
                out.append(r)
            else:
                out.append(getattr(t, clamp + ("_" if inplace else ""))(o))
        return self if inplace else tuple(out)

    return _named(fn, name, inplace, f"``{op}(self[i], other)`` for each tensor of ``self``; "
                  "``other``: a number, a list of numbers or a list of tensors.")


_foreach_maximum = _bounded("maximum", False)
_foreach_maximum_ = _bounded("maximum", True)
_foreach_minimum = _bounded("minimum", False)
_foreach_minimum_ = _bounded("minimum", True)
_foreach_clamp_min = _bounded("clamp_min", False)
_foreach_clamp_min_ = _bounded("clamp_min", True)
_foreach_clamp_max = _bounded("clamp_max", False)
_foreach_clamp_max_ = _bounded("clamp_max", True)


def _foreach_pow(self: _TensorList | Number, exponent: _ScalarArg) -> tuple[Tensor, ...]:
    """``self[i] ** exponent`` (a number, a list of numbers or of tensors), or, when ``self``
    is a number, ``self ** exponent[i]`` for a list of tensors. A tuple of new tensors."""
    from .elementwise import pow as _pow

    if isinstance(self, Number):
        exps = _tensor_list("_foreach_pow", exponent, 1)
        return tuple(_pow(self, e) for e in exps)
    self = _tensor_list("_foreach_pow", self)
    return tuple(t.pow(e) for t, e in zip(self, _per_tensor("_foreach_pow", self, exponent)))


def _foreach_pow_(self: _TensorList, exponent: _ScalarArg) -> _TensorList:
    """``self[i] **= exponent`` (a number, a list of numbers or of tensors); returns
    ``self``."""
    self = _tensor_list("_foreach_pow_", self)
    for t, e in zip(self, _per_tensor("_foreach_pow_", self, exponent)):
        t.pow_(e)
    return self


# ------------------------------------------------------------------- ternary
def _lerp(inplace: bool):
    name = f"_foreach_lerp{'_' if inplace else ''}"

    def fn(self: _TensorList, tensors1: _TensorList, weight: _ScalarArg):
        self = _tensor_list(name, self)
        ends = _tensor_list(name, tensors1, 1)
        _same_length(self, ends)
        weights = _per_tensor(name, self, weight, position=2)
        method = "lerp_" if inplace else "lerp"
        out = tuple(getattr(t, method)(e, w) for t, e, w in zip(self, ends, weights))
        return self if inplace else out

    return _named(fn, name, inplace, "``self[i] + weight * (tensors1[i] - self[i])`` for "
                  "each tensor (``weight``: a number, a list of numbers or a list of tensors).")


_foreach_lerp = _lerp(False)
_foreach_lerp_ = _lerp(True)


def _pointwise(op: str, inplace: bool):
    """``addcmul`` / ``addcdiv``: ``value`` a number, a list of numbers, or a 1-D tensor of
    one number per tensor (PyTorch's packed scalars, read on the host)."""
    name = f"_foreach_{op}{'_' if inplace else ''}"
    sign = "*" if op == "addcmul" else "/"

    def fn(self: _TensorList, tensor1: _TensorList, tensor2: _TensorList,
           value: Number | Sequence[Number] | Tensor = 1,
           scalars: Sequence[Number] | Tensor | None = None):
        if scalars is not None:  # PyTorch's name for the list / packed-tensor forms
            value = scalars
        self = _tensor_list(name, self)
        t1 = _tensor_list(name, tensor1, 1)
        t2 = _tensor_list(name, tensor2, 2)
        _same_length(self, t1)
        _same_length(self, t2)
        if isinstance(value, Tensor):
            if value.ndim != 1:
                raise RuntimeError(f"Expected packed scalar Tensor to be of dimension 1. Got "
                                   f"{value.ndim} instead.")
            if value.numel() != len(self):
                raise RuntimeError(f"Expected length of scalars to match input of length "
                                   f"{len(self)} but got {value.numel()} instead.")
            values = value.tolist()
        elif isinstance(value, (list, tuple)):
            values = _per_tensor(name, self, value, position=3)
        else:
            values = [value] * len(self)
        method = op + "_" if inplace else op
        out = tuple(getattr(t, method)(a, b, value=v)
                    for t, a, b, v in zip(self, t1, t2, values))
        return self if inplace else out

    return _named(fn, name, inplace, f"``self[i] + value * tensor1[i] {sign} tensor2[i]`` "
                  "for each tensor (``value``: a number, a list of numbers or a 1-D tensor of "
                  "them).")


_foreach_addcmul = _pointwise("addcmul", False)
_foreach_addcmul_ = _pointwise("addcmul", True)
_foreach_addcdiv = _pointwise("addcdiv", False)
_foreach_addcdiv_ = _pointwise("addcdiv", True)


# ------------------------------------------------------------------- the rest
def _foreach_copy_(self: _TensorList, src: _TensorList,
                   non_blocking: bool = False) -> _TensorList:
    """``self[i].copy_(src[i])`` (broadcast, cast to ``self[i]``'s dtype); returns ``self``."""
    self = _tensor_list("_foreach_copy_", self)
    src = _tensor_list("_foreach_copy_", src, 1)
    _same_length(self, src)
    for t, s in zip(self, src):
        t.copy_(s, non_blocking)
    return self


def _foreach_zero_(self: _TensorList) -> _TensorList:
    """Fill each tensor of ``self`` with zeros in place; returns ``self``."""
    for t in _tensor_list("_foreach_zero_", self):
        t.zero_()
    return self


def _foreach_norm(self: _TensorList, ord: Number = 2, dtype=None) -> tuple[Tensor, ...]:
    """The vector norm of each whole tensor (``linalg.vector_norm``: ``ord`` 2 by default,
    also inf, -inf, 0, 1, p), a tuple of 0-d tensors (in ``dtype`` when given)."""
    from ..linalg import vector_norm

    self = _tensor_list("_foreach_norm", self)
    if not isinstance(ord, Number):
        raise TypeError(f"_foreach_norm(): argument 'ord' (position 2) must be Number, not "
                        f"{type(ord).__name__}")
    return tuple(vector_norm(t, ord, dtype=dtype) for t in self)


def _foreach_max(self: _TensorList) -> tuple[Tensor, ...]:
    """The largest element of each tensor, a tuple of 0-d tensors."""
    return tuple(t.max() for t in _tensor_list("_foreach_max", self))


def _foreach_clone(self: _TensorList, *, memory_format=None) -> tuple[Tensor, ...]:
    """A copy of each tensor (``Tensor.clone``), a tuple."""
    kw = {} if memory_format is None else {"memory_format": memory_format}
    return tuple(t.clone(**kw) for t in _tensor_list("_foreach_clone", self))


def _foreach_mm(self: _TensorList, mat2: _TensorList) -> tuple[Tensor, ...]:
    """``self[i] @ mat2[i]`` for matrices (``Tensor.mm``), a tuple."""
    self = _tensor_list("_foreach_mm", self)
    mat2 = _tensor_list("_foreach_mm", mat2, 1)
    _same_length(self, mat2)
    return tuple(a.mm(b) for a, b in zip(self, mat2))
