"""``jitgrad.optim.swa_utils`` against ``torch.optim.swa_utils``: AveragedModel with every
averaging function (the default SWA, EMA, ``avg_fn`` / ``multi_avg_fn``, ``use_buffers``) on
an ``nn.Sequential`` with BatchNorm, ``update_bn``, the ``SWALR`` schedule and PyTorch's SWA
tutorial loop (SGD, a cosine schedule, then SWALR and weight averaging) end to end; the
errors word for word. Without PyTorch: the averages against NumPy's means, ``update_bn``
against the data's statistics, ``SWALR``'s values and ``state_dict``."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import jitgrad
from jitgrad.optim import swa_utils

RNG = np.random.default_rng(29)
XS = RNG.standard_normal((6, 10, 4))
YS = RNG.integers(0, 3, (6, 10))


def _model(M):
    M.manual_seed(0)
    return M.nn.Sequential(M.nn.Linear(4, 8), M.nn.BatchNorm1d(8), M.nn.ReLU(),
                           M.nn.Linear(8, 3)).double()


def _loader(M):
    return [(M.tensor(x), M.tensor(y)) for x, y in zip(XS, YS)]


def _pair(torch, H):
    jm, tm = _model(jitgrad), _model(torch)
    H.copy_params(jm, tm, torch)
    return jm, tm


def _train_epoch(M, model, opt, loader):
    for x, y in loader:
        opt.zero_grad()
        M.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def _assert_same_state(jm, tm, H, tol=1e-10):
    tsd = tm.state_dict()
    assert list(jm.state_dict()) == list(tsd)
    for k, v in jm.state_dict().items():
        assert v.dtype.name == str(tsd[k].dtype).removeprefix("torch."), k
        H.assert_close(v, tsd[k], rtol=tol, atol=tol, msg=k)


AVERAGING = {
    "swa": {},
    "swa-use_buffers": {"use_buffers": True},  # the integer num_batches_tracked too
    "ema-multi-use_buffers": {"multi_avg_fn": ("get_ema_multi_avg_fn", 0.7),
                              "use_buffers": True},
    "ema-avg_fn": {"avg_fn": ("get_ema_avg_fn", 0.8)},
    "swa-avg_fn": {"avg_fn": ("get_swa_avg_fn",)},
    "swa-multi_avg_fn": {"multi_avg_fn": ("get_swa_multi_avg_fn",)},
}


def _averaged(M, model, case):
    kw = {}
    for key, value in AVERAGING[case].items():
        kw[key] = getattr(M.optim.swa_utils, value[0])(*value[1:]) \
            if isinstance(value, tuple) else value
    return M.optim.swa_utils.AveragedModel(model, **kw)


@pytest.mark.parametrize("case", sorted(AVERAGING))
def test_averaged_model_matches_torch(torch, H, case):
    jm, tm = _pair(torch, H)
    models = []
    for M, m in ((jitgrad, jm), (torch, tm)):
        avg = _averaged(M, m, case)
        opt = M.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
        for _ in range(4):
            _train_epoch(M, m, opt, _loader(M)[:3])
            avg.update_parameters(m)
        models.append(avg)
    _assert_same_state(*models, H)
    assert models[0].n_averaged.item() == 4
    models[0].eval()
    models[1].eval()
    H.assert_close(models[0](jitgrad.tensor(XS[5])), models[1](torch.tensor(XS[5])), rtol=1e-10,
                   atol=1e-10)


def test_swa_tutorial_loop_matches_torch(torch, H):
    """PyTorch's SWA recipe: SGD under a cosine schedule, then from ``swa_start`` on an
    averaged model updated every epoch and SWALR; then ``update_bn`` on the averaged model."""
    jm, tm = _pair(torch, H)
    results = []
    for M, model in ((jitgrad, jm), (torch, tm)):
        loader = _loader(M)
        opt = M.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=1e-3)
        swa_model = M.optim.swa_utils.AveragedModel(model)
        scheduler = M.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        swa_scheduler = M.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=2)
        lrs = []
        for epoch in range(8):
            _train_epoch(M, model, opt, loader)
            if epoch > 3:
                swa_model.update_parameters(model)
                swa_scheduler.step()
            else:
                scheduler.step()
            lrs.append(opt.param_groups[0]["lr"])
        M.optim.swa_utils.update_bn(loader, swa_model)
        results.append((swa_model, lrs))
    (jswa, jlrs), (tswa, tlrs) = results
    np.testing.assert_allclose(jlrs, tlrs, rtol=1e-14)
    _assert_same_state(jswa, tswa, H, tol=1e-9)
    assert jswa.module[1].momentum == 0.1 and jswa.training
    jswa.eval()
    tswa.eval()
    H.assert_close(jswa(jitgrad.tensor(XS[0])), tswa(torch.tensor(XS[0])), rtol=1e-9,
                   atol=1e-9)


def test_update_bn_matches_torch(torch, H):
    jm, tm = _pair(torch, H)
    for M, m in ((jitgrad, jm), (torch, tm)):
        m[1].momentum = 0.3
        m.eval()
        M.optim.swa_utils.update_bn(_loader(M), m)  # (x, y) batches: the input is x
        assert not m.training and m[1].momentum == 0.3
        M.optim.swa_utils.update_bn([x for x, _ in _loader(M)][:2], m)  # plain tensors
    _assert_same_state(jm, tm, H)


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 3])
def test_swalr_matches_torch(torch, strategy, anneal_epochs):
    lrs = []
    for M in (jitgrad, torch):
        params = [M.zeros(1, requires_grad=True), M.zeros(1, requires_grad=True)]
        opt = M.optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.5}], lr=1.0)
        sched = M.optim.swa_utils.SWALR(opt, swa_lr=[0.1, 0.05], anneal_epochs=anneal_epochs,
                                        anneal_strategy=strategy)
        out = [sched.get_last_lr()]
        for _ in range(6):
            opt.step()
            sched.step()
            out.append(sched.get_last_lr() + [g["swa_lr"] for g in opt.param_groups])
        lrs.append(out)
    for a, b in zip(*lrs):
        np.testing.assert_allclose(a, b, rtol=1e-14)


def test_errors_as_torch(torch):
    def both(fn):
        errors = []
        for M in (jitgrad, torch):
            with pytest.raises(Exception) as err:
                fn(M)
            errors.append((type(err.value), str(err.value)))
        assert errors[0] == errors[1]

    def opt(M):
        return M.optim.SGD([M.zeros(1, requires_grad=True)], lr=1.0)

    both(lambda M: M.optim.swa_utils.SWALR(opt(M), swa_lr=0.1, anneal_strategy="exp"))
    both(lambda M: M.optim.swa_utils.SWALR(opt(M), swa_lr=0.1, anneal_epochs=-1))
    both(lambda M: M.optim.swa_utils.SWALR(opt(M), swa_lr=0.1, anneal_epochs=2.0))
    both(lambda M: M.optim.swa_utils.SWALR(opt(M), swa_lr=[0.1, 0.2]))
    both(lambda M: M.optim.swa_utils.get_ema_multi_avg_fn(1.5))
    both(lambda M: M.optim.swa_utils.get_ema_avg_fn(-0.1))
    both(lambda M: M.optim.swa_utils.AveragedModel(
        M.nn.Linear(1, 1), avg_fn=M.optim.swa_utils.get_swa_avg_fn(),
        multi_avg_fn=M.optim.swa_utils.get_swa_multi_avg_fn()))


# ------------------------------------------------------------------- without torch
def _snapshots(n=4):
    return [RNG.standard_normal((3, 2)) for _ in range(n)]


def _linear_with(weight):
    m = jitgrad.nn.Linear(2, 3, bias=False).double()
    with jitgrad.no_grad():
        m.weight.copy_(jitgrad.tensor(weight))
    return m


@pytest.mark.parametrize("kw", [{}, {"avg_fn": "swa"}, {"multi_avg_fn": "swa"}])
def test_swa_is_the_mean_of_the_snapshots(kw):
    fns = {"avg_fn": swa_utils.get_swa_avg_fn, "multi_avg_fn": swa_utils.get_swa_multi_avg_fn}
    snaps = _snapshots()
    model = _linear_with(snaps[0])
    avg = swa_utils.AveragedModel(model, **{k: fns[k]() for k in kw})
    for s in snaps:
        with jitgrad.no_grad():
            model.weight.copy_(jitgrad.tensor(s))
        avg.update_parameters(model)
    # (multi_avg_fn: lerp weights 1 / (n + 1) in float32, as PyTorch's)
    tol = 1e-7 if kw.get("multi_avg_fn") else 1e-14
    np.testing.assert_allclose(avg.module.weight.detach().numpy(), np.mean(snaps, axis=0),
                               rtol=tol, atol=tol)
    assert avg.n_averaged.item() == 4 and avg.module is not model
    assert list(avg.state_dict()) == ["n_averaged", "module.weight"]


@pytest.mark.parametrize("multi", [False, True])
def test_ema_closed_form(multi):
    snaps = _snapshots()
    model = _linear_with(snaps[0])
    fn = swa_utils.get_ema_multi_avg_fn(0.75) if multi else swa_utils.get_ema_avg_fn(0.75)
    avg = swa_utils.AveragedModel(model, **{"multi_avg_fn" if multi else "avg_fn": fn})
    expected = snaps[0]
    for i, s in enumerate(snaps):
        with jitgrad.no_grad():
            model.weight.copy_(jitgrad.tensor(s))
        avg.update_parameters(model)
        expected = s if i == 0 else 0.75 * expected + 0.25 * s
    np.testing.assert_allclose(avg.module.weight.detach().numpy(), expected, rtol=1e-14)


def test_buffers_copied_or_averaged():
    bn = jitgrad.nn.BatchNorm1d(2).double()
    avg, ema = swa_utils.AveragedModel(bn), swa_utils.AveragedModel(
        bn, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.5), use_buffers=True)
    means = []
    for x in XS[:3, :, :2]:
        bn(jitgrad.tensor(x))
        means.append(bn.running_mean.numpy().copy())
        avg.update_parameters(bn)
        ema.update_parameters(bn)
    np.testing.assert_array_equal(avg.module.running_mean.numpy(), means[-1])  # copied
    np.testing.assert_allclose(ema.module.running_mean.numpy(),
                               0.25 * means[0] + 0.25 * means[1] + 0.5 * means[2], rtol=1e-14)
    # the integer count: (1 * 0.5 + 2 * 0.5 = 1.5 ->) 1, then 1 * 0.5 + 3 * 0.5 = 2
    assert ema.module.num_batches_tracked.item() == 2
    assert avg.module.num_batches_tracked.item() == 3


def test_update_bn_computes_the_data_statistics():
    model = jitgrad.nn.Sequential(jitgrad.nn.Identity(), jitgrad.nn.BatchNorm1d(4)).double()
    model.eval()
    swa_utils.update_bn([(jitgrad.tensor(x), None) for x in XS], model)
    np.testing.assert_allclose(model[1].running_mean.numpy(), XS.mean(axis=(1,)).mean(0),
                               rtol=1e-12)
    np.testing.assert_allclose(model[1].running_var.numpy(),
                               XS.var(axis=1, ddof=1).mean(0), rtol=1e-12)
    assert model[1].num_batches_tracked.item() == 6 and not model.training
    assert model[1].momentum == 0.1
    lin = jitgrad.nn.Linear(4, 2)
    swa_utils.update_bn([jitgrad.ones(3, 4)], lin)  # no BatchNorm: nothing to do


def test_swalr_values_and_state_dict():
    opt = jitgrad.optim.SGD([jitgrad.zeros(1, requires_grad=True)], lr=1.0)
    sched = swa_utils.SWALR(opt, swa_lr=0.2, anneal_epochs=4, anneal_strategy="linear")
    lrs = [sched.get_last_lr()[0]]
    for _ in range(5):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    np.testing.assert_allclose(lrs, [1.0, 0.8, 0.6, 0.4, 0.2, 0.2], rtol=1e-12)
    sd = sched.state_dict()
    assert "anneal_func" not in sd and "optimizer" not in sd and sd["_anneal_strategy"] == \
        "linear"
    other = swa_utils.SWALR(jitgrad.optim.SGD([jitgrad.zeros(1, requires_grad=True)], lr=1.0),
                            swa_lr=0.5)
    other.load_state_dict(sd)
    assert other.anneal_func is swa_utils.SWALR._linear_anneal and other.anneal_epochs == 4
    cos = swa_utils.SWALR(jitgrad.optim.SGD([jitgrad.zeros(1, requires_grad=True)], lr=1.0),
                          swa_lr=0.0, anneal_epochs=2)
    cos.optimizer.step()
    cos.step()
    assert cos.get_last_lr()[0] == pytest.approx(0.5)  # halfway along the cosine


def test_asgd_with_swalr_and_averaged_model():
    """The new optimizers drive the SWA utilities like any other."""
    model = jitgrad.nn.Sequential(jitgrad.nn.Linear(4, 3)).double()
    opt = jitgrad.optim.ASGD(model.parameters(), lr=0.1)
    swa, sched = swa_utils.AveragedModel(model), swa_utils.SWALR(opt, swa_lr=0.01)
    for x, y in _loader(jitgrad):
        _train_epoch(jitgrad, model, opt, [(x, y)])
        swa.update_parameters(model)
        sched.step()
    assert swa.n_averaged.item() == 6 and opt.param_groups[0]["lr"] < 0.1


def test_docstring_examples():
    assert doctest.testmod(swa_utils).failed == 0
