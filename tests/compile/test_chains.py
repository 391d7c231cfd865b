"""A compiled training step runs log_softmax -> nll_loss -> nll_loss_backward ->
log_softmax_backward as one call (``compiler/chains.py``; the kernel
``kernels/softmax.cross_entropy``) with the bits of the four ops."""

import numpy as np
import pytest
from helpers import cross_entropy_step, newest_plan

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad.compiler.chains import nothing
from jitgrad.ops.nnops import nll
from jitgrad.ops.softmax_ops import _log_softmax_bwd_eager, _log_softmax_eager


def _four(x, t, g, reduction, ignore_index):
    y = _log_softmax_eager(x, 1)
    loss = nll._nll_fwd(y, t, None, reduction, ignore_index)
    gy = nll._nll_grad_fwd(g, t, None, reduction, ignore_index, x.shape)
    return loss, _log_softmax_bwd_eager(gy, y, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_kernel_gives_the_four_ops_bits(dtype, reduction):
    rng = np.random.default_rng(0)
    for c in list(range(1, 34)) + [65, 100, 257]:
        for n in (1, 3, 16, 128):
            x = (rng.standard_normal((n, c)) * rng.uniform(0.1, 30)).astype(dtype)
            t = rng.integers(0, c, n).astype(np.int64)
            g = np.asarray(rng.uniform(0.25, 4.0), dtype=dtype)
            la, ga = nll._cross_entropy_chain(x, t, g, reduction, -100)
            lb, gb = _four(x, t, g, reduction, -100)
            assert la.dtype == lb.dtype and la.tobytes() == lb.tobytes(), (n, c)
            assert ga.dtype == gb.dtype and ga.tobytes() == gb.tobytes(), (n, c)


def test_extreme_logits_and_ignored_targets():
    x = np.array([[1e30, -1e30, 0.0], [np.inf, 0.0, 1.0], [-np.inf, -np.inf, 2.0],
                  [np.nan, 1.0, 2.0]], dtype=np.float32)
    t = np.array([0, 1, 2, 1], dtype=np.int64)
    g = np.asarray(1.0, np.float32)
    for ign in (-100, 1):  # 1: ignored targets take the four functions
        la, ga = nll._cross_entropy_chain(x, t, g, "mean", ign)
        lb, gb = _four(x, t, g, "mean", ign)
        assert la.tobytes() == lb.tobytes() and ga.tobytes() == gb.tobytes()




@pytest.mark.parametrize("ce", [{}, {"reduction": "sum"}, {"ignore_index": 2}],
                         ids=["mean", "sum", "ignore_index"])
def test_compiled_step_runs_the_chain_with_eager_bits(ce, monkeypatch):
    monkeypatch.setenv("JITGRAD_FUSED_HEAD", "0")  # the chain alone (test_classifier_head.py:
    jg.manual_seed(0)                               # the head's step takes its first call)
    x, y = jg.randn(6, 5), jg.tensor([0, 1, 2, 1, 0, 2])
    models = [jg.nn.Linear(5, 3) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    eager, compiled = (cross_entropy_step(m, jg.optim.SGD(m.parameters(), lr=0.1), **ce)
                       for m in models)
    compiled = jg.compile(compiled)
    for _ in range(3):
        assert eager(x, y).item() == compiled(x, y).item()
        for a, b in zip(models[0].parameters(), models[1].parameters()):
            np.testing.assert_array_equal(a._data, b._data)
    assert sum(r is nothing for r in newest_plan(compiled).runners) == 3  # four calls, one runs


def test_log_probabilities_read_elsewhere_keep_the_four_calls():
    jg.manual_seed(0)
    lin = jg.nn.Linear(5, 3)
    x, y = jg.randn(6, 5), jg.tensor([0, 1, 2, 1, 0, 2])

    def step(x, y):
        logp = F.log_softmax(lin(x), 1)
        loss = F.nll_loss(logp, y)
        loss.backward()
        return loss, logp.detach() * 2  # the log-probabilities are returned too

    f = jg.compile(step)
    with jg.no_grad():
        want = F.log_softmax(lin(x), 1).numpy() * 2
    loss, lp = f(x, y)
    np.testing.assert_array_equal(lp.numpy(), want)
    assert not any(r is nothing for r in newest_plan(f).runners)
