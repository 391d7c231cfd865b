"""torch.compile's API: ``compile(module)`` gives an ``OptimizedModule``, ``Module.compile()``
compiles in place, torch's arguments (``fullgraph``, ``dynamic``, ``backend``, ``mode``,
``options``, ``disable``), and graph breaks that run eagerly unless ``fullgraph=True``.
PyTorch, when installed, is the oracle of the wrapper's structure and of the signature."""

from __future__ import annotations

import copy
import inspect
import pickle
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
from jitgrad.jit import CompiledFunction, OptimizedModule
from jitgrad.trace.tracer import ValueEscape


def _mlp(seed=0):
    jg.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _x(rng, shape=(5, 4)):
    return jg.tensor(rng.standard_normal(shape), dtype=jg.float32)


def _close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.scale = 2.0

    def forward(self, x):
        return self.fc(x) * self.scale

    def double_scale(self):
        return self.scale * 2


class Branchy(nn.Module):
    """Data-dependent Python: a graph break."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        y = self.fc(x)
        return y * 2 if y.sum() > 0 else y * 3


# ------------------------------------------------------------- compile(module)
def test_compile_module_returns_an_optimized_module(rng):
    m = _mlp()
    c = jg.compile(m)
    assert isinstance(c, OptimizedModule) and isinstance(c, nn.Module)
    assert type(c).__name__ == "OptimizedModule" and c._orig_mod is m
    assert isinstance(c.forward, CompiledFunction) and c.forward.__wrapped__ is m
    assert repr(c) == ("OptimizedModule(\n  (_orig_mod): Sequential(\n"
                       "    (0): Linear(in_features=4, out_features=8, bias=True)\n"
                       "    (1): ReLU()\n"
                       "    (2): Linear(in_features=8, out_features=2, bias=True)\n  )\n)")
    x = _x(rng)
    want = m(x)
    for _ in range(3):
        _close(c(x), want)
    assert c.forward.stats["traces"] == 1 and c.forward.stats["cache_hits"] == 2


def test_wrapper_iterates_the_original_with_torchs_names():
    jg.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    c = jg.compile(m)
    assert [id(p) for p in c.parameters()] == [id(p) for p in m.parameters()]
    assert [n for n, _ in c.named_parameters()] == [f"_orig_mod.{n}" for n, _ in
                                                    m.named_parameters()]
    assert [id(b) for b in c.buffers()] == [id(b) for b in m.buffers()]
    assert [n for n, _ in c.named_buffers()] == ["_orig_mod.1.running_mean",
                                                 "_orig_mod.1.running_var",
                                                 "_orig_mod.1.num_batches_tracked"]
    assert list(c.children()) == [m]
    assert list(c.modules()) == [c, *m.modules()]
    assert [n for n, _ in c.named_modules()][:3] == ["", "_orig_mod", "_orig_mod.0"]
    sd = c.state_dict()
    assert list(sd) == [f"_orig_mod.{k}" for k in m.state_dict()]
    assert np.shares_memory(sd["_orig_mod.0.weight"].numpy(), m[0].weight.detach().numpy())


def test_load_state_dict_prefixed_on_the_wrapper_plain_on_the_original():
    m, other = _mlp(0), _mlp(1)
    c = jg.compile(m)
    c.load_state_dict(jg.compile(other).state_dict())  # _orig_mod.* keys
    assert np.array_equal(m[0].weight.detach().numpy(), other[0].weight.detach().numpy())
    fresh = _mlp(2)
    c._orig_mod.load_state_dict(fresh.state_dict())  # the original's own keys
    assert np.array_equal(m[2].bias.detach().numpy(), fresh[2].bias.detach().numpy())
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "_orig_mod.0.weight"'):
        c.load_state_dict(_mlp(3).state_dict())  # as in PyTorch: the wrapper wants the prefix
    res = c.load_state_dict(_mlp(3).state_dict(), strict=False)
    assert "_orig_mod.0.weight" in res.missing_keys and "0.weight" in res.unexpected_keys


def test_train_eval_to_zero_grad_act_on_the_original(rng):
    jg.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    c = jg.compile(m)
    assert c.train() is c and m.training and m[1].training
    assert c.eval() is c and not m.training and not m[1].training and not c.training
    x = _x(rng, (64, 4))
    _close(c(x), m[0](x))  # eval: dropout is the identity, in the compiled call too
    c.train()
    out = c(x).detach().numpy()
    assert (out == 0).mean() > 0.2  # training: dropout again (the module's flag is guarded)
    c.training = False  # the property writes the original's flag
    assert m.training is False and m[1].training is True
    c.train()
    c(x).sum().backward()
    assert m[0].weight.grad is not None
    c.zero_grad()
    assert m[0].weight.grad is None
    w = m[0].weight
    assert c.to(jg.float64) is c and m[0].weight.dtype == jg.float64 and m[0].weight is w


def test_attributes_are_the_originals():
    m = Scaled()
    c = jg.compile(m)
    assert c.fc is m.fc and c.scale == 2.0 and c.double_scale() == 4.0
    assert c.fc.weight is m.fc.weight
    c.scale = 3.0  # written on the original
    assert m.scale == 3.0 and "scale" not in c.__dict__
    c.extra = 1
    assert m.extra == 1
    del c.extra
    assert not hasattr(m, "extra")
    assert "fc" in dir(c) and "_orig_mod" in dir(c)
    with pytest.raises(AttributeError, match="'Scaled' object has no attribute 'nope'"):
        c.nope  # noqa: B018
    assert len(jg.compile(_mlp())) == 3
    with pytest.raises(TypeError, match="Linear does not support len()"):
        len(jg.compile(nn.Linear(2, 2)))


def test_a_changed_attribute_retraces(rng):
    m = Scaled()
    c = jg.compile(m)
    x = _x(rng, (2, 3))
    c(x)
    c.scale = 5.0
    _close(c(x), m.fc(x) * 5.0)
    assert c.forward.stats["traces"] == 2


def test_optimizer_on_the_wrapper_trains_the_original(rng):
    m, ref = _mlp(0), _mlp(0)
    c = jg.compile(m)
    opt = jg.optim.SGD(c.parameters(), lr=0.1)
    ref_opt = jg.optim.SGD(ref.parameters(), lr=0.1)
    x = _x(rng)
    for _ in range(3):
        for model, o in ((c, opt), (ref, ref_opt)):
            o.zero_grad()
            model(x).square().sum().backward()
            o.step()
    for p, q in zip(m.parameters(), ref.parameters()):
        _close(p, q)
    assert c.forward.stats["traces"] == 1


def test_hooks_on_the_original_run_inside_on_the_wrapper_outside(rng):
    m = _mlp()
    m.register_forward_hook(lambda mod, args, out: out * 2)
    c = jg.compile(m)
    c.register_forward_hook(lambda mod, args, out: out + 1)
    x = _x(rng)
    for _ in range(2):
        _close(c(x), m(x) + 1)  # m(x) runs m's hook too
    handle = nn.register_module_forward_hook(lambda mod, args, out: None)
    try:
        with pytest.warns(UserWarning, match="global hooks on modules"):
            c(x)
    finally:
        handle.remove()


def test_copies_and_pickles_compile_afresh(rng):
    m = _mlp()
    c = jg.compile(m, fullgraph=True)
    x = _x(rng)
    c(x)
    d = copy.deepcopy(c)
    assert isinstance(d, OptimizedModule) and d._orig_mod is not m
    assert d.forward is not c.forward and d.forward.fullgraph
    assert d.forward.stats["traces"] == 0
    _close(d(x), c(x))
    p = pickle.loads(pickle.dumps(c))
    _close(p(x), c(x))
    assert [n for n, _ in p.named_parameters()] == [n for n, _ in c.named_parameters()]


def test_structure_matches_torch():
    torch = pytest.importorskip("torch")
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    try:
        tc = torch.compile(tm)
    except RuntimeError as e:  # pragma: no cover - a Python torch.compile does not support
        pytest.skip(f"torch.compile unavailable: {e}")
    c = jg.compile(_mlp())
    assert type(tc).__name__ == type(c).__name__ and isinstance(tc, torch.nn.Module)
    assert repr(c) == repr(tc)
    assert list(c.state_dict()) == list(tc.state_dict())
    assert [n for n, _ in c.named_parameters()] == [n for n, _ in tc.named_parameters()]
    assert [n for n, _ in c.named_modules()] == [n for n, _ in tc.named_modules()]
    assert c.training == tc.training
    if hasattr(type(tc), "__len__"):  # torch >= 2.5 forwards len()
        assert len(c) == len(tc)
    tc.eval()
    c.eval()
    assert [x.training for x in c.modules()] == [x.training for x in tc.modules()]


# -------------------------------------------------------------- Module.compile()
def test_module_compile_in_place(rng):
    m = _mlp()
    x = _x(rng)
    want = m(x)
    keys = list(m.state_dict())
    assert m.compile() is None
    cf = m._compiled_call_impl
    assert isinstance(cf, CompiledFunction)
    for _ in range(3):
        _close(m(x), want)
    assert cf.stats["traces"] == 1 and cf.stats["cache_hits"] == 2
    assert list(m.state_dict()) == keys  # no wrapper: no prefix
    m[0].weight = nn.Parameter(jg.zeros(8, 4))  # the module's state is guarded
    _close(m(x), m[2](m[1](m[0].bias.expand(5, 8))))
    assert cf.stats["traces"] == 2
    assert "2 graph(s)" in jg.explain(m, x)


def test_module_compile_guards_the_modules_own_numbers(rng):
    m = Scaled()
    m.compile()
    x = _x(rng, (2, 3))
    m(x)
    m.scale = 5.0  # a plain number of the compiled module itself: baked into the trace
    _close(m(x), m.fc(x) * 5.0)
    assert m._compiled_call_impl.stats["traces"] == 2


def test_module_compile_train_eval_and_hooks(rng):
    jg.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    m.register_forward_hook(lambda mod, args, out: out * 3)
    m.compile()
    x = _x(rng, (64, 4))
    m.eval()
    _close(m(x), m[0](x) * 3)
    m.train()
    assert (m(x).detach().numpy() == 0).mean() > 0.2
    assert m._compiled_call_impl.stats["traces"] == 2


def test_module_compile_graph_break_runs_eagerly_without_recursion(rng):
    m = Branchy()
    m.compile()
    x = _x(rng, (2, 3))
    y = m.fc(x)
    with pytest.warns(UserWarning, match="running Branchy eagerly"):
        out = m(x)
    _close(out, y * 2 if y.sum() > 0 else y * 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _close(m(-x), m.fc(-x) * 2 if m.fc(-x).sum() > 0 else m.fc(-x) * 3)
    m.compile(fullgraph=True)
    with pytest.raises(ValueEscape, match="bool"):
        m(x)


def test_module_compile_options(rng):
    m = Branchy()
    x = _x(rng, (2, 3))
    for kwargs in ({"backend": "eager"}, {"backend": "aot_eager"}, {"disable": True}):
        m.compile(**kwargs)
        assert not isinstance(m._compiled_call_impl, CompiledFunction)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing traced: no graph break
            y = m.fc(x)
            _close(m(x), y * 2 if y.sum() > 0 else y * 3)
    with pytest.raises(ValueError, match="Unrecognized mode=fast"):
        m.compile(mode="fast")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nopython'"):
        m.compile(nopython=True)
    m.compile(mode="max-autotune", dynamic=True)
    assert m._compiled_call_impl.compile_options.mode == "max-autotune"


def test_module_compile_copies_and_nesting(rng):
    inner = _mlp()
    inner.compile()
    x = _x(rng)
    inner(x)
    d = copy.deepcopy(inner)
    assert "_compiled_call_impl" not in d.__dict__ and d._compiled_call_impl is None
    _close(d(x), inner(x))
    outer = jg.compile(lambda x: inner(x).relu(), fullgraph=True)
    _close(outer(x), inner(x).relu())
    assert outer.lower(x).graph.count("matmul") + outer.lower(x).graph.count("addmm") == 2


# -------------------------------------------------------------- the arguments
def test_signature_is_torchs():
    sig = inspect.signature(jg.compile).parameters
    want = {"fullgraph": False, "dynamic": None, "backend": None, "mode": None,
            "options": None, "disable": False}
    assert {k: sig[k].default for k in want} == want
    assert all(sig[k].kind is inspect.Parameter.KEYWORD_ONLY for k in want)
    torch = pytest.importorskip("torch")
    theirs = inspect.signature(torch.compile).parameters
    for name in want:  # torch 2.x's arguments (the newest add name= and recompile_limit=)
        assert theirs[name].default == sig[name].default, name


def test_backends(rng):
    x = _x(rng, (3,))

    def f(x):
        return x * x.sum().item()  # a graph break

    for backend in ("inductor", "auto", "cpu"):
        assert isinstance(jg.compile(f, backend=backend), CompiledFunction)
    for backend in ("eager", "aot_eager"):
        g = jg.compile(f, backend=backend, fullgraph=True)
        assert not isinstance(g, CompiledFunction) and g.__wrapped__ is f
        assert g.__name__ == "f"
        _close(g(x), f(x))  # run as written: no trace, so no graph break
        c = jg.compile(Branchy(), backend=backend)
        assert isinstance(c, OptimizedModule) and not isinstance(c.forward, CompiledFunction)
        xb = _x(rng, (2, 3))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing is traced: no graph break
            _close(c(xb), c._orig_mod(xb))
        with pytest.raises(TypeError, match="explain"):
            jg.explain(c, x)
    with pytest.raises(NotImplementedError, match="reserved for jitgrad's CUDA backend"):
        jg.compile(f, backend="cuda")

    def my_backend(gm, example_inputs):
        return gm

    with pytest.raises(NotImplementedError, match="'my_backend'"):
        jg.compile(f, backend=my_backend)
    with pytest.raises(ValueError, match=r"Invalid backend: 'tpu'.*'inductor'.*'eager'") as e:
        jg.compile(f, backend="tpu")
    assert isinstance(e.value, RuntimeError)  # as torch's InvalidBackend


def test_modes_options_dynamic(rng):
    f = lambda x: x + 1  # noqa: E731
    for mode in (None, "default", "lite", "reduce-overhead", "max-autotune",
                 "max-autotune-no-cudagraphs"):
        assert jg.compile(f, mode=mode)(jg.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="Unrecognized mode=fast, should be one of: default, "
                       "lite, reduce-overhead, max-autotune-no-cudagraphs, max-autotune"):
        jg.compile(f, mode="fast")
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        jg.compile(f, mode="default", options={})
    assert jg.compile(f, options={"max_autotune": True})(jg.ones(1)).tolist() == [2.0]
    with pytest.raises(TypeError, match="options must be a dict"):
        jg.compile(f, options=["max_autotune"])
    with pytest.raises(ValueError, match="dynamic must be None, True or False"):
        jg.compile(f, dynamic="yes")
    for dynamic in (None, True, False):
        g = jg.compile(f, dynamic=dynamic)
        g(_x(rng, (3,)))
        g(_x(rng, (4,)))
        assert g.stats["traces"] == 2  # specialised per shape either way


def test_disable_and_decorator_forms(rng):
    f = lambda x: x * 2  # noqa: E731
    m = _mlp()
    assert jg.compile(f, disable=True) is f and jg.compile(m, disable=True) is m
    assert jg.compile(disable=True)(f) is f
    with pytest.raises(ValueError, match="Unrecognized mode"):  # checked even when disabled
        jg.compile(f, mode="nope", disable=True)

    @jg.compile(fullgraph=True, mode="reduce-overhead")
    def g(x):
        return x * 2

    assert isinstance(g, CompiledFunction) and g.fullgraph and g.compile_options.mode == \
        "reduce-overhead"
    assert g(jg.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="Model can't be None"):
        jg.compile()(None)
    assert isinstance(jg.compile(backend="cpu")(m), OptimizedModule)


# ------------------------------------------------------------- graph breaks
def _branch(x):
    return x * 2 if x.sum() > 0 else x * 3


def test_default_runs_graph_breaks_eagerly_with_one_warning(rng):
    cf = jg.compile(_branch)
    assert cf.fullgraph is False
    with pytest.warns(UserWarning, match=r"running _branch eagerly: .*bool\(tensor\)"):
        assert cf(jg.tensor([1.0, 2.0])).tolist() == [2.0, 4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # that signature runs eagerly now, silently
        assert cf(jg.tensor([-1.0, -2.0])).tolist() == [-3.0, -6.0]
        assert cf(jg.tensor([1.0, 1.0])).tolist() == [2.0, 2.0]
    assert cf.stats["traces"] == 1
    with pytest.warns(UserWarning, match="running"):
        jg.compile(lambda x: x * x.sum().item())(jg.tensor([1.0, 2.0]))


@pytest.mark.parametrize("kwargs", [{"fullgraph": True}, {"fallback": "error"},
                                    {"fullgraph": True, "fallback": "error"}])
def test_fullgraph_raises_on_graph_breaks(kwargs):
    cf = jg.compile(_branch, **kwargs)
    assert cf.fullgraph is True
    with pytest.raises(ValueEscape, match="compile without fullgraph=True"):
        cf(jg.tensor([1.0]))


def test_fallback_compatibility():
    assert jg.compile(_branch, fallback="eager").fullgraph is False
    with pytest.raises(ValueError, match="contradict"):
        jg.compile(_branch, fullgraph=True, fallback="eager")
    with pytest.raises(ValueError, match="fallback must be 'error' or 'eager'"):
        jg.compile(_branch, fallback="ignore")


def test_graph_break_in_a_training_step_applies_effects_once(rng):
    """A step that logs ``loss.item()`` after ``opt.step()`` runs eagerly: the update happens
    exactly once, as in eager mode."""
    m, ref = _mlp(0), _mlp(0)
    x = _x(rng)
    logs = []

    def make(model):
        opt = jg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        def step(x):
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            logs.append(loss.item())
            return loss
        return step

    cstep, rstep = jg.compile(make(m)), make(ref)
    with pytest.warns(UserWarning, match=r"\.item\(\)|append"):
        for _ in range(3):
            cstep(x)
            rstep(x)
    assert len(logs) == 6
    np.testing.assert_allclose(logs[0::2], logs[1::2], rtol=1e-5)
    for p, q in zip(m.parameters(), ref.parameters()):
        _close(p, q)


def test_explain_and_lower_say_why_a_signature_runs_eagerly(rng):
    cf = jg.compile(_branch)
    x = jg.tensor([1.0, 2.0])
    with pytest.warns(UserWarning):
        text = jg.explain(cf, x)
    assert "runs eagerly for these arguments" in text and "bool(tensor)" in text
    assert "fullgraph=True" in text and "traces: 1" in text
    assert cf.eager_reason(x) is not None
    with pytest.raises(RuntimeError, match="runs eagerly for these arguments"):
        cf.lower(x)
    ok = jg.compile(lambda x: x.tanh() * 2)
    assert ok.eager_reason(x) is None
    assert jg.explain(ok, x).startswith("<lambda>: 1 graph(s) (one), 2 forward op(s)")
    with pytest.warns(UserWarning):
        assert "runs eagerly" in jg.explain(jg.compile(Branchy()), _x(rng, (2, 3)))
    with pytest.raises(TypeError, match="explain"):
        jg.explain(lambda x: x, x)
