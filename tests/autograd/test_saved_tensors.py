"""What nodes saved, by PyTorch's names (``grad_fn._saved_self``...), and
``jitgrad.autograd.graph.saved_tensors_hooks`` / ``save_on_cpu`` /
``disable_saved_tensors_hooks``, with PyTorch's semantics: ``pack`` when a tensor is saved,
``unpack`` when backward uses it."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd.graph import (
    disable_saved_tensors_hooks,
    save_on_cpu,
    saved_tensors_hooks,
)


def _xy():
    return (jg.tensor([0.5, 1.5, 2.5], requires_grad=True),
            jg.tensor([1.2, 0.7, 2.0], requires_grad=True))


# ------------------------------------------------------------------ _saved_* attributes
def test_saved_inputs_and_result_by_pytorchs_names():
    x, y = _xy()
    m = x * y
    assert m.grad_fn._saved_self is x and m.grad_fn._saved_other is y
    e = x.exp()
    r = e.grad_fn._saved_result
    np.testing.assert_array_equal(r.detach().numpy(), e.detach().numpy())
    assert r.grad_fn is e.grad_fn
    p = x ** 2
    assert p.grad_fn._saved_exponent == 2 and p.grad_fn._saved_self is x
    q = x ** y
    assert q.grad_fn._saved_exponent is y and q.grad_fn._saved_self is x
    s = x.reshape(3, 1).sum(0)
    assert s.grad_fn._saved_dim == (0,) and s.grad_fn._saved_keepdim is False
    assert tuple(s.grad_fn._saved_self_sym_sizes) == (3, 1)
    assert x.softmax(0).grad_fn._saved_dim == 0
    assert x.clamp(0, 1).grad_fn._saved_min == 0
    assert (x * 2.0).grad_fn._saved_other.item() == 2.0
    with pytest.raises(AttributeError, match="has no attribute '_saved_bogus'"):
        _ = m.grad_fn._saved_bogus
    with pytest.raises(AttributeError):
        _ = e.grad_fn._saved_self  # exp saves its result only


def test_saved_attributes_after_free_and_after_inplace_change():
    x, y = _xy()
    m = x * y
    m.sum().backward()
    with pytest.raises(RuntimeError, match="directly access saved tensors after they have "
                                           "already been freed"):
        _ = m.grad_fn._saved_self
    a = x.detach().clone().requires_grad_()
    b = a * 1.0
    c = b * b
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _ = c.grad_fn._saved_self


def test_saved_attributes_match_torch():
    torch = pytest.importorskip("torch")
    a, b = np.array([0.5, 1.5, 2.5]), np.array([1.2, 0.7, 2.0])

    def exprs(M):
        x, y = M.tensor(a, requires_grad=True), M.tensor(b, requires_grad=True)
        return {"mul": x * y, "div": x / y, "pow_s": x ** 2, "pow_t": x ** y, "rpow": 2 ** x,
                "exp": x.exp(), "tanh": x.tanh(), "sigmoid": x.sigmoid(), "log": x.log(),
                "sin": x.sin(), "sqrt": x.sqrt(), "relu": x.relu(), "abs": x.abs(),
                "sumdim": x.sum(0), "mean": x.mean(), "mm": x.reshape(1, 3) @ y.reshape(3, 1),
                "dot": x @ y, "max": x.max(), "clamp": x.clamp(0, 1), "amax": x.amax(0),
                "where": M.where(x > 1, x, y), "softmax": x.softmax(0),
                "maximum": M.maximum(x, y), "expand": x.expand(2, 3), "square": x.square(),
                "gelu": M.nn.functional.gelu(x, approximate="tanh")}

    ours, theirs = exprs(jg), exprs(torch)
    checked = 0
    for k, t in theirs.items():
        for attr in (n for n in dir(t.grad_fn) if n.startswith("_saved_")):
            tv, jv = getattr(t.grad_fn, attr), getattr(ours[k].grad_fn, attr)
            if isinstance(tv, torch.Tensor):
                assert isinstance(jv, jg.Tensor), (k, attr)
                np.testing.assert_allclose(jv.detach().numpy(), tv.detach().numpy(), rtol=1e-15)
            else:
                norm = (lambda v: tuple(v) if isinstance(v, (tuple, list)) else v)
                assert norm(jv) == norm(tv), (k, attr, jv, tv)
            checked += 1
    assert checked >= 50


# ------------------------------------------------------------------ saved tensor hooks
def test_pack_when_saved_unpack_when_used():
    x, y = _xy()
    log = []

    def pack(t):
        log.append(("pack", t))
        return len(log) - 1

    def unpack(i):
        log.append(("unpack", i))
        return log[i][1]

    with saved_tensors_hooks(pack, unpack):
        z = (x * y).exp().sum()
    packed = [t for kind, t in log if kind == "pack"]
    assert len(packed) == 3 and packed[0] is x and packed[1] is y
    assert not any(kind == "unpack" for kind, _ in log)
    z.backward()
    assert sorted(i for kind, i in log if kind == "unpack") == [0, 1, 2]
    x2, y2 = _xy()
    (x2 * y2).exp().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), x2.grad.numpy())
    np.testing.assert_array_equal(y.grad.numpy(), y2.grad.numpy())


def test_hooks_can_store_elsewhere_and_nest_innermost_wins():
    x, _ = _xy()
    store: dict = {}
    outer = []

    def pack(t):
        k = len(store)
        store[k] = t.detach().numpy().copy()
        return k

    with saved_tensors_hooks(lambda t: outer.append(t) or t, lambda t: t):
        with saved_tensors_hooks(pack, lambda k: jg.tensor(store.pop(k), dtype=jg.float32)):
            y = (x.float() * x.float()).sum()
        z = x.sin().sum()
    assert len(store) == 2 and len(outer) == 1
    y.backward()
    assert not store
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)
    z.backward()


def test_unpack_must_return_a_tensor_and_version_is_checked():
    x, y = _xy()
    with saved_tensors_hooks(lambda t: t, lambda t: "not a tensor"):
        z = (x * y).sum()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        z.backward()
    a = x * 1.0
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        b = (a * a).sum()
    a.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.backward()


def test_hooks_apply_to_custom_functions_and_inplace_ops():
    class Square(jg.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t * t

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return 2 * t * g

    x, _ = _xy()
    n = []
    with saved_tensors_hooks(lambda t: n.append(1) or t, lambda t: t):
        y = Square.apply(x).sum()
        w = x * 1.0
        w.mul_(w)  # the in-place op's saved self is its value before the write
        v = w.sum()
    assert n
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy())
    x.grad = None
    v.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy())


def test_hooks_are_per_thread():
    seen = []
    x, _ = _xy()

    def other():
        (x * x).sum()

    with saved_tensors_hooks(lambda t: seen.append(t) or t, lambda t: t):
        th = threading.Thread(target=other)
        th.start()
        th.join()
    assert seen == []


def test_save_on_cpu_and_disable():
    x, y = _xy()
    with save_on_cpu(pin_memory=True):
        z = (x * y).tanh().sum()
    z.backward()
    x2, y2 = _xy()
    (x2 * y2).tanh().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), x2.grad.numpy())
    with disable_saved_tensors_hooks("no hooks here"):
        (x * y).sum().backward()  # saving still works
        with pytest.raises(RuntimeError, match="no hooks here"):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass


def test_pack_counts_match_torch():
    torch = pytest.importorskip("torch")

    def count(M):
        x = M.tensor([0.5, 1.5], requires_grad=True)
        y = M.tensor([1.0, 2.0], requires_grad=True)
        n = {"pack": 0, "unpack": 0}

        def pack(t):
            n["pack"] += 1
            return t

        def unpack(t):
            n["unpack"] += 1
            return t

        with M.autograd.graph.saved_tensors_hooks(pack, unpack):
            z = ((x * y).exp() + x.tanh() / y).sum()
        z.backward()
        return n

    assert count(jg) == count(torch)
