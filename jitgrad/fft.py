"""``jitgrad.fft``: PyTorch's discrete Fourier transforms, differentiable.

Forward transforms are NumPy's (pocketfft; float32 in, complex64 out, as PyTorch). Each 1-D
transform is an op of complex values (:mod:`jitgrad.ops.complex_ops`) whose gradient is the
adjoint transform, in PyTorch's convention (for a real loss, ``z.grad = dL/dx + i dL/dy``):

* ``fft`` / ``ifft`` (``norm`` "backward", "forward" or "ortho"): the adjoint of a DFT with
  one norm is the inverse DFT with the dual norm (backward <-> forward, ortho <-> ortho);
  a real input's gradient is the real part;
* ``rfft``: the adjoint zero-pads the half spectrum to ``n`` and runs the dual ``ifft``
  (real part);
* ``irfft``: the dual ``rfft`` of the gradient, its bins other than 0 and ``n/2`` doubled
  (each stands for a conjugate pair of the full spectrum), as PyTorch's ``fft_c2r_backward``.

The n-dimensional transforms (``fft2``, ``fftn``, ``rfftn``, ``irfftn``...) are these 1-D
transforms over each dim in turn (``rfftn``: the last dim first; ``irfftn``: the last dim
last), so their gradients compose. ``n`` / ``s`` crop or zero-pad as PyTorch's. Tests:
``tests/test_fft.py`` (values and gradients against PyTorch, gradients against central
differences).
"""

from __future__ import annotations

import numpy as np

from . import dtypes
from .ops.complex_ops import call
from .ops.registry import OPAQUE, OpDef
from .tensor import Tensor, wrap

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "forward", "ortho")
_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _norm(norm) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f"Invalid normalization mode: {norm}")
    return norm


def _resize(a: np.ndarray, n: int, axis: int) -> np.ndarray:
    """``a`` cropped or zero-padded to ``n`` along ``axis`` (the signal length ``n``)."""
    m = a.shape[axis]
    if m == n:
        return a
    if m > n:
        return np.take(a, np.arange(n), axis=axis)
    pad = [(0, 0)] * a.ndim
    pad[axis] = (0, n - m)
    return np.pad(a, pad)


def _float_of(a: np.ndarray) -> np.ndarray:
    """``a`` as float32/float64 (or complex as it is); other dtypes: the default float."""
    if a.dtype.kind == "c" or a.dtype == np.float32 or a.dtype == np.float64:
        return a
    return a.astype(dtypes.get_default_dtype().np)


def _complex_of(a: np.ndarray) -> np.ndarray:
    """``a`` as the complex dtype of its precision (ints: the default float's)."""
    a = _float_of(a)
    return a if a.dtype.kind == "c" else a.astype(np.result_type(a.dtype, np.complex64))


# ----------------------------------------------------------------------- 1-D ops
def _fft_ref(a, n, dim, norm, inverse):
    a = _resize(_complex_of(a), n, dim)
    f = np.fft.ifft if inverse else np.fft.fft
    return f(a, n=n, axis=dim, norm=norm).astype(a.dtype, copy=False)


def _fft_rule(g, ins, out, p, n):
    in_len = p["in_len"]
    back = _fft_op(g, p["n"], p["dim"], _DUAL[p["norm"]], not p["inverse"])
    if in_len != p["n"]:  # the forward cropped or padded: its adjoint pads or crops
        back = _crop_or_pad(back, in_len, p["dim"])
    return (back,)


FFT = OpDef(name="fft", kind=OPAQUE, node="FftC2CBackward0", inputs=("a",),
            params=("n", "dim", "norm", "inverse"), ref=lambda a, **p: _fft_ref(
                a, p["n"], p["dim"], p["norm"], p["inverse"]),
            vjp=_fft_rule, complex=_fft_rule, fusable=False)


def _rfft_ref(a, n, dim, norm, in_len):
    a = _resize(_float_of(a), n, dim)  # (a real signal: the public rfft checked)
    return np.fft.rfft(a, n=n, axis=dim, norm=norm).astype(
        np.result_type(a.dtype, np.complex64), copy=False)


def _rfft_rule(g, ins, out, p, n):
    full = _crop_or_pad(g, p["n"], p["dim"])  # the half spectrum, zero-padded to n bins
    back = _fft_op(full, p["n"], p["dim"], _DUAL[p["norm"]], True).real
    if p["in_len"] != p["n"]:
        back = _crop_or_pad(back, p["in_len"], p["dim"])
    return (back,)


RFFT = OpDef(name="rfft", kind=OPAQUE, node="FftR2CBackward0", inputs=("a",),
             params=("n", "dim", "norm", "in_len"), ref=lambda a, **p: _rfft_ref(a, **p),
             vjp=_rfft_rule, complex=_rfft_rule, fusable=False)


def _irfft_ref(a, n, dim, norm, in_len):
    a = _resize(_complex_of(a), n // 2 + 1, dim)
    part = a.real.dtype
    return np.fft.irfft(a, n=n, axis=dim, norm=norm).astype(part, copy=False)


def _irfft_rule(g, ins, out, p, n):
    n_out, dim = p["n"], p["dim"]
    half = rfft(g, dim=dim, norm=_DUAL[p["norm"]])
    bins = n_out // 2 + 1
    weights = np.full(bins, 2.0)
    weights[0] = 1.0
    if n_out % 2 == 0:
        weights[-1] = 1.0
    shape = [1] * g.dim()
    shape[dim] = bins
    back = half * wrap(weights.reshape(shape).astype(g._data.dtype))
    if p["in_len"] != bins:
        back = _crop_or_pad(back, p["in_len"], dim)
    return (back,)


IRFFT = OpDef(name="irfft", kind=OPAQUE, node="FftC2RBackward0", inputs=("a",),
              params=("n", "dim", "norm", "in_len"), ref=lambda a, **p: _irfft_ref(a, **p),
              vjp=_irfft_rule, complex=_irfft_rule, fusable=False)


def _crop_or_pad(t: Tensor, n: int, dim: int) -> Tensor:
    """``t`` cropped or zero-padded to ``n`` along ``dim`` (differentiable)."""
    m = t.shape[dim]
    if m == n:
        return t
    if m > n:
        return t.narrow(dim, 0, n)
    from .ops.padding import pad

    widths = [0, 0] * (t.dim() - dim - 1) + [0, n - m]
    if t.is_complex():
        from .ops.complex_functions import view_as_complex, view_as_real

        return view_as_complex(pad(view_as_real(t), [0, 0] + widths).contiguous())
    return pad(t, widths)


def _dim(t: Tensor, dim: int) -> int:
    nd = t.dim()
    if not -nd <= dim < max(nd, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                         f"{nd - 1}], but got {dim})")
    return dim % nd


def _fft_op(t: Tensor, n: int, dim: int, norm: str, inverse: bool) -> Tensor:
    return call(FFT, (t,), {"n": n, "dim": dim, "norm": norm, "inverse": inverse,
                            "in_len": t.shape[dim]})


def _signal(input, n, dim: int, name: str, half: bool = False) -> tuple:
    """``(tensor, dim, n)`` of a 1-D transform's arguments: ``n`` defaults to the length
    along ``dim`` (``half``: the length of the signal of a half spectrum, ``2 * (m - 1)``)."""
    x = _input(input, name)
    d = _dim(x, dim)
    if n is None:
        n = 2 * (x.shape[d] - 1) if half else x.shape[d]
    n = int(n)
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return x, d, n


def _input(x, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    if x.dim() == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    if x._data.dtype.kind not in "fc":
        x = x.to(dtypes.get_default_dtype())
    return x


# ----------------------------------------------------------------------- public 1-D
def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-D discrete Fourier transform of ``input`` along ``dim`` (``n``: the signal
    length, cropping or zero-padding; ``norm``: "backward" (default: no scaling), "forward"
    (1/n) or "ortho" (1/sqrt(n)))."""
    x, d, n = _signal(input, n, dim, "fft")
    return _fft_op(x, n, d, _norm(norm), False)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None
         ) -> Tensor:
    """The inverse of :func:`fft` (``norm`` "backward" scales by 1/n here)."""
    x, d, n = _signal(input, n, dim, "ifft")
    return _fft_op(x, n, d, _norm(norm), True)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None
         ) -> Tensor:
    """The FFT of a real signal: its ``n // 2 + 1`` non-negative frequencies."""
    return _rfft(input, n, dim, _norm(norm), "rfft")


def _rfft(input, n, dim: int, norm: str, name: str) -> Tensor:
    """``rfft`` of a real signal, its error naming ``name`` (``rfft`` or ``ihfft``)."""
    x, d, n = _signal(input, n, dim, name)
    if x.is_complex():
        raise RuntimeError(f"{name} expects a real input tensor, but got "
                           f"{x.dtype.tensor_type[:-len('Tensor')]}")
    return call(RFFT, (x,), {"n": n, "dim": d, "norm": norm, "in_len": x.shape[d]})


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None
          ) -> Tensor:
    """The inverse of :func:`rfft`: a real signal of length ``n`` (default
    ``2 * (m - 1)`` for ``m`` input bins) from its half spectrum."""
    x, d, n = _signal(input, n, dim, "irfft", half=True)
    return call(IRFFT, (x,), {"n": n, "dim": d, "norm": _norm(norm), "in_len": x.shape[d]})


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None
         ) -> Tensor:
    """The FFT of a Hermitian-symmetric signal given by its first half: a real spectrum
    (``irfft`` of the conjugate with the dual norm)."""
    from .ops.complex_functions import conj

    x, d, n = _signal(input, n, dim, "hfft", half=True)
    return call(IRFFT, (conj(x),), {"n": n, "dim": d, "norm": _DUAL[_norm(norm)],
                                    "in_len": x.shape[d]})


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None
          ) -> Tensor:
    """The inverse of :func:`hfft`: the conjugate of ``rfft`` with the dual norm."""
    from .ops.complex_functions import conj

    return conj(_rfft(input, n, dim, _DUAL[_norm(norm)], "ihfft"))


# ----------------------------------------------------------------------- n-D
def _dims_sizes(x: Tensor, s, dim, name: str) -> tuple:
    """(dims, sizes) of an n-D transform, as PyTorch resolves ``s`` and ``dim``."""
    if dim is None:
        dims = list(range(x.dim() - len(s), x.dim())) if s is not None else \
            list(range(x.dim()))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [_dim(x, d) for d in dims]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{name} dims must be unique")
    if s is not None and len(s) != len(dims):
        raise RuntimeError("When given, dim and shape arguments must have the same length")
    sizes = [x.shape[d] for d in dims] if s is None else \
        [x.shape[d] if int(k) == -1 else int(k) for k, d in zip(s, dims)]
    return dims, sizes


def _complex_n(input, s, dim, norm, inverse: bool, name: str) -> Tensor:
    x = _input(input, name)
    dims, sizes = _dims_sizes(x, s, dim, name)
    for d, n in zip(dims, sizes):
        x = _fft_op(x, n, d, _norm(norm), inverse)
    return x


def fftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The n-D FFT over ``dim`` (all dims by default; the last ``len(s)`` with ``s``)."""
    return _complex_n(input, s, dim, norm, False, "fftn")


def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The inverse of :func:`fftn`."""
    return _complex_n(input, s, dim, norm, True, "ifftn")


def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The n-D FFT of a real signal: ``rfft`` over the last of ``dim``, then ``fft`` over
    the others."""
    x = _input(input, "rfftn")
    dims, sizes = _dims_sizes(x, s, dim, "rfftn")
    x = rfft(x, sizes[-1], dims[-1], norm)
    for d, n in zip(dims[:-1], sizes[:-1]):
        x = _fft_op(x, n, d, _norm(norm), False)
    return x


def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The inverse of :func:`rfftn`: ``ifft`` over all of ``dim`` but the last, then
    ``irfft`` over the last (its length ``2 * (m - 1)`` unless ``s`` gives it)."""
    x = _input(input, "irfftn")
    dims, sizes = _dims_sizes(x, s, dim, "irfftn")
    if s is None:
        sizes[-1] = 2 * (x.shape[dims[-1]] - 1)
    for d, n in zip(dims[:-1], sizes[:-1]):
        x = _fft_op(x, n, d, _norm(norm), True)
    return irfft(x, sizes[-1], dims[-1], norm)


def hfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The n-D FFT of a Hermitian-symmetric signal given by its half (the last of ``dim``
    halved, as ``irfftn`` takes it): a real result, ``irfftn`` of the conjugate with the
    dual norm, as :func:`hfft` is in 1-D (PyTorch's ``c2c`` over the other dims, then
    ``c2r`` of the conjugate over the last)."""
    from .ops.complex_functions import conj

    x = _input(input, "hfftn")
    dims, sizes = _dims_sizes(x, s, dim, "hfftn")
    if s is None:
        sizes[-1] = 2 * (x.shape[dims[-1]] - 1)
    if sizes[-1] < 1:
        raise RuntimeError(f"Invalid number of data points ({sizes[-1]}) specified")
    return irfftn(conj(x), sizes, dims, _DUAL[_norm(norm)])


def ihfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The inverse of :func:`hfftn`: :func:`ihfft` over the last of ``dim`` (the one-sided
    half), then the inverse FFT over the others, as PyTorch orders them. ``input`` is real."""
    x = _input(input, "ihfftn")
    if x.is_complex():
        raise RuntimeError(f"Only supports floating-point dtypes, but found: "
                           f"{x.dtype.tensor_type[:-len('Tensor')]}")
    dims, sizes = _dims_sizes(x, s, dim, "ihfftn")
    x = ihfft(x, sizes[-1], dims[-1], norm)
    for d, n in zip(dims[:-1], sizes[:-1]):
        x = _fft_op(x, n, d, _norm(norm), True)
    return x


def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D FFT (over the last two dims by default)."""
    return fftn(input, s, dim, norm)


def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The inverse of :func:`fft2`."""
    return ifftn(input, s, dim, norm)


def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D FFT of a real signal."""
    return rfftn(input, s, dim, norm)


def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The inverse of :func:`rfft2`."""
    return irfftn(input, s, dim, norm)


def hfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D FFT of a Hermitian-symmetric half signal (:func:`hfftn` over two dims)."""
    return hfftn(input, s, dim, norm)


def ihfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The inverse of :func:`hfft2`."""
    return ihfftn(input, s, dim, norm)


# ----------------------------------------------------------------------- helpers
def fftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False
            ) -> Tensor:
    """The sample frequencies of an ``n``-point FFT with sample spacing ``d``."""
    from .creation import tensor

    return tensor(np.fft.fftfreq(n, d), dtype=dtype or dtypes.get_default_dtype(),
                  device=device, requires_grad=requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device=None, requires_grad: bool = False
             ) -> Tensor:
    """The sample frequencies of an ``n``-point ``rfft``."""
    from .creation import tensor

    return tensor(np.fft.rfftfreq(n, d), dtype=dtype or dtypes.get_default_dtype(),
                  device=device, requires_grad=requires_grad)


def fftshift(input: Tensor, dim=None) -> Tensor:
    """``input`` rolled so the zero frequency is in the middle (over ``dim``, all dims by
    default)."""
    dims = list(range(input.dim())) if dim is None else \
        ([dim] if isinstance(dim, int) else list(dim))
    return input.roll([input.shape[d] // 2 for d in dims], dims)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """The inverse of :func:`fftshift`."""
    dims = list(range(input.dim())) if dim is None else \
        ([dim] if isinstance(dim, int) else list(dim))
    return input.roll([-(input.shape[d] // 2) for d in dims], dims)
