"""``jitgrad.compile`` and its companions.

* ``function.py``: ``CompiledFunction`` (keys, entry lookup, tracing a miss, the first call);
* ``entry.py``: one traced signature's graphs and plans; ``call_path.py``: its generated
  cache-hit path;
* ``guards.py``: what an entry checks besides its key;
* ``autograd_glue.py``: the ``CompiledFunctionBackward`` node;
* ``functional.py``: ``grad`` and ``value_and_grad``;
* ``options.py``: ``compile``'s arguments, checked as ``torch.compile`` checks them;
* ``module_wrapper.py``: ``OptimizedModule`` (``compile(module)``) and ``Module.compile()``;
* ``torchscript.py``: ``torch.jit``'s ``script``, ``trace`` and decorators.
"""

from __future__ import annotations

from .autograd_glue import CompiledFunctionBackward
from .entry import Lowered
from .function import MAX_RETRACES_BEFORE_WARNING, CompiledFunction, compile, explain
from .functional import grad, value_and_grad
from .module_wrapper import OptimizedModule
from .options import CompileOptionError
from .torchscript import (
    Final,
    annotate,
    export,
    freeze,
    ignore,
    is_scripting,
    is_tracing,
    load,
    optimize_for_inference,
    save,
    script,
    trace,
    unused,
)

__all__ = ["compile", "CompiledFunction", "CompiledFunctionBackward", "explain", "grad",
           "value_and_grad", "Lowered", "MAX_RETRACES_BEFORE_WARNING", "OptimizedModule",
           "CompileOptionError", "script", "trace", "ignore", "unused", "export", "annotate",
           "Final", "is_scripting", "is_tracing", "save", "load", "freeze",
           "optimize_for_inference"]
