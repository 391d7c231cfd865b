"""Eager ``F.cross_entropy`` of a batch of class indices runs ``log_softmax`` and the NLL's
picks in one kernel call (``nll._plain_cross_entropy``): the same loss, graph, saved values
and gradients, bit for bit, as ``log_softmax`` followed by ``nll_loss``; every other case,
and every bad target, takes the general path with its errors."""

import numpy as np
import pytest
from jitgrad.kernels import softmax as K

import jitgrad
import jitgrad.nn.functional as F
from jitgrad.ops.nnops import nll


def _two_ops(x, t, **kw):
    return F.nll_loss(F.log_softmax(x, 1), t, **kw)


def _loss_and_grad(fn, x0, t, g=None, **kw):
    x = jitgrad.tensor(x0, requires_grad=True)
    loss = fn(x, jitgrad.tensor(t), **kw)
    loss.backward(None if g is None else jitgrad.tensor(g, dtype=loss.dtype))
    return loss, x.grad


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_bits_of_log_softmax_then_nll(dtype, reduction):
    rng = np.random.default_rng(1)
    for c in (1, 2, 10, K.SMALL_C, K.SMALL_C + 1, 100):  # blocked and row code
        for n in (1, 7, 8, 9, 128):
            x0 = (rng.standard_normal((n, c)) * 6).astype(dtype)
            t = rng.integers(0, c, n)
            fast, gf = _loss_and_grad(F.cross_entropy, x0, t, 0.75, reduction=reduction)
            ref, gr = _loss_and_grad(_two_ops, x0, t, 0.75, reduction=reduction)
            assert fast.dtype == ref.dtype and fast.shape == ()
            assert fast.detach().numpy().tobytes() == ref.detach().numpy().tobytes(), (n, c)
            assert gf.detach().numpy().tobytes() == gr.detach().numpy().tobytes(), (n, c)


def test_takes_the_one_kernel_path(monkeypatch):
    calls = []
    kernel = K.log_softmax_nll

    def counting(*args):
        calls.append(args[0].shape)
        return kernel(*args)

    monkeypatch.setattr(K, "log_softmax_nll", counting)
    x = jitgrad.randn(4, 3)
    F.cross_entropy(x, jitgrad.tensor([0, 2, 1, 2]))
    assert calls == [(4, 3)]
    for kw in ({"reduction": "none"}, {"weight": jitgrad.ones(3)}, {"label_smoothing": 0.1},
               {"ignore_index": 1}):
        F.cross_entropy(x, jitgrad.tensor([0, 2, 1, 2]), **kw)
    F.cross_entropy(x.t().contiguous().t(), jitgrad.tensor([0, 2, 1, 2]))  # strided
    F.cross_entropy(jitgrad.randn(2, 3, 4), jitgrad.zeros(2, 4, dtype=jitgrad.int64))
    # ignore_index=1 hits a target: the kernel refused, the general path ran
    assert calls == [(4, 3), (4, 3)]


def test_graph_and_saved_values_as_pytorch_builds_them():
    x = jitgrad.randn(5, 4, requires_grad=True)
    loss = F.cross_entropy(x, jitgrad.tensor([3, 0, 1, 1, 2]))
    assert type(loss.grad_fn).__name__ == "NllLossBackward0"
    (inner, _), = [e for e in loss.grad_fn.next_functions if e[0] is not None]
    assert type(inner).__name__ == "LogSoftmaxBackward0"
    logp = F.log_softmax(x, 1)
    assert np.array_equal(inner._saved_result.detach().numpy(), logp.detach().numpy())
    with jitgrad.no_grad():
        assert F.cross_entropy(x, jitgrad.tensor([3, 0, 1, 1, 2])).grad_fn is None
    y = jitgrad.randn(5, 4)
    assert F.cross_entropy(y, jitgrad.tensor([3, 0, 1, 1, 2])).grad_fn is None


def test_ignored_target_as_the_general_path():
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((6, 5)).astype(np.float32)
    t = np.array([0, -100, 4, 2, -100, 1])
    fast, gf = _loss_and_grad(F.cross_entropy, x0, t)
    ref, gr = _loss_and_grad(_two_ops, x0, t)
    assert fast.detach().numpy().tobytes() == ref.detach().numpy().tobytes()
    assert gf.detach().numpy().tobytes() == gr.detach().numpy().tobytes()


@pytest.mark.parametrize("bad", [5, -1, 99])
def test_bad_target_raises_and_changes_nothing(bad):
    x = jitgrad.randn(3, 5, requires_grad=True)
    x.grad = jitgrad.ones(3, 5)
    before = x.detach().numpy().copy()
    with pytest.raises(IndexError, match=f"Target {bad} is out of bounds"):
        F.cross_entropy(x, jitgrad.tensor([0, bad, 1]))
    assert np.array_equal(x.detach().numpy(), before)
    assert np.array_equal(x.grad.numpy(), np.ones((3, 5)))


def test_nan_and_infinite_logits_as_the_two_ops():
    x0 = np.array([[np.inf, 1.0, 0.0], [-np.inf, -np.inf, 2.0], [np.nan, 0.0, 1.0],
                   [1.0, 2.0, 3.0]], np.float32)
    t = np.array([1, 2, 0, 2])
    with np.errstate(all="ignore"):
        fast, gf = _loss_and_grad(F.cross_entropy, x0, t)
        ref, gr = _loss_and_grad(_two_ops, x0, t)
    assert fast.detach().numpy().tobytes() == ref.detach().numpy().tobytes()
    assert gf.detach().numpy().tobytes() == gr.detach().numpy().tobytes()


def test_compiled_step_keeps_eager_bits():
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((9, 10)).astype(np.float32)
    t = jitgrad.tensor(rng.integers(0, 10, 9))
    w = jitgrad.tensor(rng.standard_normal((10, 10)).astype(np.float32), requires_grad=True)

    def step(x):
        loss = F.cross_entropy(x @ w, t)
        loss.backward()
        return loss

    eager = step(jitgrad.tensor(x0))
    g_eager = w.grad.clone()
    w.grad = None
    compiled = jitgrad.compile(step)
    for _ in range(2):
        w.grad = None
        loss = compiled(jitgrad.tensor(x0))
    assert loss.detach().numpy().tobytes() == eager.detach().numpy().tobytes()
    assert w.grad.detach().numpy().tobytes() == g_eager.detach().numpy().tobytes()


def test_plain_path_declines_what_it_does_not_cover():
    x = jitgrad.randn(4, 3)
    t = jitgrad.tensor([0, 1, 2, 0])
    assert nll._plain_cross_entropy(x, t, "none", -100) is None
    assert nll._plain_cross_entropy(x.double().int(), t, "mean", -100) is None
    assert nll._plain_cross_entropy(x, t.int(), "mean", -100) is None
    assert nll._plain_cross_entropy(x, jitgrad.tensor([0, 1, 2]), "mean", -100) is None
    assert nll._plain_cross_entropy(x, t, "mean", 2) is None  # a target is ignored
    assert nll._plain_cross_entropy(x, t, "mean", -100) is not None
