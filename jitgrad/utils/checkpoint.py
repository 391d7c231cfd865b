"""Activation checkpointing, as ``torch.utils.checkpoint``: ``checkpoint(function, *args)``
runs ``function`` without keeping the tensors its backward needs, and runs it again during
backward to get them; ``checkpoint_sequential`` does so for segments of a sequence of
modules. Gradients are those of the plain call; memory holds only the inputs between the
forward and the backward.

``use_reentrant=False`` (recommended): the forward runs under ``saved_tensors_hooks`` whose
pack hook keeps a number instead of each tensor; the first unpack during backward runs the
function again (same random state when ``preserve_rng_state``) with hooks recording the
tensors in order, and each number is answered from there. Works with ``autograd.grad``,
keyword arguments and inputs that do not require grad.

``use_reentrant=True`` (PyTorch's default when not given, with its warning): a custom
``Function`` runs ``function`` under ``no_grad``; its backward reruns it with grad enabled
on detached inputs and calls ``backward`` inside the backward pass. Not usable with
``autograd.grad`` or ``backward(inputs=...)`` (PyTorch's error).

>>> import jitgrad
>>> from jitgrad.utils.checkpoint import checkpoint
>>> x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
>>> checkpoint(lambda t: (t.exp() * t).sum(), x, use_reentrant=False).backward()
>>> x.grad
tensor([ 5.4366, 22.1672])
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from ..autograd import grad_mode
from ..autograd.engine import backward as _backward
from ..autograd.engine import is_checkpoint_valid
from ..autograd.function import Function
from ..autograd.graph import saved_tensors_hooks
from ..tensor import Tensor
from ..trace.state import STATE as _TRACE
from ..trace.tracer import RngMark

__all__ = ["checkpoint", "checkpoint_sequential"]


def _noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


@contextlib.contextmanager
def _rng_at(state, enabled: bool):
    """Run the block with the default generator at ``state``, then put back the state it
    had (PyTorch's ``fork_rng`` around the recomputation). A state taken while
    ``jitgrad.compile`` traced (``Tracer.rng_mark``): a traced recomputation reuses the
    forward's draws (``Tracer.replaying``); run eagerly (the call finished eagerly after a
    graph break), the snapshot is put back as a state would be."""
    if not enabled:
        yield
        return
    if isinstance(state, RngMark):
        if _TRACE.tracer is not None:
            with _TRACE.tracer.replaying(state):
                yield
            return
        from ..random import default_generator

        outside = default_generator._state()
        default_generator._restore(state.state)
        try:
            yield
        finally:
            default_generator._restore(outside)
        return
    from ..random import get_rng_state, set_rng_state

    outside = get_rng_state()
    set_rng_state(state)
    try:
        yield
    finally:
        set_rng_state(outside)


def _rng_state(enabled: bool):
    """The default generator's state for ``_rng_at`` (None: not preserved); while tracing,
    the tracer's mark (a uint8 tensor's value would be a graph break)."""
    if not enabled:
        return None
    if _TRACE.tracer is not None:
        return _TRACE.tracer.rng_mark()
    from ..random import get_rng_state

    return get_rng_state()


# ------------------------------------------------------------------------ reentrant
class CheckpointFunction(Function):
    """``use_reentrant=True``: the forward without a graph; the backward recomputes it and
    runs ``backward`` on the recomputed outputs."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          stacklevel=4)
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.fwd_rng_state = _rng_state(preserve_rng_state)
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if not is_checkpoint_valid():
            from ..trace.tracer import TraceError, active

            if active() is not None:  # jitgrad.compile deriving a backward graph: eagerly
                raise TraceError("a use_reentrant=True checkpoint's backward runs through "
                                 "backward() only")
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() "
                "or passing an `inputs` parameter to .backward(). To resolve this error, you "
                "can either set use_reentrant=False, or call .backward() without passing the "
                "`inputs` argument.")
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t
        with _rng_at(ctx.fwd_rng_state, ctx.preserve_rng_state):
            detached = []
            for a in inputs:
                if isinstance(a, Tensor):
                    d = a.detach()
                    d.requires_grad_(a.requires_grad)
                    a = d
                detached.append(a)
            with grad_mode.enable_grad():
                outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        with_grad, their_grads = [], []
        for out, g in zip(outputs, grads):
            if isinstance(out, Tensor) and out.requires_grad:
                with_grad.append(out)
                their_grads.append(g)
        if not with_grad:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        _backward(with_grad, their_grads)
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None
                                    for a in detached)


# --------------------------------------------------------------------- non-reentrant
class _Frame:
    """One checkpointed call: what its recomputation needs, and the tensors it gave."""

    __slots__ = ("function", "args", "kwargs", "rng_state", "preserve", "context_fn",
                 "count", "recomputed")

    def __init__(self, function, args, kwargs, preserve: bool, context_fn) -> None:
        self.function, self.args, self.kwargs = function, args, kwargs
        self.preserve, self.context_fn = preserve, context_fn
        self.rng_state = _rng_state(preserve)
        self.count = 0
        self.recomputed: list | None = None

    def pack(self, tensor: Tensor) -> _Handle:
        h = _Handle(self, self.count)
        self.count += 1
        return h

    def unpack(self, handle: _Handle) -> Tensor:
        if self.recomputed is None:
            self.recompute()
        if handle.index >= len(self.recomputed):
            raise RuntimeError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have "
                "different metadata than during the forward pass. The recomputation saved "
                f"{len(self.recomputed)} tensors, the forward {self.count}: the function must "
                "do the same operations when it is run again.")
        return self.recomputed[handle.index]

    def recompute(self) -> None:
        saved: list = []

        def keep(t: Tensor) -> int:
            saved.append(t)
            return len(saved) - 1

        _, recompute_ctx = self.context_fn()
        with _rng_at(self.rng_state, self.preserve), grad_mode.enable_grad(), \
                saved_tensors_hooks(keep, saved.__getitem__), recompute_ctx:
            self.function(*self.args, **self.kwargs)
        self.recomputed = saved


class _Handle:
    """What the graph keeps for a checkpointed saved tensor: its frame and position."""

    __slots__ = ("frame", "index")

    def __init__(self, frame: _Frame, index: int) -> None:
        self.frame, self.index = frame, index


def _checkpoint_without_reentrant(function, preserve: bool, context_fn, args, kwargs):
    frame = _Frame(function, args, kwargs, preserve, context_fn)
    forward_ctx, _ = context_fn()
    with saved_tensors_hooks(frame.pack, lambda h: h.frame.unpack(h)), forward_ctx:
        return function(*args, **kwargs)


# ------------------------------------------------------------------------- public
def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None,
               context_fn: Callable = _noop_context_fn, determinism_check: str = "default",
               debug: bool = False, early_stop: bool = True, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` without keeping its intermediate tensors: backward
    runs it again to get them (``preserve_rng_state=True``: with the random state of the
    first run, so dropout draws the same masks). ``use_reentrant`` should be given
    (PyTorch's warning when it is not; ``False`` is recommended); keyword arguments for
    ``function`` need ``use_reentrant=False``."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
            "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an "
            "exception. use_reentrant=False is recommended, but if you need to preserve the "
            "current default behavior, you can pass use_reentrant=True. Refer to docs for "
            "more details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got "
                         f"{determinism_check}")
    if use_reentrant:
        if context_fn is not _noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    return _checkpoint_without_reentrant(function, preserve, context_fn, args, kwargs)


def checkpoint_sequential(functions: Iterable[Callable] | Any, segments: int, input: Tensor,
                          use_reentrant: bool | None = None, **kwargs: Any) -> Tensor:
    """Run ``functions`` (an ``nn.Sequential`` or a list of modules / functions) one after
    the other on ``input``, in ``segments`` chunks: every chunk but the last is
    checkpointed (only its input is kept)."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should "
            "be passed explicitly. In version 2.9 we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is recommended, but if you need to preserve "
            "the current default behavior, you can pass use_reentrant=True. Refer to docs for "
            "more details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    from ..nn.container import Sequential

    if isinstance(functions, Sequential):
        functions = list(functions.children())
    functions = list(functions)

    def run(start: int, end: int) -> Callable:
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
