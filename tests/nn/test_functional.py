"""nn.functional losses and activations against PyTorch (values, gradients, node names) and
finite differences; stability for large logits; PyTorch's errors for bad targets."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F
from jitgrad.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(5)
X = RNG.standard_normal((6, 5)).astype(np.float32)
T = np.array([1, 0, 4, 2, 4, 3])
W = RNG.uniform(0.5, 2.0, 5).astype(np.float32)
P = RNG.dirichlet(np.ones(5), 6).astype(np.float32)

#: id -> (function name, input array, target array, kwargs)
CE_CASES = {
    "mean": (X, T, {}),
    "sum": (X, T, {"reduction": "sum"}),
    "none": (X, T, {"reduction": "none"}),
    "weight": (X, T, {"weight": W}),
    "ignore": (X, np.array([1, -100, 4, 2, -100, 3]), {}),
    "ignore-custom": (X, T, {"ignore_index": 4, "weight": W}),
    "smoothing": (X, T, {"label_smoothing": 0.2}),
    "smoothing-weight-ignore": (X, np.array([1, 0, 4, -100, 4, 3]),
                                {"label_smoothing": 0.1, "weight": W}),
    "smoothing-none": (X, T, {"label_smoothing": 0.3, "reduction": "none"}),
    "smoothing-sum": (X, T, {"label_smoothing": 0.3, "reduction": "sum"}),
    "1d": (X[0], np.array(3), {}),
    "spatial": (RNG.standard_normal((2, 5, 3, 2)).astype(np.float32),
                RNG.integers(0, 5, (2, 3, 2)), {}),
    "spatial-3d-none": (RNG.standard_normal((2, 5, 3)).astype(np.float32),
                        RNG.integers(0, 5, (2, 3)), {"reduction": "none"}),
    "probs": (X, P, {}),
    "probs-smoothing-weight": (X, P, {"label_smoothing": 0.1, "weight": W}),
    "probs-none": (X, P, {"reduction": "none"}),
    "large-logits": (X * 1e4, T, {}),
}


def _call(M, fn, x, t, kw, dtype=None):
    kw = {k: M.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    xt = M.tensor(x, requires_grad=True) if dtype is None else M.tensor(
        x, dtype=dtype, requires_grad=True)
    return xt, getattr(M.nn.functional, fn)(xt, M.tensor(t), **kw)


@pytest.mark.parametrize("case", sorted(CE_CASES))
def test_cross_entropy_matches_torch(torch, H, case):
    x, t, kw = CE_CASES[case]
    jx, jy = _call(jitgrad, "cross_entropy", x, t, kw)
    tx, ty = _call(torch, "cross_entropy", x, t, kw)
    H.assert_close(jy, ty, rtol=1e-5, atol=1e-5)
    if not (case.startswith("probs") and kw.get("reduction", "mean") == "mean"):
        # (PyTorch divides by a C++ int there: DivBackward1; jitgrad: DivBackward0)
        assert H.node_name(jy) == H.node_name(ty)
    g = np.random.default_rng(0).standard_normal(tuple(ty.shape)).astype(np.float32)
    (jy * jitgrad.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    H.assert_close(jx.grad, tx.grad, rtol=1e-4, atol=1e-6)
    assert np.isfinite(jy.detach().numpy()).all() and np.isfinite(jx.grad.numpy()).all()


@pytest.mark.parametrize("case", ["mean", "weight", "ignore", "smoothing-weight-ignore",
                                  "smoothing-none", "spatial", "probs-smoothing-weight", "1d"])
def test_cross_entropy_gradcheck(case):
    x, t, kw = CE_CASES[case]
    kw = {k: jitgrad.tensor(v, dtype=jitgrad.float64) if isinstance(v, np.ndarray) else v
          for k, v in kw.items()}
    tt = jitgrad.tensor(t, dtype=jitgrad.float64) if t.dtype.kind == "f" else jitgrad.tensor(t)
    xt = jitgrad.tensor(x, dtype=jitgrad.float64, requires_grad=True)
    assert gradcheck(lambda a: F.cross_entropy(a, tt, **kw), (xt,))
    assert gradgradcheck(lambda a: F.cross_entropy(a, tt, **kw), (xt,))


LOSSES = {
    "mse": ("mse_loss", X, X[::-1].copy(), {}),
    "mse-sum": ("mse_loss", X, X[::-1].copy(), {"reduction": "sum"}),
    "mse-none": ("mse_loss", X, X[::-1].copy(), {"reduction": "none"}),
    "l1": ("l1_loss", X, X[::-1].copy(), {}),
    "l1-sum": ("l1_loss", X, X[::-1].copy(), {"reduction": "sum"}),
    "l1-none": ("l1_loss", X, X[::-1].copy(), {"reduction": "none"}),
    "bce": ("binary_cross_entropy", P, P[::-1].copy(), {}),
    "bce-weight-none": ("binary_cross_entropy", P, P[::-1].copy(),
                        {"weight": W, "reduction": "none"}),
    "bce-exact-01": ("binary_cross_entropy", np.array([0.0, 1.0, 0.5], np.float32),
                     np.array([1.0, 0.0, 0.5], np.float32), {"reduction": "none"}),
    "bce-logits-pos-weight": ("binary_cross_entropy_with_logits", X * 30, P,
                              {"pos_weight": W}),
    "nll-ignore-all": ("nll_loss", X, np.full(6, -100), {}),
}


@pytest.mark.parametrize("case", sorted(LOSSES))
def test_loss_matches_torch(torch, H, case):
    fn, x, t, kw = LOSSES[case]
    jx, jy = _call(jitgrad, fn, x, t, kw)
    tx, ty = _call(torch, fn, x, t, kw)
    H.assert_close(jy, ty, rtol=1e-5, atol=1e-5)
    assert H.node_name(jy) == H.node_name(ty)
    if np.isnan(ty.detach().numpy()).any():
        assert np.isnan(jy.detach().numpy()).all()
        return
    g = np.ones(tuple(ty.shape), np.float32)
    (jy * jitgrad.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    H.assert_close(jx.grad, tx.grad, rtol=1e-4, atol=1e-5)


def test_mse_broadcast_warns_like_torch(torch, H):
    for M in (jitgrad, torch):
        with pytest.warns(UserWarning, match=r"Using a target size \(\w+\.Size\(\[5\]\)\) that "
                                             r"is different to the input size"):
            M.nn.functional.mse_loss(M.ones(4, 5), M.zeros(5))
        with pytest.warns(UserWarning), pytest.raises(
                RuntimeError, match=r"The size of tensor a \(5\) must match the size of tensor b "
                                    r"\(6\) at non-singleton dimension 1"):
            M.nn.functional.mse_loss(M.ones(4, 5), M.zeros(4, 6))


@pytest.mark.parametrize("fn", ["l1_loss", "mse_loss", "binary_cross_entropy"])
def test_elementwise_losses_gradcheck(fn):
    rng = np.random.default_rng(3)
    a = jitgrad.tensor(rng.uniform(0.1, 0.9, (3, 4)), dtype=jitgrad.float64, requires_grad=True)
    b = jitgrad.tensor(rng.uniform(0.1, 0.9, (3, 4)), dtype=jitgrad.float64, requires_grad=True)
    for red in ("mean", "sum", "none"):
        assert gradcheck(lambda x, y, red=red: getattr(F, fn)(x, y, reduction=red), (a, b))


def test_large_logits_are_stable():
    x = jitgrad.tensor([[1e30, -1e30, 0.0], [-5e4, 5e4, 1.0]], requires_grad=True)
    t = jitgrad.tensor([1, 0])
    loss = F.cross_entropy(x, t)
    loss.backward()
    assert np.isfinite(loss.item()) and np.isfinite(x.grad.numpy()).all()
    y = F.binary_cross_entropy_with_logits(x, jitgrad.zeros(2, 3))
    assert np.isfinite(y.item())
    s = F.softmax(jitgrad.tensor([1e4, 0.0]), 0)
    assert s.tolist() == [1.0, 0.0]


def test_gelu_tails_and_softmax_default_dim(torch, H):
    x = np.array([-1e30, -40.0, -8.0, -5.0, -1.0, 0.0, 2.0, 30.0, 1e30], np.float32)
    for form in ("none", "tanh"):  # (both lose digits to 1 + erf(x) near x = -5)
        H.assert_close(F.gelu(jitgrad.tensor(x), approximate=form),
                       torch.nn.functional.gelu(torch.tensor(x), approximate=form),
                       rtol=1e-6, atol=5e-7)
    for M in (jitgrad, torch):
        with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
            out = M.nn.functional.softmax(M.tensor(X))
        H.assert_close(out, torch.softmax(torch.tensor(X), 1))


def test_linear_node_names_match_torch(torch, H):
    for shape, bias in (((3, 4), True), ((3, 4), False), ((2, 3, 4), True), ((2, 3, 4), False),
                        ((4,), True), ((4,), False)):
        names = []
        for M in (jitgrad, torch):
            w = M.ones(5, 4, requires_grad=True)
            b = M.ones(5, requires_grad=True) if bias else None
            names.append(H.node_name(M.nn.functional.linear(M.ones(*shape), w, b)))
        assert names[0] == names[1], (shape, bias)


# ---------------------------------------------------------------------- bad targets
BAD = [
    (lambda M: M.nn.functional.cross_entropy(M.ones(4, 5), M.tensor([1, 12, 0, 2])),
     IndexError, r"Target 12 is out of bounds\."),
    (lambda M: M.nn.functional.cross_entropy(M.ones(4, 5), M.tensor([1, -3, 0, 2])),
     IndexError, r"Target -3 is out of bounds\."),
    (lambda M: M.nn.functional.cross_entropy(M.ones(4, 5), M.tensor([1, 2, 0])),
     ValueError, r"Expected input batch_size \(4\) to match target batch_size \(3\)\."),
    (lambda M: M.nn.functional.cross_entropy(M.ones(4, 5), M.tensor([1.0, 2.0, 0.0, 1.0])),
     RuntimeError, "expected target dtype to be Long or Byte, but got Float"),
    (lambda M: M.nn.functional.cross_entropy(M.ones(4, 5), M.zeros(4, 6)),
     RuntimeError, "0D or 1D target tensor expected, multi-target not supported"),
    (lambda M: M.nn.functional.cross_entropy(M.ones(4, 5), M.zeros(4, 5, dtype=M.long)),
     RuntimeError, "Expected floating point type for target with class probabilities, got "
                   "Long"),
    (lambda M: M.nn.functional.nll_loss(M.ones(2, 5, 3), M.zeros(2, 4, dtype=M.long)),
     RuntimeError, r"Expected target size \[2, 3\], got \[2, 4\]"),
    (lambda M: M.nn.functional.nll_loss(M.ones(4, 5), M.tensor([1, 2, 0, 1]),
                                        weight=M.ones(3)),
     RuntimeError, r"weight tensor should be defined either for all 5 classes or no classes "
                   r"but got weight tensor of shape: \[3\]"),
    (lambda M: M.nn.functional.cross_entropy(M.ones(4, 5), M.tensor([1, 2, 0, 1]),
                                             reduction="avg"),
     ValueError, "avg is not a valid value for reduction"),
    (lambda M: M.nn.functional.cross_entropy(M.ones(4, 5), M.tensor([1, 2, 0, 1]),
                                             label_smoothing=1.5),
     RuntimeError, r"label_smoothing must be between 0\.0 and 1\.0\. Got: 1\.5"),
    (lambda M: M.nn.functional.binary_cross_entropy(M.rand(4), M.rand(3)),
     ValueError, r"Using a target size \(\w+\.Size\(\[3\]\)\) that is different to the input "
                 r"size \(\w+\.Size\(\[4\]\)\) is deprecated"),
    (lambda M: M.nn.functional.binary_cross_entropy(M.ones(4) * 3, M.rand(4)),
     RuntimeError, "all elements of input should be between 0 and 1"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_targets_raise_like_torch(torch, i):
    fn, exc, msg = BAD[i]
    for M in (jitgrad, torch):
        with pytest.raises(exc, match=msg):
            fn(M)
