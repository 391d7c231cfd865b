"""Module hooks against PyTorch: forward pre-hooks and hooks (order, replacement values,
kwargs, prepend, always_call, removal), full backward (pre-)hooks (grad_input/grad_output
values, gradient replacement, removal), the deprecated non-full hooks, global hooks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as jnn


def _mlp(M):
    M.manual_seed(0)
    return M.nn.Sequential(M.nn.Linear(4, 5), M.nn.Tanh(), M.nn.Linear(5, 3))


def _pair(torch, H, make):
    jm, tm = make(jitgrad), make(torch)
    H.copy_params(jm, tm, torch)
    return jm, tm


def _record_order(M, model, log):
    handles = []
    for name, mod in model.named_children():
        handles.append(mod.register_forward_pre_hook(
            lambda m, args, n=name: log.append(("pre", n, tuple(args[0].shape)))))
        handles.append(mod.register_forward_hook(
            lambda m, args, out, n=name: log.append(("fwd", n, tuple(out.shape)))))
        handles.append(mod.register_full_backward_pre_hook(
            lambda m, go, n=name: log.append(("bwd_pre", n, tuple(go[0].shape)))))
        handles.append(mod.register_full_backward_hook(
            lambda m, gi, go, n=name: log.append(
                ("bwd", n, tuple(None if g is None else tuple(g.shape) for g in gi)))))
    return handles


def test_hook_order_matches_torch(torch, H):
    jm, tm = _pair(torch, H, _mlp)
    logs = []
    for M, model in ((jitgrad, jm), (torch, tm)):
        log = []
        handles = _record_order(M, model, log)
        x = M.ones(2, 4, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(x).sum().backward()
        for h in handles:
            h.remove()
        model(x).sum().backward()  # removed: no more entries
        logs.append(log)
    assert logs[0] == logs[1]
    assert [e[0] for e in logs[0]][:6] == ["pre", "fwd"] * 3


def test_full_backward_hook_values_match_torch(torch, H):
    jm, tm = _pair(torch, H, _mlp)
    seen = {}
    for lib, M, model in (("j", jitgrad, jm), ("t", torch, tm)):
        got = seen[lib] = []
        model[1].register_full_backward_hook(
            lambda m, gi, go, got=got: got.append((gi[0].detach().numpy().copy(),
                                                   go[0].detach().numpy().copy())))
        x = M.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4), requires_grad=True)
        (model(x) ** 2).sum().backward()
    (jgi, jgo), (tgi, tgo) = seen["j"][0], seen["t"][0]
    np.testing.assert_allclose(jgi, tgi, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jgo, tgo, rtol=1e-5, atol=1e-6)


def test_backward_hook_replaces_grad_input_like_torch(torch, H):
    jm, tm = _pair(torch, H, _mlp)
    grads = []
    for M, model in ((jitgrad, jm), (torch, tm)):
        h = model[2].register_full_backward_hook(lambda m, gi, go: (gi[0] * 10.0,))
        x = M.ones(3, 4, requires_grad=True)
        model(x).sum().backward()
        grads.append((x.grad, model[0].weight.grad))
        h.remove()
    H.assert_close(grads[0][0], grads[1][0])
    H.assert_close(grads[0][1], grads[1][1], rtol=1e-4)
    x = jitgrad.ones(3, 4, requires_grad=True)
    jm.zero_grad()
    jm(x).sum().backward()  # removed: the unscaled gradient
    ratio = grads[0][0].numpy() / x.grad.numpy()
    np.testing.assert_allclose(ratio, 10.0, rtol=1e-5)


def test_backward_pre_hook_replaces_grad_output_like_torch(torch, H):
    jm, tm = _pair(torch, H, _mlp)
    out = []
    for M, model in ((jitgrad, jm), (torch, tm)):
        model[2].register_full_backward_pre_hook(lambda m, go: (go[0] * -2.0,))
        x = M.ones(2, 4, requires_grad=True)
        model(x).sum().backward()
        out.append(x.grad)
    H.assert_close(out[0], out[1])


def test_backward_hook_on_first_layer_with_data_input_warns_like_torch(torch, H):
    jm, tm = _pair(torch, H, _mlp)
    seen = []
    for M, model in ((jitgrad, jm), (torch, tm)):
        got = []
        model[0].register_full_backward_hook(lambda m, gi, go, got=got: got.append(gi))
        with pytest.warns(UserWarning, match="Full backward hook is firing"):
            model(M.ones(2, 4)).sum().backward()
        seen.append(got[0])
    assert seen[0] == (None,) and seen[1] == (None,)


def test_forward_hooks_replace_args_and_output(torch, H):
    for M in (jitgrad, torch):
        m = M.nn.Identity()
        m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
        m.register_forward_pre_hook(lambda mod, args: args[0] * 2)  # non-tuple is wrapped
        m.register_forward_hook(lambda mod, args, out: out - 3)
        assert m(M.ones(2)).tolist() == [1.0, 1.0]


def test_prepend_with_kwargs_and_always_call(torch):
    results = []
    for M in (jitgrad, torch):
        log = []

        class Net(M.nn.Module):
            def forward(self, x, scale=1.0):
                if scale < 0:
                    raise ValueError("negative scale")
                return x * scale

        m = Net()
        m.register_forward_hook(lambda mod, a, out, log=log: log.append("second"))
        m.register_forward_hook(lambda mod, a, out, log=log: log.append("first"), prepend=True)
        m.register_forward_pre_hook(lambda mod, a, kw: (a, {"scale": kw.get("scale", 1.0) * 3}),
                                    with_kwargs=True)
        m.register_forward_hook(lambda mod, a, kw, out, log=log: log.append(("kw", kw["scale"])),
                                with_kwargs=True)
        m.register_forward_hook(lambda mod, a, out, log=log: log.append("always"),
                                always_call=True)
        out = m(M.ones(1), scale=2.0)
        with pytest.raises(ValueError, match="negative scale"):
            m(M.ones(1), scale=-1.0)
        results.append((out.tolist(), log))
    assert results[0] == results[1]
    assert results[0][1][-1] == "always"


def test_handle_remove_is_idempotent_and_a_context_manager():
    m = jnn.Identity()
    calls = []
    with m.register_forward_hook(lambda *a: calls.append(1)):
        m(jitgrad.ones(1))
    m(jitgrad.ones(1))
    h = m.register_forward_pre_hook(lambda *a: calls.append(2))
    h.remove()
    h.remove()
    m(jitgrad.ones(1))
    assert calls == [1]
    assert not m._forward_hooks and not m._forward_pre_hooks


def test_full_and_regular_backward_hooks_do_not_mix(torch):
    for M in (jitgrad, torch):
        m = M.nn.Linear(2, 2)
        m.register_full_backward_hook(lambda *a: None)
        with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full"):
            m.register_backward_hook(lambda *a: None)


def test_non_full_backward_hook_sees_the_output_node(torch, H):
    jm, tm = _pair(torch, H, lambda M: (M.manual_seed(0), M.nn.Linear(3, 2))[1])
    seen = []
    for M, model in ((jitgrad, jm), (torch, tm)):
        got = []
        model.register_backward_hook(lambda m, gi, go, got=got: got.append(
            [None if g is None else g.detach().numpy().copy() for g in go]))
        with pytest.warns(FutureWarning, match="non-full backward hook when the forward"):
            out = model(M.ones(4, 3, requires_grad=True))
        out.sum().backward()
        seen.append(got[0])
    np.testing.assert_allclose(seen[0][0], seen[1][0])


def test_global_forward_hook():
    log = []
    h = jnn.register_module_forward_hook(lambda m, a, out: log.append(type(m).__name__))
    try:
        jnn.Sequential(jnn.Identity(), jnn.ReLU())(jitgrad.ones(2))
    finally:
        h.remove()
    jnn.ReLU()(jitgrad.ones(1))
    assert log == ["Identity", "ReLU", "Sequential"]


def test_seed_004_hook_story_on_a_conv_net(torch, H):
    """Seed 004: forward hooks save activations, a backward hook scales gradients, handles
    remove them — on a small CNN, against PyTorch."""
    if not H.has_conv():
        pytest.skip("conv2d not available")

    def make(M):
        M.manual_seed(0)
        return M.nn.Sequential(M.nn.Conv2d(1, 3, 3, padding=1), M.nn.ReLU(), M.nn.MaxPool2d(2),
                               M.nn.Conv2d(3, 4, 3), M.nn.ReLU(), M.nn.Flatten(),
                               M.nn.Linear(4, 2))

    jm, tm = _pair(torch, H, make)
    x_np = np.random.default_rng(0).standard_normal((2, 1, 6, 6)).astype(np.float32)
    res = []
    for M, model in ((jitgrad, jm), (torch, tm)):
        feats = []
        h1 = model[1].register_forward_hook(lambda m, a, out, feats=feats: feats.append(
            out.detach()))
        h2 = model[3].register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.5,))
        loss = model(M.tensor(x_np)).pow(2).sum()
        loss.backward()
        g_hooked = model[0].weight.grad.detach().numpy().copy()
        h1.remove()
        h2.remove()
        model.zero_grad()
        model(M.tensor(x_np)).pow(2).sum().backward()
        res.append((feats[0].numpy().copy(), g_hooked, model[0].weight.grad.numpy().copy(),
                    len(feats)))
    (jf, jg, jg2, jn), (tf, tg, tg2, tn) = res
    assert jn == tn == 1
    np.testing.assert_allclose(jf, tf, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jg, tg, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(jg2, 2 * jg, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jg2, tg2, rtol=1e-4, atol=1e-6)
