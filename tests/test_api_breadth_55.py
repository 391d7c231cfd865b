"""Fixes from the fifth probe of real-style scripts (stop 55): the inference fast paths of
``TransformerEncoder`` / ``TransformerEncoderLayer`` / ``MultiheadAttention`` (their
results), ``F.multi_head_attention_forward``, ``nn.AdaptiveLogSoftmaxWithLoss``,
``torch.func.linearize`` / ``replace_all_batch_norm_modules_`` / ``functionalize`` and
smaller names. Where PyTorch is installed, each is compared with it; jitgrad's own
behaviour is checked against NumPy formulas and central differences."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F

E = 8


def _copy(ours, theirs) -> None:
    a, b = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert list(a) == list(b)
    with jitgrad.no_grad():
        for k in a:
            a[k].copy_(jitgrad.tensor(b[k].detach().numpy()))


def _np(t):
    return t.detach().numpy()


def _nan_pattern(a) -> list:
    return np.isnan(np.asarray(a)).any(-1).tolist()


# ------------------------------------------------------------ 1. encoder fast paths
def _encoders(torch, nhead=2, norm=True, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lt = torch.nn.TransformerEncoderLayer(E, nhead, 16, dropout=0.0, **kw)
        et = torch.nn.TransformerEncoder(lt, 2, norm=torch.nn.LayerNorm(E) if norm else None)
        layer = nn.TransformerEncoderLayer(E, nhead, 16, dropout=0.0, **kw)
        enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E) if norm else None)
    rng = np.random.default_rng(3)
    with torch.no_grad():
        for p in et.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    _copy(enc, et)
    return enc, et


PADS = {
    "right": [[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]],
    "all_padded_row": [[False] * 5, [False] * 2 + [True] * 3, [True] * 5],
    "not_left_aligned": [[True] + [False] * 4, [False] * 3 + [True] * 2, [False] * 5],
    "none_padded": [[False] * 5] * 3,
}


@pytest.mark.parametrize("pad", sorted(PADS))
@pytest.mark.parametrize("mode", ["eval_no_grad", "eval_grad", "train_no_grad",
                                  "eval_no_grad_float_mask", "eval_no_grad_no_mask_check"])
def test_encoder_padded_positions_match_pytorch(pad, mode):
    torch = pytest.importorskip("torch")
    enc, et = _encoders(torch, batch_first=True)
    if mode.startswith("eval"):
        enc.eval()
        et.eval()
    if mode.endswith("no_mask_check"):
        enc.mask_check = et.mask_check = False
    x = np.random.default_rng(4).standard_normal((3, 5, E)).astype(np.float32)
    kpm = np.array(PADS[pad])
    if mode.endswith("float_mask"):
        kpm = np.where(kpm, -np.inf, 0.0).astype(np.float32)
    grad = "no_grad" not in mode
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.set_grad_enabled(grad):
            yt = et(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm)).detach().numpy()
    with jitgrad.set_grad_enabled(grad):
        y = _np(enc(jitgrad.tensor(x), src_key_padding_mask=jitgrad.tensor(kpm)))
    assert _nan_pattern(y) == _nan_pattern(yt)
    np.testing.assert_allclose(np.nan_to_num(y), np.nan_to_num(yt), rtol=2e-5, atol=2e-5)
    if mode == "eval_no_grad" and pad == "right":  # zeros, then the norm: its bias
        np.testing.assert_allclose(y[1, 3:], np.broadcast_to(_np(enc.norm.bias), (2, E)),
                                   rtol=1e-6)


def test_encoder_fast_path_zeros_before_norm():
    torch = pytest.importorskip("torch")
    enc, et = _encoders(torch, batch_first=True)
    enc.eval()
    et.eval()
    kpm = [[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]]
    x = np.random.default_rng(5).standard_normal((3, 5, E)).astype(np.float32)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yt = et(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm)).numpy()
    with jitgrad.no_grad():
        y = _np(enc(jitgrad.tensor(x), src_key_padding_mask=jitgrad.tensor(kpm)))
    # padded rows: the final LayerNorm of a zero row, i.e. its bias
    np.testing.assert_allclose(y[1, 3], _np(enc.norm.bias), rtol=1e-6)
    np.testing.assert_allclose(y, yt, rtol=2e-5, atol=2e-5)
    # and the fast path off: the general path's values everywhere
    from jitgrad.backends import mha

    mha.set_fastpath_enabled(False)
    try:
        assert not mha.get_fastpath_enabled()
        with jitgrad.no_grad():
            y2 = _np(enc(jitgrad.tensor(x), src_key_padding_mask=jitgrad.tensor(kpm)))
    finally:
        mha.set_fastpath_enabled(True)
    np.testing.assert_allclose(y2[:, :3], y[:, :3], rtol=1e-5, atol=1e-6)
    assert not np.allclose(y2[1, 3], y[1, 3])


@pytest.mark.parametrize("kw", [{}, {"norm_first": True}, {"activation": "gelu"},
                                {"nhead": 1}, {"activation": lambda t: t.tanh()}])
def test_encoder_use_nested_tensor_and_warning(kw):
    torch = pytest.importorskip("torch")
    kw = dict(kw)
    nhead = kw.pop("nhead", 2)
    for batch_first in (False, True):
        with warnings.catch_warnings(record=True) as wt:
            warnings.simplefilter("always")
            tk = kw if not callable(kw.get("activation")) else {"activation": torch.tanh}
            et = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
                E, nhead, 16, batch_first=batch_first, **tk), 1)
        with warnings.catch_warnings(record=True) as wj:
            warnings.simplefilter("always")
            enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(
                E, nhead, 16, batch_first=batch_first, **kw), 1)
        assert enc.use_nested_tensor == et.use_nested_tensor
        assert enc.layers[0].activation_relu_or_gelu == et.layers[0].activation_relu_or_gelu
        msgs_t = [str(w.message) for w in wt if "nested" in str(w.message)]
        msgs_j = [str(w.message) for w in wj if "nested" in str(w.message)]
        assert msgs_j == msgs_t


@pytest.mark.parametrize("case", ["kpm", "attn_mask", "both", "float_attn_mask"])
@pytest.mark.parametrize("mode", ["eval_no_grad", "eval_grad", "train", "hooked"])
def test_encoder_layer_fast_path_semantics(case, mode):
    """In inference PyTorch's fused layer gives NaN for a fully masked query row (the
    general path: zeros, through scaled_dot_product_attention)."""
    torch = pytest.importorskip("torch")
    enc, et = _encoders(torch, batch_first=True)
    layer, lt = enc.layers[0], et.layers[0]
    if mode != "train":
        layer.eval()
        lt.eval()
    if mode == "hooked":
        layer.linear1.register_forward_hook(lambda *a: None)
        lt.linear1.register_forward_hook(lambda *a: None)
    x = np.random.default_rng(6).standard_normal((3, 5, E)).astype(np.float32)
    kpm = np.array(PADS["all_padded_row"])
    am = np.zeros((5, 5), bool)
    am[2] = True
    args = {}
    if case in ("kpm", "both"):
        args["src_key_padding_mask"] = kpm
    if case in ("attn_mask", "both"):
        args["src_mask"] = am
    if case == "float_attn_mask":
        args["src_mask"] = np.where(am, -np.inf, 0).astype(np.float32)
    grad = mode != "eval_no_grad"
    outs = []
    for M, mod in ((jitgrad, layer), (torch, lt)):
        with M.set_grad_enabled(grad):
            outs.append(mod(M.tensor(x), **{k: M.tensor(v) for k, v in args.items()})
                        .detach().numpy())
    assert _nan_pattern(outs[0]) == _nan_pattern(outs[1])
    np.testing.assert_allclose(np.nan_to_num(outs[0]), np.nan_to_num(outs[1]), rtol=2e-5,
                               atol=2e-5)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("grad", [False, True])
def test_mha_fully_masked_rows_match_pytorch(batch_first, need_weights, grad):
    torch = pytest.importorskip("torch")
    mt = torch.nn.MultiheadAttention(E, 2, batch_first=batch_first).eval()
    m = nn.MultiheadAttention(E, 2, batch_first=batch_first).eval()
    _copy(m, mt)
    x = np.random.default_rng(7).standard_normal((2, 3, E)).astype(np.float32)
    if not batch_first:
        x = x.transpose(1, 0, 2).copy()
    kpm = np.array([[True] * 3, [False] * 3])
    am = np.zeros((3, 3), bool)
    am[1] = True
    for masks in ({"key_padding_mask": kpm}, {"attn_mask": am}):
        res = []
        for M, mod in ((jitgrad, m), (torch, mt)):
            with M.set_grad_enabled(grad):
                xt = M.tensor(x)
                o, w = mod(xt, xt, xt, need_weights=need_weights,
                           **{k: M.tensor(v) for k, v in masks.items()})
            res.append((o.detach().numpy(), None if w is None else w.detach().numpy()))
        assert _nan_pattern(res[0][0]) == _nan_pattern(res[1][0])
        np.testing.assert_allclose(np.nan_to_num(res[0][0]), np.nan_to_num(res[1][0]),
                                   rtol=2e-5, atol=2e-6)
        assert (res[0][1] is None) == (res[1][1] is None)


def test_transformer_eval_without_memory_mask_matches_pytorch():
    """The probe's nn.Transformer in eval: the encoder's padded rows reach the decoder."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(21)
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
              dim_feedforward=16, dropout=0.0, batch_first=True)
    tt, tj = torch.nn.Transformer(**kw), nn.Transformer(**kw)
    with torch.no_grad():
        for p in tt.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * .2))
    _copy(tj, tt)
    src = rng.standard_normal((2, 5, 8)).astype(np.float32)
    tgt = rng.standard_normal((2, 4, 8)).astype(np.float32)
    spm = np.array([[False] * 5, [False] * 3 + [True] * 2])
    outs = []
    for M, mod in ((jitgrad, tj), (torch, tt)):
        mod.eval()
        with M.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mask = mod.generate_square_subsequent_mask(4)
            outs.append(mod(M.tensor(src), M.tensor(tgt), tgt_mask=mask,
                            src_key_padding_mask=M.tensor(spm)).numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=2e-5, atol=2e-5)


def test_compiled_eval_encoder_takes_no_value_read():
    """With mask_check (the default) PyTorch skips the nested conversion under
    torch.compile; a compiled jitgrad encoder does the same, and matches its eager call
    with mask_check off on a left-aligned mask."""
    layer = nn.TransformerEncoderLayer(E, 2, 16, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 1).eval()
    x = jitgrad.randn(2, 5, E)
    kpm = jitgrad.tensor([[False] * 5, [False] * 3 + [True] * 2])
    f = jitgrad.compile(lambda a, m: enc(a, src_key_padding_mask=m))
    with jitgrad.no_grad():
        eager_general = _np(enc(x, src_key_padding_mask=kpm))
        jitgrad.backends.mha.set_fastpath_enabled(False)
        try:
            off = _np(enc(x, src_key_padding_mask=kpm))
        finally:
            jitgrad.backends.mha.set_fastpath_enabled(True)
        compiled = _np(f(x, kpm))
    np.testing.assert_allclose(compiled, off, rtol=1e-5, atol=1e-6)
    assert not np.abs(eager_general[1, 3:]).any()


# ------------------------------------------- 2. F.multi_head_attention_forward
def _mha_args(M, rng, separate=False, bias_kv=False, zero_attn=False, static=False):
    L, S, N, H = 4, 6, 3, 2
    d = E // H

    def t(*shape):
        return M.tensor(rng.standard_normal(shape), requires_grad=True)
    q, k, v = t(L, N, E), t(S, N, E), t(S, N, E)
    a = dict(embed_dim_to_check=E, num_heads=H, in_proj_weight=None if separate else t(3 * E, E),
             in_proj_bias=t(3 * E), bias_k=t(1, 1, E) if bias_kv else None,
             bias_v=t(1, 1, E) if bias_kv else None, add_zero_attn=zero_attn, dropout_p=0.0,
             out_proj_weight=t(E, E), out_proj_bias=t(E))
    if separate:
        a.update(use_separate_proj_weight=True, q_proj_weight=t(E, E), k_proj_weight=t(E, E),
                 v_proj_weight=t(E, E))
    if static:
        a.update(static_k=t(N * H, S, d), static_v=t(N * H, S, d))
    return (q, k, v), a


CASES = {
    "plain": ({}, {}),
    "separate": ({"separate": True}, {}),
    "bias_kv_zero_attn": ({"bias_kv": True, "zero_attn": True}, {"kpm": True, "mask": True}),
    "static_kv": ({"static": True}, {"kpm": True}),
    "masks_no_weights": ({}, {"kpm": True, "mask": True, "need_weights": False}),
    "float_mask_per_head": ({}, {"fmask3": True, "average_attn_weights": False}),
    "causal_no_weights": ({}, {"causal": True, "need_weights": False}),
    "unbatched": ({}, {"unbatched": True}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_multi_head_attention_forward_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    build, opts = CASES[name]
    results = []
    for M in (jitgrad, torch):
        rng = np.random.default_rng(11)
        (q, k, v), a = _mha_args(M, rng, **build)
        if opts.get("unbatched"):
            q, k, v = (M.tensor(t.detach().numpy()[:, 0], requires_grad=True)
                       for t in (q, k, v))
        if opts.get("kpm"):
            a["key_padding_mask"] = M.tensor(np.array([[False] * 5 + [True], [False] * 6,
                                                       [True] + [False] * 5]))
        if opts.get("mask"):
            a["attn_mask"] = M.tensor(np.triu(np.ones((4, 6), bool), 3))
        if opts.get("fmask3"):
            a["attn_mask"] = M.tensor(np.linspace(-1, 1, 6 * 4 * 6).reshape(6, 4, 6))
        if opts.get("causal"):
            q = k = v = M.tensor(rng.standard_normal((4, 3, E)), requires_grad=True)
            a["attn_mask"] = M.tensor(np.triu(np.ones((4, 4), bool), 1))
            a["is_causal"] = True
        for key in ("need_weights", "average_attn_weights"):
            if key in opts:
                a[key] = opts[key]
        out, w = M.nn.functional.multi_head_attention_forward(q, k, v, **a)
        loss = out.sum() + (0 if w is None else (w * w).sum())
        leaves = [q, k, v] + [t for t in a.values() if isinstance(t, M.Tensor)
                              and t.requires_grad]
        grads = M.autograd.grad(loss, leaves, allow_unused=True)
        results.append((out, w, grads))
    (o, w, g), (ot, wt, gt) = results
    np.testing.assert_allclose(_np(o), _np(ot), rtol=1e-10, atol=1e-12)
    assert (w is None) == (wt is None)
    if w is not None:
        np.testing.assert_allclose(_np(w), _np(wt), rtol=1e-10, atol=1e-12)
    for u, t in zip(g, gt):
        assert (u is None) == (t is None)
        if u is not None:
            np.testing.assert_allclose(_np(u), _np(t), rtol=1e-9, atol=1e-11)


def test_multi_head_attention_forward_errors_like_pytorch():
    torch = pytest.importorskip("torch")
    from helpers import assert_same_error

    def call(M, **over):
        (q, k, v), a = _mha_args(M, np.random.default_rng(0))
        a.update(over.pop("args", {}))
        q = over.pop("q", q)
        return lambda: M.nn.functional.multi_head_attention_forward(q, k, v, **a)

    assert_same_error(call(jitgrad, args={"embed_dim_to_check": 4}),
                      call(torch, args={"embed_dim_to_check": 4}))
    assert_same_error(call(jitgrad, args={"attn_mask": jitgrad.zeros(3, 3)}),
                      call(torch, args={"attn_mask": torch.zeros(3, 3)}))
    assert_same_error(call(jitgrad, args={"is_causal": True}),
                      call(torch, args={"is_causal": True}))
    assert_same_error(call(jitgrad, q=jitgrad.zeros(2, 2, 2, E)),
                      call(torch, q=torch.zeros(2, 2, 2, E)))
    assert_same_error(call(jitgrad, args={"key_padding_mask": jitgrad.zeros(3, 5, dtype=bool)}),
                      call(torch, args={"key_padding_mask": torch.zeros(3, 5, dtype=bool)}))


def test_multi_head_attention_forward_module_path_and_gradcheck():
    """The module runs through the public function; its gradient by central
    differences."""
    m = nn.MultiheadAttention(4, 2, dtype=jitgrad.float64)
    x = jitgrad.randn(3, 2, 4, dtype=jitgrad.float64)
    out, w = m(x, x, x)
    out2, w2 = F.multi_head_attention_forward(
        x, x, x, 4, 2, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0,
        m.out_proj.weight, m.out_proj.bias, training=False)
    np.testing.assert_array_equal(_np(out), _np(out2))
    np.testing.assert_array_equal(_np(w), _np(w2))
    kpm = jitgrad.tensor([[False, False, True], [False, True, False]])
    base = x.detach().numpy()

    def f(arr):
        t = jitgrad.tensor(arr, requires_grad=True)
        o, _ = F.multi_head_attention_forward(
            t, t, t, 4, 2, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0,
            m.out_proj.weight, m.out_proj.bias, key_padding_mask=kpm, need_weights=False)
        return (o * o).sum(), t
    loss, t = f(base)
    loss.backward()
    num = np.zeros_like(base)
    eps = 1e-6
    for i in np.ndindex(base.shape):
        d = np.zeros_like(base)
        d[i] = eps
        num[i] = (f(base + d)[0].item() - f(base - d)[0].item()) / (2 * eps)
    np.testing.assert_allclose(t.grad.numpy(), num, rtol=1e-6, atol=1e-8)


# ------------------------------------------------- 3. AdaptiveLogSoftmaxWithLoss
@pytest.mark.parametrize("kw", [{"cutoffs": [3, 7]}, {"cutoffs": [5], "head_bias": True},
                                {"cutoffs": [2, 4, 8], "div_value": 2.0}])
def test_adaptive_log_softmax_matches_pytorch(kw):
    torch = pytest.importorskip("torch")
    mt = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 11, dtype=torch.float64, **kw)
    m = nn.AdaptiveLogSoftmaxWithLoss(16, 11, dtype=jitgrad.float64, **kw)
    _copy(m, mt)
    assert repr(m) == repr(mt)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in mt.named_parameters()]
    rng = np.random.default_rng(8)
    x = rng.standard_normal((9, 16))
    target = np.array([0, 10, 3, 5, 7, 8, 1, 2, 9])
    res = []
    for M, mod in ((jitgrad, m), (torch, mt)):
        xt = M.tensor(x, requires_grad=True)
        out = mod(xt, M.tensor(target))
        assert type(out).__name__ == "_ASMoutput" and out._fields == ("output", "loss")
        (out.loss * 2 + out.output[1]).backward()
        res.append((out.output, out.loss, xt.grad, [p.grad for p in mod.parameters()],
                    mod.log_prob(xt), mod.predict(xt)))
    for u, t in zip(res[0][:3], res[1][:3]):
        np.testing.assert_allclose(_np(u), _np(t), rtol=1e-11, atol=1e-13)
    for u, t in zip(res[0][3], res[1][3]):
        np.testing.assert_allclose(_np(u), _np(t), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(_np(res[0][4]), _np(res[1][4]), rtol=1e-11, atol=1e-13)
    np.testing.assert_array_equal(_np(res[0][5]), _np(res[1][5]))
    # log_prob: rows are distributions; output = log_prob at the target
    lp = _np(res[0][4])
    np.testing.assert_allclose(np.exp(lp).sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(_np(res[0][0]), lp[np.arange(9), target], rtol=1e-12)
    np.testing.assert_array_equal(_np(res[0][5]), lp.argmax(1))


def test_adaptive_log_softmax_unbatched_predict_paths_and_errors():
    torch = pytest.importorskip("torch")
    from helpers import assert_same_error

    mt = torch.nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2], head_bias=True)
    m = nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2], head_bias=True)
    _copy(m, mt)
    x = np.random.default_rng(9).standard_normal((5, 4)).astype(np.float32)
    o, ot = m(jitgrad.tensor(x[0]), jitgrad.tensor(4)), mt(torch.tensor(x[0]), torch.tensor(4))
    assert o.output.shape == ot.output.shape == ()
    np.testing.assert_allclose(_np(o.output), _np(ot.output), rtol=1e-6)
    for bias in (10.0, -10.0, None):  # all in the shortlist / none / mixed
        with torch.no_grad(), jitgrad.no_grad():
            if bias is not None:
                mt.head.bias.copy_(torch.tensor([bias, bias, 0.0]))
                m.head.bias.copy_(jitgrad.tensor([bias, bias, 0.0]))
        np.testing.assert_array_equal(_np(m.predict(jitgrad.tensor(x))),
                                      _np(mt.predict(torch.tensor(x))))
    for cut in ([], [3, 2], [0], [6], [2, 2]):
        assert_same_error(lambda c=cut: nn.AdaptiveLogSoftmaxWithLoss(4, 6, c),
                          lambda c=cut: torch.nn.AdaptiveLogSoftmaxWithLoss(4, 6, c))
    for xs, ts in (((5, 4), [0, 1, 2, 3, 6]), ((5, 4), [0, 1]), ((5, 4), [[0]]),
                   ((4,), [0, 1, 2, 3]), ((5, 4), 1)):
        xa = np.zeros(xs, np.float32)
        assert_same_error(lambda xa=xa, ts=ts: m(jitgrad.tensor(xa), jitgrad.tensor(ts)),
                          lambda xa=xa, ts=ts: mt(torch.tensor(xa), torch.tensor(ts)))
    from jitgrad.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss

    assert AdaptiveLogSoftmaxWithLoss is nn.AdaptiveLogSoftmaxWithLoss


# ------------------------------------------------------------------ 4. torch.func
def _f_lin(x, y):
    return {"a": x.sin() * y, "b": (x * x).sum()}, y.exp()


def test_linearize_matches_central_differences_and_pytorch():
    from jitgrad.func import linearize

    rng = np.random.default_rng(12)
    xs, ys = rng.standard_normal(4), rng.standard_normal(4)
    out, jvp_fn = linearize(_f_lin, jitgrad.tensor(xs), jitgrad.tensor(ys))
    for _ in range(2):  # several tangents through the one recorded graph
        tx, ty = rng.standard_normal(4), rng.standard_normal(4)
        jt = jvp_fn(jitgrad.tensor(tx), jitgrad.tensor(ty))
        eps = 1e-6
        hi = _f_lin(jitgrad.tensor(xs + eps * tx), jitgrad.tensor(ys + eps * ty))
        lo = _f_lin(jitgrad.tensor(xs - eps * tx), jitgrad.tensor(ys - eps * ty))
        for got, h, lw in ((jt[0]["a"], hi[0]["a"], lo[0]["a"]),
                           (jt[0]["b"], hi[0]["b"], lo[0]["b"]), (jt[1], hi[1], lo[1])):
            np.testing.assert_allclose(_np(got), (_np(h) - _np(lw)) / (2 * eps), rtol=1e-6,
                                       atol=1e-8)
    np.testing.assert_allclose(_np(out[1]), np.exp(ys))
    torch = pytest.importorskip("torch")
    out_t, jvp_t = torch.func.linearize(_f_lin, torch.tensor(xs), torch.tensor(ys))
    tx, ty = rng.standard_normal(4), rng.standard_normal(4)
    got, want = jvp_fn(jitgrad.tensor(tx), jitgrad.tensor(ty)), jvp_t(torch.tensor(tx),
                                                                        torch.tensor(ty))
    np.testing.assert_allclose(_np(got[0]["a"]), _np(want[0]["a"]), rtol=1e-12)
    np.testing.assert_allclose(_np(got[0]["b"]), _np(want[0]["b"]), rtol=1e-12)
    np.testing.assert_allclose(_np(got[1]), _np(want[1]), rtol=1e-12)


def test_linearize_errors_like_pytorch():
    torch = pytest.importorskip("torch")
    from helpers import assert_same_error

    fj = jitgrad.func.linearize(lambda x: x * 2, jitgrad.zeros(3))[1]
    ft = torch.func.linearize(lambda x: x * 2, torch.zeros(3))[1]
    assert_same_error(lambda: fj(jitgrad.zeros(2)), lambda: ft(torch.zeros(2)))
    with pytest.raises(RuntimeError) as ej:
        fj(jitgrad.zeros(3, dtype=jitgrad.float64))
    with pytest.raises(RuntimeError) as et:
        ft(torch.zeros(3, dtype=torch.float64))
    assert str(ej.value).replace("jitgrad.", "torch.") == str(et.value)
    with pytest.raises(RuntimeError, match="to have the same argspec as the primals"):
        fj(jitgrad.zeros(3), jitgrad.zeros(3))
    with pytest.raises(RuntimeError, match="to have the same argspec as the primals"):
        ft(torch.zeros(3), torch.zeros(3))
    # an output independent of the primals: a zero tangent
    fj2 = jitgrad.func.linearize(lambda x: (x * 2, jitgrad.ones(2)), jitgrad.zeros(3))[1]
    ft2 = torch.func.linearize(lambda x: (x * 2, torch.ones(2)), torch.zeros(3))[1]
    np.testing.assert_array_equal(_np(fj2(jitgrad.ones(3))[1]), _np(ft2(torch.ones(3))[1]))


@pytest.mark.parametrize("remove", ["mutations", "mutations_and_views"])
def test_functionalize_results_mutations_and_aliasing(remove):
    from jitgrad.func import functionalize, grad

    def f(a, b):
        v = a.view(-1)
        v.add_(1)
        return v * b.sum(), a

    res = []
    for M in (jitgrad, pytest.importorskip("torch")):
        x, y = M.zeros(2, 2), M.ones(3)
        o1, o2 = M.func.functionalize(f, remove=remove)(x, y)
        res.append((_np(o1).copy(), _np(o2).copy(), _np(x).copy(), _np(y).copy()))
        o2.add_(5)  # no output aliases an argument
        np.testing.assert_array_equal(_np(x), np.ones((2, 2)))
    for u, t in zip(*res):
        np.testing.assert_array_equal(u, t)
    g = grad(functionalize(lambda t: (t * t).sum(), remove=remove))(jitgrad.tensor([1.0, 3.0]))
    np.testing.assert_array_equal(_np(g), [2.0, 6.0])
    assert functionalize(f).__name__ == "f"


def test_functionalize_bad_remove_like_pytorch():
    torch = pytest.importorskip("torch")
    from helpers import assert_same_error

    assert_same_error(lambda: jitgrad.func.functionalize(len, remove="views"),
                      lambda: torch.func.functionalize(len, remove="views"))


def test_replace_all_batch_norm_modules_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(13).standard_normal((4, 3, 5)).astype(np.float32)
    outs = []
    for M in (jitgrad, torch):
        net = M.nn.Sequential(M.nn.Conv1d(3, 3, 1), M.nn.BatchNorm1d(3),
                              M.nn.Sequential(M.nn.BatchNorm1d(3, track_running_stats=False)))
        assert M.func.replace_all_batch_norm_modules_(net) is net
        bn = net[1]
        assert bn.running_mean is None and bn.running_var is None
        assert bn.num_batches_tracked is None and not bn.track_running_stats
        outs.append((sorted(net.state_dict()), repr(net)))
        net.eval()  # batch statistics even in eval: the result has zero mean per channel
        y = _np(net[1:](M.tensor(x)))
        np.testing.assert_allclose(y.mean((0, 2)), 0, atol=1e-5)
        outs.append(y)
    assert outs[0] == outs[2]
    np.testing.assert_allclose(outs[1], outs[3], rtol=1e-5, atol=1e-6)
    # per-sample gradients through vmap, as the functorch tutorial
    from jitgrad.func import functional_call, grad, vmap

    net = jitgrad.func.replace_all_batch_norm_modules_(
        nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)))
    params = {k: v.detach() for k, v in net.named_parameters()}

    def loss(p, xi):
        return functional_call(net, p, (xi.unsqueeze(0).expand(2, 3) * jitgrad.tensor(
            [[1.0], [2.0]]),)).sum()
    g = vmap(grad(loss), in_dims=(None, 0))(params, jitgrad.randn(5, 3))
    assert g["0.weight"].shape == (5, 4, 3)


# ------------------------------------------------------------- 5. smaller names
WINDOWS = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "hamming", "hann",
           "kaiser", "nuttall"]


def _numpy_window(name: str, M: int, sym: bool) -> np.ndarray:
    """The textbook formulas (scipy.signal.windows'), in float64."""
    if M <= 1:  # (a window of one sample is 1, symmetric or not)
        return np.ones(M)
    N = M if sym else M + 1  # a periodic window: the first M of an M + 1 symmetric one
    n = np.arange(N, dtype=np.float64)
    if N == 1:
        w = np.ones(1)
    elif name in ("hann", "hamming", "blackman", "nuttall"):
        a = {"hann": [0.5, 0.5], "hamming": [0.54, 0.46], "blackman": [0.42, 0.5, 0.08],
             "nuttall": [0.3635819, 0.4891775, 0.1365995, 0.0106411]}[name]
        w = sum((-1) ** i * c * np.cos(2 * np.pi * i * n / (N - 1)) for i, c in enumerate(a))
    elif name == "bartlett":
        w = 1 - np.abs(2 * n / (N - 1) - 1)
    elif name == "cosine":
        w = np.sin(np.pi * (n + 0.5) / N)
    elif name == "gaussian":
        w = np.exp(-((n - (N - 1) / 2) ** 2) / 2)
    elif name == "exponential":
        w = np.exp(-np.abs(n - (N - 1) / 2))
    else:  # kaiser, beta 12
        w = np.i0(12 * np.sqrt(1 - (2 * n / (N - 1) - 1) ** 2)) / np.i0(12.0)
    return w[:M]


@pytest.mark.parametrize("name", WINDOWS)
def test_signal_windows_formulas_and_pytorch(name):
    fn = getattr(jitgrad.signal.windows, name)
    for M in (0, 1, 2, 5, 16, 33):
        for sym in (True, False):
            if name == "kaiser" and not sym:
                continue  # PyTorch's periodic Kaiser window is its own definition
            w = fn(M, sym=sym, dtype=jitgrad.float64)
            assert w.dtype == jitgrad.float64 and tuple(w.shape) == (M,)
            np.testing.assert_allclose(_np(w), _numpy_window(name, M, sym), rtol=1e-12,
                                       atol=1e-12)
    assert fn(4).dtype == jitgrad.float32
    torch = pytest.importorskip("torch")
    tfn = getattr(torch.signal.windows, name)
    for M in (0, 1, 2, 7, 64, 129):
        for sym in (True, False):
            for dt, tol in (("float32", 3e-6), ("float64", 1e-14)):
                a = _np(fn(M, sym=sym, dtype=getattr(jitgrad, dt)))
                b = tfn(M, sym=sym, dtype=getattr(torch, dt)).numpy()
                assert a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_allclose(a, b, rtol=0, atol=tol)


def test_signal_windows_options_errors_and_grad():
    torch = pytest.importorskip("torch")
    from helpers import assert_same_error

    W, T = jitgrad.signal.windows, torch.signal.windows
    for call in (lambda m: m.signal.windows.general_cosine(9, a=[0.5, 0.3, 0.2],
                                                           dtype=m.float64),
                 lambda m: m.signal.windows.general_hamming(9, alpha=0.6, sym=False,
                                                            dtype=m.float64),
                 lambda m: m.signal.windows.gaussian(9, std=2.5, dtype=m.float64),
                 lambda m: m.signal.windows.exponential(9, tau=3.0, center=2.0, sym=False,
                                                        dtype=m.float64),
                 lambda m: m.signal.windows.kaiser(9, beta=5.0, sym=False, dtype=m.float64)):
        np.testing.assert_allclose(_np(call(jitgrad)), call(torch).numpy(), rtol=1e-13,
                                   atol=1e-14)
    for args in ((W.hann, T.hann, (-1,), {}), (W.gaussian, T.gaussian, (4,), {"std": 0.0}),
                 (W.exponential, T.exponential, (4,), {"tau": -1.0}),
                 (W.exponential, T.exponential, (4,), {"center": 1.0}),
                 (W.kaiser, T.kaiser, (4,), {"beta": -1.0}),
                 (W.general_cosine, T.general_cosine, (4,), {"a": []}),
                 (W.general_cosine, T.general_cosine, (4,), {"a": 3})):
        assert_same_error(lambda a=args: a[0](*a[2], **a[3]),
                          lambda a=args: a[1](*a[2], **a[3]))
    with pytest.raises(ValueError) as ej:
        W.hann(4, dtype=jitgrad.int64)
    with pytest.raises(ValueError) as et:
        T.hann(4, dtype=torch.int64)
    assert str(ej.value).replace("jitgrad.", "torch.") == str(et.value)
    w = W.hann(6, requires_grad=True, dtype=jitgrad.float64)
    wt = T.hann(6, requires_grad=True, dtype=torch.float64)
    assert w.requires_grad and wt.requires_grad
    np.testing.assert_allclose(_np(w), wt.detach().numpy(), rtol=1e-14, atol=1e-15)


def test_empty_permuted_strides_and_errors_like_pytorch():
    torch = pytest.importorskip("torch")
    from helpers import assert_same_error

    for size, perm in (((2, 3), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4, 5), (0, 2, 3, 1)),
                       ((), ()), ((4,), (0,))):
        a, b = jitgrad.empty_permuted(size, perm), torch.empty_permuted(size, perm)
        assert tuple(a.shape) == tuple(b.shape) and a.stride() == b.stride()
        assert a.is_contiguous() == b.is_contiguous()
    a = jitgrad.empty_permuted((2, 3), (1, 0), dtype=jitgrad.float64, requires_grad=True)
    assert a.dtype == jitgrad.float64 and a.requires_grad and a.is_leaf
    (a * 2).sum().backward()
    np.testing.assert_array_equal(_np(a.grad), np.full((2, 3), 2.0))
    for size, perm in (((2, 3), (0, 0)), ((2, 3), (0, 1, 2)), ((2, 3), (0, 2)),
                       ((2, 3), (-1, 0))):
        assert_same_error(lambda s=size, p=perm: jitgrad.empty_permuted(s, p),
                          lambda s=size, p=perm: torch.empty_permuted(s, p))


def test_cond_eager_grad_errors_and_compiled():
    x = jitgrad.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = jitgrad.cond(x.sum() > 0, lambda a: a * 2, lambda a: a - 1, (x,))
    y.sum().backward()
    np.testing.assert_array_equal(_np(y), [2.0, -4.0, 6.0])
    np.testing.assert_array_equal(_np(x.grad), [2.0, 2.0, 2.0])
    assert jitgrad.cond(False, lambda: 1, lambda: 2) == 2
    out = jitgrad.cond(jitgrad.tensor([0.0]), lambda d: d["a"] + 1, lambda d: d["a"] - 1,
                       [{"a": jitgrad.ones(2)}])
    np.testing.assert_array_equal(_np(out), [0.0, 0.0])

    @jitgrad.compile
    def f(t):
        u = t * 2
        return jitgrad.cond(u.sum() > 0, lambda a: a + 1, lambda a: a - 1, (u,)) * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the graph break's notice)
        for v in ([1.0, 2.0], [-1.0, -2.0], [3.0, 1.0], [-5.0, 1.0]):
            a = np.array(v)
            want = (2 * a + 1 if (2 * a).sum() > 0 else 2 * a - 1) * 3
            np.testing.assert_array_equal(_np(f(jitgrad.tensor(v))), want)
    torch = pytest.importorskip("torch")
    from helpers import assert_same_error

    for M in (jitgrad, torch):
        assert M.cond(M.tensor(True), lambda a: a + 1, lambda a: a * 1, (M.ones(1),)).item() == 2
    for pred, t, f_, ops in (("a", True, True, ()), ("T12", True, True, ()),
                             ("T1", False, True, ()), ("T1", True, True, 3),
                             ("T1", True, True, (3,))):
        def call(M, pred=pred, t=t, f_=f_, ops=ops):
            p = {"a": "a", "T12": M.tensor([1, 2]), "T1": M.tensor(True)}[pred]
            return lambda: M.cond(p, (lambda *a: 1) if t else 1, lambda *a: 2, ops)
        assert_same_error(call(jitgrad), call(torch))
