"""Complex input across PyTorch's functions, with PyTorch as the oracle: each of ~200
functions (one or two complex 3x4 operands) either gives PyTorch's result (values, shape,
and whether it is complex) or raises. A result that differs is a silently wrong answer --
how composites written for real tensors went wrong on complex ones (``vdot`` without the
conjugate, ``isclose`` on the real parts, ``sinc`` and ``vander`` casting to real). The
functions PyTorch rejects for complex input but jitgrad computes (``deg2rad``, ``logit``,
``unique``: mathematically defined) are listed in ``ACCEPTED``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)
Z = (_RNG.standard_normal((3, 4)) + 1j * _RNG.standard_normal((3, 4))).astype(np.complex64)
W = (_RNG.standard_normal((3, 4)) + 1j * _RNG.standard_normal((3, 4))).astype(np.complex64)
X = _RNG.standard_normal((3, 4)).astype(np.float32)

#: functions of one complex 3x4 tensor, called ``f(z)`` unless ``UNARY_CALLS`` says how
UNARY = """
abs absolute angle acos acosh asin asinh atan atanh ceil clone conj conj_physical cos cosh
deg2rad det diag diag_embed diagflat diagonal exp exp2 expm1 fix flatten fliplr flipud floor
frac isfinite isinf isnan isneginf isposinf isreal log log10 log1p log2 logdet matrix_exp mean
median msort nanmean nansum neg negative nonzero norm numel positive prod rad2deg ravel
reciprocal relu round rsqrt sgn sigmoid sign signbit sin sinc sinh sqrt square squeeze std sum
t tan tanh trace tril triu trunc var logsumexp cumsum cumprod amax amin argmax argmin max min
sort argsort unique count_nonzero all any logical_not erf erfinv lgamma digamma i0
special.expit nan_to_num real imag view_as_real resolve_conj resolve_neg isclose_self
pinverse inverse cummax logcumsumexp xlogy_self special.xlog1py_self cov corrcoef
special.sinc special.entr special.log1p special.expm1 special.exp2 special.logsumexp
special.i0 special.ndtr special.erfc frexp logit trapz cumulative_trapezoid diff
gradient_self histc bincount flip_self roll_self rot90 vander tril_indices_self linalg.norm
linalg.vector_norm linalg.matrix_norm linalg.svdvals linalg.inv linalg.det linalg.eigvals
softmax log_softmax clamp_min0 kron_self outer_self inner_self cross_self
""".split()

#: functions of two complex 3x4 tensors (or of a real one), as ``BINARY_CALLS`` says
BINARY = """
add sub mul div true_divide pow atan2 maximum minimum fmax fmin eq ne lt gt le ge dist dot
vdot inner outer matmul mm kron cross logaddexp hypot copysign remainder fmod floor_divide
allclose equal isclose where_mask lerp_half addcmul addcdiv xlogy polar_real complex_real
""".split()

#: computed by jitgrad where PyTorch raises (mathematically defined; not silently wrong)
ACCEPTED = {"deg2rad", "rad2deg", "logit", "unique"}


def _unary_calls(lib, a):
    return {
        "isclose_self": lambda: lib.isclose(a, a), "kron_self": lambda: lib.kron(a, a),
        "outer_self": lambda: lib.outer(a[0], a[1]), "inner_self": lambda: lib.inner(a, a),
        "cross_self": lambda: lib.linalg.cross(a[:, :3], a[:, 1:]),
        "softmax": lambda: lib.softmax(a, 1), "log_softmax": lambda: lib.log_softmax(a, 1),
        "clamp_min0": lambda: lib.clamp(a, min=0), "logsumexp": lambda: lib.logsumexp(a, 1),
        "cumsum": lambda: lib.cumsum(a, 1), "cumprod": lambda: lib.cumprod(a, 1),
        "cummax": lambda: lib.cummax(a, 1), "logcumsumexp": lambda: lib.logcumsumexp(a, 1),
        "diag_embed": lambda: lib.diag_embed(a), "det": lambda: lib.det(a[:, :3]),
        "logdet": lambda: lib.logdet(a[:, :3]), "matrix_exp": lambda: lib.matrix_exp(a[:, :3]),
        "inverse": lambda: lib.inverse(a[:, :3]),
        "linalg.inv": lambda: lib.linalg.inv(a[:, :3]),
        "linalg.det": lambda: lib.linalg.det(a[:, :3]),
        "linalg.eigvals": lambda: lib.linalg.eigvals(a[:, :3]),
        "trace": lambda: lib.trace(a), "diagflat": lambda: lib.diagflat(a[0]),
        "xlogy_self": lambda: lib.xlogy(a, a),
        "special.xlog1py_self": lambda: lib.special.xlog1py(a, a),
        "gradient_self": lambda: lib.gradient(a)[0], "flip_self": lambda: lib.flip(a, [0]),
        "roll_self": lambda: lib.roll(a, 1, 1), "diff": lambda: lib.diff(a),
        "vander": lambda: lib.vander(a[0]),
        "tril_indices_self": lambda: a[lib.tril_indices(3, 3)],
    }


def _binary_calls(lib, a, b, x):
    return {
        "where_mask": lambda: lib.where(a.real > 0, a, b),
        "lerp_half": lambda: lib.lerp(a, b, 0.5), "addcmul": lambda: lib.addcmul(a, a, b),
        "addcdiv": lambda: lib.addcdiv(a, a, b), "polar_real": lambda: lib.polar(x, x),
        "complex_real": lambda: lib.complex(x, x), "dot": lambda: lib.dot(a[0], b[0]),
        "vdot": lambda: lib.vdot(a[0], b[0]), "outer": lambda: lib.outer(a[0], b[0]),
        "matmul": lambda: lib.matmul(a, b.T), "mm": lambda: lib.mm(a, b.T),
        "cross": lambda: lib.linalg.cross(a[:, :3], b[:, :3]),
        "inner": lambda: lib.inner(a, b),
    }


def _function(lib, name):
    obj = lib
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _call(lib, kind: str, name: str):
    a, b, x = lib.tensor(Z), lib.tensor(W), lib.tensor(X)
    if kind == "u":
        special = _unary_calls(lib, a)
        return special[name]() if name in special else _function(lib, name)(a)
    special = _binary_calls(lib, a, b, x)
    return special[name]() if name in special else _function(lib, name)(a, b)


def _plain(r):
    """A result as NumPy arrays (nested lists for tuples) or a Python value."""
    if isinstance(r, tuple):
        return [_plain(v) for v in r]
    if isinstance(r, (torch.Tensor, jitgrad.Tensor)):
        t = r.detach()
        return np.asarray((t.resolve_conj() if isinstance(t, torch.Tensor) else t).numpy())
    return r


def _same(a, b) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(
            _same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        return (a.dtype.kind == "c") == (b.dtype.kind == "c") and np.allclose(
            a, b, rtol=1e-4, atol=1e-5, equal_nan=True)
    return np.array_equal(a, b)


def _run(lib, kind: str, name: str) -> tuple:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return "ok", _plain(_call(lib, kind, name))
        except Exception as e:  # noqa: BLE001 - an error is an answer here
            return "err", repr(e)


@pytest.mark.parametrize("kind, name", [("u", n) for n in UNARY] + [("b", n) for n in BINARY])
def test_complex_input_gives_pytorch_result_or_raises(kind, name):
    theirs = _run(torch, kind, name)
    ours = _run(jitgrad, kind, name)
    if ours[0] == "err":
        return
    if theirs[0] == "err":
        assert name in ACCEPTED, f"{name}: jitgrad computes what PyTorch rejects: {theirs[1]}"
        return
    assert _same(theirs[1], ours[1]), f"{name}: jitgrad's result differs from PyTorch's"
