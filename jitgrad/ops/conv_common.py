"""What the convolution (:mod:`.conv`) and pooling (:mod:`.pooling`) ops share: when their
kernels run in parallel, how a kernel is launched, argument parsing, dtype checks and the
strided window views of the NumPy references.
"""

from __future__ import annotations

import operator

import numpy as np

from ..devices import is_cpu_array
from ..kernels.parallel import parallel_ok
from ..kernels.pool import run_parts
from ..shapes import fmt_shape
from ..tensor import Tensor, wrap
from .dispatch import record

#: window taps (pooling) or elements moved (the convolutions' lowering and layout kernels)
#: from which those kernels run in parallel
PARALLEL_MIN_WORK = 1 << 15

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_F16 = np.dtype(np.float16)


def _lazy_module(name: str):
    """A loader of module ``name`` on first use (the kernel modules import Numba, which
    ``import jitgrad`` must not)."""
    mod: list = []

    def load():
        if not mod:
            import importlib

            mod.append(importlib.import_module(name))
        return mod[0]
    return load


def _kernel_module(name: str):
    """A loader of the CPU kernels ``jitgrad.kernels.<name>``."""
    return _lazy_module(f"jitgrad.kernels.{name}")


#: the CUDA implementations of the convolution and pooling array functions
_on_cuda = _lazy_module("jitgrad.cuda.conv")


def _is_cuda(a) -> bool:
    """Whether array ``a`` is CUDA memory (its op then runs :mod:`jitgrad.cuda.conv`)."""
    return type(a) is not np.ndarray and not is_cpu_array(a)


def _big(work: int) -> bool:
    return work >= PARALLEL_MIN_WORK and parallel_ok(work)


def _launch(fn, parts: int, args: tuple, parallel: bool) -> None:
    """``fn(lo, hi, *args)`` over ``[0, parts)``: split over the pool's threads when
    ``parallel``, else on the calling thread (a part's result does not depend on the split)."""
    if parallel:
        run_parts(fn, parts, args)
    else:
        fn(0, parts, *args)


def _run(op, inputs, params, res):
    return record(op, wrap(res), tuple(inputs), params)


def _ints(v, n, what):
    """``v`` (int or sequence of 1 or ``n`` ints) as an ``n``-tuple, or None if malformed."""
    if isinstance(v, (bool, np.bool_)):
        return None
    try:
        return (operator.index(v),) * n
    except TypeError:
        pass
    try:
        vals = tuple(operator.index(e) for e in v)
    except TypeError:
        raise TypeError(f"{what} must be an int or a tuple of ints, got {v!r}") from None
    if len(vals) == 1:
        return vals * n
    return vals if len(vals) == n else None


def _check_float(t: Tensor, fn: str) -> None:
    """Convolution and (non-adaptive) pooling run floating tensors (on either device; float16
    through float32, :func:`half_through_float`): PyTorch's message otherwise."""
    if t._data.dtype not in _FLOATS and t._data.dtype != _F16:
        raise RuntimeError(f"{fn}: jitgrad implements float32 and float64 tensors, got "
                           f"{t.dtype.name} (input of size {fmt_shape(t._data.shape)})")


def half_through_float(fn, *args, **kwargs):
    """``fn`` on float16 tensors: run on their float32 values (exact) and the floating
    results rounded once to float16 -- the kernels are float32/float64; PyTorch's float16
    convolutions accumulate in float32 too. Differentiable: the casts are ops."""
    def up(v):
        return v.float() if isinstance(v, Tensor) and v._data.dtype == _F16 else v

    def down(v):
        if isinstance(v, Tensor):
            return v.half() if v._data.dtype.kind == "f" else v
        if isinstance(v, tuple):
            return tuple(down(e) for e in v)
        return v
    return down(fn(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()}))


def _windows(xp, k, stride, dilation, ohw):
    """``xp[..., i*dh + oh*sh, j*dw + ow*sw]`` as an array ``(..., kh, kw, OH, OW)`` view."""
    sh, sw = xp.strides[-2:]
    shape = xp.shape[:-2] + (k[0], k[1]) + tuple(ohw)
    strides = xp.strides[:-2] + (sh * dilation[0], sw * dilation[1], sh * stride[0],
                                 sw * stride[1])
    return np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)


def _pad(x, padding, value=0.0):
    t, b, lft, r = padding
    return np.pad(x, ((0, 0), (0, 0), (t, b), (lft, r)), constant_values=value)
