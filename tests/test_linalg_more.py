"""The LU factorisation and the other ``torch.linalg`` functions added with it
(jitgrad/ops/lu.py, householder.py, linalg_composites.py): ``lu_factor`` / ``lu_factor_ex`` /
``lu`` / ``lu_unpack`` / ``lu_solve`` / ``solve_ex``, ``cond``, ``vander``, ``diagonal``,
``tensorinv``, ``tensorsolve``, ``householder_product`` / ``orgqr`` / ``ormqr`` / ``geqrf``,
the deprecated ``torch.lu`` / ``torch.lu_solve``, and PyTorch's ``LinAlgError`` for singular
``inv`` / ``solve``.

Against PyTorch where it is installed (values, pivots, ``info``, gradients, errors and their
messages); numeric gradient checks in float64 (batches too, second order for the LU) and the
singular-matrix errors run without it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck

#: (rtol, atol) against PyTorch (its LAPACK is MKL, blocked; jitgrad's LU is unblocked)
TOL = {np.float32: (2e-4, 2e-5), np.float64: (1e-10, 1e-12)}

#: exactly singular matrices (their LU meets an exact zero pivot): batches, zeros, a column
#: of zeros first, a first zero pivot in column 2 and in column 3
SINGULAR = [
    np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [7.0, 8.0, 10.0]]),
    np.zeros((3, 3)),
    np.array([[0.0, 1.0], [0.0, 1.0]]),
    np.array([[0.0, 0.0], [1.0, 1.0]]),
    np.array([[2.0, 1.0, 1.0], [4.0, 2.0, 2.0], [1.0, 3.0, 5.0]]),
    np.stack([np.eye(3), [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [7.0, 8.0, 10.0]]]),
]


def _torch():
    return pytest.importorskip("torch")


def _close(j, t, dtype=np.float64):
    rtol, atol = TOL[dtype]
    j = j.detach().numpy() if hasattr(j, "detach") else np.asarray(j)
    t = t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)
    assert j.shape == t.shape, (j.shape, t.shape)
    np.testing.assert_allclose(j, t, rtol=rtol, atol=atol)


def _well(rng, shape):
    """Random matrices, their entries well apart (no near ties among the pivots)."""
    return rng.standard_normal(shape)


# ------------------------------------------------------------------ LU: forward
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 4), (2, 1, 3, 5), (6, 6)])
def test_lu_factor_and_lu_like_torch(shape, dtype):
    torch = _torch()
    a = _well(np.random.default_rng(0), shape).astype(dtype)
    r, t = jg.linalg.lu_factor_ex(jg.tensor(a)), torch.linalg.lu_factor_ex(torch.tensor(a))
    assert r.pivots.dtype == jg.int32 and r.info.dtype == jg.int32
    assert r.pivots.tolist() == t.pivots.tolist() and r.info.tolist() == t.info.tolist()
    _close(r.LU, t.LU, dtype)
    LU, piv = jg.linalg.lu_factor(jg.tensor(a))
    assert np.array_equal(LU.numpy(), r.LU.numpy()) and piv.tolist() == r.pivots.tolist()
    (P, L, U), (tP, tL, tU) = jg.linalg.lu(jg.tensor(a)), torch.linalg.lu(torch.tensor(a))
    assert np.array_equal(P.numpy(), tP.numpy())
    _close(L, tL, dtype)
    _close(U, tU, dtype)
    _close(P @ L @ U, a, dtype)
    P2, L2, U2 = jg.lu_unpack(LU, piv)
    assert all(np.array_equal(x.numpy(), y.numpy()) for x, y in ((P2, P), (L2, L), (U2, U)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("i", range(len(SINGULAR)))
def test_lu_of_singular_matrices_like_torch(i, dtype):
    torch = _torch()
    a = SINGULAR[i].astype(dtype)
    r, t = jg.linalg.lu_factor_ex(jg.tensor(a)), torch.linalg.lu_factor_ex(torch.tensor(a))
    assert r.info.tolist() == t.info.tolist() and r.pivots.tolist() == t.pivots.tolist()
    _close(r.LU, t.LU, dtype)
    assert jg.linalg.lu(jg.tensor(a)).U.shape == a.shape  # (no error)
    assert jg.linalg.inv_ex(jg.tensor(a)).info.tolist() == torch.linalg.inv_ex(
        torch.tensor(a)).info.tolist()


def test_lu_factor_of_a_rounded_singular_matrix_is_like_torch():
    """float32 [[1..9]]: MKL's fused multiply-adds leave a tiny pivot, not zero (no error).
    MKL takes that path where the CPU has it in its dispatch (Intel); on an AMD EPYC the
    same wheel rounds each multiply and add and finds the zero pivot (info 3): jitgrad's
    factor is then checked against the fused rounding alone."""
    a = np.arange(1.0, 10.0, dtype=np.float32).reshape(3, 3)
    r = jg.linalg.lu_factor_ex(jg.tensor(a))
    assert r.info.item() == 0
    # the fused rounding by hand: pivot row 3, each update in float64 rounded once
    w = a.copy()
    w[[0, 2]] = w[[2, 0]]
    w[1:, 0] /= w[0, 0]
    w[1:, 1:] = (w[1:, 1:].astype(np.float64)
                 - w[1:, 0, None].astype(np.float64) * w[0, None, 1:]).astype(np.float32)
    if abs(w[2, 1]) > abs(w[1, 1]):
        w[[1, 2]] = w[[2, 1]]
    w[2, 1] /= w[1, 1]
    w[2, 2] = np.float32(np.float64(w[2, 2]) - np.float64(w[2, 1]) * np.float64(w[1, 2]))
    assert np.array_equal(r.LU.numpy(), w)
    torch = _torch()
    t = torch.linalg.lu_factor_ex(torch.tensor(a))
    if t.info.item() != 0:
        pytest.skip("this CPU's MKL rounds each multiply and add (no fused path): info "
                    f"{t.info.item()}")
    assert np.array_equal(r.LU.numpy(), t.LU.numpy())


def test_empty_lu_like_torch():
    torch = _torch()
    for shape in [(2, 0, 0), (0, 3, 3), (3, 0)]:
        r = jg.linalg.lu_factor_ex(jg.ones(*shape))
        t = torch.linalg.lu_factor_ex(torch.ones(*shape))
        assert [tuple(x.shape) for x in r] == [tuple(x.shape) for x in t]


def test_lu_unpack_flags_and_return_types():
    a = jg.tensor(np.random.default_rng(1).standard_normal((3, 3)))
    LU, piv = jg.linalg.lu_factor(a)
    P, L, U = jg.lu_unpack(LU, piv, unpack_data=False)
    assert P.shape == (3, 3) and L.shape == (0,) and U.shape == (0,)
    P, L, U = jg.lu_unpack(LU, piv, unpack_pivots=False)
    assert P.shape == (0,) and L.shape == (3, 3)
    assert repr(jg.linalg.lu_factor_ex(a)).startswith("torch.return_types.linalg_lu_factor_ex(")
    assert jg.linalg.lu(a)._fields == ("P", "L", "U")
    assert jg.lu_unpack(LU, piv)._fields == ("P", "L", "U")
    assert jg.linalg.lu_factor(a)._fields == ("LU", "pivots")
    assert jg.linalg.solve_ex(a, a)._fields == ("result", "info")
    assert jg.geqrf(a)._fields == ("a", "tau")


# ---------------------------------------------------------------- lu_solve, solve_ex
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("shapes", [((4, 4), (4, 2)), ((2, 3, 3), (3, 1)),
                                    ((2, 3, 3), (4, 2, 3, 2))])
def test_lu_solve_like_torch(shapes, left, adjoint):
    torch = _torch()
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    b = b if left else np.ascontiguousarray(np.swapaxes(b, -1, -2))
    x = jg.linalg.lu_solve(*jg.linalg.lu_factor(jg.tensor(a)), jg.tensor(b), left=left,
                           adjoint=adjoint)
    t = torch.linalg.lu_solve(*torch.linalg.lu_factor(torch.tensor(a)), torch.tensor(b),
                              left=left, adjoint=adjoint)
    _close(x, t)


def test_solve_ex_like_torch():
    torch = _torch()
    rng = np.random.default_rng(3)
    a = np.stack([rng.standard_normal((3, 3)), SINGULAR[0]])
    for A, B in [(a[:1], rng.standard_normal((3, 2))), (a[0], rng.standard_normal(3)),
                 (a, rng.standard_normal((3, 1))), (a[:, None], rng.standard_normal((2, 4, 3, 1)))]:
        r, t = jg.linalg.solve_ex(jg.tensor(A), jg.tensor(B)), torch.linalg.solve_ex(
            torch.tensor(A), torch.tensor(B))
        assert r.info.tolist() == t.info.tolist() and r.info.dtype == jg.int32
        assert r.result.shape == t.result.shape
        ok = t.info.reshape(-1) == 0
        rj = r.result.numpy().reshape((t.info.numel(), -1) if A.ndim > 2 else (1, -1))
        rt = t.result.numpy().reshape(rj.shape)
        np.testing.assert_allclose(rj[ok.numpy()], rt[ok.numpy()], rtol=1e-10, atol=1e-12)
        assert not np.isfinite(rj[~ok.numpy()]).all(axis=-1).any()  # singular: inf / NaN
    left = jg.linalg.solve_ex(jg.tensor(a), jg.tensor(np.ones((2, 4, 3))), left=False)
    tleft = torch.linalg.solve_ex(torch.tensor(a), torch.ones(2, 4, 3, dtype=torch.float64),
                                  left=False)
    assert left.info.tolist() == tleft.info.tolist()
    _close(left.result[0], tleft.result[0])


# ------------------------------------------------------------- composites: forward
@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, math.inf, -math.inf, "fro", "nuc", 1.0])
def test_cond_like_torch(p):
    torch = _torch()
    rng = np.random.default_rng(4)
    for a in [rng.standard_normal((2, 4, 4)), SINGULAR[5], np.zeros((2, 2)),
              np.ones((2, 0, 0)), rng.standard_normal((3, 5))]:
        if a.shape[-1] != a.shape[-2] and p not in (None, 2, -2):
            continue
        j, t = jg.linalg.cond(jg.tensor(a), p), torch.linalg.cond(torch.tensor(a), p)
        assert j.dtype == jg.float64 and j.shape == t.shape
        if a is SINGULAR[5] and p in (None, 2, -2, "nuc"):  # through a rounded-off value
            big = j[1].item() if p != -2 else 1 / j[1].item()
            assert big > 1e14 and t[1].item() > 1e14 or p == -2
            j, t = j[:1], t[:1]
        finite = np.isfinite(t.numpy())
        assert np.array_equal(np.isfinite(j.numpy()), finite), (j, t)
        assert np.array_equal(np.isnan(j.numpy()), np.isnan(t.numpy()))
        np.testing.assert_allclose(j.numpy()[finite], t.numpy()[finite], rtol=1e-6)


def test_vander_diagonal_tensorinv_tensorsolve_like_torch():
    torch = _torch()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3))
    _close(jg.linalg.vander(jg.tensor(x)), torch.linalg.vander(torch.tensor(x)))
    _close(jg.linalg.vander(jg.tensor(x), N=5), torch.linalg.vander(torch.tensor(x), N=5))
    for v in ([1, 2, 3], np.array([1, 2], dtype=np.int32)):
        j, t = jg.linalg.vander(jg.tensor(v)), torch.linalg.vander(torch.tensor(v))
        assert j.dtype == jg.int64 and j.tolist() == t.tolist()
    m = rng.standard_normal((2, 3, 4))
    for kw in ({}, {"offset": 1}, {"offset": -1, "dim1": 0, "dim2": 2}):
        _close(jg.linalg.diagonal(jg.tensor(m), **kw), torch.linalg.diagonal(torch.tensor(m), **kw))
    a = rng.standard_normal((4, 6, 8, 3))
    _close(jg.linalg.tensorinv(jg.tensor(a)), torch.linalg.tensorinv(torch.tensor(a)))
    a = rng.standard_normal((2, 3, 6))
    _close(jg.linalg.tensorinv(jg.tensor(a), ind=2), torch.linalg.tensorinv(torch.tensor(a)))
    b = rng.standard_normal((2, 3))
    _close(jg.linalg.tensorsolve(jg.tensor(a), jg.tensor(b)),
           torch.linalg.tensorsolve(torch.tensor(a), torch.tensor(b)))
    a = rng.standard_normal((6, 2, 3))
    _close(jg.linalg.tensorsolve(jg.tensor(a), jg.tensor(b), dims=(0,)),
           torch.linalg.tensorsolve(torch.tensor(a), torch.tensor(b), dims=(0,)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_householder_functions_like_torch(dtype):
    torch = _torch()
    rng = np.random.default_rng(6)
    for shape in [(5, 3), (3, 3), (2, 4, 2), (3, 5)]:
        a = rng.standard_normal(shape).astype(dtype)
        (qa, tau), (tqa, ttau) = jg.geqrf(jg.tensor(a)), torch.geqrf(torch.tensor(a))
        _close(qa, tqa, dtype)
        _close(tau, ttau, dtype)
        if shape[-2] >= shape[-1]:
            q = jg.linalg.householder_product(qa, tau)
            _close(q, torch.linalg.householder_product(tqa, ttau), dtype)
            _close(jg.orgqr(qa, tau), q, dtype)
            _close(q @ qa.triu().narrow(-2, 0, shape[-1]), a, dtype)  # Q R = A
        c = rng.standard_normal(shape[:-2] + (shape[-2], 2)).astype(dtype)
        for tr in (False, True):
            _close(jg.ormqr(qa, tau, jg.tensor(c), transpose=tr),
                   torch.ormqr(tqa, ttau, torch.tensor(c), transpose=tr), dtype)
            cr = np.ascontiguousarray(np.swapaxes(c, -1, -2))
            _close(jg.ormqr(qa, tau, jg.tensor(cr), left=False, transpose=tr),
                   torch.ormqr(tqa, ttau, torch.tensor(cr), left=False, transpose=tr), dtype)


def test_deprecated_lu_and_lu_solve_like_torch():
    torch = _torch()
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3, 2))
    with pytest.warns(UserWarning, match="torch.lu is deprecated in favor of"):
        LU, piv = jg.lu(jg.tensor(a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tLU, tpiv = torch.lu(torch.tensor(a))
        r = jg.lu(jg.tensor(SINGULAR[0]), get_infos=True)  # no error
        t = torch.lu(torch.tensor(SINGULAR[0]), get_infos=True)
        assert type(jg.lu(jg.tensor(a))) is tuple
        tx = torch.lu_solve(torch.tensor(b), tLU, tpiv)
    _close(LU, tLU)
    assert piv.tolist() == tpiv.tolist() and r.info.tolist() == t.info.tolist()
    assert repr(r).startswith("torch.return_types._lu_with_info(")
    with pytest.warns(UserWarning, match="torch.lu_solve is deprecated"):
        _close(jg.lu_solve(jg.tensor(b), LU, piv), tx)


# ------------------------------------------------------------------ gradients
def _loss_pair(fj, ft, arrays):
    """Values and gradients of ``sum(w * f(...))`` for jitgrad and PyTorch."""
    torch = _torch()
    js = [jg.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    oj, ot = fj(*js), ft(*ts)
    oj, ot = (oj if isinstance(oj, tuple) else (oj,)), (ot if isinstance(ot, tuple) else (ot,))
    ws = [np.cos(np.arange(o.numel()) + 1.0).reshape(tuple(o.shape)) for o in ot]
    lj = sum((o * jg.tensor(w)).sum() for o, w in zip(oj, ws))
    lt = sum((o * torch.tensor(w)).sum() for o, w in zip(ot, ws))
    for x, y in zip(oj, ot):
        _close(x, y)
    for x, y in zip(jg.autograd.grad(lj, js), torch.autograd.grad(lt, ts)):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-7, atol=1e-9)


_GRAD_PAIRS = {
    "lu": (lambda M: lambda x: tuple(M.linalg.lu(x))[1:], [(4, 4), (5, 3), (3, 5), (2, 3, 3)]),
    "lu-L": (lambda M: lambda x: M.linalg.lu(x).L, [(4, 4), (2, 5, 3), (3, 5)]),
    "lu-U": (lambda M: lambda x: M.linalg.lu(x).U, [(4, 4), (5, 3), (2, 3, 5)]),
    "lu_factor": (lambda M: lambda x: M.linalg.lu_factor(x).LU, [(4, 4), (5, 3), (2, 3, 5)]),
    "lu_unpack": (lambda M: lambda x: tuple(M.lu_unpack(*M.linalg.lu_factor(x)))[1:],
                  [(4, 4), (2, 5, 3)]),
    "householder_product": (lambda M: lambda x: M.linalg.householder_product(
        x, x[..., 0, :] * 0.5), [(5, 3), (2, 4, 4)]),
    "ormqr": (lambda M: lambda x: M.ormqr(x, x[..., 1, :] * 0.5, x * x, transpose=True),
              [(5, 3), (2, 4, 4)]),
    "cond": (lambda M: lambda x: M.linalg.cond(x) + M.linalg.cond(x, -2), [(4, 4), (2, 3, 5)]),
    "cond-nuc": (lambda M: lambda x: M.linalg.cond(x, "nuc"), [(4, 4), (2, 3, 3)]),
    "tensorinv": (lambda M: lambda x: M.linalg.tensorinv(x.reshape(2, 2, 4), ind=2), [(4, 4)]),
    "vander": (lambda M: lambda x: M.linalg.vander(x, N=4).clone(), [(3,), (2, 3)]),
    "diagonal": (lambda M: lambda x: M.linalg.diagonal(x, offset=1), [(3, 4), (2, 3, 3)]),
}


@pytest.mark.parametrize("name,shape", [(n, s) for n, (_, ss) in _GRAD_PAIRS.items()
                                        for s in ss])
def test_gradients_like_torch(name, shape):
    torch = _torch()
    fn = _GRAD_PAIRS[name][0]
    _loss_pair(fn(jg), fn(torch), [np.random.default_rng(8).standard_normal(shape)])


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_and_solve_ex_gradients_like_torch(left, adjoint):
    torch = _torch()
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3, 2))
    b = b if left else np.ascontiguousarray(np.swapaxes(b, -1, -2))
    _loss_pair(lambda x, y: jg.linalg.lu_solve(*jg.linalg.lu_factor(x), y, left=left,
                                               adjoint=adjoint),
               lambda x, y: torch.linalg.lu_solve(*torch.linalg.lu_factor(x), y, left=left,
                                                  adjoint=adjoint), [a, b])
    _loss_pair(lambda x, y: jg.linalg.solve_ex(x, y, left=left).result,
               lambda x, y: torch.linalg.solve_ex(x, y, left=left).result, [a, b])
    _loss_pair(lambda x, y: jg.linalg.tensorsolve(x.reshape(3, 1, 3), y.reshape(3, 1)),
               lambda x, y: torch.linalg.tensorsolve(x.reshape(3, 1, 3), y.reshape(3, 1)),
               [rng.standard_normal((3, 3)), rng.standard_normal(3)])


def test_node_names_like_torch():
    x = jg.tensor(np.random.default_rng(10).standard_normal((3, 3)), requires_grad=True)
    assert type(jg.linalg.lu_factor(x).LU.grad_fn).__name__ == "LinalgLuFactorExBackward0"
    assert type(jg.linalg.lu_factor_ex(x).LU.grad_fn).__name__ == "LinalgLuFactorExBackward0"
    P, L, U = jg.linalg.lu(x)
    assert type(L.grad_fn).__name__ == type(U.grad_fn).__name__ == "LinalgLuBackward0"
    assert not P.requires_grad and not jg.linalg.lu_factor(x).pivots.requires_grad
    assert type(jg.linalg.solve_ex(x, x).result.grad_fn).__name__ == "LinalgSolveExBackward0"
    a, tau = jg.geqrf(x)
    assert type(a.grad_fn).__name__ == "GeqrfBackward0"
    with pytest.raises(NotImplementedError, match="the derivative for 'geqrf' is not "
                                                  "implemented."):
        (a.sum() + tau.sum()).backward()


# ---------------------------------------------------------------- gradcheck (float64)
def _x(shape, seed=11):
    return jg.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


GRADCHECK = {
    "lu_factor": lambda x: jg.linalg.lu_factor(x).LU,
    "lu_factor_ex": lambda x: jg.linalg.lu_factor_ex(x).LU,
    "lu": lambda x: jg.linalg.lu(x).L * 2 + jg.linalg.lu(x).U.sum(),
    "lu_unpack": lambda x: jg.lu_unpack(*jg.linalg.lu_factor(x)).U,
    "lu_solve": lambda x: jg.linalg.lu_solve(*jg.linalg.lu_factor(x), x.mT, adjoint=True),
    "lu_solve-right": lambda x: jg.linalg.lu_solve(*jg.linalg.lu_factor(x), x, left=False),
    "solve_ex": lambda x: jg.linalg.solve_ex(x, x.sin()).result,
    "cond": lambda x: jg.linalg.cond(x),
    "cond-1": lambda x: jg.linalg.cond(x, 1),
    "cond-fro": lambda x: jg.linalg.cond(x, "fro"),
    "cond-nuc": lambda x: jg.linalg.cond(x, "nuc"),
    "cond-inf": lambda x: jg.linalg.cond(x, -math.inf) + jg.linalg.cond(x, math.inf),
    "cond--2": lambda x: jg.linalg.cond(x, -2) + jg.linalg.cond(x, -1),
    "tensorinv": lambda x: (jg.linalg.tensorinv(x.reshape(-1)[:16].reshape(2, 2, 2, 2))
                            if x.numel() >= 16 else jg.linalg.tensorinv(x, ind=1)),
    "tensorsolve": lambda x: (jg.linalg.tensorsolve(x.reshape(-1)[:16].reshape(2, 2, 4),
                                                    x.reshape(-1)[:4].reshape(2, 2).cos())
                              if x.numel() >= 16 else jg.linalg.tensorsolve(x, x[..., 0] + 1)),
    "vander": lambda x: jg.linalg.vander(x[..., 0, :], N=4),
    "diagonal": lambda x: jg.linalg.diagonal(x, offset=-1),
    "householder_product": lambda x: jg.linalg.householder_product(x, x[..., 0, :]),
    "orgqr": lambda x: jg.orgqr(x, x[..., -1, :]),
    "ormqr": lambda x: jg.ormqr(x, x[..., 0, :], x.sin(), transpose=True),
    "ormqr-right": lambda x: jg.ormqr(x, x[..., 0, :], x.mT.cos(), left=False),
}


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3)])
@pytest.mark.parametrize("name", sorted(GRADCHECK))
def test_gradcheck_float64(name, shape):
    assert gradcheck(GRADCHECK[name], (_x(shape),))


@pytest.mark.parametrize("shape", [(4, 2), (2, 4), (2, 3, 4), (2, 4, 3)])
def test_gradcheck_rectangular_lu(shape):
    assert gradcheck(lambda x: jg.linalg.lu(x).L + jg.linalg.lu(x).U.sum(), (_x(shape),))
    assert gradcheck(lambda x: jg.linalg.lu(x).U, (_x(shape),))
    assert gradcheck(lambda x: jg.linalg.lu_factor(x).LU, (_x(shape),))


def test_gradcheck_lu_solve_in_both_arguments():
    b = _x((2, 3, 2), seed=12)
    assert gradcheck(lambda x, y: jg.linalg.lu_solve(*jg.linalg.lu_factor(x), y), (_x((3, 3)), b))
    assert gradcheck(lambda x, y: jg.linalg.solve_ex(x, y).result, (_x((2, 3, 3)), b))


@pytest.mark.parametrize("name", ["lu_factor", "lu", "lu_solve", "householder_product", "cond"])
def test_gradgradcheck_float64(name):
    assert gradgradcheck(GRADCHECK[name], (_x((3, 3), seed=13),))


def test_gradgradcheck_rectangular_lu():
    assert gradgradcheck(lambda x: jg.linalg.lu(x).U, (_x((2, 3), seed=14),))
    assert gradgradcheck(lambda x: jg.linalg.lu(x).L, (_x((3, 2), seed=15),))


# ------------------------------------------------------------------- errors
_SINGULAR_3 = "M.tensor([[1., 2, 3], [2, 4, 6], [7, 8, 10]])"
_SINGULAR_B = f"M.stack([M.eye(3), {_SINGULAR_3}])"

#: (expression, the error PyTorch raises): singular matrices raise ``LinAlgError``
SINGULAR_ERRORS = [
    (f"M.linalg.inv({_SINGULAR_3})", "linalg.inv: The diagonal element 3 is zero, the inversion "
     "could not be completed because the input matrix is singular."),
    (f"M.inverse({_SINGULAR_3})", "linalg.inv: The diagonal element 3 is zero, the inversion "
     "could not be completed because the input matrix is singular."),
    ("M.linalg.inv(M.zeros(2, 2))", "linalg.inv: The diagonal element 1 is zero, the inversion "
     "could not be completed because the input matrix is singular."),
    ("M.linalg.inv(M.tensor([[0., 0], [1, 1]]))", "linalg.inv: The diagonal element 2 is zero, "
     "the inversion could not be completed because the input matrix is singular."),
    (f"M.linalg.inv({_SINGULAR_B})", "linalg.inv: (Batch element 1): The diagonal element 3 is "
     "zero, the inversion could not be completed because the input matrix is singular."),
    (f"M.linalg.solve({_SINGULAR_3}, M.ones(3))", "torch.linalg.solve: The solver failed "
     "because the input matrix is singular."),
    (f"M.linalg.solve({_SINGULAR_3}, M.ones(2, 3), left=False)", "torch.linalg.solve: The "
     "solver failed because the input matrix is singular."),
    (f"M.linalg.solve({_SINGULAR_B}, M.ones(2, 3, 1))", "torch.linalg.solve: (Batch element 1): "
     "The solver failed because the input matrix is singular."),
    (f"M.linalg.solve({_SINGULAR_B}.unsqueeze(1), M.ones(2, 4, 3, 1))", "torch.linalg.solve: "
     "(Batch element 1): The solver failed because the input matrix is singular."),
    (f"M.linalg.solve({_SINGULAR_3}, M.ones(2, 3, 1))", "torch.linalg.solve: The solver failed "
     "because the input matrix is singular."),
    (f"M.linalg.solve_ex({_SINGULAR_B}, M.ones(3), check_errors=True)", "torch.linalg.solve_ex: "
     "(Batch element 1): The solver failed because the input matrix is singular."),
    (f"M.linalg.tensorinv({_SINGULAR_3}, ind=1)", "inv: The diagonal element 3 is zero, the "
     "inversion could not be completed because the input matrix is singular."),
    (f"M.linalg.tensorsolve({_SINGULAR_3}, M.ones(3))", "torch.linalg.solve: The solver failed "
     "because the input matrix is singular."),
    (f"M.linalg.inv_ex({_SINGULAR_B}, check_errors=True)", "linalg.inv_ex: (Batch element 1): "
     "The diagonal element 3 is zero, the inversion could not be completed because the input "
     "matrix is singular."),
]


@pytest.mark.parametrize("expr,message", SINGULAR_ERRORS)
def test_singular_matrices_raise_linalg_error(expr, message):
    """PyTorch's ``LinAlgError`` and message (checked against PyTorch below)."""
    with pytest.raises(jg.linalg.LinAlgError) as info:
        eval(expr, {"M": jg})
    assert str(info.value) == message
    assert isinstance(info.value, RuntimeError)


@pytest.mark.parametrize("expr,message", SINGULAR_ERRORS)
def test_singular_error_messages_are_torch_s(expr, message):
    torch = _torch()
    with pytest.raises(torch.linalg.LinAlgError) as info:
        eval(expr, {"M": torch})
    assert str(info.value) == message


_ERRORS = [
    # lu_factor / lu_factor_ex / lu / lu_unpack
    f"M.linalg.lu_factor({_SINGULAR_3})", f"M.linalg.lu_factor({_SINGULAR_B})",
    f"M.linalg.lu_factor_ex({_SINGULAR_B}, check_errors=True)", "M.linalg.lu_factor(V)",
    "M.linalg.lu_factor_ex(V)", "M.linalg.lu_factor(I64)", "M.linalg.lu_factor(F16)",
    "M.linalg.lu_factor(SQ, pivot=False)", "M.linalg.lu(SQ, pivot=False)", "M.linalg.lu(V)",
    "M.linalg.lu(I64)", "M.lu_unpack(V, PIV)", "M.lu_unpack(SQ, PIV.long())",
    "M.lu_unpack(SQ, M.tensor([4, 1, 1], dtype=M.int32))",
    "M.lu_unpack(SQ, M.tensor([0, 1, 1], dtype=M.int32))",
    # lu_solve
    "M.linalg.lu_solve(SQ.long(), PIV, B.long())", "M.linalg.lu_solve(SQ, PIV, B.double())",
    "M.linalg.lu_solve(SQ, PIV.long(), B)", "M.linalg.lu_solve(A, PIV, B)",
    "M.linalg.lu_solve(V, PIV, B)", "M.linalg.lu_solve(SQ, PIV, V)",
    "M.linalg.lu_solve(SQ, PIV, M.ones(4, 1))",
    "M.linalg.lu_solve(SQ, PIV, M.ones(4, 1), left=False)",
    "M.linalg.lu_solve(SQ, PIV[:2], B)", "M.linalg.lu_solve(SQ.expand(2, 3, 3), PIV, B)",
    "M.linalg.lu_solve(SQ, M.tensor([4, 1, 1], dtype=M.int32), B)",
    "M.linalg.lu_solve(F16, M.tensor([1, 2], dtype=M.int32), F16)",
    # solve_ex
    "M.linalg.solve_ex(I64, I64)", "M.linalg.solve_ex(A, V)",
    # cond
    "M.linalg.cond(V)", "M.linalg.cond(A, 1)", "M.linalg.cond(A, -1)", "M.linalg.cond(A, INF)",
    "M.linalg.cond(A, -INF)", "M.linalg.cond(A, 'fro')", "M.linalg.cond(A, 'nuc')",
    "M.linalg.cond(A, 1.0)", "M.linalg.cond(SQ, 3)", "M.linalg.cond(SQ, 0)",
    "M.linalg.cond(SQ, 2.5)", "M.linalg.cond(SQ, 'abc')", "M.linalg.cond(A, 'abc')",
    "M.linalg.cond(I64)", "M.linalg.cond(I64, 1)", "M.linalg.cond(I64, 'fro')",
    "M.linalg.cond(I64, 'nuc')", "M.linalg.cond(F16, 1)", "M.linalg.cond(F16)",
    # vander, diagonal, tensorinv, tensorsolve
    "M.linalg.vander(M.tensor([True]))", "M.linalg.vander(M.ones(2), N=1)",
    "M.linalg.vander(M.tensor(2.))", "M.linalg.vander(M.ones(3, dtype=M.float16))",
    "M.linalg.diagonal(V)", "M.linalg.diagonal(A, dim1=2)",
    "M.linalg.tensorinv(M.ones(4, 6, 8, 3), ind=1)", "M.linalg.tensorinv(SQ, ind=0)",
    "M.linalg.tensorinv(I64, ind=1)", "M.linalg.tensorsolve(M.ones(2, 3, 5), M.ones(2, 3))",
    "M.linalg.tensorsolve(M.ones(2, 3, 6), M.ones(2, 3).double())",
    "M.linalg.tensorsolve(M.ones(2, 3, 6), M.ones(2, 3), dims=(5,))",
    # householder_product / orgqr / ormqr / geqrf
    "M.linalg.householder_product(M.ones(2, 3), M.ones(2))",
    "M.linalg.householder_product(A, M.ones(4))", "M.linalg.householder_product(V, V)",
    "M.linalg.householder_product(I64, I64[0])", "M.linalg.householder_product(A, V.double())",
    "M.linalg.householder_product(A, M.ones(1, 3))",
    "M.linalg.householder_product(M.ones(2, 4, 3), M.ones(3, 3))", "M.orgqr(V, V)",
    "M.ormqr(A, V, V)", "M.ormqr(A, V, M.ones(3, 3), left=False)", "M.ormqr(A, M.ones(4), B4)",
    "M.ormqr(M.ones(5, 3), M.ones(2), M.ones(5, 4))", "M.ormqr(A, M.ones(1, 3), B4)",
    "M.ormqr(M.ones(2, 4, 3), M.ones(2, 3), B4)", "M.ormqr(M.ones(2, 4, 3), M.ones(3, 3), "
    "M.ones(2, 4, 2))", "M.ormqr(M.ones(2, 4, 3), M.ones(2, 3), M.ones(3, 4, 2))",
    "M.ormqr(A, V.double(), B4)", "M.ormqr(A, V, B4.double())", "M.ormqr(V, V, B4)",
    "M.ormqr(A.long(), V.long(), B4.long())", "M.geqrf(V)", "M.geqrf(I64)", "M.geqrf(F16)",
]


def _error(M, expr):
    ns = {"M": M, "A": M.ones(4, 3), "SQ": M.eye(3), "V": M.ones(3), "B": M.ones(3, 1),
          "B4": M.ones(4, 2), "PIV": M.tensor([1, 2, 3], dtype=M.int32), "INF": math.inf,
          "I64": M.ones(2, 2, dtype=M.int64), "F16": M.ones(2, 2, dtype=M.float16)}
    with pytest.raises(Exception) as info:
        eval(expr, ns)
    return info.value


@pytest.mark.parametrize("expr", _ERRORS)
def test_errors_like_torch(expr):
    torch = _torch()
    t, j = _error(torch, expr), _error(jg, expr)
    for kind in (NotImplementedError, RuntimeError, IndexError):
        assert isinstance(j, kind) == isinstance(t, kind), (j, t)
    assert isinstance(j, jg.linalg.LinAlgError) == isinstance(t, torch.linalg.LinAlgError)
    assert str(j) == str(t)


# --------------------------------------------------------------- API and compile
def test_names_are_exported():
    for name in ("cond", "vander", "diagonal", "solve_ex", "tensorinv", "tensorsolve",
                 "lu_factor", "lu_factor_ex", "lu", "lu_solve", "householder_product"):
        assert name in jg.linalg.__all__ and callable(getattr(jg.linalg, name))
    for name in ("lu", "lu_solve", "lu_unpack", "geqrf", "orgqr", "ormqr"):
        assert name in jg.__all__ and callable(getattr(jg, name))
    assert jg.linalg.vander is not jg.vander  # (torch.vander: decreasing powers)


def test_out_arguments():
    a = jg.tensor(np.random.default_rng(17).standard_normal((3, 3)))
    LU, piv = jg.empty(0, dtype=jg.float64), jg.empty(0, dtype=jg.int32)
    r = jg.linalg.lu_factor(a, out=(LU, piv))
    assert r.LU is LU and r.pivots is piv and LU.shape == (3, 3)
    x = jg.empty(3, 3, dtype=jg.float64)
    assert jg.linalg.lu_solve(LU, piv, a, out=x) is x
    np.testing.assert_allclose(x.numpy(), np.eye(3), atol=1e-12)
    c = jg.empty((), dtype=jg.float64)
    assert jg.linalg.cond(a, "fro", out=c) is c
    assert c.item() == jg.linalg.cond(a, "fro").item()


def test_under_compile_lu_is_a_graph_break_and_cond_compiles():
    x = jg.tensor(np.random.default_rng(16).standard_normal((3, 3)))
    f = jg.compile(lambda a: jg.linalg.lu_solve(*jg.linalg.lu_factor(a), a) * 2)
    with pytest.warns(UserWarning, match="running <lambda> eagerly"):
        for _ in range(2):
            np.testing.assert_allclose(f(x).numpy(), 2 * np.eye(3), atol=1e-12)
    h = jg.compile(lambda a: jg.linalg.solve_ex(a, a).result)
    with pytest.warns(UserWarning, match="linalg.solve_ex"):
        np.testing.assert_allclose(h(x).numpy(), np.eye(3), atol=1e-12)
    g = jg.compile(lambda a: jg.linalg.cond(a) + jg.linalg.cond(a, "fro"), fullgraph=True)
    for _ in range(2):
        np.testing.assert_allclose(g(x).numpy(), (jg.linalg.cond(x) + jg.linalg.cond(
            x, "fro")).numpy(), rtol=1e-12)


def test_docstring_examples():
    import doctest

    from jitgrad.ops import householder, linalg_composites, lu

    for mod in (lu, householder, linalg_composites):
        assert doctest.testmod(mod).failed == 0, mod.__name__
