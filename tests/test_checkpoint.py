"""jitgrad.utils.checkpoint: checkpoint (reentrant and not) and checkpoint_sequential give
the gradients of the plain call (dropout included: the random state is replayed), do not
keep the activations inside (weak references die after the forward), work with
autograd.grad where PyTorch's do, and warn / raise with PyTorch's messages."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.utils.checkpoint import checkpoint, checkpoint_sequential

torch = pytest.importorskip("torch")
TC = torch.utils.checkpoint


def _block(M, w1, w2, refs=None, p=0.0):
    """A small function with intermediates (recorded in ``refs`` when given)."""
    def f(x, scale=1.0):
        h = x @ w1
        a = h.tanh()
        if refs is not None:
            refs.extend([weakref.ref(h), weakref.ref(a)])
        if p:
            a = M.nn.functional.dropout(a, p)
        return (a @ w2).sin() * scale
    return f


def _weights(M, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    w1, w2, x = (rng.standard_normal(s) for s in ((6, 8), (8, 5), (4, 6)))
    return [M.tensor(a, requires_grad=True) for a in (w1, w2, x)]


def _grads(ts):
    return [t.grad.numpy().copy() for t in ts]


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradients_equal_plain_call_with_dropout(use_reentrant):
    w1, w2, x = _weights(jitgrad)
    f = _block(jitgrad, w1, w2, p=0.5)
    jitgrad.manual_seed(3)
    state = jitgrad.random.get_rng_state()
    y = checkpoint(f, x, use_reentrant=use_reentrant)
    y.sum().backward()
    got = _grads((w1, w2, x))
    after = jitgrad.random.get_rng_state()
    for t in (w1, w2, x):
        t.grad = None
    jitgrad.random.set_rng_state(state)
    y2 = f(x)
    np.testing.assert_array_equal(y.detach().numpy(), y2.detach().numpy())
    y2.sum().backward()
    for a, b in zip(got, _grads((w1, w2, x))):
        np.testing.assert_array_equal(a, b)
    # the recomputation put the generator back where the forward left it
    np.testing.assert_array_equal(after.numpy(), jitgrad.random.get_rng_state().numpy())


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_activations_inside_are_not_kept(use_reentrant):
    w1, w2, x = _weights(jitgrad)
    refs: list = []
    y = checkpoint(_block(jitgrad, w1, w2, refs), x, use_reentrant=use_reentrant)
    gc.collect()
    assert len(refs) == 2 and all(r() is None for r in refs)
    # without checkpointing the graph keeps them (the control)
    refs2: list = []
    y2 = _block(jitgrad, w1, w2, refs2)(x)
    gc.collect()
    assert any(r() is not None for r in refs2)
    y.sum().backward()
    y2.sum().backward()


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_matches_torch(use_reentrant):
    jw = _weights(jitgrad)
    tw = _weights(torch)
    jy = checkpoint(_block(jitgrad, *jw[:2]), jw[2], use_reentrant=use_reentrant)
    ty = TC.checkpoint(_block(torch, *tw[:2]), tw[2], use_reentrant=use_reentrant)
    np.testing.assert_allclose(jy.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    jy.pow(2).sum().backward()
    ty.pow(2).sum().backward()
    for a, b in zip(_grads(jw), _grads(tw)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_non_reentrant_with_grad_and_kwargs():
    w1, w2, x = _weights(jitgrad)
    f = _block(jitgrad, w1, w2)
    y = checkpoint(f, x, use_reentrant=False, scale=2.0)
    gw1, gx = jitgrad.autograd.grad(y.sum(), (w1, x))
    ew1, ex = jitgrad.autograd.grad(f(x, scale=2.0).sum(), (w1, x))
    np.testing.assert_allclose(gw1.numpy(), ew1.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), ex.numpy(), rtol=1e-12)
    # an input that does not require grad; parameters inside still get gradients
    y = checkpoint(f, x.detach(), use_reentrant=False)
    y.sum().backward()
    assert w1.grad is not None and x.grad is None


def test_reentrant_refuses_grad_and_inputs_as_torch():
    for M, ckpt in ((jitgrad, checkpoint), (torch, TC.checkpoint)):
        w1, w2, x = _weights(M)
        y = ckpt(_block(M, w1, w2), x, use_reentrant=True)
        with pytest.raises(RuntimeError, match=r"When use_reentrant=True, "
                           r"torch.utils.checkpoint is incompatible with .grad\(\) or passing "
                           r"an `inputs` parameter to .backward\(\). To resolve this error, "
                           r"you can either set use_reentrant=False, or call .backward\(\) "
                           r"without passing the `inputs` argument."):
            M.autograd.grad(y.sum(), (x,))
        y = ckpt(_block(M, w1, w2), x, use_reentrant=True)
        with pytest.raises(RuntimeError, match="When use_reentrant=True"):
            y.sum().backward(inputs=[x])


def _messages(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn()
    return [str(m.message) for m in w]


def test_warnings_and_errors_match_torch():
    jw, tw = _weights(jitgrad), _weights(torch)
    jf, tf = _block(jitgrad, *jw[:2]), _block(torch, *tw[:2])
    assert _messages(lambda: checkpoint(jf, jw[2])) == \
        _messages(lambda: TC.checkpoint(tf, tw[2]))
    jx, tx = jw[2].detach(), tw[2].detach()
    assert _messages(lambda: checkpoint(jf, jx, use_reentrant=True)) == \
        _messages(lambda: TC.checkpoint(tf, tx, use_reentrant=True))
    jseq = nn.Sequential(nn.Linear(6, 6), nn.Tanh())
    tseq = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Tanh())
    assert _messages(lambda: checkpoint_sequential(jseq, 2, jitgrad.ones(2, 6))) == \
        _messages(lambda: TC.checkpoint_sequential(tseq, 2, torch.ones(2, 6)))
    for fj, ft in (
            (lambda: checkpoint(jf, jw[2], use_reentrant=True, scale=2.0),
             lambda: TC.checkpoint(tf, tw[2], use_reentrant=True, scale=2.0)),
            (lambda: checkpoint(jf, jw[2], use_reentrant=True, debug=True),
             lambda: TC.checkpoint(tf, tw[2], use_reentrant=True, debug=True)),
            (lambda: checkpoint_sequential(jseq, 2, jitgrad.ones(2, 6), use_reentrant=False,
                                           foo=1),
             lambda: TC.checkpoint_sequential(tseq, 2, torch.ones(2, 6), use_reentrant=False,
                                              foo=1))):
        with pytest.raises(ValueError) as ej:
            fj()
        with pytest.raises(ValueError) as et:
            ft()
        assert str(ej.value) == str(et.value)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_sequential(use_reentrant):
    jitgrad.manual_seed(0)
    layers = [nn.Linear(6, 6, dtype=jitgrad.float64) for _ in range(5)]
    model = nn.Sequential(*[m for layer in layers for m in (layer, nn.Tanh())])
    tmodel = torch.nn.Sequential(*[m for _ in range(5) for m in (
        torch.nn.Linear(6, 6, dtype=torch.float64), torch.nn.Tanh())])
    tmodel.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((3, 6))
    jx, tx = jitgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for segments in (1, 2, 3):
        model.zero_grad()
        tmodel.zero_grad()
        jx.grad = tx.grad = None
        jy = checkpoint_sequential(model, segments, jx, use_reentrant=use_reentrant)
        ty = TC.checkpoint_sequential(tmodel, segments, tx, use_reentrant=use_reentrant)
        np.testing.assert_allclose(jy.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
        jy.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
        for p, q in zip(model.parameters(), tmodel.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10)
    # a list of functions works too
    out = checkpoint_sequential([lambda t: t * 2, lambda t: t + 1, F.relu], 2,
                                jitgrad.tensor([-1.0, 1.0]), use_reentrant=False)
    assert out.tolist() == [0.0, 3.0]


def test_importable_as_attribute():
    assert jitgrad.utils.checkpoint.checkpoint is checkpoint
