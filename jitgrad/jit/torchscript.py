"""``torch.jit``'s scripting and tracing entry points, for code written for TorchScript.

TorchScript compiles a subset of Python with the semantics eager PyTorch gives it; jitgrad
runs that Python as it is: ``script(fn_or_module)`` returns its argument, the decorators
(``ignore``, ``unused``, ``export``) return theirs, ``annotate(type, value)`` is ``value``,
``Final`` is ``typing.Final``. ``trace(fn, example_inputs)`` returns ``jitgrad.compile(fn)``
(an ``OptimizedModule`` for a module) after running it once on the example: a traced
graph, as TorchScript's tracer records one -- but guarded, so a call that takes another
branch or shape is traced again instead of replaying the example's ops. ``is_scripting()``
and ``is_tracing()`` are False (nothing runs under TorchScript). ``save`` / ``load`` write
and read a jitgrad archive of the module (pickled in ``jitgrad.save``'s format, with the
``_extra_files``): the same calls as TorchScript's, but not a TorchScript archive --
PyTorch cannot load it, and the module's class must be importable where it is loaded.
``freeze`` and ``optimize_for_inference`` return the (eval-mode) module."""

from __future__ import annotations

import typing
from collections.abc import Callable

__all__ = ["script", "trace", "ignore", "unused", "export", "annotate", "Final",
           "is_scripting", "is_tracing", "save", "load", "freeze", "optimize_for_inference"]

_ARCHIVE = "jitgrad.jit archive"  # the key marking what save() wrote

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


def _plain_module(m):
    """A compiled wrapper's module (what is saved: the compiled plans are per process)."""
    return getattr(m, "_orig_mod", m)


def save(m, f, _extra_files: dict | None = None) -> None:
    """Write module (or function) ``m`` and the strings or bytes of ``_extra_files``
    (name -> content) to ``f`` (a path or a binary file), for :func:`load`."""
    from ..serialization import save as save_object

    extra = {k: v.encode() if isinstance(v, str) else bytes(v)
             for k, v in (_extra_files or {}).items()}
    save_object({_ARCHIVE: 1, "module": _plain_module(m), "extra_files": extra}, f)


def load(f, map_location=None, _extra_files: dict | None = None, _restore_shapes=False):
    """The module :func:`save` wrote to ``f``; ``_extra_files`` (name -> anything) is
    filled with the saved contents of the names it holds (as bytes, as TorchScript's).
    Anything else in ``f`` raises (a state_dict: ``jitgrad.load`` reads it)."""
    from ..serialization import load as load_object

    obj = load_object(f, map_location=map_location, weights_only=False)
    if not (isinstance(obj, dict) and obj.get(_ARCHIVE) == 1):
        raise RuntimeError(f"{f!r} is not an archive jitgrad.jit.save wrote (PyTorch's "
                           "TorchScript archives cannot be read: load a state_dict with "
                           "jitgrad.load instead)")
    if _extra_files is not None:
        saved = obj["extra_files"]
        for name in list(_extra_files):
            if name not in saved:
                raise RuntimeError(f"PytorchStreamReader failed locating file "
                                   f"extra/{name}: file not found")
            _extra_files[name] = saved[name]
    return obj["module"]


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    """The module itself; like TorchScript's, only for a module in eval mode."""
    if getattr(mod, "training", False):
        raise RuntimeError("Freezing is currently only implemented for modules in eval mode. "
                           "Please call .eval() on your module before freezing.")
    return mod


def optimize_for_inference(mod, other_methods=None):
    """The module, put in eval mode (TorchScript's freezes and rewrites it; jitgrad runs
    it as it is -- compile it with ``jitgrad.compile`` for fused kernels)."""
    if hasattr(mod, "eval"):
        mod.eval()
    return mod
