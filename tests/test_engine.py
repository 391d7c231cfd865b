"""The backward engine: accumulation, retain_graph, create_graph, inputs=, autograd.grad,
deep graphs, freeing, ordering and transactional failure."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd.node import FREED_MESSAGE


def leaf(value, dtype=jg.float32):
    return jg.tensor(value, dtype=dtype, requires_grad=True)


def test_accumulates_into_the_same_grad_tensor_in_place():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    g = x.grad
    (x * 3).sum().backward()
    assert x.grad is g
    assert g.tolist() == [6.0, 6.0]
    assert g._version == 1


def test_first_grad_never_aliases_a_user_gradient():
    x = leaf([1.0, 2.0])
    y = x + 1  # AddBackward passes the incoming gradient straight through
    user = jg.tensor([0.5, 0.25])
    y.backward(user)
    x.grad.zero_()
    assert user.tolist() == [0.5, 0.25]


def test_gradient_routed_to_two_leaves_is_not_shared():
    x, w = leaf([1.0]), leaf([2.0])
    (x + w).sum().backward()
    x.grad.add_(10)
    assert w.grad.tolist() == [1.0]


def test_second_backward_raises_pytorchs_message():
    x = leaf(2.0)
    y = (x ** 3).exp()
    y.backward()
    with pytest.raises(RuntimeError) as e:
        y.backward()
    assert str(e.value) == FREED_MESSAGE
    assert x.grad.item() == pytest.approx(3 * 4 * np.exp(8), rel=1e-5)


def test_second_backward_through_nodes_that_save_nothing_works():
    x = leaf([1.0, 2.0])
    y = (x + 1).sum()
    y.backward()
    y.backward()  # Add/Sum need no saved tensors: allowed, as in PyTorch
    assert x.grad.tolist() == [2.0, 2.0]


def test_retain_graph_allows_a_second_backward():
    x = leaf(5.0)
    z = jg.log(x ** 3)
    z.backward(retain_graph=True)
    z.backward()
    assert x.grad.item() == pytest.approx(1.2)


def test_create_graph_gives_second_derivatives():
    x = leaf(2.0, jg.float64)
    y = x ** 3
    (g,) = jg.autograd.grad(y, x, create_graph=True)
    assert g.item() == pytest.approx(12.0)
    assert g.requires_grad and g.grad_fn is not None
    (gg,) = jg.autograd.grad(g, x)
    assert gg.item() == pytest.approx(12.0)  # 6x


def test_backward_create_graph_then_backward_of_grad():
    x = leaf(1.5, jg.float64)
    (x.sin() * x).backward(create_graph=True)
    g = x.grad
    assert g.requires_grad
    x.grad = None
    g.backward()
    # d/dx (sin x + x cos x) = 2 cos x - x sin x
    assert x.grad.item() == pytest.approx(2 * np.cos(1.5) - 1.5 * np.sin(1.5))


def test_gradgradcheck_on_a_composite():
    x = jg.tensor(np.linspace(0.2, 1.4, 6).reshape(2, 3), dtype=jg.float64, requires_grad=True)
    w = jg.tensor(np.linspace(-1, 1, 3), dtype=jg.float64, requires_grad=True)

    def f(x, w):
        return ((x * w).tanh() + x.exp() / (1 + x * x) - jg.log(x) * w).sum(dim=1)

    assert jg.autograd.gradcheck(f, (x, w))
    assert jg.autograd.gradgradcheck(f, (x, w))


def test_100000_node_chain():
    x = leaf(1.0, jg.float64)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward()
    assert x.grad.item() == 1.0


def _graph_saving_exp():
    """``z = sum(exp(x) * exp(x))`` and a weak reference to ``exp(x)``, which only z's graph
    keeps alive (MulBackward0 saved it)."""
    x = leaf([1.0, 2.0])
    y = x.exp()
    z = (y * y).sum()
    return z, weakref.ref(y)


def test_graph_is_freed_after_backward():
    z, ref = _graph_saving_exp()
    gc.collect()
    assert ref() is not None  # saved by MulBackward0
    z.backward()
    gc.collect()
    assert ref() is None


def test_graph_kept_with_retain_graph():
    z, ref = _graph_saving_exp()
    z.backward(retain_graph=True)
    gc.collect()
    assert ref() is not None


def test_no_reference_cycle_through_saved_outputs():
    x = leaf([1.0, 2.0])
    y = x.exp()  # ExpBackward0 saves its output
    ref = weakref.ref(y)
    gc.disable()
    try:
        del y
        assert ref() is None  # freed by refcounting alone: no cycle
    finally:
        gc.enable()


def test_each_node_runs_once_with_summed_gradient():
    calls = []
    x = leaf(2.0)
    y = x * 3
    y.grad_fn.register_prehook(lambda gs: calls.append(gs[0].item()))
    z = y * y + y  # y feeds two consumers
    z.backward()
    assert calls == [pytest.approx(2 * 6 + 1)]
    assert x.grad.item() == pytest.approx(3 * 13)


def test_backward_inputs_only_accumulates_into_them():
    x, w = leaf(2.0), leaf(3.0)
    (x * w).backward(inputs=[w])
    assert x.grad is None
    assert w.grad.item() == 2.0


def test_backward_inputs_nonleaf_accumulates_into_its_grad():
    x = leaf(2.0)
    y = x * 3
    (y * y).backward(inputs=[y])
    assert y.grad.item() == 12.0
    assert x.grad is None


def test_grad_returns_without_accumulating():
    x = leaf([1.0, 2.0])
    (g,) = jg.autograd.grad((x * x).sum(), [x])
    assert g.tolist() == [2.0, 4.0]
    assert x.grad is None


def test_grad_with_grad_outputs_and_multiple_outputs():
    x = leaf([1.0, 2.0])
    a, b = x * 2, x * x
    gs = jg.autograd.grad([a, b], x, grad_outputs=[jg.ones(2), jg.tensor([1.0, 0.5])])
    assert gs[0].tolist() == [4.0, 4.0]


def test_grad_allow_unused():
    x, u = leaf(1.0), leaf(2.0)
    with pytest.raises(RuntimeError, match="The differentiated Tensor at index 1 appears to not "
                                           "have been used in the graph. Set allow_unused=True"):
        jg.autograd.grad(x * 2, [x, u])
    gx, gu = jg.autograd.grad(x * 2, [x, u], allow_unused=True)
    assert gx.item() == 2.0 and gu is None
    gx, gu = jg.autograd.grad(x * 2, [x, u], materialize_grads=True)
    assert gu.item() == 0.0


def test_grad_errors():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not require"):
        jg.autograd.grad((x * 2).sum(), [jg.ones(1)])
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        jg.autograd.grad(x * 2, [x])


def test_grad_of_intermediate():
    x = leaf(3.0)
    y = x * x
    z = y * 2
    (gy,) = jg.autograd.grad(z, y)
    assert gy.item() == 2.0


def test_grad_of_root_leaf_itself():
    x = leaf([1.0, 2.0])
    (g,) = jg.autograd.grad(x, x, grad_outputs=jg.ones(2))
    assert g.tolist() == [1.0, 1.0]


def test_backward_on_a_leaf_accumulates_gradient():
    x = leaf([1.0, 2.0])
    x.backward(jg.tensor([3.0, 4.0]))
    assert x.grad.tolist() == [3.0, 4.0]


def test_multiple_roots():
    x = leaf(2.0)
    jg.autograd.backward([x * 2, x * x], [jg.tensor(1.0), jg.tensor(1.0)])
    assert x.grad.item() == 6.0


def test_gradient_dtype_follows_the_output():
    x = leaf([1.0, 2.0])
    (x * 2).backward(jg.ones(2, dtype=jg.float64))
    assert x.grad.dtype == jg.float32


def test_failed_backward_changes_nothing():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    x.grad = jg.tensor([10.0, 10.0])
    y = (x * w).exp().sum()

    def bad_hook(g):
        raise ValueError("boom")

    h = w.register_hook(bad_hook)
    with pytest.raises(ValueError, match="boom"):
        y.backward()
    assert x.grad.tolist() == [10.0, 10.0]
    assert w.grad is None
    h.remove()
    y.backward()  # the graph was not freed by the failed pass
    assert w.grad is not None
    assert x.grad[0].item() == pytest.approx(10.0 + 3.0 * np.exp(3.0), rel=1e-5)


def test_failed_backward_bad_gradient_shape_changes_nothing():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape of "
                                           r"jitgrad.Size\(\[3\]\) and output\[0\] has a shape "
                                           r"of jitgrad.Size\(\[2\]\)."):
        y.backward(jg.ones(3))
    assert x.grad is None
    y.backward(jg.ones(2))
    assert x.grad.tolist() == [2.0, 2.0]


def test_broadcast_gradients_reduce_to_input_shapes():
    x = leaf(np.ones((2, 3)))
    b = leaf(np.ones(3))
    s = leaf(2.0)
    ((x * b + s) * s).sum().backward()
    assert b.grad.shape == (3,) and b.grad.tolist() == [4.0, 4.0, 4.0]
    assert s.grad.shape == () and s.grad.item() == pytest.approx(6 * 2 + 6 * 3)


def test_mixed_dtype_gradients_come_back_in_each_inputs_dtype():
    a = leaf([1.0, 2.0], jg.float32)
    b = leaf(3.0, jg.float64)  # 0-dim: does not promote the result
    y = a * b
    assert y.dtype == jg.float32
    y.sum().backward()
    assert a.grad.dtype == jg.float32 and b.grad.dtype == jg.float64
    assert b.grad.item() == 3.0


def test_nodes_run_latest_first():
    order = []
    x = leaf(1.0)
    a = x * 2
    b = x * 3
    a.grad_fn.register_prehook(lambda g: order.append("a"))
    b.grad_fn.register_prehook(lambda g: order.append("b"))
    (a + b).backward()
    assert order == ["b", "a"]


def test_next_functions_and_accumulate_grad():
    x = leaf(1.0)
    y = x * 2
    z = y + 1
    (fn, nr), (other, _) = z.grad_fn.next_functions
    assert fn is y.grad_fn and nr == 0 and other is None
    acc = y.grad_fn.next_functions[0][0]
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is x
    assert y.grad_fn.next_functions[0][0] is acc  # stable identity
    assert repr(y.grad_fn).startswith("<MulBackward0 object at 0x")
    assert y.grad_fn.name() == "MulBackward0"


def test_node_post_hook_can_replace_grad_inputs():
    x = leaf(1.0)
    y = x * 2
    y.grad_fn.register_hook(lambda gin, gout: (gin[0] * 10, gin[1]))
    y.backward()
    assert x.grad.item() == 20.0


def test_in_place_accumulation_with_create_graph_is_out_of_place():
    x = leaf(1.0, jg.float64)
    (x * x).backward(create_graph=True)
    g1 = x.grad
    (x * x).backward(create_graph=True)
    assert x.grad is not g1 and x.grad.item() == 4.0 and g1.item() == 2.0


# ------------------------------------------------ one node, plain leaves: the fast path
def _one_node_cases():
    import jitgrad as jg

    f = jg.compile(lambda x, w: (jg.tanh(x * w) * x).sum())
    return jg, f


def test_one_node_backward_equals_the_generic_traversal():
    import numpy as np

    jg, f = _one_node_cases()
    rng = np.random.default_rng(0)
    x0, w0 = rng.standard_normal(5), rng.standard_normal(5)
    res = []
    for path in ("fast", "generic"):
        x = jg.tensor(x0, requires_grad=True)
        w = jg.tensor(w0, requires_grad=True)
        for _ in range(3):  # accumulation into existing .grad
            loss = f(x, w)
            if path == "fast":
                loss.backward()
            else:  # an explicit seed takes the generic traversal
                loss.backward(jg.ones_like(loss))
        res.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


def test_one_node_backward_retain_graph_and_freed_graph():
    import pytest

    from jitgrad.autograd.node import FREED_MESSAGE

    jg, f = _one_node_cases()
    x = jg.ones(3, requires_grad=True)
    w = jg.ones(3, requires_grad=True)
    loss = f(x, w)
    loss.backward(retain_graph=True)
    loss.backward()
    g2 = x.grad.numpy().copy()
    x.grad = None
    f(x, w).backward()
    assert (g2 == 2 * x.grad.numpy()).all()
    with pytest.raises(RuntimeError, match=FREED_MESSAGE[:40]):
        loss.backward()


def test_one_node_backward_keeps_hooks_and_the_seed_is_never_a_grad():
    jg, _ = _one_node_cases()
    x = jg.tensor(2.0, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.item()))
    (x * 3).backward()  # a leaf with a hook: the generic path runs it
    assert seen == [3.0] and x.grad.item() == 3.0
    y = jg.tensor(1.0, requires_grad=True)
    (y + 0).backward()  # the gradient is the seed itself: .grad must be a private copy
    y.grad.add_(1.0)
    z = jg.tensor(1.0, requires_grad=True)
    (z + 0).backward()
    assert z.grad.item() == 1.0 and y.grad.item() == 2.0


def _chain_case(seed=0):
    """A loss over a compiled model's output: ``NllLossBackward0 -> LogSoftmaxBackward0
    -> CompiledFunctionBackward -> leaves``, the chain the fast path walks."""
    rng = np.random.default_rng(seed)
    model = jg.nn.Sequential(jg.nn.Linear(6, 8), jg.nn.Tanh(), jg.nn.Linear(8, 4))
    cm = jg.compile(model)
    x = jg.tensor(rng.standard_normal((5, 6)).astype(np.float32))
    y = jg.tensor(rng.integers(0, 4, 5))
    return model, lambda: jg.nn.functional.cross_entropy(cm(x), y)


def _runs_generic(monkeypatch):
    from jitgrad.autograd import engine

    calls = []
    orig = engine._Run.run
    monkeypatch.setattr(engine._Run, "run", lambda self: (calls.append(1), orig(self))[1])
    return calls


def test_chain_backward_equals_the_generic_traversal(monkeypatch):
    calls = _runs_generic(monkeypatch)
    res = []
    for path in ("chain", "generic"):
        jg.manual_seed(0)
        model, loss_fn = _chain_case()
        for _ in range(3):  # accumulation into existing .grad
            loss = loss_fn()
            n = len(calls)
            if path == "chain":
                loss.backward()
                assert len(calls) == n  # the traversal did not run
            else:
                loss.backward(jg.ones_like(loss))  # an explicit seed: the traversal
                assert len(calls) == n + 1
        res.append([p.grad.numpy().copy() for p in model.parameters()])
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


def test_chain_backward_retain_graph_and_freed_graph():
    jg.manual_seed(0)
    model, loss_fn = _chain_case()
    loss = loss_fn()
    loss.backward(retain_graph=True)
    loss.backward()
    g2 = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    loss_fn().backward()
    for a, p in zip(g2, model.parameters()):
        np.testing.assert_array_equal(a, 2 * p.grad.numpy())
    with pytest.raises(RuntimeError, match=FREED_MESSAGE[:40]):
        loss.backward()


def test_chain_backward_that_fails_changes_no_grad(monkeypatch):
    calls = _runs_generic(monkeypatch)
    x = leaf([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    t = jg.tensor([0, 2])
    jg.nn.functional.nll_loss(jg.log_softmax(x, 1), t).backward()  # NllLoss -> LogSoftmax
    g = x.grad.numpy().copy()
    out = jg.log_softmax(x, 1)
    loss = jg.nn.functional.nll_loss(out, t)
    with jg.no_grad():
        out.mul_(2.0)  # the output LogSoftmaxBackward0 saved, modified in place
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), g)
    assert not calls  # both ran on the chain path


def test_chains_the_traversal_may_fuse_take_the_traversal(monkeypatch):
    from jitgrad.autograd.fused_regions import MIN_ELEMENTS

    calls = _runs_generic(monkeypatch)
    x = leaf(np.linspace(-1.0, 1.0, MIN_ELEMENTS))
    x.tanh().sum().backward()  # SumBackward0 -> TanhBackward0: fusable ops, large enough
    assert calls
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh(np.linspace(-1.0, 1.0, MIN_ELEMENTS))
                               ** 2, rtol=1e-6, atol=1e-6)
    calls.clear()
    x = leaf(np.linspace(-1.0, 1.0, 8))
    x.tanh().sum().backward()  # too small for the traversal to fuse: the chain path
    assert not calls
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh(np.linspace(-1.0, 1.0, 8)) ** 2)


def test_a_node_post_hook_returning_the_wrong_number_of_gradients_raises():
    x = jg.randn(3, requires_grad=True)
    y = jg.randn(3, requires_grad=True)
    z = x * y
    z.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0],))
    with pytest.raises(RuntimeError, match="incorrect number of values"):
        z.sum().backward()
    assert x.grad is None and y.grad is None
