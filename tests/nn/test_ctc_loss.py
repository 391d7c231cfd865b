"""``ctc_loss`` / ``CTCLoss`` (ops/nnops/ctc.py, kernels/ctc.py) against PyTorch: every
reduction, padded and concatenated targets, unbatched inputs, ``zero_infinity``, the
gradient PyTorch gives a leaf of log-probabilities, its double backward's error, argument
errors, and a compiled step equal to eager that follows changed targets and lengths."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 3, 5))
TARGETS = np.array([[1, 2, 2, 0], [3, 1, 0, 0], [4, 4, 4, 1]])
IL, TL = [8, 6, 8], [3, 2, 4]


def _loss(M, x, targets, il, tl, through_softmax=True, **kw):
    lp = x.log_softmax(-1) if through_softmax else x
    return M.nn.functional.ctc_loss(lp, targets, il, tl, **kw)


def _both(targets=TARGETS, il=IL, tl=TL, x=X, dtype="float64", **kw):
    out = []
    for M in (jitgrad, torch):
        xt = M.tensor(x.astype(dtype), requires_grad=True)
        loss = _loss(M, xt, M.tensor(targets), il, tl, **kw)
        w = np.linspace(0.5, 1.5, max(loss.numel(), 1)).reshape(tuple(loss.shape))
        (loss * M.tensor(w.astype(dtype))).sum().backward()
        out.append((loss.detach().numpy(), xt.grad.numpy()))
    return out


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reductions_match_torch(reduction, dtype):
    (jl, jg), (tl, tg) = _both(dtype=dtype, reduction=reduction)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == "float64" else dict(rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(jl, tl, **tol)
    np.testing.assert_allclose(jg, tg, **tol)


def test_the_gradient_of_a_log_probs_leaf_is_torchs():
    """PyTorch returns ``exp(lp) - posterior`` (what log_softmax's backward then passes on
    unchanged), not ``-posterior``: the same here, and 0 past each input length."""
    (jl, jg), (tl, tg) = _both(through_softmax=False, x=np.log(np.abs(X) / 3), reduction="sum")
    np.testing.assert_allclose(jl, tl, rtol=1e-12)
    np.testing.assert_allclose(jg, tg, rtol=1e-11, atol=1e-12)
    assert not jg[6:, 1].any()


def test_concatenated_targets_tuple_and_tensor_lengths():
    flat = np.concatenate([TARGETS[i, :TL[i]] for i in range(3)])
    (jl, jg), (tl, tg) = _both(targets=flat, reduction="none")
    np.testing.assert_allclose(jl, tl, rtol=1e-12)
    np.testing.assert_allclose(jg, tg, rtol=1e-11, atol=1e-12)
    j = jitgrad.nn.functional.ctc_loss(jitgrad.tensor(X).log_softmax(-1),
                                       jitgrad.tensor(TARGETS), jitgrad.tensor(IL),
                                       jitgrad.tensor(TL), reduction="none")
    np.testing.assert_allclose(j.numpy(), jl, rtol=0)


def test_unbatched_and_float_targets():
    x = X[:, 0]
    j = jitgrad.nn.functional.ctc_loss(jitgrad.tensor(x).log_softmax(-1),
                                       jitgrad.tensor([1.0, 2.0, 2.0]), 8, 3, reduction="none")
    t = torch.nn.functional.ctc_loss(torch.tensor(x).log_softmax(-1),
                                     torch.tensor([1.0, 2.0, 2.0]), (8,), (3,),
                                     reduction="none")
    assert tuple(j.shape) == tuple(t.shape)
    np.testing.assert_allclose(j.numpy(), t.numpy(), rtol=1e-12)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignments(zero_infinity):
    # 3 time steps cannot emit 2 2 2 (repeats need blanks between): an infinite loss
    targets = np.array([[2, 2, 2], [1, 3, 0]])
    x = X[:3, :2]
    (jl, jg), (tl, tg) = _both(targets=targets, il=[3, 3], tl=[3, 2], x=x,
                               zero_infinity=zero_infinity, reduction="none")
    np.testing.assert_array_equal(np.isinf(jl), np.isinf(tl))
    np.testing.assert_allclose(jl, tl, rtol=1e-12)
    if zero_infinity:
        np.testing.assert_allclose(jg, tg, rtol=1e-11, atol=1e-12)
        assert not jg[:, 0].any()


def test_double_backward_raises_torchs_error():
    msgs = []
    for M in (jitgrad, torch):
        x = M.tensor(X, requires_grad=True)
        loss = _loss(M, x, M.tensor(TARGETS), IL, TL)
        (g,) = M.autograd.grad(loss, x, create_graph=True)
        with pytest.raises(RuntimeError) as err:
            g.sum().backward()
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


ERRORS = {
    "input length too big": dict(il=[9, 6, 8]),
    "target length too big": dict(tl=[5, 2, 3]),
    "negative input length": dict(il=[-1, 6, 8]),
    "negative target length": dict(tl=[3, -1, 3]),
    "lengths size": dict(il=[8, 6]),
    "target lengths size": dict(tl=[3, 2]),
    "blank": dict(blank=5),
    "reduction": dict(reduction="average"),
    "concatenated too short": dict(targets=np.array([1, 2, 3])),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_torch(case):
    kw = {"targets": TARGETS, "il": IL, "tl": TL, **ERRORS[case]}
    targets, il, tl = kw.pop("targets"), kw.pop("il"), kw.pop("tl")
    with pytest.raises(Exception) as t_err:
        _loss(torch, torch.tensor(X), torch.tensor(targets), il, tl, **kw)
    with pytest.raises(type(t_err.value)) as j_err:
        _loss(jitgrad, jitgrad.tensor(X), jitgrad.tensor(targets), il, tl, **kw)
    assert str(j_err.value) == str(t_err.value)


def test_module_and_compiled_step_follow_new_targets_and_lengths():
    jitgrad.manual_seed(0)
    proj = jitgrad.nn.Linear(4, 5)
    crit = jitgrad.nn.CTCLoss(blank=0, zero_infinity=True)
    assert repr(crit) == "CTCLoss()"

    def step(feats, targets, il, tl):
        proj.zero_grad()
        loss = crit(proj(feats).log_softmax(-1), targets, il, tl)
        loss.backward()
        return loss, proj.weight.grad.clone()

    compiled = jitgrad.compile(step)
    feats = jitgrad.randn(8, 3, 4)
    batches = [(jitgrad.tensor(TARGETS), jitgrad.tensor(IL), jitgrad.tensor(TL)),
               (jitgrad.tensor([[2, 1, 0, 0], [4, 4, 1, 3], [1, 0, 0, 0]]),
                jitgrad.tensor([7, 8, 5]), jitgrad.tensor([2, 4, 1]))]
    for targets, il, tl in batches * 2:
        e_loss, e_grad = step(feats, targets, il, tl)
        c_loss, c_grad = compiled(feats, targets, il, tl)
        np.testing.assert_allclose(c_loss.item(), e_loss.item(), rtol=1e-6)
        np.testing.assert_allclose(c_grad.numpy(), e_grad.numpy(), rtol=1e-5, atol=1e-7)
