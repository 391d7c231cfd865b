"""``torch.testing``'s comparisons: :func:`assert_close` (and the deprecated
:func:`assert_allclose`), with PyTorch's default tolerances per dtype and its messages.
Loaded on first use (``jitgrad.testing``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .tensor import Tensor

__all__ = ["assert_close", "assert_allclose"]

#: PyTorch's defaults, (rtol, atol) by dtype
_TOLERANCES = {np.dtype(np.float16): (1e-3, 1e-5), np.dtype(np.float32): (1.3e-6, 1e-5),
               np.dtype(np.float64): (1e-7, 1e-7)}


def _dtype_name(a: np.ndarray) -> str:
    from .dtypes import from_numpy_dtype

    return str(from_numpy_dtype(a.dtype))


def _fail(msg: str, extra: str | None):
    raise AssertionError(msg if extra is None else f"{msg}\n\n{extra}")


def _compare_arrays(actual: np.ndarray, expected: np.ndarray, rtol, atol, equal_nan: bool,
                    what: str, msg: str | None) -> None:
    exact = actual.dtype.kind not in "fc"
    if rtol is None:
        rtol, atol = (0.0, 0.0) if exact else _TOLERANCES.get(actual.dtype, (1.3e-6, 1e-5))
    a, b = actual.astype(np.float64), expected.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan) | (a == b)
    if close.all():
        return
    # (the differences in the compared dtype -- float32 for integers --, as PyTorch's)
    ft = actual.dtype if actual.dtype.kind == "f" else np.dtype(np.float32)
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
    _fail(msg if msg is not None else "\n".join(lines), None)


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
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            _fail(f"The keys of the mappings do not match:\n{sorted(map(str, actual))} != "
                  f"{sorted(map(str, expected))}", None)
        for k in expected:
            assert_close(actual[k], expected[k], rtol=rtol, atol=atol, equal_nan=equal_nan,
                         check_device=check_device, check_dtype=check_dtype, msg=msg)
        return
    if isinstance(actual, Sequence) and isinstance(expected, Sequence) and not isinstance(
            actual, str):
        if len(actual) != len(expected):
            _fail(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                  None)
        for a, b in zip(actual, expected):
            assert_close(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan,
                         check_device=check_device, check_dtype=check_dtype, msg=msg)
        return
    if isinstance(actual, (int, float, bool)) and isinstance(expected, (int, float, bool)):
        if type(actual) is not type(expected) and check_dtype:
            _fail(f"The values for attribute 'type' do not match: {type(actual)} != "
                  f"{type(expected)}.", None)
        r, t = (rtol, atol) if rtol is not None else ((1e-7, 1e-7) if isinstance(
            expected, float) else (0.0, 0.0))
        if (equal_nan and math.isnan(actual) and math.isnan(expected)) or \
                abs(actual - expected) <= t + r * abs(expected):
            return
        kind = "close" if isinstance(expected, float) else "equal"
        diff = abs(actual - expected)
        rel = diff / abs(expected) if expected else math.inf
        _fail(msg if msg is not None else (
            f"Scalars are not {kind}!\n\nExpected {expected} but got {actual}.\n"
            f"Absolute difference: {diff} (up to {t} allowed)\n"
            f"Relative difference: {rel} (up to {r} allowed)"), None)
        return
    a, b = _as_array(actual), _as_array(expected)
    if a.shape != b.shape:
        from .tensor import Size

        _fail(f"The values for attribute 'shape' do not match: {Size(a.shape)} != "
              f"{Size(b.shape)}.", None)
    if check_dtype and a.dtype != b.dtype:
        _fail(f"The values for attribute 'dtype' do not match: {_dtype_name(a)} != "
              f"{_dtype_name(b)}.", None)
    if check_device and isinstance(actual, Tensor) and isinstance(expected, Tensor) and \
            actual.device != expected.device:
        _fail(f"The values for attribute 'device' do not match: {actual.device} != "
              f"{expected.device}.", None)
    _compare_arrays(a, b, rtol, atol, equal_nan, "Tensor-likes", msg)


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
