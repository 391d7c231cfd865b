"""Complex tensors (complex64, complex128): dtypes and promotion, creation and printing,
the ops that take complex operands (forward against NumPy), PyTorch's gradient convention
(``z.grad = dL/dx + i dL/dy`` for a real loss ``L``) checked against central differences
of the real and imaginary parts in complex128, views (``real``, ``imag``,
``view_as_real``, ``view_as_complex``), the errors, and ``jitgrad.compile`` (a graph
break: the call runs eagerly). PyTorch, when installed, is the oracle for the RoPE
pipeline, printing and promotion."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from helpers import wirtinger_numerical_grad

import jitgrad
from jitgrad.ops.complex_functions import __all__ as COMPLEX_FUNCTIONS

C128 = np.complex128


def _rng(seed=0):
    return np.random.default_rng(seed)


def _crand(shape, seed=0, dtype=C128):
    r = _rng(seed)
    return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dtype)


def _real_loss(f, out_shape_seed=7):
    """A real loss of ``f``'s output reading both parts: sum(view_as_real(f(z)) * R)."""
    weights = {}

    def loss(*zs):
        out = f(*zs)
        parts = jitgrad.view_as_real(out) if out.is_complex() else out
        w = weights.get(parts.shape)
        if w is None:
            w = weights[parts.shape] = jitgrad.tensor(
                _rng(out_shape_seed).standard_normal(parts.shape))
        return (parts * w).sum()
    return loss


def _check_grad(f, z: np.ndarray, rtol=1e-6, atol=1e-7):
    loss = _real_loss(f)
    t = jitgrad.tensor(z, requires_grad=True)
    loss(t).backward()
    expected = wirtinger_numerical_grad(loss, z)
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=rtol, atol=atol)


# ----------------------------------------------------------------------- dtypes
def test_dtype_names_and_properties():
    assert jitgrad.cfloat is jitgrad.complex64 and jitgrad.cdouble is jitgrad.complex128
    assert jitgrad.complex64.is_complex and not jitgrad.complex64.is_floating_point
    assert jitgrad.complex64.is_signed and jitgrad.complex64.itemsize == 8
    assert jitgrad.complex64.to_real() is jitgrad.float32
    assert jitgrad.float64.to_complex() is jitgrad.complex128
    assert repr(jitgrad.complex128) == "jitgrad.complex128"
    assert jitgrad.finfo(jitgrad.complex64).eps == jitgrad.finfo(jitgrad.float32).eps
    with pytest.raises(TypeError, match="complex32 is not supported"):
        jitgrad.zeros(2, dtype=jitgrad.chalf)


@pytest.mark.parametrize("a, b, expected", [
    ("float32", "complex64", "complex64"), ("float64", "complex64", "complex128"),
    ("int64", "complex64", "complex64"), ("complex64", "complex128", "complex128"),
    ("bool", "complex128", "complex128"),
])
def test_promotion_of_tensors(a, b, expected):
    x = jitgrad.ones(2, dtype=getattr(jitgrad, a))
    y = jitgrad.ones(2, dtype=getattr(jitgrad, b))
    assert (x * y).dtype is getattr(jitgrad, expected)
    assert jitgrad.promote_types(getattr(jitgrad, a), getattr(jitgrad, b)) is \
        getattr(jitgrad, expected)


def test_promotion_with_numbers_and_zero_dim():
    assert (jitgrad.ones(2) * 1j).dtype is jitgrad.complex64
    assert (jitgrad.ones(2, dtype=jitgrad.float64) * 1j).dtype is jitgrad.complex128
    assert (jitgrad.arange(3) + 1j).dtype is jitgrad.complex64
    assert (jitgrad.ones(2, dtype=jitgrad.complex64) * 2.5).dtype is jitgrad.complex64
    # a 0-dim complex tensor gives its category, the dimensioned float its precision
    z0 = jitgrad.tensor(1j, dtype=jitgrad.complex128)
    assert (jitgrad.ones(2) * z0).dtype is jitgrad.complex64
    assert jitgrad.result_type(jitgrad.ones(2), 1j) is jitgrad.complex64
    assert not jitgrad.can_cast(jitgrad.complex64, jitgrad.float64)
    assert jitgrad.can_cast(jitgrad.float32, jitgrad.complex64)


# ----------------------------------------------------------------------- creation, printing
def test_creation():
    z = jitgrad.tensor([1 + 2j, 3])
    assert z.dtype is jitgrad.complex64 and z.tolist() == [1 + 2j, 3 + 0j]
    assert jitgrad.tensor(np.array([1j])).dtype is jitgrad.complex128
    assert jitgrad.tensor([np.complex64(1j), 1.0]).dtype is jitgrad.complex64
    assert jitgrad.zeros(2, 3, dtype=jitgrad.cfloat).numpy().dtype == np.complex64
    assert jitgrad.tensor(2 - 1j).item() == 2 - 1j
    assert jitgrad.ones(3).to(jitgrad.cdouble).numpy().tolist() == [1, 1, 1]
    jitgrad.manual_seed(0)
    w = jitgrad.randn(20000, dtype=jitgrad.cfloat)
    assert w.dtype is jitgrad.complex64
    # PyTorch's complex normal: parts of variance 1/2 (E|z|^2 = 1)
    assert abs(float(w.real.var()) - 0.5) < 0.03 and abs(float(w.imag.var()) - 0.5) < 0.03
    u = jitgrad.rand(1000, dtype=jitgrad.cdouble).numpy()
    assert (u.real >= 0).all() and (u.real < 1).all() and (u.imag >= 0).all()
    assert jitgrad.randn(2, dtype=jitgrad.cfloat, requires_grad=True).requires_grad


@pytest.mark.parametrize("data, dtype, text", [
    ([1 + 2j, 3 - 1j], None, "tensor([1.+2.j, 3.-1.j])"),
    ([0.5 + 1j, 1.5 - 0.5j], None, "tensor([0.5000+1.0000j, 1.5000-0.5000j])"),
    ([1 + 2j], "complex128", "tensor([1.+2.j], dtype=jitgrad.complex128)"),
    (1.5 - 2j, None, "tensor(1.5000-2.j)"),
    ([[1 + 2j, -3.25 - 1e-3j], [0j, 1e5 + 1j]], None,
     "tensor([[ 1.0000e+00+2.0000e+00j, -3.2500e+00-1.0000e-03j],\n"
     "        [ 0.0000e+00+0.0000e+00j,  1.0000e+05+1.0000e+00j]])"),
])
def test_repr(data, dtype, text):
    t = jitgrad.tensor(data, dtype=getattr(jitgrad, dtype) if dtype else None)
    assert repr(t) == text


def test_repr_matches_pytorch():
    torch = pytest.importorskip("torch")
    for data in ([1 + 2j, 3 - 1j], [0.5 + 1j, -1.5 - 0.25j, 100j], [[1e-5 + 1j, 2]], 3j,
                 [[1 + 1j] * 3] * 2):
        for dt in ("complex64", "complex128"):
            ours = repr(jitgrad.tensor(data, dtype=getattr(jitgrad, dt)))
            theirs = repr(torch.tensor(data, dtype=getattr(torch, dt)))
            assert ours == theirs.replace("torch.", "jitgrad."), data


# ----------------------------------------------------------------------- forward
UNARY = {
    "neg": (lambda z: -z, np.negative), "exp": (jitgrad.exp, np.exp),
    "log": (jitgrad.log, np.log), "sqrt": (jitgrad.sqrt, np.sqrt),
    "rsqrt": (jitgrad.rsqrt, lambda a: 1 / np.sqrt(a)),
    "reciprocal": (jitgrad.reciprocal, np.reciprocal), "sin": (jitgrad.sin, np.sin),
    "cos": (jitgrad.cos, np.cos), "tanh": (jitgrad.tanh, np.tanh),
    "square": (jitgrad.square, np.square), "pow3": (lambda z: z ** 3, lambda a: a ** 3),
    "pow_half": (lambda z: z ** 0.5, lambda a: a ** 0.5),
    "abs": (jitgrad.abs, np.abs), "angle": (jitgrad.angle, np.angle),
    "real": (jitgrad.real, np.real), "imag": (jitgrad.imag, np.imag),
    "conj": (jitgrad.conj, np.conj), "sum": (jitgrad.sum, np.sum),
    "sum_dim": (lambda z: z.sum(0), lambda a: a.sum(0)),
    "mean": (lambda z: z.mean(1, keepdim=True), lambda a: a.mean(1, keepdims=True)),
    "transpose": (lambda z: z.T, lambda a: a.T), "index": (lambda z: z[1:, ::2],
                                                         lambda a: a[1:, ::2]),
    "reshape": (lambda z: z.reshape(-1), lambda a: a.reshape(-1)),
    "expand": (lambda z: z[None].expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4))),
    "cat": (lambda z: jitgrad.cat([z, z * 2]), lambda a: np.concatenate([a, a * 2])),
    "stack": (lambda z: jitgrad.stack([z, z.conj()]), lambda a: np.stack([a, a.conj()])),
    "to_c64": (lambda z: z.to(jitgrad.complex64), lambda a: a.astype(np.complex64)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward(name):
    f, ref = UNARY[name]
    z = _crand((3, 4), seed=1)
    out = f(jitgrad.tensor(z))
    np.testing.assert_allclose(out.numpy(), ref(z), rtol=1e-12, atol=1e-14)


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "rsub_number": lambda a, b: (1 - 2j) - a,
    "mul_number": lambda a, b: a * (0.5 + 2j), "rdiv_number": lambda a, b: 2j / a,
    "matmul": lambda a, b: a @ b.T, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_forward(name):
    f = BINARY[name]
    a, b = _crand((3, 4), seed=2), _crand((3, 4), seed=3)
    b[0, 0] = a[0, 0]
    out = f(jitgrad.tensor(a), jitgrad.tensor(b))
    np.testing.assert_allclose(out.numpy(), f(a, b), rtol=1e-12)


def test_mixed_real_and_complex_operands():
    x = np.arange(1.0, 5.0)
    z = _crand(4, seed=4)
    for f in (lambda a, b: a * b, lambda a, b: a + b, lambda a, b: a / b, lambda a, b: b - a):
        np.testing.assert_allclose(f(jitgrad.tensor(x), jitgrad.tensor(z)).numpy(), f(x, z))
    np.testing.assert_allclose(
        jitgrad.where(jitgrad.tensor([True, False, True, False]), jitgrad.tensor(z), 0.0)
        .numpy(), np.where([True, False, True, False], z, 0))


def test_in_place_ops():
    z = jitgrad.tensor(_crand(3, seed=5))
    w = jitgrad.tensor(_crand(3, seed=6))
    expected = (z.numpy() + w.numpy()) * 2j
    z += w
    z.mul_(2j)
    np.testing.assert_allclose(z.numpy(), expected)


def test_parts_are_views():
    z = jitgrad.tensor([1 + 2j, 3 - 1j])
    z.real[0] = 10.0
    z.imag.mul_(2)
    assert z.tolist() == [10 + 4j, 3 - 2j]
    z.real = jitgrad.tensor([0.0, 1.0])
    assert z.tolist() == [4j, 1 - 2j]
    r = jitgrad.view_as_real(z)
    assert r.shape == (2, 2) and r.tolist() == [[0, 4], [1, -2]]
    r[1, 1] = 7.0
    assert z.tolist() == [4j, 1 + 7j]
    x = jitgrad.arange(8.0).reshape(2, 2, 2)
    c = jitgrad.view_as_complex(x)
    assert c.shape == (2, 2) and c.dtype is jitgrad.complex64
    assert c.tolist() == [[1j, 2 + 3j], [4 + 5j, 6 + 7j]]
    c.mul_(2)
    assert x[1, 1].tolist() == [12.0, 14.0]
    # a strided view: every other row of pairs
    y = jitgrad.arange(12.0, dtype=jitgrad.float64).reshape(3, 2, 2)[::2]
    assert jitgrad.view_as_complex(y).tolist() == [[1j, 2 + 3j], [8 + 9j, 10 + 11j]]
    assert jitgrad.view_as_real(jitgrad.view_as_complex(y)).tolist() == y.tolist()


def test_type_queries():
    z = jitgrad.tensor([1 + 0j, 2j])
    assert jitgrad.is_complex(z) and z.is_complex() and not jitgrad.ones(1).is_complex()
    assert jitgrad.isreal(z).tolist() == [True, False]
    assert jitgrad.isreal(jitgrad.ones(2)).tolist() == [True, True]
    assert not z.is_conj() and z.resolve_conj() is z
    x = jitgrad.ones(2)
    assert x.conj() is x and x.real is x
    assert jitgrad.adjoint(jitgrad.tensor([[1j, 2]])).tolist() == [[-1j], [2]]


def test_angle_of_real_tensors():
    x = jitgrad.tensor([-2.0, 0.0, -0.0, 3.0, float("nan")])
    out = jitgrad.angle(x)
    assert out.tolist()[:4] == [float(np.float32(np.pi)), 0.0, 0.0, 0.0]
    assert np.isnan(out.tolist()[4])
    assert jitgrad.angle(jitgrad.tensor([-1, 2])).dtype is jitgrad.float32


def test_float_of_complex_warns_and_keeps_the_real_part():
    z = jitgrad.tensor([1 + 2j])
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        assert z.float().tolist() == [1.0]


# ----------------------------------------------------------------------- gradients
GRAD_CASES = {
    **{k: v[0] for k, v in UNARY.items() if k not in ("to_c64",)},
    "mul_const": lambda z: z * jitgrad.tensor(_crand((3, 4), seed=9)),
    "div_by": lambda z: jitgrad.tensor(_crand((3, 4), seed=9)) / z,
    "div": lambda z: z / jitgrad.tensor(_crand((3, 4), seed=9)),
    "square_mul": lambda z: z * z,
    "rsub": lambda z: (1 + 1j) - z,
    "matmul_left": lambda z: z @ jitgrad.tensor(_crand((4, 2), seed=9)),
    "matmul_right": lambda z: jitgrad.tensor(_crand((2, 3), seed=9)) @ z,
    "where": lambda z: jitgrad.where(jitgrad.tensor(_rng(1).random((3, 4)) < 0.5), z, 0.0),
    "masked_fill": lambda z: z.masked_fill(jitgrad.tensor(_rng(1).random((3, 4)) < 0.5),
                                           0.0),
    "broadcast_mul": lambda z: z * jitgrad.tensor(_crand((1, 4), seed=9)),
    "abs_squared": lambda z: z.abs() ** 2,
    "view_as_real": jitgrad.view_as_real,
    "to_real_parts": lambda z: jitgrad.complex(z.real * 2, z.imag.exp()),
    "polar_roundtrip": lambda z: jitgrad.polar(z.abs(), z.angle()),
    "norm": lambda z: z.norm(),
    "inv": lambda z: jitgrad.linalg.inv(z[:, :3] + 2 * jitgrad.eye(3)),
    "det": lambda z: jitgrad.linalg.det(z[:, 1:] + jitgrad.eye(3)),
    "linear_bias": lambda z: jitgrad.nn.functional.linear(
        z, jitgrad.tensor(_crand((2, 4), seed=5)), jitgrad.tensor(_crand(2, seed=6))),
    "addmm": lambda z: jitgrad.addmm(z[:, :2], z, jitgrad.tensor(_crand((4, 2), seed=5))),
    "prod": lambda z: z.prod(1),
    "prod_all": lambda z: (z[:, :2] * 0.5).prod(),
    "cumprod": lambda z: (z * 0.7).cumprod(1),
    "lerp": lambda z: jitgrad.lerp(z, z.conj() * 2, 0.3),
    "lerp_tensor": lambda z: jitgrad.lerp(z, jitgrad.ones_like(z), z * 0.1),
    "addcdiv": lambda z: jitgrad.addcdiv(z, z * z, z + 3, value=0.5),
    "addcmul": lambda z: jitgrad.addcmul(z, z, z.conj(), value=2.0),
    "sgn": lambda z: z.sgn(),
    "var": lambda z: z.var(0),
    "std": lambda z: z.std(),
    "index_select": lambda z: z.index_select(1, jitgrad.tensor([0, 2, 2])),
    "advanced_index": lambda z: z[jitgrad.tensor([1, 1, 0])],
    "gather": lambda z: z.gather(1, jitgrad.tensor([[0, 3], [1, 1], [2, 0]])),
    "diag_trace": lambda z: jitgrad.diag(z[:, 0]) * jitgrad.trace(z[:, :3]),
    "diagonal": lambda z: z.diagonal(),
    "cumsum": lambda z: z.cumsum(1),
    "unfold": lambda z: z.unfold(1, 2, 1),
    "repeat_interleave": lambda z: z.repeat_interleave(2, dim=0),
    "vdot": lambda z: jitgrad.vdot(z[0], z[1]),
    "nan_to_num": lambda z: jitgrad.nan_to_num(z * 2),
    "vector_norm_1": lambda z: jitgrad.linalg.vector_norm(z, 1, dim=1),
    "mH": lambda z: z.mH @ z,
    "chain": lambda z: (z.exp() * z.conj()).sum(1).tanh() / (z.abs().sum() + 1.0),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradient_against_central_differences(name):
    z = _crand((3, 4), seed=11)
    _check_grad(GRAD_CASES[name], z)


def test_gradients_of_real_inputs_are_real():
    rng = _rng(3)
    x = rng.standard_normal((2, 3, 2))
    r, th = rng.random((2, 3)) + 0.5, rng.standard_normal((2, 3))
    cases = [
        ((x,), lambda a: jitgrad.view_as_complex(a) * (1 + 2j)),
        ((r, th), jitgrad.polar),
        ((r, th), jitgrad.complex),
        ((r,), lambda a: a.to(jitgrad.complex128) * jitgrad.tensor(_crand((2, 3), seed=2))),
        ((r,), lambda a: a * 1j + a),
    ]
    for args, f in cases:
        loss = _real_loss(f)
        ts = [jitgrad.tensor(a, requires_grad=True) for a in args]
        loss(*ts).backward()
        for i, (t, a) in enumerate(zip(ts, args)):
            assert t.grad.dtype is jitgrad.float64

            def partial(v, i=i, args=args, loss=loss):
                xs = [jitgrad.tensor(b) for b in args]
                xs[i] = v
                return loss(*xs)
            num = wirtinger_numerical_grad(partial, a)
            np.testing.assert_allclose(t.grad.numpy(), num, rtol=1e-6, atol=1e-7)


def test_abs_gradient_at_zero_is_zero():
    z = jitgrad.tensor([0j, 3 + 4j], dtype=jitgrad.complex128, requires_grad=True)
    z.abs().sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [0j, 0.6 + 0.8j], rtol=1e-15)


def test_gradient_accumulates_and_double_backward():
    z = jitgrad.tensor(_crand(3, seed=12), requires_grad=True)
    for _ in range(2):
        (z.abs() ** 2).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), 4 * z.detach().numpy())
    c = jitgrad.tensor(_crand(3, seed=13))
    z.grad = None
    (g,) = jitgrad.autograd.grad((z * z.conj()).real.sum(), z, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 2 * z.detach().numpy())
    (g * c.conj()).real.sum().backward()  # d/dz Re(2 z conj(c)) = 2c
    np.testing.assert_allclose(z.grad.numpy(), 2 * c.numpy())


def test_rope_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = _rng(5)
    xq = rng.standard_normal((2, 5, 3, 8)).astype(np.float32)
    freqs = np.outer(np.arange(5), 1.0 / 10000 ** (np.arange(0, 8, 2) / 8)).astype(np.float32)
    w = rng.standard_normal((2, 5, 3, 8)).astype(np.float32)

    def run(lib, xq_, freqs_, w_):
        x = lib.tensor(xq_, requires_grad=True)
        th = lib.tensor(freqs_, requires_grad=True)
        fc = lib.polar(lib.ones_like(th), th)
        xc = lib.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        out = lib.view_as_real(xc * fc.view(1, 5, 1, 4)).flatten(3)
        loss = (out * lib.tensor(w_)).sum() + (xc.abs() ** 2).mean() + fc.angle().sum()
        loss.backward()
        return out.detach().numpy(), x.grad.numpy(), th.grad.numpy()

    for ours, theirs in zip(run(jitgrad, xq, freqs, w), run(torch, xq, freqs, w)):
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-5)


def test_gradients_match_pytorch_on_complex_leaves():
    torch = pytest.importorskip("torch")
    z = _crand((3, 4), seed=21)
    c = _crand((4, 4), seed=22)

    def run(lib):
        t = lib.tensor(z, requires_grad=True)
        out = ((t @ lib.tensor(c)).exp() / (t.abs() + 1) + t.conj() * t.sqrt()).tanh()
        loss = lib.view_as_real(out).sum() + out.angle().mean() + out.imag.sum()
        loss.backward()
        return out.detach().numpy(), t.grad.numpy()

    for ours, theirs in zip(run(jitgrad), run(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------- errors
def test_unsupported_ops_raise_before_computing():
    z = jitgrad.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    for f, name in ((jitgrad.relu, "relu"), (jitgrad.sigmoid, "sigmoid"),
                    (lambda t: t.max(), "amax"), (lambda t: t.logcumsumexp(0), "logcumsumexp"),
                    (lambda t: t.sort(), "sort")):
        with pytest.raises(RuntimeError, match=f"{name}.* not implemented for 'ComplexFloat'"):
            f(z)
    assert z.grad is None and z.grad_fn is None


def test_functions_that_conjugate_or_test_values():
    a = np.array([1 + 2j, 3 - 1j])
    b = np.array([2 - 1j, 1j])
    assert jitgrad.vdot(jitgrad.tensor(a), jitgrad.tensor(b)).item() == np.vdot(a, b)
    assert jitgrad.isclose(jitgrad.tensor(a), jitgrad.tensor(a.conj())).tolist() == \
        [False, False]
    near = np.array([1 + 1e-9j, complex(np.nan, 0), complex(np.inf, 1)])
    far = np.array([1, complex(np.nan, 0), complex(np.inf, 1)])
    assert jitgrad.isclose(jitgrad.tensor(near), jitgrad.tensor(far)).tolist() == \
        [True, False, True]
    assert jitgrad.isclose(jitgrad.tensor(near), jitgrad.tensor(far),
                           equal_nan=True).tolist() == [True, True, True]
    bad = np.array([complex(np.nan, 1), complex(np.inf, -np.inf)], np.complex64)
    big = float(np.finfo(np.float32).max)
    assert jitgrad.nan_to_num(jitgrad.tensor(bad)).tolist() == [1j, complex(big, -big)]
    np.testing.assert_allclose(jitgrad.tensor([3 + 4j, 0j], dtype=jitgrad.complex128).sgn()
                               .numpy(), [0.6 + 0.8j, 0j], rtol=1e-15)
    with pytest.raises(RuntimeError, match="Please use torch.sgn"):
        jitgrad.tensor([1j]).sign()
    v = jitgrad.tensor([[1 + 1j, 2], [3j, 1]])
    assert v.var().dtype is jitgrad.float32
    np.testing.assert_allclose(v.std(0).numpy(), [1.5811388, 0.70710677], rtol=1e-6)


def test_conjugate_transposes_and_norms():
    z = jitgrad.tensor([[1 + 2j, 3j]])
    assert z.mH.tolist() == [[1 - 2j], [-3j]] and z.H.tolist() == [[1 - 2j], [-3j]]
    assert z.adjoint().tolist() == [[1 - 2j], [-3j]]
    assert abs(z.norm().item() - np.sqrt(14)) < 1e-6
    assert z.norm().dtype is jitgrad.float32
    with pytest.raises(RuntimeError, match="complex matrices are not supported"):
        jitgrad.linalg.cholesky(jitgrad.eye(2, dtype=jitgrad.cfloat))
    a = _crand((3, 3), seed=8)
    np.testing.assert_allclose(jitgrad.linalg.inv(jitgrad.tensor(a)).numpy(),
                               np.linalg.inv(a), rtol=1e-12)
    np.testing.assert_allclose(jitgrad.linalg.det(jitgrad.tensor(a)).item(),
                               np.linalg.det(a), rtol=1e-12)


def test_view_errors():
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        jitgrad.view_as_complex(jitgrad.ones(3, 3))
    with pytest.raises(RuntimeError, match="last dimension with stride 1"):
        jitgrad.view_as_complex(jitgrad.ones(2, 4).T)
    with pytest.raises(RuntimeError, match="stride divisible by 2"):
        jitgrad.view_as_complex(jitgrad.ones(3, 3)[:, 1:])
    with pytest.raises(RuntimeError, match="float and double"):
        jitgrad.view_as_complex(jitgrad.ones(3, 2, dtype=jitgrad.int64))
    with pytest.raises(RuntimeError, match="only supported for complex"):
        jitgrad.view_as_real(jitgrad.ones(2))
    with pytest.raises(RuntimeError, match="non-complex dtypes"):
        jitgrad.ones(2).imag  # noqa: B018
    with pytest.raises(RuntimeError, match="Float or Double"):
        jitgrad.polar(jitgrad.ones(2, dtype=jitgrad.int64), jitgrad.ones(2))
    with pytest.raises(RuntimeError, match="scalar type Float but got scalar type Double"):
        jitgrad.complex(jitgrad.ones(2), jitgrad.ones(2, dtype=jitgrad.float64))


def test_backward_of_a_complex_output_needs_a_real_scalar():
    z = jitgrad.tensor(1 + 1j, requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar outputs"):
        (z * z).backward()
    assert z.grad is None


# ----------------------------------------------------------------------- the rest of the API
def test_assert_close_compares_both_parts():
    z = jitgrad.tensor([1 + 2j])
    jitgrad.testing.assert_close(z, jitgrad.tensor([1 + 2j]))
    with pytest.raises(AssertionError):
        jitgrad.testing.assert_close(z, z.conj())
    assert not jitgrad.allclose(z, z.conj())


def test_save_and_load():
    z = jitgrad.tensor(_crand((2, 3), seed=1))
    buf = io.BytesIO()
    jitgrad.save({"z": z}, buf)
    buf.seek(0)
    out = jitgrad.load(buf)["z"]
    assert out.dtype is jitgrad.complex128 and out.tolist() == z.tolist()


def test_save_is_readable_by_pytorch():
    torch = pytest.importorskip("torch")
    z = jitgrad.tensor(_crand((2, 3), seed=1)).to(jitgrad.complex64)
    buf = io.BytesIO()
    jitgrad.save(z, buf)
    buf.seek(0)
    t = torch.load(buf)
    assert t.dtype == torch.complex64 and t.numpy().tolist() == z.tolist()


def test_compile_runs_complex_code_eagerly():
    def step(x, theta):
        fc = jitgrad.polar(jitgrad.ones_like(theta), theta)
        xc = jitgrad.view_as_complex(x.reshape(2, 2, 2))
        return jitgrad.view_as_real(xc * fc).sum() + x.sum()

    f = jitgrad.compile(step)
    x, th = jitgrad.randn(8), jitgrad.randn(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            assert f(x, th).item() == step(x, th).item()
        th2 = jitgrad.randn(2, 2)
        assert f(x, th2).item() == step(x, th2).item()
    g = jitgrad.compile(step, fullgraph=True)
    with pytest.raises(Exception, match="complex values"):
        g(x, th)


def test_compile_with_a_complex_argument():
    f = jitgrad.compile(lambda z: (z * z).real.sum())
    z = jitgrad.tensor(_crand(4, seed=2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert f(z).item() == (z * z).real.sum().item()


def test_compile_with_a_complex_buffer_view_only():
    """A complex value the function only slices (no complex op to stop the trace) is a graph
    break too: the tracer stops at any complex value it meets."""
    class M(jitgrad.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("fc", jitgrad.polar(jitgrad.ones(4), jitgrad.arange(4.0)))

        def forward(self, x):
            return self.fc[:2], x * 2

    m = M()
    f = jitgrad.compile(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            a, b = f(jitgrad.ones(2))
            assert a.tolist() == m.fc[:2].tolist() and b.tolist() == [2.0, 2.0]
    with pytest.raises(Exception, match="a complex tensor"):
        jitgrad.compile(lambda x: m.fc[1:3] * x, fullgraph=True)(jitgrad.ones(1))


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax",
                                  "NAdam", "RAdam", "Adadelta"])
def test_optimizers_on_complex_parameters_match_pytorch(name):
    """PyTorch runs every optimizer on view_as_real views of complex parameters (Adam's
    second moment is per part, not g * g); so does jitgrad. The state stays complex."""
    torch = pytest.importorskip("torch")
    out = []
    for lib in (jitgrad, torch):
        p = lib.nn.Parameter(lib.tensor(_crand((2, 3), seed=3).astype(np.complex64)))
        opt = getattr(lib.optim, name)([p], lr=0.05)
        for _ in range(3):
            opt.zero_grad()
            ((p * lib.tensor(_crand((2, 3), seed=4).astype(np.complex64))).abs() ** 2
             ).sum().backward()
            opt.step()
        states = [v for v in opt.state[p].values() if isinstance(v, lib.Tensor) and v.dim()]
        assert all(v.is_complex() for v in states)
        out.append(p.detach().numpy().copy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-5, atol=1e-6)


def test_optimizer_state_of_a_complex_parameter_round_trips():
    p = jitgrad.nn.Parameter(jitgrad.tensor([1 + 1j, 2 - 1j]))
    q = jitgrad.nn.Parameter(jitgrad.tensor([0.5]))
    opt = jitgrad.optim.Adam([p, q], lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        ((p.abs() ** 2).sum() + q.sum()).backward()
        opt.step()
    sd = opt.state_dict()
    assert sd["state"][0]["exp_avg"].dtype is jitgrad.complex64
    assert sd["state"][1]["exp_avg"].dtype is jitgrad.float32
    assert len(opt.state) == 2  # (no view left behind)


def test_random_fills_of_complex_tensors():
    jitgrad.manual_seed(0)
    u = jitgrad.empty(20000, dtype=jitgrad.cfloat).uniform_(-1, 3).numpy()
    for part in (u.real, u.imag):
        assert part.min() >= -1 and part.max() < 3 and abs(part.mean() - 1) < 0.05
    n = jitgrad.empty(20000, dtype=jitgrad.cfloat).normal_(1.0, 2.0).numpy()
    for part in (n.real, n.imag):  # each part: mean 1, std 2 / sqrt(2), as PyTorch's
        assert abs(part.mean() - 1) < 0.05 and abs(part.std() - 2 ** 0.5) < 0.05
    lin = jitgrad.nn.Linear(4, 3, dtype=jitgrad.cfloat)
    assert lin.weight.dtype is jitgrad.complex64 and lin.bias.is_complex()
    assert float(lin.weight.imag.abs().max()) <= 0.5


def test_complex_tensors_stay_on_the_cpu():
    """jitgrad's CUDA kernels are real-valued: moving or making a complex tensor on CUDA is
    a clear error, never a silent copy left on the host."""
    if not jitgrad.cuda.is_available():
        pytest.skip("no CUDA (not even Numba's simulator)")
    makers = (lambda: jitgrad.tensor([1j]).cuda(), lambda: jitgrad.tensor([1j]).to("cuda"),
              lambda: jitgrad.zeros(2, dtype=jitgrad.cfloat, device="cuda"),
              lambda: jitgrad.randn(2, dtype=jitgrad.cfloat, device="cuda"),
              lambda: jitgrad.tensor([1j], device="cuda"))
    for make in makers:
        with pytest.raises(RuntimeError, match="complex tensors are CPU-only"):
            make()


def test_public_names():
    for name in COMPLEX_FUNCTIONS:
        assert getattr(jitgrad, name).__doc__
    for name in ("real", "imag", "conj", "angle", "is_complex", "adjoint"):
        assert hasattr(jitgrad.Tensor, name)


# ----------------------------------------------------------------------- linalg.eig
_A = np.array([[2.0, 1.0, 0.0], [0.5, 3.0, 0.2], [0.0, 0.4, 1.0]])
_ROT = np.array([[0.0, -2.0, 0.3], [1.0, 0.5, 0.0], [0.2, 0.0, 1.5]])  # complex pair


@pytest.mark.parametrize("a", [_A, _ROT, _ROT + 1j * _A, np.stack([_A, _ROT])])
def test_eig_decomposes(a):
    t = jitgrad.tensor(a)
    L, V = jitgrad.linalg.eig(t)
    assert L.dtype is jitgrad.complex128 and V.shape == a.shape
    np.testing.assert_allclose((t.to(jitgrad.complex128) @ V).numpy(),
                               (V * L.unsqueeze(-2)).numpy(), atol=1e-12)
    np.testing.assert_allclose(np.sort_complex(jitgrad.linalg.eigvals(t).numpy().ravel()),
                               np.sort_complex(np.linalg.eigvals(a).ravel()), atol=1e-12)
    assert jitgrad.linalg.eig(t).eigenvalues.shape == L.shape


def _eig_loss(lib, use_vectors):
    def loss(t):
        if use_vectors:
            L, V = lib.linalg.eig(t)
            return (L * L).real.sum() + (V.abs() ** 2 * lib.arange(3.0)).sum() + L.abs().sum()
        return (lib.linalg.eigvals(t) ** 2).imag.sum() + lib.linalg.eigvals(t).abs().sum()
    return loss


@pytest.mark.parametrize("use_vectors", [False, True])
@pytest.mark.parametrize("a", [_A, _ROT, _ROT + 0.5j * _A])
def test_eig_gradient_against_central_differences(a, use_vectors):
    loss = _eig_loss(jitgrad, use_vectors)
    t = jitgrad.tensor(a, requires_grad=True)
    loss(t).backward()
    assert t.grad.dtype is t.dtype
    np.testing.assert_allclose(t.grad.numpy(), wirtinger_numerical_grad(loss, a), rtol=1e-5,
                               atol=1e-6)


def test_eig_matches_pytorch():
    torch = pytest.importorskip("torch")
    for a in (_A, _ROT, _ROT + 0.5j * _A):
        out = []
        for lib in (jitgrad, torch):
            t = lib.tensor(a, requires_grad=True)
            _eig_loss(lib, True)(t).backward()
            out.append((lib.linalg.eigvals(t.detach()).numpy(), t.grad.numpy()))
        np.testing.assert_allclose(np.sort_complex(out[0][0]), np.sort_complex(out[1][0]),
                                   atol=1e-10)
        np.testing.assert_allclose(out[0][1], out[1][1], atol=1e-8)


def test_eig_errors():
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        jitgrad.linalg.eig(jitgrad.ones(3))
    with pytest.raises(RuntimeError, match="square matrices"):
        jitgrad.linalg.eigvals(jitgrad.ones(2, 3))
    t = jitgrad.tensor(_ROT, requires_grad=True)
    L, V = jitgrad.linalg.eig(t)
    with pytest.raises(RuntimeError, match="ill-defined"):
        V.real.sum().backward()  # depends on the eigenvectors' phases
    assert t.grad is None
    g = jitgrad.tensor(_A, requires_grad=True)
    (gl,) = jitgrad.autograd.grad(jitgrad.linalg.eigvals(g).abs().sum(), g, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        gl.sum().backward()
