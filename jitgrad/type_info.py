"""Facts about dtypes, as PyTorch's ``torch.finfo`` / ``torch.iinfo`` give them, and the
dtype algebra of ``torch.promote_types`` / ``torch.can_cast``.

``finfo`` covers jitgrad's floating dtypes (float16, float32, float64) and the name
``jitgrad.bfloat16`` (its numbers are known even though no tensor can hold it); ``iinfo``
the integer dtypes (uint8, int8, int16, int32, int64). The values are NumPy's (bfloat16's
written out), the same numbers PyTorch reports.
"""

from __future__ import annotations

import numpy as np

from . import dtypes
from .dtypes import DType, UnsupportedDType

__all__ = ["finfo", "iinfo", "promote_types", "can_cast"]

#: bfloat16: 8 exponent bits as float32, 7 stored mantissa bits
_BF16 = {"bits": 16, "eps": 2.0 ** -7, "max": float.fromhex("0x1.fep127"),
         "tiny": 2.0 ** -126, "resolution": 0.01}


def _dtype_arg(dtype, fn: str, arg: str, position: int = 1):
    if isinstance(dtype, (DType, UnsupportedDType)):
        return dtype
    raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be torch.dtype, not "
                    f"{type(dtype).__name__}")


class finfo:  # noqa: N801 - PyTorch's name
    """Machine limits of a floating dtype: ``bits``, ``eps`` (the gap between 1 and the next
    number), ``max``, ``min`` (``-max``), ``tiny`` / ``smallest_normal`` (the smallest
    positive normal number), ``resolution`` (``10 ** -precision``) and ``dtype`` (its name).

    >>> import jitgrad
    >>> jitgrad.finfo(jitgrad.float16).max
    65504.0
    """

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution",
                 "dtype")

    def __init__(self, type: DType | UnsupportedDType | None = None) -> None:  # noqa: A002
        dt = dtypes.get_default_dtype() if type is None else _dtype_arg(type, "finfo", "type")
        if getattr(dt, "is_complex", False):  # a complex dtype: its parts' (as PyTorch)
            dt = dt.to_real()
        if not dt.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use "
                            "torch.iinfo to handle 'torch.finfo'")
        if isinstance(dt, UnsupportedDType):  # bfloat16
            info = _BF16
        else:
            f = np.finfo(dt.np)
            info = {"bits": int(f.bits), "eps": float(f.eps), "max": float(f.max),
                    "tiny": float(f.smallest_normal), "resolution": 10.0 ** -int(f.precision)}
        self.bits = info["bits"]
        self.eps = info["eps"]
        self.max = info["max"]
        self.min = -info["max"]
        self.tiny = self.smallest_normal = info["tiny"]
        self.resolution = info["resolution"]
        self.dtype = dt.name

    def _key(self) -> tuple:
        return (self.bits, self.eps, self.max, self.min, self.tiny, self.resolution,
                self.dtype)

    def __eq__(self, other) -> bool:
        return isinstance(other, finfo) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype: ``bits``, ``min``, ``max`` and ``dtype`` (its name).

    >>> import jitgrad
    >>> jitgrad.iinfo(jitgrad.uint8).max
    255
    """

    __slots__ = ("bits", "min", "max", "dtype")

    def __init__(self, type: DType) -> None:  # noqa: A002 - PyTorch's parameter name
        dt = _dtype_arg(type, "iinfo", "type")
        if dt is dtypes.bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if dt.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to "
                            "handle 'torch.iinfo'")
        i = np.iinfo(dt.np)
        self.bits = int(i.bits)
        self.min = int(i.min)
        self.max = int(i.max)
        self.dtype = dt.name

    def __eq__(self, other) -> bool:
        return isinstance(other, iinfo) and (self.bits, self.min, self.max, self.dtype) == (
            other.bits, other.min, other.max, other.dtype)

    def __hash__(self) -> int:
        return hash((self.bits, self.min, self.max, self.dtype))

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def _category(dt) -> int:
    if getattr(dt, "is_complex", False):
        return 3
    return 2 if dt.is_floating_point else (0 if dt is dtypes.bool_ else 1)


def promote_types(type1: DType, type2: DType) -> DType:
    """The smallest dtype both ``type1`` and ``type2`` convert to without leaving their
    category (bool < integer < floating), as PyTorch's promotion table: ``uint8`` with
    ``int8`` is ``int16``, an integer with ``float16`` is ``float16``; ``bfloat16`` with
    ``float16`` is ``float32``."""
    a = _dtype_arg(type1, "promote_types", "type1")
    b = _dtype_arg(type2, "promote_types", "type2", 2)
    if a is b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        if max(ca, cb) == 3 and 2 in (ca, cb):  # complex64 with float64: complex128
            return dtypes.promote(a, True, b, True)
        return a if ca > cb else b
    if isinstance(a, UnsupportedDType) or isinstance(b, UnsupportedDType):  # bfloat16
        other = b if isinstance(a, UnsupportedDType) else a
        return dtypes.float32 if other is dtypes.float16 else other
    return dtypes.from_numpy_dtype(np.promote_types(a.np, b.np))


def can_cast(from_: DType, to: DType) -> bool:
    """Whether PyTorch's casting rules allow ``from_`` to ``to`` in an op's output: not a
    floating dtype to an integer one, and nothing but bool to bool."""
    a = _dtype_arg(from_, "can_cast", "from_")
    b = _dtype_arg(to, "can_cast", "to", 2)
    ca, cb = _category(a), _category(b)
    if ca >= 2 and cb < ca:
        return False
    return not (cb == 0 and ca != 0)
