"""The C form of the arithmetic operators (``jitgrad/_fastops.c``): built where a C compiler
is (CI has one), the same bits as the Numba kernels for every special value, the same
tensors and graphs as the Python operator it stands in for (``tests/ops/test_eager_fast.py``
runs its cases through it), no reference leaked, and every other call handed to the Python
operator."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.ops.eager_fast import native_ops_loaded

if not native_ops_loaded():
    if os.environ.get("CI") == "true":
        pytest.fail("jitgrad._fastops was not built (CI has a C compiler)", pytrace=False)
    pytest.skip("jitgrad._fastops is not built here", allow_module_level=True)

NAMES = ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__"]


def _special(dtype) -> np.ndarray:
    f = np.finfo(dtype)
    vals = [0.0, -0.0, 1.0, -1.0, 0.1, 3.0, np.inf, -np.inf, np.nan, f.max, -f.max, f.tiny,
            f.smallest_subnormal, -f.smallest_subnormal, f.eps, 1.0 + f.eps, 1e-30, 7.5e10]
    return np.array(vals, dtype=dtype)


def _bits(x) -> np.ndarray:
    d = x.detach().numpy() if isinstance(x, jg.Tensor) else x
    return d.view(np.uint32 if d.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_every_pair_of_special_values_has_the_kernels_bits(name, dtype):
    s = _special(dtype)
    a = jg.from_numpy(np.repeat(s, len(s)))
    b = jg.from_numpy(np.tile(s, len(s)))
    fast = getattr(jg.Tensor, name)
    assert type(fast).__name__ == "operator"
    python = fast.__wrapped__  # the Python operator: the Numba kernel's entry point
    np.testing.assert_array_equal(_bits(fast(a, b)), _bits(python(a, b)))
    for number in [0.1, -0.0, 1e-45, 3.4e38, 1e300, np.inf, -np.inf, np.nan, 7, -(2 ** 24),
                   2 ** 24 + 1, 2 ** 53 + 1, -(2 ** 70)]:
        np.testing.assert_array_equal(_bits(fast(a, number)), _bits(python(a, number)),
                                      err_msg=f"{name} {number!r}")


def test_calls_of_every_form_and_the_method_binding():
    a = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = jg.tensor([4.0, 5.0, 6.0])
    assert jg.Tensor.__mul__.__name__ == "_mul_op"
    assert "self * other" in jg.Tensor.__mul__.__doc__
    bound = a.__mul__
    assert bound.__self__ is a and bound(b).tolist() == [4.0, 10.0, 18.0]
    assert jg.Tensor.__mul__(a, b).tolist() == [4.0, 10.0, 18.0]
    assert a.__mul__(other=b).tolist() == [4.0, 10.0, 18.0]  # keywords: the Python operator
    assert (2 * a).tolist() == (a * 2).tolist() == [2.0, 4.0, 6.0]
    assert (1 - a).tolist() == [0.0, -1.0, -2.0] and (a - 1).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError):
        jg.Tensor.__mul__(a)
    c = a.detach().clone()
    c += b
    c *= 2
    assert c.tolist() == [10.0, 14.0, 18.0] and c._version == 2


def test_subclasses_and_other_types_take_the_python_operator():
    class Sub(jg.Tensor):
        pass

    s = Sub([1.0, 2.0])
    r = s * jg.tensor([3.0, 4.0])
    assert r.tolist() == [3.0, 8.0]
    t = jg.tensor([1.0, 2.0], requires_grad=True)
    assert (t * np.float32(2.0)).grad_fn.name() == "MulBackward0"
    with pytest.raises(TypeError):
        t * "x"


def test_no_reference_is_leaked():
    a = jg.tensor(np.linspace(0.0, 1.0, 33, dtype=np.float32), requires_grad=True)
    b = jg.tensor(np.linspace(1.0, 2.0, 33, dtype=np.float32))
    n = 2.5

    def ops():
        c = a * b + a
        c = c - 1.5
        c = n * c / b
        c = c.tanh().exp() + c.sigmoid() * c.relu()
        with jg.no_grad():
            a * b
            a.exp()
        return c

    for _ in range(100):  # (first calls load kernels)
        ops().sum().backward()
    gc.collect()
    refs = [sys.getrefcount(x) for x in (a, b, a._data, b._data, a._vc, n)]
    objects = len(gc.get_objects())
    for _ in range(20_000):
        c = ops()
    c.sum().backward()
    del c
    gc.collect()
    assert [sys.getrefcount(x) for x in (a, b, a._data, b._data, a._vc, n)] == refs
    assert len(gc.get_objects()) - objects < 50
    assert a.grad is not None and np.isfinite(a.grad.numpy()).all()


def test_JITGRAD_NATIVE_OPS_0_runs_the_python_operators():
    code = ("import jitgrad as jg; from jitgrad.ops.eager_fast import native_ops_loaded;"
            "print(native_ops_loaded(), type(jg.Tensor.__mul__).__name__,"
            " (jg.ones(3) * 2).tolist())")
    env = dict(os.environ, JITGRAD_NATIVE_OPS="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "function", "[2.0,", "2.0,", "2.0]"]


def _graph(t) -> list:
    fn = t.grad_fn
    if fn is None:
        return [None, t.requires_grad]
    edges = [e if e is None or type(e) is not tuple else (type(e[0]), e[1])
             for e in fn.next_edges]
    saved = None if fn.saved is None else [
        (id(s[0]), s[1]) if type(s) is tuple else s for s in fn.saved]
    return [type(fn), edges, saved, fn.in_meta, fn.params, fn.op]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (1,), (3, 4), (2, 3, 5), (1, 1, 7), (0,), (4, 0)])
@pytest.mark.parametrize("name", NAMES)
def test_any_contiguous_shape_builds_what_the_general_path_builds(name, shape, dtype):
    from jitgrad.ops.arithmetic import ADD, DIV, MUL, RSUB, SUB
    from jitgrad.ops.dispatch import binary

    op = {"__add__": ADD, "__radd__": ADD, "__sub__": SUB, "__rsub__": RSUB, "__mul__": MUL,
          "__rmul__": MUL, "__truediv__": DIV}[name]
    from jitgrad import _fastops

    rng = np.random.default_rng(len(shape))
    a = jg.from_numpy(np.asarray(rng.uniform(0.5, 2.0, shape), dtype)).requires_grad_()
    a2 = a * 1.0  # a non-leaf operand: its edge is (node, output_nr)
    hits = _fastops.hits()["operator"]
    for b in (jg.from_numpy(np.asarray(rng.uniform(0.5, 2.0, shape), dtype)),
              jg.from_numpy(np.asarray(rng.uniform(0.5, 2.0, shape), dtype)).requires_grad_(),
              2.5, 3):
        for x in (a, a2):
            fast = getattr(jg.Tensor, name)(x, b)
            general = binary(op, x, b)
            np.testing.assert_array_equal(_bits(fast), _bits(general))
            assert fast.shape == general.shape and fast.dtype == general.dtype
            assert fast._data.flags.c_contiguous and fast._data.base is None
            assert _graph(fast) == _graph(general)
            assert fast.grad_fn.seq + 1 == general.grad_fn.seq
    assert _fastops.hits()["operator"] - hits >= 8  # (computed in C)
    with jg.no_grad():
        assert _graph(getattr(jg.Tensor, name)(a, 2.0)) == [None, False]


def test_non_contiguous_or_broadcast_operands_take_the_python_operator():
    x = jg.arange(12.0).reshape(3, 4).requires_grad_()
    for a, b in ((x.t(), x.t()), (x, x[0]), (x[:, ::2], 2.0), (x, x.double())):
        r = a * b
        ref = a.detach().numpy() * (b.detach().numpy() if isinstance(b, jg.Tensor) else b)
        np.testing.assert_array_equal(r.detach().numpy(), ref)
        assert r.grad_fn.name() == "MulBackward0"


def _unary_ops():
    from jitgrad.ops.registry import REGISTRY

    return [op for op in REGISTRY.values() if op.expr is not None and op.nin == 1
            and not op.params]


def _saved_form(t, saved):
    if saved is None:
        return None
    out = []
    for s in saved:
        if s is None or type(s) is not tuple:
            out.append(s)
        elif s[0] is not None:
            out.append(("input", id(s[0]), s[1]))
        else:  # an output: (None, array, version counter, version, output_nr, requires_grad)
            assert s[1] is t._data and s[2] is t._vc
            out.append(("output", s[3], s[4], s[5]))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (0,)])
def test_unary_ops_in_c_build_what_the_python_path_builds(shape, dtype):
    from jitgrad import _fastops
    from jitgrad.ops import dispatch

    assert type(dispatch.unary).__name__ == "builtin_function_or_method"
    hits = _fastops.hits()["unary"]
    rng = np.random.default_rng(3)
    leaf = jg.from_numpy(np.asarray(rng.uniform(0.1, 0.9, shape), dtype)).requires_grad_()
    nonleaf = leaf * 1.0
    plain = leaf.detach()
    checked = 0
    for op in _unary_ops():
        for x in (leaf, nonleaf, plain):
            try:
                ref = dispatch._unary_py(op, x)  # (registers the op with the C path)
            except Exception:  # noqa: BLE001 - an op whose eager call needs more (a domain)
                continue
            fast = dispatch.unary(op, x)
            np.testing.assert_array_equal(_bits(fast), _bits(ref), err_msg=op.name)
            assert fast.dtype == ref.dtype and fast.shape == ref.shape, op.name
            assert fast.requires_grad == ref.requires_grad, op.name
            if ref.grad_fn is None:
                assert fast.grad_fn is None, op.name
                continue
            f, r = fast.grad_fn, ref.grad_fn
            assert type(f) is type(r) and f.op is r.op and f.params == r.params, op.name
            assert f.in_meta == r.in_meta and f.seq == r.seq + 1, op.name
            assert [e if type(e) is not tuple else (type(e[0]), e[1]) for e in f.next_edges] \
                == [e if type(e) is not tuple else (type(e[0]), e[1]) for e in r.next_edges]
            assert _saved_form(fast, f.saved) == _saved_form(ref, r.saved), op.name
            checked += 1
    assert checked >= 20
    assert _fastops.hits()["unary"] - hits >= checked  # (they ran in C, for every shape)


def test_unary_in_c_backward_and_modes():
    a = jg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = a.tanh()
    (y * y.exp()).sum().backward()
    t = np.tanh(np.float32([0.5, -1.0, 2.0]))
    np.testing.assert_allclose(a.grad.numpy(), (1 - t * t) * (1 + t) * np.exp(t),
                               rtol=1e-5)
    y2 = a.tanh()
    y2.add_(1.0)  # its saved output modified in place
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y2.sum().backward()
    with jg.no_grad():
        assert a.tanh().grad_fn is None
    from jitgrad.autograd.graph import saved_tensors_hooks

    packed = []
    with saved_tensors_hooks(lambda t: packed.append(t) or len(packed) - 1,
                             lambda i: packed[i]):
        z = a.exp()
    assert len(packed) == 1
    z.sum().backward()


def test_the_python_operators_pass_the_fast_path_tests_too():
    """Where the extension is not built, the Python operators run: their own tests (which
    use the operators) pass with ``JITGRAD_NATIVE_OPS=0``."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, JITGRAD_NATIVE_OPS="0")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                        os.path.join(here, "test_eager_fast.py")], env=env,
                       capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(here)))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "[100%]" in r.stdout  # (the tests ran)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("call", [
    lambda x: x ** 2, lambda x: x ** 3, lambda x: x ** 0.5, lambda x: x ** -1.5,
    lambda x: 2.0 ** x, lambda x: 3 ** x, lambda x: x.clamp(0.2, 0.6),
    lambda x: x.clamp(min=0.3), lambda x: x.clamp(max=0.4), lambda x: jg.nn.functional.gelu(x),
    lambda x: jg.nn.functional.gelu(x, approximate="tanh")],
    ids=["sq", "cube", "sqrt", "neg", "rpow", "rpow_int", "clamp", "clamp_min", "clamp_max",
         "gelu", "gelu_tanh"])
def test_unary_ops_with_params_in_c(call, dtype):
    from jitgrad import _fastops
    from jitgrad.ops import dispatch

    rng = np.random.default_rng(5)
    x = jg.from_numpy(np.asarray(rng.uniform(0.1, 0.9, (3, 5)), dtype)).requires_grad_()
    call(x)  # (first call: the Python path registers the op and loads its entry)
    hits = _fastops.hits()["unary"]
    fast = call(x)
    assert _fastops.hits()["unary"] == hits + 1  # computed in C
    node = fast.grad_fn
    ref = dispatch._unary_py(node.op, x, node.params)
    np.testing.assert_array_equal(_bits(fast), _bits(ref))
    r = ref.grad_fn
    assert type(node) is type(r) and node.params == r.params and node.in_meta == r.in_meta
    assert _saved_form(fast, node.saved) == _saved_form(ref, r.saved)
    (g,) = jg.autograd.grad(fast.sum(), [x])
    (gr,) = jg.autograd.grad(ref.sum(), [x])
    np.testing.assert_array_equal(_bits(g), _bits(gr))


def test_threads_running_c_ops_at_once():
    """The C unary path calls a kernel that releases the GIL: threads interleave there."""
    import threading

    errors = []

    def work() -> None:
        try:
            x = jg.tensor(np.linspace(-1.0, 1.0, 257, dtype=np.float32)).requires_grad_()
            for _ in range(300):
                y = ((x * 1.5).tanh() ** 2 + x.sigmoid() - 0.25).exp()
                y.sum().backward()
            results.append(x.grad.numpy().copy())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    results: list = []
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4
    ref = results[0]
    for r in results[1:]:
        np.testing.assert_array_equal(r, ref)
