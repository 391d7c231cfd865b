"""jitgrad.nn.utils against torch.nn.utils: parameters_to_vector / vector_to_parameters,
weight_norm and spectral_norm (hook API and parametrizations: state_dict keys, reprs, values
and gradients with identical state loaded both ways, old checkpoints), the parametrize API,
the conv/linear + batch-norm fusions, skip_init, stateless.functional_call."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_close as _close
from helpers import assert_same_error as _errors

import jitgrad
import jitgrad.nn as nn
from jitgrad.nn import utils as U
from jitgrad.nn.utils import parametrizations as P
from jitgrad.nn.utils import parametrize

torch = pytest.importorskip("torch")
TU = torch.nn.utils


def _to_torch(sd):
    return {k: torch.tensor(np.array(v.numpy())) for k, v in sd.items()}


def _to_jit(sd):
    return {k: jitgrad.tensor(v.detach().numpy()) for k, v in sd.items()}


def _run(jm, tm, x, rng):
    """Forward and a weighted-sum backward in both; returns the outputs."""
    jo, to = jm(jitgrad.tensor(x)), tm(torch.tensor(x))
    w = rng.standard_normal(tuple(jo.shape))
    (jo * jitgrad.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    return jo, to


def _grads_equal(jm, tm, tol=1e-10):
    jp, tp = dict(jm.named_parameters()), dict(tm.named_parameters())
    assert list(jp) == list(tp)
    for k in jp:
        _close(jp[k].grad, tp[k].grad, tol)


# --------------------------------------------------------------------- vectors
def test_parameters_to_vector_and_back():
    jm = nn.Linear(3, 2, dtype=jitgrad.float64)
    tm = torch.nn.Linear(3, 2, dtype=torch.float64)
    tm.load_state_dict(_to_torch(jm.state_dict()))
    jv, tv = U.parameters_to_vector(jm.parameters()), TU.parameters_to_vector(tm.parameters())
    _close(jv, tv)
    (jv * jitgrad.arange(8.0, dtype=jitgrad.float64)).sum().backward()
    (tv * torch.arange(8.0, dtype=torch.float64)).sum().backward()
    _grads_equal(jm, tm)
    new = np.arange(8.0) / 10
    vec = jitgrad.tensor(new)
    U.vector_to_parameters(vec, jm.parameters())
    TU.vector_to_parameters(torch.tensor(new), tm.parameters())
    for (_, a), (_, b) in zip(jm.named_parameters(), tm.named_parameters()):
        _close(a, b)
    vec[0] = 42.0  # the parameters are views of the vector, as in PyTorch
    assert float(jm.weight[0, 0]) == 42.0
    _errors(lambda: U.vector_to_parameters([1.0], jm.parameters()),
            lambda: TU.vector_to_parameters([1.0], tm.parameters()))


# -------------------------------------------------------------- weight norm (hooks)
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_hook_api(dim):
    rng = np.random.default_rng(0)
    with pytest.warns(FutureWarning, match="torch.nn.utils.weight_norm` is deprecated"):
        jm = U.weight_norm(nn.Linear(4, 3, dtype=jitgrad.float64), dim=dim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        tm = TU.weight_norm(torch.nn.Linear(4, 3, dtype=torch.float64), dim=dim)
    assert list(jm.state_dict()) == list(tm.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert tuple(jm.weight_g.shape) == tuple(tm.weight_g.shape)
    tm.load_state_dict(_to_torch(jm.state_dict()))
    jo, to = _run(jm, tm, rng.standard_normal((5, 4)), rng)
    _close(jo, to)
    _grads_equal(jm, tm)
    U.remove_weight_norm(jm)
    TU.remove_weight_norm(tm)
    assert list(jm.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    _close(jm.weight, tm.weight)
    assert isinstance(jm.weight, nn.Parameter)


def test_weight_norm_hook_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        jm = U.weight_norm(nn.Linear(2, 2))
        tm = TU.weight_norm(torch.nn.Linear(2, 2))
        _errors(lambda: U.weight_norm(jm), lambda: TU.weight_norm(tm))
    _errors(lambda: U.remove_weight_norm(nn.Linear(2, 2)),
            lambda: TU.remove_weight_norm(torch.nn.Linear(2, 2)))


# ------------------------------------------------------- weight norm (parametrization)
def test_weight_norm_parametrization():
    rng = np.random.default_rng(1)
    jm = P.weight_norm(nn.Conv2d(2, 3, 3, dtype=jitgrad.float64))
    tm = TU.parametrizations.weight_norm(torch.nn.Conv2d(2, 3, 3, dtype=torch.float64))
    assert repr(jm) == repr(tm)
    assert list(jm.state_dict()) == list(tm.state_dict()) == [
        "bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    assert [k for k, _ in jm.named_parameters()] == [k for k, _ in tm.named_parameters()]
    tm.load_state_dict(_to_torch(jm.state_dict()))
    jo, to = _run(jm, tm, rng.standard_normal((2, 2, 5, 5)), rng)
    _close(jo, to)
    _grads_equal(jm, tm)
    jm2 = P.weight_norm(nn.Conv2d(2, 3, 3, dtype=jitgrad.float64))
    jm2.load_state_dict(_to_jit(tm.state_dict()))
    _close(jm2.weight, tm.weight)
    assert parametrize.is_parametrized(jm) and parametrize.is_parametrized(jm, "weight")
    assert not parametrize.is_parametrized(jm, "bias")
    assert parametrize.type_before_parametrizations(jm) is nn.Conv2d
    parametrize.remove_parametrizations(jm, "weight")
    TU.parametrize.remove_parametrizations(tm, "weight")
    assert type(jm) is nn.Conv2d and repr(jm) == repr(tm)
    assert list(jm.state_dict()) == list(tm.state_dict())
    _close(jm.weight, tm.weight)


def test_weight_norm_parametrization_loads_hook_api_checkpoints():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old = TU.weight_norm(torch.nn.Linear(3, 2, dtype=torch.float64))
    jm = P.weight_norm(nn.Linear(3, 2, dtype=jitgrad.float64))
    jm.load_state_dict(_to_jit(old.state_dict()))
    _close(jm.parametrizations.weight.original0, old.weight_g)
    _close(jm.parametrizations.weight.original1, old.weight_v)
    _close(jm.weight, old.weight)


# ------------------------------------------------------------------ spectral norm
@pytest.mark.parametrize("make", [
    lambda M: M.nn.Linear(5, 4, dtype=M.float64),
    lambda M: M.nn.Conv2d(2, 3, 3, dtype=M.float64),
    lambda M: M.nn.ConvTranspose2d(2, 3, 3, dtype=M.float64)])
def test_spectral_norm_parametrization(make):
    rng = np.random.default_rng(2)
    jm = P.spectral_norm(make(jitgrad), n_power_iterations=2)
    tm = TU.parametrizations.spectral_norm(make(torch), n_power_iterations=2)
    assert jm.parametrizations.weight[0].dim == tm.parametrizations.weight[0].dim
    assert list(jm.state_dict()) == list(tm.state_dict())
    assert repr(jm) == repr(tm)
    jm.load_state_dict(_to_jit(tm.state_dict()))  # the same u, v to start from
    x = rng.standard_normal((2, 5) if isinstance(jm, nn.Linear) else (2, 2, 4, 4))
    for _ in range(2):  # training: a power-iteration step per forward
        jo, to = _run(jm, tm, x, rng)
        _close(jo, to, 1e-9)
        _close(jm.parametrizations.weight[0]._u, tm.parametrizations.weight[0]._u, 1e-9)
    _grads_equal(jm, tm, 1e-8)
    jm.eval()
    tm.eval()
    _close(jm(jitgrad.tensor(x)), tm(torch.tensor(x)), 1e-9)
    _close(jm.parametrizations.weight[0]._v, tm.parametrizations.weight[0]._v, 1e-9)


def test_spectral_norm_normalises_and_errors():
    jitgrad.manual_seed(0)
    m = P.spectral_norm(nn.Linear(6, 5, dtype=jitgrad.float64), n_power_iterations=30)
    m(jitgrad.ones(1, 6, dtype=jitgrad.float64))
    sigma = np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)[0]
    assert abs(sigma - 1.0) < 1e-6
    _errors(lambda: P.spectral_norm(nn.Linear(2, 2), n_power_iterations=0),
            lambda: TU.parametrizations.spectral_norm(torch.nn.Linear(2, 2),
                                                      n_power_iterations=0))
    _errors(lambda: P.spectral_norm(nn.Linear(2, 2), dim=3),
            lambda: TU.parametrizations.spectral_norm(torch.nn.Linear(2, 2), dim=3))
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'w'"):
        P.spectral_norm(nn.Linear(2, 2), name="w")


def test_spectral_norm_hook_api():
    rng = np.random.default_rng(3)
    jm = U.spectral_norm(nn.Linear(4, 3, dtype=jitgrad.float64))
    tm = TU.spectral_norm(torch.nn.Linear(4, 3, dtype=torch.float64))
    assert list(jm.state_dict()) == list(tm.state_dict()) == [
        "bias", "weight_orig", "weight_u", "weight_v"]
    jm.load_state_dict(_to_jit(tm.state_dict()))
    x = rng.standard_normal((2, 4))
    for _ in range(2):
        jo, to = _run(jm, tm, x, rng)
        _close(jo, to, 1e-9)
    _close(jm.weight_u, tm.weight_u, 1e-9)
    _grads_equal(jm, tm, 1e-8)
    U.remove_spectral_norm(jm)
    TU.remove_spectral_norm(tm)
    assert list(jm.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    _close(jm.weight, tm.weight, 1e-9)
    _errors(lambda: U.remove_spectral_norm(jm), lambda: TU.remove_spectral_norm(tm))


# ---------------------------------------------------------------- parametrize API
def _symmetric(M):
    class Symmetric(M.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(0, 1)

        def right_inverse(self, a):
            return a.triu()
    return Symmetric()


def _doubled(M):
    class Double(M.nn.Module):
        def forward(self, x):
            return x * 2
    return Double()


def test_register_parametrization_custom():
    rng = np.random.default_rng(4)
    jm = nn.Linear(3, 3, dtype=jitgrad.float64)
    tm = torch.nn.Linear(3, 3, dtype=torch.float64)
    tm.load_state_dict(_to_torch(jm.state_dict()))
    parametrize.register_parametrization(jm, "weight", _symmetric(jitgrad))
    TU.parametrize.register_parametrization(tm, "weight", _symmetric(torch))
    parametrize.register_parametrization(jm, "weight", _doubled(jitgrad))
    TU.parametrize.register_parametrization(tm, "weight", _doubled(torch))
    assert repr(jm).replace("jitgrad", "torch") == repr(tm)
    assert list(jm.state_dict()) == list(tm.state_dict())
    _close(jm.weight, tm.weight)
    jo, to = _run(jm, tm, rng.standard_normal((2, 3)), rng)
    _close(jo, to)
    _grads_equal(jm, tm)
    with parametrize.cached():
        assert jm.weight is jm.weight
    assert jm.weight is not jm.weight
    # assigning runs right_inverse (the last parametrization has none: PyTorch's error)
    _errors(lambda: setattr(jm, "weight", jitgrad.zeros(3, 3, dtype=jitgrad.float64)),
            lambda: setattr(tm, "weight", torch.zeros(3, 3, dtype=torch.float64)))
    parametrize.remove_parametrizations(jm, "weight", leave_parametrized=False)
    TU.parametrize.remove_parametrizations(tm, "weight", leave_parametrized=False)
    _close(jm.weight, tm.weight)
    assert type(jm) is nn.Linear


def test_parametrization_assignment_and_errors():
    jm = nn.Linear(3, 3, dtype=jitgrad.float64)
    parametrize.register_parametrization(jm, "weight", _symmetric(jitgrad))
    value = np.arange(9.0).reshape(3, 3)
    value = value + value.T
    jm.weight = jitgrad.tensor(value)
    _close(jm.weight, value)
    _close(jm.parametrizations.weight.original, np.triu(value))

    class Shrink(nn.Module):
        def forward(self, x):
            return x[:2]

    class TShrink(torch.nn.Module):
        def forward(self, x):
            return x[:2]

    _errors(lambda: parametrize.register_parametrization(nn.Linear(3, 3), "weight", Shrink()),
            lambda: TU.parametrize.register_parametrization(torch.nn.Linear(3, 3), "weight",
                                                            TShrink()))
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a "
                                         "parametrized element with name 'w'"):
        parametrize.register_parametrization(nn.Linear(3, 3), "w", Shrink())
    with pytest.raises(ValueError, match="does not have a parametrization on bias"):
        parametrize.remove_parametrizations(jm, "bias")
    with pytest.raises(RuntimeError, match="Serialization of parametrized modules is only "
                                           "supported through state_dict"):
        import pickle

        pickle.dumps(jm)
    import copy

    twin = copy.deepcopy(jm)
    _close(twin.weight, jm.weight)
    assert twin.parametrizations.weight.original is not jm.parametrizations.weight.original


# ------------------------------------------------------------------------- fusion
def _bn_pair(n, jm_bn, tm_bn, rng):
    """Give both batch norms the same non-trivial running statistics and affine params."""
    state = {"weight": rng.uniform(0.5, 2, n), "bias": rng.standard_normal(n),
             "running_mean": rng.standard_normal(n), "running_var": rng.uniform(0.5, 2, n),
             "num_batches_tracked": np.array(3)}
    jm_bn.load_state_dict({k: jitgrad.tensor(v) for k, v in state.items()})
    tm_bn.load_state_dict({k: torch.tensor(v) for k, v in state.items()})


@pytest.mark.parametrize("conv", ["Conv2d", "Conv1d", "ConvTranspose2d"])
@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn_eval(conv, bias):
    rng = np.random.default_rng(5)
    transpose = conv.startswith("ConvTranspose")
    two_d = conv.endswith("2d")
    jc = getattr(nn, conv)(2, 4, 3, bias=bias, dtype=jitgrad.float64).eval()
    tc = getattr(torch.nn, conv)(2, 4, 3, bias=bias, dtype=torch.float64).eval()
    tc.load_state_dict(_to_torch(jc.state_dict()))
    bn = "BatchNorm2d" if two_d else "BatchNorm1d"
    jb = getattr(nn, bn)(4, dtype=jitgrad.float64).eval()
    tb = getattr(torch.nn, bn)(4, dtype=torch.float64).eval()
    _bn_pair(4, jb, tb, rng)
    jf = U.fuse_conv_bn_eval(jc, jb, transpose=transpose)
    tf = TU.fuse_conv_bn_eval(tc, tb, transpose=transpose)
    assert type(jf) is type(jc) and jf is not jc
    _close(jf.weight, tf.weight)
    _close(jf.bias, tf.bias)
    assert isinstance(jf.weight, nn.Parameter) and jf.weight.requires_grad
    x = jitgrad.tensor(rng.standard_normal((2, 2, 5, 5) if two_d else (2, 2, 6)))
    _close(jf(x), jb(jc(x)))
    _errors(lambda: U.fuse_conv_bn_eval(jc.train(), jb), lambda: TU.fuse_conv_bn_eval(
        tc.train(), tb))


def test_fuse_linear_bn_eval():
    rng = np.random.default_rng(6)
    jl = nn.Linear(3, 4, dtype=jitgrad.float64).eval()
    tl = torch.nn.Linear(3, 4, dtype=torch.float64).eval()
    tl.load_state_dict(_to_torch(jl.state_dict()))
    jb = nn.BatchNorm1d(4, dtype=jitgrad.float64).eval()
    tb = torch.nn.BatchNorm1d(4, dtype=torch.float64).eval()
    _bn_pair(4, jb, tb, rng)
    jf, tf = U.fuse_linear_bn_eval(jl, jb), TU.fuse_linear_bn_eval(tl, tb)
    _close(jf.weight, tf.weight)
    _close(jf.bias, tf.bias)
    x = jitgrad.tensor(rng.standard_normal((5, 3)))
    _close(jf(x), jb(jl(x)))
    _errors(lambda: U.fuse_linear_bn_eval(jl, nn.BatchNorm1d(3).eval()),
            lambda: TU.fuse_linear_bn_eval(tl, torch.nn.BatchNorm1d(3).eval()))
    w, b = U.fuse_linear_bn_weights(jl.weight, None, jb.running_mean, jb.running_var, jb.eps,
                                    jb.weight, jb.bias)
    tw, tb_ = TU.fuse_linear_bn_weights(tl.weight, None, tb.running_mean, tb.running_var,
                                        tb.eps, tb.weight, tb.bias)
    _close(w, tw)
    _close(b, tb_)
    assert not b.requires_grad and not tb_.requires_grad


# ------------------------------------------------------------ skip_init, stateless
def test_skip_init():
    m = U.skip_init(nn.Linear, 3, 4, bias=False)
    assert type(m) is nn.Linear and tuple(m.weight.shape) == (4, 3) and m.bias is None
    assert repr(m) == repr(torch.nn.utils.skip_init(torch.nn.Linear, 3, 4, bias=False))
    conv = U.skip_init(nn.Conv2d, 2, 3, 3, dtype=jitgrad.float64)
    assert conv.weight.dtype == jitgrad.float64 and type(conv) is nn.Conv2d
    lstm = U.skip_init(nn.LSTM, 2, 3)
    assert [k for k, _ in lstm.named_parameters()] == [
        k for k, _ in torch.nn.LSTM(2, 3).named_parameters()]

    class NoDevice(nn.Module):
        def __init__(self, n):
            super().__init__()

    class TNoDevice(torch.nn.Module):
        def __init__(self, n):
            super().__init__()

    _errors(lambda: U.skip_init(NoDevice, 1), lambda: TU.skip_init(TNoDevice, 1))
    with pytest.raises(RuntimeError, match="Expected a Module; got"):
        U.skip_init(int, 1)


def test_stateless_functional_call():
    from jitgrad.func import functional_call

    lin = nn.Linear(2, 1)
    own = lin.weight
    params = {"weight": jitgrad.ones(1, 2), "bias": jitgrad.zeros(1)}
    x = jitgrad.tensor([[1.0, 2.0]])
    with pytest.warns(FutureWarning, match="stateless.functional_call` is deprecated"):
        out = U.stateless.functional_call(lin, params, (x,))
    assert out.tolist() == [[3.0]] == functional_call(lin, params, (x,)).tolist()
    assert lin.weight is own  # the module's own parameters are back


# --------------------------------------------------------------- docs, lazy loading
@pytest.mark.parametrize("module", [
    "jitgrad.nn.utils.rnn", "jitgrad.nn.utils.parametrize",
    "jitgrad.nn.utils.convert_parameters", "jitgrad.utils.checkpoint",
    "jitgrad.utils.data.composite", "jitgrad.utils.data.more_samplers",
    "jitgrad.utils.data.worker", "jitgrad.nn.buffer", "jitgrad.nn.lazy", "jitgrad.nn.pdist"])
def test_docstring_examples(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed


def test_import_jitgrad_does_not_load_the_new_modules():
    from helpers import python_prints

    names = ["jitgrad.nn.utils.rnn", "jitgrad.nn.utils.parametrize", "jitgrad.nn.lazy",
             "jitgrad.utils.checkpoint", "jitgrad.nn.pooling_extra", "jitgrad.nn.pdist",
             "jitgrad.nn.random_activations", "jitgrad.nn.sync_batchnorm",
             "jitgrad.nn.parallel.data_parallel", "jitgrad.nn.buffer"]
    code = ("import sys, jitgrad; names = " + repr(names) + "; "
            "print(sum(n in sys.modules for n in names)); "
            "jitgrad.nn.LazyLinear; jitgrad.nn.utils.rnn.pack_sequence; "
            "jitgrad.utils.checkpoint.checkpoint; jitgrad.nn.functional.pdist; "
            "print(sum(n in sys.modules for n in names))")
    assert python_prints(code) == ["0", "4"]
