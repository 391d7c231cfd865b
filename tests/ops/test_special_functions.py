"""Special functions (ops/special_functions.py, kernels/special.py, ``jitgrad.special``):
accuracy against mpmath in float64 (the bounds below are what the docstrings promise), values
at the poles and ends, float32/float16/integer inputs, the composites and their errors, the
``torch.special`` namespace and methods against PyTorch, and compiled == eager.

The registry-driven tests (gradcheck, reference, PyTorch oracle) cover each op's samples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from jitgrad.kernels.special import FUNCTIONS, special_map

import jitgrad
from jitgrad.autograd import gradcheck

mp = pytest.importorskip("mpmath")

#: function -> (mpmath reference, inputs builder, max error in ulp of the exact value)
_RNG = np.random.default_rng(20261129)


def _u(lo, hi, n=300):
    return _RNG.uniform(lo, hi, n)


def _log_ndtr(v):
    return mp.log(mp.ncdf(v)) if v < 0 else mp.log1p(-mp.ncdf(-v))


ACCURACY = {
    "lgamma": (lambda v: mp.log(abs(mp.gamma(v))),
               np.r_[_u(-20, 50), _u(0.01, 3, 100), 1e-300, 1e5, 1e200], 3),
    "digamma": (mp.digamma, np.r_[_u(-20, -0.1), _u(2.0, 60), _u(0.01, 1.2, 100),
                                  [1e-8, 1e5, 1e12, -15.0014, -0.0001]], 12),
    "erfc": (mp.erfc, np.r_[_u(-6, 27)], 3),
    "erfinv": (mp.erfinv, np.r_[_u(-1, 1), 1 - 10.0 ** -_u(1, 15, 100), [1e-300, -1e-10]], 2),
    "erfcx": (lambda v: mp.exp(v * v) * mp.erfc(v),
              np.r_[_u(-26, 30), _u(11, 13, 50), [0.0, 1e5, 1e100]], 6),
    "i0": (lambda v: mp.besseli(0, v), np.r_[_u(-700, 700), _u(-25, 25)], 16),
    "i0e": (lambda v: mp.exp(-abs(v)) * mp.besseli(0, v), np.r_[_u(-100, 100), 1e4], 16),
    "i1": (lambda v: mp.besseli(1, v), np.r_[_u(-700, 700), _u(-25, 25), 1e-300], 16),
    "i1e": (lambda v: mp.exp(-abs(v)) * mp.besseli(1, v), np.r_[_u(-100, 100), 1e4], 16),
    "ndtri": (None, np.r_[_u(0.001, 0.999), 10.0 ** -_u(1, 300, 100), 0.75, 0.25], 4),
    "log_ndtr": (_log_ndtr, np.r_[_u(-40, 40), [-1.0, -1.0000001, 37.0, -1e3]], 6),
}


def _kernel(name, x, n=0):
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    special_map(FUNCTIONS[name], n, x, out)
    return out


def _ulp_error(got, exact) -> float:
    if not mp.isfinite(exact):
        return 0.0 if (math.isnan(got) if mp.isnan(exact) else got == float(exact)) else math.inf
    exact_f = float(exact)
    if exact_f == 0.0 or abs(exact_f) > 1.7e308:
        return 0.0
    return float(abs(mp.mpf(got) - exact) / np.spacing(abs(exact_f)))


@pytest.mark.parametrize("name", sorted(ACCURACY))
def test_float64_accuracy_against_mpmath(name):
    ref, xs, bound = ACCURACY[name]
    got = _kernel(name, xs)
    with mp.workdps(40):
        for v, g in zip(xs, got):
            if name == "ndtri":  # the root of ncdf(x) = p (mpmath's erfinv loses it at 1-1e-300)
                p = mp.mpf(v)
                exact = mp.findroot(lambda t, p=p: mp.ncdf(t) - p, g) if g else 0
            else:
                exact = ref(mp.mpf(v))
            if name == "digamma" and _ulp_error(g, exact) > bound:
                # near its zeros the terms cancel (the recurrence's near 1.46, the
                # reflection's between the poles): the bound is absolute there, relative to
                # the terms' size
                size = abs(math.pi / math.tan(math.pi * v)) if v < 0 else 0.0
                assert abs(g - float(exact)) <= 2e-15 * (3.0 + size), (v, g, exact)
                continue
            assert _ulp_error(g, exact) <= bound, (name, v, g, exact)


def test_digamma_is_accurate_in_absolute_terms_at_its_zero():
    # near x0 = 1.4616... the value cancels: the bound there is absolute
    xs = np.linspace(1.40, 1.52, 101)
    got = _kernel("digamma", xs)
    with mp.workdps(40):
        for v, g in zip(xs, got):
            assert abs(g - float(mp.digamma(v))) <= 1e-15


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10])
def test_polygamma_accuracy_against_mpmath(n):
    xs = np.r_[_u(0.01, 40, 200), _u(-9.9, -0.1, 100)]
    got = _kernel("polygamma", xs, n)
    with mp.workdps(40):
        for v, g in zip(xs, got):
            exact = mp.polygamma(n, v)
            # negative arguments: the zeta sum's terms cancel (documented: tens of ulp)
            bound = 8 if v > 0 else 150
            assert _ulp_error(g, exact) <= bound, (n, v, g, exact)


SPECIAL_VALUES = [
    ("lgamma", [0.0, -0.0, -1.0, -2.0, 1.0, 2.0, np.inf, -np.inf, np.nan]),
    ("digamma", [0.0, -0.0, -1.0, -3.0, np.inf, -np.inf, np.nan, 1.0]),
    ("erfc", [-np.inf, np.inf, 0.0, np.nan, 30.0]),
    ("erfinv", [1.0, -1.0, 1.5, -1.0000001, 0.0, -0.0, np.nan]),
    ("erfcx", [-30.0, -np.inf, np.inf, 0.0, 1e300, np.nan]),
    ("i0", [0.0, 720.0, -720.0, np.nan]),
    ("i0e", [0.0, np.inf, -np.inf, np.nan]),
    ("i1", [0.0, -0.0, -720.0, np.nan]),
    ("i1e", [0.0, np.inf, -np.inf, np.nan]),
    ("ndtri", [0.0, 1.0, 0.5, -0.1, 1.1, np.nan]),
    ("log_ndtr", [-np.inf, np.inf, 0.0, -1e4, np.nan]),
]


@pytest.mark.parametrize("name,values", SPECIAL_VALUES, ids=[c[0] for c in SPECIAL_VALUES])
def test_poles_ends_and_nan_match_torch(name, values):
    torch = pytest.importorskip("torch")
    j_fn = getattr(jitgrad.special, name, None) or getattr(jitgrad, name)
    t_fn = getattr(torch.special, name, None) or getattr(torch, name)
    got = j_fn(jitgrad.tensor(values, dtype=jitgrad.float64)).numpy()
    want = t_fn(torch.tensor(values, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


def test_bessel_functions_at_infinity_are_infinite():
    """KNOWN DIFFERENCE: PyTorch's i0/i1 give NaN at +-inf (its Chebyshev form multiplies
    exp(inf) by 0); jitgrad gives the limits (i0: inf; i1: +-inf; the scaled forms 0)."""
    x = jitgrad.tensor([np.inf, -np.inf], dtype=jitgrad.float64)
    assert jitgrad.i0(x).tolist() == [np.inf, np.inf]
    assert jitgrad.special.i1(x).tolist() == [np.inf, -np.inf]
    assert jitgrad.special.i0e(x).tolist() == [0.0, 0.0]


def _both_libraries(name, x):
    torch = pytest.importorskip("torch")
    if name == "polygamma":
        return (jitgrad.polygamma(2, jitgrad.tensor(x)).numpy(),
                torch.polygamma(2, torch.tensor(x)).numpy())
    j_fn = getattr(jitgrad.special, name, None) or getattr(jitgrad, name)
    t_fn = getattr(torch.special, name, None) or getattr(torch, name)
    return j_fn(jitgrad.tensor(x)).numpy(), t_fn(torch.tensor(x)).numpy()


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_float32_is_the_float64_result_rounded_once(name):
    """float32 computes in float64 and rounds once (so within half an ulp plus the float64
    error); PyTorch computes in float, less accurately (up to ~1e-6 relative, more in
    absolute terms near digamma's zero), so its values agree to rtol 1e-5."""
    lo, hi = {"erfinv": (-0.999, 0.999), "ndtri": (0.001, 0.999)}.get(name, (-8.0, 8.0))
    if name in ("lgamma", "digamma", "polygamma"):
        lo = 0.05
    x = np.random.default_rng(3).uniform(lo, hi, 2000).astype(np.float32)
    got, want = _both_libraries(name, x)
    assert got.dtype == want.dtype == np.float32
    wide = _kernel(name, x.astype(np.float64), 2 if name == "polygamma" else 0)
    np.testing.assert_array_equal(got, wide.astype(np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_integer_and_float16_inputs_have_torch_dtypes():
    torch = pytest.importorskip("torch")
    for j_fn, t_fn in [(jitgrad.lgamma, torch.lgamma), (jitgrad.special.i0e, torch.special.i0e),
                       (jitgrad.special.ndtr, torch.special.ndtr)]:
        for dt in ("int64", "float16", "bool"):
            got = j_fn(jitgrad.tensor([1, 0, 1]).to(getattr(jitgrad, dt)))
            want = t_fn(torch.tensor([1, 0, 1]).to(getattr(torch, dt)))
            assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
            np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2e-3)


# ------------------------------------------------------------------- composites, errors
def _pair(torch, values, dtype="float64", grad=True):
    a = np.asarray(values, dtype=dtype)
    return (jitgrad.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad))


@pytest.mark.parametrize("case", ["ndtr", "mvlgamma", "entr", "xlog1py", "multigammaln",
                                  "gammaln", "psi", "expit"])
def test_composites_and_aliases_match_torch_with_gradients(case):
    torch = pytest.importorskip("torch")
    x = [0.7, 1.9, 3.5, 2.25]
    jx, tx = _pair(torch, x)
    calls = {
        "ndtr": lambda M, t: M.special.ndtr(t * 3.0 - 6.0),
        "mvlgamma": lambda M, t: M.mvlgamma(t + 1.0, 3),
        "multigammaln": lambda M, t: M.special.multigammaln(t + 1.0, 2),
        "entr": lambda M, t: M.special.entr(t - 0.5),
        "xlog1py": lambda M, t: M.special.xlog1py(t - 0.7, t * 0.5),
        "gammaln": lambda M, t: M.special.gammaln(t),
        "psi": lambda M, t: M.special.psi(t),
        "expit": lambda M, t: M.special.expit(t),
    }
    jy, ty = calls[case](jitgrad, jx), calls[case](torch, tx)
    np.testing.assert_allclose(jy.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-15)
    w = np.linspace(-1.0, 1.0, jy.numel()).reshape(tuple(jy.shape))
    (jy * jitgrad.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy(), rtol=2e-9, atol=1e-14)


def test_composites_gradcheck():
    x = jitgrad.tensor([0.7, 1.9, 3.5], dtype=jitgrad.float64, requires_grad=True)
    for fn in (lambda t: jitgrad.mvlgamma(t + 1.0, 3), lambda t: jitgrad.special.entr(t),
               lambda t: jitgrad.special.xlog1py(t, t * 0.5), lambda t: jitgrad.special.ndtr(t)):
        assert gradcheck(fn, (x,))


def test_edge_values_of_composites_match_torch():
    torch = pytest.importorskip("torch")
    v = [0.0, -1.0, float("nan"), float("inf"), 2.0]
    for name in ("entr", "ndtr"):
        got = getattr(jitgrad.special, name)(jitgrad.tensor(v, dtype=jitgrad.float64))
        want = getattr(torch.special, name)(torch.tensor(v, dtype=torch.float64))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    a = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, -1.0, 0.0]
    b = [float("nan"), -1.0, -2.0, 0.5, -0.5, -1.0, 3.0, 0.0, float("inf")]
    for name in ("xlogy", "xlog1py"):
        jx, jy = jitgrad.tensor(a, requires_grad=True), jitgrad.tensor(b, requires_grad=True)
        tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        got, want = getattr(jitgrad.special, name)(jx, jy), getattr(torch.special, name)(tx, ty)
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        numbers = ~np.isnan(want.detach().numpy())
        np.testing.assert_array_equal(np.signbit(got.detach().numpy()[numbers]),
                                      np.signbit(want.detach().numpy()[numbers]))
        got.sum().backward()
        want.sum().backward()
        # the gradient of x: log(y) even where x is 0 (0 outside the log's domain or at inf)
        finite = np.isfinite(tx.grad.numpy())
        np.testing.assert_array_equal(jx.grad.numpy()[finite], tx.grad.numpy()[finite])
        finite = np.isfinite(ty.grad.numpy())
        np.testing.assert_array_equal(jy.grad.numpy()[finite], ty.grad.numpy()[finite])


@pytest.mark.parametrize("call", [
    lambda M: M.polygamma(-1, M.tensor([1.0])),
    lambda M: M.polygamma(1.5, M.tensor([1.0])),
    lambda M: M.mvlgamma(M.tensor([3.0]), 0),
    lambda M: M.mvlgamma(M.tensor([3.0]), 1.0),
], ids=["negative n", "float n", "mvlgamma p=0", "mvlgamma float p"])
def test_errors_match_torch_and_change_nothing(call):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as t_err:
        call(torch)
    with pytest.raises(type(t_err.value)) as j_err:
        call(jitgrad)
    assert str(j_err.value) == str(t_err.value).split("\n")[0]


def test_methods_and_in_place_forms_match_torch():
    torch = pytest.importorskip("torch")
    x = [0.3, 1.7, 4.2]
    for method, args in [("lgamma", ()), ("digamma", ()), ("polygamma", (2,)),
                         ("erfc", ()), ("i0", ()), ("mvlgamma", (2,))]:
        j, t = jitgrad.tensor(x, dtype=jitgrad.float64), torch.tensor(x, dtype=torch.float64)
        np.testing.assert_allclose(getattr(j, method)(*args).numpy(),
                                   getattr(t, method)(*args).numpy(), rtol=1e-12)
        jr, tr = getattr(j, method + "_")(*args), getattr(t, method + "_")(*args)
        assert jr is j
        np.testing.assert_allclose(j.numpy(), t.numpy(), rtol=1e-12)
        del tr
    j = jitgrad.tensor([0.1, -0.5], dtype=jitgrad.float64)
    j.erfinv_()
    want = torch.tensor([0.1, -0.5], dtype=torch.float64).erfinv()
    np.testing.assert_allclose(j.numpy(), want.numpy(), rtol=1e-14)


def test_special_namespace_matches_torch_special():
    torch = pytest.importorskip("torch")
    x = np.array([[0.2, 0.45], [0.8, 0.65]])
    for name in jitgrad.special.__all__:
        assert hasattr(torch.special, name), name
        j_fn, t_fn = getattr(jitgrad.special, name), getattr(torch.special, name)
        if name in ("softmax", "log_softmax", "logsumexp"):
            got, want = j_fn(jitgrad.tensor(x), 1), t_fn(torch.tensor(x), 1)
        elif name in ("xlogy", "xlog1py"):
            got, want = j_fn(jitgrad.tensor(x), jitgrad.tensor(x.T)), t_fn(torch.tensor(x),
                                                                           torch.tensor(x.T))
        elif name == "polygamma":
            got, want = j_fn(3, jitgrad.tensor(x)), t_fn(3, torch.tensor(x))
        elif name == "multigammaln":
            got, want = j_fn(jitgrad.tensor(x + 1.0), 2), t_fn(torch.tensor(x + 1.0), 2)
        elif name in ("zeta", "gammainc", "gammaincc") or "polynomial" in name:
            # (zeta's exponent above 1, the polynomials' degree 3.5 -> 3)
            got = j_fn(jitgrad.tensor(x + 1.5), jitgrad.tensor(x.T * 5.0))
            want = t_fn(torch.tensor(x + 1.5), torch.tensor(x.T * 5.0))
        else:
            got, want = j_fn(jitgrad.tensor(x)), t_fn(torch.tensor(x))
        # PyTorch's float64 J, Y and Ai are accurate to ~1e-6 only (test_special_extended.py)
        rtol = 1e-4 if name.startswith(("bessel_", "airy")) else 1e-12
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, err_msg=name)


def test_compiled_equals_eager_with_gradients():
    """A Beta log-density (lgamma) with a digamma/polygamma/erfinv term, compiled whole: the
    same values and gradients as eager, twice (the second call runs the cached plan)."""
    def loss(a, b, x):
        log_beta = jitgrad.lgamma(a) + jitgrad.lgamma(b) - jitgrad.lgamma(a + b)
        lp = (a - 1.0) * x.log() + (b - 1.0) * (1.0 - x).log() - log_beta
        extra = jitgrad.digamma(a) * jitgrad.special.i0e(b) + jitgrad.polygamma(1, b)
        return (lp + extra + jitgrad.erfinv(x * 0.5) + jitgrad.special.log_ndtr(-a)).sum()

    compiled = jitgrad.compile(loss)
    rng = np.random.default_rng(0)
    for _ in range(2):
        vals = [rng.uniform(0.5, 3.0, 8), rng.uniform(0.5, 3.0, 8), rng.uniform(0.1, 0.9, 8)]
        results = []
        for fn in (loss, compiled):
            a, b, x = (jitgrad.tensor(v, requires_grad=True) for v in vals)
            out = fn(a, b, x)
            out.backward()
            results.append((out.item(), a.grad.numpy(), b.grad.numpy(), x.grad.numpy()))
        (e_out, *e_grads), (c_out, *c_grads) = results
        assert c_out == e_out
        for e, c in zip(e_grads, c_grads):
            np.testing.assert_array_equal(c, e)
