"""Custom ``autograd.Function``: ctx, saved tensors, flags, errors, once_differentiable."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import cube_function

import jitgrad as jg
from jitgrad.autograd import Function, once_differentiable
from jitgrad.autograd.node import FREED_MESSAGE


class MyPow(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a ** b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b * a ** (b - 1), g * a ** b * jg.log(a)


def test_custom_function_matches_builtin_pow():
    q = jg.tensor(3.0, requires_grad=True)
    x = jg.tensor(5.0, requires_grad=True)
    y = MyPow.apply(x, q)
    assert type(y.grad_fn).__name__ == "MyPowBackward"
    assert y.grad_fn.name() == "MyPowBackward"
    jg.log(y).backward()
    assert str(x.grad) == "tensor(0.6000)"
    assert str(q.grad) == "tensor(1.6094)"


def test_needs_input_grad_and_non_tensor_args():
    seen = {}

    class Scale(Function):
        @staticmethod
        def forward(ctx, x, factor, y):
            seen["needs"] = ctx.needs_input_grad
            ctx.factor = factor
            return x * factor + y

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None, g

    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = jg.tensor([1.0, 1.0])
    out = Scale.apply(x, 3.0, y)
    out.sum().backward()
    assert seen["needs"] == (True, False, False)
    assert x.grad.tolist() == [3.0, 3.0]


def test_forward_runs_without_recording():
    class Inner(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            assert y.grad_fn is None and not jg.is_grad_enabled()
            return y

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = jg.tensor(1.0, requires_grad=True)
    Inner.apply(x).backward()
    assert x.grad.item() == 2.0


def test_wrong_number_of_gradients():
    class F(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    x = jg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^function FBackward returned an incorrect number of "
                                           r"gradients \(expected 2, got 1\)$"):
        F.apply(x, x).sum().backward()
    assert x.grad is None


def test_wrong_gradient_shape():
    class G(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return jg.ones(5)

    x = jg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^Function GBackward returned an invalid gradient at "
                                           r"index 0 - got \[5\] but expected shape compatible "
                                           r"with \[2\]$"):
        G.apply(x).sum().backward()


def test_expandable_gradient_is_summed_to_the_input_shape():
    class B(Function):
        @staticmethod
        def forward(ctx, a):
            return a.sum()

        @staticmethod
        def backward(ctx, g):
            return jg.ones(4, 3) * g  # broadcast of a (3,) input's gradient

    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    B.apply(x).backward()
    assert x.grad.tolist() == [4.0, 4.0, 4.0]


def test_mark_non_differentiable_and_multiple_outputs():
    class SortLike(Function):
        @staticmethod
        def forward(ctx, x):
            idx = jg.tensor(np.argsort(x.detach().numpy()))
            out = jg.tensor(np.sort(x.detach().numpy()))
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            return out, idx

        @staticmethod
        def backward(ctx, g, g_idx):
            (idx,) = ctx.saved_tensors
            res = np.zeros(g.shape, dtype=np.float32)
            res[idx.numpy()] = g.numpy()
            return jg.tensor(res)

    x = jg.tensor([3.0, 1.0, 2.0], requires_grad=True)
    vals, idx = SortLike.apply(x)
    assert vals.requires_grad and not idx.requires_grad
    assert vals.grad_fn is idx.grad_fn or idx.grad_fn is None
    (vals * jg.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert x.grad.tolist() == [100.0, 1.0, 10.0]


def test_materialize_grads():
    got = {}

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, g1, g2):
            got["g2"] = g2
            return g1 + (0 if g2 is None else g2 * 2)

    x = jg.tensor([1.0], requires_grad=True)
    a, _ = Two.apply(x)
    a.sum().backward()
    assert got["g2"].tolist() == [0.0]  # materialised zeros by default

    class TwoNoMat(Two):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 2

    a, _ = TwoNoMat.apply(x)
    a.sum().backward()
    assert got["g2"] is None


def test_mark_dirty_in_place_function():
    class AddOne_(Function):
        @staticmethod
        def forward(ctx, x):
            x._data += 1
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    base = jg.tensor([1.0, 2.0], requires_grad=True)
    y = base * 2
    v = y._version
    out = AddOne_.apply(y)
    assert out is y and y._version == v + 1
    assert type(y.grad_fn).__name__ == "AddOne_Backward"
    y.sum().backward()
    assert base.grad.tolist() == [2.0, 2.0]
    leaf = jg.tensor([1.0], requires_grad=True)
    # (PyTorch's wording for mark_dirty: "has been used", not in-place ops' "is being used")
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in "
                                           "an in-place operation."):
        AddOne_.apply(leaf)


def test_saved_tensors_freed_after_backward():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = MyPow.apply(x, jg.tensor(2.0))
    ctx = y.grad_fn
    y.sum().backward()
    with pytest.raises(RuntimeError) as e:
        ctx.saved_tensors  # noqa: B018
    assert str(e.value) == FREED_MESSAGE


def test_saved_input_modified_in_place_is_detected():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    w = jg.tensor([3.0, 4.0])
    y = MyPow.apply(x, w)
    w.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: "
                                           r"\[jitgrad.FloatTensor \[2\]\] is at version 1; "
                                           r"expected version 0 instead"):
        y.sum().backward()


def test_custom_function_double_backward():
    Cube = cube_function()

    x = jg.tensor(2.0, dtype=jg.float64, requires_grad=True)
    (g,) = jg.autograd.grad(Cube.apply(x), x, create_graph=True)
    (gg,) = jg.autograd.grad(g, x)
    assert g.item() == 12.0 and gg.item() == 12.0
    assert jg.autograd.gradcheck(Cube.apply, (x,))
    assert jg.autograd.gradgradcheck(Cube.apply, (x,))


def test_once_differentiable():
    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            assert not jg.is_grad_enabled()
            return 2 * x * g

    x = jg.tensor(3.0, requires_grad=True)
    Sq.apply(x).backward()
    assert x.grad.item() == 6.0
    go = jg.tensor(1.0, requires_grad=True)  # a differentiable grad_output, as PyTorch needs
    (g,) = jg.autograd.grad(Sq.apply(x), x, grad_outputs=go, create_graph=True)
    assert g.item() == 6.0 and g.requires_grad
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was "
                                           "marked with @once_differentiable"):
        g.backward()


def test_setup_context_style():
    class Mul(Function):
        @staticmethod
        def forward(a, b):
            return a * b

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a

    a = jg.tensor(2.0, requires_grad=True)
    b = jg.tensor(5.0, requires_grad=True)
    Mul.apply(a, b).backward()
    assert a.grad.item() == 5.0 and b.grad.item() == 2.0


def test_returning_an_input_unchanged_gives_a_new_tensor():
    class Ident(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = jg.tensor(1.0, requires_grad=True)
    y = Ident.apply(x)
    assert y is not x and x.is_leaf and not y.is_leaf
    y.backward()
    assert x.grad.item() == 3.0


def test_no_graph_when_inputs_do_not_require_grad():
    y = MyPow.apply(jg.tensor(2.0), jg.tensor(3.0))
    assert y.grad_fn is None and not y.requires_grad
