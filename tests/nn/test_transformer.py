"""MultiheadAttention, TransformerEncoderLayer and TransformerEncoder: PyTorch's parameter
names, reprs, outputs, attention weights and gradients for every mask kind (torch as the
oracle, same weights), initialisation, errors, compiled == eager and CUDA == CPU."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_compiled_step_matches_eager

import jitgrad
import jitgrad.nn as nn

E, H = 8, 2


def _copy(ours, theirs) -> None:
    a, b = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert list(a) == list(b)
    with jitgrad.no_grad():
        for k in a:
            a[k].copy_(jitgrad.tensor(b[k].detach().numpy(), device=a[k].device))


MHA_CASES = {
    "default": ({}, {}),
    "batch_first": ({"batch_first": True}, {}),
    "no_weights": ({}, {"need_weights": False}),
    "per_head_weights": ({}, {"average_attn_weights": False}),
    "key_padding_mask": ({}, {"kpm": True}),
    "bool_mask": ({}, {"mask": "bool"}),
    "float_mask": ({}, {"mask": "float"}),
    "causal": ({}, {"causal": True}),
    "no_bias": ({"bias": False}, {}),
}


def _call(M, module, name, q, k):
    kw, args = MHA_CASES[name]
    a = {}
    if args.get("need_weights") is False:
        a["need_weights"] = False
    if "average_attn_weights" in args:
        a["average_attn_weights"] = False
    if args.get("kpm"):
        a["key_padding_mask"] = M.tensor([[False, False, True, False], [False] * 4,
                                          [True, False, False, False]])
    if args.get("mask") == "bool":
        a["attn_mask"] = M.tensor(np.triu(np.ones((5, 4), bool), 1))
    if args.get("mask") == "float":
        a["attn_mask"] = M.tensor(np.linspace(-1, 1, 20).reshape(5, 4))
    if args.get("causal"):
        a["attn_mask"] = M.tensor(np.triu(np.ones((5, 5), bool), 1))
        a["is_causal"] = True
    x, y = M.tensor(q, requires_grad=True), M.tensor(k, requires_grad=True)
    out, w = module(x, y, y, **a)
    (out.sum() + (w.sum() * 3.0 if w is not None else 0.0)).backward()
    return out, w, x.grad, y.grad


@pytest.mark.parametrize("name", sorted(MHA_CASES))
def test_multihead_attention_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    kw, args = MHA_CASES[name]
    rng = np.random.default_rng(0)
    mt = torch.nn.MultiheadAttention(E, H, dtype=torch.float64, **kw)
    m = nn.MultiheadAttention(E, H, dtype=jitgrad.float64, **kw)
    _copy(m, mt)
    assert repr(m) == repr(mt)
    bf = kw.get("batch_first")
    q = rng.standard_normal((3, 5, E) if bf else (5, 3, E))
    k = q if args.get("causal") else rng.standard_normal((3, 4, E) if bf else (4, 3, E))
    ours, theirs = _call(jitgrad, m, name, q, k), _call(torch, mt, name, q, k)
    for u, v in zip(ours, theirs):
        assert (u is None) == (v is None)
        if u is not None:
            assert tuple(u.shape) == tuple(v.shape)
            np.testing.assert_allclose(u.detach().numpy(), v.detach().numpy(), rtol=1e-11,
                                       atol=1e-12)
    for (k_, p), (_, pt) in zip(m.named_parameters(), mt.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), pt.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=k_)


@pytest.mark.parametrize("kw", [{}, {"norm_first": True, "activation": "gelu",
                                     "batch_first": True}])
def test_transformer_encoder_matches_pytorch(kw):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's nested-tensor notice
        lt = torch.nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, dtype=torch.float64, **kw)
        et = torch.nn.TransformerEncoder(lt, 2, norm=torch.nn.LayerNorm(E, dtype=torch.float64))
    layer = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, dtype=jitgrad.float64, **kw)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E, dtype=jitgrad.float64))
    _copy(enc, et)
    assert repr(enc) == repr(et)
    x = rng.standard_normal((5, 3, E))
    kpm = np.zeros((3, 5) if not kw.get("batch_first") else (5, 3), bool)
    kpm[0, -1] = True
    xj, xt = jitgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y = enc(xj, src_key_padding_mask=jitgrad.tensor(kpm))
    yt = et(xt, src_key_padding_mask=torch.tensor(kpm))
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-11)
    (y * 1.5).sum().backward()
    (yt * 1.5).sum().backward()
    np.testing.assert_allclose(xj.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_initialisation_and_errors():
    jitgrad.manual_seed(0)
    m = nn.MultiheadAttention(16, 4)
    assert m.in_proj_weight.shape == (48, 16) and m.in_proj_bias.abs().sum().item() == 0.0
    bound = (6.0 / (48 + 16)) ** 0.5  # xavier_uniform_
    assert m.in_proj_weight.abs().max().item() <= bound
    assert m.out_proj.bias.abs().sum().item() == 0.0
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    with pytest.raises(AssertionError,
                       match=r"Expected key_padded_mask.shape\[0\] to be 2, but got 3"):
        m(jitgrad.ones(3, 2, 16), jitgrad.ones(3, 2, 16), jitgrad.ones(3, 2, 16),
          key_padding_mask=jitgrad.zeros(3, 3, dtype=jitgrad.bool))


def test_compiled_encoder_step_equals_eager():
    jitgrad.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 16, dropout=0.0,
                                                           batch_first=True), 2)
    head = nn.Linear(E, 3)
    x, y = jitgrad.randn(4, 5, E), jitgrad.tensor([0, 2, 1, 1])
    params = list(enc.parameters()) + list(head.parameters())

    def step(x, y):
        return nn.functional.cross_entropy(head(enc(x).mean(1)), y)
    assert_compiled_step_matches_eager(step, params, x, y)


def test_cuda_gives_the_cpus_results():
    if not jitgrad.cuda.is_available():
        pytest.skip("no CUDA")
    jitgrad.manual_seed(0)
    m = nn.MultiheadAttention(E, H, dtype=jitgrad.float64)
    mc = nn.MultiheadAttention(E, H, dtype=jitgrad.float64, device="cuda")
    mc.load_state_dict(m.state_dict())
    q = np.random.default_rng(2).standard_normal((5, 2, E))
    kpm = jitgrad.tensor([[False, True, False, False, False], [False] * 5])
    out, w = m(*(jitgrad.tensor(q),) * 3, key_padding_mask=kpm)
    outc, wc = mc(*(jitgrad.tensor(q, device="cuda"),) * 3, key_padding_mask=kpm.cuda())
    assert outc.device == "cuda:0"
    np.testing.assert_allclose(outc.detach().cpu().numpy(), out.detach().numpy(), rtol=1e-12,
                               atol=1e-13)
    np.testing.assert_allclose(wc.detach().cpu().numpy(), w.detach().numpy(), rtol=1e-12,
                               atol=1e-13)


@pytest.mark.parametrize("kw", [{}, {"norm_first": True, "batch_first": True,
                                     "activation": "gelu"}])
def test_transformer_matches_pytorch(kw):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    args = dict(d_model=E, nhead=H, num_encoder_layers=2, num_decoder_layers=2,
                dim_feedforward=16, dropout=0.0, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mt = torch.nn.Transformer(dtype=torch.float64, **args)
    m = nn.Transformer(dtype=jitgrad.float64, **args)
    _copy(m, mt)
    assert repr(m) == repr(mt)
    bf = kw.get("batch_first")
    src = rng.standard_normal((2, 6, E) if bf else (6, 2, E))
    tgt = rng.standard_normal((2, 4, E) if bf else (4, 2, E))
    kpm = np.zeros((2, 6), bool)
    kpm[1, -2:] = True
    outs = []
    for M, model in ((jitgrad, m), (torch, mt)):
        s, t = M.tensor(src, requires_grad=True), M.tensor(tgt, requires_grad=True)
        mask = model.generate_square_subsequent_mask(4, dtype=M.float64)
        y = model(s, t, tgt_mask=mask, src_key_padding_mask=M.tensor(kpm),
                  memory_key_padding_mask=M.tensor(kpm))
        (y * 1.7).sum().backward()
        outs.append((y.detach().numpy(), s.grad.numpy(), t.grad.numpy(),
                     [p.grad.numpy() for p in model.parameters()]))
    (y, gs, gt, pg), (yt, gst, gtt, pgt) = outs
    np.testing.assert_allclose(y, yt, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(gs, gst, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gt, gtt, rtol=1e-8, atol=1e-10)
    for a, b in zip(pg, pgt):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_transformer_initialisation_mask_and_errors():
    jitgrad.manual_seed(0)
    m = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                       dim_feedforward=16)
    assert [n for n, _ in m.named_parameters()][:3] == [
        "encoder.layers.0.self_attn.in_proj_weight", "encoder.layers.0.self_attn.in_proj_bias",
        "encoder.layers.0.self_attn.out_proj.weight"]
    w = m.decoder.layers[0].linear1.weight
    assert w.abs().max().item() <= (6.0 / (8 + 16)) ** 0.5  # xavier_uniform_
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.tolist() == [[0.0, -np.inf, -np.inf], [0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]]
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        m(jitgrad.ones(5, 2, 8), jitgrad.ones(3, 3, 8))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal "
                                           "to d_model"):
        m(jitgrad.ones(5, 2, 8), jitgrad.ones(3, 2, 6))


MHA_OPTIONS = [dict(kdim=6, vdim=5), dict(add_bias_kv=True), dict(add_zero_attn=True),
               dict(kdim=6, vdim=5, add_bias_kv=True, add_zero_attn=True),
               dict(bias=False, kdim=8)]


@pytest.mark.parametrize("kw", MHA_OPTIONS, ids=lambda kw: "-".join(map(str, kw)))
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_options_match_pytorch(kw, batch_first):
    """Cross-attention over keys / values of other sizes (``kdim``/``vdim``), learned and
    zero extra keys (``add_bias_kv``, ``add_zero_attn``) raised NotImplementedError: now
    PyTorch's parameters (the same ``state_dict`` keys), outputs, weights and gradients,
    with and without masks."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    tm = torch.nn.MultiheadAttention(16, 4, batch_first=batch_first, **kw)
    jm = nn.MultiheadAttention(16, 4, batch_first=batch_first, **kw)
    assert list(jm.state_dict()) == list(tm.state_dict())
    jm.load_state_dict({k: jitgrad.tensor(v.detach().numpy())
                        for k, v in tm.state_dict().items()})
    n, tgt, src = 3, 5, 7

    def shaped(length, e):
        return rng.standard_normal((n, length, e) if batch_first else (length, n, e)) \
            .astype(np.float32)
    q, k, v = shaped(tgt, 16), shaped(src, kw.get("kdim", 16)), shaped(src, kw.get("vdim", 16))
    kpm = rng.random((n, src)) < 0.3
    am = rng.random((tgt, src)) < 0.2
    kpm[:, 0] = am[:, 0] = False
    for masks in (False, True):
        outs = []
        for M, m in ((torch, tm), (jitgrad, jm)):
            qq = M.tensor(q, requires_grad=True)
            extra = dict(key_padding_mask=M.tensor(kpm), attn_mask=M.tensor(am)) if masks \
                else {}
            o, w = m(qq, M.tensor(k), M.tensor(v), **extra)
            (o.square().sum() + w.sum()).backward()
            outs.append([o.detach().numpy(), w.detach().numpy(), qq.grad.numpy()] +
                        [p.grad.numpy() for p in m.parameters()])
            m.zero_grad()
        for a, b in zip(*outs):
            np.testing.assert_allclose(b, a, atol=5e-6)
    x = jitgrad.ones(tgt, 16)  # unbatched
    assert jm(x, jitgrad.ones(src, kw.get("kdim", 16)),
              jitgrad.ones(src, kw.get("vdim", 16)))[0].shape == (tgt, 16)
