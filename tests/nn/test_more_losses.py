"""Margin, ranking, embedding and likelihood losses (jitgrad/nn/more_losses.py): PyTorch's
values and input gradients for every reduction, gradcheck in float64, the modules, errors,
CUDA == CPU and compiled == eager."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.autograd import gradcheck


def _inputs(rng):
    """The arrays every case draws from (float64)."""
    return {
        "x1": rng.standard_normal((6, 5)), "x2": rng.standard_normal((6, 5)),
        "x3": rng.standard_normal((6, 5)), "v1": rng.standard_normal(6),
        "v2": rng.standard_normal(6), "sign": np.where(rng.random(6) < 0.5, -1.0, 1.0),
        "sign55": np.where(rng.random((6, 5)) < 0.5, -1.0, 1.0),
        "cls": rng.integers(0, 5, 6), "bits": (rng.random((6, 5)) < 0.4).astype(np.float64),
        "counts": rng.poisson(2.0, (6, 5)).astype(np.float64),
        "pos": rng.uniform(0.1, 2.0, (6, 5)), "var": rng.uniform(0.2, 2.0, (6, 5)),
        "var_row": rng.uniform(0.2, 2.0, 6), "w5": rng.uniform(0.5, 1.5, 5),
        "labels": np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 3, 4],
                            [4, 4, -1, 0, 0], [0, -1, 1, 1, 1], [2, 1, 0, -1, 3]]),
    }


#: name -> (f(F, get, reduction), names of the differentiated inputs)
CASES = {
    "margin_ranking": (lambda F, g, r: F.margin_ranking_loss(g("v1"), g("v2"), g("sign"),
                                                             margin=0.3, reduction=r),
                       ("v1", "v2")),
    "hinge_embedding": (lambda F, g, r: F.hinge_embedding_loss(g("x1"), g("sign55"),
                                                               margin=0.8, reduction=r),
                        ("x1",)),
    "soft_margin": (lambda F, g, r: F.soft_margin_loss(g("x1"), g("sign55"), reduction=r),
                    ("x1",)),
    "cosine_embedding": (lambda F, g, r: F.cosine_embedding_loss(
        g("x1"), g("x2"), g("sign"), margin=0.1, reduction=r), ("x1", "x2")),
    "triplet": (lambda F, g, r: F.triplet_margin_loss(g("x1"), g("x2"), g("x3"), margin=1.5,
                                                      reduction=r), ("x1", "x2", "x3")),
    "triplet_p1_swap": (lambda F, g, r: F.triplet_margin_loss(
        g("x1"), g("x2"), g("x3"), margin=2.0, p=1, swap=True, reduction=r),
        ("x1", "x2", "x3")),
    "triplet_distance": (lambda F, g, r: F.triplet_margin_with_distance_loss(
        g("x1"), g("x2"), g("x3"), distance_function=lambda a, b: 1 - F.cosine_similarity(
            a, b), margin=0.5, swap=True, reduction=r), ("x1", "x2", "x3")),
    "multi_margin": (lambda F, g, r: F.multi_margin_loss(g("x1"), g("cls"), reduction=r),
                     ("x1",)),
    "multi_margin_p2_w": (lambda F, g, r: F.multi_margin_loss(
        g("x1"), g("cls"), p=2, margin=0.7, weight=g("w5"), reduction=r), ("x1",)),
    "multilabel_margin": (lambda F, g, r: F.multilabel_margin_loss(g("x1"), g("labels"),
                                                                   reduction=r), ("x1",)),
    "multilabel_soft_margin": (lambda F, g, r: F.multilabel_soft_margin_loss(
        g("x1"), g("bits"), weight=g("w5"), reduction=r), ("x1",)),
    "poisson_log": (lambda F, g, r: F.poisson_nll_loss(g("x1"), g("counts"), reduction=r),
                    ("x1",)),
    "poisson_full": (lambda F, g, r: F.poisson_nll_loss(
        g("pos"), g("counts"), log_input=False, full=True, reduction=r), ("pos",)),
    "gaussian": (lambda F, g, r: F.gaussian_nll_loss(g("x1"), g("x2"), g("var"),
                                                     reduction=r), ("x1", "x2", "var")),
    "gaussian_row_full": (lambda F, g, r: F.gaussian_nll_loss(
        g("x1"), g("x2"), g("var_row"), full=True, reduction=r), ("x1", "var_row")),
}
_INT = {"cls", "labels"}


def _run(lib, name, reduction, arrays, dtype=None, device=None):
    from helpers import case_inputs

    fn, diff = CASES[name]
    get, _ = case_inputs(lib, arrays, diff, _INT, dtype, device)
    out = fn(lib.nn.functional, get, reduction)
    return out, [get(k) for k in diff]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_pytorch(name, reduction):
    torch = pytest.importorskip("torch")
    arrays = _inputs(np.random.default_rng(3))
    out, ins = _run(jitgrad, name, reduction, arrays)
    tout, tins = _run(torch, name, reduction, arrays)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12,
                               atol=1e-14)
    w = np.cos(np.arange(out.numel()) + 1.0).reshape(tuple(out.shape))
    (out * jitgrad.tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    for a, b in zip(ins, tins):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    arrays = _inputs(np.random.default_rng(4))
    _, ins = _run(jitgrad, name, "sum", arrays)
    fn = CASES[name][0]
    diff = CASES[name][1]

    def f(*ts):
        table = dict(zip(diff, ts))

        def get(key):
            if key in table:
                return table[key]
            return jitgrad.tensor(arrays[key])
        return fn(F, get, "sum")
    assert gradcheck(f, tuple(ins), eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["margin_ranking", "cosine_embedding", "triplet",
                                  "multi_margin_p2_w", "multilabel_margin", "gaussian"])
def test_cuda_matches_cpu(name):
    if not jitgrad.cuda.is_available():
        pytest.skip("no CUDA (the simulator)")
    arrays = _inputs(np.random.default_rng(5))
    out, ins = _run(jitgrad, name, "mean", arrays, dtype=np.float32)
    cout, cins = _run(jitgrad, name, "mean", arrays, dtype=np.float32, device="cuda")
    assert cout.is_cuda
    np.testing.assert_allclose(cout.item(), out.item(), rtol=1e-5)
    out.backward()
    cout.backward()
    for a, b in zip(ins, cins):
        np.testing.assert_allclose(b.grad.cpu().numpy(), a.grad.numpy(), rtol=1e-5,
                                   atol=1e-6)


# (gaussian_nll_loss checks var >= 0 on the host, multilabel_margin_loss reads its target
# lists: compiled, both break the graph and run eagerly, as under torch.compile)
@pytest.mark.parametrize("name", ["margin_ranking", "soft_margin", "triplet",
                                  "multi_margin", "poisson_full", "cosine_embedding"])
def test_compiled_matches_eager(name):
    from helpers import assert_compiled_step_matches_eager

    arrays = _inputs(np.random.default_rng(6))
    _, ins = _run(jitgrad, name, "mean", arrays, dtype=np.float32)
    fn, diff = CASES[name]
    fixed = {k: jitgrad.tensor(arrays[k] if k in _INT else arrays[k].astype(np.float32))
             for k in arrays}

    def step(*ts):
        table = dict(zip(diff, ts))
        return fn(F, lambda k: table.get(k, fixed[k]), "mean")
    assert_compiled_step_matches_eager(step, ins, *ins)


def test_modules_match_functions():
    rng = np.random.default_rng(7)
    a, b, c = (jitgrad.tensor(rng.standard_normal((4, 3))) for _ in range(3))
    s = jitgrad.tensor([1.0, -1.0, 1.0, -1.0])
    cls = jitgrad.tensor([0, 2, 1, 2])
    pairs = [
        (nn.MarginRankingLoss(0.2)(a[:, 0], b[:, 0], s),
         F.margin_ranking_loss(a[:, 0], b[:, 0], s, 0.2)),
        (nn.HingeEmbeddingLoss(0.5, reduction="sum")(a, s[:, None].expand(4, 3)),
         F.hinge_embedding_loss(a, s[:, None].expand(4, 3), 0.5, reduction="sum")),
        (nn.SoftMarginLoss()(a, s[:, None].expand(4, 3)),
         F.soft_margin_loss(a, s[:, None].expand(4, 3))),
        (nn.CosineEmbeddingLoss(0.1)(a, b, s), F.cosine_embedding_loss(a, b, s, 0.1)),
        (nn.TripletMarginLoss(margin=0.5, p=1)(a, b, c),
         F.triplet_margin_loss(a, b, c, margin=0.5, p=1)),
        (nn.TripletMarginWithDistanceLoss(margin=0.5)(a, b, c),
         F.triplet_margin_with_distance_loss(a, b, c, margin=0.5)),
        (nn.MultiMarginLoss(p=2)(a, cls), F.multi_margin_loss(a, cls, p=2)),
        (nn.MultiLabelMarginLoss()(a, jitgrad.tensor([[0, -1, 1]] * 4)),
         F.multilabel_margin_loss(a, jitgrad.tensor([[0, -1, 1]] * 4))),
        (nn.MultiLabelSoftMarginLoss()(a, (b > 0).double()),
         F.multilabel_soft_margin_loss(a, (b > 0).double())),
        (nn.PoissonNLLLoss(full=True)(a, c.abs().round()),
         F.poisson_nll_loss(a, c.abs().round(), full=True)),
        (nn.GaussianNLLLoss()(a, b, c.abs() + 0.1), F.gaussian_nll_loss(a, b, c.abs() + 0.1)),
    ]
    for got, want in pairs:
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert "weight" in dict(nn.MultiMarginLoss(weight=jitgrad.ones(3)).named_buffers())


def test_errors():
    x = jitgrad.randn(4, 3)
    with pytest.raises(RuntimeError, match="All input tensors should have same dimension"):
        F.margin_ranking_loss(x, x[:, 0], x[:, 0])
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        F.multi_margin_loss(x, jitgrad.tensor([0, 1, 2, 0]), p=3)
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 1"):
        F.multi_margin_loss(x, jitgrad.tensor([0, 1, 3, 0]))
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(x, x, jitgrad.ones(2))
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(x, x, -jitgrad.ones(4, 3))
    with pytest.raises(ValueError, match="expected margin to be greater than 0"):
        nn.TripletMarginLoss(margin=0.0)
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.soft_margin_loss(x, x, reduction="avg")
    with pytest.raises(RuntimeError, match="inconsistent target size"):
        F.multilabel_margin_loss(x, jitgrad.tensor([[0, 1]]))
