"""``torch.testing``'s comparisons: :func:`assert_close` (and the deprecated
:func:`assert_allclose`), with PyTorch's default tolerances per dtype and its messages;
and :func:`make_tensor`, random test inputs in PyTorch's default ranges per dtype.
Loaded on first use (``jitgrad.testing``)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from .tensor import Tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

#: PyTorch's defaults, (rtol, atol) by dtype
_TOLERANCES = {np.dtype(np.float16): (1e-3, 1e-5), np.dtype(np.float32): (1.3e-6, 1e-5),
               np.dtype(np.float64): (1e-7, 1e-7), np.dtype(np.complex64): (1.3e-6, 1e-5),
               np.dtype(np.complex128): (1e-7, 1e-7)}


def _dtype_name(a: np.ndarray) -> str:
    from .dtypes import from_numpy_dtype

    return str(from_numpy_dtype(a.dtype))


class _Mismatch(Exception):
    """A failed comparison: its message (the caller adds where, and the user's ``msg``)."""


def _fail(msg: str, extra: str | None = None):
    raise _Mismatch(msg if extra is None else f"{msg}\n\n{extra}")


def _compare_arrays(actual: np.ndarray, expected: np.ndarray, rtol, atol, equal_nan: bool,
                    what: str) -> None:
    exact = actual.dtype.kind not in "fc"
    if rtol is None:
        rtol, atol = (0.0, 0.0) if exact else _TOLERANCES.get(actual.dtype, (1.3e-6, 1e-5))
    wide = np.complex128 if actual.dtype.kind == "c" or expected.dtype.kind == "c" \
        else np.float64  # (complex: |a - b| <= atol + rtol |b| with complex moduli)
    a, b = actual.astype(wide), expected.astype(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan) | (a == b)
    if close.all():
        return
    # (the differences in the compared dtype -- float32 for integers --, as PyTorch's)
    ft = actual.dtype if actual.dtype.kind in "fc" else np.dtype(np.float32)
    af, bf = actual.astype(ft), expected.astype(ft)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.abs(af - bf)
        absdiff, reldiff = diff.astype(np.float64), (diff / np.abs(bf)).astype(np.float64)
    bad = ~close
    n, total = int(bad.sum()), a.size

    def where_max(d):
        d = np.where(bad, d, -np.inf)
        flat = np.nan_to_num(d, nan=np.inf).reshape(-1)
        i = int(np.argmax(flat))
        return d.reshape(-1)[i], tuple(int(k) for k in np.unravel_index(i, a.shape))

    ad, ai = where_max(absdiff)
    rd, ri = where_max(reldiff)
    kind = "equal" if exact else "close"

    def fmt(v):
        return repr(int(v)) if exact and math.isfinite(v) and v == int(v) else repr(float(v))
    lines = [f"{what} are not {kind}!", "",
             f"Mismatched elements: {n} / {total} ({100.0 * n / total:.1f}%)",
             f"Greatest absolute difference: {fmt(ad)} at index {ai}"
             + ("" if exact else f" (up to {atol} allowed)"),
             f"Greatest relative difference: {float(rd)!r} at index {ri}"
             + ("" if exact else f" (up to {rtol} allowed)")]
    _fail("\n".join(lines))


def assert_close(actual, expected, *, allow_subclasses: bool = True, rtol=None, atol=None,
                 equal_nan: bool = False, check_device: bool = True, check_dtype: bool = True,
                 check_layout: bool = True, check_stride: bool = False, msg=None) -> None:
    """Raise an AssertionError unless ``actual`` and ``expected`` are close: tensors (or
    NumPy arrays, numbers, and sequences / mappings of them, compared entry by entry) of the
    same shape, dtype and device (unless not checked) whose elements satisfy
    ``|actual - expected| <= atol + rtol * |expected|`` -- by default PyTorch's tolerances
    for the dtype (float32: ``rtol=1.3e-6, atol=1e-5``; float64: ``1e-7``; integers and
    bools: equal). ``rtol`` and ``atol`` are given together or not at all."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but "
                         f"got no {'rtol' if rtol is None else 'atol'}.")
    try:
        _compare(actual, expected, (), rtol, atol, equal_nan, check_device, check_dtype)
    except _Mismatch as failed:
        text, path = str(failed.args[0]), getattr(failed, "path", ())
        if path:
            text += "\n\nThe failure occurred for item " + "".join(f"[{k!r}]" for k in path)
        if callable(msg):
            text = msg(text)
        elif msg is not None:
            text = msg
        raise AssertionError(text) from None


_NUMBERS = (int, float, bool)


def _kind(x) -> str | None:
    """How ``assert_close`` compares ``x``: as a tensor, an array, a number, a sequence, a
    mapping (None: it cannot)."""
    if isinstance(x, Tensor):
        return "tensor"
    if isinstance(x, np.ndarray):
        return "array"
    if isinstance(x, _NUMBERS):
        return "number"
    if isinstance(x, Mapping):
        return "mapping"
    if isinstance(x, Sequence) and not isinstance(x, (str, bytes)):
        return "sequence"
    return None


def _compare(actual, expected, path: tuple, rtol, atol, equal_nan, check_device,
             check_dtype) -> None:
    ka, kb = _kind(actual), _kind(expected)
    if ka is None or ka != kb:
        raise TypeError(f"No comparison pair was able to handle inputs of type "
                        f"{type(actual)} and {type(expected)}.")
    if ka == "mapping":
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        if missing or extra:
            lines = ["The keys of the mappings do not match:"]
            if missing:
                lines.append(f"Missing keys in the actual mapping: {sorted(missing, key=str)}")
            if extra:
                lines.append(f"Additional keys in the actual mapping: {sorted(extra, key=str)}")
            _at(path, "\n".join(lines))
        items = [(k, actual[k], expected[k]) for k in expected]
    elif ka == "sequence":
        if len(actual) != len(expected):
            _at(path, f"The length of the sequences mismatch: {len(actual)} != "
                      f"{len(expected)}")
        items = [(i, a, b) for i, (a, b) in enumerate(zip(actual, expected))]
    else:
        try:
            _compare_leaf(actual, expected, rtol, atol, equal_nan, check_device, check_dtype)
        except _Mismatch as failed:
            failed.path = path
            raise
        return
    for k, a, b in items:
        _compare(a, b, (*path, k), rtol, atol, equal_nan, check_device, check_dtype)


def _at(path: tuple, text: str):
    failed = _Mismatch(text)
    failed.path = path
    raise failed


def _compare_leaf(actual, expected, rtol, atol, equal_nan, check_device, check_dtype) -> None:
    if isinstance(actual, _NUMBERS):
        if type(actual) is not type(expected) and check_dtype:
            _fail(f"The (d)types do not match: {type(actual)} != {type(expected)}.")
        exact = not isinstance(expected, float) and not isinstance(actual, float)
        r, t = (rtol, atol) if rtol is not None else ((0.0, 0.0) if exact else (1e-7, 1e-7))
        if (equal_nan and math.isnan(actual) and math.isnan(expected)) or \
                abs(actual - expected) <= t + r * abs(expected):
            return
        diff = abs(actual - expected)
        rel = diff / abs(expected) if expected else math.inf
        if exact:
            _fail(f"Scalars are not equal!\n\nExpected {expected} but got {actual}.\n"
                  f"Absolute difference: {diff}\nRelative difference: {rel}")
        _fail(f"Scalars are not close!\n\nExpected {expected} but got {actual}.\n"
              f"Absolute difference: {diff} (up to {t} allowed)\n"
              f"Relative difference: {rel} (up to {r} allowed)")
    a, b = _as_array(actual), _as_array(expected)
    if a.shape != b.shape:
        from .tensor import Size

        _fail(f"The values for attribute 'shape' do not match: {Size(a.shape)} != "
              f"{Size(b.shape)}.")
    if check_dtype and a.dtype != b.dtype:
        _fail(f"The values for attribute 'dtype' do not match: {_dtype_name(a)} != "
              f"{_dtype_name(b)}.")
    if check_device and isinstance(actual, Tensor) and isinstance(expected, Tensor) and \
            actual.device != expected.device:
        _fail(f"The values for attribute 'device' do not match: {actual.device} != "
              f"{expected.device}.")
    _compare_arrays(a, b, rtol, atol, equal_nan, "Tensor-likes")


def _as_array(x) -> np.ndarray:
    if isinstance(x, Tensor):
        from .devices import to_host

        return np.asarray(to_host(x.detach()._data))
    return np.asarray(x)


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan: bool = True,
                    msg: str = "") -> None:
    """The deprecated ``torch.testing.assert_allclose``: :func:`assert_close` without the
    dtype check, NaNs equal by default."""
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_dtype=False, msg=msg or None)


def _dtype_groups():
    """(bool and integral dtypes, floating dtypes) as ``torch.testing`` groups them."""
    import jitgrad

    ints = (jitgrad.bool, jitgrad.uint8, jitgrad.int8, jitgrad.int16, jitgrad.int32,
            jitgrad.int64)
    return ints, (jitgrad.float16, jitgrad.bfloat16, jitgrad.float32, jitgrad.float64)


def make_tensor(*shape: int | Sequence[int], dtype, device, low: float | None = None,
                high: float | None = None, requires_grad: bool = False,
                noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format=None) -> Tensor:
    """A tensor of ``shape`` (integers, or one sequence of them), ``dtype`` and ``device``
    filled with values drawn uniformly from ``[low, high)`` by jitgrad's generator (so
    reproducible under ``jitgrad.manual_seed``), as ``torch.testing.make_tensor``.

    Default ranges: bool ``[0, 2)``, unsigned integers ``[0, 10)``, signed integers
    ``[-9, 10)``, floats ``[-9, 9)``. A ``low`` / ``high`` outside the dtype's finite
    range is clamped to it; integer bounds are rounded up. ``noncontiguous``: a strided view
    (ignored for fewer than two elements); ``memory_format``: the result cloned to it (the
    two are mutually exclusive). ``exclude_zero`` replaces zeros by 1 (bool, integers) or
    the dtype's smallest normal number. ``requires_grad`` is for floating dtypes only.

    Raises ValueError for ``low >= high`` (``low == high`` only warns, for floats), a NaN
    bound, an interval outside the dtype's range, ``requires_grad`` with a bool or integral
    dtype, or both ``noncontiguous`` and ``memory_format``; TypeError for another dtype."""
    import jitgrad

    int_types, float_types = _dtype_groups()
    is_int = any(dtype == d for d in int_types)
    is_float = any(dtype == d for d in float_types)

    def modify_low_high(low, high, *, lowest_inclusive, highest_exclusive, default_low,
                        default_high):
        low = low if low is not None else default_low
        high = high if high is not None else default_high
        if any(isinstance(value, float) and math.isnan(value) for value in (low, high)):
            raise ValueError(f"`low` and `high` cannot be NaN, but got {low=} and {high=}")
        elif low == high and is_float:
            warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or "
                          "complex types is deprecated since 2.1 and will be removed in 2.3. "
                          "Use `torch.full(...)` instead.", FutureWarning, stacklevel=3)
        elif low >= high:
            raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
        elif high < lowest_inclusive or low >= highest_exclusive:
            raise ValueError(f"The value interval specified by `low` and `high` is [{low}, "
                             f"{high}), but {dtype} only supports [{lowest_inclusive}, "
                             f"{highest_exclusive})")
        low = min(max(low, lowest_inclusive), highest_exclusive)
        high = min(max(high, lowest_inclusive), highest_exclusive)
        if is_int:  # ceil both: randint's upper bound is exclusive
            return math.ceil(low), math.ceil(high)
        return low, high

    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually "
                         f"exclusive, but got {noncontiguous=} and {memory_format=}")
    if requires_grad and is_int:
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral "
                         f"dtypes, but got {dtype=}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:  # twice the last dim, then every other element from the second
        shape = (*shape[:-1], 2 * shape[-1])

    if dtype == jitgrad.bool:
        low, high = modify_low_high(low, high, lowest_inclusive=0, highest_exclusive=2,
                                    default_low=0, default_high=2)
        result = jitgrad.randint(low, high, shape, device=device, dtype=dtype)
    elif is_int:
        info = jitgrad.iinfo(dtype)
        # randint cannot draw int64's maximum (its bounds are int64s), as PyTorch's
        low, high = modify_low_high(
            low, high, lowest_inclusive=info.min,
            highest_exclusive=info.max + (1 if dtype != jitgrad.int64 else 0),
            default_low=-9, default_high=10)
        result = jitgrad.randint(low, high, shape, device=device, dtype=dtype)
    elif is_float:
        info = jitgrad.finfo(dtype)
        low, high = modify_low_high(low, high, lowest_inclusive=info.min,
                                    highest_exclusive=info.max, default_low=-9,
                                    default_high=9)
        result = jitgrad.empty(shape, device=device, dtype=dtype)
        if high - low >= info.max:  # uniform_ needs high - low to be finite in the dtype
            result.uniform_(low / 2, high / 2).mul_(2)
        else:
            result.uniform_(low, high)
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by "
                        f"torch.testing.make_tensor(). To request support, file an issue at: "
                        f"https://github.com/pytorch/pytorch/issues")

    if noncontiguous:
        result = result[..., 1::2]  # offset by 1 to also catch offsetting issues
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result[result == 0] = 1 if is_int else jitgrad.finfo(dtype).tiny
    if is_float:
        result.requires_grad = requires_grad
    return result
