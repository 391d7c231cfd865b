"""NumPy arrays passed to a compiled function, as the trace hands them to it.

A NumPy argument is an input of the compiled graph (the key holds its shape and dtype; the
plan reads the caller's array at every call), so jitgrad ops on it -- ``x * a``,
``jitgrad.from_numpy(a)``, ``jitgrad.tensor(a)`` -- compile. NumPy code on it runs outside
the trace, and what it computes would be frozen into the plan: ``np.sum(a)`` as a number,
``a[0]``, ``int(np.count_nonzero(a > 1))``, ``a += 1`` (a write the plan would not
repeat). So, while the call is traced, the function gets a :class:`TracedNumPyArgument`: a
view of the same memory whose NumPy entry points (ufuncs, array functions, indexing,
conversions to Python values, the methods that compute without a ufunc) are a graph break
(``Tracer.graph_break``) before they run -- on plain arrays, so what they return is what
eager NumPy returns.

NumPy's conversions do not ask a subclass (``np.asarray(a)`` makes a base-class view, and
``np.array(a)`` a copy, that NumPy code would then read unseen), so while such a call is
traced they are watched (:func:`conversions_watched`: ``numpy.asarray``, ``array``,
``ascontiguousarray``, ``asfortranarray``, ``asarray_chkfinite`` replaced for the call):
a conversion that would give the argument's own memory gives the traced view itself (eager
NumPy returns the same array object there too), one that copies it is a graph break.

Not seen: the conversions bound to other names before the call (``from numpy import
asarray``), and arrays nested in containers (only top-level positional and keyword
arguments are wrapped).
"""

from __future__ import annotations

import sys

import numpy as np

from .state import STATE

__all__ = ["TracedNumPyArgument", "wrap_numpy_arguments", "base_array", "conversions_watched"]


def base_array(x: np.ndarray) -> np.ndarray:
    """The plain NumPy array behind ``x`` for jitgrad to wrap (kernels take plain arrays):
    the argument itself for a traced NumPy argument (the graph's input), else a base-class
    view of any other subclass."""
    if type(x) is np.ndarray:
        return x
    orig = getattr(x, "traced_from", None)
    return orig if orig is not None else x.view(np.ndarray)


def _from_user_code(depth: int = 3) -> bool:
    """Whether the NumPy call being intercepted comes from user code: the first frame
    outside NumPy (``np.sum`` is Python code calling a ufunc) is not jitgrad's own (its ops
    run NumPy on the argument's array: that is the traced computation). ``depth``: frames
    above this one to start from (3: this function, ``_break``, the hook)."""
    f = sys._getframe(depth)
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if mod != "numpy" and not mod.startswith("numpy."):
            return mod != "jitgrad" and not mod.startswith("jitgrad.")
        f = f.f_back
    return True


def _break(what: str) -> None:
    tr = STATE.tracer
    if tr is not None and _from_user_code():
        tr.graph_break(f"NumPy code reads a NumPy argument ({what}; its result would be "
                       "frozen into the plan: pass a tensor, or use jitgrad ops on it)")


def _plain(x):
    """``x`` with traced NumPy arguments (also inside tuples, lists, dicts) as plain views."""
    if isinstance(x, TracedNumPyArgument):
        return x.view(np.ndarray)
    if type(x) in (tuple, list):
        return type(x)(_plain(i) for i in x)
    if type(x) is dict:
        return {k: _plain(v) for k, v in x.items()}
    return x


class TracedNumPyArgument(np.ndarray):
    """A NumPy argument while its compiled function is traced (see the module)."""

    def __array_finalize__(self, obj) -> None:
        if isinstance(obj, TracedNumPyArgument):  # a view made from it: ``a.T``, ``a[1:]``
            _break("a view of it")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _break(f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}"))
        if "out" in kwargs:
            kwargs["out"] = _plain(kwargs["out"])
        return getattr(ufunc, method)(*_plain(inputs), **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        _break(f"np.{func.__name__}")
        return func(*_plain(args), **_plain(kwargs))

    def __getitem__(self, index):
        _break("indexing")
        return self.view(np.ndarray)[_plain(index)]

    def __setitem__(self, index, value):
        _break("an item assignment")
        self.view(np.ndarray)[_plain(index)] = _plain(value)

    def __iter__(self):
        _break("iteration")
        return iter(self.view(np.ndarray))


def _computing(name: str):
    def method(self, *args, **kwargs):
        _break(f".{name}()")
        return getattr(self.view(np.ndarray), name)(*_plain(args), **_plain(kwargs))
    method.__name__ = name
    return method


# methods and conversions that give values without going through a ufunc
for _name in ("item", "tolist", "tobytes", "__float__", "__int__", "__bool__", "__index__",
              "__complex__", "__repr__", "__str__", "__format__", "dot", "argmax", "argmin",
              "argsort", "nonzero", "searchsorted", "sort", "partition", "argpartition",
              "take", "compress", "choose", "put", "fill", "trace", "byteswap", "tofile",
              "dump", "dumps", "__reduce__", "__reduce_ex__", "__deepcopy__", "__copy__",
              "copy", "astype"):
    setattr(TracedNumPyArgument, _name, _computing(_name))


#: NumPy's conversions that make a plain array without asking a subclass
CONVERSIONS = ("asarray", "array", "ascontiguousarray", "asfortranarray", "asarray_chkfinite")
_ORIGINAL = {name: getattr(np, name) for name in CONVERSIONS}
_watching = [0]  # nesting depth of conversions_watched (a compiled call inside another's)


def _watched(name: str):
    original = _ORIGINAL[name]

    def convert(a, *args, **kwargs):
        out = original(a, *args, **kwargs)
        if isinstance(a, TracedNumPyArgument) and STATE.tracer is not None and \
                _from_user_code(2):
            if type(out) is np.ndarray and out.dtype == a.dtype and out.shape == a.shape \
                    and out.strides == a.strides and out.ctypes.data == a.ctypes.data:
                return a  # the argument's own memory: the traced view, as eager's same array
            if name != "asarray_chkfinite" and not np.may_share_memory(out, a):
                STATE.tracer.graph_break(f"np.{name}() copies a NumPy argument (NumPy code on "
                                         "the copy would be frozen into the plan)")
            else:
                STATE.tracer.graph_break(f"np.{name}() reads a NumPy argument's values")
        return out
    convert.__name__ = convert.__qualname__ = name
    convert.__doc__ = original.__doc__
    return convert


_WATCHED = {name: _watched(name) for name in CONVERSIONS}


class conversions_watched:
    """While a call with NumPy arguments is traced: NumPy's conversions replaced by the
    watched ones (restored on exit, exceptions included; nested uses install once)."""

    def __enter__(self) -> conversions_watched:
        if _watching[0] == 0:
            for name in CONVERSIONS:
                setattr(np, name, _WATCHED[name])
        _watching[0] += 1
        return self

    def __exit__(self, *exc) -> None:
        _watching[0] -= 1
        if _watching[0] == 0:
            for name in CONVERSIONS:
                setattr(np, name, _ORIGINAL[name])


def wrap_numpy_arguments(args: tuple, kwargs: dict, tracer) -> tuple[tuple, dict]:
    """``(args, kwargs)`` with top-level NumPy arrays replaced by traced views, each
    registered with ``tracer`` as the same input as the array (``Tracer.alias_input``)."""
    def wrap(a):
        if type(a) is not np.ndarray or not tracer.is_input(a):
            return a
        v = a.view(TracedNumPyArgument)
        v.traced_from = a
        tracer.alias_input(v, a)
        return v

    if not any(type(a) is np.ndarray for a in args) and not any(
            type(a) is np.ndarray for a in kwargs.values()):
        return args, kwargs
    return tuple(wrap(a) for a in args), {k: wrap(v) for k, v in kwargs.items()}
