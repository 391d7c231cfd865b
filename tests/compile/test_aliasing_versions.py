"""Compiled calls alias memory and bump version counters as eager mode does (issue 12, parts 4
and 5): gradient accumulation across and within compiled calls, outputs that are (views of)
arguments, captured tensors or each other, in-place writes by plans seen by autograd, and
the same tensor passed twice. Every case compares with eager jitgrad; PyTorch where noted."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import nn

MODIFIED = "modified by an inplace operation"


def _linear(seed: int = 0):
    jg.manual_seed(seed)
    return nn.Linear(4, 3)


def _grads(model) -> list:
    return [p.grad.numpy().copy() for p in model.parameters()]


def _eager_grads(steps: int, micro: int = 1) -> list:
    m = _linear()
    x = jg.randn(6, 4, generator=jg.Generator().manual_seed(1))
    for _ in range(steps):
        for i in range(micro):
            m(x[i * 6 // micro:(i + 1) * 6 // micro]).sum().backward()
    return _grads(m)


def _assert_same(got: list, want: list) -> None:
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------- A: accumulation into .grad
@pytest.mark.parametrize("micro", [1, 2])
def test_compiled_step_without_zero_grad_accumulates_like_eager(micro):
    """3 compiled steps (backward inside, twice per step with micro-batches) without
    zero_grad: .grad sums every step's gradient, bit for bit eager's."""
    m = _linear()
    x = jg.randn(6, 4, generator=jg.Generator().manual_seed(1))

    @jg.compile
    def step(x):
        for i in range(micro):
            m(x[i * 6 // micro:(i + 1) * 6 // micro]).sum().backward()

    for _ in range(3):
        step(x)
    _assert_same(_grads(m), _eager_grads(3, micro))
    for p in m.parameters():  # a .grad of its own, not a view of a plan's buffer
        assert p.grad._base is None and p.grad._data.base is None


def test_compiled_model_backward_outside_accumulates_like_eager():
    m = _linear()
    cm = jg.compile(m)
    x = jg.randn(6, 4, generator=jg.Generator().manual_seed(1))
    for _ in range(3):
        cm(x).sum().backward()
    _assert_same(_grads(m), _eager_grads(3))

    @jg.compile  # twice per step, inside an outer compiled step
    def outer(x):
        cm(x[:3]).sum().backward()
        cm(x[3:]).sum().backward()

    m2 = _linear()
    cm = jg.compile(m2)
    for _ in range(3):
        outer(x)
    _assert_same(_grads(m2), _eager_grads(3, micro=2))


def test_zero_grad_keep_tensors_in_compiled_step_matches_eager():
    def run(compiled: bool) -> list:
        m = _linear()
        opt = jg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        x = jg.randn(6, 4, generator=jg.Generator().manual_seed(1))

        def step(x):
            opt.zero_grad(set_to_none=False)
            m(x[:3]).pow(2).mean().backward()
            m(x[3:]).pow(2).mean().backward()
            opt.step()
        f = jg.compile(step) if compiled else step
        for _ in range(4):
            f(x)
        return [p.detach().numpy().copy() for p in m.parameters()] + _grads(m)

    _assert_same(run(True), run(False))


def test_inplace_op_on_new_grad_in_compiled_step_is_kept():
    """A ``.grad`` the call created and then changed in place (gradient scaling/clipping
    after ``zero_grad()``) keeps the change."""
    w = jg.ones(3, requires_grad=True)
    opt = jg.optim.SGD([w], lr=0.1)

    @jg.compile
    def step():
        opt.zero_grad()
        (w * 2).sum().backward()
        w.grad.mul_(0.5)

    for _ in range(3):
        step()
        assert w.grad.tolist() == [1.0, 1.0, 1.0]


def test_replaced_grad_is_accumulated_into():
    """The plan reads .grad at every call: a tensor the user assigned in between gets the
    accumulation (not the tensor the trace saw)."""
    w = jg.ones(3, requires_grad=True)

    @jg.compile
    def step():
        (w * 2).sum().backward()

    for _ in range(3):
        step()
    assert w.grad.tolist() == [6.0, 6.0, 6.0]
    fresh = jg.zeros(3)
    w.grad = fresh
    step()
    assert w.grad is fresh and fresh.tolist() == [2.0, 2.0, 2.0]


def test_grad_never_aliases_the_callers_cotangent():
    """A compiled backward passing the cotangent through (``x + 1``) gives .grad a copy:
    accumulating into .grad later must not change the caller's gradient tensor."""
    f = jg.compile(lambda x: x + 1)
    x = jg.ones(3, requires_grad=True)
    gy = jg.ones(3)
    for _ in range(3):
        f(x).backward(gy)
    assert x.grad.tolist() == [3.0, 3.0, 3.0] and gy.tolist() == [1.0, 1.0, 1.0]


def test_returned_grad_is_the_leafs_grad():
    w = jg.ones(3, requires_grad=True)

    @jg.compile
    def step():
        (w * 2).sum().backward()
        return w.grad

    for _ in range(3):
        assert step() is w.grad
    assert w.grad.tolist() == [6.0, 6.0, 6.0]


# ------------------------------------------------------------ B: outputs that alias
@pytest.mark.parametrize("fn", [lambda x: x.view(-1), lambda x: x[...], lambda x: x.t(),
                                lambda x: x[1]], ids=["view", "getitem", "t", "row"])
def test_output_view_of_argument_shares_version_and_base(fn):
    f = jg.compile(fn)
    for _ in range(3):
        x = jg.ones(2, 3)
        ys = [fn(x), f(x)]
        for k, y in enumerate(ys):
            assert y._base is x
            y.add_(1)
            assert x._version == y._version == k + 1
        np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 3.0) if fn(x).numel() == 6
                                      else np.array([[1.0] * 3, [3.0] * 3]))


def test_write_through_output_view_is_seen_by_autograd():
    """A backward that saved ``x`` raises once a view the compiled call returned is written,
    as in eager mode."""
    w = jg.ones(6, requires_grad=True)
    for fn in (lambda x: x.view(-1), jg.compile(lambda x: x.view(-1))):
        for _ in range(2):
            x = jg.ones(2, 3)
            loss = (w * x.reshape(6)).sum()  # saves x (through its view)
            fn(x).mul_(2)
            with pytest.raises(RuntimeError, match=MODIFIED):
                loss.backward()


def test_returned_argument_is_the_argument():
    f = jg.compile(lambda x, y: (x, y * 2))
    x = jg.ones(3, requires_grad=True)
    for _ in range(3):
        a, b = f(x, jg.ones(3))
        assert a is x and a.grad_fn is None


def test_returned_captured_tensor_is_that_tensor():
    w = jg.ones(3)
    f = jg.compile(lambda x: (w, w.t(), x + w))
    for _ in range(2):
        a, b, _ = f(jg.ones(3))
        assert a is w and b._base is w
        b.add_(1)
        assert w._version == b._version


def test_outputs_sharing_memory_share_version_counter():
    def fn(x):
        y = x * 2
        return y, y.view(-1), y
    f = jg.compile(fn)
    for _ in range(3):
        a, b, c = f(jg.ones(2, 3))
        assert b._base is a and c is a
        a.add_(1)
        assert b._version == 1 and b.tolist() == [3.0] * 6


def test_outputs_viewing_one_intermediate_share_base():
    def fn(x):
        y = x * 2
        return y[0], y[1]
    f = jg.compile(fn)
    for _ in range(2):
        a, b = f(jg.ones(2, 3))
        ea, eb = fn(jg.ones(2, 3))
        assert a._base is b._base is not None and ea._base is eb._base is not None
        a.add_(1)
        assert b._version == eb._version + 1 == 1


def test_returned_constant_is_not_shared_between_calls():
    f = jg.compile(lambda x: (x + 1, jg.ones(3)))
    for _ in range(3):
        _, c = f(jg.ones(3))
        assert c.tolist() == [1.0, 1.0, 1.0]
        c.add_(5)


def test_output_version_matches_eager():
    def fn(x):
        y = x * 2
        y.add_(1)
        y.mul_(3)
        return y
    f = jg.compile(fn)
    for _ in range(2):
        assert f(jg.ones(3))._version == fn(jg.ones(3))._version == 2


# ----------------------------------------------------------- B: writes bump versions
def test_plan_writes_bump_argument_versions_like_eager():
    def fn(x):
        x.add_(1)
        x.mul_(2)
        return x * 2
    f = jg.compile(fn)
    xe, xc = jg.ones(3), jg.ones(3)
    for _ in range(3):
        fn(xe)
        f(xc)
        assert xc._version == xe._version
    assert xc.tolist() == xe.tolist()


def test_plan_write_to_captured_tensor_is_seen_by_autograd():
    w = jg.ones(3, requires_grad=True)
    for compiled in (False, True):
        buf = jg.ones(3)

        def scale(buf=buf):
            buf.mul_(2)
        f = jg.compile(scale) if compiled else scale
        f()
        loss = (w * buf).sum()  # saves buf
        f()
        with pytest.raises(RuntimeError, match=MODIFIED):
            loss.backward()


def test_optimizer_step_in_compiled_step_is_seen_by_autograd():
    for compiled in (False, True):
        m = _linear()
        opt = jg.optim.SGD(m.parameters(), lr=0.1)
        x = jg.randn(4, 4, generator=jg.Generator().manual_seed(2))

        def step(m=m, opt=opt, x=x):
            opt.zero_grad()
            m(x).sum().backward()
            opt.step()
        f = jg.compile(step) if compiled else step
        f()
        f()
        versions = [p._version for p in m.parameters()]
        loss = (m(x) ** 2).sum()  # saves the weight
        f()
        assert [p._version for p in m.parameters()] == [v + 1 for v in versions]
        with pytest.raises(RuntimeError, match=MODIFIED):
            loss.backward()


def test_output_saved_for_backward_then_written_raises():
    """``exp``'s backward reads its output: writing into the returned tensor raises."""
    def fn(x):
        return x.exp()
    f = jg.compile(fn)
    for g in (fn, f, f):
        x = jg.ones(3, requires_grad=True)
        y = g(x)
        y.add_(1)
        with pytest.raises(RuntimeError, match=MODIFIED):
            y.sum().backward()


def test_view_of_argument_saved_for_backward_then_written_raises():
    def fn(x, w):
        return (x @ w.t()).sum()
    f = jg.compile(fn)
    for g in (fn, f, f):
        x, w = jg.ones(2, 3, requires_grad=True), jg.ones(4, 3)
        y = g(x, w)
        w.add_(1)
        with pytest.raises(RuntimeError, match=MODIFIED):
            y.backward()


# --------------------------------------------------------- B: arguments sharing memory
def _add_then_read(a, b):
    a.add_(1)
    return b * 2


def test_same_tensor_twice_after_distinct_arguments():
    f = jg.compile(_add_then_read)
    for _ in range(2):
        f(jg.ones(3), jg.ones(3))
    for _ in range(2):
        xe, xc = jg.ones(3), jg.ones(3)
        assert f(xc, xc).tolist() == _add_then_read(xe, xe).tolist() == [4.0] * 3
        assert xc._version == xe._version == 1


def test_distinct_arguments_after_same_tensor_twice():
    f = jg.compile(_add_then_read)
    x = jg.ones(3)
    assert f(x, x).tolist() == [4.0] * 3
    for _ in range(2):
        x, y = jg.ones(3), jg.ones(3)
        assert f(x, y).tolist() == [2.0] * 3 and x.tolist() == [2.0] * 3


def test_same_leaf_twice_gets_one_gradient():
    def fn(a, b):
        return (a * b).sum()
    f = jg.compile(fn)
    xe = jg.tensor([1.0, 2.0], requires_grad=True)
    xc = jg.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(2):
        fn(xe, xe).backward()
        f(xc, xc).backward()
    assert xc.grad.tolist() == xe.grad.tolist() == [4.0, 8.0]


def test_overlapping_views_written_give_eager_result():
    f = jg.compile(_add_then_read)
    for _ in range(2):
        be, bc = jg.zeros(4), jg.zeros(4)
        want = _add_then_read(be, be[1:3])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = f(bc, bc[1:3])
        assert got.tolist() == want.tolist() == [2.0, 2.0]
        assert bc.tolist() == be.tolist()


def test_disjoint_views_of_one_base_compile():
    f = jg.compile(lambda a, b: a * b)
    base = jg.ones(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            assert f(base[0], base[1]).tolist() == [1.0] * 3
    assert f.stats["traces"] == 1


def test_inplace_on_argument_that_requires_grad_matches_eager():
    def fn(x):
        x.mul_(2)
        return x
    f = jg.compile(fn)
    for g in (fn, f):
        a = jg.ones(3, requires_grad=True)
        for _ in range(2):
            x = a * 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = g(x)
            assert y is x
            y.sum().backward()
        assert a.grad.tolist() == [4.0, 4.0, 4.0]


# ------------------------------------------------------------------------- PyTorch
def test_view_version_semantics_match_pytorch():
    torch = pytest.importorskip("torch")
    tx = torch.ones(2, 3)
    ty = tx.view(-1)
    ty.add_(1)
    f = jg.compile(lambda x: x.view(-1))
    x = jg.ones(2, 3)
    f(x)
    y = f(x)
    y.add_(1)
    assert (x._version, y._version) == (tx._version, ty._version)
    assert (y._base is x) == (ty._base is tx)
