"""Hooks, grad modes (thread-local), in-place ops and version counters, bad-input atomicity."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import run_in_threads

import jitgrad as jg


def leaf(v, dtype=jg.float32):
    return jg.tensor(v, dtype=dtype, requires_grad=True)


# ----------------------------------------------------------------------------- hooks
def test_tensor_hook_replaces_gradient_before_accumulation():
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: g * 10)
    (x * 3).sum().backward()
    assert x.grad.tolist() == [30.0, 30.0]


def test_hooks_run_in_registration_order_and_chain():
    seen = []
    x = leaf(1.0)
    y = x * 2
    y.register_hook(lambda g: seen.append(("first", g.item())) or g + 1)
    y.register_hook(lambda g: seen.append(("second", g.item())) or None)
    y.retain_grad()
    (y * 5).backward()
    assert seen == [("first", 5.0), ("second", 6.0)]
    assert y.grad.item() == 6.0  # retain_grad sees the hooked gradient (runs last)
    assert x.grad.item() == 12.0


def test_hook_handle_remove():
    calls = []
    x = leaf(1.0)
    h = x.register_hook(lambda g: calls.append(1))
    (x * 2).backward()
    h.remove()
    (x * 2).backward()
    assert calls == [1]


def test_hook_requires_grad():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't "
                                           "require gradient"):
        jg.ones(1).register_hook(lambda g: g)


def test_post_accumulate_grad_hook():
    seen = []
    x = leaf([1.0, 2.0])
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (x * 2).sum().backward()
    (x * 2).sum().backward()
    assert seen == [[2.0, 2.0], [4.0, 4.0]]
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on "
                                           "non-leaf tensors"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_retain_grad_errors_and_noop_on_leaf():
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has "
                                           "requires_grad=False"):
        jg.ones(1).retain_grad()
    x = leaf(1.0)
    x.retain_grad()  # no-op on a leaf
    (x * 2).backward()
    assert x.grad.item() == 2.0


def test_retained_grad_accumulates_across_backwards():
    x = leaf(1.0)
    y = x * 3
    y.retain_grad()
    z = y * y
    z.backward(retain_graph=True)
    z.backward()
    assert y.grad.item() == 12.0


def test_hook_on_non_leaf_changes_upstream_gradient():
    x = leaf(2.0)
    y = x * x
    y.register_hook(lambda g: g * 0)
    (y + x).backward()
    assert x.grad.item() == 1.0


# ------------------------------------------------------------------------- grad modes
def test_grad_mode_context_managers_and_decorators():
    x = leaf(1.0)
    with jg.no_grad():
        assert not (x * 2).requires_grad
        with jg.enable_grad():
            assert (x * 2).requires_grad
    assert (x * 2).requires_grad

    @jg.no_grad()
    def f():
        return x * 2

    @jg.no_grad
    def g():
        return x * 2

    assert not f().requires_grad and not g().requires_grad
    with jg.set_grad_enabled(False):
        assert not jg.is_grad_enabled()
    assert jg.is_grad_enabled()
    jg.set_grad_enabled(False)
    assert not jg.is_grad_enabled()
    jg.set_grad_enabled(True)
    with jg.inference_mode():
        assert not (x * 2).requires_grad and jg.is_inference_mode_enabled()
    assert not jg.is_inference_mode_enabled()


def test_no_grad_generator_decorator():
    x = leaf(1.0)

    @jg.no_grad()
    def gen():
        yield (x * 2).requires_grad
        yield jg.is_grad_enabled()

    assert list(gen()) == [False, False]
    assert jg.is_grad_enabled()


def test_grad_mode_is_thread_local():
    x = leaf(1.0)
    ready, go = threading.Event(), threading.Event()
    result = {}

    def worker():
        with jg.no_grad():
            ready.set()
            go.wait(5)
            result["worker"] = (x * 2).requires_grad

    t = threading.Thread(target=worker)
    t.start()
    ready.wait(5)
    result["main"] = (x * 2).requires_grad  # the worker's no_grad must not leak here
    go.set()
    t.join()
    assert result == {"main": True, "worker": False}


def test_backward_from_several_threads():
    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(20):
            a = jg.tensor(rng.standard_normal(300_000).astype(np.float32), requires_grad=True)
            (a.tanh() * a).sum().backward()
            expect = np.tanh(a._data) + a._data * (1 - np.tanh(a._data) ** 2)
            np.testing.assert_allclose(a.grad.numpy(), expect, rtol=1e-4, atol=1e-5)

    errors = run_in_threads(work, 4)
    assert not errors, errors


# --------------------------------------------------------------------- in-place ops
def test_in_place_on_leaf_requiring_grad_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being used in "
                                           "an in-place operation.$"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "
                                           "being used in an in-place operation."):
        x[0].mul_(2)
    assert x.tolist() == [1.0, 2.0] and x._version == 0
    with jg.no_grad():
        x.add_(1)  # allowed without recording
    assert x.tolist() == [2.0, 3.0] and x._version == 1


def test_in_place_rebases_history():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.add_(1)
    assert type(y.grad_fn).__name__ == "AddBackward0"
    y.mul_(y)
    y.sum().backward()
    # y = (2x + 1)^2 -> dy/dx = 4 (2x + 1)
    assert x.grad.tolist() == [12.0, 20.0]


def test_in_place_operators():
    x = leaf([1.0, 2.0])
    y = x * 1
    y += 1
    y *= 3
    y -= x
    y /= 2
    y **= 2
    y.sum().backward()
    # y = ((3(x+1) - x)/2)^2 = (x + 1.5)^2 -> 2 (x + 1.5)
    assert x.grad.tolist() == pytest.approx([5.0, 7.0])


def test_modified_saved_tensor_raises_pytorchs_message():
    a = leaf(np.ones((2, 2)))
    b = a * 2
    c = b * b
    b.add_(1)
    with pytest.raises(RuntimeError) as e:
        c.sum().backward()
    assert str(e.value) == (
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [jitgrad.FloatTensor [2, 2]], which is output 0 of AddBackward0, is at "
        "version 1; expected version 0 instead. Hint: enable anomaly detection to find the "
        "operation that failed to compute its gradient, with "
        "jitgrad.autograd.set_detect_anomaly(True, check_nan=False)."
    ).replace("AddBackward0", "Add")
    assert a.grad is None


def test_modified_saved_output_raises():
    a = leaf([1.0, 2.0, 3.0])
    b = a.exp()
    b.add_(1)
    with pytest.raises(RuntimeError, match=r"\[jitgrad.FloatTensor \[3\]\], which is output 0 of "
                                           r"Exp, is at version 1; expected version 0 instead."):
        b.sum().backward()


def test_view_shares_version_counter():
    x = jg.zeros(4)
    v = x[1:3]
    v.add_(1)
    assert x.tolist() == [0.0, 1.0, 1.0, 0.0]
    assert x._version == v._version == 1


def test_an_element_read_by_integers_is_a_view():
    """``x[0]`` (and ``x[1, 2]``) is a 0-d view, as PyTorch's: later writes to ``x`` show
    through it, and writes into it reach ``x``."""
    x = jg.zeros(3)
    y = x[0]
    x.add_(5)
    assert y.item() == 5.0 and y._base is x and y._version == x._version
    m = jg.zeros(2, 3)
    e = m[1, 2]
    e.fill_(7)
    assert m[1].tolist() == [0.0, 0.0, 7.0]
    g = leaf([1.0, 2.0, 3.0])
    (g[1] * 4).backward()
    assert g.grad.tolist() == [0.0, 4.0, 0.0]


def test_setitem_is_differentiable():
    x = leaf([1.0, 2.0, 3.0])
    v = leaf(5.0)
    y = x * 2
    y[1] = v * 3
    assert type(y.grad_fn).__name__ == "IndexPutBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 2.0] and v.grad.item() == 3.0


def test_setitem_without_grad_and_masks():
    x = jg.arange(6).reshape(2, 3)
    x[x > 3] = 0
    assert x.tolist() == [[0, 1, 2], [3, 0, 0]]
    x[:, 0] = jg.tensor([9, 8])
    assert x[:, 0].tolist() == [9, 8]


def test_zero_fill_copy():
    g = jg.ones(3)
    g.zero_()
    assert g.tolist() == [0.0, 0.0, 0.0]
    g.fill_(2.5)
    assert g.tolist() == [2.5] * 3
    g.copy_(jg.tensor([1.0, 2.0, 3.0]))
    assert g.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf([1.0]).zero_()


def test_in_place_dtype_rule():
    x = jg.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output "
                                           "type Long"):
        x.add_(1.5)
    assert x.tolist() == [1, 2] and x._version == 0


def test_in_place_on_expanded_tensor_is_refused():
    e = jg.ones(1).expand(3)
    with pytest.raises(RuntimeError, match="unsupported operation: more than one element of the "
                                           "written-to tensor refers to a single memory location"):
        e.add_(1)


# ------------------------------------------------------ bad input leaves state unchanged
def test_broadcast_error_is_pytorchs():
    a, b = leaf(np.ones((2, 3))), leaf(np.ones(4))
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(3\) must match the size of "
                                           r"tensor b \(4\) at non-singleton dimension 1$"):
        a + b
    assert a.grad is None and a._version == 0


def test_failed_in_place_op_changes_nothing():
    x = leaf([1.0, 2.0])
    y = x * 2
    fn, ver = y.grad_fn, y._version
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        y.add_(jg.ones(3))
    assert y.grad_fn is fn and y._version == ver and y.tolist() == [2.0, 4.0]
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_matmul_shape_errors_name_shapes():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and "
                                           r"4x5\)"):
        jg.ones(2, 3) @ jg.ones(4, 5)
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(2\), mat \(2x3\), vec "
                                           r"\(4\)"):
        jg.ones(2, 3) @ jg.ones(4)
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D"):
        jg.tensor(1.0) @ jg.ones(2)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: "
                                           "float != double"):
        jg.ones(2, 2) @ jg.ones(2, 2, dtype=jg.float64)


def test_movement_errors():
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size "
                                           "and stride"):
        jg.ones(2, 3).T.view(6)
    with pytest.raises(RuntimeError, match=r"shape '\[4\]' is invalid for input of size 6"):
        jg.ones(2, 3).reshape(4)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 2\)"):
        jg.ones(2, 3).sum(2)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0. "
                                           "Expected size 3 but got size 4 for tensor number 1"):
        jg.cat([jg.ones(2, 3), jg.ones(2, 4)])
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got "
                                           r"\[2, 3\] at entry 0 and \[2, 4\] at entry 1"):
        jg.stack([jg.ones(2, 3), jg.ones(2, 4)])
    with pytest.raises(IndexError, match="index 2 is out of bounds for dimension 0 with size 2"):
        jg.ones(2, 3)[2]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        jg.ones(2, 3)[0, 0, 0]
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(4\) must match the "
                                           r"existing size \(2\) at non-singleton dimension 0"):
        jg.ones(2, 3).expand(4, 3)
    with pytest.raises(RuntimeError, match="permute\\(\\): duplicate dims are not allowed."):
        jg.ones(2, 3).permute(0, 0)


def test_bce_target_shape_error():
    with pytest.raises(ValueError, match=r"Target size \(jitgrad.Size\(\[4\]\)\) must be the same "
                                         r"as input size \(jitgrad.Size\(\[3\]\)\)"):
        jg.nn.functional.binary_cross_entropy_with_logits(jg.ones(3), jg.ones(4))


def test_bool_arithmetic_errors():
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor is not "
                                           "supported."):
        -jg.tensor([True])
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors "
                                           "is not supported."):
        jg.tensor([True]) - jg.tensor([True])


# ------------------------------------------------ in-place writes into read-only arrays
def _readonly(n=4):
    a = np.arange(float(n))
    a.flags.writeable = False
    return jg.from_numpy(a)


@pytest.mark.parametrize("write", [
    lambda t: t.add_(1), lambda t: t.mul_(jg.ones(4, dtype=jg.float64)),
    lambda t: t.zero_(), lambda t: t.fill_(2.0), lambda t: t.exp_(), lambda t: t.clamp_(0, 1),
    lambda t: t.copy_(jg.ones(4, dtype=jg.float64)),
    lambda t: t.__setitem__(0, 5.0), lambda t: t.uniform_(),
], ids=["add_", "mul_", "zero_", "fill_", "exp_", "clamp_", "copy_", "setitem", "uniform_"])
def test_inplace_on_readonly_numpy_array_says_so_and_changes_nothing(write):
    t = _readonly()
    state = jg.random.get_rng_state()
    with pytest.raises(RuntimeError, match="read-only NumPy array.*clone"):
        write(t)
    np.testing.assert_array_equal(t.numpy(), [0.0, 1.0, 2.0, 3.0])
    assert t._version == 0
    assert np.array_equal(np.asarray(jg.random.get_rng_state()), np.asarray(state))


def test_inplace_on_expanded_tensor_keeps_pytorchs_overlap_message():
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        jg.ones(3).expand(2, 3).add_(1)


def test_compiled_write_into_readonly_argument_raises_before_any_write():
    f = jg.compile(lambda x, y: (y.mul_(2), x.add_(1)))
    f(jg.zeros(4, dtype=jg.float64), jg.ones(4, dtype=jg.float64))
    t, y = _readonly(), jg.ones(4, dtype=jg.float64)
    with pytest.raises(RuntimeError, match="read-only NumPy array"):
        f(t, y)
    np.testing.assert_array_equal(t.numpy(), [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(y.numpy(), [1.0] * 4)  # the other write did not happen
    assert (t._version, y._version) == (0, 0)


INDEX_ARRAYS_OUT_OF_RANGE = [
    (lambda M: (M.tensor([5]),), "index 5 is out of bounds for dimension 0 with size 2"),
    (lambda M: (M.tensor([0, -3]),), "index -3 is out of bounds for dimension 0 with size 2"),
    (lambda M: (slice(None), M.tensor([0]), M.tensor([9])),
     "index 9 is out of bounds for dimension 1 with size 4"),
    (lambda M: (slice(None), slice(None), M.tensor([[1, 4]])),
     "index 4 is out of bounds for dimension 0 with size 4"),
    (lambda M: (0, slice(None), M.tensor([9])),
     "index 9 is out of bounds for dimension 0 with size 4"),
]


@pytest.mark.parametrize("k", range(len(INDEX_ARRAYS_OUT_OF_RANGE)))
def test_index_arrays_out_of_range_raise_pytorchs_error(k):
    """Integer index tensors are checked with PyTorch's message (the dim named by the
    array's place among the index arrays); on CUDA, CuPy would wrap a bad index around."""
    make, msg = INDEX_ARRAYS_OUT_OF_RANGE[k]
    for dev in ("cpu", "cuda") if jg.cuda.is_available() else ("cpu",):
        x = jg.zeros(2, 3, 4, device=dev)
        with pytest.raises(IndexError, match=msg):
            x[tuple(i.to(dev) if isinstance(i, jg.Tensor) else i for i in make(jg))]
        x[make(jg)[:-1] + (jg.tensor([-1], device=dev),)]  # -1 is in range: no error
    torch = pytest.importorskip("torch")
    with pytest.raises(IndexError, match=msg):
        torch.zeros(2, 3, 4)[make(torch)]
