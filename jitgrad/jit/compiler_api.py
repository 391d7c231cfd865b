"""``torch.compiler``'s and ``torch._dynamo``'s user-facing functions, for ``jitgrad.compile``:
``reset`` (forget every compiled function's traces), ``disable`` (a function that always runs
eagerly: a call of it inside a compiled function stops the trace there, a graph break),
``is_compiling`` (True while a compiled function is being traced), and the hints jitgrad has no
use for (``allow_in_graph``: jitgrad traces through every function anyway; ``mark_dynamic`` /
``mark_static``: each shape gets its own trace, its kernels are shape-generic;
``cudagraph_mark_step_begin``: no CUDA graphs)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..trace.state import STATE as _TRACE

__all__ = ["reset", "disable", "is_compiling", "is_dynamo_compiling", "allow_in_graph",
           "mark_dynamic", "mark_static", "maybe_mark_dynamic", "cudagraph_mark_step_begin",
           "graph_break"]


def reset() -> None:
    """Forget the traces, plans and retrace counts of every compiled function (generated
    kernels stay cached on disk): the next call of each traces again."""
    from .function import live_compiled_functions

    for cf in live_compiled_functions():
        cf.reset()


def disable(fn: Callable | None = None, recursive: bool = True, *,
            reason: str | None = None) -> Callable:
    """``fn`` made to run eagerly: compiled on its own, it is never traced; called inside a
    compiled function, the trace stops there (a graph break: that call of the compiled
    function finishes eagerly; ``fullgraph=True`` raises). A decorator without ``fn``."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    why = f"{getattr(fn, '__qualname__', fn)} is marked jitgrad.compiler.disable" + (
        f" ({reason})" if reason else "")

    @functools.wraps(fn)
    def run_eagerly(*args, **kwargs):
        tracer = _TRACE.tracer
        if tracer is not None:
            tracer.graph_break(why)
        return fn(*args, **kwargs)
    run_eagerly._jitgrad_disabled = True
    return run_eagerly


def graph_break() -> None:
    """Stop the trace of the compiled function being traced here (its call finishes
    eagerly); nothing outside a trace."""
    tracer = _TRACE.tracer
    if tracer is not None:
        tracer.graph_break("jitgrad._dynamo.graph_break()")


def is_compiling() -> bool:
    """Whether the code runs while ``jitgrad.compile`` traces a function."""
    return _TRACE.tracer is not None


is_dynamo_compiling = is_compiling


def allow_in_graph(fn: Callable) -> Callable:
    """``fn`` itself: jitgrad traces through every function it calls."""
    return fn


def mark_dynamic(t, index, *, min=None, max=None) -> None:  # noqa: A002
    """Nothing: jitgrad traces each shape once (its kernels take any size)."""


def maybe_mark_dynamic(t, index) -> None:
    """Nothing (see :func:`mark_dynamic`)."""


def mark_static(t, index=None) -> None:
    """Nothing: every dim is static to jitgrad."""


def cudagraph_mark_step_begin() -> None:
    """Nothing: jitgrad's plans use no CUDA graphs."""
