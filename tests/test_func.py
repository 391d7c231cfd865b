"""jitgrad.func (torch.func) against PyTorch's: grad / grad_and_value / vjp / jvp / jacrev /
jacfwd / hessian (values, nesting, has_aux, argnums, composition, what requires grad),
vmap as a loop (in_dims / out_dims / None / nested structures / chunk_size / randomness,
nested vmap, vmap of grad: per-sample gradients), functional_call and stack_module_state
(an MLP's Hessian, an ensemble), PyTorch's error messages, the import paths, and
compiled functions using them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from helpers import python_prints  # noqa: E402

import jitgrad  # noqa: E402
import jitgrad.func as jf  # noqa: E402

tf = torch.func
LIBS = ((jitgrad, jf), (torch, tf))
RNG = np.random.default_rng(0)
X3, Y3 = RNG.standard_normal(3), RNG.standard_normal(3)
W23 = RNG.standard_normal((2, 3))
B43 = RNG.standard_normal((4, 3))


def T(lib, a, requires_grad=False):
    return lib.tensor(a).requires_grad_(requires_grad)


def assert_same(actual, expected, path="result"):
    """Same nesting (tuple / list / dict), shapes, values and requires_grad."""
    if isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected), (path, actual)
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), (path, actual)
        for k in expected:
            assert_same(actual[k], expected[k], f"{path}[{k!r}]")
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, jitgrad.Tensor), (path, type(actual))
        assert tuple(actual.shape) == tuple(expected.shape), (path, actual.shape, expected.shape)
        np.testing.assert_allclose(actual.detach().numpy(), expected.detach().numpy(),
                                   rtol=1e-10, atol=1e-12, err_msg=path)
        assert actual.requires_grad == expected.requires_grad, path
    else:
        assert actual == expected, path


def both(run):
    """``run(lib, F)`` in both libraries, results compared."""
    assert_same(run(jitgrad, jf), run(torch, tf))


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


# ----------------------------------------------------------------------------- grad
def sinprod(x, y):
    return (x.sin() * y).sum()


GRAD_CASES = {
    "first_arg": lambda L, F: F.grad(sinprod)(T(L, X3), T(L, Y3)),
    "second_arg": lambda L, F: F.grad(sinprod, argnums=1)(T(L, X3), T(L, Y3)),
    "negative_argnum": lambda L, F: F.grad(sinprod, argnums=-1)(T(L, X3), T(L, Y3)),
    "argnums_tuple": lambda L, F: F.grad(sinprod, argnums=(1, 0))(T(L, X3), T(L, Y3)),
    "has_aux": lambda L, F: F.grad(lambda x, y: (sinprod(x, y), {"a": x * 2, "b": (y,)}),
                                   has_aux=True)(T(L, X3), T(L, Y3)),
    "value": lambda L, F: F.grad_and_value(sinprod, argnums=(0, 1))(T(L, X3), T(L, Y3)),
    "value_aux": lambda L, F: F.grad_and_value(lambda x: ((x ** 3).sum(), x.cos()),
                                               has_aux=True)(T(L, X3)),
    "dict_arg": lambda L, F: F.grad(lambda d, k: (d["w"] @ d["x"] * k).tanh().sum())(
        {"w": T(L, W23), "x": T(L, X3)}, 2.0),
    "kwargs": lambda L, F: F.grad(lambda x, *, scale: (x * scale).exp().sum())(
        T(L, X3), scale=T(L, Y3)),
    "unused_arg": lambda L, F: F.grad(lambda x, y: (y ** 2).sum())(T(L, X3), T(L, Y3)),
    "constant_output": lambda L, F: F.grad(lambda x: L.tensor(1.0, dtype=L.float64))(T(L, X3)),
    "second_derivative": lambda L, F: F.grad(F.grad(lambda x: x.sin() * x ** 2))(
        T(L, X3[0])),
    "third_derivative": lambda L, F: F.grad(F.grad(F.grad(lambda x: x.exp() * x ** 3)))(
        T(L, X3[1])),
    "no_grad_outside": lambda L, F: _under_no_grad(L, F),
    "no_grad_inside": lambda L, F: F.grad(lambda x: (x ** 2).sum() + _no_grad_sin(L, x))(
        T(L, X3)),
}


def _under_no_grad(L, F):
    with L.no_grad():  # a transform's result does not depend on the grad mode around it
        return F.grad(lambda x: (x ** 3).sum())(T(L, X3, requires_grad=True))


def _no_grad_sin(L, x):
    with L.no_grad():
        return x.sin().sum()


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_grad(case):
    both(GRAD_CASES[case])


def test_grad_through_captured_and_outer_tensors():
    """A captured tensor, or an argument, that requires grad: the gradient is
    differentiable with respect to it (a meta-learning step), as functorch's."""
    def run(L, F):
        w = T(L, Y3, requires_grad=True)
        x = T(L, X3, requires_grad=True)
        g = F.grad(lambda a: (a.sin() * w).sum())(x)
        gw, gx = L.autograd.grad((g ** 2).sum(), (w, x))
        h = F.grad(lambda a: (a ** 3).sum())(T(L, X3))  # nothing outside: detached
        return g, gw, gx, h
    both(run)


def test_grad_nested_closure_is_not_confused():
    """d/dx [d/dy (x * y) at y = x] = 1 (the inner grad is with respect to y only)."""
    both(lambda L, F: F.grad(lambda x: F.grad(lambda y: (x * y).sum())(x).sum())(T(L, X3)))


GRAD_ERRORS = {
    "not_scalar": lambda L, F: F.grad(lambda x: x * 2)(T(L, X3)),
    "aux_not_pair": lambda L, F: F.grad(lambda x: x.sum(), has_aux=True)(T(L, X3)),
    "aux_not_tensor": lambda L, F: F.grad(lambda x: (x.sum(), 3), has_aux=True)(T(L, X3)),
    "not_tensor": lambda L, F: F.grad(lambda x: 3.0)(T(L, X3)),
    "argnum_range": lambda L, F: F.grad(lambda x: x.sum(), argnums=2)(T(L, X3)),
    "argnums_repeated": lambda L, F: F.grad(lambda x: x.sum(), argnums=(0, 0))(T(L, X3)),
    "argnums_empty": lambda L, F: F.grad(lambda x: x.sum(), argnums=())(T(L, X3)),
    "argnums_list": lambda L, F: F.grad(lambda x: x.sum(), argnums=[0])(T(L, X3)),
    "arg_not_tensor": lambda L, F: F.grad(lambda x, n: x.sum(), argnums=1)(T(L, X3), 3),
    "integer_arg": lambda L, F: F.grad(lambda x: x.sum())(L.tensor([1, 2])),
}


@pytest.mark.parametrize("case", sorted(GRAD_ERRORS))
def test_grad_errors_are_pytorchs(case):
    same_error(GRAD_ERRORS[case])


# ------------------------------------------------------------------------- vjp, jvp
def _vjp_two_outputs(L, F):
    out, fn = F.vjp(lambda x, y: (x * y, {"s": x.sin()}), T(L, X3), T(L, Y3))
    return out, fn((T(L, Y3), {"s": T(L, X3)})), fn((T(L, X3), {"s": T(L, X3)}))


def _vjp_aux(L, F):
    out, fn, aux = F.vjp(lambda x: (x.exp(), (x.cos(), x * 3)), T(L, X3), has_aux=True)
    return out, fn(T(L, Y3)), aux


def _vjp_create_graph(L, F):
    x = T(L, X3, requires_grad=True)
    out, fn = F.vjp(lambda a: a.sin() * a, x)
    (g,) = fn(T(L, Y3))
    return out, g, L.autograd.grad(g.sum(), x)[0]


def _vjp_cotangent_requires_grad(L, F):
    out, fn = F.vjp(lambda a: a.sin() * a, T(L, X3))
    v = T(L, Y3, requires_grad=True)
    (g,) = fn(v)
    return g, L.autograd.grad((g ** 2).sum(), v)[0]


def _jvp_create_graph(L, F):
    x = T(L, X3, requires_grad=True)
    out, t = F.jvp(lambda a: a.exp() * a.sum(), (x,), (T(L, Y3),))
    return out, t, L.autograd.grad((t ** 2).sum(), x)[0]


VJP_JVP_CASES = {
    "vjp_one": lambda L, F: (lambda r: (r[0], r[1](T(L, Y3))))(F.vjp(L.sin, T(L, X3))),
    "vjp_two_outputs": _vjp_two_outputs,
    "vjp_aux": _vjp_aux,
    "vjp_create_graph": _vjp_create_graph,
    "vjp_cotangent_requires_grad": _vjp_cotangent_requires_grad,
    "jvp_two": lambda L, F: F.jvp(lambda x, y: (x * y, (x.sin() @ y)), (T(L, X3), T(L, Y3)),
                                  (T(L, Y3), T(L, X3))),
    "jvp_nested_primals": lambda L, F: F.jvp(lambda d: d["a"].exp() * d["b"],
                                             ({"a": T(L, X3), "b": T(L, Y3)},),
                                             ({"a": T(L, Y3), "b": T(L, X3)},)),
    "jvp_aux": lambda L, F: F.jvp(lambda x: (x.exp(), x * 2), (T(L, X3),), (T(L, Y3),),
                                  has_aux=True),
    "jvp_independent_output": lambda L, F: F.jvp(lambda x: (x.tanh(), L.ones(2)), (T(L, X3),),
                                                 (T(L, Y3),)),
    "jvp_create_graph": _jvp_create_graph,
}


@pytest.mark.parametrize("case", sorted(VJP_JVP_CASES))
def test_vjp_jvp(case):
    both(VJP_JVP_CASES[case])


VJP_JVP_ERRORS = {
    "vjp_not_tensor_output": lambda L, F: F.vjp(lambda x: 3, T(L, X3)),
    "vjp_integer_output": lambda L, F: F.vjp(lambda x: x.argmax(), T(L, X3)),
    "vjp_cotangent_structure": lambda L, F: F.vjp(lambda x: x, T(L, X3))[1]((T(L, X3),
                                                                              T(L, X3))),
    "vjp_primal_not_tensor": lambda L, F: F.vjp(lambda x: x, 3),
    "vjp_aux_not_pair": lambda L, F: F.vjp(lambda x: x, T(L, X3), has_aux=True),
    "jvp_primals_not_tuple": lambda L, F: F.jvp(lambda x: x, T(L, X3), T(L, X3)),
    "jvp_structures": lambda L, F: F.jvp(lambda x: x, (T(L, X3),), (T(L, X3), T(L, X3))),
    "jvp_tangent_not_tensor": lambda L, F: F.jvp(lambda x: x, (T(L, X3),), (3,)),
    "jvp_no_primals": lambda L, F: F.jvp(lambda: 1, (), ()),
    "jvp_strict": lambda L, F: F.jvp(lambda x: L.ones(2), (T(L, X3),), (T(L, X3),),
                                     strict=True),
    "jvp_output_not_tensor": lambda L, F: F.jvp(lambda x: 3, (T(L, X3),), (T(L, X3),)),
    "jvp_tangent_size": lambda L, F: F.jvp(lambda x: x, (T(L, X3),), (T(L, W23[0, :2]),)),
}


@pytest.mark.parametrize("case", sorted(VJP_JVP_ERRORS))
def test_vjp_jvp_errors_are_pytorchs(case):
    same_error(VJP_JVP_ERRORS[case])


# ------------------------------------------------------------------- jacobians
def vec_fn(x, y):
    return x.sin() * y.sum(), (x * y).cumsum(0)


JAC_CASES = {
    "one": lambda J: J(lambda x: x.sin() * x.sum()),
    "matrix_arg": lambda J: J(lambda w, x: (w @ x).tanh()),
    "argnums_tuple": lambda J: J(vec_fn, argnums=(0, 1)),
    "second_arg": lambda J: J(vec_fn, argnums=1),
    "dict_arg": lambda J: J(lambda d: d["a"] * d["b"].exp()),
    "scalar_output": lambda J: J(lambda x: (x ** 3).sum()),
    "aux": lambda J: J(lambda x: (x.sin(), {"c": x.cos()}), has_aux=True),
    "independent": lambda J: J(lambda x, y: (y * 2, x.exp()), argnums=(0, 1)),
}
JAC_ARGS = {
    "one": lambda L: (T(L, X3),), "matrix_arg": lambda L: (T(L, W23), T(L, X3)),
    "argnums_tuple": lambda L: (T(L, X3), T(L, Y3)), "second_arg": lambda L: (T(L, X3),
                                                                              T(L, Y3)),
    "dict_arg": lambda L: ({"a": T(L, X3), "b": T(L, Y3)},), "scalar_output": lambda L: (
        T(L, X3),), "aux": lambda L: (T(L, X3),), "independent": lambda L: (T(L, X3),
                                                                              T(L, Y3)),
}


@pytest.mark.parametrize("which", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("case", sorted(JAC_CASES))
def test_jacobians(case, which):
    both(lambda L, F: JAC_CASES[case](getattr(F, which))(*JAC_ARGS[case](L)))


def test_jacfwd_equals_jacrev_and_chunk_size():
    x = T(jitgrad, B43)
    f = lambda a: (a.exp() @ a.T).tanh()  # noqa: E731
    a, b = jf.jacrev(f)(x), jf.jacfwd(f)(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(jf.jacrev(f, chunk_size=3)(x).numpy(), a.numpy())
    np.testing.assert_allclose(a.numpy(), tf.jacfwd(f)(T(torch, B43)).numpy(), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_hessian(argnums):
    both(lambda L, F: F.hessian(lambda w, x: (w @ x).tanh().sum() * x.exp().sum(),
                                argnums=argnums)(T(L, W23), T(L, X3)))


def test_jacobian_of_jacobian_of_outer_argument_is_differentiable():
    def run(L, F):
        x = T(L, X3, requires_grad=True)
        h = F.hessian(lambda a: (a.sin() * a.sum()).sum())(x)
        return h, L.autograd.grad((h ** 2).sum(), x)[0]
    both(run)


JAC_ERRORS = {
    "jacrev_chunk": lambda L, F: F.jacrev(lambda x: x, chunk_size=0),
    "jacrev_not_tensor": lambda L, F: F.jacrev(lambda x: 3)(T(L, X3)),
    "jacfwd_not_tensor": lambda L, F: F.jacfwd(lambda x: 3)(T(L, X3)),
    "jacrev_aux": lambda L, F: F.jacrev(lambda x: x.sum(), has_aux=True)(T(L, X3)),
    "jacrev_integer_input": lambda L, F: F.jacrev(lambda x: x.sum())(L.tensor([1, 2])),
    "jacfwd_randomness_arg": lambda L, F: F.jacfwd(lambda x: x, randomness="sometimes")(
        T(L, X3)),
    "jacfwd_random_op": lambda L, F: F.jacfwd(lambda x: x * L.rand(3, dtype=L.float64))(
        T(L, X3)),
}


@pytest.mark.parametrize("case", sorted(JAC_ERRORS))
def test_jacobian_errors_are_pytorchs(case):
    same_error(JAC_ERRORS[case])


# ---------------------------------------------------------------------------- vmap
VMAP_CASES = {
    "default": lambda L, F: F.vmap(lambda a: a.sin() * a.sum())(T(L, B43)),
    "in_dims_none": lambda L, F: F.vmap(lambda a, b: a * b, in_dims=(0, None))(T(L, B43),
                                                                               T(L, X3)),
    "in_dims_1_and_0": lambda L, F: F.vmap(lambda a, b: a * b, in_dims=(1, 0))(
        T(L, B43), T(L, X3)),
    "negative_dims": lambda L, F: F.vmap(lambda a: a.cumsum(0), in_dims=-1, out_dims=-1)(
        T(L, B43)),
    "out_dims_tuple": lambda L, F: F.vmap(lambda a: (a.sum(), a * 2), out_dims=(0, 1))(
        T(L, B43)),
    "out_dims_none": lambda L, F: F.vmap(lambda a: (a * 2, L.ones(2), 3), out_dims=(0, None,
                                                                                    None))(
        T(L, B43)),
    "nested_inputs": lambda L, F: F.vmap(lambda d, t: d["a"] * t[0] + d["b"],
                                         in_dims=({"a": 0, "b": None}, (1,)))(
        {"a": T(L, B43), "b": T(L, X3)}, (T(L, B43.T.copy()),)),
    "nested_outputs": lambda L, F: F.vmap(lambda a: {"s": a.sum(), "p": [a * 2, a.exp()]},
                                          out_dims={"s": 0, "p": [1, 0]})(T(L, B43)),
    "kwargs_not_mapped": lambda L, F: F.vmap(lambda a, *, b: a * b)(T(L, B43), b=T(L, X3)),
    "python_scalar_arg": lambda L, F: F.vmap(lambda a, k: a * k, in_dims=(0, None))(
        T(L, B43), 2.5),
    "chunk_size": lambda L, F: F.vmap(lambda a: a.exp(), chunk_size=3)(T(L, B43)),
    "nested_vmap": lambda L, F: F.vmap(F.vmap(lambda a, b: a * b, in_dims=(0, None)),
                                       in_dims=(1, None))(T(L, B43), T(L, Y3[0])),
    "batch_of_zero": lambda L, F: F.vmap(lambda a: (a.exp(), a.sum()), out_dims=(1, 0))(
        T(L, np.zeros((0, 3)))),
    "constant_output": lambda L, F: F.vmap(lambda a: L.ones(2, dtype=L.float64))(T(L, B43)),
    "vmap_of_jacrev": lambda L, F: F.vmap(F.jacrev(lambda a: a.sin() * a.sum()))(T(L, B43)),
    "vmap_of_hessian": lambda L, F: F.vmap(F.hessian(lambda a: (a.sin() * a).sum()))(
        T(L, B43)),
    "vmap_of_vjp": lambda L, F: F.vmap(lambda a, v: F.vjp(L.tanh, a)[1](v))(T(L, B43),
                                                                           T(L, B43)),
    "vmap_of_jvp": lambda L, F: F.vmap(lambda a, v: F.jvp(L.tanh, (a,), (v,)))(T(L, B43),
                                                                              T(L, B43)),
}


@pytest.mark.parametrize("case", sorted(VMAP_CASES))
def test_vmap(case):
    both(VMAP_CASES[case])


def test_vmap_is_differentiable():
    def run(L, F):
        x = T(L, B43, requires_grad=True)
        w = T(L, X3, requires_grad=True)
        out = F.vmap(lambda a: (a * w).sin().sum())(x)
        return out, L.autograd.grad((out ** 2).sum(), (x, w))
    both(run)


VMAP_ERRORS = {
    "in_dims_structure": lambda L, F: F.vmap(lambda x: x, in_dims=(0, 0))(T(L, B43)),
    "in_dims_dict_structure": lambda L, F: F.vmap(lambda d: d["a"], in_dims=({"b": 1},))(
        {"a": T(L, B43)}),
    "in_dims_list": lambda L, F: F.vmap(lambda x: x, in_dims=[0])(T(L, B43)),
    "sizes_differ": lambda L, F: F.vmap(lambda x, y: x + y)(T(L, B43), T(L, W23)),
    "in_dim_range": lambda L, F: F.vmap(lambda x: x, in_dims=(5,))(T(L, B43)),
    "in_dim_float": lambda L, F: F.vmap(lambda x: x, in_dims=(0.5,))(T(L, B43)),
    "in_dim_non_tensor": lambda L, F: F.vmap(lambda x, n: x * n, in_dims=(0, 0))(T(L, B43), 3),
    "nothing_mapped": lambda L, F: F.vmap(lambda x, n: x * n, in_dims=(None, None))(T(L, B43),
                                                                                    3),
    "no_inputs": lambda L, F: F.vmap(lambda: 1)(),
    "out_dims_type": lambda L, F: F.vmap(lambda x: x, out_dims="a")(T(L, B43)),
    "out_dims_structure": lambda L, F: F.vmap(lambda x, y: (x, y), out_dims=(0, 0, 0))(
        T(L, B43), T(L, B43)),
    "out_dims_for_one_tensor": lambda L, F: F.vmap(lambda x: x.sum(), out_dims=(0, 1))(
        T(L, B43)),
    "out_dim_range": lambda L, F: F.vmap(lambda x: x.sum(), out_dims=3)(T(L, B43)),
    "non_tensor_output": lambda L, F: F.vmap(lambda x: 3)(T(L, B43)),
    "batched_output_with_none": lambda L, F: F.vmap(lambda x: x, out_dims=None)(T(L, B43)),
    "randomness_arg": lambda L, F: F.vmap(lambda x: x, randomness="x"),
    "chunk_size_zero": lambda L, F: F.vmap(lambda x: x, chunk_size=0),
    "random_in_error_mode": lambda L, F: F.vmap(lambda x: x + L.rand(3, dtype=L.float64))(
        T(L, B43)),
    "dropout_in_error_mode": lambda L, F: F.vmap(lambda x: L.nn.functional.dropout(x, 0.5))(
        T(L, B43)),
    "partial_name": lambda L, F: F.vmap(__import__("functools").partial(lambda x, y: 3, y=1))(
        T(L, B43)),
}


@pytest.mark.parametrize("case", sorted(VMAP_ERRORS))
def test_vmap_errors_are_pytorchs(case):
    same_error(VMAP_ERRORS[case])


def test_vmap_randomness_same_and_different():
    x = jitgrad.zeros(4, 3)
    jitgrad.manual_seed(0)
    same = jf.vmap(lambda a: a + jitgrad.rand(3), randomness="same")(x)
    after_same = jitgrad.rand(2)
    jitgrad.manual_seed(0)
    once = jitgrad.rand(3)
    assert np.array_equal(jitgrad.rand(2).numpy(), after_same.numpy())  # advanced by one draw
    for row in same:
        np.testing.assert_array_equal(row.numpy(), once.numpy())
    diff = jf.vmap(lambda a: a + jitgrad.rand(3), randomness="different")(x)
    assert len({tuple(r) for r in diff.numpy().tolist()}) == 4
    # 'same' with chunks, dropout, nested in 'different'
    d = jf.vmap(lambda a: jitgrad.nn.functional.dropout(a + 1, 0.5), randomness="same",
                chunk_size=2)(jitgrad.ones(6, 20))
    assert all(np.array_equal(r, d[0].numpy()) for r in d.numpy())
    n = jf.vmap(jf.vmap(lambda a: a + jitgrad.rand(()), randomness="same"),
                randomness="different")(jitgrad.zeros(3, 5))
    assert all(len(set(r)) == 1 for r in n.numpy().tolist()) and len(set(n[:, 0].tolist())) == 3


def test_vmap_falls_back_to_a_loop_for_data_dependent_functions():
    """Data-dependent Python control flow and .item() work: the traced call stops at the
    value it needs (its effects undone) and vmap runs one call per element."""
    calls = []

    def f(a):
        calls.append(1)
        return a * 2 if a.sum().item() > 0 else -a

    x = jitgrad.tensor([[1.0, 2.0], [-3.0, 1.0], [0.5, 0.5]])
    np.testing.assert_array_equal(jf.vmap(f)(x).numpy(), [[2, 4], [3, -1], [1, 1]])
    assert len(calls) == 1 + 3  # the trace that stopped at .item(), then the loop


def test_vmap_runs_the_python_of_a_batchable_function_once():
    """As torch.vmap: the function's Python runs once, its ops on the whole batch."""
    calls = []

    def f(a):
        calls.append(1)
        return (a * 2).sum(0)

    x = jitgrad.tensor([[1.0, 2.0], [-3.0, 1.0], [0.5, 0.5]])
    np.testing.assert_array_equal(jf.vmap(f)(x).numpy(), [6, -4, 2])
    assert len(calls) == 1


# ------------------------------------------------------ modules: functional_call
def _mlp(L, seed=0):
    torch.manual_seed(seed)
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                              torch.nn.Linear(4, 2)).double()
    if L is torch:
        return ref
    m = jitgrad.nn.Sequential(jitgrad.nn.Linear(3, 4), jitgrad.nn.Tanh(),
                              jitgrad.nn.Linear(4, 2)).double()
    m.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    return m


XB = RNG.standard_normal((5, 3))
YB = np.array([0, 1, 1, 0, 1])


def _loss_fn(L, F, m, batched=True):
    def loss(params, x, y):
        if not batched:
            x, y = x.unsqueeze(0), y.unsqueeze(0)
        return L.nn.functional.cross_entropy(F.functional_call(m, params, (x,)), y)
    return loss


def test_hessian_of_mlp_loss_wrt_parameters():
    def run(L, F):
        m = _mlp(L)
        params = {k: v.detach() for k, v in m.named_parameters()}
        return F.hessian(_loss_fn(L, F, m))(params, T(L, XB), L.tensor(YB))
    both(run)


def test_per_sample_gradients_equal_a_loop_and_torch_func():
    def run(L, F):
        m = _mlp(L)
        params = {k: v.detach() for k, v in m.named_parameters()}
        per_sample = F.vmap(F.grad(_loss_fn(L, F, m, batched=False)), in_dims=(None, 0, 0))(
            params, T(L, XB), L.tensor(YB))
        if L is jitgrad:  # a plain loop of backward passes gives the same gradients
            for i in range(len(XB)):
                m.zero_grad()
                L.nn.functional.cross_entropy(m(T(L, XB[i:i + 1])), L.tensor(YB[i:i + 1])
                                              ).backward()
                for k, p in m.named_parameters():
                    np.testing.assert_allclose(per_sample[k][i].numpy(), p.grad.numpy(),
                                               rtol=1e-12, atol=1e-14)
        return per_sample
    both(run)


def test_per_sample_gradients_of_parameters_requiring_grad():
    """With the module's own parameters (requiring grad), the per-sample gradients are
    differentiable with respect to them."""
    def run(L, F):
        m = _mlp(L)
        params = dict(m.named_parameters())
        g = F.vmap(F.grad(_loss_fn(L, F, m, batched=False)), in_dims=(None, 0, 0))(
            params, T(L, XB), L.tensor(YB))
        penalty = sum((v ** 2).sum() for v in g.values())
        return g, L.autograd.grad(penalty, list(params.values()))
    both(run)


def test_functional_call_restores_and_ties():
    m = _mlp(jitgrad)
    before = {k: v for k, v in m.named_parameters()}
    new = {k: v * 0 + 0.1 for k, v in before.items()}
    out = jf.functional_call(m, new, T(jitgrad, XB))
    np.testing.assert_allclose(out.detach().numpy(),
                               np.full((5, 2), 0.1 * np.tanh(0.1 * XB.sum(1, keepdims=True)
                                                             + 0.1) * 4 + 0.1))
    assert all(p is before[k] for k, p in m.named_parameters())  # originals back
    # a partial dict, a sequence of dicts, kwargs
    part = jf.functional_call(m, ({"0.weight": new["0.weight"]}, {"2.bias": new["2.bias"]}),
                              args=(), kwargs={"input": T(jitgrad, XB)})
    ref = _mlp(torch)
    tpart = tf.functional_call(ref, ({"0.weight": torch.full((4, 3), 0.1, dtype=torch.float64)},
                                     {"2.bias": torch.full((2,), 0.1, dtype=torch.float64)}),
                               args=(), kwargs={"input": T(torch, XB)})
    np.testing.assert_allclose(part.detach().numpy(), tpart.detach().numpy(), rtol=1e-12)

    def tied(L, F):
        a, b = L.nn.Linear(2, 2, bias=False), L.nn.Linear(2, 2, bias=False)
        with L.no_grad():
            a.weight.copy_(L.tensor([[1.0, 2.0], [3.0, 4.0]]))
        b.weight = a.weight  # one parameter under the names 0.weight and 1.weight
        seq = L.nn.Sequential(a, b)
        w, x = L.eye(2) * 2, L.tensor([[1.0, -1.0]])
        return (F.functional_call(seq, {"0.weight": w}, x),
                F.functional_call(seq, {"0.weight": w}, x, tie_weights=False),
                F.functional_call(seq, {"0.weight": w, "1.weight": w}, x), seq(x))
    both(tied)


def test_functional_call_writes_buffers_back():
    """A module that updates a buffer in place during the call (BatchNorm's running
    statistics): the given tensor is updated, the module's own is not (as PyTorch's)."""
    res = []
    for L, F in LIBS:
        bn = L.nn.BatchNorm1d(3).double()
        buffers = {"running_mean": L.zeros(3, dtype=L.float64),
                   "running_var": L.ones(3, dtype=L.float64)}
        out = F.functional_call(bn, buffers, T(L, XB))
        res.append((out, buffers["running_mean"], buffers["running_var"], bn.running_mean))
    assert_same(*res)


FCALL_ERRORS = {
    "strict_missing": lambda L, F: F.functional_call(L.nn.Linear(2, 2), {"weight": L.ones(2, 2)},
                                                     L.ones(1, 2), strict=True),
    "strict_unexpected": lambda L, F: F.functional_call(
        L.nn.Linear(2, 2), {"weight": L.ones(2, 2), "bias": L.ones(2), "scale": L.ones(1)},
        L.ones(1, 2), strict=True),
    "repeated_keys": lambda L, F: F.functional_call(L.nn.Linear(2, 2), ({"bias": L.ones(2)},
                                                                        {"bias": L.ones(2)}),
                                                    L.ones(1, 2)),
    "not_dicts": lambda L, F: F.functional_call(L.nn.Linear(2, 2), [{"bias": L.ones(2)}, 3],
                                                L.ones(1, 2)),
    "bad_type": lambda L, F: F.functional_call(L.nn.Linear(2, 2), 3, L.ones(1, 2)),
    "tied_values_differ": lambda L, F: F.functional_call(
        (lambda lin: L.nn.Sequential(lin, lin))(L.nn.Linear(2, 2)),
        {"0.bias": L.ones(2), "1.bias": L.zeros(2)}, L.ones(1, 2)),
    "stack_empty": lambda L, F: F.stack_module_state([]),
    "stack_classes": lambda L, F: F.stack_module_state([L.nn.Linear(2, 2), L.nn.Tanh()]),
    "stack_modes": lambda L, F: F.stack_module_state([L.nn.Linear(2, 2),
                                                      L.nn.Linear(2, 2).eval()]),
}


@pytest.mark.parametrize("case", sorted(FCALL_ERRORS))
def test_functional_call_errors_are_pytorchs(case):
    same_error(FCALL_ERRORS[case])


def test_ensemble_with_stack_module_state():
    def run(L, F):
        models = [_mlp(L, seed=s) for s in range(3)]
        params, buffers = F.stack_module_state(models)
        base = models[0]
        out = F.vmap(lambda p, b, x: F.functional_call(base, (p, b), (x,)),
                     in_dims=(0, 0, None))(params, buffers, T(L, XB))
        for i, m in enumerate(models):
            np.testing.assert_allclose(out[i].detach().numpy(), m(T(L, XB)).detach().numpy(),
                                       rtol=1e-12)
        return params, buffers, out, params["0.weight"].is_leaf
    both(run)


# ------------------------------------------------------------ imports, compile
def test_import_paths():
    import importlib

    from jitgrad.func import vmap

    assert importlib.import_module("jitgrad.func") is jitgrad.func
    assert jitgrad.func.vmap is vmap is jitgrad.vmap
    assert set(jitgrad.func.__all__) >= {"vmap", "grad", "grad_and_value", "vjp", "jvp",
                                        "jacrev", "jacfwd", "hessian", "functional_call",
                                        "stack_module_state"}


@pytest.mark.parametrize("module", ["jitgrad.func", "jitgrad.func._transforms",
                                    "jitgrad.func._vmap", "jitgrad.func._functional_call"])
def test_docstring_examples(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed


def test_import_jitgrad_does_not_load_func():
    code = ("import sys, jitgrad; a = 'jitgrad.func' in sys.modules; "
            "b = 'jitgrad.autograd.functional' in sys.modules; jitgrad.vmap; "
            "print(int(a), int(b), int('jitgrad.func' in sys.modules))")
    assert python_prints(code) == ["0", "0", "1"]


def _compiled_equals_eager(step, *args, graph_break=False):
    ref = step(*args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = jitgrad.compile(step)
        outs = [c(*args) for _ in range(2)]
    broke = any("running" in str(w.message) and "eagerly" in str(w.message) for w in caught)
    assert broke == graph_break, [str(w.message) for w in caught]
    for out in outs:
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-12, atol=1e-14)


def test_per_sample_gradients_compile():
    w = T(jitgrad, W23)

    def step(x):
        return jf.vmap(jf.grad(lambda w, x: (w @ x).tanh().sum()), in_dims=(None, 0))(w, x)

    _compiled_equals_eager(step, T(jitgrad, B43))


def test_jacrev_and_jvp_compile():
    def step(x):
        j = jf.jacrev(lambda a: a.sin() * a.sum())(x)
        _, t = jf.jvp(lambda a: a.exp() * a, (x,), (x,))
        return j.sum(0) + t

    _compiled_equals_eager(step, T(jitgrad, X3))


def test_vmap_randomness_same_is_a_graph_break_under_compile():
    """A trace records draws, not rewinding: 'same' randomness runs eagerly (never draws
    that differ between elements)."""
    def step(x):
        return jf.vmap(lambda a: a + jitgrad.rand(3, dtype=jitgrad.float64),
                       randomness="same")(x)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jitgrad.compile(step)(jitgrad.zeros(4, 3, dtype=jitgrad.float64))
    assert any("rewinds the random generators" in str(w.message) for w in caught)
    d = out.numpy()
    assert all(np.array_equal(r, d[0]) for r in d)
