"""Tensor printing exactly like PyTorch's ``torch/_tensor_str.py``, as pure functions over NumPy.

This module imports only NumPy and the standard library. :func:`format_tensor` turns an array
into the full ``tensor(...)`` repr; the caller decides which suffixes apply
(``requires_grad=True``, ``grad_fn=<MulBackward0>``, ``dtype=jitgrad.float64``) and this module
decides where they go, as PyTorch does.

Rules reproduced from PyTorch:

* One formatter per tensor, built from the elements that are shown (the edge items when the
  tensor is summarised). Floats use *int mode* (``1.``, ``-0.``) when every finite nonzero value
  is an integer, and *sci mode* (``1.0000e-05``) when, over the finite nonzero absolute values,
  ``max / min > 1000`` or ``max > 1e8`` or ``min < 1e-4`` (unless ``sci_mode`` is forced). Every
  element is right-aligned to the widest finite nonzero element.
* A tensor with more than ``threshold`` elements is summarised: each dimension longer than
  ``2 * edgeitems`` shows its first and last ``edgeitems`` entries around ``...``.
* Rows wrap after ``floor((linewidth - indent) / (width + 2))`` elements; rows of a matrix are
  separated by ``,\\n`` and blocks of higher dimensions by extra blank lines.
* Suffixes follow ``, `` unless the last line would then exceed ``linewidth``, in which case
  they start a new line indented to the opening parenthesis. Lengths are measured with the
  dtype namespace spelled ``torch.`` so that lines break exactly where PyTorch breaks them
  (a line holding ``dtype=jitgrad.<name>`` may thus run 2 characters past ``linewidth``).
* Empty tensors print ``[]`` with ``size=`` (unless 1-D) and ``dtype=`` (unless the default
  float dtype); ``edgeitems=0`` adds ``size=`` to every non-empty tensor.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = [
    "format_tensor",
    "set_printoptions",
    "get_printoptions",
    "printoptions",
    "dtype_suffix_needed",
    "dtype_suffix",
    "DTYPE_NAMESPACE",
]

#: Prefix of dtype names in ``dtype=...`` suffixes (PyTorch prints ``torch.``).
DTYPE_NAMESPACE = "jitgrad."

_DEFAULTS: dict[str, Any] = {
    "precision": 4,
    "threshold": 1000,
    "edgeitems": 3,
    "linewidth": 80,
    "sci_mode": None,
}
_OPTS: dict[str, Any] = dict(_DEFAULTS)

_FLOAT32 = np.dtype(np.float32)
# dtypes whose name is never printed for non-empty tensors (besides the default float dtype)
_ALWAYS_HIDDEN = (np.dtype(np.int64), np.dtype(np.bool_))


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """Set the print options, with PyTorch's semantics.

    ``profile`` ("default", "short" or "full") first resets precision/threshold/edgeitems/
    linewidth; explicit arguments then override it. As in PyTorch, ``sci_mode`` is always set
    (so any call without ``sci_mode`` resets it to ``None``, i.e. automatic).
    """
    if profile is not None:
        if profile == "default":
            _OPTS.update(precision=4, threshold=1000, edgeitems=3, linewidth=80)
        elif profile == "short":
            _OPTS.update(precision=2, threshold=1000, edgeitems=2, linewidth=80)
        elif profile == "full":
            _OPTS.update(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)
    if precision is not None:
        _OPTS["precision"] = precision
    if threshold is not None:
        _OPTS["threshold"] = threshold
    if edgeitems is not None:
        _OPTS["edgeitems"] = edgeitems
    if linewidth is not None:
        _OPTS["linewidth"] = linewidth
    _OPTS["sci_mode"] = sci_mode


def get_printoptions() -> dict[str, Any]:
    """The current print options, as keyword arguments for :func:`set_printoptions`."""
    return dict(_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs: Any) -> Iterator[None]:
    """Context manager that sets print options temporarily (same arguments as set_printoptions)."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


def dtype_suffix_needed(np_dtype: Any, default_float: Any = np.float32) -> bool:
    """Whether a non-empty tensor of this dtype shows ``dtype=...`` in its repr.

    PyTorch hides the default float dtype (float32 unless changed), int64 and bool.
    (Empty tensors are different: they show every dtype but the default float one, and
    :func:`format_tensor` adds that suffix by itself.)
    """
    d = np.dtype(np_dtype)
    if d.kind == "c":  # the default complex dtype (complex64 under float32) is hidden
        return d != np.result_type(np.dtype(default_float), np.complex64)
    return d != np.dtype(default_float) and d not in _ALWAYS_HIDDEN


def dtype_suffix(np_dtype: Any) -> str:
    """The ``dtype=jitgrad.<name>`` suffix for a NumPy dtype (``bool`` for ``np.bool_``)."""
    return f"dtype={DTYPE_NAMESPACE}{np.dtype(np_dtype).name}"


# ---------------------------------------------------------------------------------------------
# formatting of elements


def _complex_join(real: str, imag: str) -> str:
    """PyTorch's text of one complex value from its parts' texts: ``1.+2.j``, ``0.5000-1.j``."""
    imag = (imag + "j").lstrip()
    return real + imag if imag[0] in "+-" else real + "+" + imag


def _scalar_str(value: Any, kind: str, opts: dict[str, Any]) -> str:
    """The text of a 0-d tensor's single value (a width-1 formatter never pads)."""
    if kind == "c":
        return _complex_join(_scalar_str(value.real, "f", opts),
                             _scalar_str(value.imag, "f", opts))
    if kind != "f":
        return str(value)
    if value == 0 or not math.isfinite(value):
        # no finite nonzero values: the formatter stays in int mode, never sci mode
        return f"{value:.0f}." if value == 0 else f"{value:.0f}"
    sci = opts["sci_mode"]
    if sci is None:
        a = abs(value)
        sci = a > 1.0e8 or a < 1.0e-4
    p = opts["precision"]
    if sci:
        return f"{value:.{p}e}"
    if value == math.ceil(value):
        return f"{value:.0f}."
    return f"{value:.{p}f}"


def _element_strings(values: np.ndarray, kind: str, opts: dict[str, Any]) -> tuple[list[str], int]:
    """Format every element of ``values`` (flattened, C order) as PyTorch's _Formatter does.

    Returns the strings (already right-aligned) and the common width.
    """
    flat = values.reshape(-1)
    if kind == "c":  # the real and imaginary parts each formatted as a float tensor
        real, wr = _element_strings(np.ascontiguousarray(flat.real), "f", opts)
        imag, wi = _element_strings(np.ascontiguousarray(flat.imag), "f", opts)
        return [_complex_join(r, i) for r, i in zip(real, imag)], wr + wi + 1
    items = flat.tolist()
    if kind == "b":
        width = 1
        if flat.size:
            width = 5 if not flat.all() else 4
        return [str(v).rjust(width) for v in items], width
    if kind in "iu":
        width = 1
        if flat.size:
            width = max(1, len(str(flat.max().item())), len(str(flat.min().item())))
        return [str(v).rjust(width) for v in items], width

    p = opts["precision"]
    vals = flat[np.isfinite(flat) & (flat != 0)]
    if vals.size == 0:
        # no valid number: int mode, width 1
        return [f"{v:.0f}." if v - v == 0 else f"{v:.0f}" for v in items], 1
    int_mode = bool(np.all(vals == np.ceil(vals)))
    absv = np.abs(vals)
    amax = float(absv.max())
    amin = float(absv.min())
    sci = opts["sci_mode"]
    if sci is None:
        sci = amax / amin > 1000.0 or amax > 1.0e8 or amin < 1.0e-4
    # the length of a formatted value is monotonic in |value| for each sign, so the widest
    # element is among the extremes of the positive and of the negative values
    cands = []
    pos = vals[vals > 0]
    neg = vals[vals < 0]
    for part in (pos, neg):
        if part.size:
            cands.append(float(part.min()))
            cands.append(float(part.max()))
    if sci:
        width = max(1, *(len(f"{c:.{p}e}") for c in cands))
        fmt = f"{{:{width}.{p}e}}".format
        return [fmt(v) for v in items], width
    if int_mode:
        width = max(1, *(len(f"{c:.0f}") + 1 for c in cands))
        return [(f"{v:.0f}." if v - v == 0 else f"{v:.0f}").rjust(width) for v in items], width
    width = max(1, *(len(f"{c:.{p}f}") for c in cands))
    fmt = f"{{:>{width}.{p}f}}".format
    return [fmt(v) for v in items], width


def _summarized(data: np.ndarray, edge: int) -> np.ndarray:
    """The sub-array of the elements a summarised tensor shows (PyTorch's get_summarized_data)."""
    index = []
    for n in data.shape:
        if n > 2 * edge:
            index.append(np.r_[0:edge, n - edge : n])
        else:
            index.append(np.arange(n))
    return data[np.ix_(*index)]


def _tensor_body(data: np.ndarray, kind: str, indent: int, opts: dict[str, Any]) -> str:
    """The bracketed contents of a non-empty tensor of ndim >= 1 (PyTorch's _tensor_str)."""
    edge = opts["edgeitems"]
    linewidth = opts["linewidth"]
    summarize = data.size > opts["threshold"]
    shown = _summarized(data, edge) if summarize else data
    strs, width = _element_strings(shown, kind, opts)
    shape = data.shape
    sub_shape = shown.shape
    ndim = data.ndim
    strides = [1] * ndim
    for k in range(ndim - 2, -1, -1):
        strides[k] = strides[k + 1] * sub_shape[k + 1]
    element_length = width + 2

    def rec(level: int, offset: int, ind: int) -> str:
        cut = summarize and shape[level] > 2 * edge
        m = sub_shape[level]
        if level == ndim - 1:
            if summarize and not edge:
                elems = ["..."]
            elif cut:
                elems = strs[offset : offset + edge] + [" ..."] + strs[offset + edge : offset + m]
            else:
                elems = strs[offset : offset + m]
            per_line = max(1, math.floor((linewidth - ind) / element_length))
            lines = [", ".join(elems[i : i + per_line]) for i in range(0, len(elems), per_line)]
            return "[" + (",\n" + " " * (ind + 1)).join(lines) + "]"
        step = strides[level]
        parts = [rec(level + 1, offset + i * step, ind + 1) for i in range(m)]
        if cut:
            parts = parts[:edge] + ["..."] + parts[edge:]
        return "[" + ("," + "\n" * (ndim - level - 1) + " " * (ind + 1)).join(parts) + "]"

    return rec(0, 0, indent)


def _add_suffixes(text: str, suffixes: Sequence[str], indent: int, linewidth: int) -> str:
    """Append ``, suffix`` items and the closing parenthesis, wrapping as PyTorch does."""
    out = [text]
    # PyTorch's own arithmetic (it over-counts by 2 when there is no newline)
    last_line_len = len(text) - text.rfind("\n") + 1
    extra = len(DTYPE_NAMESPACE) - len("torch.")
    for suffix in suffixes:
        # measured as PyTorch's "dtype=torch.float64" so that lines break at the same places
        n = len(suffix) - extra * suffix.count(DTYPE_NAMESPACE)
        if last_line_len + n + 2 > linewidth:
            out.append(",\n" + " " * indent + suffix)
            last_line_len = indent + n
        else:
            out.append(", " + suffix)
            last_line_len += n + 2
    out.append(")")
    return "".join(out)


def format_tensor(
    data: np.ndarray,
    *,
    suffixes: Sequence[str] = (),
    dtype_suffix: str | None = None,
    prefix: str = "tensor(",
    default_float: Any = np.float32,
) -> str:
    """The PyTorch repr of a tensor holding ``data``, e.g. ``tensor([1., 2.], requires_grad=True)``.

    ``suffixes``: trailing items already decided by the caller (``requires_grad=True`` or
    ``grad_fn=<AddBackward0>``), placed after ``size=``/``dtype=``. ``dtype_suffix``: the
    ``dtype=jitgrad.float64`` text, passed when :func:`dtype_suffix_needed` says so. For an empty
    tensor without one, ``dtype=`` is added automatically unless the dtype is ``default_float``.
    Supported dtypes: bool, signed/unsigned integers, float16/32/64, complex64/128.
    """
    data = np.asarray(data)
    kind = data.dtype.kind
    if kind not in "fiubc":
        raise TypeError(f"cannot print tensors of dtype {data.dtype}")
    opts = _OPTS
    indent = len(prefix)
    pre: list[str] = []
    if data.ndim == 0:
        body = _scalar_str(data.item(), kind, opts)
        if not opts["edgeitems"]:
            pre.append("size=()")
    elif data.size == 0:
        if data.ndim != 1:
            pre.append("size=" + str(tuple(int(n) for n in data.shape)))
        if dtype_suffix is None and data.dtype != np.dtype(default_float):
            dtype_suffix = f"dtype={DTYPE_NAMESPACE}{data.dtype.name}"
        body = "[]"
    else:
        if not opts["edgeitems"]:
            pre.append("size=" + str(tuple(int(n) for n in data.shape)))
        body = _tensor_body(data, kind, indent, opts)
    if dtype_suffix:
        pre.append(dtype_suffix)
    if pre:
        suffixes = [*pre, *suffixes]
    elif not suffixes:
        return prefix + body + ")"
    return _add_suffixes(prefix + body, suffixes, indent, opts["linewidth"])
