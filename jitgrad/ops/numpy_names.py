"""NumPy's argument names, as PyTorch's parser takes them: ``x.sum(axis=1, keepdims=True)``.

PyTorch's generated bindings accept ``axis`` for ``dim`` and ``keepdims`` for ``keepdim``
(``torch.cat(xs, axis=1)``, ``x.mean(axis=0)``, ``torch.max(x, axis=1)``), and code written
by NumPy users relies on it. Every public function and ``Tensor`` method of jitgrad with a
``dim`` or ``keepdim`` parameter takes them too: :func:`numpy_names` gives the function a
forwarding that renames those keywords (in C, ``jitgrad._fastops.renamer``: a call without
keywords costs one extra vectorcall, ~20 ns; a Python closure where the extension is not
built). Giving both spellings raises PyTorch's error, ``sum() got an unexpected keyword
argument 'axis'``.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable

from .native import fastops

__all__ = ["NUMPY_NAMES", "numpy_names", "accept_numpy_names"]

#: NumPy's name -> PyTorch's name, for the parameters PyTorch's parser aliases
NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}


def _takes(fn: Callable) -> dict[str, str]:
    """The aliases ``fn`` (a plain Python function) has a parameter for."""
    code = fn.__code__
    params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    return {np_name: name for np_name, name in NUMPY_NAMES.items()
            if name in params and np_name not in params}


def numpy_names(fn: Callable) -> Callable:
    """``fn`` also taking NumPy's names for its ``dim`` / ``keepdim`` parameters; ``fn``
    itself when it has neither (or is not a plain Python function)."""
    if type(fn) is not types.FunctionType:
        return fn
    known = _MADE.get(id(fn))
    if known is not None and known[0] is fn:  # one function, one form: jitgrad.cat is
        return known[1]                       # jitgrad.concatenate, Tensor.amax jitgrad.amax
    names = _takes(fn)
    if not names:
        return fn
    mod = fastops()
    if mod is not None:
        wrapped = mod.renamer(fn, names)
    else:
        wrapped = _python_renamer(fn, names)
    # name, doc, module, the function's own attributes (autocast's), and __wrapped__, which
    # inspect.signature and help() follow
    functools.update_wrapper(wrapped, fn)
    _MADE[id(fn)] = (fn, wrapped)
    return wrapped


_MADE: dict[int, tuple] = {}  # id(function) -> (function, its numpy_names form)


def _python_renamer(fn: Callable, names: dict[str, str]) -> Callable:
    """The C renamer's behaviour in Python (the extension not built, or disabled)."""
    def renamed(*args, **kwargs):
        if kwargs:
            for np_name, name in names.items():
                if np_name in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{fn.__name__}() got an unexpected keyword argument "
                                        f"'{np_name}'")
                    kwargs[name] = kwargs.pop(np_name)
        return fn(*args, **kwargs)
    return renamed


def accept_numpy_names(namespace: dict, module_prefix: str = "jitgrad") -> None:
    """Replace, in ``namespace`` (a module's globals, a class's attributes), each function
    of jitgrad's (``__module__`` under ``module_prefix``) that has a ``dim`` or ``keepdim``
    parameter by its :func:`numpy_names` form."""
    for key, fn in list(namespace.items()):
        if type(fn) is types.FunctionType and not key.startswith("_") and \
                (fn.__module__ or "").startswith(module_prefix):
            new = numpy_names(fn)
            if new is not fn:
                namespace[key] = new
