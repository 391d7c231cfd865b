"""Categorical and OneHotCategorical (and the straight-through variant) against PyTorch:
log_prob, entropy, moments, gradients, enumerate_support, the probs/logits rule, and
sampling frequencies."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jitgrad  # noqa: E402
import jitgrad.distributions as jd  # noqa: E402

DTYPES = [np.float32, np.float64]


def _params(kind, shape, rng):
    if kind == "probs":
        p = rng.uniform(0.05, 1.0, shape)
        return {"probs": p}  # unnormalised: both libraries normalise
    return {"logits": rng.normal(size=shape) * 2}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 1, 3)])
@pytest.mark.parametrize("kind", ["probs", "logits"])
@pytest.mark.parametrize("name", ["Categorical", "OneHotCategorical"])
def test_log_prob_entropy_moments_and_gradients(name, kind, shape, dtype, dh):
    rng = np.random.default_rng(3)
    params = _params(kind, shape, rng)
    k = shape[-1]
    idx = rng.integers(0, k, (6,) + shape[:-1])
    value = idx if name == "Categorical" else np.eye(k)[idx].astype(dtype)
    dj, tj = dh.make(jitgrad, name, params, dtype)
    dt, tt = dh.make(torch, name, params, dtype)
    assert dj.batch_shape == tuple(dt.batch_shape) and dj.event_shape == tuple(dt.event_shape)
    assert dj.param_shape == tuple(dt.param_shape)
    for what in ("log_prob", "entropy", "probs", "logits", "mean", "variance", "mode",
                 "perplexity"):
        if what == "log_prob":
            out_j, out_t = dj.log_prob(jitgrad.tensor(value)), dt.log_prob(torch.tensor(value))
        elif what in ("entropy", "perplexity"):
            out_j, out_t = getattr(dj, what)(), getattr(dt, what)()
        else:
            out_j, out_t = getattr(dj, what), getattr(dt, what)
        dh.assert_close(out_j, out_t, dtype, what)
        assert out_j.dtype.np == dh.to_np(out_t).dtype, what
        if out_t.requires_grad:
            w = np.random.default_rng(1).normal(size=tuple(out_t.shape))
            gt, gj = dh.grads_of(out_t, tt, w), dh.grads_of(out_j, tj, w)
            for key in gt:
                dh.assert_close(gj[key], gt[key], dtype, f"d {what} / d {key}",
                                **({"rtol": 1e-4, "atol": 1e-5} if dtype is np.float32
                                   else {}))


@pytest.mark.parametrize("name", ["Categorical", "OneHotCategorical", "Bernoulli"])
@pytest.mark.parametrize("expand", [True, False])
def test_enumerate_support(name, expand, dh):
    p = np.array([[0.2, 0.8], [0.5, 0.5], [0.9, 0.1]])
    params = {"probs": p if name != "Bernoulli" else p[:, 0]}
    dj, _ = dh.make(jitgrad, name, params, np.float64, grad=False)
    dt, _ = dh.make(torch, name, params, np.float64, grad=False)
    a, b = dj.enumerate_support(expand), dt.enumerate_support(expand)
    assert a.dtype.np == dh.to_np(b).dtype
    np.testing.assert_array_equal(dh.to_np(a), dh.to_np(b))
    assert dj.has_enumerate_support is dt.has_enumerate_support is True


@pytest.mark.parametrize("name", ["Categorical", "OneHotCategorical", "Bernoulli"])
def test_exactly_one_of_probs_and_logits(name):
    p = [0.5, 0.5]
    for kw in ({}, {"probs": p, "logits": p}):
        kw = {k: v for k, v in kw.items()}
        msgs = []
        for lib, mod in ((jitgrad, jd), (torch, torch.distributions)):
            with pytest.raises(ValueError) as e:
                getattr(mod, name)(**{k: lib.tensor(v) for k, v in kw.items()})
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1] == ("Either `probs` or `logits` must be specified, but "
                                      "not both.")


def test_zero_dimensional_parameter_is_refused():
    for lib, mod in ((jitgrad, jd), (torch, torch.distributions)):
        with pytest.raises(ValueError, match="`probs` parameter must be at least "
                                             "one-dimensional."):
            mod.Categorical(probs=lib.tensor(1.0))
        with pytest.raises(ValueError, match="`logits` parameter must be at least "
                                             "one-dimensional."):
            mod.Categorical(logits=lib.tensor(1.0))


def test_lazy_probs_logits_cached_and_consistent():
    d = jd.Categorical(logits=jitgrad.tensor([1.0, 2.0, 3.0]))
    assert "probs" not in d.__dict__
    p = d.probs
    assert d.probs is p and "probs" in d.__dict__
    np.testing.assert_allclose(p.numpy().sum(), 1.0, rtol=1e-6)


@pytest.mark.parametrize("dtype", [jitgrad.float32, jitgrad.float64])
def test_categorical_sampling_frequencies(dtype):
    probs = jitgrad.tensor([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]], dtype=dtype)
    d = jd.Categorical(probs=probs)
    n = 40000
    s = d.sample((n,))
    assert s.shape == (n, 2) and s.dtype == jitgrad.int64
    counts = np.stack([np.bincount(s.numpy()[:, i], minlength=4) for i in range(2)])
    assert counts[0, 1] == 0  # a zero-probability category is never drawn
    p = probs.numpy().astype(np.float64)
    sd = np.sqrt(n * p * (1 - p))
    # 5 standard deviations: a fixed seed, and a bound that a wrong sampler breaks
    assert np.all(np.abs(counts - n * p) <= 5 * sd + 1e-9), counts


def test_categorical_sample_leading_and_trailing_zero_probabilities():
    d = jd.Categorical(probs=jitgrad.tensor([0.0, 1.0, 0.0]))
    assert set(d.sample((1000,)).numpy().tolist()) == {1}
    d = jd.Categorical(logits=jitgrad.tensor([-float("inf"), 0.0, 0.0, -float("inf")]),
                       validate_args=False)
    assert set(d.sample((2000,)).numpy().tolist()) == {1, 2}


def test_one_hot_sample_and_straight_through_gradient(dh):
    logits = jitgrad.tensor([[0.5, 1.0, -1.0], [2.0, 0.0, 0.0]], requires_grad=True)
    d = jd.OneHotCategoricalStraightThrough(logits=logits)
    assert d.has_rsample and not jd.OneHotCategorical.has_rsample
    x = d.rsample((5,))
    assert x.shape == (5, 2, 3)
    np.testing.assert_array_equal(x.detach().numpy().sum(-1), np.ones((5, 2)))
    w = np.random.default_rng(0).normal(size=(5, 2, 3)).astype(np.float32)
    (x * jitgrad.tensor(w)).sum().backward()
    # straight through: the gradient is that of sum(w * probs) over the samples
    lt = torch.tensor(logits.detach().numpy(), requires_grad=True)
    (torch.softmax(lt, -1) * torch.tensor(w).sum(0)).sum().backward()
    dh.assert_close(logits.grad, lt.grad, np.float32)
