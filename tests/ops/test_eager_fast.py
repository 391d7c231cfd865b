"""The specialised operators (``ops/eager_fast.py``: ``x * y``, ``x + 1.5``) build exactly
what the general path (``dispatch.binary``) builds for the cases they take -- the same bits,
node class, edges, saved entries, versions -- and hand every other case to it; grad mode,
tracing and saved-tensor hooks are honoured (``_thread_modes``); a large op whose
operand is one number broadcast (the gradient of a full sum) passes it by value."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import jitgrad as jg
from jitgrad._thread_modes import GRAD_OFF, TRACING
from jitgrad.autograd.graph import saved_tensors_hooks
from jitgrad.ops.arithmetic import ADD, DIV, MUL, RSUB, SUB
from jitgrad.ops.dispatch import binary
from jitgrad.ops.eager_fast import takes_fast_path
from jitgrad.ops.eager_kernels import HOT_MIN_SIZE, PARALLEL_MIN_SIZE
from jitgrad.trace.state import STATE

OPERATORS = [(ADD, lambda a, b: a + b), (ADD, lambda a, b: b + a if not isinstance(b, jg.Tensor)
                                         else a.__radd__(b)),
             (SUB, lambda a, b: a - b), (MUL, lambda a, b: a * b),
             (MUL, lambda a, b: b * a if not isinstance(b, jg.Tensor) else a.__rmul__(b)),
             (DIV, lambda a, b: a / b), (RSUB, lambda a, b: a.__rsub__(b))]
IDS = ["add", "radd", "sub", "mul", "rmul", "div", "rsub"]


def _bits(t) -> np.ndarray:
    d = t.detach().numpy()
    return d.view(np.uint32 if d.dtype == np.float32 else np.uint64)


def _edges(t) -> list:
    """The output's graph, comparable across two runs: node class, edges (leaf identity or
    node class and output number), saved entries (object identity and version), metadata."""
    fn = t.grad_fn
    if fn is None:
        return [None]
    edges = [e if e is None or type(e) is not tuple else (type(e[0]), e[1])
             for e in fn.next_edges]
    saved = None if fn.saved is None else [
        (id(s[0]), s[1]) if type(s) is tuple else s for s in fn.saved]
    return [type(fn), edges, saved, fn.in_meta, fn.params, fn.op]


def _inputs(dtype, n, ga, gb, second):
    rng = np.random.default_rng(n)
    a = jg.from_numpy(rng.uniform(0.5, 2.0, n).astype(dtype)).requires_grad_(ga)
    if second == "tensor":
        b = jg.from_numpy(rng.uniform(0.5, 2.0, n).astype(dtype)).requires_grad_(gb)
    else:
        b = second
    return a, b


SECONDS = [("tensor", g) for g in [(True, True), (True, False), (False, True), (False, False)]
           ] + [(x, g) for x in [1.5, 0.1, 3, 1e39, -(2 ** 40) - 1]
                for g in [(True, False), (False, False)]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("second,grads", SECONDS)
@pytest.mark.parametrize("op,fn", OPERATORS, ids=IDS)
def test_fast_operator_builds_what_the_general_path_builds(op, fn, grads, second, dtype):
    a, b = _inputs(dtype, 37, *grads, second)
    assert takes_fast_path(a, b)
    fast = fn(a, b)
    general = binary(op, a, b)  # (b + a, b * a compute a + b, a * b: the same bits)
    np.testing.assert_array_equal(_bits(fast), _bits(general))
    assert fast.dtype == general.dtype and fast.shape == general.shape
    assert fast.requires_grad == general.requires_grad and fast.is_leaf == general.is_leaf
    assert _edges(fast) == _edges(general)
    assert fast._version == general._version == 0
    assert fast.grad_fn is None or general.grad_fn.seq == fast.grad_fn.seq + 1
    if fast.requires_grad:
        ga = jg.autograd.grad(fast.sum(), [t for t in (a, b) if isinstance(t, jg.Tensor)
                                           and t.requires_grad])
        gg = jg.autograd.grad(general.sum(), [t for t in (a, b) if isinstance(t, jg.Tensor)
                                              and t.requires_grad])
        for x, y in zip(ga, gg):
            np.testing.assert_array_equal(_bits(x), _bits(y))


def test_cases_off_the_fast_path_take_the_general_path():
    x = jg.arange(12.0, requires_grad=True)
    y = jg.arange(12.0)
    off = [
        (x.reshape(3, 4), y.reshape(3, 4)),           # two dimensions
        (x[::2], y[::2]),                              # not contiguous
        (x, y.double()),                               # two dtypes
        (x, y[:1]),                                    # broadcasting
        (x.int(), 2),                                  # integers
        (x, np.float32(2.0)),                          # a NumPy number
        (x, True),                                     # a bool
        (jg.arange(HOT_MIN_SIZE + 1.0), 2.0),          # the pool's sizes (when awake)
        (jg.arange(PARALLEL_MIN_SIZE + 1.0), 2.0),     # the pool's sizes
    ]
    for a, b in off:
        assert not takes_fast_path(a, b)
        r = a * b
        with jg.no_grad():
            expected = binary(MUL, a.detach(), b.detach() if isinstance(b, jg.Tensor) else b)
        np.testing.assert_array_equal(r.detach().numpy(), expected.numpy())
    assert (x[::2] * y[::2]).grad_fn.name() == "MulBackward0"


def test_grad_mode_off_records_nothing_on_any_thread():
    a = jg.ones(4, requires_grad=True)
    before = len(GRAD_OFF)  # 0 unless a thread ended inside no_grad (it stays counted)
    with jg.no_grad():
        assert len(GRAD_OFF) == before + 1
        assert (a * a).grad_fn is None and not (a * 2.0).requires_grad
        with jg.enable_grad():
            assert len(GRAD_OFF) == before and (a * a).grad_fn is not None
    assert len(GRAD_OFF) == before
    seen = []

    def worker():
        with jg.no_grad():
            seen.append(len(GRAD_OFF))
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [before + 1] and len(GRAD_OFF) == before
    assert (a * a).grad_fn.name() == "MulBackward0"  # this thread's grad mode is on


def test_a_saved_input_modified_in_place_is_caught():
    a = jg.ones(4, requires_grad=True)
    b = jg.full((4,), 2.0)
    c = a * b
    b.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


def test_saved_tensors_hooks_see_the_fast_path():
    a = jg.ones(4, requires_grad=True)
    b = jg.full((4,), 2.0)
    packed = []
    with saved_tensors_hooks(lambda t: packed.append(t) or len(packed) - 1,
                             lambda i: packed[i]):
        c = a * b  # saves b only (a's gradient; b needs none), as PyTorch's
        d = a + b  # saves nothing
    assert len(packed) == 1
    (c + d).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(4, 3.0, np.float32))


def test_tracing_takes_the_general_path():
    # (not tests/compile/test_native.py's ``x * y + x``: that test needs its kernel compiled
    # in its own cache directory, not loaded earlier in the process from another one)
    f = jg.compile(lambda x, y: x * y - x)
    x, y = jg.arange(5.0), jg.full((5,), 3.0)
    np.testing.assert_array_equal(f(x, y).numpy(), (x * y - x).numpy())
    before = len(TRACING)
    STATE.tracer = object()  # what jit/function.py does around a trace
    try:
        assert len(TRACING) == before + 1
        STATE.tracer = object()
        assert len(TRACING) == before + 1
    finally:
        STATE.tracer = None
    assert len(TRACING) == before


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_broadcast_number_goes_by_value_with_the_same_bits(dtype):
    n = 100_003
    rng = np.random.default_rng(0)
    w = jg.from_numpy(rng.standard_normal(n).astype(dtype))
    s = jg.tensor(0.3, dtype=w.dtype)
    g = s.expand(n)  # every stride 0: the gradient of a full sum
    full = jg.from_numpy(np.full(n, s.item(), dtype))
    for op in (ADD, SUB, MUL, DIV):
        np.testing.assert_array_equal(_bits(binary(op, g, w)), _bits(binary(op, full, w)))
        np.testing.assert_array_equal(_bits(binary(op, w, g)), _bits(binary(op, w, full)))
    x = jg.from_numpy(rng.standard_normal(n).astype(dtype)).requires_grad_()
    (x * x).sum().backward()
    np.testing.assert_array_equal(_bits(x.grad), _bits(x.detach() + x.detach()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 4), (16385,), (30000, 2)])
def test_a_full_sum_takes_the_short_path_with_the_general_paths_result(shape, dtype):
    from jitgrad.ops.eager_reduce import sum_all_small, sum_float
    from jitgrad.ops.reduce_base import ALL, call_reduce, reduce_params
    from jitgrad.ops.sums import SUM

    rng = np.random.default_rng(len(shape))
    a = jg.from_numpy(np.asarray(rng.standard_normal(shape) * 100, dtype)).requires_grad_()
    assert sum_all_small(a._data) is not None
    fast = a.sum()
    general = call_reduce(SUM, a, reduce_params(a, ALL, False, "sum"))
    np.testing.assert_array_equal(_bits(fast), _bits(general))
    np.testing.assert_array_equal(
        fast.detach().numpy(), sum_float(a._data, tuple(range(a.dim())), False))
    assert fast.shape == () and fast.dtype == a.dtype
    assert fast.grad_fn.name() == general.grad_fn.name() == "SumBackward0"
    assert fast.grad_fn.params == general.grad_fn.params
    fast.backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones(shape, dtype))


def test_a_full_sum_off_the_short_path():
    from jitgrad.ops.eager_reduce import sum_all_small

    x = jg.arange(24.0).reshape(4, 6)
    for a in (x.t(), x[:, ::2], jg.arange(5), jg.zeros(0), jg.zeros(HOT_MIN_SIZE)):
        assert sum_all_small(a._data) is None
        np.testing.assert_array_equal(a.sum().numpy(), a.numpy().sum())
    assert x.sum(dtype=jg.float64).dtype == jg.float64
    with jg.no_grad():
        assert x.requires_grad_().sum().grad_fn is None
