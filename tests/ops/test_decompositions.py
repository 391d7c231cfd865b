"""Matrix decompositions (jitgrad/ops/decompositions.py) against PyTorch: ``linalg.svd`` /
``svdvals`` / ``torch.svd``, ``linalg.qr`` / ``torch.qr``, ``linalg.eigh`` / ``eigvalsh``,
``pinv``, ``lstsq``, ``matrix_rank``, ``solve_triangular`` and the singular-value matrix
norms: forward values (singular and eigen vectors up to sign), reconstructions, gradients of
sign-invariant losses (and of losses of several outputs at once, with PyTorch's factors
given jitgrad's signs), batches, float32 and float64, errors (PyTorch's messages),
``jitgrad.compile`` (equal to eager, one LAPACK call per decomposition), and numeric
gradient checks in float64.

The registry-driven tests (tests/ops/test_registry_*.py, test_torch_oracle.py) run the ops
on their samples too (jitgrad/ops/samples.py)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

DTYPES = [np.float32, np.float64]
#: (rtol, atol) against PyTorch: its LAPACK (MKL) is not NumPy's (OpenBLAS)
TOL = {np.float32: (2e-4, 2e-5), np.float64: (1e-9, 1e-11)}
SHAPES = [(3, 3), (5, 3), (3, 5), (2, 4, 3), (2, 1, 3, 4)]


def _spectrum(rng, shape, values=(2.9, 2.1, 1.4, 0.8, 0.5)):
    """Matrices with well separated singular values (smooth factors)."""
    lead, (m, n) = tuple(shape[:-2]), shape[-2:]
    k = min(m, n)
    u = np.linalg.qr(rng.standard_normal(lead + (m, m)))[0][..., :k]
    v = np.linalg.qr(rng.standard_normal(lead + (n, n)))[0][..., :k]
    return (u * np.asarray(values[:k])) @ np.swapaxes(v, -1, -2)


def _symmetric(rng, shape, values=(-1.3, 0.4, 1.5, 2.7, 3.9)):
    q = np.linalg.qr(rng.standard_normal(tuple(shape)))[0]
    a = (q * np.asarray(values[:shape[-1]])) @ np.swapaxes(q, -1, -2)
    return (a + np.swapaxes(a, -1, -2)) / 2


def _close(j, t, dtype, scale=1.0):
    rtol, atol = TOL[dtype]
    t = t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)
    j = j.detach().numpy() if hasattr(j, "detach") else np.asarray(j)
    assert j.shape == t.shape, (j.shape, t.shape)
    np.testing.assert_allclose(j, t, rtol=rtol, atol=atol * scale)


def _signs(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    """+-1 making the columns (``axis=-2``) or rows (``axis=-1``) of ``b`` point as ``a``'s."""
    d = np.sign((a * b).sum(axis))
    d[d == 0] = 1
    return np.expand_dims(d, axis)


def _both(a, dtype):
    return (jg.tensor(a.astype(dtype), requires_grad=True),
            torch.tensor(a.astype(dtype), requires_grad=True))


def _eye(k, dtype):
    return np.eye(k, dtype=dtype)


# ----------------------------------------------------------------------------- forward
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full", [False, True])
def test_svd_forward(shape, full, dtype):
    a = _spectrum(np.random.default_rng(0), shape).astype(dtype)
    U, S, Vh = jg.linalg.svd(jg.tensor(a), full_matrices=full)
    tU, tS, tVh = torch.linalg.svd(torch.tensor(a), full_matrices=full)
    m, n = shape[-2:]
    k = min(m, n)
    assert U.shape == tU.shape and Vh.shape == tVh.shape and U.dtype == jg.tensor(a).dtype
    _close(S, tS, dtype)
    # sign gauge: the first k columns of U (rows of Vh) up to sign, flipped together
    u, tu = U.numpy()[..., :k], tU.numpy()[..., :k]
    d = _signs(u, tu, -2)
    _close(u, tu * d, dtype)
    _close(Vh.numpy()[..., :k, :], np.swapaxes(d, -1, -2) * tVh.numpy()[..., :k, :], dtype)
    # A = U diag(S) Vh, orthonormal factors (the full ones included)
    _close((u * S.numpy()[..., None, :]) @ Vh.numpy()[..., :k, :], a, dtype)
    eu = np.swapaxes(U.numpy(), -1, -2) @ U.numpy()
    ev = Vh.numpy() @ np.swapaxes(Vh.numpy(), -1, -2)
    _close(eu, np.broadcast_to(_eye(U.shape[-1], dtype), eu.shape), dtype)
    _close(ev, np.broadcast_to(_eye(Vh.shape[-2], dtype), ev.shape), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_svdvals_and_old_svd(dtype):
    a = _spectrum(np.random.default_rng(1), (2, 5, 3)).astype(dtype)
    _close(jg.linalg.svdvals(jg.tensor(a)), torch.linalg.svdvals(torch.tensor(a)), dtype)
    for some in (True, False):
        r = jg.svd(jg.tensor(a), some=some)
        t = torch.svd(torch.tensor(a), some=some)
        assert [tuple(x.shape) for x in r] == [tuple(x.shape) for x in t]
        _close(r.S, t.S, dtype)
        np.testing.assert_array_equal(r.V.numpy(), np.swapaxes(
            jg.linalg.svd(jg.tensor(a), full_matrices=not some).Vh.numpy(), -1, -2))
    r = jg.tensor(a).svd(compute_uv=False)
    t = torch.tensor(a).svd(compute_uv=False)
    assert [tuple(x.shape) for x in r] == [tuple(x.shape) for x in t]
    assert not r.U.numpy().any() and not r.V.numpy().any()
    _close(r.S, t.S, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_forward(shape, mode, dtype):
    a = _spectrum(np.random.default_rng(2), shape).astype(dtype)
    Q, R = jg.linalg.qr(jg.tensor(a), mode=mode)
    tQ, tR = torch.linalg.qr(torch.tensor(a), mode=mode)
    assert Q.shape == tQ.shape and R.shape == tR.shape
    # LAPACK's Householder signs (both libraries'), up to a sign per row of R
    d = _signs(R.numpy(), tR.numpy(), -1)
    _close(R, tR.numpy() * d, dtype)
    assert np.array_equal(np.triu(R.numpy()), R.numpy())
    if mode != "r":
        _close(Q, tQ.numpy() * np.swapaxes(d, -1, -2)[..., :Q.shape[-1]], dtype)
        _close(Q.numpy() @ R.numpy(), a, dtype)
        e = np.swapaxes(Q.numpy(), -1, -2) @ Q.numpy()
        _close(e, np.broadcast_to(_eye(Q.shape[-1], dtype), e.shape), dtype)


def test_old_qr_and_method():
    a = _spectrum(np.random.default_rng(3), (5, 3))
    for some in (True, False):
        r = jg.tensor(a).qr(some=some)
        t = torch.linalg.qr(torch.tensor(a), mode="reduced" if some else "complete")
        assert type(r).__name__ == "return_qr" and repr(r).startswith("torch.return_types.qr(")
        _close(r.Q.numpy() @ r.R.numpy(), a, np.float64)
        assert r.Q.shape == tuple(t.Q.shape) and r.R.shape == tuple(t.R.shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1), (2, 1, 5, 5)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_forward(shape, uplo, dtype):
    a = _symmetric(np.random.default_rng(4), shape).astype(dtype)
    # the other triangle is never read
    junk = np.triu(np.full(shape, 7.0, dtype), 1) if uplo == "L" else np.tril(
        np.full(shape, 7.0, dtype), -1)
    L, V = jg.linalg.eigh(jg.tensor(np.triu(a) + junk if uplo == "U" else np.tril(a) + junk),
                          UPLO=uplo)
    tL, tV = torch.linalg.eigh(torch.tensor(a), UPLO=uplo)
    _close(L, tL, dtype)
    _close(V, tV.numpy() * _signs(V.numpy(), tV.numpy(), -2), dtype)
    _close((V.numpy() * L.numpy()[..., None, :]) @ np.swapaxes(V.numpy(), -1, -2), a, dtype)
    _close(jg.linalg.eigvalsh(jg.tensor(a), uplo.lower()), tL, dtype)


def test_return_types():
    a = jg.tensor([[3.0, 1.0], [1.0, 2.0]])
    r = jg.linalg.svd(a)
    assert repr(r).startswith("torch.return_types.linalg_svd(\nU=tensor(")
    assert "\nS=tensor(" in repr(r) and "\nVh=tensor(" in repr(r)
    assert r.U is r[0] and r.S is r[1] and r.Vh is r[2]
    U, S, Vh = r
    assert type(pickle.loads(pickle.dumps(r))) is type(r)
    assert jg.linalg.eigh(a)._fields == ("eigenvalues", "eigenvectors")
    assert jg.linalg.qr(a)._fields == ("Q", "R")
    assert jg.linalg.lstsq(a, a)._fields == ("solution", "residuals", "rank",
                                             "singular_values")
    assert jg.svd(a)._fields == ("U", "S", "V")


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 0), (2, 0, 3)])
def test_empty_matrices_like_torch(shape):
    a = np.zeros(shape)
    for full in (True, False):
        for j, t in zip(jg.linalg.svd(jg.tensor(a), full), torch.linalg.svd(torch.tensor(a), full)):
            np.testing.assert_array_equal(j.numpy(), t.numpy())
    for mode in ("reduced", "complete", "r"):
        for j, t in zip(jg.linalg.qr(jg.tensor(a), mode), torch.linalg.qr(torch.tensor(a), mode)):
            np.testing.assert_array_equal(j.numpy(), t.numpy())
    assert jg.linalg.pinv(jg.tensor(a)).shape == tuple(torch.linalg.pinv(torch.tensor(a)).shape)
    np.testing.assert_array_equal(jg.linalg.matrix_rank(jg.tensor(a)).numpy(),
                                  torch.linalg.matrix_rank(torch.tensor(a)).numpy())


def test_out_arguments():
    a = _spectrum(np.random.default_rng(5), (4, 3))
    outs = (jg.empty(0, dtype=jg.float64), jg.empty(0, dtype=jg.float64),
            jg.empty(0, dtype=jg.float64))
    r = jg.linalg.svd(jg.tensor(a), False, out=outs)
    assert r.U is outs[0] and r.S is outs[1] and r.Vh is outs[2]
    np.testing.assert_allclose(outs[1].numpy(), np.linalg.svd(a, compute_uv=False), rtol=1e-14)


# --------------------------------------------------------------------------- gradients
def _grad_pair(fn_j, fn_t, arrays, dtype, scale=1.0):
    js = [jg.tensor(x.astype(dtype), requires_grad=True) for x in arrays]
    ts = [torch.tensor(x.astype(dtype), requires_grad=True) for x in arrays]
    lj, lt = fn_j(*js), fn_t(*ts)
    _close(lj, lt, dtype, scale)
    lj.backward()
    lt.backward()
    for j, t in zip(js, ts):
        assert (j.grad is None) == (t.grad is None)
        if t.grad is not None:
            _close(j.grad, t.grad, dtype, scale)


def _w(shape, seed=7):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full", [False, True])
def test_svd_gradients_of_sign_invariant_losses(shape, full, dtype):
    a = _spectrum(np.random.default_rng(6), shape)
    m, n = shape[-2:]
    k = min(m, n)
    wu, ws, wv = _w(shape[:-2] + (m, k), 1), _w(shape[:-2] + (k,), 2), _w(shape[:-2] + (k, n), 3)

    def loss(M, w):
        def f(x):
            U, S, Vh = M.linalg.svd(x, full_matrices=full)
            U, Vh = U[..., :k], Vh[..., :k, :]
            return ((U.abs() * w(wu)).sum() + (S * w(ws)).sum() + (Vh.abs() * w(wv)).sum()
                    + ((U * S.unsqueeze(-2)) @ Vh * x).sum() + (U @ U.mT).pow(2).sum())
        return f

    _grad_pair(loss(jg, lambda x: jg.tensor(x.astype(dtype))),
               loss(torch, lambda x: torch.tensor(x.astype(dtype))), [a], dtype, scale=10.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
def test_svd_loss_of_several_raw_outputs(shape, dtype):
    """``U.sum() + S.sum() + Vh.sum()`` (and pairs): the sum of the nodes' gradients is
    PyTorch's joint one (its factors given jitgrad's signs)."""
    a = _spectrum(np.random.default_rng(8), shape).astype(dtype)
    for use in ("USV", "US", "SV", "UV", "U", "V"):
        A, T = _both(a, dtype)
        U, S, Vh = jg.linalg.svd(A, full_matrices=False)
        tU, tS, tVh = torch.linalg.svd(T, full_matrices=False)
        d = torch.tensor(_signs(U.detach().numpy(), tU.detach().numpy(), -2))
        tU, tVh = tU * d, d.mT * tVh
        terms = {"U": (U.sum(), tU.sum()), "S": ((S * 3).sum(), (tS * 3).sum()),
                 "V": (Vh[..., 0].sum() + Vh.pow(3).sum(), tVh[..., 0].sum() + tVh.pow(3).sum())}
        sum(terms[c][0] for c in use).backward()
        sum(terms[c][1] for c in use).backward()
        _close(A.grad, T.grad, dtype, scale=10.0)


def test_svdvals_gradient_where_singular_values_repeat_or_vanish():
    """A loss of the singular values alone runs only S's rule (PyTorch's svdvals path),
    finite at repeated and zero singular values, as PyTorch's."""
    cases = [np.eye(3), np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]]), np.zeros((3, 2)),
             np.array([[1.0, 2, 3, 4], [2, 4, 6, 8]])]
    for a in cases:
        for f in (lambda M, x: M.linalg.svdvals(x).sum(),
                  lambda M, x: M.linalg.svd(x)[1].pow(2).sum(),
                  lambda M, x: M.linalg.matrix_norm(x, "nuc"),
                  lambda M, x: M.linalg.matrix_norm(x, 2), lambda M, x: M.linalg.norm(x, -2)):
            _grad_pair(lambda x, f=f: f(jg, x), lambda x, f=f: f(torch, x), [a], np.float64)
            j = jg.tensor(a, requires_grad=True)
            f(jg, j).backward()
            assert np.isfinite(j.grad.numpy()).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_gradients(shape, mode, dtype):
    a = _spectrum(np.random.default_rng(9), shape)
    m, n = shape[-2:]
    if mode == "complete" and m > n:
        pytest.skip("not differentiable (test_errors)")
    Qs = shape[:-2] + ((m, m) if mode == "complete" else (m, min(m, n)))
    Rs = shape[:-2] + (Qs[-1], n)
    wq, wr = _w(Qs, 1), _w(Rs, 2)

    def loss(M):
        def f(x):
            Q, R = M.linalg.qr(x, mode=mode)
            return ((Q.abs() * M.tensor(wq.astype(dtype))).sum()
                    + (R.abs() * M.tensor(wr.astype(dtype))).sum() + (Q @ R * x).sum())
        return f

    _grad_pair(loss(jg), loss(torch), [a], dtype, scale=10.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1)])
def test_eigh_gradients(shape, dtype):
    a = _symmetric(np.random.default_rng(10), shape)
    wl, wv = _w(shape[:-1], 1), _w(shape, 2)

    def loss(M):
        def f(x):
            x = (x + x.mT) / 2
            L, V = M.linalg.eigh(x)
            fx = (V * L.exp().unsqueeze(-2)) @ V.mT  # a matrix function: sign invariant
            return ((L * M.tensor(wl.astype(dtype))).sum()
                    + (V.abs() * M.tensor(wv.astype(dtype))).sum() + (fx * x).sum()
                    + M.linalg.eigvalsh(x).pow(3).sum())
        return f

    _grad_pair(loss(jg), loss(torch), [a], dtype, scale=10.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_pinv_lstsq_matrix_norm_gradients(shape, dtype):
    a = _spectrum(np.random.default_rng(11), shape)
    b = np.random.default_rng(12).standard_normal(shape[:-1] + (2,))
    w = _w(shape[:-2] + shape[-2:][::-1], 3)

    def loss(M):
        def f(x, y):
            sol = M.linalg.lstsq(x, y).solution
            return ((M.linalg.pinv(x) * M.tensor(w.astype(dtype))).sum() + sol.pow(2).sum()
                    + M.linalg.matrix_norm(x, "nuc").sum() + M.linalg.matrix_norm(x, 2).sum()
                    + M.linalg.matrix_norm(x, -2).sum())
        return f

    _grad_pair(loss(jg), loss(torch), [a, b], dtype, scale=10.0)


@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv_forward_tolerances_and_rank(hermitian):
    rng = np.random.default_rng(13)
    a = _spectrum(rng, (2, 4, 4), (3.0, 1.0, 1e-3, 0.0))
    if hermitian:
        a = _symmetric(rng, (2, 4, 4), (-3.0, 1.0, 1e-3, 0.0))
    for kw in ({}, {"atol": 0.01}, {"rtol": 0.1}, {"atol": 0.5, "rtol": 0.0}, {"rtol": 1e-5},
               {"atol": torch.tensor([0.01, 2.0], dtype=torch.float64)}):
        jkw = {k: jg.tensor(v.numpy()) if isinstance(v, torch.Tensor) else v
               for k, v in kw.items()}
        _close(jg.linalg.pinv(jg.tensor(a), hermitian=hermitian, **jkw),
               torch.linalg.pinv(torch.tensor(a), hermitian=hermitian, **kw), np.float64)
        np.testing.assert_array_equal(
            jg.linalg.matrix_rank(jg.tensor(a), hermitian=hermitian, **jkw).numpy(),
            torch.linalg.matrix_rank(torch.tensor(a), hermitian=hermitian, **kw).numpy())
    _close(jg.linalg.pinv(jg.tensor(a), 0.1, hermitian),
           torch.linalg.pinv(torch.tensor(a), 0.1, hermitian), np.float64)
    assert jg.linalg.matrix_rank(jg.tensor(a), 0.5).tolist() == \
        torch.linalg.matrix_rank(torch.tensor(a), 0.5).tolist()
    assert jg.linalg.matrix_rank(jg.tensor(a)).dtype == jg.int64
    _close(jg.tensor(a).pinverse(), torch.tensor(a).pinverse(), np.float64)


def test_pinv_gradient_of_a_rank_deficient_matrix():
    """PyTorch's pinv_backward (its own rule): exact where the rank stays put."""
    a = _spectrum(np.random.default_rng(14), (4, 3), (2.0, 1.0, 0.0))
    w = _w((3, 4))
    _grad_pair(lambda x: (jg.linalg.pinv(x, atol=0.1) * jg.tensor(w)).sum(),
               lambda x: (torch.linalg.pinv(x, atol=0.1) * torch.tensor(w)).sum(),
               [a], np.float64)
    assert gradcheck(lambda x: jg.linalg.pinv(x, atol=0.1),
                     (jg.tensor(a, requires_grad=True),))


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 5, 3), (2, 5, 2)),
                                    ((5, 3), (5,)), ((2, 4, 4), (2, 4))])
def test_lstsq_like_torch(shapes, driver):
    rng = np.random.default_rng(15)
    (sa, sb) = shapes
    a, b = _spectrum(rng, sa), rng.standard_normal(sb)
    A, TA = _both(a, np.float64)
    B, TB = _both(b, np.float64)
    r, t = jg.linalg.lstsq(A, B, driver=driver), torch.linalg.lstsq(TA, TB, driver=driver)
    for x, y in zip(r, t):
        assert tuple(x.shape) == tuple(y.shape) and str(x.dtype)[8:] == str(y.dtype)[6:]
        _close(x, y, np.float64)
    (r.solution.sum() + r.residuals.sum()).backward()
    (t.solution.sum() + t.residuals.sum()).backward()
    _close(A.grad, TA.grad, np.float64)
    _close(B.grad, TB.grad, np.float64)


def test_lstsq_rank_deficient_is_the_minimum_norm_solution():
    rng = np.random.default_rng(16)
    a = _spectrum(rng, (5, 4), (2.0, 1.0, 0.5, 0.0))
    b = rng.standard_normal((5, 2))
    for driver in ("gelsy", "gelsd"):
        r = jg.linalg.lstsq(jg.tensor(a), jg.tensor(b), driver=driver)
        t = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        _close(r.solution, t.solution, np.float64, scale=100.0)
        assert r.rank.tolist() == t.rank.tolist() == 3


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(upper, left, unit, dtype):
    rng = np.random.default_rng(17)
    a = rng.standard_normal((2, 1, 4, 4)) * 0.5 + 3 * np.eye(4)
    b = rng.standard_normal((3, 4, 2) if left else (3, 2, 4))
    w = _w((2, 3, 4, 2) if left else (2, 3, 2, 4))

    def loss(M):
        def f(x, y):
            r = M.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit)
            return (r * M.tensor(w.astype(dtype))).sum()
        return f

    _grad_pair(loss(jg), loss(torch), [a, b], dtype)


def test_solve_triangular_zero_diagonal_and_dtypes_like_torch():
    z = np.zeros((2, 2), np.float32)
    for upper in (True, False):
        j = jg.linalg.solve_triangular(jg.tensor(z), jg.ones(2, 3), upper=upper)
        t = torch.linalg.solve_triangular(torch.tensor(z), torch.ones(2, 3), upper=upper)
        np.testing.assert_array_equal(j.numpy(), t.numpy())  # inf, then nan
    j = jg.linalg.solve_triangular(jg.eye(2, dtype=jg.float64), jg.ones(2, 3), upper=False)
    t = torch.linalg.solve_triangular(torch.eye(2, dtype=torch.float64), torch.ones(2, 3),
                                      upper=False)
    assert str(j.dtype)[8:] == str(t.dtype)[6:] == "float64"


def test_matrix_norm_singular_value_orders_like_torch():
    a = np.random.default_rng(18).standard_normal((2, 3, 4))
    for ord_ in ("nuc", 2, -2):
        for dim, keep in (((-2, -1), False), ((0, 2), False), ((2, 0), True), ((1, 0), True)):
            j = jg.linalg.matrix_norm(jg.tensor(a, requires_grad=True), ord_, dim, keep)
            t = torch.linalg.matrix_norm(torch.tensor(a, requires_grad=True), ord_, dim, keep)
            _close(j, t, np.float64)
            assert type(j.grad_fn).__name__ == type(t.grad_fn).__name__
        _close(jg.linalg.norm(jg.tensor(a[0]), ord_), torch.linalg.norm(torch.tensor(a[0]), ord_),
               np.float64)
    _close(jg.norm(jg.tensor(a), p="nuc", dim=(0, 2), keepdim=True),
           torch.norm(torch.tensor(a), p="nuc", dim=(0, 2), keepdim=True), np.float64)
    _close(jg.tensor(a[1]).norm(p="nuc"), torch.tensor(a[1]).norm(p="nuc"), np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [0.05, 0.6, 2.0, 5.0])
def test_matrix_exp(scale, dtype):
    a = np.random.default_rng(30).standard_normal((2, 4, 4)) * scale / 2
    w = _w((2, 4, 4))
    _grad_pair(lambda x: (jg.linalg.matrix_exp(x) * jg.tensor(w.astype(dtype))).sum(),
               lambda x: (torch.linalg.matrix_exp(x) * torch.tensor(w.astype(dtype))).sum(),
               [a], dtype, scale=10.0 * np.exp(scale))
    x = jg.tensor(a.astype(dtype))
    _close(jg.matrix_exp(x), torch.linalg.matrix_exp(torch.tensor(a.astype(dtype))), dtype,
           scale=np.exp(scale))
    _close(x.matrix_exp() @ (-x).matrix_exp(), np.broadcast_to(_eye(4, dtype), a.shape), dtype,
           scale=np.exp(scale))
    d = np.diag([0.5, -1.0, 2.0])
    np.testing.assert_allclose(jg.linalg.matrix_exp(jg.tensor(d)).numpy(), np.diag(np.exp(
        [0.5, -1.0, 2.0])), rtol=1e-14, atol=1e-15)


def test_cholesky_ex_and_inv_ex_like_torch():
    rng = np.random.default_rng(31)
    m = rng.standard_normal((2, 3, 3))
    pd = m @ np.swapaxes(m, -1, -2) + 3 * np.eye(3)
    bad = np.stack([pd[0], [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                    -np.eye(3), np.full((3, 3), np.nan)])
    singular = np.stack([pd[0], [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 1.0]],
                         np.zeros((3, 3)), np.ones((3, 3))])
    for upper in (False, True):
        j, t = jg.linalg.cholesky_ex(jg.tensor(pd), upper=upper), torch.linalg.cholesky_ex(
            torch.tensor(pd), upper=upper)
        _close(j.L, t.L, np.float64)
        assert j.info.tolist() == t.info.tolist() == [0, 0] and j.info.dtype == jg.int32
        assert jg.linalg.cholesky_ex(jg.tensor(bad), upper=upper).info.tolist() == \
            torch.linalg.cholesky_ex(torch.tensor(bad), upper=upper).info.tolist()
    j, t = jg.linalg.inv_ex(jg.tensor(pd)), torch.linalg.inv_ex(torch.tensor(pd))
    _close(j.inverse, t.inverse, np.float64)
    assert j.info.tolist() == t.info.tolist() == [0, 0]
    assert jg.linalg.inv_ex(jg.tensor(singular)).info.tolist() == \
        torch.linalg.inv_ex(torch.tensor(singular)).info.tolist()
    w = _w((2, 3, 3))
    for upper in (False, True):
        _grad_pair(
            lambda x, u=upper: (jg.linalg.cholesky_ex((x + x.mT) / 2, upper=u).L
                                * jg.tensor(w)).sum()
            + (jg.linalg.inv_ex(x).inverse * jg.tensor(w)).sum(),
            lambda x, u=upper: (torch.linalg.cholesky_ex((x + x.mT) / 2, upper=u).L
                                * torch.tensor(w)).sum()
            + (torch.linalg.inv_ex(x).inverse * torch.tensor(w)).sum(), [pd], np.float64)


# ------------------------------------------------------------------ node names, compile
def test_node_names_like_torch():
    a = _spectrum(np.random.default_rng(19), (4, 3))
    exprs = ["M.linalg.svd(x)[0]", "M.linalg.svd(x)[1]", "M.linalg.svd(x)[2]",
             "M.linalg.svdvals(x)", "M.svd(x)[0]", "M.svd(x)[2]", "M.linalg.qr(x)[0]",
             "M.linalg.qr(x, mode='r')[1]", "M.linalg.qr(x, mode='r')[0]",
             "M.linalg.eigh(x.mT @ x)[1]", "M.linalg.eigvalsh(x.mT @ x)", "M.linalg.pinv(x)",
             "M.pinverse(x)", "M.linalg.solve_triangular(x[:3], x, upper=True, left=False)",
             "M.linalg.matrix_exp(x[:3])", "M.matrix_exp(x[:3])",
             "M.linalg.cholesky_ex(x.mT @ x, upper=True)[0]", "M.linalg.inv_ex(x[:3])[0]",
             "M.linalg.inv_ex(x[:3])[1]"]
    for e in exprs:
        names = [type(eval(e, {"M": M, "x": M.tensor(a, requires_grad=True)}).grad_fn).__name__
                 for M in (jg, torch)]
        assert names[0] == names[1], (e, names)


def test_compiled_equals_eager_with_one_lapack_call_per_decomposition(monkeypatch):
    rng = np.random.default_rng(20)
    a = _spectrum(rng, (2, 5, 3))

    def f(x):
        U, S, Vh = jg.linalg.svd(x, full_matrices=False)
        Q, R = jg.linalg.qr(x)
        L, V = jg.linalg.eigh(x.mT @ x)
        loss = (U.abs().sum() + S.pow(2).sum() + (Vh * Vh[..., :1, :]).sum() + R.abs().sum()
                + (Q @ Q.mT).sum() + L.sum() + V.abs().sum() + jg.linalg.pinv(x).sum()
                + jg.linalg.solve_triangular(R, Q.mT, upper=True).abs().sum()
                + jg.linalg.svdvals(x).sum() + jg.linalg.matrix_norm(x, "nuc").sum()
                + jg.linalg.matrix_exp(x.mT @ x * 0.1).sum()
                + jg.linalg.cholesky_ex(x.mT @ x).L.sum() + jg.linalg.inv_ex(x.mT @ x)[0].sum())
        loss.backward()
        return loss, U, S

    x = jg.tensor(a, requires_grad=True)
    want = [t.detach().numpy() for t in f(x)]
    want_grad = x.grad.numpy().copy()
    cf = jg.compile(f, fullgraph=True)
    x.grad = None
    got = cf(x)  # traces (runs eagerly)
    calls = []
    real_svd = np.linalg.svd
    monkeypatch.setattr(np.linalg, "svd", lambda *a, **k: calls.append(1) or real_svd(*a, **k))
    for _ in range(2):  # the plan
        x.grad = None
        calls.clear()
        got = cf(x)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.detach().numpy(), w, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), want_grad, rtol=1e-12, atol=1e-12)
        # svd, pinv's, svdvals's, matrix_norm's svdvals: at most once each (the compiler
        # may merge the equal svd_factors equations)
        assert 2 <= len(calls) <= 4

    # one decomposition whose three factors all reach the loss: one LAPACK call
    def g(x):
        U, S, Vh = jg.linalg.svd(x)
        loss = U.abs().sum() + S.sum() + Vh.abs().sum()
        loss.backward()
        return loss

    cg = jg.compile(g, fullgraph=True)
    with monkeypatch.context() as m:
        m.setattr(np.linalg, "svd", real_svd)
        cg(x)  # traces
    for _ in range(2):
        calls.clear()
        cg(x)
        assert len(calls) == 1


@pytest.mark.filterwarnings("ignore:jitgrad.compile. running f eagerly")
def test_check_errors_under_compile_runs_eagerly():
    """``check_errors`` reads ``info``: a graph break, never a wrong result."""
    def f(x):
        L, info = jg.linalg.cholesky_ex(x, check_errors=True)
        return L * 2

    cf = jg.compile(f)
    good = jg.tensor(np.eye(3) * 4.0)
    for _ in range(3):
        np.testing.assert_array_equal(cf(good).numpy(), np.eye(3) * 4.0)
    with pytest.raises(jg.linalg.LinAlgError, match="leading minor of order 1"):
        cf(-good)
    with pytest.raises(Exception, match="needs the value of a tensor"):
        jg.compile(f, fullgraph=True)(good)


def test_docstring_examples():
    import doctest

    from jitgrad.ops import decompositions

    assert doctest.testmod(decompositions).failed == 0


def test_eager_computes_each_decomposition_once(monkeypatch):
    x = jg.tensor(_spectrum(np.random.default_rng(21), (4, 3)), requires_grad=True)
    calls = []
    real = {n: getattr(np.linalg, n) for n in ("svd", "qr", "eigh")}
    for n, fn in real.items():
        monkeypatch.setattr(np.linalg, n, lambda *a, _n=n, _f=fn, **k: calls.append(_n)
                            or _f(*a, **k))
    U, S, Vh = jg.linalg.svd(x)
    Q, R = jg.linalg.qr(x)
    L, V = jg.linalg.eigh(x.mT @ x)
    (U.abs().sum() + S.sum() + Vh.abs().sum() + Q.abs().sum() + R.abs().sum() + L.sum()
     + V.abs().sum()).backward()
    assert sorted(calls) == ["eigh", "qr", "svd"]


def test_factors_are_copies():
    """An output written in place does not change what the other outputs' backward reads."""
    a = _spectrum(np.random.default_rng(22), (4, 3))
    x = jg.tensor(a, requires_grad=True)
    U, S, Vh = jg.linalg.svd(x, full_matrices=False)
    with jg.no_grad():
        U.mul_(0.0)
        Vh.mul_(0.0)
    S.sum().backward()
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(x.grad.numpy(), u @ vh, rtol=1e-12, atol=1e-12)


def test_double_backward_like_torch():
    a = _spectrum(np.random.default_rng(23), (4, 3))

    def f(M, x):
        U, S, Vh = M.linalg.svd(x, full_matrices=False)
        Q, R = M.linalg.qr(x)
        L, V = M.linalg.eigh(x.mT @ x)
        return (S.pow(3).sum() + (U * S.unsqueeze(-2)).abs().sum() + R.abs().pow(2).sum()
                + (V.abs() * L).sum())

    grads = []
    for M in (jg, torch):
        x = M.tensor(a, requires_grad=True)
        (g,) = M.autograd.grad(f(M, x), x, create_graph=True)
        (gg,) = M.autograd.grad((g * g).sum(), x)
        grads.append((g.detach().numpy(), gg.numpy()))
    for j, t in zip(*grads):
        np.testing.assert_allclose(j, t, rtol=1e-9, atol=1e-10)


# ----------------------------------------------------------------------- gradcheck
GRADCHECK = {
    "svd": lambda x: sum(t.sum() for t in jg.linalg.svd(x, full_matrices=False)),
    "svd-US": lambda x: (lambda r: (r.U * r.S.unsqueeze(-2)).sum() + r.S.sum())(
        jg.linalg.svd(x, full_matrices=False)),
    "svd-full": lambda x: (lambda r: r.U[..., :, :min(x.shape[-2:])].sum() + r.S.sum()
                           + r.Vh[..., :min(x.shape[-2:]), :].sum())(jg.linalg.svd(x)),
    "svdvals": lambda x: jg.linalg.svdvals(x),
    "qr": lambda x: sum(t.sum() for t in jg.linalg.qr(x)),
    "qr-Q": lambda x: jg.linalg.qr(x).Q,
    "eigh": lambda x: (lambda r: r.eigenvalues.sum() * 2 + r.eigenvectors.sum())(
        jg.linalg.eigh((x + x.mT) / 2)),
    "eigvalsh": lambda x: jg.linalg.eigvalsh(x + x.mT, "U"),
    "pinv": lambda x: jg.linalg.pinv(x),
    "nuc": lambda x: jg.linalg.matrix_norm(x, "nuc"),
    "norm2": lambda x: jg.linalg.matrix_norm(x, 2) + jg.linalg.matrix_norm(x, -2),
    "lstsq": lambda x: jg.linalg.lstsq(x, x[..., :2] * 2 + 1).solution,
    "matrix_exp": lambda x: jg.linalg.matrix_exp(x[..., :2, :2] * 2),
    "cholesky_ex": lambda x: jg.linalg.cholesky_ex(x.mT @ x + jg.eye(x.shape[-1])).L,
    "inv_ex": lambda x: jg.linalg.inv_ex(x.mT @ x + jg.eye(x.shape[-1])).inverse,
}


@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("name", sorted(GRADCHECK))
def test_gradcheck_float64(name, shape):
    if name.startswith("eig") and shape[-1] != shape[-2]:
        pytest.skip("square matrices only")
    x = jg.tensor(_spectrum(np.random.default_rng(24), shape), requires_grad=True)
    assert gradcheck(GRADCHECK[name], (x,))


@pytest.mark.parametrize("name", ["svd", "svd-US", "qr", "eigh", "pinv", "matrix_exp",
                                  "cholesky_ex"])
def test_gradgradcheck_float64(name):
    x = jg.tensor(_spectrum(np.random.default_rng(25), (4, 3) if name != "eigh" else (3, 3)),
                  requires_grad=True)
    assert gradgradcheck(GRADCHECK[name], (x,))


@pytest.mark.parametrize("upper,left,unit", [(True, True, False), (False, False, True),
                                             (False, True, False)])
def test_gradcheck_solve_triangular(upper, left, unit):
    rng = np.random.default_rng(26)
    a = jg.tensor(rng.standard_normal((2, 3, 3)) * 0.5 + 3 * np.eye(3), requires_grad=True)
    b = jg.tensor(rng.standard_normal((3, 2) if left else (2, 3)), requires_grad=True)
    f = lambda x, y: jg.linalg.solve_triangular(x, y, upper=upper, left=left,  # noqa: E731
                                                unitriangular=unit)
    assert gradcheck(f, (a, b))
    assert gradgradcheck(f, (a, b))


# --------------------------------------------------------------------------- errors
_ERRORS = [
    "M.linalg.svd(I64)", "M.linalg.svd(V)", "M.linalg.svdvals(I64)", "M.linalg.svdvals(V)",
    "M.svd(V)", "M.svd(I64)", "M.linalg.svd(F16)", "M.linalg.svd(NAN)", "M.linalg.svdvals(NAN)",
    "M.linalg.svd(A, driver='gesvd')", "M.linalg.svdvals(A, driver='gesvd')",
    "M.linalg.qr(I64)", "M.linalg.qr(V)", "M.linalg.qr(A, mode='x')", "M.linalg.qr(F16)",
    "M.linalg.eigh(I64)", "M.linalg.eigh(V)", "M.linalg.eigh(A)", "M.linalg.eigh(SQ, UPLO='X')",
    "M.linalg.eigvalsh(A)", "M.linalg.eigvalsh(SQ, UPLO='X')", "M.linalg.eigh(F16)",
    "M.linalg.pinv(I64)", "M.linalg.pinv(V)", "M.linalg.pinv(A, hermitian=True)",
    "M.linalg.matrix_rank(V)", "M.linalg.matrix_rank(I64)",
    "M.linalg.matrix_rank(A, hermitian=True)",
    "M.linalg.lstsq(V, A)", "M.linalg.lstsq(A, A.double())", "M.linalg.lstsq(A, A[:2])",
    "M.linalg.lstsq(A, A[:, 0][:2])", "M.linalg.lstsq(A, A, driver='foo')",
    "M.linalg.lstsq(I64, I64)", "M.linalg.lstsq(A, A.expand(2, 4, 3))",
    "M.linalg.solve_triangular(A, A, upper=True)", "M.linalg.solve_triangular(SQ, V, upper=True)",
    "M.linalg.solve_triangular(V, SQ, upper=True)",
    "M.linalg.solve_triangular(SQ, A, upper=True)",
    "M.linalg.solve_triangular(SQ, A.mT, upper=True, left=False)",
    "M.linalg.solve_triangular(I64, I64, upper=True)",
    "M.linalg.matrix_norm(I64, 'nuc')", "M.linalg.matrix_norm(A, 3)",
    "M.linalg.matrix_exp(V)", "M.linalg.matrix_exp(A)", "M.linalg.matrix_exp(I64)",
    "M.linalg.cholesky_ex(F16)", "M.linalg.cholesky_ex(A)", "M.linalg.cholesky_ex(I64)",
    "M.linalg.cholesky_ex(V)", "M.linalg.inv_ex(F16)", "M.linalg.inv_ex(V)",
    "M.linalg.inv_ex(I64)", "M.linalg.inv_ex(A)",
    "M.linalg.cholesky(-SQ)", "M.linalg.cholesky(M.stack([SQ, SQ - 2 * M.ones(3, 3)]))",
    "M.linalg.cholesky(NAN)", "M.linalg.cholesky_ex(-SQ, check_errors=True)",
    "M.linalg.cholesky_ex(M.stack([SQ, SQ - 2 * M.ones(3, 3)]), check_errors=True)",
    "M.linalg.inv_ex(SQ * 0, check_errors=True)",
    "M.linalg.inv_ex(M.stack([SQ, M.ones(3, 3)]).reshape(2, 1, 3, 3), check_errors=True)",
]


def _error(M, expr):
    ns = {"M": M, "A": M.ones(4, 3), "SQ": M.eye(3), "V": M.ones(3),
          "I64": M.ones(2, 2, dtype=M.int64), "F16": M.ones(2, 2, dtype=M.float16),
          "NAN": M.full((2, 2), float("nan"))}
    with pytest.raises(Exception) as info:
        eval(expr, ns)
    return info.value


@pytest.mark.parametrize("expr", _ERRORS)
def test_errors_like_torch(expr):
    t, j = _error(torch, expr), _error(jg, expr)
    assert isinstance(j, NotImplementedError) == isinstance(t, NotImplementedError), (j, t)
    assert isinstance(j, RuntimeError) == isinstance(t, RuntimeError), (j, t)
    assert str(j) == str(t)


def test_linalg_error_is_a_runtime_error():
    with pytest.raises(jg.linalg.LinAlgError, match="contained non-finite values"):
        jg.linalg.svd(jg.full((2, 3), float("inf")) * 0)
    assert issubclass(jg.linalg.LinAlgError, RuntimeError)


@pytest.mark.parametrize("expr", ["M.linalg.qr(x, mode='r')[1]",
                                  "M.linalg.qr(x, mode='complete')[0]",
                                  "M.linalg.qr(x, mode='complete')[1]"])
def test_backward_errors_like_torch(expr):
    msgs = []
    for M in (jg, torch):
        y = eval(expr, {"M": M, "x": M.ones(4, 3, dtype=M.float64, requires_grad=True)
                        + M.eye(4, 3, dtype=M.float64)})
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]
