"""The generated cache-hit path of compiled calls (jitgrad/jit/call_path.py): every key and
guard component it unrolls must send a changed call back to the generic path."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.jit import call_path


def _t(rng, shape=(4,), dtype=jg.float32, requires_grad=False):
    return jg.tensor(rng.standard_normal(shape), dtype=dtype, requires_grad=requires_grad)


def _served_fast(f, *args):
    """Call ``f`` and say whether its generated fast path served the call."""
    fast = f._fast
    hit = fast is not None and fast(args) is not call_path.MISS
    if not hit:
        f(*args)
    return hit


def test_hits_take_the_fast_path_and_count(rng):
    f = jg.compile(lambda x, y: jg.tanh(x) * y)
    x, y = _t(rng), _t(rng)
    f(x, y)
    assert f._fast is None  # the trace call: no hit yet
    f(x, y)
    assert f._fast is not None
    for _ in range(5):
        out = f(x, y)
    np.testing.assert_allclose(out.numpy(), np.tanh(x.numpy()) * y.numpy(), rtol=1e-6)
    assert f.stats == {"calls": 7, "traces": 1, "retraces": 0, "cache_hits": 6, "evictions": 0,
                       "eager_new_shapes": 0}
    assert out.grad_fn is None and not out.requires_grad


@pytest.mark.parametrize("change", ["shape", "dtype", "requires_grad", "hooks", "grad_mode",
                                    "arity", "non_tensor", "kwargs"])
def test_any_key_change_leaves_the_fast_path(rng, change):
    f = jg.compile(lambda x, y=None: jg.sin(x) * 2.0 if y is None else jg.sin(x) * y)
    x = _t(rng)
    f(x)
    f(x)
    assert _served_fast(f, x)
    args, kwargs, ctx = (x,), {}, None
    if change == "shape":
        args = (_t(rng, (5,)),)
    elif change == "dtype":
        args = (_t(rng, dtype=jg.float64),)
    elif change == "requires_grad":
        args = (_t(rng, requires_grad=True),)
    elif change == "hooks":
        h = _t(rng, requires_grad=True)
        f(h)
        f(h)
        h.register_hook(lambda g: g * 3)
        args = (h,)
    elif change == "grad_mode":
        args = (_t(rng, requires_grad=True),)
        f(*args)
        f(*args)
        ctx = jg.no_grad()
    elif change == "arity":
        args = (x, _t(rng))
    elif change == "non_tensor":
        args = (x, 3.0)
    elif change == "kwargs":
        kwargs = {"y": _t(rng)}
    fast = f._fast
    if not kwargs and ctx is None:
        assert fast(args) is call_path.MISS
    if ctx is not None:
        with ctx:
            assert fast(args) is call_path.MISS
            out = f(*args)
    else:
        out = f(*args, **kwargs)
    a = args[0].detach().numpy()
    y = kwargs.get("y", args[1] if len(args) > 1 else 2.0)
    y = y.numpy() if isinstance(y, jg.Tensor) else y
    np.testing.assert_allclose(out.detach().numpy(), np.sin(a) * y, rtol=1e-6)
    if change == "hooks":  # the hook runs on the gradient of the compiled call's input
        out.sum().backward()
        np.testing.assert_allclose(args[0].grad.numpy(), 3 * 2.0 * np.cos(a), rtol=1e-5)
    if change == "grad_mode":
        assert not out.requires_grad


def test_outputs_get_the_backward_node_on_the_fast_path(rng):
    f = jg.compile(lambda x, w: (jg.tanh(x * w), (x * w).sum()))
    x, w = _t(rng, requires_grad=True), _t(rng, requires_grad=True)
    for i in range(3):
        x.grad = w.grad = None
        a, s = f(x, w)
        if i:  # the first call is the trace: eager outputs, eager nodes
            assert type(a.grad_fn).__name__ == "CompiledFunctionBackward"
            assert s.grad_fn is a.grad_fn and s._output_nr == 1
        (a.sum() + s).backward()
    xn, wn = x.detach().numpy(), w.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), (1 - np.tanh(xn * wn) ** 2) * wn + wn, rtol=1e-5)
    assert f.stats["cache_hits"] == 2


def test_closure_numbers_and_tensors_are_checked(rng):
    scale = 2.0
    w = _t(rng)

    def g(x):
        return x * scale + w

    f = jg.compile(g)
    x = _t(rng)
    f(x)
    f(x)
    assert _served_fast(f, x)
    scale = 3.0  # a number the trace baked in
    np.testing.assert_allclose(f(x).numpy(), x.numpy() * 3.0 + w.numpy(), rtol=1e-6)
    assert f.stats["retraces"] == 1
    scale = 3  # same value, another type: the generic path decides (same trace serves)
    np.testing.assert_allclose(f(x).numpy(), x.numpy() * 3.0 + w.numpy(), rtol=1e-6)
    w = _t(rng)  # a captured tensor rebound
    np.testing.assert_allclose(f(x).numpy(), x.numpy() * 3.0 + w.numpy(), rtol=1e-6)
    f(x)
    assert _served_fast(f, x)


def test_an_emptied_closure_cell_is_a_miss_not_a_crash(rng):
    def make():
        s = 2.0

        def g(x):
            return x * s

        def forget():
            nonlocal s
            del s
        return g, forget

    g, forget = make()
    f = jg.compile(g)
    x = _t(rng)
    f(x)
    f(x)
    forget()
    assert f._fast((x,)) is call_path.MISS
    with pytest.raises(NameError):
        f(x)


def test_captured_tensor_guards_are_checked(rng):
    w = _t(rng, requires_grad=True)
    f = jg.compile(lambda x: (x * w).sum())
    x = _t(rng)
    f(x)
    f(x)
    assert _served_fast(f, x)
    w.requires_grad_(False)  # a guard of the entry, not a key component
    assert f._fast((x,)) is call_path.MISS
    assert not f(x).requires_grad


def test_module_state_is_checked(rng):
    m = jg.nn.Linear(4, 3)
    f = jg.compile(m).forward  # the CompiledFunction behind the OptimizedModule
    x = _t(rng, (2, 4))
    f(x)
    f(x)
    assert _served_fast(f, x)
    m.weight = jg.nn.Parameter(jg.zeros(3, 4))
    assert f._fast((x,)) is call_path.MISS
    np.testing.assert_allclose(f(x).detach().numpy(), np.broadcast_to(m.bias.detach().numpy(),
                                                                       (2, 3)), rtol=1e-6)


def test_nested_compiled_call_is_inlined_not_run(rng):
    inner = jg.compile(lambda x: x * 2.0)
    x = _t(rng)
    inner(x)
    inner(x)
    outer = jg.compile(lambda x: inner(x) + 1.0)
    for _ in range(3):
        out = outer(x)
    np.testing.assert_allclose(out.numpy(), x.numpy() * 2 + 1, rtol=1e-6)
    assert outer.lower(x).graph.count("mul") == 1  # inner's op is in outer's graph


def test_returned_shapes_stay_size_on_every_call():
    """``x.shape`` / ``x.size()`` come back as ``jitgrad.Size`` on the tracing call and on
    the cached ones, alone or nested, and namedtuples keep their type."""
    f = jg.compile(lambda x: x.shape)
    g = jg.compile(lambda x: (x * 2, {"s": x.size(), "n": [x.shape[0]]}))
    h = jg.compile(lambda x: x.max(0))
    x = jg.ones(2, 3)
    for _ in range(3):
        s = f(x)
        assert type(s) is jg.Size and s == (2, 3)
        _, d = g(x)
        assert type(d["s"]) is jg.Size and d["s"] == (2, 3) and d["n"] == [2]
        assert type(h(x)).__name__ == "max" and h(x).values.shape == (3,)
    assert f.stats["traces"] == 1 and g.stats["traces"] == 1
