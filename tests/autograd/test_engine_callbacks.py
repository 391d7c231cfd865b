"""End-of-backward callbacks (``queue_callback``, PyTorch's
``Variable._execution_engine.queue_callback``) and the timing of post-accumulate-grad hooks:
during the pass, as soon as the leaf's gradient is complete."""

from __future__ import annotations

import pytest

import jitgrad as jg
from jitgrad.autograd import Function, Variable
from jitgrad.autograd.engine import queue_callback


def leaf(values):
    return jg.tensor(values, requires_grad=True)


def test_callbacks_run_after_the_pass_in_order_and_may_queue_more():
    x = leaf([1.0, 2.0])
    log = []

    def hook(g):
        log.append("hook")
        queue_callback(lambda: log.append(("first", x.grad.tolist())))
        queue_callback(lambda: (log.append("second"), queue_callback(lambda: log.append("third"))))

    x.register_hook(hook)
    (x * 3).sum().backward()
    assert log == ["hook", ("first", [3.0, 3.0]), "second", "third"]
    log.clear()
    (x * 3).sum().backward()  # queued per pass: nothing left over from the first
    assert log == ["hook", ("first", [6.0, 6.0]), "second", "third"]


def test_queue_callback_outside_backward_raises():
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during "
                                           "backward pass."):
        Variable._execution_engine.queue_callback(lambda: None)


def test_a_failing_pass_drops_its_callbacks():
    x = leaf([1.0])
    ran = []

    def hook(g):
        queue_callback(lambda: ran.append(1))
        raise ValueError("hook fails")

    x.register_hook(hook)
    with pytest.raises(ValueError, match="hook fails"):
        (x * 2).sum().backward()
    assert ran == [] and x.grad is None
    with pytest.raises(RuntimeError, match="only be installed during backward"):
        queue_callback(lambda: None)  # the pass's frame is gone


def test_callback_from_a_custom_function_backward_on_the_one_node_path():
    ran = []

    def backward(ctx, g):
        queue_callback(lambda: ran.append("done"))
        return g * 2

    Double = type("Double", (Function,), {"forward": staticmethod(lambda ctx, x: x * 2),
                                          "backward": staticmethod(backward)})

    x = leaf([1.0])
    Double.apply(x).sum().backward()
    y = leaf(2.0)
    Double.apply(y).backward()  # a one-element output over a plain leaf: the one-node path
    assert ran == ["done", "done"] and y.grad.item() == 2.0


def test_nested_backward_callbacks_belong_to_their_own_pass():
    outer, inner = leaf([1.0]), leaf([2.0])
    log = []

    def hook(g):
        queue_callback(lambda: log.append("outer"))
        with jg.enable_grad():  # a pass inside a hook: its callbacks run at its end
            (inner * 2).sum().backward()
        return g

    def inner_hook(g):
        queue_callback(lambda: log.append("inner"))

    outer.register_hook(hook)
    inner.register_hook(inner_hook)
    (outer * 1).sum().backward()
    assert log == ["inner", "outer"]


def test_post_accumulate_hooks_run_during_the_pass_as_soon_as_the_leaf_is_ready():
    # w2's gradient is complete before the first layer's node runs: its hook fires then
    # (a DistributedDataParallel bucket starts its allreduce from it)
    w1, w2 = leaf([[1.0, 2.0]]), leaf([[3.0], [4.0]])
    x = jg.tensor([[1.0, 1.0]])
    log = []
    w2.register_post_accumulate_grad_hook(lambda t: log.append(("w2", t.grad.tolist())))
    w1.register_post_accumulate_grad_hook(lambda t: log.append(("w1", t.grad.tolist())))
    h = (x * w1).sum(1, keepdim=True)
    h.register_hook(lambda g: log.append("h node"))
    (h @ w2.t()).sum().backward()
    assert [e if isinstance(e, str) else e[0] for e in log] == ["w2", "h node", "w1"]
    assert log[0][1] == [[3.0], [3.0]]  # accumulated when its hook ran


def test_transactional_for_leaves_without_post_accumulate_hooks():
    plain, hooked = leaf([1.0]), leaf([1.0])
    hooked.register_post_accumulate_grad_hook(lambda t: None)

    def fail(g):
        raise ValueError("late failure")

    mid = plain * 2
    mid.register_hook(fail)
    with pytest.raises(ValueError, match="late failure"):
        (mid + hooked * 3).sum().backward()
    assert plain.grad is None  # committed only after a whole pass
    assert hooked.grad.tolist() == [3.0]  # accumulated (and its hooks run) during the pass
