"""NumPy's argument names (``axis=``, ``keepdims=``), which PyTorch's parser takes for ``dim`` /
``keepdim``: the same results as PyTorch's names, PyTorch's error for both spellings, and
the same behaviour from the Python form used without the C extension."""

import numpy as np
import pytest

import jitgrad
from jitgrad.ops.numpy_names import _python_renamer, numpy_names

X = np.arange(12, dtype=np.float32).reshape(3, 4) / 7 - 0.5

# (call with NumPy's names, the same call with PyTorch's): methods, jitgrad.*, linalg, F
CALLS = {
    "sum": (lambda t, x: x.sum(axis=1, keepdims=True), lambda t, x: x.sum(dim=1, keepdim=True)),
    "mean": (lambda t, x: t.mean(x, axis=0), lambda t, x: t.mean(x, dim=0)),
    "std": (lambda t, x: x.std(axis=1), lambda t, x: x.std(dim=1)),
    "var": (lambda t, x: t.var(x, axis=0, keepdims=True),
            lambda t, x: t.var(x, dim=0, keepdim=True)),
    "amax": (lambda t, x: x.amax(axis=1), lambda t, x: x.amax(dim=1)),
    "max": (lambda t, x: t.max(x, axis=1)[0], lambda t, x: t.max(x, dim=1)[0]),
    "min_indices": (lambda t, x: x.min(axis=0).indices, lambda t, x: x.min(dim=0).indices),
    "argmax": (lambda t, x: x.argmax(axis=1), lambda t, x: x.argmax(dim=1)),
    "logsumexp": (lambda t, x: t.logsumexp(x, axis=1), lambda t, x: t.logsumexp(x, dim=1)),
    "softmax": (lambda t, x: x.softmax(axis=0), lambda t, x: x.softmax(dim=0)),
    "log_softmax": (lambda t, x: t.log_softmax(x, axis=1), lambda t, x: t.log_softmax(x, 1)),
    "cumsum": (lambda t, x: t.cumsum(x, axis=1), lambda t, x: t.cumsum(x, dim=1)),
    "cat": (lambda t, x: t.cat([x, x], axis=1), lambda t, x: t.cat([x, x], dim=1)),
    "stack": (lambda t, x: t.stack([x, x], axis=2), lambda t, x: t.stack([x, x], dim=2)),
    "unsqueeze": (lambda t, x: x.unsqueeze(axis=0), lambda t, x: x.unsqueeze(dim=0)),
    "squeeze": (lambda t, x: t.squeeze(x[:1], axis=0), lambda t, x: t.squeeze(x[:1], dim=0)),
    "sort": (lambda t, x: x.sort(axis=0, descending=True)[0],
             lambda t, x: x.sort(dim=0, descending=True)[0]),
    "all": (lambda t, x: (x > 0).all(axis=1), lambda t, x: (x > 0).all(dim=1)),
    "prod": (lambda t, x: x.prod(axis=1, keepdims=True), lambda t, x: x.prod(dim=1, keepdim=True)),
    "vector_norm": (lambda t, x: t.linalg.vector_norm(x, axis=1),
                    lambda t, x: t.linalg.vector_norm(x, dim=1)),
    "cosine_similarity": (lambda t, x: t.nn.functional.cosine_similarity(x, x + 1, axis=1),
                          lambda t, x: t.nn.functional.cosine_similarity(x, x + 1, dim=1)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_numpy_names_give_the_pytorch_names_result(name):
    numpy_form, torch_form = CALLS[name]
    got = numpy_form(jitgrad, jitgrad.tensor(X))
    want = torch_form(jitgrad, jitgrad.tensor(X))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name", sorted(CALLS))
def test_numpy_names_match_torch(name):
    torch = pytest.importorskip("torch")
    numpy_form, _ = CALLS[name]
    got = numpy_form(jitgrad, jitgrad.tensor(X))
    want = numpy_form(torch, torch.tensor(X))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


def test_gradient_through_numpy_names():
    x = jitgrad.tensor(X, requires_grad=True)
    x.sum(axis=0, keepdims=True).pow(2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(2 * X.sum(0), X.shape))


@pytest.mark.parametrize("call", [
    lambda x: x.sum(dim=1, axis=0),
    lambda x: jitgrad.sum(x, axis=1, keepdim=True, keepdims=False),
])
def test_both_spellings_raise_pytorchs_error(call):
    x = jitgrad.tensor(X)
    message = r"^sum\(\) got an unexpected keyword argument '(axis|keepdims)'$"
    with pytest.raises(TypeError, match=message):
        call(x)


def test_python_form_behaves_as_the_c_form():
    def f(input, dim=None, keepdim=False, *, dtype=None):
        return (input, dim, keepdim, dtype)

    py = _python_renamer(f, {"axis": "dim", "keepdims": "keepdim"})
    assert py(1, axis=2, keepdims=True, dtype="d") == (1, 2, True, "d")
    assert py(1, 2) == (1, 2, False, None)
    with pytest.raises(TypeError, match="f\\(\\) got an unexpected keyword argument 'axis'"):
        py(1, dim=2, axis=2)
    wrapped = numpy_names(f)
    assert wrapped(1, axis=2, keepdims=True) == (1, 2, True, None)
    assert wrapped.__wrapped__ is f and wrapped.__name__ == "f"


def test_functions_without_dim_are_left_alone():
    def g(input, other):
        return input

    assert numpy_names(g) is g
    assert jitgrad.Tensor.matmul is not None
    with pytest.raises(TypeError):
        jitgrad.tensor(X).flatten(axis=0)  # no dim parameter there: nothing to rename


def test_signature_and_help_follow_the_function():
    import inspect

    params = inspect.signature(jitgrad.Tensor.sum).parameters
    assert list(params)[:3] == ["input", "dim", "keepdim"]
    assert jitgrad.sum.__doc__ and jitgrad.Tensor.mean.__name__ == "mean"
