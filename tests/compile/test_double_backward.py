"""Higher-order gradients through compiled functions (``create_graph=True``): gradgradcheck
of compiled functions over a spread of ops, equality with eager double backward (float64,
rtol 1e-10), Hessian-vector products, third derivatives, functions that differentiate
inside, retain_graph and hooks, and the clear errors where it is not supported."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import cube_function

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad.autograd import gradgradcheck
from jitgrad.autograd.node import FREED_MESSAGE

RTOL = 1e-10
ATOL = 1e-12


def leaf(a):
    return jg.tensor(np.asarray(a, dtype=np.float64), dtype=jg.float64, requires_grad=True)


def close(a, b) -> None:
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------- the functions under test
def chain(x):
    return ((x.tanh() * x).exp() + x.sin() * x.sigmoid()).sum()


def transcendental(x):
    return (x.square() + 1).log() * (x * 0.5).cos() + (x.abs() + 1).sqrt() ** 1.5


def matmul_fn(a, b):
    return (a @ b).tanh().sum(dim=1)


def reductions(x):
    return x.exp().sum(dim=0) * x.mean(dim=1, keepdim=True).sin() + x.square().mean()


def softmaxes(x):
    return (F.softmax(x, dim=1) * x).sum() + F.log_softmax(x * 2, dim=0).square().mean()


def broadcasting(x, b):  # b: a row broadcast over x's rows
    return ((x * b).tanh() + b.exp() / (1 + x.square())).mean(dim=0)


def mlp_loss(x, w1, b1, w2, b2, y):
    h = (x @ w1 + b1).tanh()
    out = h @ w2 + b2
    return ((out - y) ** 2).mean()


def _inputs(rng, *shapes):
    return [leaf(rng.standard_normal(s) * 0.7) for s in shapes]


CASES = {
    "chain": (chain, [(6,)]),
    "transcendental": (transcendental, [(2, 5)]),
    "matmul": (matmul_fn, [(3, 4), (4, 2)]),
    "reductions": (reductions, [(3, 4)]),
    "softmaxes": (softmaxes, [(3, 4)]),
    "broadcasting": (broadcasting, [(3, 4), (4,)]),
    "mlp": (mlp_loss, [(4, 3), (3, 5), (5,), (5, 2), (2,), (4, 2)]),
}


def _eager_double(fn, xs, seed=0):
    """Eager: g = grad(fn, xs, create_graph) then grad(<g, v>, xs) for fixed v."""
    xs = [leaf(x.detach().numpy()) for x in xs]
    out = fn(*xs)
    gs = jg.autograd.grad(out.sum(), xs, create_graph=True)
    rng = np.random.default_rng(seed)
    vs = [jg.tensor(rng.standard_normal(g.shape), dtype=jg.float64) for g in gs]
    s = sum((g * v).sum() for g, v in zip(gs, vs))
    return [g.detach().numpy() for g in gs], jg.autograd.grad(s, xs, allow_unused=True), vs


@pytest.mark.parametrize("name", list(CASES))
def test_gradgradcheck_compiled(name, rng):
    fn, shapes = CASES[name]
    xs = _inputs(rng, *shapes)
    f = jg.compile(fn)
    assert gradgradcheck(f, xs, eps=1e-6, atol=1e-5, rtol=1e-4)
    assert f.stats["cache_hits"] > 0  # the cached path ran under gradgradcheck too


@pytest.mark.parametrize("name", list(CASES))
def test_double_backward_equals_eager(name, rng):
    fn, shapes = CASES[name]
    xs = _inputs(rng, *shapes)
    g_ref, gg_ref, vs = _eager_double(fn, xs)
    f = jg.compile(fn)
    for _ in range(3):  # the first call (trace) and the cached plan
        ys = [leaf(x.detach().numpy()) for x in xs]
        out = f(*ys)
        assert out.grad_fn.name() == "CompiledFunctionBackward"
        gs = jg.autograd.grad(out.sum(), ys, create_graph=True)
        assert all(g.requires_grad for g in gs)
        s = sum((g * v).sum() for g, v in zip(gs, vs))
        ggs = jg.autograd.grad(s, ys, allow_unused=True)
        for g, r in zip(gs, g_ref):
            close(g.detach().numpy(), r)
        for g, r in zip(ggs, gg_ref):
            if r is None:
                assert g is None or not np.any(g.numpy())
            else:
                close(g.numpy(), r.numpy())
    assert f.stats["traces"] == 1


def test_example_of_the_issue():
    f = jg.compile(lambda x: (x.tanh() * x).sum())
    for _ in range(2):
        x = leaf(np.linspace(-1.5, 1.5, 5))
        (g,) = jg.autograd.grad(f(x), x, create_graph=True)
        g.sum().backward()
        xe = leaf(x.detach().numpy())
        (ge,) = jg.autograd.grad((xe.tanh() * xe).sum(), xe, create_graph=True)
        ge.sum().backward()
        close(x.grad.numpy(), xe.grad.numpy())
        t = np.tanh(x.detach().numpy())  # d/dx (tanh + x (1 - tanh^2))
        close(x.grad.numpy(), 2 * (1 - t * t) - 2 * x.detach().numpy() * t * (1 - t * t))


def test_hessian_vector_product(rng):
    def f(x):
        return (x.sin() * x.square()).sum() + (x[:3] * x[1:4]).exp().sum()

    cf = jg.compile(f)
    v = jg.tensor(rng.standard_normal(6), dtype=jg.float64)
    x0 = rng.standard_normal(6)
    for _ in range(2):
        x = leaf(x0)
        hv = jg.autograd.grad(jg.autograd.grad(cf(x), x, create_graph=True)[0] @ v, x)[0]
        xe = leaf(x0)
        hv_ref = jg.autograd.grad(jg.autograd.grad(f(xe), xe, create_graph=True)[0] @ v, xe)[0]
        close(hv.numpy(), hv_ref.numpy())
    # the Hessian itself, column by column, is symmetric
    x = leaf(x0)
    (g,) = jg.autograd.grad(cf(x), x, create_graph=True)
    hess = np.stack([jg.autograd.grad(g[i], x, retain_graph=True)[0].numpy() for i in range(6)])
    close(hess, hess.T)


def test_third_derivative(rng):
    f = jg.compile(lambda x: (x.tanh() * x.exp()).sum())
    x0 = rng.standard_normal(4)
    res = []
    for fn in (f, lambda x: (x.tanh() * x.exp()).sum()):
        x = leaf(x0)
        (g,) = jg.autograd.grad(fn(x), x, create_graph=True)
        (gg,) = jg.autograd.grad(g.sum(), x, create_graph=True)
        (ggg,) = jg.autograd.grad(gg.sum(), x)
        res.append((g.detach().numpy(), gg.detach().numpy(), ggg.numpy()))
    for a, b in zip(*res):
        close(a, b)


def test_cotangents_with_history(rng):
    """grad_outputs that require grad: the gradient is differentiable in them too."""
    f = jg.compile(lambda x, w: (x @ w).sigmoid())
    x, w = _inputs(rng, (3, 4), (4, 2))
    res = []
    for fn in (f, lambda x, w: (x @ w).sigmoid()):
        xs = [leaf(x.detach().numpy()), leaf(w.detach().numpy())]
        go = leaf(np.ones((3, 2)) * 0.3)
        gx, gw = jg.autograd.grad(fn(*xs), xs, grad_outputs=go, create_graph=True)
        (gx.square().sum() + gw.sin().sum()).backward()
        res.append([xs[0].grad.numpy(), xs[1].grad.numpy(), go.grad.numpy()])
    for a, b in zip(*res):
        close(a, b)


def test_captured_parameters_and_nonleaf_inputs(rng):
    """A Module's weights captured by the function; the input is a non-leaf with history."""
    jg.manual_seed(0)
    lin = jg.nn.Linear(4, 3).double()
    a0 = rng.standard_normal((2, 4))

    def loss(h):
        return lin(h).tanh().square().sum()

    f = jg.compile(loss)
    res = []
    for fn in (f, f, loss):
        a = leaf(a0)
        h = a * 2.0  # non-leaf input
        gh, gw = jg.autograd.grad(fn(h), (h, lin.weight), create_graph=True)
        (pen,) = jg.autograd.grad(gh.square().sum() + gw.square().sum(), a)
        res.append([gh.detach().numpy(), gw.detach().numpy(), pen.numpy()])
    for r in res[:2]:
        for p, q in zip(r, res[2]):
            close(p, q)


def test_detach_and_no_grad_inside_are_respected(rng):
    """Values detached (or computed under no_grad) inside the function are constants of the
    second derivative too, as in eager mode (the IR alone cannot tell them apart)."""
    def fn(x):
        m = x.detach().mean()
        with jg.no_grad():
            s = x.square().sum()
        return ((x - m).tanh() * s + x.detach() * x.sin()).sum()

    f = jg.compile(fn)
    x0 = rng.standard_normal(5)
    res = []
    for fun in (f, f, fn):
        x = leaf(x0)
        (g,) = jg.autograd.grad(fun(x), x, create_graph=True)
        (gg,) = jg.autograd.grad(g.square().sum(), x)
        res.append((g.detach().numpy(), gg.numpy()))
    for r in res[:2]:
        close(r[0], res[2][0])
        close(r[1], res[2][1])


def test_dropout_inside(rng):
    """Random draws are not redrawn: the second derivative sees the call's own mask."""
    def fn(x):
        return (F.dropout(x.tanh(), p=0.5, training=True) * x).sum()

    f = jg.compile(fn)
    x0 = rng.standard_normal(50)
    for _ in range(2):
        jg.manual_seed(3)
        x = leaf(x0)
        (g,) = jg.autograd.grad(f(x), x, create_graph=True)
        (gg,) = jg.autograd.grad(g.sum(), x)
        jg.manual_seed(3)
        xe = leaf(x0)
        (ge,) = jg.autograd.grad(fn(xe), xe, create_graph=True)
        (gge,) = jg.autograd.grad(ge.sum(), xe)
        close(g.detach().numpy(), ge.detach().numpy())
        close(gg.numpy(), gge.numpy())


# --------------------------------------------------- functions that differentiate inside
def test_grad_with_create_graph_inside_then_backward_outside(rng):
    """A gradient penalty computed inside the compiled function (a joint graph) whose result
    is differentiated outside."""
    def penalty(x, w):
        out = (x @ w).tanh().sum()
        (gx,) = jg.autograd.grad(out, x, create_graph=True)
        return out + gx.square().sum()

    f = jg.compile(penalty)
    x0, w0 = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    res = []
    for fn in (f, f, penalty):
        x, w = leaf(x0), leaf(w0)
        fn(x, w).backward()
        res.append((x.grad.numpy(), w.grad.numpy()))
    for r in res[:2]:
        close(r[0], res[2][0])
        close(r[1], res[2][1])
    assert any(e.joint for es in f._entries.values() for e in es)


def test_backward_create_graph_inside_returns_gradient(rng):
    """``loss.backward(create_graph=True)`` inside; the gradient it computed is returned and
    differentiated again outside."""
    def fn(x):
        loss = (x.sin() * x).sum()
        (g,) = jg.autograd.grad(loss, x, create_graph=True)
        return g

    f = jg.compile(fn)
    x0 = rng.standard_normal(4)
    res = []
    for fun in (f, f, fn):
        x = leaf(x0)
        g = fun(x)
        (gg,) = jg.autograd.grad(g.square().sum(), x, create_graph=True)
        (ggg,) = jg.autograd.grad(gg.sum(), x)
        res.append((g.detach().numpy(), gg.detach().numpy(), ggg.numpy()))
    for r in res[:2]:
        for a, b in zip(r, res[2]):
            close(a, b)


def test_backward_create_graph_inside_penalty_from_grad(rng):
    """``loss.backward(create_graph=True)`` inside and a penalty on ``x.grad`` returned: the
    penalty is differentiated outside; ``x.grad`` holds eager mode's values throughout."""
    def fn(x):
        loss = (x.tanh() * x).sum()
        loss.backward(create_graph=True)
        return (x.grad ** 2).sum()

    f = jg.compile(fn)
    x0 = rng.standard_normal(4)
    res = []
    for fun in (f, f, fn):
        x = leaf(x0)
        pen = fun(x)
        g_in = x.grad.detach().numpy().copy()
        pen.backward()
        res.append((pen.item(), g_in, x.grad.detach().numpy()))
    for r in res[:2]:
        close(r[0], res[2][0])
        close(r[1], res[2][1])
        close(r[2], res[2][2])


def test_backward_inside_with_or_without_retain_graph(rng):
    """``loss.backward()`` inside: with retain_graph=True the returned loss can be
    differentiated again outside (accumulating, as in eager mode); without, its graph was
    consumed inside the plan and that is refused, as eager mode refuses a freed graph."""
    def fn(x, retain):
        loss = (x.tanh() * x).sum()
        loss.backward(retain_graph=retain)
        return loss

    f = jg.compile(fn)
    x0 = rng.standard_normal(3)
    res = []
    for fun in (f, f, fn):
        x = leaf(x0)
        fun(x, True).backward()
        res.append(x.grad.numpy())
    close(res[0], res[2])
    close(res[1], res[2])
    x = leaf(x0)
    out = f(x, False)
    with pytest.raises(RuntimeError, match="already differentiated inside"):
        out.backward()
    xe = leaf(x0)
    with pytest.raises(RuntimeError):
        fn(xe, False).backward()


# ------------------------------------------------------------ autograd semantics kept
def test_retain_graph_semantics_with_create_graph(rng):
    f = jg.compile(lambda x: (x.tanh() * x).sum())
    x = leaf(rng.standard_normal(4))
    out = f(x)
    (g1,) = jg.autograd.grad(out, x, create_graph=True)  # retains the graph by default
    (g2,) = jg.autograd.grad(out, x, create_graph=True)
    close(g1.detach().numpy(), g2.detach().numpy())
    (g3,) = jg.autograd.grad(out, x, create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError) as e:
        out.backward()
    assert str(e.value) == FREED_MESSAGE
    # as in eager mode, the gradient's own graph went through the forward's, now freed
    with pytest.raises(RuntimeError) as e:
        g3.sum().backward()
    assert str(e.value) == FREED_MESSAGE
    xe = leaf(x.detach().numpy())
    (ge,) = jg.autograd.grad((xe.tanh() * xe).sum(), xe, create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError) as e:
        ge.sum().backward()
    assert str(e.value) == FREED_MESSAGE
    # g1 was computed while the graph was retained: still differentiable? No: the forward's
    # saved values are gone for it too, exactly as in eager mode
    with pytest.raises(RuntimeError):
        g1.sum().backward()


def test_hooks_with_create_graph(rng):
    f = jg.compile(lambda x: (x * 3).exp().sum())
    x0 = rng.standard_normal(3) * 0.1
    res = []
    for fn in (f, f, lambda x: (x * 3).exp().sum()):
        x = leaf(x0)
        seen: list = []

        def hook(g, seen=seen):
            seen.append(g.requires_grad)
            return g * 2

        x.register_hook(hook)
        out = fn(x)
        out.backward(create_graph=True)
        g = x.grad
        assert g.requires_grad
        x.grad = None
        g.sum().backward()
        res.append((seen, g.detach().numpy(), x.grad.numpy()))
    for r in res[:2]:
        assert r[0] == res[2][0]
        close(r[1], res[2][1])
        close(r[2], res[2][2])


def test_input_modified_in_place_after_forward_raises(rng):
    f = jg.compile(lambda x, w: (x * w).sin().sum())
    x, w = leaf(rng.standard_normal(3)), jg.tensor(rng.standard_normal(3), dtype=jg.float64)
    out = f(x, w)
    w.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        jg.autograd.grad(out, x, create_graph=True)


def test_custom_function_inside_gives_a_clear_error(rng):
    Cube = cube_function()

    f = jg.compile(lambda x: Cube.apply(x.sin()).sum())
    x = leaf(rng.standard_normal(3))
    f(x).backward()  # first order: the compiled backward
    close(x.grad.numpy(), 3 * np.sin(x.detach().numpy()) ** 2 * np.cos(x.detach().numpy()))
    with pytest.raises(RuntimeError, match="custom autograd.Function"):
        jg.autograd.grad(f(x), x, create_graph=True)


# ------------------------------------------------------------------------- PyTorch
@pytest.mark.parametrize("name", ["chain", "matmul", "softmaxes", "mlp"])
def test_double_backward_equals_torch(name, rng):
    torch = pytest.importorskip("torch")
    fn, shapes = CASES[name]
    xs = _inputs(rng, *shapes)
    f = jg.compile(fn)
    f(*xs)  # trace
    ys = [leaf(x.detach().numpy()) for x in xs]
    gs = jg.autograd.grad(f(*ys).sum(), ys, create_graph=True)
    ggs = jg.autograd.grad(sum(g.square().sum() for g in gs), ys, allow_unused=True)
    tfn = {"chain": lambda x: ((x.tanh() * x).exp() + x.sin() * x.sigmoid()).sum(),
           "matmul": lambda a, b: (a @ b).tanh().sum(dim=1),
           "softmaxes": lambda x: (torch.softmax(x, 1) * x).sum()
           + torch.log_softmax(x * 2, 0).square().mean(),
           "mlp": lambda x, w1, b1, w2, b2, y: ((((x @ w1 + b1).tanh()) @ w2 + b2 - y) ** 2
                                                ).mean()}[name]
    ts = [torch.tensor(x.detach().numpy(), requires_grad=True) for x in xs]
    tg = torch.autograd.grad(tfn(*ts).sum(), ts, create_graph=True)
    tgg = torch.autograd.grad(sum(g.square().sum() for g in tg), ts, allow_unused=True)
    for a, b in zip(gs, tg):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9,
                                   atol=1e-12)
    for a, b in zip(ggs, tgg):
        if b is None:
            assert a is None or not np.any(a.numpy())
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12)
