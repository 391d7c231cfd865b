"""Names older or third-party PyTorch code reaches for: ``out=`` on ``add``/``sub``/``mul``/
``matmul`` and the factories, ``size=`` keywords, the typed constructors
(``FloatTensor``...), ``autograd.Variable`` and ``multinomial``."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad


# -------------------------------------------------------------------------------- out=
def test_out_on_arithmetic_and_matmul():
    o = jitgrad.empty(3)
    assert jitgrad.add(jitgrad.ones(3), 2.0, alpha=2, out=o) is o
    np.testing.assert_array_equal(o.numpy(), [5.0, 5.0, 5.0])
    jitgrad.mul(jitgrad.ones(3), jitgrad.tensor([1.0, 2.0, 3.0]), out=o)
    np.testing.assert_array_equal(o.numpy(), [1.0, 2.0, 3.0])
    jitgrad.sub(jitgrad.ones(3), 1.0, out=o)
    np.testing.assert_array_equal(o.numpy(), [0.0, 0.0, 0.0])
    m = jitgrad.empty(2, 2)
    assert jitgrad.matmul(jitgrad.ones(2, 3), jitgrad.ones(3, 2), out=m) is m
    np.testing.assert_array_equal(m.numpy(), np.full((2, 2), 3.0))
    z = jitgrad.empty(0)
    assert jitgrad.zeros(2, out=z) is z and z.shape == (2,)


def test_out_refuses_autograd_and_leaves_out_unchanged():
    o = jitgrad.zeros(2)
    w = jitgrad.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"mul\(\): functions with out=... arguments don't "
                       "support automatic differentiation"):
        jitgrad.mul(w, 2.0, out=o)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                       "output type Long"):
        jitgrad.add(jitgrad.ones(2), 0.5, out=jitgrad.zeros(2, dtype=jitgrad.int64))
    np.testing.assert_array_equal(o.numpy(), [0.0, 0.0])
    with jitgrad.no_grad():
        jitgrad.mul(w, 2.0, out=o)
    np.testing.assert_array_equal(o.numpy(), [2.0, 2.0])
    assert o.grad_fn is None and not o.requires_grad


def test_torch_out_semantics_match():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        o = M.zeros(3)
        with pytest.warns(UserWarning, match="resized since it had shape"):
            M.matmul(M.ones(2, 3), M.ones(3), out=o)
        assert tuple(o.shape) == (2,)


# ------------------------------------------------------------------------------ size=
@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_size_keyword(name):
    fn = getattr(jitgrad, name)
    assert fn(size=(2, 3)).shape == (2, 3)
    assert fn(size=[4]).shape == (4,)
    assert fn((2, 3)).shape == fn(2, 3).shape == (2, 3)
    with pytest.raises(TypeError, match=f"{name}\\(\\) got multiple values for argument 'size'"):
        fn(2, size=(3,))


def test_size_keyword_random_is_seeded():
    jitgrad.manual_seed(4)
    a = jitgrad.randn(size=(3,))
    jitgrad.manual_seed(4)
    np.testing.assert_array_equal(a.numpy(), jitgrad.randn(3).numpy())


# ------------------------------------------------------------------ legacy constructors
def test_typed_constructors():
    assert jitgrad.FloatTensor(2, 3).shape == (2, 3)
    assert jitgrad.FloatTensor(2, 3).dtype == jitgrad.float32
    assert jitgrad.FloatTensor().shape == (0,)
    assert jitgrad.LongTensor([1, 2]).dtype == jitgrad.int64
    np.testing.assert_array_equal(jitgrad.DoubleTensor([[1, 2]]).numpy(), [[1.0, 2.0]])
    assert jitgrad.FloatTensor((2, 3)).tolist() == [2.0, 3.0]  # one sequence: data
    assert jitgrad.BoolTensor([True]).dtype == jitgrad.bool
    t = jitgrad.ones(2)
    alias = jitgrad.FloatTensor(t)
    alias.add_(1.0)
    np.testing.assert_array_equal(t.numpy(), [2.0, 2.0])  # shares the storage
    with pytest.raises(TypeError, match="expected TensorOptions"):
        jitgrad.FloatTensor(jitgrad.ones(2, dtype=jitgrad.float64))


def test_typed_isinstance_and_type_conversion():
    x = jitgrad.zeros(2)
    assert isinstance(x, jitgrad.FloatTensor)
    assert not isinstance(x, jitgrad.DoubleTensor)
    assert not isinstance(np.zeros(2), jitgrad.FloatTensor)
    assert x.type(jitgrad.DoubleTensor).dtype == jitgrad.float64
    assert x.type("torch.LongTensor").dtype == jitgrad.int64
    assert x.type() == "jitgrad.FloatTensor"


def test_variable():
    t = jitgrad.ones(2)
    v = jitgrad.autograd.Variable(t, requires_grad=True)
    assert v.requires_grad and v.is_leaf and not t.requires_grad
    assert isinstance(t, jitgrad.autograd.Variable)
    (v * 3.0).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), [3.0, 3.0])
    v.data.add_(1.0)
    np.testing.assert_array_equal(t.numpy(), [2.0, 2.0])  # shares memory
    y = jitgrad.autograd.Variable(jitgrad.ones(2, requires_grad=True) * 2)
    assert y.grad_fn is None and not y.requires_grad
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        jitgrad.autograd.Variable([1.0])


# -------------------------------------------------------------------------- multinomial
def test_multinomial_distribution_and_shapes():
    jitgrad.manual_seed(0)
    p = jitgrad.tensor([[0.1, 0.2, 0.7], [5.0, 5.0, 0.0]])  # rows need not sum to 1
    s = jitgrad.multinomial(p, 20000, replacement=True)
    assert s.shape == (2, 20000) and s.dtype == jitgrad.int64
    freq = np.stack([np.bincount(r, minlength=3) / 20000 for r in s.numpy()])
    np.testing.assert_allclose(freq, [[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]], atol=0.02)
    draws = jitgrad.tensor([1.0, 1.0, 1.0, 1.0]).multinomial(4)
    assert sorted(draws.tolist()) == [0, 1, 2, 3]  # without replacement: a permutation
    picks = np.array([jitgrad.multinomial(jitgrad.tensor([0.05, 0.0, 0.95]), 1).item()
                      for _ in range(300)])
    assert 1 not in picks and 0.9 < (picks == 2).mean()


def test_multinomial_generator_reproduces():
    p = jitgrad.tensor([0.3, 0.3, 0.4])
    g = jitgrad.Generator().manual_seed(7)
    a = jitgrad.multinomial(p, 5, replacement=True, generator=g)
    g.manual_seed(7)
    np.testing.assert_array_equal(a.numpy(), jitgrad.multinomial(p, 5, True, generator=g)
                                  .numpy())


@pytest.mark.parametrize("args,msg", [
    ((jitgrad.ones(2, 2, 2), 1), "prob_dist must be 1 or 2 dim"),
    ((jitgrad.ones(3), 4), "cannot sample n_sample > prob_dist.size"),
    ((jitgrad.ones(3), 0), "cannot sample n_sample <= 0 samples"),
    ((jitgrad.tensor([1.0, -1.0]), 1), "probability tensor contains either `inf`, `nan` or "
                                       "element < 0"),
    ((jitgrad.tensor([0.0, 0.0]), 1), r"invalid multinomial distribution \(sum of "
                                      r"probabilities <= 0\)"),
    ((jitgrad.tensor([1, 2]), 1), "multinomial only supports floating-point dtypes for "
                                  "input, got: Long"),
])
def test_multinomial_errors(args, msg):
    with pytest.raises(RuntimeError, match=msg):
        jitgrad.multinomial(*args)


def test_multinomial_breaks_a_compiled_graph():
    p = jitgrad.tensor([0.2, 0.8])
    f = jitgrad.compile(lambda q: jitgrad.multinomial(q * 1.0, 1), fullgraph=True)
    with pytest.raises(Exception, match="multinomial"):
        f(p)
    g = jitgrad.compile(lambda q: jitgrad.multinomial(q * 1.0, 3, replacement=True))
    with pytest.warns(UserWarning):
        out = g(p)
    assert out.shape == (3,)
