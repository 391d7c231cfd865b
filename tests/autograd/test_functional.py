"""jitgrad.autograd.functional against torch.autograd.functional: values, nesting of tuple /
single inputs and outputs, detached results, create_graph (derivatives through a Jacobian,
a Hessian or a product), strict mode's and argument checks' errors (same type and text), and
the functions called inside jitgrad.compile."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402
from jitgrad.autograd import functional as JF  # noqa: E402

TF = torch.autograd.functional
LIBS = ((jitgrad, JF), (torch, TF))


def _arrays(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def _tensors(lib, arrays, requires_grad=False):
    return tuple(lib.tensor(a).requires_grad_(requires_grad) for a in arrays)


def _pack(ts, as_tuple):
    return ts if as_tuple else ts[0]


def assert_same(actual, expected, path="result"):
    """Same nesting (tuples, lists), shapes, values (float64) and requires_grad."""
    if isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected), (path, actual)
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
        return
    assert isinstance(actual, jitgrad.Tensor), (path, type(actual))
    assert tuple(actual.shape) == tuple(expected.shape), (path, actual.shape, expected.shape)
    np.testing.assert_allclose(actual.detach().numpy(), expected.detach().numpy(), rtol=1e-10,
                               atol=1e-12, err_msg=path)
    assert actual.requires_grad == expected.requires_grad, path


def _detached(res):
    """``res`` (nested tuples / lists of tensors) detached: PyTorch's forward-mode Hessian
    returns tensors with a grad_fn (jitgrad's, like every other result here, are detached)."""
    if isinstance(res, (tuple, list)):
        return type(res)(_detached(r) for r in res)
    return res.detach()


def same_error(run):
    """``run(lib, F)`` raises the same exception type and message in both libraries."""
    errs = []
    for lib, F in LIBS:
        with pytest.raises(Exception) as info:
            run(lib, F)
        errs.append(info.value)
    j, t = errs
    assert type(j).__name__ == type(t).__name__, (j, t)
    assert str(j) == str(t).replace("torch.", "jitgrad."), (str(j), str(t))


# functions of (lib) -> callable; inputs' shapes; whether inputs / outputs are tuples
GENERAL = {
    "one_to_one": (lambda L: lambda x: x.exp().sum(dim=1), [(3, 4)], False, False),
    "tuple_to_one": (lambda L: lambda x, y: 2 * x.sin() + 3 * y ** 2, [(3,), (3,)], True, False),
    "one_to_tuple": (lambda L: lambda x: (x ** 2, x.sum()), [(2, 3)], False, True),
    "tuple_to_tuple": (lambda L: lambda x, y: (x * y, (x ** 2).sum() + y.tanh().sum()),
                       [(2, 2), (2, 2)], True, True),
    "one_input_unused": (lambda L: lambda x, y: x ** 3, [(3,), (3,)], True, False),
    "tuple_of_one": (lambda L: lambda x: (x.cos(),), [(4,)], True, True),
}

SCALAR = {
    "one": (lambda L: lambda x: (x ** 3).sum() + (x[0] * x[1]).sum(), [(2, 2)], False),
    "two": (lambda L: lambda x, y: (x.exp() * y).sum() + (y ** 3).sum(), [(3,), (3,)], True),
    "unused": (lambda L: lambda x, y: (x ** 2).sum() * 1.5, [(3,), (2,)], True),
    "tuple_of_one": (lambda L: lambda x: (x.sin() * x).sum(), [(3,)], True),
}


def _out_shapes(case):
    fn, shapes, tup_in, _ = GENERAL[case]
    ts = _tensors(torch, _arrays(*shapes))
    out = fn(torch)(*ts)
    return [o.shape for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("case", sorted(GENERAL))
def test_vjp_jvp_jacobian_values_and_nesting(case):
    fn, shapes, tup_in, tup_out = GENERAL[case]
    arrs = _arrays(*shapes)
    vo = _arrays(*_out_shapes(case), seed=1)
    vi = _arrays(*shapes, seed=2)
    res = []
    for lib, F in LIBS:
        x = _pack(_tensors(lib, arrs), tup_in)
        v_out = _pack(_tensors(lib, vo), tup_out)
        v_in = _pack(_tensors(lib, vi), tup_in)
        res.append((F.vjp(fn(lib), x, v_out), F.jvp(fn(lib), x, v_in),
                    F.jacobian(fn(lib), x), F.jacobian(fn(lib), x, vectorize=True),
                    F.jacobian(fn(lib), x, vectorize=True, strategy="forward-mode")))
        # the inputs were not touched (they need not require grad, and get no .grad)
        for t in _tensors(lib, arrs):
            assert not t.requires_grad and t.grad is None
    assert_same(*res)


@pytest.mark.parametrize("case", sorted(SCALAR))
def test_hessian_vhp_hvp_values_and_nesting(case):
    fn, shapes, tup_in = SCALAR[case]
    arrs, vs = _arrays(*shapes), _arrays(*shapes, seed=3)
    res = []
    for lib, F in LIBS:
        x = _pack(_tensors(lib, arrs), tup_in)
        v = _pack(_tensors(lib, vs), tup_in)
        fwd = F.hessian(fn(lib), x, vectorize=True, outer_jacobian_strategy="forward-mode")
        res.append((F.hessian(fn(lib), x), F.hessian(fn(lib), x, vectorize=True),
                    _detached(fwd), F.vhp(fn(lib), x, v), F.hvp(fn(lib), x, v),
                    F.vjp(fn(lib), x)))
    assert_same(*res)


def test_v_may_be_omitted_for_one_element():
    res = []
    for lib, F in LIBS:
        x = lib.tensor([0.7], dtype=lib.float64)
        res.append((F.vjp(lambda a: (a ** 3).sum(), x), F.jvp(lambda a: a.exp() * 2, x),
                    F.vhp(lambda a: (a ** 4).sum(), x), F.hvp(lambda a: (a ** 4).sum(), x)))
    assert_same(*res)


def test_inputs_requiring_grad_get_no_grad_and_results_are_detached():
    res = []
    for lib, F in LIBS:
        x = lib.tensor(_arrays((3,))[0]).requires_grad_()
        out = (F.vjp(lambda a: a.sin(), x, lib.ones(3, dtype=lib.float64)),
               F.jacobian(lambda a: a.sin(), x), F.hessian(lambda a: a.sin().sum(), x),
               F.hvp(lambda a: a.sin().sum(), x, lib.ones(3, dtype=lib.float64)))
        assert x.grad is None
        res.append(out)
    assert_same(*res)  # requires_grad False everywhere, as PyTorch's


def _third(lib, F, name):
    """A derivative through a result computed with create_graph=True."""
    x = lib.tensor(_arrays((3,), seed=5)[0]).requires_grad_()
    y = lib.tensor(_arrays((3,), seed=6)[0]).requires_grad_()
    v = lib.tensor(_arrays((3,), seed=7)[0])
    f = lambda a, b: (a.sin() * b.exp(), (a * b).sum())  # noqa: E731
    s = lambda a, b: (a.sin() * b.exp()).sum() + (a ** 2 * b).sum()  # noqa: E731
    if name == "jacobian":
        r = F.jacobian(f, (x, y), create_graph=True)
        loss = sum((r[i][j] ** 2).sum() for i in range(2) for j in range(2))
    elif name == "hessian":
        r = F.hessian(s, (x, y), create_graph=True)
        loss = sum((r[i][j] * r[i][j]).sum() for i in range(2) for j in range(2))
    elif name == "vjp":
        r = F.vjp(f, (x, y), (v, lib.tensor(1.0, dtype=lib.float64)), create_graph=True)
        loss = (r[1][0] ** 2).sum() + (r[1][1] * r[0][0]).sum()
    elif name == "jvp":
        r = F.jvp(f, (x, y), (v, v), create_graph=True)
        loss = (r[1][0] ** 2).sum() + r[1][1] * r[0][1]
    elif name == "vhp":
        r = F.vhp(s, (x, y), (v, v), create_graph=True)
        loss = (r[1][0] ** 2).sum() + (r[1][1] ** 3).sum() + r[0]
    else:
        r = F.hvp(s, (x, y), (v, v), create_graph=True)
        loss = (r[1][0] ** 2).sum() + (r[1][1] ** 3).sum()
    return r, lib.autograd.grad(loss, (x, y))


@pytest.mark.parametrize("name", ["jacobian", "hessian", "vjp", "jvp", "vhp", "hvp"])
def test_create_graph_second_derivatives(name):
    assert_same(_third(jitgrad, JF, name), _third(torch, TF, name))


def test_create_graph_on_inputs_not_requiring_grad():
    """create_graph=True with plain inputs: the results require grad (their graph goes to
    the fresh copies), as PyTorch's."""
    res = []
    for lib, F in LIBS:
        x = lib.tensor(_arrays((3,))[0])
        res.append((F.jacobian(lambda a: a.exp(), x, create_graph=True),
                    F.jacobian(lambda a: 2 * a, x, create_graph=True)))
    assert_same(*res)


STRICT_ERRORS = {
    "vjp_unused": lambda L, F: F.vjp(lambda x, y: x * 2, (L.ones(2), L.ones(2)), L.ones(2),
                                     strict=True),
    "vjp_output_detached": lambda L, F: F.vjp(lambda x: x.detach(), L.ones(2), L.ones(2),
                                              strict=True),
    "vjp_linear_create_graph": lambda L, F: F.vjp(lambda x: 2 * x, L.ones(2), L.ones(2),
                                                  strict=True, create_graph=True),
    "jvp_unused": lambda L, F: F.jvp(lambda x, y: x ** 2, (L.ones(2), L.ones(2)),
                                     (L.ones(2), L.ones(2)), strict=True),
    "jacobian_unused": lambda L, F: F.jacobian(lambda x, y: (x * y, x ** 2),
                                               (L.ones(2), L.ones(2)), strict=True),
    "jacobian_linear_create_graph": lambda L, F: F.jacobian(
        lambda x, y: (x ** 2, 3 * y), (L.ones(2), L.ones(2)), strict=True, create_graph=True),
    "jacobian_output_detached": lambda L, F: F.jacobian(lambda x: x.detach(), L.ones(2),
                                                        strict=True),
    "hessian_linear": lambda L, F: F.hessian(lambda x: (2 * x).sum(), L.ones(2), strict=True),
    "hessian_unused": lambda L, F: F.hessian(lambda x, y: (x ** 3).sum(), (L.ones(2),
                                             L.ones(2)), strict=True),
    "vhp_linear": lambda L, F: F.vhp(lambda x: (2 * x).sum(), L.ones(2), L.ones(2),
                                     strict=True),
    "hvp_linear": lambda L, F: F.hvp(lambda x: (3 * x).sum(), L.ones(2), L.ones(2),
                                     strict=True),
    "hvp_constant_hessian_create_graph": lambda L, F: F.hvp(
        lambda x: (x * x).sum(), L.ones(2), L.ones(2), strict=True, create_graph=True),
    "vhp_constant_hessian_create_graph": lambda L, F: F.vhp(
        lambda x: (x * x).sum(), L.ones(2), L.ones(2), strict=True, create_graph=True),
    "jvp_linear_create_graph": lambda L, F: F.jvp(lambda x: 3 * x, L.ones(2), L.ones(2),
                                                  strict=True, create_graph=True),
    "vectorize_and_strict": lambda L, F: F.jacobian(lambda x: x ** 2, L.ones(2), strict=True,
                                                    vectorize=True),
    "forward_mode_strict": lambda L, F: F.jacobian(lambda x: x ** 2, L.ones(2), strict=True,
                                                   vectorize=True, strategy="forward-mode"),
    "forward_mode_create_graph": lambda L, F: F.jacobian(lambda x: x ** 2, L.ones(2),
                                                         create_graph=True, vectorize=True,
                                                         strategy="forward-mode"),
    "forward_mode_not_vectorized": lambda L, F: F.jacobian(lambda x: x ** 2, L.ones(2),
                                                           strategy="forward-mode"),
    "bad_strategy": lambda L, F: F.jacobian(lambda x: x ** 2, L.ones(2), strategy="sideways"),
    "hessian_bad_strategy": lambda L, F: F.hessian(lambda x: (x ** 3).sum(), L.ones(2),
                                                   outer_jacobian_strategy="sideways"),
}


@pytest.mark.parametrize("case", sorted(STRICT_ERRORS))
def test_strict_and_strategy_errors_are_pytorchs(case):
    same_error(STRICT_ERRORS[case])


def test_strict_passes_on_dependent_functions():
    res = []
    for lib, F in LIBS:
        x = lib.tensor(_arrays((3,))[0])
        res.append((F.jacobian(lambda a: a.exp(), x, strict=True, create_graph=True),
                    F.hessian(lambda a: (a ** 3).sum(), x, strict=True),
                    F.hvp(lambda a: (a ** 3).sum(), x, x, strict=True),
                    F.jvp(lambda a: a.sin(), x, x, strict=True)))
    assert_same(*res)


ARG_ERRORS = {
    "v_bad_size": lambda L, F: F.vjp(lambda x: x * 2, L.ones(3), L.ones(2)),
    "v_bad_size_tuple": lambda L, F: F.vjp(lambda x: (x, x), L.ones(3), (L.ones(3), L.ones(2))),
    "v_tuple_length": lambda L, F: F.jvp(lambda x, y: x * y, (L.ones(3), L.ones(3)),
                                         (L.ones(3),)),
    "v_single_expected": lambda L, F: F.jvp(lambda x: x * 2, L.ones(3), (L.ones(3), L.ones(3))),
    "v_none_vjp": lambda L, F: F.vjp(lambda x: x * 2, L.ones(3)),
    "v_none_jvp": lambda L, F: F.jvp(lambda x: x * 2, L.ones(3)),
    "v_none_hvp": lambda L, F: F.hvp(lambda x: x.sum(), L.ones(3)),
    "v_not_tensor": lambda L, F: F.vhp(lambda x: x.sum(), L.ones(3), [1.0, 2.0, 3.0]),
    "input_not_tensor": lambda L, F: F.jacobian(lambda x: x * 2, [1.0, 2.0]),
    "input_tuple_entry": lambda L, F: F.vjp(lambda x, y: x * 2, (L.ones(2), 3.0), L.ones(2)),
    "output_not_tensor": lambda L, F: F.jacobian(lambda x: 3.0, L.ones(2)),
    "hessian_tuple_output": lambda L, F: F.hessian(lambda x: (x.sum(),), L.ones(2)),
    "hessian_not_scalar": lambda L, F: F.hessian(lambda x: x * 2, L.ones(2)),
    "vhp_not_scalar": lambda L, F: F.vhp(lambda x: x * 2, L.ones(2), L.ones(2)),
    "hvp_tuple_output": lambda L, F: F.hvp(lambda x: (x.sum(), x.sum()), L.ones(2), L.ones(2)),
}


@pytest.mark.parametrize("case", sorted(ARG_ERRORS))
def test_argument_errors_are_pytorchs(case):
    same_error(ARG_ERRORS[case])


def test_lazy_attribute_and_import():
    import importlib

    mod = importlib.import_module("jitgrad.autograd.functional")
    assert jitgrad.autograd.functional is mod
    assert set(mod.__all__) == {"vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"}


# ------------------------------------------------------------------------ compile
def _compiled_matches_eager(step, *args):
    """compile(step) traced whole (no graph-break warning) equals eager, twice."""
    ref = step(*args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = jitgrad.compile(step)
        for _ in range(2):
            out = c(*args)
            for a, b in zip(out, ref):
                np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    assert "runs eagerly" not in jitgrad.explain(c, *args)


def test_vjp_and_hvp_inside_compile():
    def step(x, v):
        out, g = JF.vjp(lambda a: a.sin() * a, x, v)
        _, h = JF.hvp(lambda a: (a.exp() * a).sum(), x, v)
        return out, g, h

    x, v = (jitgrad.tensor(a) for a in _arrays((5,), (5,)))
    _compiled_matches_eager(step, x, v)


def test_jacobian_with_create_graph_inside_compile_then_backward():
    def step(x):
        j = JF.jacobian(lambda a: a.sin() * a.sum(), x, create_graph=True)
        return (j ** 2).sum()

    x = jitgrad.tensor(_arrays((4,))[0]).requires_grad_()
    ref = step(x)
    ref.backward()
    g_ref = x.grad.clone()
    x.grad = None
    out = jitgrad.compile(step)(x)
    out.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), g_ref.numpy(), rtol=1e-10)
    xt = torch.tensor(_arrays((4,))[0], requires_grad=True)
    (TF.jacobian(lambda a: a.sin() * a.sum(), xt, create_graph=True) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10)


def test_docstring_examples():
    import doctest

    result = doctest.testmod(JF)
    assert result.attempted and not result.failed
