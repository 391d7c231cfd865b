"""jitgrad.compile: results equal eager, autograd integration, captured state and effects,
guards and retraces, control-flow errors, debugging output."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd.node import FREED_MESSAGE
from jitgrad.trace.tracer import TraceError, ValueEscape


def leaf(a, dtype=jg.float32):
    return jg.tensor(np.asarray(a), dtype=dtype, requires_grad=True)


def chain(x, w, b):
    return (jg.tanh(x * w + b) ** 2 * jg.sigmoid(x)).sum()


@pytest.fixture
def xwb(rng):
    return [leaf(rng.standard_normal(1000)) for _ in range(3)]


def test_forward_and_backward_equal_eager(xwb):
    f = jg.compile(chain)
    ref = chain(*xwb)
    ref.backward()
    ref_grads = [t.grad.numpy().copy() for t in xwb]
    for t in xwb:
        t.grad = None
    for _ in range(3):  # trace (eager), then plan twice
        out = f(*xwb)
        assert type(out.grad_fn).__name__ in ("CompiledFunctionBackward", "SumBackward0")
        out.backward()
        np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-5)
        for t, g in zip(xwb, ref_grads):
            np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-5, atol=1e-6)
            t.grad = None
    assert f.stats["traces"] == 1 and f.stats["cache_hits"] == 2
    out = f(*xwb)
    assert out.grad_fn.name() == "CompiledFunctionBackward"


def test_compiled_backward_semantics(xwb):
    f = jg.compile(chain)
    f(*xwb)
    x, w, b = xwb
    out = f(x, w, b)
    out.backward(retain_graph=True)
    g1 = x.grad.numpy().copy()
    out.backward()  # accumulates
    np.testing.assert_allclose(x.grad.numpy(), 2 * g1, rtol=1e-6)
    with pytest.raises(RuntimeError) as e:
        out.backward()
    assert str(e.value) == FREED_MESSAGE
    # create_graph=True: gradients with history (tests/compile/test_double_backward.py)
    (g,) = jg.autograd.grad(f(x, w, b), x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None


def test_hooks_on_inputs_and_retain_grad_on_outputs(rng):
    f = jg.compile(lambda x: (x * 3).exp())
    x = leaf(rng.standard_normal(4) * 0.1)
    f(x)
    seen = []
    x.register_hook(lambda g: seen.append(1) or g * 2)
    y = f(x)
    y.retain_grad()
    y.sum().backward()
    assert seen == [1]
    np.testing.assert_allclose(y.grad.numpy(), np.ones(4))
    np.testing.assert_allclose(x.grad.numpy(), 2 * 3 * np.exp(3 * x.detach().numpy()),
                               rtol=1e-5)


def test_outputs_without_grad_and_no_grad_mode(rng):
    f = jg.compile(lambda x: x * 2 + 1)
    x = leaf(rng.standard_normal(3))
    with jg.no_grad():
        assert not f(x).requires_grad
        assert not f(x).requires_grad
    assert f(x).requires_grad  # grad mode is part of the key: retraced
    assert f.stats["traces"] == 2


def test_training_step_matches_eager_over_steps(rng):
    W = leaf(rng.standard_normal((4, 3)) * 0.5)
    b = leaf(np.zeros(3))
    W2, b2 = W.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()

    def step(x, y, W, b, lr=0.1):
        W.grad = None
        b.grad = None
        loss = ((x @ W + b - y) ** 2).mean()
        loss.backward()
        with jg.no_grad():
            W -= lr * W.grad
            b -= lr * b.grad
        return loss

    cstep = jg.compile(lambda x, y: step(x, y, W, b))
    for _ in range(20):
        x = jg.tensor(rng.standard_normal((8, 4)), dtype=jg.float32)
        y = jg.tensor(rng.standard_normal((8, 3)), dtype=jg.float32)
        l1, l2 = cstep(x, y), step(x, y, W2, b2)
        assert abs(l1.item() - l2.item()) <= 1e-5 * max(1.0, abs(l2.item()))
    np.testing.assert_allclose(W.detach().numpy(), W2.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(W.grad.numpy(), W2.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert cstep.stats["traces"] == 1
    lowered = cstep.lower(x, y).graph
    assert "write W <- " in lowered and "W.grad = " in lowered


def test_compiling_a_module_instance(rng):
    """``compile(module)``: the module is the function; gradients reach its parameters."""
    jg.manual_seed(0)
    model = jg.nn.Sequential(jg.nn.Linear(4, 8), jg.nn.Tanh(), jg.nn.Linear(8, 2))
    cmodel = jg.compile(model)
    assert cmodel.forward.__name__ == "Sequential" and cmodel._orig_mod is model
    x = jg.tensor(rng.standard_normal((5, 4)), dtype=jg.float32)
    expected = model(x)
    expected.sum().backward()
    want = [p.grad.numpy().copy() for p in model.parameters()]
    for _ in range(3):
        model.zero_grad()
        out = cmodel(x)
        out.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        for p, g in zip(model.parameters(), want):
            np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-6)
    assert cmodel.forward.stats["traces"] == 1 and cmodel.forward.stats["cache_hits"] == 2


def test_grad_accumulates_into_existing_grad(rng):
    w = leaf(rng.standard_normal(5))
    f = jg.compile(lambda x: (x * w).sum().backward())
    x = jg.tensor(rng.standard_normal(5), dtype=jg.float32)
    f(x)   # w.grad None -> set
    f(x)   # w.grad present -> accumulate in place: a retrace (guard on the .grad state)
    g = w.grad
    f(x)   # the accumulate plan
    assert w.grad is g
    np.testing.assert_allclose(g.numpy(), 3 * x.numpy(), rtol=1e-6)
    assert f.stats["traces"] == 2
    assert ".grad" in f.last_retrace_reason


def test_zero_grad_inside(rng):
    w = leaf(rng.standard_normal(5))

    @jg.compile
    def f(x):
        w.grad.zero_()
        (x * w).sum().backward()

    x = jg.tensor(rng.standard_normal(5), dtype=jg.float32)
    w.grad = jg.zeros(5)
    for _ in range(3):
        f(x)
    np.testing.assert_allclose(w.grad.numpy(), x.numpy(), rtol=1e-6)


def test_shape_change_retraces_and_reuses_kernels(rng):
    from jitgrad.compiler import cache

    f = jg.compile(chain)
    f(*[leaf(rng.standard_normal(100)) for _ in range(3)])
    f(*[leaf(rng.standard_normal(100)) for _ in range(3)])
    written = cache.STATS["modules_written"] + cache.STATS["modules_loaded"]
    out = f(*[leaf(rng.standard_normal(37)) for _ in range(3)])
    out = f(*[leaf(rng.standard_normal(37)) for _ in range(3)])
    assert f.stats["traces"] == 2
    assert "shape changed" in f.last_retrace_reason
    # a new size generates the same (shape-generic) kernel source: nothing new to compile
    assert cache.STATS["modules_written"] + cache.STATS["modules_loaded"] == written
    assert out.shape == ()


def test_captured_tensor_identity_guard(rng):
    scale = jg.tensor(2.0)
    f = jg.compile(lambda x: x * scale)
    x = jg.tensor(rng.standard_normal(3), dtype=jg.float32)
    np.testing.assert_allclose(f(x).numpy(), 2 * x.numpy())
    scale.fill_(3.0)  # in-place: the plan reads the captured tensor at every call
    np.testing.assert_allclose(f(x).numpy(), 3 * x.numpy())
    globals()["_rebound"] = jg.tensor(5.0)
    g = jg.compile(lambda x: x * _rebound)  # noqa: F821 - a global, rebound below
    g(x)
    globals()["_rebound"] = jg.tensor(7.0)
    np.testing.assert_allclose(g(x).numpy(), 7 * x.numpy(), rtol=1e-6)
    assert g.stats["traces"] == 2


def test_python_control_flow_raises_with_location(rng):
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    cf = jg.compile(f, fullgraph=True)
    with pytest.raises(ValueEscape, match=r"test_compile_api.py:\d+: bool\(tensor\)"):
        cf(jg.tensor([1.0, 2.0]))
    for bad in (lambda x: x.item(), lambda x: float(x.sum()), lambda x: x.numpy(),
                lambda x: x.tolist()):
        with pytest.raises(ValueEscape, match="needs the value of a tensor"):
            jg.compile(bad, fullgraph=True)(jg.tensor([1.0]))


def test_fallback_eager_runs_and_warns():
    def f(x):
        return x * 2 if x.sum() > 0 else x * 3

    cf = jg.compile(f, fallback="eager")
    with pytest.warns(UserWarning, match="running f eagerly"):
        assert cf(jg.tensor([1.0])).tolist() == [2.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cf(jg.tensor([-1.0])).tolist() == [-3.0]  # eager from now on, no new warning


def test_untraceable_values_are_an_error(rng):
    def f(x):
        y = jg.tensor(x.detach().numpy() * 2)  # NumPy code on tensor data
        return x + y

    with pytest.raises(ValueEscape):
        jg.compile(f, fullgraph=True)(jg.tensor([1.0]))

    def g(x):
        return x + (x > 1).nonzero()[0]  # nonzero: a data-dependent shape, not an op

    with pytest.raises(TraceError):
        jg.compile(g, fullgraph=True)(jg.tensor([1.0, 3.0]))
    # without fullgraph: a graph break, the call and those like it run eagerly
    cg = jg.compile(g)
    with pytest.warns(UserWarning, match="nonzero"):
        np.testing.assert_array_equal(cg(jg.tensor([1.0, 3.0])).numpy(), [2.0, 4.0])
    # an array the trace never saw made (from_numpy inside): a graph break where an op
    # first reads it
    ch = jg.compile(lambda x: x + jg.from_numpy(np.ones(2, np.float32)) * x.sum())
    with pytest.warns(UserWarning, match="cannot trace"):
        np.testing.assert_array_equal(ch(jg.ones(2)).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(ch(jg.ones(2) * 2).numpy(), [6.0, 6.0])
    np.testing.assert_array_equal(cg(jg.tensor([3.0, 1.0])).numpy(), [3.0, 1.0])


def test_random_factories_draw_anew_each_call():
    f = jg.compile(lambda x: x + jg.rand(3))
    x = jg.zeros(3)
    a, b = f(x).numpy().copy(), f(x).numpy().copy()
    assert not np.array_equal(a, b)
    jg.manual_seed(0)
    c = f(x).numpy().copy()
    jg.manual_seed(0)
    assert np.array_equal(c, jg.rand(3).numpy())


def test_constants_and_structures(rng):
    @jg.compile
    def f(d, k):
        t = jg.tensor([1.0, 2.0, 3.0])
        return {"sum": d["a"] + t * k, "pair": (d["b"] * 2, k)}

    d = {"a": jg.ones(3), "b": jg.zeros(2)}
    for _ in range(2):
        out = f(d, 4)
        assert out["sum"].tolist() == [5.0, 9.0, 13.0] and out["pair"][1] == 4
    assert f(d, 5)["sum"].tolist() == [6.0, 11.0, 16.0]  # a non-tensor arg is in the key


def test_in_place_on_view_compiles():
    """Traced as the base's new value (tests/compile/test_view_writes.py), even under
    fullgraph=True."""
    def f(x):
        y = x * 1
        y[0:2].add_(1)
        return y

    g = jg.compile(f, fullgraph=True)
    for _ in range(2):
        assert g(jg.ones(3)).tolist() == [2.0, 2.0, 1.0]


def test_lower_and_explain(rng):
    f = jg.compile(chain)
    args = [leaf(rng.standard_normal(10)) for _ in range(3)]
    low = f.lower(*args)
    assert low.graph.splitlines()[0] == "chain(%0:float32[10], %1:float32[10], %2:float32[10]) {"
    assert "= tanh(%4)" in low.graph and "tanh_backward" in low.backward_graph
    assert any("fused loop" in g for g in low.fusion_groups)
    assert "@cached_njit(" in low.source and "def kernel(" in low.source
    text = jg.explain(f, *args)
    assert "2 graph(s)" in text and "generated kernel(s)" in text


def test_constant_index_tensors_are_frozen_into_the_plan(rng):
    """An index or mask the function builds from Python data is a constant of the graph
    (its value at the time of use); one computed from the inputs is data-dependent."""
    def f(x):
        idx = jg.tensor([2, 0, 2])
        mask = jg.tensor([True, False, True, True])
        y = x[idx] * 2.0 + x[mask].sum() + x[:, mask][1].sum()
        return (y * y).sum()

    x = leaf(rng.standard_normal((4, 4)))
    ref = f(x)
    (g_ref,) = jg.autograd.grad(ref, [x])
    cf = jg.compile(f)
    cf(x)
    out = cf(x)
    (g,) = jg.autograd.grad(out, [x])
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), g_ref.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(TraceError, match="depends on the values of a traced tensor"):
        jg.compile(lambda x: x[x > 0].sum(), fullgraph=True)(x)

    def written_after_use(x):  # the index is saved for the backward, as PyTorch's is
        idx = jg.tensor([2, 0, 2])
        y = x[idx] * 2.0
        idx.add_(1)
        return (y * y).sum()

    for fn in (written_after_use, jg.compile(written_after_use)):
        with pytest.raises(RuntimeError, match="LongTensor \\[3\\]\\] is at version 1"):
            jg.autograd.grad(fn(x), [x])


def test_indexing_with_a_tensor_value_is_a_graph_break_never_a_frozen_index():
    """``x[x.argmax()]``, ``x[i]`` for a 0-d tensor argument ``i`` and ``x[x > 0]`` need the
    values: the call runs eagerly (the index was once frozen into the plan: a second call
    with other values returned the first call's element). A constant index compiles."""
    f = jg.compile(lambda a: a[a.argmax()] * 2)
    with pytest.warns(UserWarning, match="as an index"):
        assert f(jg.tensor([1.0, 5.0, 2.0])).item() == 10
    assert f(jg.tensor([9.0, 5.0, 2.0])).item() == 18
    h = jg.compile(lambda a, i: a[i] * 2)
    a = jg.tensor([1.0, 5.0, 2.0])
    with pytest.warns(UserWarning, match="as an index"):
        assert h(a, jg.tensor(0)).item() == 2
    assert h(a, jg.tensor(2)).item() == 4
    m = jg.compile(lambda a: a[a > 0].sum())
    with pytest.warns(UserWarning, match="data-dependent indexing"):
        assert m(jg.tensor([1.0, -5.0, 2.0])).item() == 3
    assert m(jg.tensor([-1.0, 5.0, 2.0])).item() == 7
    with pytest.raises(TraceError, match="as an index"):
        jg.compile(lambda a: a[a.argmax()], fullgraph=True)(a)
    g = jg.compile(lambda a: a[jg.tensor(1)] * 2)
    assert g(a).item() == 10 and g.eager_reason(a) is None
    assert g(jg.tensor([0.0, 7.0, 0.0])).item() == 14


@pytest.mark.parametrize("weight", [None, [1.0, 2.0, 3.0]])
def test_label_smoothing_mean_divides_by_each_batch_s_targets(weight):
    """cross_entropy(label_smoothing=, reduction='mean') divides the smoothing term by the
    summed weights of the targets kept: once a number read from the first call's targets
    (a plan divided by it at every call), now computed with ops."""
    w = None if weight is None else jg.tensor(weight)

    def f(x, t):
        return jg.nn.functional.cross_entropy(x, t, weight=w, label_smoothing=0.1,
                                              ignore_index=0)

    x = jg.tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    cf = jg.compile(f, fullgraph=True)
    for t in ([0, 1, 2, 1], [0, 0, 0, 1], [2, 2, 1, 0]):
        t = jg.tensor(t)
        np.testing.assert_allclose(cf(x, t).item(), f(x, t).item(), rtol=1e-6)


def test_literal_params_fold_in_generated_kernels(rng):
    """Op params are literals in fused kernels: ``x ** 2`` becomes ``x * x`` (forward and
    ``pow_backward``'s ``exponent - 1``), other fast-path exponents their sqrt/reciprocal
    forms, GELU's unused branch disappears; the general pow/erf are never compiled for them."""
    x = leaf(rng.uniform(0.5, 2.0, 50))
    low = jg.compile(lambda x: (x ** 2 + x ** 3).sum()).lower(x)
    assert "x0 * x0 * x0" in low.source and "pow_f32(" not in low.source
    low = jg.compile(lambda x: (x ** -0.5 + x ** -1 + x ** -2).sum()).lower(x)
    assert "f32(1.0) / sqrt_f32(x0)" in low.source and "f32(1.0) / (x0 * x0)" in low.source
    assert "pow_scalar(" not in low.source
    low = jg.compile(lambda x: (x ** 1.7).sum()).lower(x)
    assert "pow_f32(" in low.source and "pow_scalar(" not in low.source
    gelu = jg.nn.functional.gelu
    low = jg.compile(lambda x: gelu(x, approximate="tanh").sum()).lower(x)
    assert "erf_f32" not in low.source and "sigmoid_f32" in low.source
    low = jg.compile(lambda x: gelu(x).sum()).lower(x)
    assert "erf_f32" in low.source and "sigmoid_f32" not in low.source


def test_grad_and_value_and_grad(rng):
    f = lambda x: (x ** 3).sum()  # noqa: E731
    x = jg.tensor([1.0, 2.0])
    assert jg.grad(f)(x).tolist() == [3.0, 12.0]
    v, g = jg.value_and_grad(f)(x)
    assert v.item() == 9.0 and g.tolist() == [3.0, 12.0]
    cg = jg.compile(jg.value_and_grad(f))
    for _ in range(3):
        v, g = cg(x)
        assert v.item() == 9.0 and g.tolist() == [3.0, 12.0]
    assert cg.stats["traces"] == 1
    g2 = jg.grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, jg.tensor([3.0, 4.0]))
    assert [t.tolist() for t in g2] == [[3.0, 4.0], [1.0, 2.0]]


def test_backend_argument():
    with pytest.raises(NotImplementedError, match="reserved for jitgrad's CUDA backend"):
        jg.compile(chain, backend="cuda")
    with pytest.raises(ValueError):
        jg.compile(chain, backend="tpu")
    assert jg.compile(backend="cpu")(lambda x: x + 1)(jg.ones(2)).tolist() == [2.0, 2.0]


def test_retrace_warning_after_8(rng, monkeypatch):
    monkeypatch.setattr(jg.config, "shape_tiering", False)  # (every new shape traces)
    f = jg.compile(lambda x: x * 2)
    with pytest.warns(UserWarning, match="retraced 9 times; last guard that failed"):
        for n in range(1, 12):
            f(jg.ones(n))


def test_disable_jit_runs_the_reference(monkeypatch, xwb):
    monkeypatch.setenv("JITGRAD_DISABLE_JIT", "1")
    f = jg.compile(chain)
    f(*xwb)
    out = f(*xwb)
    assert f.lower(*xwb).source == ""  # no generated kernels
    np.testing.assert_allclose(out.item(), chain(*xwb).item(), rtol=1e-5)


def test_logs(monkeypatch, capsys, rng):
    monkeypatch.setenv("JITGRAD_LOGS", "graph,recompiles")
    f = jg.compile(lambda x: x.exp())
    f(jg.ones(2))
    f(jg.ones(3))
    out = capsys.readouterr().out
    assert "[jitgrad:graph]" in out and "[jitgrad:recompiles]" in out and "shape" in out


def _mixed(x, w, b):
    return (jg.tanh(x @ w + b) ** 2 * jg.sigmoid(x.sum(1, keepdim=True))).mean(0)


def test_gradcheck_through_compiled_function(rng):
    from jitgrad.autograd import gradcheck

    cf = jg.compile(_mixed)
    ins = [jg.tensor(rng.standard_normal(s), dtype=jg.float64, requires_grad=True)
           for s in [(4, 3), (3, 5), (5,)]]
    assert gradcheck(cf, ins)
    assert cf.stats["traces"] == 1 and cf.stats["cache_hits"] > 10  # the plan did the work


IR_SNAPSHOT = """\
_mixed(%0:float64[4,3], %1:float64[3,5], %2:float64[5]) {
  %3:float64[4,5] = matmul(%0, %1; ndims=(2, 2))
  %4:float64[4,5] = add(%3, %2)
  %5:float64[4,5] = tanh(%4)
  %6:float64[4,5] = pow_scalar(%5; exponent=2)
  %7:float64[4,1] = sum(%0; dims=(1,), keepdim=True)
  %8:float64[4,1] = sigmoid(%7)
  %9:float64[4,5] = mul(%6, %8)
  %10:float64[5] = mean(%9; dims=(0,), keepdim=False)
  return %10
}"""


def test_ir_snapshot(rng):
    ins = [jg.tensor(rng.standard_normal(s), dtype=jg.float64, requires_grad=True)
           for s in [(4, 3), (3, 5), (5,)]]
    low = jg.compile(_mixed).lower(*ins)
    assert low.graph == IR_SNAPSHOT
    # the backward graph reads residuals and the cotangent, and ends in the three gradients
    assert low.backward_graph.startswith("_mixed_backward(")
    assert low.backward_graph.rstrip().splitlines()[-2].strip().startswith("return %")


# ------------------------------------------- values Python code reads: never frozen
def _stale_cases():
    F = jg.nn.functional

    def prod_grad(x):
        return jg.autograd.grad(x.prod(), x)[0]

    def cumprod_grad(x):
        return jg.autograd.grad(x.cumprod(0).sum(), x)[0]

    def prod_dim_grad(x):
        return jg.autograd.grad(x.reshape(2, 2).prod(1).sum(), x)[0]

    def median_nan(x):
        return jg.stack([x.median(), x.reshape(2, 2).median(1).values.sum()])

    return [
        ("repeat_interleave", lambda x, r: jg.repeat_interleave(x, r, dim=0),
         [([0.0, 1.0, 2.0], [1, 1, 1]), ([0.0, 1.0, 2.0], [2, 0, 3])]),
        ("tensor_from_values", lambda x: jg.tensor([x[0], x[1]]) * 2,
         [([1.0, 2.0],), ([5.0, 7.0],)]),
        ("masked_scatter", lambda x, m: x.masked_scatter(m, jg.arange(1.0, 5.0)),
         [([0.0] * 4, [False] * 4), ([0.0] * 4, [True, False, True, False])]),
        ("prod_grad", prod_grad, [([1.0, 2.0, 3.0, 4.0],), ([1.0, 0.0, 3.0, 4.0],)]),
        ("prod_dim_grad", prod_dim_grad, [([1.0, 2.0, 3.0, 4.0],), ([1.0, 0.0, 3.0, 4.0],)]),
        ("cumprod_grad", cumprod_grad, [([1.0, 2.0, 3.0, 4.0],), ([1.0, 0.0, 3.0, 4.0],)]),
        ("median_nan", median_nan, [([1.0, 2.0, 3.0, 4.0],), ([1.0, float("nan"), 3.0, 4.0],)]),
        ("apply_", lambda x: x.clone().apply_(lambda v: v * 2 + 1), [([1.0, 2.0],), ([3.0, 4.0],)]),
        ("unique", lambda r: jg.unique(r), [([1, 0, 0, 3],), ([2, 2, 5, 1],)]),
        ("nonzero", lambda r: jg.nonzero(r), [([1, 0, 0, 3],), ([0, 2, 5, 0],)]),
        ("nonzero_count", lambda x: x * (x > 0).nonzero().shape[0],
         [([1.0, -1.0, 2.0],), ([-1.0, -1.0, 3.0],)]),
        ("bce_inputs_checked", lambda p, t: F.binary_cross_entropy(p, t),
         [([0.5], [1.0]), ([1.5], [1.0])]),
        ("floor_divide_zero", lambda a, b: a // b, [([4, 6], [2, 1]), ([4, 6], [0, 1])]),
    ]


@pytest.mark.parametrize("name,fn,calls", _stale_cases(), ids=[c[0] for c in _stale_cases()])
def test_values_read_by_python_code_are_never_frozen_into_a_plan(name, fn, calls):
    """Each case's Python code reads tensor values (a count, a formula's choice, a check):
    compiled calls after the first -- with other values -- give eager mode's result or
    raise its error (a graph break or a check the plan runs), never the first call's."""
    import warnings

    cf = jg.compile(fn)
    for args in calls * 2:
        def ts(args=args):
            return [jg.tensor(a, requires_grad=isinstance(a[0], float) and "grad" in name)
                    for a in args]
        try:
            want = fn(*ts())
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match=str(e)[:30]):
                cf(*ts())
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = cf(*ts())
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


def test_scalar_arguments_key_by_type_and_sign():
    """2, 2.0 and True are equal dict keys to Python, as are 0.0 and -0.0: a plan traced
    with one served the others (int results for a float scale, +inf for x / -0.0)."""
    import warnings

    f = jg.compile(lambda x, s: x * s)
    x = jg.tensor([1, 2, 3])
    for s in (2, 2.0, True, 2):
        assert f(x, s).numpy().tolist() == (x * s).numpy().tolist()
        assert f(x, s).dtype == (x * s).dtype
    g = jg.compile(lambda x, s: x / s[0])
    y = jg.tensor([1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in (0.0, -0.0, float("nan"), 0.0):
            np.testing.assert_array_equal(g(y, (s,)).numpy(), (y / s).numpy())


def test_python_reads_of_values_and_argument_state_are_graph_breaks():
    """allclose/equal give a Python bool of the values; .is_leaf, .grad_fn, ._version and
    storage_offset() of an argument, .data assignment and seeding a generator: each a graph
    break (they were frozen at the first call)."""
    import warnings

    def close(x, y):
        return x * 2 if jg.allclose(x, y) else y

    def leaf(x):
        return x * (2.0 if x.is_leaf else 3.0)

    def offset(x):
        return x * float(x.storage_offset() + 1)

    def rebind(x):
        x.data = x.data * 2
        return x + 1

    def seeded(x):
        jg.manual_seed(0)
        return x + jg.rand(3)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn, calls in (
                (close, [(jg.ones(2), jg.ones(2)), (jg.ones(2), jg.zeros(2))]),
                (leaf, [(jg.ones(2, requires_grad=True),),
                        (jg.ones(2, requires_grad=True) * 1,)]),
                (offset, [(jg.ones(4)[1:3],), (jg.ones(6)[3:5],)])):
            cf = jg.compile(fn)
            for args in calls * 2:
                np.testing.assert_array_equal(cf(*args).detach().numpy(),
                                              fn(*args).detach().numpy())
        for fn in (rebind, seeded):
            xe, xc = jg.ones(3), jg.ones(3)
            cf = jg.compile(fn)
            for _ in range(3):
                np.testing.assert_array_equal(cf(xc).numpy(), fn(xe).numpy())
            np.testing.assert_array_equal(xc.numpy(), xe.numpy())


def test_ctc_lengths_are_checked_at_every_compiled_call():
    """Out-of-range lengths raise PyTorch's errors from the op's forward, which a plan runs
    (the check was the traced call's only: later calls read out of bounds)."""
    lp = jg.randn(4, 2, 5).log_softmax(2)
    tg = jg.tensor([[1, 2], [3, 1]])
    f = jg.compile(lambda lp, il, tl: jg.nn.functional.ctc_loss(lp, tg, il, tl))
    f(lp, jg.tensor([4, 4]), jg.tensor([2, 2]))
    for il, tl, msg in (([9, 4], [2, 2], "at most 4"), ([4, -3], [2, 2], "at least 0"),
                        ([4, 4], [2, 7], "size at least 7")):
        with pytest.raises(RuntimeError, match=msg):
            f(lp, jg.tensor(il), jg.tensor(tl))


def test_tuple_results_built_from_their_fields_come_back():
    x = jg.tensor([[1.0, 2.0], [3.0, 5.0]])
    for fn in (lambda a: jg.aminmax(a), lambda a: jg.linalg.slogdet(a)):
        cf = jg.compile(fn)
        for _ in range(2):
            got, want = cf(x), fn(x)
            assert type(got) is type(want)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_a_backward_the_trace_cannot_capture_runs_eagerly():
    """checkpoint's recompute restores the RNG state in the backward: the backward trace
    stops, and the signature runs eagerly (it raised)."""
    import warnings

    from jitgrad.utils.checkpoint import checkpoint

    lin = jg.nn.Linear(3, 3)

    def f(x):
        return checkpoint(lambda a: lin(a).tanh(), x, use_reentrant=False).sum()

    x = jg.randn(2, 3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = jg.compile(f)(x)
    out.backward()
    g = x.grad.clone()
    x.grad = None
    f(x).backward()
    np.testing.assert_array_equal(g.numpy(), x.grad.numpy())
