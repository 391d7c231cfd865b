"""``nn.utils.prune``: the reparametrisation (``name_orig``, ``name_mask``, the pre-hook),
every method's mask, combined pruning, global pruning, ``remove`` and the errors, against
PyTorch where it is installed (same weights; the random methods by their counts)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.nn.utils import prune


def _run(M) -> list:
    """A pruning session on ``M`` (jitgrad or torch): what a user observes at each step."""
    P = importlib.import_module(M.__name__ + ".nn.utils.prune")
    rng = np.random.default_rng(0)

    def lin(i, o):
        m = M.nn.Linear(i, o)
        with M.no_grad():
            m.weight.copy_(M.tensor(rng.standard_normal((o, i)).astype(np.float32)))
            m.bias.copy_(M.tensor(rng.standard_normal(o).astype(np.float32)))
        return m

    m = M.nn.Sequential(lin(6, 5), M.nn.ReLU(), lin(5, 3))
    seen = []
    P.l1_unstructured(m[0], "weight", amount=0.3)
    seen += [sorted(k for k, _ in m[0].named_parameters()),
             sorted(k for k, _ in m[0].named_buffers()), m[0].weight_mask.tolist(),
             P.is_pruned(m)]
    P.ln_structured(m[0], "weight", amount=2, n=2, dim=0)  # combined with the first
    seen.append(m[0].weight_mask.tolist())
    P.l1_unstructured(m[2], "bias", amount=1)
    x = M.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    out = m(x)
    out.sum().backward()
    seen += [np.round(out.detach().numpy(), 5).tolist(),
             np.round(m[0].weight_orig.grad.numpy(), 5).tolist()]
    P.global_unstructured([(m[0], "weight"), (m[2], "weight")],
                          pruning_method=P.L1Unstructured, amount=10)
    seen += [m[0].weight_mask.tolist(), m[2].weight_mask.tolist()]
    P.custom_from_mask(m[2], "bias", mask=M.tensor([1.0, 0.0, 1.0]))
    seen += [m[2].bias_mask.tolist(), len(m[2]._forward_pre_hooks)]
    P.remove(m[0], "weight")
    seen += [sorted(k for k, _ in m[0].named_parameters()),
             sorted(k for k, _ in m[0].named_buffers()), int((m[0].weight == 0).sum()),
             sorted(m.state_dict()), P.is_pruned(M.nn.Linear(2, 2)),
             P.L1Unstructured(amount=2).prune(M.tensor([[1.0, -3.0], [0.5, 2.0]])).tolist()]
    for call in (lambda: P.remove(m[0], "weight"),
                 lambda: P.l1_unstructured(m[0], "weight", amount=1.5),
                 lambda: P.ln_structured(m[0], "bias", amount=1, n=2, dim=0),
                 lambda: P.random_unstructured(m[0], "bias", amount=9)):
        with pytest.raises(ValueError) as e:
            call()
        seen.append(str(e.value).replace(M.__name__ + ".", ""))
    return seen


def test_pruning_session_by_hand():
    seen = _run(jg)
    assert seen[0] == ["bias", "weight_orig"] and seen[1] == ["weight_mask"]
    assert sum(map(sum, seen[2])) == 21 and seen[3] is True  # 30 weights, 9 pruned
    assert sum(1 for row in seen[4] if any(row)) == 3  # two of five rows pruned
    assert seen[-1].startswith("amount=9 should be smaller than the number of parameters")
    assert seen[11] == ["bias", "weight"] and seen[12] == [] and "0.weight" in seen[14]


def test_pruning_session_matches_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = _run(jg), _run(torch)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if isinstance(a, list) and a and isinstance(a[0], list) and \
                isinstance(a[0][0], float):  # outputs and gradients: BLAS rounding apart
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-5)
        else:
            assert a == b


def test_random_methods_prune_the_amount_asked():
    jg.manual_seed(0)
    m = jg.nn.Linear(8, 6)
    prune.random_unstructured(m, "weight", amount=0.25)
    assert int((m.weight_mask == 0).sum()) == 12
    prune.random_structured(m, "weight", amount=2, dim=0)
    rows = m.weight_mask.sum(1)
    assert int((rows == 0).sum()) == 2 and int((m.weight_mask == 0).sum()) >= 12 + 2 * 8 - 12
    assert isinstance(m._forward_pre_hooks[next(iter(m._forward_pre_hooks))],
                      prune.PruningContainer)
    x = jg.randn(3, 8)
    assert jg.equal(m(x), x @ (m.weight_orig * m.weight_mask).t() + m.bias)


def test_a_pruned_model_trains_compiled_as_eagerly():
    """A pruned layer's forward pre-hook runs at every call: the compiled step runs it
    eagerly (a graph break, with a warning), with eager's results."""
    import warnings

    runs = []
    for compiled in (False, True):
        jg.manual_seed(0)
        m = jg.nn.Sequential(jg.nn.Linear(6, 5), jg.nn.ReLU(), jg.nn.Linear(5, 3))
        prune.l1_unstructured(m[0], "weight", amount=0.5)
        opt = jg.optim.SGD(m.parameters(), lr=0.1)

        def step(x, m=m, opt=opt):
            opt.zero_grad()
            loss = m(x).pow(2).sum()
            loss.backward()
            opt.step()
            return loss

        f = jg.compile(step) if compiled else step
        x = jg.randn(4, 6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            losses = [float(f(x)) for _ in range(3)]
        runs.append((losses, m[0].weight.detach().numpy(), m[0].weight_orig.detach().numpy()))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    np.testing.assert_array_equal(runs[0][2], runs[1][2])


def test_pruned_rnn_keeps_its_weight_order():
    """``all_weights`` / ``_flat_weights_names`` keep PyTorch's order after a weight is
    pruned and the pruning removed (it is registered again under its name)."""
    m = jg.nn.LSTM(3, 4)
    names = m._flat_weights_names
    prune.l1_unstructured(m, "weight_hh_l0", amount=0.5)
    prune.remove(m, "weight_hh_l0")
    assert m._flat_weights_names == names == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
                                              "bias_hh_l0"]
    assert [tuple(w.shape) for w in m.all_weights[0]] == [(16, 3), (16, 4), (16,), (16,)]
