"""conv2d, max_pool2d and avg_pool2d (jitgrad.ops.conv) beyond the registry-driven tests:
naive NumPy references (written here, independent of the ops' own references), finite
differences on the cases the registry samples cannot hold (unbatched input: its node is
PyTorch's SqueezeBackward1), part kernels split unevenly (bit-equal to one call; the pooled
runs are in tests/nn/test_kernel_parts.py), PyTorch as an oracle (values, gradients, node
names, pooling indices and ties, every error message) and the errors without PyTorch.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.autograd import gradcheck, gradgradcheck
from jitgrad.ops import conv as C

F32, F64 = np.float32, np.float64
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


# ------------------------------------------------------------------ naive references
def naive_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Output pixel by output pixel, in float64 (``x`` (N, C, H, W) or (C, H, W))."""
    unbatched = x.ndim == 3
    x = x[None] if unbatched else x
    N, Cin, H, W = x.shape
    Co, Cg, kh, kw = w.shape
    s, d = _pair(stride), _pair(dilation)
    if padding == "valid":
        padding = 0
    if padding == "same":
        tot = [d[i] * ((kh, kw)[i] - 1) for i in range(2)]
        pads = ((tot[0] // 2, tot[0] - tot[0] // 2), (tot[1] // 2, tot[1] - tot[1] // 2))
    else:
        p = _pair(padding)
        pads = ((p[0], p[0]), (p[1], p[1]))
    xp = np.pad(x.astype(F64), ((0, 0), (0, 0)) + pads)
    OH = (xp.shape[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    OW = (xp.shape[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((N, Co, OH, OW))
    og = Co // groups
    for oh in range(OH):
        for ow in range(OW):
            h, v = oh * s[0], ow * s[1]
            patch = xp[:, :, h:h + d[0] * (kh - 1) + 1:d[0], v:v + d[1] * (kw - 1) + 1:d[1]]
            for g in range(groups):
                pg = patch[:, g * Cg:(g + 1) * Cg]
                wg = w[g * og:(g + 1) * og].astype(F64)
                out[:, g * og:(g + 1) * og, oh, ow] = np.tensordot(pg, wg, ((1, 2, 3),
                                                                            (1, 2, 3)))
    if b is not None:
        out += b.reshape(1, Co, 1, 1)
    return out[0] if unbatched else out


def naive_pool(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, kind="max",
               count_include_pad=True, divisor_override=None):
    """(values, flat indices) of max pooling / values of average pooling, window by window."""
    k = _pair(kernel_size)
    s = k if stride is None else _pair(stride)
    p, d = _pair(padding), _pair(dilation)
    H, W = x.shape[-2:]
    osz = []
    for i, n in enumerate((H, W)):
        o = (n + 2 * p[i] - d[i] * (k[i] - 1) - 1 + (s[i] - 1 if ceil_mode else 0)) // s[i] + 1
        if ceil_mode and (o - 1) * s[i] >= n + p[i]:
            o -= 1
        osz.append(o)
    planes = x.reshape(-1, H, W).astype(F64)
    vals = np.zeros((planes.shape[0],) + tuple(osz))
    idx = np.zeros(vals.shape, np.int64)
    for oh in range(osz[0]):
        for ow in range(osz[1]):
            hs, ws = oh * s[0] - p[0], ow * s[1] - p[1]
            if kind == "max":
                taps = [(hs + i * d[0], ws + j * d[1]) for i in range(k[0]) for j in range(k[1])]
                taps = [(h, v) for h, v in taps if 0 <= h < H and 0 <= v < W]
                window = np.stack([planes[:, h, v] for h, v in taps], axis=1)
                best = np.argmax(window, axis=1)  # first maximum
                vals[:, oh, ow] = window[np.arange(len(best)), best]
                idx[:, oh, ow] = [taps[t][0] * W + taps[t][1] for t in best]
            else:
                he, we = min(hs + k[0], H + p[0]), min(ws + k[1], W + p[1])
                size = (he - hs) * (we - ws)
                h0, w0, h1, w1 = max(hs, 0), max(ws, 0), min(he, H), min(we, W)
                div = divisor_override or (size if count_include_pad else (h1 - h0) * (w1 - w0))
                vals[:, oh, ow] = planes[:, h0:h1, w0:w1].sum(axis=(1, 2)) / div
    shape = x.shape[:-2] + tuple(osz)
    return vals.reshape(shape), idx.reshape(shape)


def _rand(rng, shape, dtype=F64):
    return rng.standard_normal(shape).astype(dtype)


#: (input, weight, bias?, kwargs): every option, unbatched input, and sizes for the parallel
#: kernels (from 2**18 multiply-adds) on both GEMM forms and both input-gradient paths
CONV_CASES = [
    ((2, 3, 6, 5), (4, 3, 3, 3), True, {}),
    ((2, 3, 7, 6), (4, 3, 3, 2), True, {"stride": 2, "padding": 1}),
    ((2, 2, 9, 8), (3, 2, 2, 3), False, {"dilation": 2, "padding": (1, 2)}),
    ((2, 4, 6, 6), (6, 2, 3, 3), True, {"groups": 2, "stride": (2, 1)}),
    ((2, 3, 6, 5), (6, 1, 3, 3), False, {"groups": 3, "padding": 1}),
    ((1, 2, 6, 6), (3, 2, 2, 4), True, {"padding": "same", "dilation": (1, 2)}),
    ((1, 2, 6, 6), (3, 2, 3, 3), True, {"padding": "valid"}),
    ((3, 6, 5), (2, 3, 3, 3), True, {"padding": 1}),
    ((3, 6, 5), (4, 3, 1, 1), False, {"padding": 1, "stride": 2}),
    ((0, 3, 6, 5), (4, 3, 3, 3), True, {}),
    ((16, 8, 12, 12), (16, 8, 3, 3), True, {"padding": 1}),
    ((16, 8, 12, 12), (16, 8, 3, 3), True, {"padding": 1, "stride": 2}),
    ((8, 16, 10, 9), (32, 4, 3, 3), True, {"groups": 4, "dilation": (2, 1)}),
    ((64, 1, 8, 8), (16, 1, 3, 3), True, {"padding": 1}),
    ((2, 32, 17, 15), (24, 32, 3, 3), False, {"padding": "same"}),
]
CONV_IDS = [f"{c[0]}x{c[1]}-{c[3]}".replace(" ", "") for c in CONV_CASES]


def _conv_args(rng, case, dtype):
    xs, ws, bias, kw = case
    return (_rand(rng, xs, dtype), _rand(rng, ws, dtype),
            _rand(rng, (ws[0],), dtype) if bias else None, kw)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
def test_conv2d_matches_naive_reference(case, dtype):
    x, w, b, kw = _conv_args(np.random.default_rng(0), case, dtype)
    out = C.conv2d(jitgrad.tensor(x), jitgrad.tensor(w), None if b is None else
                   jitgrad.tensor(b), **kw)
    ref = naive_conv2d(x, w, b, **kw)
    assert out.shape == ref.shape and out.dtype.name == np.dtype(dtype).name
    tol = 1e-5 if dtype == F32 else 1e-12
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol,
                               atol=tol * max(1, np.abs(ref).max(initial=0)))


@pytest.mark.parametrize("layout", ["rows", "sample-major", "batch-last"])
@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
def test_every_patch_layout_matches_the_references(case, layout, monkeypatch):
    """Forward, input and weight gradients with every case forced onto one layout of the
    patches: rows (an ungrouped convolution's patches unless short), or columns in one of
    their two orders (the threshold picks by output width otherwise)."""
    monkeypatch.setattr(C, "ROWS", layout == "rows")
    monkeypatch.setattr(C, "BATCH_LAST_BELOW_OW", 1 << 30 if layout == "batch-last" else 0)
    x, w, b, kw = _conv_args(np.random.default_rng(1), case, F64)
    jx, jw = jitgrad.tensor(x, requires_grad=True), jitgrad.tensor(w, requires_grad=True)
    out = C.conv2d(jx, jw, None if b is None else jitgrad.tensor(b), **kw)
    g = np.random.default_rng(2).standard_normal(out.shape)
    out.backward(jitgrad.tensor(g))
    node = out.grad_fn if x.ndim == 4 else out.grad_fn.next_functions[0][0]
    p = {k: node.params[k] for k in ("stride", "padding", "dilation", "groups")}
    x4, g4 = (x, g) if x.ndim == 4 else (x[None], g[None])
    np.testing.assert_allclose(out.detach().numpy(), naive_conv2d(x, w, b, **kw), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(jx.grad.numpy().reshape(x4.shape),
                               C._conv_bwd_input_ref(g4, w, x4.shape[2:], **p), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(jw.grad.numpy(),
                               C._conv_bwd_weight_ref(g4, x4, w.shape[2:], **p), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", [
    ((20, 1, 8, 8), (8, 1, 3, 3), 1),     # a first layer: 9 taps
    ((12, 4, 9, 9), (8, 2, 3, 3), 2),     # groups, 18 taps per group
    ((9, 3, 10, 12), (6, 1, 2, 3), 3),    # depthwise, 6 taps
])
def test_short_patches_per_sample_do_not_depend_on_the_chunking(case, dtype, monkeypatch):
    """Patches shorter than SMALL_K are multiplied per sample (forward straight into NCHW,
    weight gradient added per sample in float64): every chunking of the samples gives the
    same bits, close to the float64 references."""
    xs, ws, groups = case
    assert ws[1] * ws[2] * ws[3] < C.SMALL_K
    rng = np.random.default_rng(3)
    x, w, b = _rand(rng, xs, dtype), _rand(rng, ws, dtype), _rand(rng, ws[:1], dtype)
    geo = dict(stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=groups)
    g = _rand(rng, (xs[0], ws[0]) + C._out_hw(xs[2:], ws[2:], (1, 1), (1, 1, 1, 1), (1, 1)),
              dtype)
    per_sample = xs[1] * ws[2] * ws[3] * g.shape[2] * g.shape[3]
    results = []
    for samples_per_chunk in (xs[0], 4, 1):
        monkeypatch.setattr(C, "COLS_CHUNK", per_sample * samples_per_chunk)
        assert len(C._chunks(xs[0], per_sample)) == -(-xs[0] // samples_per_chunk)
        results.append((C._conv_fwd(x, w, b, **geo),
                        C._conv_bwd_weight(g, x, ws[2:], **geo)))
    for y, dw in results[1:]:
        np.testing.assert_array_equal(y, results[0][0])
        np.testing.assert_array_equal(dw, results[0][1])
    f64 = [a.astype(F64) for a in (x, w, b, g)]
    tol = 1e-5 if dtype == F32 else 1e-12
    y_ref = C._conv_ref(*f64[:3], **geo)
    dw_ref = C._conv_bwd_weight_ref(f64[3], f64[0], ws[2:], **geo)
    np.testing.assert_allclose(results[0][0], y_ref, rtol=tol, atol=tol * np.abs(y_ref).max())
    np.testing.assert_allclose(results[0][1], dw_ref, rtol=tol, atol=tol * np.abs(dw_ref).max())


@pytest.mark.parametrize("dtype", [F32, F64])
def test_patch_rows_in_chunks_match_the_references(dtype, monkeypatch):
    """An ungrouped convolution with patches of at least SMALL_K taps multiplies patch rows
    (pixels first): in one chunk and in several, with stride and padding, forward and both
    gradients are close to the float64 references."""
    xs, ws = (10, 6, 7, 9), (5, 6, 3, 2)
    geo = dict(stride=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2), groups=1)
    ohw = C._out_hw(xs[2:], ws[2:], geo["stride"], geo["padding"], geo["dilation"])
    assert C._rows_layout(1, ws[1] * ws[2] * ws[3], C._geometry(
        xs[2:], geo["stride"], geo["padding"], geo["dilation"], ws[2:], ohw))
    rng = np.random.default_rng(7)
    x, w, b = _rand(rng, xs, dtype), _rand(rng, ws, dtype), _rand(rng, ws[:1], dtype)
    g = _rand(rng, (xs[0], ws[0]) + ohw, dtype)
    f64 = [a.astype(F64) for a in (x, w, b, g)]
    refs = (C._conv_ref(*f64[:3], **geo),
            C._conv_bwd_input_ref(f64[3], f64[1], xs[2:], **geo),
            C._conv_bwd_weight_ref(f64[3], f64[0], ws[2:], **geo))
    tol = 1e-5 if dtype == F32 else 1e-12
    per_sample = xs[1] * ws[2] * ws[3] * ohw[0] * ohw[1]
    for samples_per_chunk in (xs[0], 3, 1):
        monkeypatch.setattr(C, "COLS_CHUNK", per_sample * samples_per_chunk)
        got = (C._conv_fwd(x, w, b, **geo), C._conv_bwd_input(g, w, xs[2:], **geo),
               C._conv_bwd_weight(g, x, ws[2:], **geo))
        for a, ref in zip(got, refs):
            assert a.dtype == dtype and a.shape == ref.shape and a.flags.c_contiguous
            np.testing.assert_allclose(a, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_weight_gradient_with_the_patches_first(groups, dtype, monkeypatch):
    """Patch columns (``ROWS`` off; grouped convolutions take them), few output channels
    over long patches and many columns: the weight gradient is ``(cols @ gc.T).T``
    (``_patches_first``), per group and chunk, close to the float64 reference in one chunk
    and in several."""
    monkeypatch.setattr(C, "ROWS", False)
    xs, ws = (128, 32, 4, 4), (64, 32 // groups, 3, 3)
    assert C._patches_first(ws[0] // groups, ws[1] * 9, 64 * 16)  # a chunk of 64 samples
    rng = np.random.default_rng(5)
    x, g = _rand(rng, xs, dtype), _rand(rng, (xs[0], ws[0], 4, 4), dtype)
    geo = dict(stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=groups)
    dw_ref = C._conv_bwd_weight_ref(g.astype(F64), x.astype(F64), ws[2:], **geo)
    tol = 1e-5 if dtype == F32 else 1e-12
    for chunk in (C.COLS_CHUNK, xs[1] * 9 * 16 * 64):  # one chunk; two of 64 samples
        monkeypatch.setattr(C, "COLS_CHUNK", chunk)
        dw = C._conv_bwd_weight(g, x, ws[2:], **geo)
        assert dw.shape == ws and dw.dtype == dtype and dw.flags.c_contiguous
        np.testing.assert_allclose(dw, dw_ref, rtol=tol, atol=tol * np.abs(dw_ref).max())


POOL_CASES = [
    ((2, 3, 6, 6), {"kernel_size": 2}),
    ((2, 2, 7, 6), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ((1, 2, 8, 7), {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1),
                    "dilation": (2, 2)}),
    ((1, 2, 7, 7), {"kernel_size": 3, "stride": 2, "ceil_mode": True}),
    ((1, 2, 6, 6), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ((3, 5, 4), {"kernel_size": 2, "stride": 1}),
    ((64, 16, 8, 8), {"kernel_size": 2}),
    ((8, 8, 17, 15), {"kernel_size": 3, "stride": 1, "padding": 1}),
]


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("xs,kw", POOL_CASES, ids=[str(c) for c in range(len(POOL_CASES))])
def test_pools_match_naive_reference(xs, kw, dtype):
    rng = np.random.default_rng(1)
    x = _rand(rng, xs, dtype)
    out, idx = C.max_pool2d(jitgrad.tensor(x), return_indices=True, **kw)
    ref, ref_idx = naive_pool(x, **kw)
    np.testing.assert_array_equal(out.numpy(), ref.astype(dtype))
    np.testing.assert_array_equal(idx.numpy(), ref_idx)
    assert idx.dtype.name == "int64"
    akw = {k: v for k, v in kw.items() if k != "dilation"}
    for extra in ({}, {"count_include_pad": False}, {"divisor_override": 5}):
        out = C.avg_pool2d(jitgrad.tensor(x), **akw, **extra)
        ref, _ = naive_pool(x, kind="avg", **akw, **extra)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6 if dtype == F32 else 1e-13,
                                   atol=1e-6 if dtype == F32 else 1e-13)


# ------------------------------------------------------------------- finite differences
GRAD_CASES = [
    ((3, 5, 4), (2, 3, 3, 2), True, {"padding": 1}),
    ((2, 5, 4), (4, 2, 2, 2), False, {"stride": 2, "dilation": (1, 2)}),
    ((2, 5, 5), (4, 1, 3, 3), False, {"groups": 2, "stride": 2, "padding": 1}),
    ((4, 4, 4), (4, 4, 3, 3), True, {"padding": "same"}),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[str(i) for i in range(len(GRAD_CASES))])
def test_unbatched_conv2d_gradcheck_and_gradgradcheck(case):
    x, w, b, kw = _conv_args(np.random.default_rng(2), case, F64)
    ts = [jitgrad.tensor(a, requires_grad=True) for a in (x, w) + (() if b is None else (b,))]

    def fn(*t):
        return C.conv2d(t[0], t[1], t[2] if len(t) > 2 else None, **kw)

    assert type(fn(*ts).grad_fn).__name__ == "SqueezeBackward1"
    assert gradcheck(fn, ts)
    assert gradgradcheck(fn, ts)


def test_pooling_gradcheck_in_a_small_net():
    rng = np.random.default_rng(3)
    x = jitgrad.tensor(rng.permutation(2 * 2 * 6 * 6).reshape(2, 2, 6, 6) * 0.1,
                       requires_grad=True)
    w = jitgrad.tensor(_rand(rng, (3, 2, 3, 3)), requires_grad=True)

    def net(x, w):
        y = C.max_pool2d(C.conv2d(x, w, padding=1), 2)
        return C.avg_pool2d(y * y, 2, stride=1, padding=1)

    assert gradcheck(net, (x, w))
    assert gradgradcheck(net, (x, w))


# ---------------------------------------------------------- parallel == sequential
def _split_runs(fn, parts, args, out_specs):
    """``fn`` over ``[0, parts)`` in one call and in uneven pieces (as threads would split
    it): the outputs (new arrays of ``out_specs`` ``(shape, dtype)``, passed after ``args``)
    must be equal."""
    outs = []
    for cuts in ([0, parts], sorted({0, parts, parts // 3, parts // 3 + 1, parts - 1})):
        out = [np.empty(shape, dt) for shape, dt in out_specs]
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            fn(lo, hi, *args, *out)
        outs.append(out)
    for a, c in zip(*outs):
        np.testing.assert_array_equal(a, c)


def test_part_kernels_do_not_depend_on_the_split():
    """Fixed block partitions: the result does not depend on how the parts are split."""
    from jitgrad.kernels import conv as k
    from jitgrad.kernels import pooling as kp

    rng = np.random.default_rng(4)
    for dt in (F32, F64):
        for xs, ws, s, d in [((8, 16, 9, 10), (32, 16, 3, 3), 1, 1),
                             ((6, 8, 11, 9), (12, 4, 3, 2), 2, (1, 2)),
                             ((32, 1, 8, 8), (16, 1, 3, 3), 1, 1)]:
            x = _rand(rng, xs, dt)
            b = _rand(rng, (ws[0],), dt)
            ohw = C._out_hw(xs[2:], ws[2:], _pair(s), (1, 1, 1, 1), _pair(d))
            g = _rand(rng, (xs[0], ws[0]) + ohw, dt)
            geo = C._geometry(xs[2:], _pair(s), (1, 1, 1, 1), _pair(d), ws[2:], ohw)
            K, m = xs[1] * ws[2] * ws[3], xs[0] * ohw[0] * ohw[1]
            y = _rand(rng, (ws[0], m), dt)
            for bl in (True, False):  # both column orders
                geo = (bl,) + geo[1:]
                _split_runs(k.lower, xs[1], (x, 0, *geo), [((K, m), dt)])
                _split_runs(k.unlower, xs[1], (_rand(rng, (K, m), dt), 0, *geo), [(xs, dt)])
                _split_runs(k.cn_to_nc, ws[0], (y, b, 0, bl), [((xs[0], ws[0], m // xs[0]), dt)])
                _split_runs(k.nc_to_cn, ws[0], (g.reshape(xs[0], ws[0], -1), 0, bl),
                            [(y.shape, dt)])
        x = _rand(rng, (40, 30, 30), dt)
        _split_runs(kp.max_pool, 40, (x, 3, 3, 2, 2, 1, 1, 1, 1),
                    [((40, 15, 15), dt), ((40, 15, 15), np.int64)])
        o, i = np.empty((40, 15, 15), dt), np.empty((40, 15, 15), np.int64)
        kp.max_pool(0, 40, x, 3, 3, 2, 2, 1, 1, 1, 1, o, i)
        _split_runs(kp.max_pool_backward, 40, (o, i), [(x.shape, dt)])


# ------------------------------------------------------------------------ PyTorch oracle
@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _both(torch, arrays):
    return ([None if a is None else jitgrad.tensor(a, requires_grad=True) for a in arrays],
            [None if a is None else torch.tensor(a, requires_grad=True) for a in arrays])


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
def test_conv2d_values_grads_and_nodes_match_torch(torch, case, dtype):
    rng = np.random.default_rng(5)
    x, w, b, kw = _conv_args(rng, case, dtype)
    (jx, jw, jb), (tx, tw, tb) = _both(torch, (x, w, b))
    out = C.conv2d(jx, jw, jb, **kw)
    t_out = torch.nn.functional.conv2d(tx, tw, tb, **kw)
    assert type(out.grad_fn).__name__ == type(t_out.grad_fn).__name__
    tol = 2e-5 if dtype == F32 else 1e-11
    scale = max(1.0, float(np.abs(t_out.detach().numpy()).max(initial=0.0)))
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=tol,
                               atol=tol * scale)
    g = _rand(rng, tuple(t_out.shape), dtype)
    out.backward(jitgrad.tensor(g))
    t_out.backward(torch.tensor(g))
    for j, t in ((jx, tx), (jw, tw), (jb, tb)):
        if t is not None:
            ref = t.grad.numpy()
            np.testing.assert_allclose(j.grad.numpy(), ref, rtol=tol,
                                       atol=tol * max(1.0, float(np.abs(ref).max(initial=0))))


def test_conv2d_double_backward_matches_torch(torch):
    """A gradient penalty: second derivatives through both backward ops."""
    rng = np.random.default_rng(6)
    for kw in ({"padding": 1}, {"stride": 2, "groups": 2}, {"dilation": 2, "padding": 2}):
        x, w, b = _rand(rng, (3, 4, 7, 7)), _rand(rng, (6, 4 // kw.get("groups", 1), 3, 3)), \
            _rand(rng, (6,))
        res = []
        for M, F in ((jitgrad, C), (torch, torch.nn.functional)):
            tx, tw, tb = (M.tensor(a, requires_grad=True) for a in (x, w, b))
            y = F.conv2d(tx, tw, tb, **kw)
            gx, gw = M.autograd.grad((y * y).sum(), (tx, tw), create_graph=True)
            assert type(gx.grad_fn).__name__ == "ConvolutionBackwardBackward0"
            ((gx * gx).sum() + (gw * gw * gw).sum()).backward()
            res.append([t.grad.numpy() for t in (tx, tw, tb)])
        for a, c in zip(*res):
            np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("xs,kw", POOL_CASES, ids=[str(c) for c in range(len(POOL_CASES))])
def test_pools_match_torch(torch, xs, kw):
    rng = np.random.default_rng(7)
    x = rng.permutation(int(np.prod(xs))).reshape(xs).astype(F32) * 0.5
    akw = {k: v for k, v in kw.items() if k != "dilation"}
    for name, fkw in (("max_pool2d", kw), ("avg_pool2d", akw)):
        (jx,), (tx,) = _both(torch, (x,))
        out = getattr(C, name)(jx, **fkw)
        t_out = getattr(torch.nn.functional, name)(tx, **fkw)
        assert type(out.grad_fn).__name__ == type(t_out.grad_fn).__name__
        np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-6)
        g = _rand(rng, tuple(t_out.shape), F32)
        out.backward(jitgrad.tensor(g))
        t_out.backward(torch.tensor(g))
        np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)
    j, ji = C.max_pool2d(jitgrad.tensor(x), return_indices=True, **kw)
    t, ti = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_array_equal(ji.numpy(), ti.numpy())


@pytest.mark.parametrize("values", [
    [[1.0, 1.0], [1.0, 1.0]],                                        # all tied: first
    [[0.0, 2.0, 2.0], [2.0, 1.0, 2.0], [2.0, 2.0, 0.0]],             # ties across windows
    [[1.0, np.nan], [np.nan, 1.0]],                                  # NaN wins (the last)
    [[-np.inf, -np.inf], [-np.inf, -np.inf]],                        # nothing beats -inf
    [[np.inf, 3.0, np.inf], [1.0, np.nan, 2.0], [-np.inf, 0.0, 5.0]],
], ids=["tied", "plateau", "nan", "-inf", "mixed"])
@pytest.mark.parametrize("kw", [{"kernel_size": 2}, {"kernel_size": 2, "stride": 1},
                                {"kernel_size": 2, "stride": 1, "padding": 1},
                                {"kernel_size": 3, "padding": 1, "ceil_mode": True}],
                         ids=["k2", "k2s1", "k2s1p1", "k3p1ceil"])
def test_max_pool2d_ties_and_specials_like_torch(torch, values, kw):
    x = np.array(values, dtype=F32)[None, None]
    if x.shape[-1] < kw["kernel_size"] and not kw.get("padding"):
        pytest.skip("window larger than the input")
    (jx,), (tx,) = _both(torch, (x,))
    j, ji = C.max_pool2d(jx, return_indices=True, **kw)
    t, ti = torch.nn.functional.max_pool2d(tx, return_indices=True, **kw)
    assert isinstance(C.max_pool2d(jx, return_indices=True, **kw), tuple)
    np.testing.assert_array_equal(ji.numpy(), ti.numpy())
    np.testing.assert_array_equal(j.detach().numpy(), t.detach().numpy())
    g = np.arange(1.0, 1.0 + t.numel(), dtype=F32).reshape(tuple(t.shape))
    j.backward(jitgrad.tensor(g))
    t.backward(torch.tensor(g))
    np.testing.assert_array_equal(jx.grad.numpy(), tx.grad.numpy())


def test_create_graph_node_names_match_torch(torch):
    def names(M, F):
        w = M.ones(4, 3, 3, 3, requires_grad=True)
        out = []
        for shape in ((2, 3, 6, 6), (3, 6, 6)):  # batched, unbatched
            x = M.ones(shape, requires_grad=True)
            ys = (F.conv2d(x, w, padding=1), F.max_pool2d(x, 2), F.avg_pool2d(x, 2))
            for y, t in ((y, t) for y in ys for t in (x, w)):
                out.append(type(y.grad_fn).__name__)
                gr = M.autograd.grad(y.sum(), t, create_graph=True, allow_unused=True)[0]
                out.append(type(gr.grad_fn).__name__ if gr is not None else None)
        return out

    # the one known difference is in the movement ops: the create_graph gradient of
    # unsqueeze (the unbatched input) is a reshape in jitgrad (ViewBackward0), a squeeze in
    # PyTorch (SqueezeBackward1)
    known = {13: ("ViewBackward0", "SqueezeBackward1")}
    mine, theirs = names(jitgrad, C), names(torch, torch.nn.functional)
    assert len(mine) == len(theirs) == 24
    for i, pair in enumerate(zip(mine, theirs)):
        assert pair == known[i] if i in known else pair[0] == pair[1], (i, pair)


# --------------------------------------------------------------------------------- errors
#: (function, input shape, weight shape, bias shape, kwargs): every check of the three ops
ERROR_CASES = [
    ("conv2d", (8, 1, 8, 8), (16, 3, 3, 3), None, {}),
    ("conv2d", (1, 1, 2, 2), (1, 1, 3, 3), None, {}),
    ("conv2d", (1, 1, 2, 2), (1, 1, 3, 3), None, {"dilation": 2, "padding": 1}),
    ("conv2d", (8, 8), (1, 1, 3, 3), None, {}),
    ("conv2d", (1, 2, 8, 8, 8), (1, 1, 3, 3), None, {}),
    ("conv2d", (1, 1, 8, 8), (1, 3, 3), None, {}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3, 3), None, {}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3), (2,), {}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3), (1, 1), {}),
    ("conv2d", (1, 6, 8, 8), (4, 2, 3, 3), None, {"groups": 3}),
    ("conv2d", (1, 4, 8, 8), (6, 2, 3, 3), None, {"groups": 3}),
    ("conv2d", (1, 4, 8, 8), (6, 2, 3, 3), None, {"groups": 0}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3), None, {"stride": 0}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3), None, {"stride": (1, -1)}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3), None, {"padding": -1}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3), None, {"dilation": (1, 0)}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3), None, {"stride": 2, "padding": "same"}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3), None, {"padding": "foo"}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3), None, {"stride": (1, 2, 3)}),
    ("conv2d", (1, 1, 8, 8), (1, 1, 3, 3), None, {"padding": (1, 2, 3)}),
    ("conv2d", (2, 1, 8, 8), (0, 1, 3, 3), None, {}),
    ("conv2d", (1, 8, 8), (2, 3, 3, 3), None, {}),
    ("conv2d", (1, 8, 8), (2, 1, 9, 3), None, {}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 3, "padding": 2}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 3, "padding": 2, "dilation": 2}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": (3, 1), "padding": (1, 1)}),
    ("max_pool2d", (1, 1, 2, 2), None, None, {"kernel_size": 3}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 0}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 0, "stride": 1}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 2, "stride": -1}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 2, "padding": -1}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 2, "dilation": 0}),
    ("max_pool2d", (8, 8), None, None, {"kernel_size": 2}),
    ("max_pool2d", (1, 0, 8, 8), None, None, {"kernel_size": 2}),
    ("max_pool2d", (0, 8, 8), None, None, {"kernel_size": 2}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": (2, 2, 2)}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 2, "stride": (1, 2, 3)}),
    ("max_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 2, "dilation": (1, 2, 3)}),
    ("avg_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 3, "padding": 2}),
    ("avg_pool2d", (1, 1, 2, 2), None, None, {"kernel_size": 3}),
    ("avg_pool2d", (8, 8), None, None, {"kernel_size": 2}),
    ("avg_pool2d", (1, 1, 1, 8, 8), None, None, {"kernel_size": 2}),
    ("avg_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 2, "divisor_override": 0}),
    ("avg_pool2d", (1, 1, 8, 8), None, None, {"kernel_size": 2, "padding": (1, 2, 3)}),
]


def _call(M, F, fn, xs, ws, bs, kw, dtype="float32"):
    dt = getattr(M, dtype)
    x = M.zeros(xs, dtype=dt, requires_grad=True)
    if fn == "conv2d":
        return F.conv2d(x, M.zeros(ws, dtype=dt), None if bs is None else M.zeros(bs, dtype=dt),
                        **kw)
    return getattr(F, fn)(x, **kw)


def _error(M, F, *case):
    try:
        _call(M, F, *case)
    except Exception as e:
        return type(e).__name__, str(e).splitlines()[0]
    return None


@pytest.mark.parametrize("case", ERROR_CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                   enumerate(ERROR_CASES)])
def test_errors_match_torch(torch, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = _error(torch, torch.nn.functional, *case)
    assert expected is not None
    assert _error(jitgrad, C, *case) == expected


@pytest.mark.parametrize("dtypes,message", [
    (("float32", "float64", None), "expected scalar type Float but found Double"),
    (("float64", "float32", None), "expected scalar type Double but found Float"),
    (("float32", "float32", "float64"),
     "Input type (float) and bias type (double) should be the same"),
])
def test_dtype_mismatch_errors(dtypes, message):
    def t(dt, shape):
        return None if dt is None else jitgrad.zeros(shape, dtype=getattr(jitgrad, dt))

    with pytest.raises(RuntimeError) as info:
        C.conv2d(t(dtypes[0], (1, 1, 4, 4)), t(dtypes[1], (1, 1, 3, 3)), t(dtypes[2], (1,)))
    assert str(info.value) == message


@pytest.mark.parametrize("case,message", [
    (ERROR_CASES[0], "Given groups=1, weight of size [16, 3, 3, 3], expected input[8, 1, 8, 8] "
                     "to have 3 channels, but got 1 channels instead"),
    (ERROR_CASES[1], "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). "
                     "Kernel size can't be greater than actual input size"),
    (ERROR_CASES[3], "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input "
                     "of size: [8, 8]"),
    (ERROR_CASES[21], "Given groups=1, weight of size [2, 3, 3, 3], expected input[1, 1, 8, 8] "
                      "to have 3 channels, but got 1 channels instead"),
    (ERROR_CASES[23], "pad should be at most half of effective kernel size, but got pad=2, "
                      "kernel_size=3 and dilation=1"),
    (ERROR_CASES[26], "Given input size: (1x2x2). Calculated output size: (1x0x0). Output size "
                      "is too small"),
])
def test_error_messages_without_torch(case, message):
    assert _error(jitgrad, C, *case) == ("RuntimeError", message)


def test_a_failed_call_changes_nothing():
    x = jitgrad.ones(2, 1, 5, 5, requires_grad=True)
    w = jitgrad.ones(4, 3, 3, 3, requires_grad=True)
    versions = (x._version, w._version)
    for fn in (lambda: C.conv2d(x, w), lambda: C.max_pool2d(x, 3, padding=2),
               lambda: C.avg_pool2d(x, 9)):
        with pytest.raises(RuntimeError):
            fn()
    assert (x._version, w._version) == versions
    assert x.grad is None and w.grad is None
    assert x.tolist() == jitgrad.ones(2, 1, 5, 5).tolist()


def test_integer_inputs_are_rejected_with_their_dtype():
    with pytest.raises(RuntimeError, match="float32 and float64 .* got int64"):
        C.conv2d(jitgrad.zeros(1, 1, 4, 4, dtype=jitgrad.int64),
                 jitgrad.zeros(1, 1, 3, 3, dtype=jitgrad.int64))
    with pytest.raises(RuntimeError, match="max_pool2d: .* got int64"):
        C.max_pool2d(jitgrad.zeros(1, 4, 4, dtype=jitgrad.int64), 2)


def test_numpy_arrays_and_sequences_are_accepted():
    x = np.ones((1, 1, 3, 3), F32)
    assert C.conv2d(x, np.ones((1, 1, 2, 2), F32)).tolist() == [[[[4.0, 4.0], [4.0, 4.0]]]]
    assert C.max_pool2d(x[0], [2, 2], stride=[]).shape == (1, 1, 1)


def test_kernels_are_not_compiled_at_import():
    code = ("import sys, jitgrad; assert 'jitgrad.kernels.conv' not in sys.modules; "
            "assert 'jitgrad.kernels.pooling' not in sys.modules; "
            "from jitgrad.kernels import conv, pooling; "
            "assert not conv.lower.signatures and not pooling.max_pool.signatures")
    subprocess.run([sys.executable, "-c", code], check=True)
