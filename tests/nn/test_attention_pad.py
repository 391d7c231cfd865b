"""``F.scaled_dot_product_attention`` and ``F.pad``: PyTorch's semantics and errors,
gradients (gradcheck in float64), compiled == eager; compared with PyTorch when installed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad.autograd import gradcheck


def _qkv(rng, lq=4, s=5, e=3, ev=2, heads=(2,), dtype=jg.float64):
    def t(*shape):
        return jg.tensor(rng.standard_normal(shape), dtype=dtype, requires_grad=True)
    return t(*heads, lq, e), t(*heads, s, e), t(*heads, s, ev)


def _reference(q, k, v, mask=None, causal=False, scale=None):
    """The definition, in NumPy: softmax(q k^T * scale + bias) v, rows with no key -> 0."""
    q, k, v = (x.detach().numpy() for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    if mask is not None:
        m = mask.numpy()
        s = np.where(m, s, -np.inf) if m.dtype == bool else s + m
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isinf(top), 0, top))
    w = np.where(np.isinf(top), 0, e / np.where(np.isinf(top), 1, e.sum(-1, keepdims=True)))
    return w @ v


@pytest.mark.parametrize("kind", ["plain", "causal", "bool", "float", "scale", "empty-row"])
def test_sdpa_values_and_gradcheck(kind):
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng)
    kw, mask = {}, None
    if kind == "causal":
        kw["is_causal"] = True
    elif kind in ("bool", "empty-row"):
        m = rng.random((4, 5)) < 0.6
        m[:, 0] = True
        if kind == "empty-row":
            m[2] = False
        mask = jg.tensor(m)
    elif kind == "float":
        mask = jg.tensor(rng.standard_normal((2, 4, 5)))
    elif kind == "scale":
        kw["scale"] = 0.3
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    assert out.shape == (2, 4, 2)
    np.testing.assert_allclose(out.detach().numpy(), _reference(
        q, k, v, mask, kw.get("is_causal", False), kw.get("scale")), rtol=1e-12, atol=1e-14)
    if kind == "empty-row":
        assert not out[:, 2].detach().numpy().any()
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(
        a, b, c, attn_mask=mask, **kw), (q, k, v))


def test_sdpa_empty_row_has_zero_gradient():
    rng = np.random.default_rng(1)
    q, k, v = _qkv(rng)
    m = np.ones((4, 5), bool)
    m[1] = False
    F.scaled_dot_product_attention(q, k, v, attn_mask=jg.tensor(m)).sum().backward()
    assert not q.grad[:, 1].numpy().any() and np.isfinite(k.grad.numpy()).all()


def test_sdpa_grouped_query_heads_and_unbatched():
    rng = np.random.default_rng(2)
    q, _, _ = _qkv(rng, heads=(1, 4))
    _, k, v = _qkv(rng, heads=(1, 2))
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    kk, vv = (jg.repeat_interleave(t, 2, -3) if hasattr(jg, "repeat_interleave") else
              t.unsqueeze(-3).expand(1, 2, 2, 5, t.shape[-1]).reshape(1, 4, 5, t.shape[-1])
              for t in (k, v))
    np.testing.assert_allclose(out.detach().numpy(), _reference(q, kk, vv), rtol=1e-12)
    with pytest.raises(RuntimeError, match="must divide the number of heads"):
        F.scaled_dot_product_attention(q, k[:, :1].expand(1, 3, 5, 3), v[:, :1].expand(
            1, 3, 5, 2), enable_gqa=True)
    q2, k2, v2 = _qkv(rng, heads=())
    assert F.scaled_dot_product_attention(q2, k2, v2).shape == (4, 2)


@pytest.mark.parametrize("call,msg", [
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=jg.ones(4, 5,
                                                                               dtype=jg.int64)),
     "Expected attn_mask dtype to be bool or float"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v.float()),
     "Expected query, key, and value to have the same dtype"),
    (lambda q, k, v: F.scaled_dot_product_attention(q[0, 0], k, v),
     "at least 2 dimensional"),
])
def test_sdpa_errors(call, msg):
    q, k, v = _qkv(np.random.default_rng(3))
    with pytest.raises(RuntimeError, match=msg):
        call(q, k, v)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_mask_and_is_causal_both_apply(kind):
    """PyTorch's CPU kernel takes ``attn_mask`` with ``is_causal=True``: both apply."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 2, 4, 8)) for _ in range(3))
    m = rng.random((4, 4)) > 0.3 if kind == "bool" else rng.standard_normal((4, 4))
    if kind == "bool":
        m[:, 0] = True
    got = F.scaled_dot_product_attention(*(jg.tensor(a) for a in (q, k, v)),
                                         attn_mask=jg.tensor(m), is_causal=True)
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a) for a in (q, k, v)), attn_mask=torch.tensor(m), is_causal=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_sdpa_dropout_uses_the_generator():
    q, k, v = _qkv(np.random.default_rng(4))
    jg.manual_seed(7)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    jg.manual_seed(7)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    c = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert not np.array_equal(b.detach().numpy(), c.detach().numpy())
    assert not F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).detach().numpy().any()


def test_sdpa_compiled_equals_eager():
    rng = np.random.default_rng(5)
    m = jg.tensor(rng.random((4, 5)) < 0.7)

    def step(q, k, v):
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=m) ** 2).sum() + \
            F.scaled_dot_product_attention(q, k, v, is_causal=True).sum()

    f = jg.compile(step, fullgraph=True)
    for _ in range(2):
        data = [t.detach().numpy() for t in _qkv(rng, dtype=jg.float32)]
        e = [jg.tensor(d, requires_grad=True) for d in data]
        c = [jg.tensor(d, requires_grad=True) for d in data]
        le, lc = step(*e), f(*c)
        le.backward()
        lc.backward()
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-6)
        for a, b in zip(c, e):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert f.stats["traces"] == 1


def test_sdpa_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    for kw in ({}, {"is_causal": True}, {"mask": "bool"}, {"mask": "float"}):
        q, k, v = _qkv(rng, heads=(2, 3))
        tq, tk, tv = (torch.tensor(x.detach().numpy(), requires_grad=True) for x in (q, k, v))
        mask = tmask = None
        if kw.get("mask") == "bool":
            m = rng.random((4, 5)) < 0.5
            m[3] = False
            mask, tmask = jg.tensor(m), torch.tensor(m)
        elif kw.get("mask") == "float":
            m = rng.standard_normal((3, 4, 5))
            mask, tmask = jg.tensor(m), torch.tensor(m)
        causal = kw.get("is_causal", False)
        ours = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        theirs = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask,
                                                                  is_causal=causal)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12,
                                   atol=1e-14)
        w = rng.standard_normal(tuple(ours.shape))
        (ours * jg.tensor(w)).sum().backward()
        (theirs * torch.tensor(w)).sum().backward()
        for a, b in ((q, tq), (k, tk), (v, tv)):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-13)


# --------------------------------------------------------------------------------- pad
X = np.arange(24.0).reshape(2, 3, 4)


@pytest.mark.parametrize("mode,pad,expected_row", [
    ("constant", (1, 2), [0, 0, 1, 2, 3, 0, 0]),
    ("constant", (-1, 1), [1, 2, 3, 0]),
    ("reflect", (2, 1), [2, 1, 0, 1, 2, 3, 2]),
    ("replicate", (2, 1), [0, 0, 0, 1, 2, 3, 3]),
    ("circular", (2, 1), [2, 3, 0, 1, 2, 3, 0]),
    ("circular", (1, -2), [1, 0, 1]),
])
def test_pad_modes(mode, pad, expected_row):
    out = F.pad(jg.tensor(X), pad, mode=mode)
    assert out.numpy()[0, 0].tolist() == expected_row


def test_pad_two_dims_value_and_gradient():
    x = jg.tensor(X, requires_grad=True)
    y = F.pad(x, (1, -1, 0, 1), value=9.0)
    assert y.shape == (2, 4, 4) and type(y.grad_fn).__name__ == "ConstantPadNdBackward0"
    assert y.detach().numpy()[0, :, 0].tolist() == [9.0, 9.0, 9.0, 9.0]
    y.sum().backward()
    g = np.ones_like(X)
    g[..., -1] = 0.0  # the cropped column
    np.testing.assert_array_equal(x.grad.numpy(), g)
    for mode in ("reflect", "replicate", "circular"):
        assert gradcheck(lambda t, m=mode: F.pad(t, (2, 1, 1, 2), mode=m),
                         (jg.tensor(X, requires_grad=True),))


@pytest.mark.parametrize("call,err,msg", [
    (lambda x: F.pad(x, (1,)), RuntimeError, "Padding length must be divisible by 2"),
    (lambda x: F.pad(x, (1,) * 10), RuntimeError, "Padding length should be less than"),
    (lambda x: F.pad(x, (4, 0), mode="reflect"), RuntimeError,
     r"Padding size should be less than the corresponding input dimension, but got: "
     r"padding \(4, 0\) at dimension 2 of input \[2, 3, 4\]"),
    (lambda x: F.pad(x, (1, 1), mode="bogus"), NotImplementedError,
     "Unrecognised padding mode bogus"),
    (lambda x: F.pad(x[0, 0], (1, 1), mode="reflect"), NotImplementedError,
     "Padding size 2 is not supported for 1D input tensor"),
    (lambda x: F.pad(x, (-3, -2)), RuntimeError, "resulted in a negative output size"),
])
def test_pad_errors(call, err, msg):
    with pytest.raises(err, match=msg):
        call(jg.tensor(X))


def test_pad_compiled_equals_eager():
    f = jg.compile(lambda x: (F.pad(x, (1, 2), mode="reflect") * F.pad(x, (2, 1))).sum(),
                   fullgraph=True)
    for _ in range(2):
        a = jg.tensor(X, requires_grad=True)
        b = jg.tensor(X, requires_grad=True)
        le = (F.pad(a, (1, 2), mode="reflect") * F.pad(a, (2, 1))).sum()
        le.backward()
        lc = f(b)
        lc.backward()
        assert lc.item() == le.item()
        np.testing.assert_array_equal(b.grad.numpy(), a.grad.numpy())


def test_pad_matches_torch():
    torch = pytest.importorskip("torch")
    for mode in ("constant", "reflect", "replicate", "circular"):
        for pad in ((1, 2), (2, 1, 1, 0), (-1, 1), (1, -2, 0, 1), (1, 1, 1, 1, 0, 1)):
            try:
                theirs = torch.nn.functional.pad(torch.tensor(X), pad, mode=mode).numpy()
            except (RuntimeError, NotImplementedError) as e:
                with pytest.raises(type(e)):
                    F.pad(jg.tensor(X), pad, mode=mode)
                continue
            np.testing.assert_array_equal(F.pad(jg.tensor(X), pad, mode=mode).numpy(), theirs)


def test_masked_fill_and_gelu_tanh_are_pytorchs():
    x = jg.tensor([-1.0, 0.5, 2.0])
    assert x.masked_fill(jg.tensor([True, False, True]), -5.0).tolist() == [-5.0, 0.5, -5.0]
    g = F.gelu(x, approximate="tanh").numpy()
    a = x.numpy().astype(np.float64)
    ref = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
    np.testing.assert_allclose(g, ref, rtol=1e-6)
