"""Autocast: PyTorch's automatic mixed precision for eager code.

Inside ``with jitgrad.autocast("cuda"):`` (or ``"cpu"`` with ``dtype=jitgrad.float16``) the
functions listed in :mod:`jitgrad.amp.policy` cast their floating tensor arguments on that
device type before they run -- matrix products and convolutions to float16, exponentials,
sums, norms and losses to float32 -- and every other function runs in the dtypes it is given,
as in PyTorch. The casts are ordinary differentiable ops (``ToCopyBackward0``), made before
the function records its node, so a float16 op saves float16 inputs and gradients flow back to
float32 parameters as float32.

How a listed function is run. It is defined through :func:`autocast_op`, which generates a
wrapper with the function's own signature (registered in ``linecache``, so tracebacks show
it): ``if AUTOCASTING: <cast, run>; return fn(<args>)``. ``AUTOCASTING`` is a global list
that is empty unless some thread has autocast on (``_thread_modes.CountedLocal``), so with
autocast off a listed function costs one extra call and a list test (~20 ns). With autocast
on, the device type of the call is the first tensor argument's, the policy that device
type's; inside the function autocast is *excluded* (nested functions run as called, as
PyTorch's ``ExcludeDispatchKeyGuard``), and so is backward (:func:`suspended`: backward ops
run in the dtypes the forward chose).

The weight cache: within the outermost autocast context, the lower-precision cast of a
float32 leaf that requires grad (a parameter) is made once and reused -- keyed by the tensor,
its version (an in-place update makes a new cast) and grad mode -- and dropped when that
context exits.

Not supported: bfloat16 (NumPy has no such type: ``autocast("cpu")``, whose default dtype is
bfloat16, warns and disables itself, as PyTorch does for a dtype a device cannot autocast to).
A compiled function (``jitgrad.compile``) called under autocast runs eagerly (generated
kernels compute in float32/float64), with a warning once.
"""

from __future__ import annotations

import copy
import functools
import inspect
import linecache
import os
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes
from .._thread_modes import AUTOCASTING, CountedLocal
from ..autograd import grad_mode
from ..devices import is_cpu_array
from ..tensor import Tensor
from . import policy

__all__ = [
    "autocast", "autocast_op", "autocasting", "suspended", "is_autocast_available",
    "is_autocast_enabled",
    "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype",
    "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
    "autocast_increment_nesting", "autocast_decrement_nesting", "get_autocast_gpu_dtype",
    "get_autocast_cpu_dtype", "is_autocast_cpu_enabled", "set_autocast_cpu_enabled",
    "custom_fwd", "custom_bwd",
]

_DEVICE_TYPES = ("cpu", "cuda")
_DEFAULT_DTYPES = {"cuda": dtypes.float16, "cpu": dtypes.bfloat16}  # PyTorch's defaults
_SUPPORTED = (dtypes.float16, dtypes.float32)
_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)


class _State(CountedLocal):
    """This thread's autocast state. ``active`` (counted in ``AUTOCASTING``) is what listed
    functions read: None, or ``{device type: NumPy dtype}`` of the enabled device types while
    autocast is not excluded."""

    COUNTED = {"active": (None, AUTOCASTING)}

    def __init__(self) -> None:
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = dict(_DEFAULT_DTYPES)
        self.cache_enabled = True
        self.nesting = 0
        self.excluded = 0
        self.cache: dict = {}
        self.active = None

    def refresh(self) -> None:
        on = None
        if not self.excluded:
            for dev in _DEVICE_TYPES:
                if self.enabled[dev]:
                    dt = self.dtype[dev]
                    if isinstance(dt, dtypes.DType):
                        on = on or {}
                        on[dev] = dt.np
        self.active = on


STATE = _State()


# --------------------------------------------------------------------- state functions
def is_autocast_available(device_type: str) -> bool:
    """Whether autocast can run on ``device_type`` (``"cpu"`` and ``"cuda"``)."""
    return device_type in _DEVICE_TYPES


def _device_type(device_type) -> str:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type not in _DEVICE_TYPES:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
    return device_type


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` in this thread (no argument: CUDA, as
    PyTorch's ``torch.is_autocast_enabled()``)."""
    return STATE.enabled[_device_type("cuda" if device_type is None else device_type)]


def set_autocast_enabled(device_type, enabled: bool | None = None) -> None:
    """Turn autocast on or off for ``device_type`` in this thread (the one-argument form
    ``set_autocast_enabled(True)`` is CUDA's)."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    STATE.enabled[_device_type(device_type)] = bool(enabled)
    STATE.refresh()


def get_autocast_dtype(device_type: str):
    """The dtype lower-precision functions cast to under autocast on ``device_type``
    (defaults: float16 for CUDA, ``jitgrad.bfloat16`` for the CPU, as PyTorch's)."""
    return STATE.dtype[_device_type(device_type)]


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the dtype autocast on ``device_type`` casts to in this thread."""
    STATE.dtype[_device_type(device_type)] = dtype
    STATE.refresh()


def get_autocast_gpu_dtype():
    """``get_autocast_dtype("cuda")`` (PyTorch's older name)."""
    return get_autocast_dtype("cuda")


def get_autocast_cpu_dtype():
    """``get_autocast_dtype("cpu")`` (PyTorch's older name)."""
    return get_autocast_dtype("cpu")


def is_autocast_cpu_enabled() -> bool:
    """``is_autocast_enabled("cpu")`` (PyTorch's older name)."""
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """``set_autocast_enabled("cpu", enabled)`` (PyTorch's older name)."""
    set_autocast_enabled("cpu", enabled)


def is_autocast_cache_enabled() -> bool:
    """Whether casts of parameters are cached within an autocast region."""
    return STATE.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn the autocast weight cache on or off in this thread."""
    STATE.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    """Drop this thread's cached casts."""
    STATE.cache.clear()


def autocast_increment_nesting() -> int:
    """Enter one autocast level; returns the new depth."""
    STATE.nesting += 1
    return STATE.nesting


def autocast_decrement_nesting() -> int:
    """Leave one autocast level; returns the new depth (the cache is cleared at 0)."""
    STATE.nesting -= 1
    return STATE.nesting


def autocasting() -> bool:
    """Whether autocast is on and not excluded on this thread (``AUTOCASTING`` non-empty
    says some thread's is)."""
    return STATE.active is not None


class suspended:
    """Run a block with autocast excluded on this thread (backward; a listed function's
    body): functions run in the dtypes they are given."""

    __slots__ = ()

    def __enter__(self) -> None:
        STATE.excluded += 1
        STATE.active = None

    def __exit__(self, *exc) -> None:
        STATE.excluded -= 1
        STATE.refresh()


# --------------------------------------------------------------------------- autocast
class autocast:
    """Context manager and decorator running its region in mixed precision (PyTorch's
    ``torch.autocast``): listed functions on tensors of ``device_type`` run in ``dtype``
    (float16; the default is PyTorch's: float16 for CUDA, bfloat16 for the CPU, which jitgrad
    cannot store, so ``autocast("cpu")`` needs ``dtype=jitgrad.float16``) or in float32.

    >>> import jitgrad
    >>> a = jitgrad.ones(2, 2)
    >>> with jitgrad.autocast("cpu", dtype=jitgrad.float16):
    ...     (a @ a).dtype, (a @ a).sum().dtype
    (jitgrad.float16, jitgrad.float16)
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        self.device = _device_type(device_type)
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self._cache_enabled = (is_autocast_cache_enabled() if cache_enabled is None
                               else cache_enabled)
        if enabled:
            enabled = self._supported()
        self._enabled = bool(enabled)

    def _supported(self) -> bool:
        name = self.device.upper()
        if self.device == "cuda":
            from .. import cuda

            if not cuda.is_available():
                warnings.warn("CUDA is not available. Disabling autocast.", stacklevel=3)
                return False
        if isinstance(self.fast_dtype, dtypes.UnsupportedDType):
            warnings.warn(f"In {name} autocast, but the target dtype is not supported. "
                          f"Disabling autocast.\n{self.fast_dtype.error()}; jitgrad's "
                          f"autocast supports jitgrad.float16 (and jitgrad.float32)",
                          stacklevel=3)
            return False
        if self.fast_dtype not in _SUPPORTED:
            warnings.warn(f"In {name} autocast, but the target dtype is not supported. "
                          f"Disabling autocast.\n{name} Autocast only supports dtypes of "
                          f"jitgrad.float16, jitgrad.float32 currently.", stacklevel=3)
            return False
        return True

    def __enter__(self):
        st = STATE
        self.prev_cache_enabled = st.cache_enabled
        self.prev = st.enabled[self.device]
        self.prev_fastdtype = st.dtype[self.device]
        self.prev_excluded = st.excluded
        st.enabled[self.device] = self._enabled
        st.dtype[self.device] = self.fast_dtype
        st.excluded = 0  # an explicit autocast region applies, even inside backward
        st.nesting += 1
        st.cache_enabled = self._cache_enabled
        st.refresh()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> bool:
        st = STATE
        st.nesting -= 1
        if st.nesting == 0:
            st.cache.clear()
        st.enabled[self.device] = self.prev
        st.dtype[self.device] = self.prev_fastdtype
        st.cache_enabled = self.prev_cache_enabled
        st.excluded = self.prev_excluded
        st.refresh()
        return False

    def __call__(self, func: Callable) -> Callable:
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. Did "
                f"you mean to use autocast as a context manager? For example:\n"
                f"    with torch.autocast(device_type=...):\n        output = model(input)")

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with copy.copy(self):  # a fresh context per call: recursion-safe
                return func(*args, **kwargs)
        return decorate_autocast

    def __repr__(self) -> str:
        return (f"autocast(device_type={self.device!r}, dtype={self.fast_dtype}, "
                f"enabled={self._enabled})")


# ------------------------------------------------------------------------------ casts
def _tensor_device_type(t: Tensor) -> str:
    return "cpu" if is_cpu_array(t._data) else "cuda"


def _first_device_type(args: tuple, kwargs: dict) -> str | None:
    for v in (*args, *kwargs.values()):
        if isinstance(v, Tensor):
            return _tensor_device_type(v)
        if isinstance(v, (list, tuple)):
            for e in v:
                if isinstance(e, Tensor):
                    return _tensor_device_type(e)
    return None


def _eligible(v, device_type: str) -> bool:
    return (isinstance(v, Tensor) and v._data.dtype.kind == "f" and v._data.dtype != _F64
            and _tensor_device_type(v) == device_type)


def _cached_cast(t: Tensor, target: np.dtype, lower: np.dtype, st: _State) -> Tensor:
    """``t`` in ``target`` (PyTorch's ``cached_cast``): a parameter's lower-precision cast is
    made once per outermost autocast region (and again after an in-place change)."""
    from ..trace.state import STATE as TRACE

    if (target == lower and t._data.dtype == _F32 and t._requires_grad and t._grad_fn is None
            and st.cache_enabled and TRACE.tracer is None and t._base is None):
        key = id(t)
        hit = st.cache.get(key)
        mode = grad_mode.STATE.enabled
        if hit is not None and hit[0]() is t and hit[1] == t._version and hit[2] == mode:
            return hit[3]
        out = t.to(dtypes.from_numpy_dtype(target))
        st.cache[key] = (weakref.ref(t), t._version, mode, out)
        return out
    return t.to(dtypes.from_numpy_dtype(target))


def _cast_value(v, device_type: str, target: np.dtype, lower: np.dtype, st: _State):
    if isinstance(v, Tensor):
        if _eligible(v, device_type) and v._data.dtype != target:
            return _cached_cast(v, target, lower, st)
        return v
    if isinstance(v, (list, tuple)) and any(isinstance(e, Tensor) for e in v):
        return type(v)(_cast_value(e, device_type, target, lower, st) for e in v)
    return v


def _promote_target(values, device_type: str, lower: np.dtype) -> np.dtype:
    target = lower
    for v in values:
        items = v if isinstance(v, (list, tuple)) else (v,)
        for e in items:
            if _eligible(e, device_type) and e._data.dtype != target:
                target = np.promote_types(target, e._data.dtype)
    return target


def autocast_call(name: str, listed_on: tuple, fn: Callable, args: tuple, kwargs: dict):
    """Run listed function ``fn`` (listed by the device types ``listed_on``) under this
    thread's autocast state (the wrappers' path when ``AUTOCASTING`` is non-empty)."""
    st = STATE
    active = st.active
    if active is None:  # another thread autocasts, not this one
        return fn(*args, **kwargs)
    for device_type in listed_on:
        if device_type in active:
            break
    else:  # no active autocast lists it (CPU autocast and exp): as called
        return fn(*args, **kwargs)
    device_type = _first_device_type(args, kwargs)
    lower = active.get(device_type) if device_type is not None else None
    kind = policy.policy_of(device_type, name) if lower is not None else None
    if kind is None:
        return fn(*args, **kwargs)
    if kind == "banned":
        raise RuntimeError(policy.BANNED_MESSAGES[name])
    if kind == "keep":
        with suspended():
            return fn(*args, **kwargs)
    if kind == "lower":
        target = lower
    elif kind == "fp32":
        target = _F32
    else:
        target = _promote_target((*args, *kwargs.values()), device_type, lower)
    args = tuple(_cast_value(a, device_type, target, lower, st) for a in args)
    if kwargs:
        kwargs = {k: _cast_value(v, device_type, target, lower, st) for k, v in kwargs.items()}
    with suspended():
        return fn(*args, **kwargs)


# --------------------------------------------------------------------------- wrappers
_LOCK = threading.Lock()


def _forwarding(sig: inspect.Signature, ns: dict) -> tuple[str, str, str]:
    """``(parameter list, call arguments, "(positional tuple), {keyword dict}")`` of a
    function with signature ``sig``, its defaults bound to names in ``ns``."""
    params, call, pos, kw = [], [], [], []
    star_done = False
    plist = list(sig.parameters.values())
    for i, p in enumerate(plist):
        text = p.name
        if p.default is not inspect.Parameter.empty:
            ns[f"_d_{p.name}"] = p.default
            text += f"=_d_{p.name}"
        if p.kind is p.VAR_POSITIONAL:
            params.append("*" + p.name)
            call.append("*" + p.name)
            pos.append("*" + p.name)
            star_done = True
        elif p.kind is p.VAR_KEYWORD:
            params.append("**" + p.name)
            call.append("**" + p.name)
            kw.append("**" + p.name)
        elif p.kind is p.KEYWORD_ONLY:
            if not star_done:
                params.append("*")
                star_done = True
            params.append(text)
            call.append(f"{p.name}={p.name}")
            kw.append(f"{p.name!r}: {p.name}")
        else:
            params.append(text)
            call.append(p.name)
            pos.append(p.name)
            if p.kind is p.POSITIONAL_ONLY and (
                    i + 1 == len(plist) or plist[i + 1].kind is not p.POSITIONAL_ONLY):
                params.append("/")
    packed = f"({', '.join(pos)}{',' if len(pos) == 1 else ''}), {{{', '.join(kw)}}}"
    return ", ".join(params), ", ".join(call), packed


_CODE: dict = {}  # the forwarding text of a signature -> its compiled wrapper definition


def _wrapper_code(params: str, call: str, packed: str):
    """The code defining ``wrapper(<params>)`` (compiled once per distinct signature:
    ``import jitgrad`` makes ~80 of them). Its file lies under the package's directory, so
    tracebacks and the tracer's "user code" test count it as jitgrad's own; the source is in
    ``linecache``."""
    src = (f"def wrapper({params}):\n"
           f"    if _AC:\n"
           f"        return _call(_name, _on, _fn, {packed})\n"
           f"    return _fn({call})\n")
    code = _CODE.get(src)
    if code is None:
        with _LOCK:
            filename = os.path.join(os.path.dirname(__file__),
                                    f"<autocast wrapper {len(_CODE) + 1}>")
            linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
            code = _CODE[src] = compile(src, filename, "exec")
    return code


def autocast_op(fn: Callable | None = None, *, name: str | None = None):
    """Define a public function listed in :mod:`jitgrad.amp.policy` (under ``name``, default
    its ``__name__``): returns a wrapper with ``fn``'s signature that runs ``fn`` as called
    while no thread autocasts, and through :func:`autocast_call` otherwise."""
    def make(f: Callable) -> Callable:
        key = name or f.__name__
        if not policy.listed(key):
            raise ValueError(f"autocast_op: {key!r} is in no autocast list (jitgrad.amp.policy)")
        on = tuple(d for d, table in policy.POLICIES.items() if key in table)
        ns: dict[str, Any] = {"_AC": AUTOCASTING, "_fn": f, "_name": key, "_on": on,
                              "_call": autocast_call}
        exec(_wrapper_code(*_forwarding(inspect.signature(f), ns)), ns)  # noqa: S102
        wrapper = ns["wrapper"]
        functools.update_wrapper(wrapper, f)
        wrapper.__autocast_name__ = key
        return wrapper
    return make(fn) if fn is not None else make


# ------------------------------------------------------------ custom autograd functions
def _cast_inputs(value, device_type: str, dtype):
    if isinstance(value, Tensor):
        if value.is_floating_point() and _tensor_device_type(value) == device_type and \
                value._data.dtype != _F64:
            return value.to(dtype)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_inputs(v, device_type, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_inputs(v, device_type, dtype) for k, v in value.items()}
    return value


def custom_fwd(fwd: Callable | None = None, *, device_type: str, cast_inputs=None):
    """Decorator for the ``forward`` of a custom ``autograd.Function``: records the autocast
    state for :func:`custom_bwd`; with ``cast_inputs`` (a dtype), runs ``forward`` with
    autocast off and its floating ``device_type`` tensors cast to that dtype when autocast
    is on."""
    _device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_context = is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast_inputs(args, device_type, cast_inputs),
                           **_cast_inputs(kwargs, device_type, cast_inputs))
        return fwd(*args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str):
    """Decorator for the ``backward`` of a custom ``autograd.Function``: runs it under the
    autocast state its ``forward`` ran in (see :func:`custom_fwd`)."""
    _device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast,
                      dtype=ctx._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd
