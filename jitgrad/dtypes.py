"""The dtype table and PyTorch's type-promotion rules (pure, no tensors here).

A :class:`DType` wraps a NumPy dtype. Promotion follows PyTorch, not NumPy: a Python float
combined with an integer tensor gives the default float dtype (float32), and a zero-dim tensor
only widens the result when it is of a higher category (bool < integer < floating) than every
dimensioned operand.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "DType",
    "float32",
    "float64",
    "int32",
    "int64",
    "bool_",
    "float16",
    "bfloat16",
    "complex64",
    "complex128",
    "UnsupportedDType",
    "int8",
    "int16",
    "uint8",
    "get_default_dtype",
    "set_default_dtype",
    "to_dtype",
    "from_numpy_dtype",
    "promote",
    "result_type",
]


class DType:
    """A tensor element type; ``jitgrad.float32`` and friends are its instances."""

    __slots__ = ("name", "np", "is_floating_point", "is_complex", "is_signed", "itemsize",
                 "category", "tensor_type", "__weakref__")

    def __init__(self, name: str, np_dtype: type, category: int, tensor_type: str) -> None:
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category  # 0 bool, 1 integer, 2 floating, 3 complex
        self.is_floating_point = category == 2
        self.is_complex = category == 3
        self.is_signed = self.np.kind in "ifc"
        self.itemsize = self.np.itemsize
        self.tensor_type = tensor_type

    def __repr__(self) -> str:
        return f"jitgrad.{self.name}"

    def __reduce__(self):
        return (to_dtype, (self.name,))

    def to_numpy(self) -> np.dtype:
        """The NumPy dtype backing this dtype."""
        return self.np

    def to_real(self) -> DType:
        """The real dtype of a complex dtype's parts (``complex64`` -> ``float32``); a real
        dtype is its own."""
        return _BY_NP[np.dtype(self.np.type(0).real.dtype)] if self.category == 3 else self

    def to_complex(self) -> DType:
        """The complex dtype whose parts are this float dtype (``float32`` -> ``complex64``);
        a complex dtype is its own. PyTorch's error for other dtypes."""
        if self.category == 3:
            return self
        if self is float16:
            raise complex32.error()
        if self is float32 or self is float64:
            return complex64 if self is float32 else complex128
        raise RuntimeError(f"to_complex is not supported for {self}")

    @property
    def cpp_name(self) -> str:
        """ATen's C++ name of the type, as PyTorch's error messages print it ("float",
        "double", "long int"...)."""
        return CPP_NAMES.get(self.name, self.name)


#: ATen's C++ names of the dtypes, in its error messages
CPP_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
             "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
             "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
             "complex128": "c10::complex<double>"}


class UnsupportedDType:
    """A PyTorch dtype jitgrad has no storage for (``jitgrad.bfloat16``). Scripts may name it
    (in a dtype table, a comparison); creating or converting a tensor to it raises a
    ``TypeError`` saying what is missing. Not a :class:`DType`: nothing can hold it."""

    __slots__ = ("name", "why", "is_floating_point", "is_signed", "itemsize")

    def __init__(self, name: str, itemsize: int, why: str) -> None:
        self.name = name
        self.why = why
        self.is_floating_point = True
        self.is_signed = True
        self.itemsize = itemsize

    def __repr__(self) -> str:
        return f"jitgrad.{self.name}"

    def __reduce__(self):
        return (to_dtype, (self.name,))  # unpickling raises, as using it does

    def error(self) -> TypeError:
        """The error raised where the dtype is used."""
        return TypeError(f"jitgrad.{self.name} is not supported: {self.why}")


bfloat16 = UnsupportedDType(
    "bfloat16", 2,
    "NumPy has no bfloat16 type, and jitgrad's kernels (Numba, CUDA) compute on NumPy "
    "dtypes only (ml_dtypes' bfloat16 is not one Numba can compile for). Use jitgrad.float32, "
    "or jitgrad.float16 for half-size storage")

float16 = DType("float16", np.float16, 2, "HalfTensor")
float32 = DType("float32", np.float32, 2, "FloatTensor")
float64 = DType("float64", np.float64, 2, "DoubleTensor")
uint8 = DType("uint8", np.uint8, 1, "ByteTensor")
int8 = DType("int8", np.int8, 1, "CharTensor")
int16 = DType("int16", np.int16, 1, "ShortTensor")
int32 = DType("int32", np.int32, 1, "IntTensor")
int64 = DType("int64", np.int64, 1, "LongTensor")
bool_ = DType("bool", np.bool_, 0, "BoolTensor")
complex64 = DType("complex64", np.complex64, 3, "ComplexFloatTensor")
complex128 = DType("complex128", np.complex128, 3, "ComplexDoubleTensor")
complex32 = UnsupportedDType(
    "complex32", 4, "NumPy has no complex type of two float16 parts. Use jitgrad.complex64")

_ALL = (float16, float32, float64, uint8, int8, int16, int32, int64, bool_, complex64,
        complex128)
_BY_NP: dict[np.dtype, DType] = {d.np: d for d in _ALL}
_BY_NAME: dict[str, DType] = {d.name: d for d in _ALL}
_BY_TENSOR_TYPE: dict[str, DType] = {d.tensor_type: d for d in _ALL}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "int": int32,
                 "long": int64, "short": int16, "cfloat": complex64, "cdouble": complex128})
_UNSUPPORTED = {d.name: d for d in (bfloat16, complex32)}
_UNSUPPORTED["chalf"] = complex32

_default_float = float32


def get_default_dtype() -> DType:
    """The dtype Python floats and float factories default to (float32, as PyTorch)."""
    return _default_float


def set_default_dtype(dtype: DType) -> None:
    """Set the default floating dtype (float32 or float64)."""
    global _default_float
    d = to_dtype(dtype)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_float = d


def from_numpy_dtype(np_dtype) -> DType:
    """The jitgrad dtype for a NumPy dtype; raises TypeError for unsupported ones."""
    try:
        return _BY_NP[np_dtype]
    except KeyError:
        pass
    try:
        return _BY_NP[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{np.dtype(np_dtype).type.__name__}. The "
            "only supported types are: float64, float32, float16, complex64, complex128, int64, "
            "int32, int16, int8, uint8, and bool."
        ) from None


def to_dtype(dtype) -> DType:
    """Normalise a ``dtype=`` argument (DType, NumPy dtype, Python type or name)."""
    if type(dtype) is DType:
        return dtype
    if type(dtype) is UnsupportedDType:
        raise dtype.error()
    if dtype is float:  # Python's float is a double (PyTorch's too, whatever the default)
        return float64
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    if isinstance(dtype, str):
        name = dtype.removeprefix("jitgrad.").removeprefix("torch.")
        if name in _BY_NAME:
            return _BY_NAME[name]
        if name in _UNSUPPORTED:
            raise _UNSUPPORTED[name].error()
        if name in _BY_TENSOR_TYPE:  # "torch.FloatTensor", as Tensor.type() takes it
            return _BY_TENSOR_TYPE[name]
        raise TypeError(f"unknown dtype {dtype!r}")
    legacy = getattr(dtype, "dtype", None)  # a legacy constructor (jitgrad.FloatTensor)
    if type(legacy) is DType and isinstance(dtype, type):
        return legacy
    try:
        return from_numpy_dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a jitgrad dtype, got {dtype!r}") from None


def _wider(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if a.category != b.category:
        hi, lo = (a, b) if a.category > b.category else (b, a)
        if hi.category == 3 and lo is float64:  # complex64 with float64: complex128
            return complex128
        return hi
    return _BY_NP[np.promote_types(a.np, b.np)]


_promote_cache: dict[tuple, DType] = {}


def promote(a: DType, a_dim: bool, b: DType, b_dim: bool) -> DType:
    """Result dtype of a binary op on two tensors (``*_dim``: the operand has ndim > 0)."""
    key = (a, a_dim, b, b_dim)
    r = _promote_cache.get(key)
    if r is None:
        r = _promote_uncached(((a, a_dim),(b, b_dim)), ())
        _promote_cache[key] = r
    return r


def scalar_dtype(value) -> DType:
    """The category-representative dtype of a Python scalar."""
    t = type(value)
    if t is bool or t is np.bool_:
        return bool_
    if t is int or isinstance(value, np.integer):
        return int64
    if t is float or isinstance(value, np.floating):
        return _default_float
    if t is complex or isinstance(value, np.complexfloating):
        return _default_float.to_complex()
    raise TypeError(f"unsupported scalar type {t.__name__}")


def promote_scalar(a: DType, value) -> DType:
    """Result dtype of tensor ``a`` combined with a Python scalar (a "wrapped number")."""
    t = type(value)
    if t is float:
        return a if a.category >= 2 else _default_float
    if t is int:
        return a if a.category >= 1 else int64
    if t is bool:
        return a
    if t is complex:
        return a.to_complex() if a.category >= 2 else _default_float.to_complex()
    return _promote_uncached(((a, True),), (value,))


def _promote_uncached(tensors, scalars) -> DType:
    dim = zero = None
    for d, has_dim in tensors:
        if has_dim:
            dim = d if dim is None else _wider(dim, d)
        else:
            zero = d if zero is None else _wider(zero, d)
    result = dim
    if zero is not None and (result is None or zero.category > result.category):
        result = result.to_complex() if zero.category == 3 and result is not None and \
            result.category == 2 else zero
    for s in scalars:
        sd = scalar_dtype(s)
        if result is None:
            result = sd
        elif sd.category > result.category:
            if sd.category == 3:  # a complex number: the complex type of a float result
                result = result.to_complex() if result.category == 2 else sd
            else:
                result = _default_float if sd.category == 2 else sd
    if result is None:
        raise TypeError("cannot determine a result dtype without operands")
    return result


def result_type(*operands) -> DType:
    """PyTorch's ``result_type`` over tensors and Python scalars."""
    tensors, scalars = [], []
    for o in operands:
        d = getattr(o, "dtype", None)
        if type(d) is DType:
            tensors.append((d, o.ndim > 0))
        else:
            scalars.append(o)
    return _promote_uncached(tensors, scalars)
