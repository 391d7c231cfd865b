"""Thread-local grad mode: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

Each is a context manager and a decorator, as in PyTorch. The flag lives in a
``threading.local`` so one thread's ``no_grad`` never affects another thread.
"""

from __future__ import annotations

import functools
import inspect

from .._thread_modes import GRAD_OFF, CountedLocal

__all__ = [
    "is_grad_enabled",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "is_inference_mode_enabled",
]


class _State(CountedLocal):
    COUNTED = {"enabled": (True, GRAD_OFF)}  # grad mode off on a thread: an item in GRAD_OFF

    def __init__(self) -> None:
        self.enabled = True
        self.inference = False


STATE = _State()

#: the open ``forward_ad.dual_level`` (or None). While one is open, ops take the slow
#: paths, and an op run without grad mode on a tensor that may carry a tangent is noted on
#: it (:func:`note_untracked`): tangents propagate through recorded ops only
DUAL_LEVEL: list = [None]


def note_untracked(inputs) -> None:
    """An op ran without recording (grad mode off) while a forward-AD level is open: if an
    input may carry a tangent -- a dual, or a result with a graph -- the level notes that a
    tangent may have been lost (``unpack_dual`` then raises)."""
    level = DUAL_LEVEL[0]
    if level is None:
        return
    from .engine import _FRAMES

    if _FRAMES.stack:  # a backward pass's rules (they record nothing by design)
        return
    for t in inputs:
        if getattr(t, "_requires_grad", False) and (t._grad_fn is not None
                                                     or id(t) in level.ids):
            level.grad_was_off = True
            return


def is_grad_enabled() -> bool:
    """Whether operations record a graph in this thread."""
    return STATE.enabled


def is_inference_mode_enabled() -> bool:
    """Whether ``inference_mode`` is active in this thread."""
    return STATE.inference


class _GradModeContext:
    """Base for the grad-mode managers: usable with ``with`` and as a decorator."""

    def _enter_value(self) -> bool:
        raise NotImplementedError

    def __enter__(self) -> None:
        self._prev = STATE.enabled
        STATE.enabled = self._enter_value()

    def __exit__(self, *exc) -> None:
        STATE.enabled = self._prev

    def clone(self):
        return self.__class__()

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen_wrapper(*args, **kwargs):
                gen = fn(*args, **kwargs)
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    except BaseException as e:  # forward throw() into the generator
                        with self.clone():
                            response = gen.throw(e)
                    else:
                        with self.clone():
                            try:
                                response = gen.send(request)
                            except StopIteration as stop:
                                return stop.value
            return gen_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeContext):
    """Disable graph recording (context manager or decorator).

    >>> import jitgrad
    >>> x = jitgrad.tensor(1.0, requires_grad=True)
    >>> with jitgrad.no_grad():
    ...     (x * 2).requires_grad
    False
    """

    def __init__(self, orig_func=None) -> None:
        self._orig = orig_func

    def _enter_value(self) -> bool:
        return False

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class enable_grad(_GradModeContext):
    """Enable graph recording inside a ``no_grad`` region (context manager or decorator)."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)

    def _enter_value(self) -> bool:
        return True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to ``mode``; takes effect at once, and as a context manager restores it.

    >>> import jitgrad
    >>> _ = jitgrad.set_grad_enabled(False)
    >>> jitgrad.is_grad_enabled()
    False
    >>> _ = jitgrad.set_grad_enabled(True)
    """

    def __init__(self, mode: bool) -> None:
        self._prev = STATE.enabled
        self.mode = bool(mode)
        STATE.enabled = self.mode

    def _enter_value(self) -> bool:
        return self.mode

    def __enter__(self) -> None:
        STATE.enabled = self.mode

    def __call__(self, fn):
        """As a decorator (``@set_grad_enabled(False)``): the mode set when the decorator
        was made goes back to what it was -- only calls of ``fn`` run in ``mode`` -- as
        PyTorch's."""
        STATE.enabled = self._prev
        return super().__call__(fn)

    def clone(self):
        return _FixedMode(self.mode)


class _FixedMode(_GradModeContext):
    def __init__(self, mode: bool) -> None:
        self.mode = mode

    def _enter_value(self) -> bool:
        return self.mode

    def clone(self):
        return _FixedMode(self.mode)


class inference_mode(_GradModeContext):
    """Like ``no_grad`` (tensors made inside are normal tensors: ``Tensor.is_inference()``
    is False, and PyTorch's limits on inference tensors do not apply)."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)

    def _enter_value(self) -> bool:
        return not self.mode  # (PyTorch's InferenceMode(false) turns grad mode on)

    def __enter__(self) -> None:
        self._prev_inf = STATE.inference
        super().__enter__()
        STATE.inference = self.mode

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        STATE.inference = self._prev_inf

    def clone(self):
        return inference_mode(self.mode)
