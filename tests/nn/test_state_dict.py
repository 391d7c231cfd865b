"""state_dict / load_state_dict: keys, sharing, round trips (also from and to PyTorch),
strictness and PyTorch's error messages."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as jnn


def _model(M):
    M.manual_seed(0)
    return M.nn.Sequential(M.nn.Linear(3, 4), M.nn.BatchNorm1d(4), M.nn.ReLU(),
                           M.nn.Linear(4, 2, bias=False))


def test_keys_and_detached_shared_values(torch):
    jm, tm = _model(jitgrad), _model(torch)
    sd = jm.state_dict()
    assert list(sd) == list(tm.state_dict())
    w = sd["0.weight"]
    assert not w.requires_grad and w.grad_fn is None
    with jitgrad.no_grad():
        jm[0].weight.fill_(2.0)
    assert (w == 2.0).all()  # shares memory, as PyTorch's
    assert jm.state_dict(keep_vars=True)["0.weight"] is jm[0].weight
    assert list(jm.state_dict(prefix="net.")) == ["net." + k for k in sd]


def test_round_trip_and_interchange_with_torch(torch, H):
    a, b = _model(jitgrad), _model(jitgrad)
    a(jitgrad.randn(5, 3))  # moves the running statistics
    with jitgrad.no_grad():
        for p in b.parameters():
            p.fill_(0.0)
    assert repr(b.load_state_dict(a.state_dict())) == "<All keys matched successfully>"
    x = jitgrad.randn(6, 3)
    H.assert_close(b.eval()(x), a.eval()(x))
    tm = _model(torch)
    H.copy_params(a, tm, torch)  # jitgrad -> PyTorch
    H.assert_close(a(x), tm.eval()(torch.tensor(x.numpy())), rtol=1e-5)
    c = _model(jitgrad)
    c.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    H.assert_close(c.eval()(x), a(x))


def test_pickle_round_trip():
    a = _model(jitgrad)
    b = pickle.loads(pickle.dumps(a.state_dict()))
    c = _model(jitgrad)
    c.load_state_dict(b)
    for (k, v), w in zip(a.state_dict().items(), c.state_dict().values()):
        np.testing.assert_array_equal(v.numpy(), w.numpy(), err_msg=k)


def test_pickle_a_whole_model():
    a = _model(jitgrad)
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b[0].weight, jnn.Parameter) and b[0].weight.requires_grad
    x = jitgrad.randn(4, 3)
    np.testing.assert_array_equal(a.eval()(x).detach().numpy(), b.eval()(x).detach().numpy())


def test_non_persistent_buffers_are_left_out():
    m = jnn.Module()
    m.register_buffer("kept", jitgrad.ones(1))
    m.register_buffer("temp", jitgrad.ones(1), persistent=False)
    assert list(m.state_dict()) == ["kept"]
    assert sorted(n for n, _ in m.named_buffers()) == ["kept", "temp"]


def _msg(M, fn):
    with pytest.raises(RuntimeError) as e:
        fn(M)
    return str(e.value).replace("torch.Size", "SIZE").replace("jitgrad.Size", "SIZE")


ERRORS = [
    lambda M: M.nn.Linear(2, 3).load_state_dict({"weight": M.zeros(3, 2)}),
    lambda M: M.nn.Linear(2, 3).load_state_dict({"weight": M.zeros(3, 3), "bias": M.zeros(3),
                                                 "foo": M.zeros(1)}),
    lambda M: _model(M).load_state_dict({"0.weight": M.zeros(4, 3), "1.bias": M.zeros(5),
                                         "4.weight": M.zeros(1)}),
    lambda M: _model(M).load_state_dict({"0.bias": M.zeros(3), "weight": M.zeros(1)},
                                        strict=False),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_error_messages_match_torch(torch, i):
    expected = _msg(torch, ERRORS[i])
    assert _msg(jitgrad, ERRORS[i]) == expected
    assert expected.startswith("Error(s) in loading state_dict for ")


def test_strict_false_reports_keys(torch):
    for M in (jitgrad, torch):
        r = M.nn.Linear(2, 3).load_state_dict({"weight": M.zeros(3, 2), "x": M.zeros(1)},
                                              strict=False)
        assert r.missing_keys == ["bias"] and r.unexpected_keys == ["x"]
        assert "missing_keys=['bias']" in repr(r)


def test_loading_casts_dtype_and_assign():
    m = jnn.Linear(2, 2)
    m.load_state_dict({"weight": jitgrad.ones(2, 2, dtype=jitgrad.float64),
                       "bias": jitgrad.zeros(2, dtype=jitgrad.float64)})
    assert m.weight.dtype == jitgrad.float32 and (m.weight == 1).all()
    w = jitgrad.full((2, 2), 3.0)
    m.load_state_dict({"weight": w, "bias": jitgrad.zeros(2)}, assign=True)
    assert isinstance(m.weight, jnn.Parameter) and m.weight.requires_grad
    assert (m.weight == 3).all()
