"""``InstanceNorm1d/2d/3d(track_running_stats=True)`` and ``F.instance_norm`` with running
statistics (jitgrad.nn.normalization, jitgrad.nn.functional) against PyTorch: outputs,
running buffers over several training steps, eval mode, gradients, state dicts, momentum
None, and PyTorch's errors and warning; gradcheck in float64."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(0)
SHAPES = {"InstanceNorm1d": [(4, 3, 7), (3, 7)], "InstanceNorm2d": [(2, 3, 4, 5), (3, 4, 5)],
          "InstanceNorm3d": [(2, 3, 2, 3, 4)]}
CASES = [(name, shape) for name, shapes in SHAPES.items() for shape in shapes]


def _pair(name: str, **kw):
    torch = pytest.importorskip("torch")
    return [getattr(M.nn, name)(3, **kw) for M in (jg, torch)], torch


def _same(j, t, rtol=1e-5, atol=1e-6, msg=""):
    np.testing.assert_allclose(j.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol,
                               err_msg=msg)


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("momentum", [0.3, None])
@pytest.mark.parametrize("name,shape", CASES)
def test_training_steps_and_eval_match_torch(name, shape, momentum, affine):
    (jm, tm), torch = _pair(name, affine=affine, track_running_stats=True, momentum=momentum)
    if affine:
        w, b = RNG.uniform(0.5, 1.5, 3), RNG.standard_normal(3)
        for m, M in ((jm, jg), (tm, torch)):
            with M.no_grad():
                m.weight.copy_(M.tensor(w))
                m.bias.copy_(M.tensor(b))
    for step in range(3):
        a = (RNG.standard_normal(shape) * (step + 1) + step).astype(np.float32)
        _same(jm(jg.tensor(a)), tm(torch.tensor(a)), msg=f"step {step}")
        for k in ("running_mean", "running_var", "num_batches_tracked"):
            _same(getattr(jm, k), getattr(tm, k), rtol=2e-6, msg=k)
    if momentum is None:  # PyTorch passes momentum 0.0: the statistics never move
        assert jm.running_mean.tolist() == [0.0] * 3 and jm.running_var.tolist() == [1.0] * 3
    assert jm.num_batches_tracked.item() == 0  # instance norm never counts (PyTorch's)
    jm.eval()
    tm.eval()
    a = RNG.standard_normal(shape).astype(np.float32)
    before = jm.running_mean.numpy().copy()
    _same(jm(jg.tensor(a)), tm(torch.tensor(a)))
    np.testing.assert_array_equal(jm.running_mean.numpy(), before)
    assert list(jm.state_dict()) == list(tm.state_dict())
    assert repr(jm) == repr(tm)


@pytest.mark.parametrize("training", [True, False])
def test_gradients_match_torch(training):
    (jm, tm), torch = _pair("InstanceNorm2d", affine=True, track_running_stats=True)
    a = RNG.standard_normal((2, 3, 4, 5))
    g = RNG.standard_normal((2, 3, 4, 5))
    stats = RNG.standard_normal(3), RNG.uniform(0.5, 2.0, 3)
    grads = []
    for m, M in ((jm, jg), (tm, torch)):
        m.double()
        with M.no_grad():
            m.running_mean.copy_(M.tensor(stats[0]))
            m.running_var.copy_(M.tensor(stats[1]))
            m.weight.copy_(M.tensor([0.5, 1.0, 2.0]))
        m.train(training)
        x = M.tensor(a, requires_grad=True)
        (m(x) * M.tensor(g)).sum().backward()
        grads.append([x.grad, m.weight.grad, m.bias.grad, m.running_mean, m.running_var])
    for j, t in zip(*grads):
        _same(j, t, rtol=1e-10, atol=1e-12)


def test_functional_gradcheck_in_float64():
    x = jg.tensor(RNG.standard_normal((2, 3, 5)), requires_grad=True)
    w = jg.tensor(RNG.uniform(0.5, 1.5, 3), requires_grad=True)
    b = jg.tensor(RNG.standard_normal(3), requires_grad=True)
    rm = jg.tensor(RNG.standard_normal(3))
    rv = jg.tensor(RNG.uniform(0.5, 2.0, 3))
    train = lambda x, w, b: F.instance_norm(x, rm.clone(), rv.clone(), w, b)  # noqa: E731
    evaluate = lambda x, w, b: F.instance_norm(x, rm, rv, w, b,  # noqa: E731
                                               use_input_stats=False)
    for f in (train, evaluate):
        assert gradcheck(f, (x, w, b))
        assert gradgradcheck(f, (x, w, b))


@pytest.mark.parametrize("use_input_stats", [True, False])
@pytest.mark.parametrize("momentum", [0.1, 0.0, 1.0])
def test_functional_matches_torch(use_input_stats, momentum):
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((3, 2, 6)).astype(np.float32) * 2 + 1
    stats = RNG.standard_normal(2).astype(np.float32), RNG.uniform(0.5, 2, 2).astype(np.float32)
    w, b = RNG.uniform(0.5, 1.5, 2).astype(np.float32), RNG.standard_normal(2).astype(np.float32)
    res = []
    for M, Fn in ((jg, F), (torch, torch.nn.functional)):
        rm, rv = M.tensor(stats[0]), M.tensor(stats[1])
        out = Fn.instance_norm(M.tensor(a), rm, rv, M.tensor(w), M.tensor(b),
                               use_input_stats, momentum, 1e-3)
        res.append((out, rm, rv))
    for j, t in zip(*res):
        _same(j, t)


def test_running_stats_keep_their_dtype():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((2, 3, 5))
    for x_dt, stat_dt in (("float64", "float32"), ("float32", "float64")):
        res = []
        for M, Fn in ((jg, F), (torch, torch.nn.functional)):
            rm, rv = M.zeros(3, dtype=getattr(M, stat_dt)), M.ones(3, dtype=getattr(M, stat_dt))
            out = Fn.instance_norm(M.tensor(a.astype(x_dt)), rm, rv)
            res.append((out, rm, rv))
        for j, t in zip(*res):
            assert str(j.dtype).split(".")[1] == str(t.dtype).split(".")[1]
            _same(j, t)


def _error(call):
    torch = pytest.importorskip("torch")
    out = []
    for M, Fn in ((jg, F), (torch, torch.nn.functional)):
        with pytest.raises(Exception) as e:
            call(M, Fn)
        out.append((type(e.value), str(e.value).replace("torch.", "jitgrad.")))
    return out


@pytest.mark.parametrize("call", [
    lambda M, Fn: Fn.instance_norm(M.ones(2, 3, 4), use_input_stats=False),
    lambda M, Fn: Fn.instance_norm(M.ones(2, 3, 4), M.zeros(3), None, use_input_stats=False),
    lambda M, Fn: Fn.instance_norm(M.ones(2, 3, 4), M.zeros(3), None),
    lambda M, Fn: Fn.instance_norm(M.ones(2, 3, 4), M.zeros(4), M.ones(3)),
    lambda M, Fn: Fn.instance_norm(M.ones(2, 3, 4), M.zeros(3), M.ones(4)),
    lambda M, Fn: Fn.instance_norm(M.ones(2, 3, 4), weight=M.ones(5)),
    lambda M, Fn: Fn.instance_norm(M.ones(2, 3, 4), M.zeros(3), M.ones(3), bias=M.ones(2),
                                   use_input_stats=False),
    lambda M, Fn: Fn.instance_norm(M.ones(2, 3, 1)),
    lambda M, Fn: Fn.instance_norm(M.ones(3, 4)),
    lambda M, Fn: M.nn.InstanceNorm1d(3, affine=True)(M.ones(2, 4, 5)),
    lambda M, Fn: M.nn.InstanceNorm1d(3, track_running_stats=True)(M.ones(2, 4, 5)),
    lambda M, Fn: M.nn.InstanceNorm1d(3)(M.ones(2, 3, 4, 5)),
    lambda M, Fn: M.nn.InstanceNorm2d(3, affine=True)(M.ones(4, 5, 5)),
    lambda M, Fn: M.nn.InstanceNorm3d(3)(M.ones(2, 3, 4)),
], ids=lambda c: "")
@pytest.mark.filterwarnings("ignore:input's size at dim")
def test_errors_as_torch(call):
    (jt, jm), (tt, tm) = _error(call)
    assert jt is tt and jm == tm


def test_channel_mismatch_without_affine_warns_as_torch():
    torch = pytest.importorskip("torch")
    msgs = []
    for M in (jg, torch):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            M.nn.InstanceNorm1d(3)(M.ones(2, 4, 5))
            M.nn.InstanceNorm2d(3)(M.ones(4, 5, 5))
        msgs.append([str(x.message) for x in w if x.category is UserWarning])
    assert msgs[0] == msgs[1] and len(msgs[0]) == 2


def test_state_dicts_load_both_ways():
    torch = pytest.importorskip("torch")
    (jm, tm), _ = _pair("InstanceNorm2d", affine=True, track_running_stats=True)
    tm(torch.randn(2, 3, 4, 4))
    jm.load_state_dict({k: jg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    for k, v in tm.state_dict().items():
        np.testing.assert_array_equal(jm.state_dict()[k].numpy(), v.numpy())
    jm(jg.randn(2, 3, 4, 4))
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in jm.state_dict().items()})
    assert tm.running_mean.tolist() == jm.running_mean.tolist()
    old = {k: v for k, v in jm.state_dict().items() if k != "num_batches_tracked"}
    jm.load_state_dict(old)  # a checkpoint from before num_batches_tracked (PyTorch loads it)


def test_untracked_has_none_buffers_and_uses_instance_stats_in_eval():
    m = jg.nn.InstanceNorm1d(3)
    assert m.running_mean is None and m.running_var is None and m.num_batches_tracked is None
    assert list(m.state_dict()) == []
    x = jg.randn(2, 3, 6)
    m.eval()
    np.testing.assert_allclose(m(x).numpy(), F.instance_norm(x).numpy())


def test_reset_and_dtype():
    m = jg.nn.InstanceNorm3d(2, affine=True, track_running_stats=True, dtype=jg.float64)
    assert m.running_mean.dtype is jg.float64 and m.num_batches_tracked.dtype is jg.int64
    m(jg.randn(2, 2, 3, 3, 3, dtype=jg.float64))
    with jg.no_grad():
        m.weight.fill_(3.0)
    assert m.running_mean.abs().sum().item() > 0
    m.reset_parameters()
    assert m.running_mean.tolist() == [0.0, 0.0] and m.running_var.tolist() == [1.0, 1.0]
    assert m.weight.tolist() == [1.0, 1.0]
