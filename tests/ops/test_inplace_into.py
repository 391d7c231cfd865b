"""In-place element-wise updates computed straight into the tensor (``dispatch.binary_into``:
the optimizers' ``p -= lr * g``): the out-of-place op's bits, a version bump, and the general
path (``False``) wherever autograd, a tracer, a layout or an overlap needs it."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.compiler.kernel_desc import KernelDesc, Line, Operand
from jitgrad.ops.arithmetic import ADD, ADD_SCALED, DIV, MUL, SUB
from jitgrad.ops.dispatch import binary, binary_into
from jitgrad.ops.eager_kernels import PARALLEL_MIN_SIZE

CASES = [(ADD, None), (SUB, None), (MUL, None), (DIV, None), (ADD_SCALED, {"alpha": -0.01}),
         (ADD_SCALED, {"alpha": 3.0})]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 1000, PARALLEL_MIN_SIZE + 3])
@pytest.mark.parametrize("op,params", CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_into_gives_the_out_of_place_bits(op, params, n, dtype):
    rng = np.random.default_rng(n)
    a0 = rng.uniform(0.5, 2.0, n).astype(dtype)
    b0 = rng.uniform(0.5, 2.0, n).astype(dtype)
    with jg.no_grad():
        for second in (jg.from_numpy(b0.copy()), 1.5):
            expected = binary(op, jg.from_numpy(a0.copy()), second, params).numpy()
            a = jg.from_numpy(a0.copy())
            v = a._version
            assert binary_into(op, a, second, params)
            np.testing.assert_array_equal(a.numpy(), expected)
            assert a._version == v + 1


def test_into_the_tensor_itself():
    x = jg.arange(5.0)
    with jg.no_grad():
        assert binary_into(MUL, x, x)
    np.testing.assert_array_equal(x.numpy(), np.arange(5.0) ** 2)


def test_cases_left_to_the_general_path_change_nothing():
    a = jg.ones(6)
    b = jg.full((6,), 2.0)
    cases = []
    w = jg.ones(6, requires_grad=True)
    cases.append((w, b))                         # grad mode on, a leaf that requires grad
    cases.append((a, jg.ones(6, requires_grad=True)))   # ... or an input that does
    cases.append((jg.ones(3, 4).t(), jg.ones(4, 3)))    # a not contiguous
    cases.append((a, jg.ones(6, dtype=jg.float64)))    # dtypes differ
    cases.append((a, jg.ones(1)))                       # broadcasting
    base = jg.arange(7.0)
    cases.append((base[1:], base[:-1]))                 # overlapping views
    cases.append((jg.ones(6, dtype=jg.int64), 2))       # not a float kernel
    for x, y in cases:
        before = x.detach().clone()
        v = x._version
        assert not binary_into(ADD_SCALED, x, y, {"alpha": 2.0})
        np.testing.assert_array_equal(x.detach().numpy(), before.numpy())
        assert x._version == v
    f = jg.compile(lambda x: (binary_into(ADD, x, x), x * 1)[1])  # under a tracer
    np.testing.assert_array_equal(f(jg.ones(3)).numpy(), np.ones(3))


def test_an_in_place_kernel_description_is_checked():
    line = (Line("v0", "x0 + x1", "add", "float32"),)
    ops = (Operand("float64", "full"), Operand("float32", "full"))
    with pytest.raises(ValueError, match="in-place kernel"):
        KernelDesc(mode="flat", operands=ops, scalars=(), lines=line,
                   stores=(("v0", "float32"),), into=True)


def test_sgd_step_in_place_equals_compiled_step():
    """The eager SGD update (in place, one pass) and the compiled one (the traced
    ``add_(g, alpha=-lr)``) give the same parameters, bit for bit."""
    def run(compiled):
        jg.manual_seed(0)
        model = jg.nn.Linear(700, 800)
        opt = jg.optim.SGD(model.parameters(), lr=0.1)
        x = jg.randn(16, 700)

        def step():
            opt.zero_grad()
            loss = model(x).tanh().sum()
            loss.backward()
            opt.step()
            return loss
        s = jg.compile(step) if compiled else step
        for _ in range(3):
            s()
        return [p.detach().numpy().copy() for p in model.parameters()]
    for a, b in zip(run(False), run(True)):
        np.testing.assert_array_equal(a, b)
