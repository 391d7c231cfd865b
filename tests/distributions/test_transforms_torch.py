"""Transforms and the constraint registries against PyTorch: forward and inverse values,
``log_abs_det_jacobian`` and their gradients (w.r.t. the input and the transform's
parameters), ``sign``, shapes, ``repr``, and the transforms ``biject_to`` /
``transform_to`` pick for each constraint."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402
import jitgrad.distributions as jd  # noqa: E402

ARRAYS = {
    "real": np.random.default_rng(0).normal(size=(4, 3)),
    "pos": np.random.default_rng(1).uniform(0.2, 3.0, (4, 3)),
    "loc": np.array([0.5, -1.0, 2.0]),
    "scale": np.array([1.5, -0.5, 2.0]),
    "expo": np.array([0.5, 2.0, -1.5]),
}


# name -> (builder(lib.distributions.transforms, params), input array key)
def _affine(T, p):
    return T.AffineTransform(p["loc"], p["scale"])


CASES = {
    "Exp": (lambda T, p: T.ExpTransform(), "real"),
    "Affine": (_affine, "real"),
    "Affine-numbers": (lambda T, p: T.AffineTransform(1.0, -3.0), "real"),
    "Affine-event": (lambda T, p: T.AffineTransform(p["loc"], p["scale"], event_dim=1),
                     "real"),
    "Sigmoid": (lambda T, p: T.SigmoidTransform(), "real"),
    "Softplus": (lambda T, p: T.SoftplusTransform(), "real"),
    "Tanh": (lambda T, p: T.TanhTransform(), "real"),
    "Power": (lambda T, p: T.PowerTransform(p["expo"]), "pos"),
    "Abs": (lambda T, p: T.AbsTransform(), "real"),
    "Softmax": (lambda T, p: T.SoftmaxTransform(), "real"),
    "StickBreaking": (lambda T, p: T.StickBreakingTransform(), "real"),
    "CorrCholesky": (lambda T, p: T.CorrCholeskyTransform(), "real"),
    "LowerCholesky": (lambda T, p: T.LowerCholeskyTransform(), "real-square"),
    "Compose": (lambda T, p: T.ComposeTransform([T.AffineTransform(p["loc"], 0.5),
                                                 T.SigmoidTransform(),
                                                 T.AffineTransform(-1.0, p["scale"])]),
                "real"),
    "Independent": (lambda T, p: T.IndependentTransform(T.ExpTransform(), 1), "real"),
    "Reshape": (lambda T, p: T.ReshapeTransform((3,), (1, 3)), "real"),
    "Cat": (lambda T, p: T.CatTransform([T.ExpTransform(), T.TanhTransform()], dim=-1,
                                        lengths=[1, 2]), "real"),
    "Stack": (lambda T, p: T.StackTransform([T.ExpTransform(), T.SigmoidTransform(),
                                             T.identity_transform], dim=-1), "real"),
    "Exp-inverse": (lambda T, p: T.ExpTransform().inv, "pos"),
    "Sigmoid-inverse": (lambda T, p: T.SigmoidTransform().inv, "unit"),
}


def _input(key):
    if key == "real-square":
        return np.random.default_rng(2).normal(size=(2, 3, 3))
    if key == "unit":
        return np.random.default_rng(3).uniform(0.05, 0.95, (4, 3))
    return ARRAYS[key]


def _build(lib, case):
    make, key = CASES[case]
    params = {k: lib.tensor(ARRAYS[k], requires_grad=True) for k in ("loc", "scale", "expo")}
    x = lib.tensor(_input(key), requires_grad=True)
    return make(lib.distributions.transforms, params), params, x


def _grads(lib, out, leaves):
    leaves = [v for v in leaves if v.requires_grad]
    w = lib.tensor(np.random.default_rng(9).normal(size=tuple(out.shape)))
    gs = lib.autograd.grad((out * w).sum(), leaves, allow_unused=True, retain_graph=True)
    return [None if g is None else g.detach().numpy() for g in gs]


@pytest.mark.parametrize("case", sorted(CASES))
def test_transform_matches_torch(case, dh):
    tj, pj, xj = _build(jitgrad, case)
    tt, pt, xt = _build(torch, case)
    assert repr(tj) == repr(tt)
    assert tj.bijective == tt.bijective
    assert tj.domain.event_dim == tt.domain.event_dim
    assert tj.codomain.event_dim == tt.codomain.event_dim
    assert tuple(tj.forward_shape(xj.shape)) == tuple(tt.forward_shape(xt.shape))
    yj, yt = tj(xj), tt(xt)
    dh.assert_close(yj, yt, np.float64, "forward")
    assert tuple(tj.inverse_shape(yj.shape)) == tuple(tt.inverse_shape(yt.shape))
    leaves_j, leaves_t = [xj, *pj.values()], [xt, *pt.values()]
    for a, b in zip(_grads(jitgrad, yj, leaves_j), _grads(torch, yt, leaves_t)):
        assert (a is None) == (b is None) or not np.any(a if a is not None else b)
        if a is not None and b is not None:
            dh.assert_close(a, b, np.float64, "d forward", rtol=1e-9)
    yjd, ytd = yj.detach().requires_grad_(), yt.detach().requires_grad_()
    dh.assert_close(tj.inv(yjd), tt.inv(ytd), np.float64, "inverse", rtol=1e-8, atol=1e-10)
    if case == "Abs":
        with pytest.raises(NotImplementedError):
            tt.log_abs_det_jacobian(xt, yt)
        with pytest.raises(NotImplementedError):
            tj.log_abs_det_jacobian(xj, yj)
    if not tt.bijective:
        return
    lj, lt = tj.log_abs_det_jacobian(xj, yj), tt.log_abs_det_jacobian(xt, yt)
    dh.assert_close(lj, lt, np.float64, "log_abs_det_jacobian")
    assert lj.requires_grad == lt.requires_grad
    if lt.requires_grad:
        for a, b in zip(_grads(jitgrad, lj, leaves_j), _grads(torch, lt, leaves_t)):
            if a is not None and b is not None:
                dh.assert_close(a, b, np.float64, "d log_abs_det_jacobian", rtol=1e-9)
    try:
        st = tt.sign
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            tj.sign  # noqa: B018
        return
    dh.assert_close(jitgrad.as_tensor(tj.sign), torch.as_tensor(st), np.float64, "sign")


@pytest.mark.parametrize("name", ["real", "positive", "nonnegative", "unit_interval",
                                  "simplex", "real_vector", "corr_cholesky", "lower_cholesky",
                                  "positive_definite", "positive_semidefinite",
                                  "greater_than", "greater_than_eq", "less_than", "interval",
                                  "half_open_interval", "independent", "cat", "stack",
                                  "boolean", "lower_triangular"])
def test_registries_pick_torchs_transforms(name, dh):
    def constraint(C, lib):
        args = {"greater_than": (1.5,), "greater_than_eq": (-1.0,), "less_than": (2.0,),
                "interval": (-2.0, 3.0), "half_open_interval": (0.0, 4.0),
                "independent": (C.positive, 2),
                "cat": ([C.positive, C.real], -1, [2, 1]),
                "stack": ([C.positive, C.unit_interval], -1)}
        c = getattr(C, name)
        return c(*args[name]) if name in args else c

    cj = constraint(jd.constraints, jitgrad)
    ct = constraint(torch.distributions.constraints, torch)
    x = np.random.default_rng(0).normal(size=(2, 3, 3) if "definite" in name
                                        or name == "lower_cholesky" else
                                        (2, 2) if name == "stack" else (2, 3))
    for rj, rt in ((jd.biject_to, torch.distributions.biject_to),
                   (jd.transform_to, torch.distributions.transform_to)):
        try:
            t_t = rt(ct)
        except NotImplementedError as e:
            with pytest.raises(NotImplementedError) as ej:
                rj(cj)
            assert str(ej.value) == str(e)
            continue
        t_j = rj(cj)
        assert repr(t_j) == repr(t_t)
        dh.assert_close(t_j(jitgrad.tensor(x)), t_t(torch.tensor(x)), np.float64, name,
                        rtol=1e-9)
