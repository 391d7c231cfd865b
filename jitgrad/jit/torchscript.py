"""``torch.jit``'s scripting and tracing entry points, for code written for TorchScript.

TorchScript compiles a subset of Python with the semantics eager PyTorch gives it; jitgrad
runs that Python as it is: ``script(fn_or_module)`` returns its argument, the decorators
(``ignore``, ``unused``, ``export``) return theirs, ``annotate(type, value)`` is ``value``,
``Final`` is ``typing.Final``. ``trace(fn, example_inputs)`` returns ``jitgrad.compile(fn)``
(an ``OptimizedModule`` for a module) after running it once on the example: a traced
graph, as TorchScript's tracer records one -- but guarded, so a call that takes another
branch or shape is traced again instead of replaying the example's ops. ``is_scripting()``
and ``is_tracing()`` are False (nothing runs under TorchScript). There are no TorchScript
archives: save a model's ``state_dict`` with ``jitgrad.save``."""

from __future__ import annotations

import typing
from collections.abc import Callable

__all__ = ["script", "trace", "ignore", "unused", "export", "annotate", "Final",
           "is_scripting", "is_tracing"]

Final = typing.Final


def script(obj, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """``obj`` itself (a function, a module or a class): its Python runs eagerly, with the
    semantics TorchScript would give it."""
    return obj


def trace(func, example_inputs=None, optimize=None, check_trace: bool = True,
          check_inputs=None, check_tolerance: float = 1e-5, strict: bool = True,
          _force_outplace: bool = False, _module_class=None, _compilation_unit=None,
          example_kwarg_inputs=None, _store_inputs: bool = True):
    """``jitgrad.compile(func)``, traced on ``example_inputs`` (a tensor or a tuple of
    them; ``example_kwarg_inputs``: a dict) before it is returned."""
    from .function import compile as jit_compile

    traced = jit_compile(func)
    if example_inputs is not None or example_kwarg_inputs is not None:
        args = example_inputs if isinstance(example_inputs, tuple) else (
            () if example_inputs is None else (example_inputs,))
        traced(*args, **(example_kwarg_inputs or {}))
    return traced


def ignore(drop=False, **kwargs) -> Callable:
    """``@torch.jit.ignore`` / ``@torch.jit.ignore(drop=True)``: the function itself."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable) -> Callable:
    """``@torch.jit.unused``: the function itself."""
    return fn


def export(fn: Callable) -> Callable:
    """``@torch.jit.export``: the method itself."""
    return fn


def annotate(the_type, the_value):
    """``torch.jit.annotate(type, value)``: ``value``."""
    return the_value


def is_scripting() -> bool:
    """False: no code runs under TorchScript here."""
    return False


def is_tracing() -> bool:
    """False: TorchScript's tracer never runs here (``jitgrad.compile``'s trace is not
    it)."""
    return False
