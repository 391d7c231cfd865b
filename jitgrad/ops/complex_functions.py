"""PyTorch's functions of complex tensors: ``real``, ``imag``, ``conj``, ``angle``, ``polar``,
``complex``, ``view_as_real``, ``view_as_complex`` and the type queries (``is_complex``...).

The ops here exist only for complex values, so they are not in ``REGISTRY`` (whose
registry-driven tests, kernels and compiler are real-valued): each is an :class:`OpDef`
made here and run by :func:`jitgrad.ops.complex_ops.call`, its ``complex`` field its VJP
rule. ``tests/test_complex.py`` checks every one of them (forward against NumPy and
PyTorch, gradients against central differences of the real and imaginary parts). On a
real tensor ``real``/``conj``/``resolve_conj`` return it, as PyTorch's do.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .complex_ops import call
from .registry import OPAQUE, OpDef

__all__ = ["is_complex", "isreal", "is_conj", "conj", "conj_physical", "resolve_conj", "real",
           "imag", "adjoint", "angle", "polar", "complex", "view_as_real", "view_as_complex"]


def _op(name: str, node: str, inputs: tuple, ref, rule, save=(), save_out=False) -> OpDef:
    """A complex-only op (not registered: see the module doc)."""
    return OpDef(name=name, kind=OPAQUE, node=node, inputs=inputs, ref=ref, vjp=rule,
                 complex=rule, save=save, save_out=save_out, fusable=False)


def _is_c(t: Tensor) -> bool:
    return t._data.dtype.kind == "c"


def _tensor(x, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


# ----------------------------------------------------------------------- conjugate
CONJ = _op("conj", "ConjBackward0", ("a",), np.conjugate,
           lambda g, ins, out, p, n: (conj(g),))


def conj(input: Tensor) -> Tensor:
    """The complex conjugate (a new tensor; PyTorch's is a lazy view with the same values).
    A real tensor is returned as it is."""
    input = _tensor(input, "conj")
    return call(CONJ, (input,), None) if _is_c(input) else input


def conj_physical(input: Tensor) -> Tensor:
    """The complex conjugate, computed (a real tensor is returned as it is)."""
    return conj(input)


def resolve_conj(input: Tensor) -> Tensor:
    """``input`` with its conjugate bit resolved: itself (jitgrad's conjugates are computed)."""
    return input


def is_conj(input: Tensor) -> bool:
    """Whether ``input``'s conjugate bit is set: never (conjugates are computed)."""
    return False


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (a view for a real tensor: ``mT``)."""
    if input.dim() < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {input.dim()}-D tensor.")
    return conj(input).transpose(-2, -1)


# ----------------------------------------------------------------------- parts
def _real_rule(g, ins, out, p, n):
    return (g.to(dtypes.from_numpy_dtype(p["dtype"])),)


def _imag_rule(g, ins, out, p, n):
    return (g.to(dtypes.from_numpy_dtype(p["dtype"])) * 1j,)


REAL = _op("real", "RealBackward0", ("a",), lambda a, dtype: a.real, _real_rule)
IMAG = _op("imag", "ImagBackward0", ("a",), lambda a, dtype: a.imag, _imag_rule)


def real(input: Tensor) -> Tensor:
    """The real part: a view of a complex tensor's real parts (writing into it changes the
    tensor); a real tensor itself."""
    input = _tensor(input, "real")
    if not _is_c(input):
        return input
    return call(REAL, (input,), {"dtype": input._data.dtype}, view_of=input)


def imag(input: Tensor) -> Tensor:
    """The imaginary part: a view of a complex tensor's imaginary parts; PyTorch's error for
    a real tensor."""
    input = _tensor(input, "imag")
    if not _is_c(input):
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return call(IMAG, (input,), {"dtype": input._data.dtype}, view_of=input)


def is_complex(input: Tensor) -> bool:
    """Whether ``input`` has a complex dtype (complex64, complex128)."""
    return _tensor(input, "is_complex")._data.dtype.kind == "c"


def isreal(input: Tensor) -> Tensor:
    """Element-wise "is real-valued": the imaginary part is 0 (all True for a real tensor)."""
    from ..creation import ones_like

    if _is_c(input):
        from .selection import eq

        return eq(imag(input), 0)
    return ones_like(input, dtype=dtypes.bool_)


# ----------------------------------------------------------------------- angle
def _angle_ref(a):
    """PyTorch's angle: ``atan2(imag, real)``; for a real value 0, or pi below 0 (NaN
    stays NaN; -0.0 gives 0)."""
    if a.dtype.kind == "c":
        return np.angle(a)
    out = np.where(a < 0, np.pi, 0.0).astype(a.dtype)
    return np.where(np.isnan(a), a, out)


def _angle_rule(g, ins, out, p, n):
    z = ins[0]
    if not _is_c(z):
        return (g * 0.0,)
    r2 = real(z * conj(z))
    from .selection import where

    safe = where(r2 == 0, 1.0, r2)
    return (g * (z * 1j) / safe,)  # g * i z / |z|^2 (0 where z is 0)


ANGLE = _op("angle", "AngleBackward0", ("a",), _angle_ref, _angle_rule, save=(0,))


def angle(input: Tensor) -> Tensor:
    """The argument of each element, in (-pi, pi] (a real tensor: 0, or pi below 0); a
    float tensor of the parts' dtype."""
    input = _tensor(input, "angle")
    if input._data.dtype.kind not in "fc":
        input = input.to(dtypes.get_default_dtype())
    return call(ANGLE, (input,), None)


# ----------------------------------------------------------------------- constructors
def _type_name(d: np.dtype) -> str:
    return dtypes.from_numpy_dtype(d).tensor_type[:-len("Tensor")]


def _pair_dtype(a: Tensor, b: Tensor) -> None:
    """PyTorch's checks of ``complex``'s / ``polar``'s two inputs: float or double, the same."""
    da, db = a._data.dtype, b._data.dtype
    if any(d.kind != "f" or d == np.float16 for d in (da, db)):
        raise RuntimeError("Expected both inputs to be Float or Double tensors but got "
                           f"{_type_name(da)} and {_type_name(db)}")
    if da != db:
        raise RuntimeError(f"Expected object of scalar type {_type_name(da)} but got scalar "
                           f"type {_type_name(db)} for second argument")


def _complex_ref(re, im):
    shape = np.broadcast_shapes(re.shape, im.shape)
    out = np.empty(shape, np.result_type(re.dtype, np.complex64))
    out.real = re
    out.imag = im
    return out


COMPLEX = _op("complex", "ComplexBackward0", ("real", "imag"), _complex_ref,
              lambda g, ins, out, p, n: (real(g) if n[0] else None,
                                         imag(g) if n[1] else None))


def complex(real: Tensor, imag: Tensor) -> Tensor:  # noqa: A001 - PyTorch's name
    """The complex tensor ``real + i imag`` (float32 parts: complex64; float64: complex128;
    broadcast)."""
    re, im = _tensor(real, "complex"), _tensor(imag, "complex")
    _pair_dtype(re, im)
    return call(COMPLEX, (re, im), None)


def _polar_ref(r, theta):
    return _complex_ref(r * np.cos(theta), r * np.sin(theta))


def _polar_rule(g, ins, out, p, n):
    # out = r e^{i theta}: dL/dr = Re(g conj(e^{i theta})), dL/dtheta = Re(g conj(i out))
    r, theta = ins
    unit = complex(theta.cos(), theta.sin())
    return (real(g * conj(unit)) if n[0] else None,
            real(g * conj(polar(r, theta) * 1j)) if n[1] else None)


POLAR = _op("polar", "PolarBackward0", ("abs", "angle"), _polar_ref, _polar_rule,
            save=(0, 1))


def polar(abs: Tensor, angle: Tensor) -> Tensor:  # noqa: A002 - PyTorch's names
    """The complex tensor of absolute values ``abs`` and angles ``angle``:
    ``abs * (cos(angle) + i sin(angle))``."""
    r, theta = _tensor(abs, "polar"), _tensor(angle, "polar")
    _pair_dtype(r, theta)
    return call(POLAR, (r, theta), None)


# ----------------------------------------------------------------------- views
def _as_real_ref(a):
    parts = a.real  # a view with a's strides; the imaginary part is one part further
    step = parts.itemsize
    return np.lib.stride_tricks.as_strided(parts, (*a.shape, 2), (*a.strides, step),
                                           writeable=a.flags.writeable)


VIEW_AS_REAL = _op("view_as_real", "ViewAsRealBackward0", ("a",), _as_real_ref,
                   lambda g, ins, out, p, n: (complex(g[..., 0], g[..., 1]),))


def view_as_real(input: Tensor) -> Tensor:
    """A complex tensor's values as a float tensor with a last dim of 2 (real, imaginary):
    a view of the same memory."""
    input = _tensor(input, "view_as_real")
    if not _is_c(input):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return call(VIEW_AS_REAL, (input,), None, view_of=input)


def _as_complex_ref(a):
    return a.view(np.result_type(a.dtype, np.complex64))[..., 0]


VIEW_AS_COMPLEX = _op("view_as_complex", "ViewAsComplexBackward0", ("a",), _as_complex_ref,
                      lambda g, ins, out, p, n: (view_as_real(g),))


def view_as_complex(input: Tensor) -> Tensor:
    """A float tensor whose last dim holds (real, imaginary) pairs as a complex tensor: a
    view of the same memory. PyTorch's errors where the memory cannot be read that way."""
    input = _tensor(input, "view_as_complex")
    a = input._data
    if a.dtype not in (np.float32, np.float64):
        raise RuntimeError("view_as_complex is only supported for float and double tensors, "
                           f"but got a tensor of scalar type: {_type_name(a.dtype)}")
    if a.ndim == 0 or a.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    item = a.itemsize
    if a.strides[-1] != item:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * item) for s, n in zip(a.strides[:-1], a.shape[:-1]) if n > 1):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last "
                           "dimension")
    if input.storage_offset() % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return call(VIEW_AS_COMPLEX, (input,), None, view_of=input)


def _set_real(self: Tensor, value) -> None:
    real(self).copy_(value)


def _set_imag(self: Tensor, value) -> None:
    imag(self).copy_(value)


#: the ``Tensor`` members this module adds (:mod:`jitgrad.ops.methods` installs them)
TENSOR_METHODS = {
    "is_complex": is_complex, "isreal": isreal, "is_conj": is_conj, "conj": conj,
    "conj_physical": conj_physical, "resolve_conj": resolve_conj, "adjoint": adjoint,
    "angle": angle,
    "real": property(real, _set_real, doc="The real part: a view of a complex tensor's real "
                                          "parts; a real tensor itself."),
    "imag": property(imag, _set_imag, doc="The imaginary part: a view of a complex tensor's "
                                          "imaginary parts (an error for a real tensor)."),
}
