"""RNN / LSTM / GRU and their cells: PyTorch's parameters (names, shapes, initialisation
bounds), outputs, final states and gradients (torch as the oracle, same weights), gradcheck,
errors, a compiled training step equal to eager, and CUDA equal to the CPU."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import assert_compiled_step_matches_eager

import jitgrad
import jitgrad.nn as nn
from jitgrad.autograd import gradcheck

CASES = {
    "lstm": (lambda M: M.nn.LSTM(4, 5, dtype=M.float64), (7, 3, 4)),
    "lstm_deep_bidirectional_batch_first": (
        lambda M: M.nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True,
                            dtype=M.float64), (3, 7, 4)),
    "lstm_unbatched_no_bias": (lambda M: M.nn.LSTM(4, 3, bias=False, dtype=M.float64), (5, 4)),
    "gru_two_layers": (lambda M: M.nn.GRU(4, 5, num_layers=2, dtype=M.float64), (6, 2, 4)),
    "gru_bidirectional_unbatched": (lambda M: M.nn.GRU(4, 5, bidirectional=True,
                                                       dtype=M.float64), (6, 4)),
    "rnn_relu": (lambda M: M.nn.RNN(4, 5, nonlinearity="relu", bias=False, dtype=M.float64),
                 (5, 2, 4)),
    "rnn_tanh_batch_first": (lambda M: M.nn.RNN(4, 5, batch_first=True, dtype=M.float64),
                             (2, 5, 4)),
    "lstm_projected": (lambda M: M.nn.LSTM(4, 5, proj_size=3, dtype=M.float64), (7, 3, 4)),
    "lstm_projected_deep_bidirectional": (
        lambda M: M.nn.LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=2,
                            batch_first=True, dtype=M.float64), (3, 5, 4)),
    "lstm_cell": (lambda M: M.nn.LSTMCell(4, 5, dtype=M.float64), (3, 4)),
    "gru_cell_unbatched": (lambda M: M.nn.GRUCell(4, 5, dtype=M.float64), (4,)),
    "rnn_cell_relu": (lambda M: M.nn.RNNCell(4, 5, nonlinearity="relu", dtype=M.float64),
                      (3, 4)),
}


def _leaves(r) -> list:
    if isinstance(r, tuple):
        return [t for e in r for t in _leaves(e)]
    return [r]


def _run(M, name, params=None, hx=None, device=None):
    make, shape = CASES[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    a = rng.standard_normal(shape)
    m = make(M)
    if device is not None:
        m = m.to(device)
    if params is None:
        params = {k: rng.standard_normal(tuple(v.shape)) * 0.5 for k, v in m.named_parameters()}
    kw = {} if device is None else {"device": device}
    with M.no_grad():
        for k, v in m.named_parameters():
            v.copy_(M.tensor(params[k], **kw))
    x = M.tensor(a, requires_grad=True, **kw)
    out = _leaves(m(x) if hx is None else m(x, hx))
    sum((t * (i + 1.0)).sum() for i, t in enumerate(out)).backward()
    return m, x, out, params


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_states_and_gradients_match_pytorch(name):
    torch = pytest.importorskip("torch")
    m, x, out, params = _run(jitgrad, name)
    mt, xt, outt, _ = _run(torch, name, params)
    assert repr(m) == repr(mt)
    assert [k for k, _ in m.named_parameters()] == [k for k, _ in mt.named_parameters()]
    assert len(out) == len(outt)
    for y, yt in zip(out, outt):
        assert tuple(y.shape) == tuple(yt.shape)
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-11, atol=1e-12)
    for (k, p), (_, pt) in zip(m.named_parameters(), mt.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), pt.grad.numpy(), rtol=1e-11, atol=1e-12,
                                   err_msg=k)


def test_initial_states_are_used():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    h0, c0 = rng.standard_normal((2, 3, 5)), rng.standard_normal((2, 3, 5))
    a = rng.standard_normal((4, 3, 4))
    outs = []
    for M in (jitgrad, torch):
        M.manual_seed(0)
        m = M.nn.LSTM(4, 5, num_layers=2, dtype=M.float64)
        if M is jitgrad:
            params = {k: rng.standard_normal(tuple(v.shape)) for k, v in m.named_parameters()}
        with M.no_grad():
            for k, v in m.named_parameters():
                v.copy_(M.tensor(params[k]))
        out, (h, c) = m(M.tensor(a), (M.tensor(h0), M.tensor(c0)))
        outs.append((out.detach().numpy(), h.detach().numpy(), c.detach().numpy()))
    for u, v in zip(*outs):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


def test_initialisation_bounds_and_errors():
    jitgrad.manual_seed(0)
    m = nn.GRU(3, 16, num_layers=2, bidirectional=True)
    bound = 1.0 / math.sqrt(16)
    for k, p in m.named_parameters():
        assert float(p.abs().max()) <= bound and p.dtype == jitgrad.float32, k
    assert m.weight_ih_l1_reverse.shape == (48, 32)
    with pytest.raises(RuntimeError, match="input.size.-1. must be equal to input_size. "
                                           "Expected 3, got 4"):
        m(jitgrad.ones(5, 2, 4))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(4, 2, 16\), got"):
        m(jitgrad.ones(5, 2, 3), jitgrad.zeros(1, 2, 16))
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D, got 4D"):
        nn.LSTM(3, 4)(jitgrad.ones(1, 2, 3, 4))


def test_projected_lstm_states_and_errors():
    """``proj_size``: the hidden state (and output) has ``proj_size`` features, the cell
    state ``hidden_size``; PyTorch's errors for sizes that cannot be."""
    m = nn.LSTM(4, 6, num_layers=2, proj_size=3)
    assert m.weight_hr_l1.shape == (3, 6) and m.weight_hh_l0.shape == (24, 3)
    assert m.weight_ih_l1.shape == (24, 3) and len(m.all_weights[0]) == 5
    out, (h, c) = m(jitgrad.ones(5, 2, 4))
    assert out.shape == (5, 2, 3) and h.shape == (2, 2, 3) and c.shape == (2, 2, 6)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(2, 2, 6\)"):
        m(jitgrad.ones(5, 2, 4), (jitgrad.zeros(2, 2, 3), jitgrad.zeros(2, 2, 3)))
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(4, 3, proj_size=3)
    with pytest.raises(ValueError, match="proj_size should be a positive integer or zero"):
        nn.LSTM(4, 3, proj_size=-1)


def test_gradcheck_lstm_and_gru():
    for make in (lambda: nn.LSTM(3, 2, dtype=jitgrad.float64),
                 lambda: nn.GRU(3, 2, bidirectional=True, dtype=jitgrad.float64)):
        jitgrad.manual_seed(1)
        m = make()
        x = jitgrad.tensor(np.random.default_rng(2).standard_normal((4, 2, 3)),
                           requires_grad=True)
        assert gradcheck(lambda t, m=m: m(t)[0], (x,), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_compiled_sequence_classifier_equals_eager():
    jitgrad.manual_seed(0)
    lstm, head = nn.LSTM(3, 8, batch_first=True), nn.Linear(8, 2)
    x = jitgrad.randn(4, 6, 3)
    y = jitgrad.tensor([0, 1, 1, 0])

    def step(x, y):
        out, (h, c) = lstm(x)
        return nn.functional.cross_entropy(head(out[:, -1]), y)
    params = list(lstm.parameters()) + list(head.parameters())
    assert_compiled_step_matches_eager(step, params, x, y)




def _node_names(t) -> list:
    seen, stack, names = set(), [t.grad_fn], []
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        names.append(type(n).__name__)
        stack.extend(f for f, _ in n.next_functions)
    return names


def test_lstm_layers_are_one_node_each_and_agree_with_the_cell():
    """A padded LSTM records one ``MkldnnRnnLayerBackward0`` per layer and direction (as
    PyTorch's CPU LSTM), and its states and gradients are those of ``LSTMCell`` run step by
    step with the same weights (to rounding: the layer's cell is one compiled pass with
    jitgrad's kernel math, the cell's NumPy's)."""
    jitgrad.manual_seed(0)
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True)
    names = _node_names(lstm(jitgrad.randn(6, 2, 3))[0])
    assert names.count("MkldnnRnnLayerBackward0") == 4 and "AddmmBackward0" not in names
    jitgrad.manual_seed(1)
    lstm, cell = nn.LSTM(3, 5), nn.LSTMCell(3, 5)
    with jitgrad.no_grad():
        for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, k).copy_(getattr(lstm, k + "_l0"))
    x = jitgrad.randn(7, 2, 3)
    h0, c0 = jitgrad.randn(1, 2, 5), jitgrad.randn(1, 2, 5)
    out, (h, c) = lstm(x, (h0, c0))
    hc, cc, steps = h0[0], c0[0], []
    for t in range(7):
        hc, cc = cell(x[t], (hc, cc))
        steps.append(hc)
    np.testing.assert_allclose(out.detach().numpy(), jitgrad.stack(steps).detach().numpy(),
                               rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(c[0].detach().numpy(), cc.detach().numpy(), rtol=2e-6,
                               atol=1e-7)
    w = jitgrad.randn(7, 2, 5)
    grads = jitgrad.autograd.grad((out * w).sum() + c.sum(), list(lstm.parameters()))
    ref = jitgrad.autograd.grad((jitgrad.stack(steps) * w).sum() + cc.sum(),
                                list(cell.parameters()))
    for g, r in zip(grads, ref):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lstm_layer_gradients_under_create_graph(dtype):
    """Under ``create_graph`` the layer's backward runs as differentiable ops: the same
    values (to rounding: the plain backward's cell is one compiled pass), and a second
    derivative that matches PyTorch's."""
    dt = getattr(jitgrad, dtype)
    jitgrad.manual_seed(2)
    m = nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True, dtype=dt)
    x = jitgrad.randn(2, 5, 3, dtype=dt, requires_grad=True)
    out, (h, c) = m(x)
    loss = (out ** 2).sum() + (c * 3.0).sum()
    inputs = [x, *m.parameters()]
    plain = jitgrad.autograd.grad(loss, inputs, retain_graph=True)
    graph = jitgrad.autograd.grad(loss, inputs, create_graph=True)
    tight = 2e-5 if dtype == "float32" else 1e-12
    for a, b in zip(plain, graph):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tight,
                                   atol=tight)
    assert graph[0].grad_fn is not None
    torch = pytest.importorskip("torch")
    mt = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True,
                       dtype=torch.float64)
    with torch.no_grad():
        for (_, p), (_, q) in zip(m.named_parameters(), mt.named_parameters()):
            q.copy_(torch.tensor(p.detach().numpy().astype(np.float64)))
    xt = torch.tensor(x.detach().numpy().astype(np.float64), requires_grad=True)
    outt, (_, ct) = mt(xt)
    gt, = torch.autograd.grad((outt ** 2).sum() + (ct * 3.0).sum(), xt, create_graph=True)
    ggt, = torch.autograd.grad(gt.pow(2).sum(), xt)
    gg, = jitgrad.autograd.grad(graph[0].pow(2).sum(), x)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(gg.numpy(), ggt.numpy(), rtol=tol, atol=tol)


def test_gru_layers_are_one_node_each_and_agree_with_the_cell():
    """A padded GRU records one ``GruLayerBackward0`` per layer and direction; its states
    and gradients agree with ``GRUCell`` run step by step (to rounding: the layer's sigmoid
    and tanh are NumPy's), and its double backward with PyTorch's."""
    jitgrad.manual_seed(0)
    gru = nn.GRU(3, 5, num_layers=2, bidirectional=True)
    names = _node_names(gru(jitgrad.randn(6, 2, 3))[0])
    assert names.count("GruLayerBackward0") == 4 and "AddmmBackward0" not in names
    jitgrad.manual_seed(1)
    gru, cell = nn.GRU(3, 5, dtype=jitgrad.float64), nn.GRUCell(3, 5, dtype=jitgrad.float64)
    with jitgrad.no_grad():
        for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, k).copy_(getattr(gru, k + "_l0"))
    x = jitgrad.randn(7, 2, 3, dtype=jitgrad.float64, requires_grad=True)
    h0 = jitgrad.randn(1, 2, 5, dtype=jitgrad.float64)
    out, h = gru(x, h0)
    hc, steps = h0[0], []
    for t in range(7):
        hc = cell(x[t], hc)
        steps.append(hc)
    np.testing.assert_allclose(out.detach().numpy(), jitgrad.stack(steps).detach().numpy(),
                               rtol=1e-13, atol=1e-14)
    w = jitgrad.randn(7, 2, 5, dtype=jitgrad.float64)
    grads = jitgrad.autograd.grad((out * w).sum(), [x, *gru.parameters()])
    ref = jitgrad.autograd.grad((jitgrad.stack(steps) * w).sum(), [x, *cell.parameters()])
    for g, r in zip(grads, ref):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-12, atol=1e-13)
    torch = pytest.importorskip("torch")
    mt = torch.nn.GRU(3, 5, dtype=torch.float64)
    with torch.no_grad():
        for (_, p), (_, q) in zip(gru.named_parameters(), mt.named_parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    gt, = torch.autograd.grad((mt(xt)[0] ** 2).sum(), xt, create_graph=True)
    ggt, = torch.autograd.grad(gt.pow(3).sum(), xt)
    g1, = jitgrad.autograd.grad((gru(x)[0] ** 2).sum(), x, create_graph=True)
    gg, = jitgrad.autograd.grad(g1.pow(3).sum(), x)
    np.testing.assert_allclose(gg.numpy(), ggt.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_rnn_layers_are_one_node_each_and_agree_with_the_cell(act):
    """A padded ``nn.RNN`` records one ``RnnLayerBackward0`` per layer and direction; its
    states and gradients are the cell's stepped by hand (to rounding); its double backward
    PyTorch's."""
    jitgrad.manual_seed(0)
    rnn = nn.RNN(3, 5, num_layers=2, bidirectional=True, nonlinearity=act)
    names = _node_names(rnn(jitgrad.randn(6, 2, 3))[0])
    assert names.count("RnnLayerBackward0") == 4 and "AddmmBackward0" not in names
    f64 = jitgrad.float64
    rnn, cell = nn.RNN(3, 5, nonlinearity=act, dtype=f64), nn.RNNCell(3, 5, nonlinearity=act,
                                                                      dtype=f64)
    with jitgrad.no_grad():
        for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, k).copy_(getattr(rnn, k + "_l0"))
    x = jitgrad.randn(7, 2, 3, dtype=f64, requires_grad=True)
    out, _ = rnn(x)
    hc, steps = jitgrad.zeros(2, 5, dtype=f64), []
    for t in range(7):
        hc = cell(x[t], hc)
        steps.append(hc)
    # (relu: the same bits; tanh: NumPy's in the layer, jitgrad's kernel in the cell)
    np.testing.assert_allclose(out.detach().numpy(), jitgrad.stack(steps).detach().numpy(),
                               rtol=1e-14 if act == "tanh" else 0, atol=0)
    grads = jitgrad.autograd.grad(out.pow(2).sum(), [x, *rnn.parameters()])
    ref = jitgrad.autograd.grad(jitgrad.stack(steps).pow(2).sum(), [x, *cell.parameters()])
    for g, r in zip(grads, ref):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-12, atol=1e-13)
    torch = pytest.importorskip("torch")
    mt = torch.nn.RNN(3, 5, nonlinearity=act, dtype=torch.float64)
    with torch.no_grad():
        for (_, p), (_, q) in zip(rnn.named_parameters(), mt.named_parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    gt, = torch.autograd.grad((mt(xt)[0] ** 3).sum(), xt, create_graph=True)
    ggt, = torch.autograd.grad(gt.pow(2).sum(), xt)
    g1, = jitgrad.autograd.grad((rnn(x)[0] ** 3).sum(), x, create_graph=True)
    gg, = jitgrad.autograd.grad(g1.pow(2).sum(), x)
    np.testing.assert_allclose(gg.numpy(), ggt.numpy(), rtol=1e-10, atol=1e-12)
