"""More PyTorch names (ops/pointwise_composites.py, statistics.py, counting.py, products.py,
the additions to contractions.py and arrangements.py, nn/more_layers.py and nn.init):
PyTorch's values and input gradients (torch 2.13 as the oracle), gradcheck in float64, CUDA
(the simulator) == CPU and compiled == eager where a function is traceable."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_compiled_step_matches_eager

import jitgrad
from jitgrad.autograd import gradcheck


def _arrays(rng):
    m = rng.standard_normal((4, 5))
    nanm = m.copy()
    nanm[1, 2] = nanm[3, 0] = nanm[3, 4] = np.nan
    return {
        "m": m, "m2": rng.standard_normal((4, 5)), "v3": rng.standard_normal((4, 3)),
        "w3": rng.standard_normal((4, 3)), "v": rng.standard_normal(5),
        "v2": rng.standard_normal(5), "nanm": nanm, "sq": rng.standard_normal((4, 4)),
        "b1": rng.standard_normal((3, 4, 2)), "b2": rng.standard_normal((3, 2, 5)),
        "c1": rng.standard_normal((2, 3)), "c2": rng.standard_normal((3, 6)),
        "c3": rng.standard_normal((6, 2)), "img": rng.standard_normal((2, 3, 6, 5)),
        "x1": rng.standard_normal((6, 3)), "x2": rng.standard_normal((6, 4)),
        "bw": rng.standard_normal((2, 3, 4)), "bb": rng.standard_normal(2),
        "pos": np.abs(rng.standard_normal(7)) + 0.1, "mixed": np.array(
            [-2.0, -0.4, 0.0, 0.3, 0.5, 0.7, 2.5, -0.5, -0.0]),
        "q": np.array([0.0, 0.1, 0.5, 0.73, 1.0]),
        "fw": np.array([1, 2, 0, 3, 1]), "aw": rng.uniform(0.5, 1.5, 5),
        "wc": rng.standard_normal((2, 4, 4)) + 3 * np.eye(4),
        "spd": (lambda a: a @ a.T + 4 * np.eye(4))(rng.standard_normal((4, 4))),
        "rhs": rng.standard_normal((2, 4, 3)),
        "sr_idx": np.array([[0, 4, 4], [1, 1, 0], [3, 2, 3], [0, 0, 0]]),
        "ctw": rng.standard_normal((3, 2, 3)),
        "ties": np.array([[1.0, 3.0, 2.0, 3.0, 0.5], [2.0, 2.0, -1.0, 4.0, 4.0]]),
    }


_INT = {"fw", "sr_idx"}

#: name -> (fn(M, get), differentiated input names)
CASES = {
    "deg2rad": (lambda M, g: M.deg2rad(g("m")), ("m",)),
    "rad2deg": (lambda M, g: M.rad2deg(g("m")), ("m",)),
    "copysign": (lambda M, g: M.copysign(g("m"), g("m2")), ("m",)),
    "copysign_scalar": (lambda M, g: M.copysign(g("m"), -0.0), ("m",)),
    "fmax": (lambda M, g: M.fmax(g("nanm"), g("m2")), ("nanm", "m2")),
    "fmin": (lambda M, g: M.fmin(g("m2"), g("nanm")), ("nanm", "m2")),
    "fmax_ties": (lambda M, g: M.fmax(g("m"), g("m") * 1), ("m",)),
    "float_power": (lambda M, g: M.float_power(g("pos"), 2.5), ("pos",)),
    "sinc": (lambda M, g: M.sinc(g("mixed")), ("mixed",)),
    "positive": (lambda M, g: M.positive(g("m")), ("m",)),
    "prod_dim": (lambda M, g: g("m").prod(1), ("m",)),
    "cumprod": (lambda M, g: g("m").cumprod(1), ("m",)),
    "cov": (lambda M, g: M.cov(g("m")), ("m",)),
    "cov_weights": (lambda M, g: M.cov(g("m"), correction=0, fweights=g("fw"),
                                       aweights=g("aw")), ("m", "aw")),
    "corrcoef": (lambda M, g: M.corrcoef(g("m")), ("m",)),
    "quantile": (lambda M, g: M.quantile(g("m"), 0.3, dim=1), ("m",)),
    "quantile_q": (lambda M, g: M.quantile(g("m"), g("q"), dim=0, keepdim=True), ("m",)),
    "quantile_all": (lambda M, g: M.quantile(g("m"), 0.42), ("m",)),
    "quantile_nan": (lambda M, g: M.quantile(g("nanm"), 0.5, dim=1), ("nanm",)),
    "quantile_lower": (lambda M, g: M.quantile(g("m"), 0.6, 1, interpolation="lower"), ("m",)),
    "quantile_higher": (lambda M, g: M.quantile(g("m"), 0.6, 1, interpolation="higher"),
                        ("m",)),
    "quantile_nearest": (lambda M, g: M.quantile(g("m"), g("q"), 1,
                                                 interpolation="nearest"), ("m",)),
    "quantile_midpoint": (lambda M, g: M.quantile(g("m"), 0.6, 1, interpolation="midpoint"),
                          ("m",)),
    "nanquantile": (lambda M, g: M.nanquantile(g("nanm"), g("q"), dim=1), ("nanm",)),
    "nanmedian_dim": (lambda M, g: M.nanmedian(g("nanm"), 1)[0], ("nanm",)),
    "nanmedian_idx": (lambda M, g: M.nanmedian(g("nanm"), 0, keepdim=True)[1], ()),
    "nanmedian": (lambda M, g: M.nanmedian(g("nanm")), ("nanm",)),
    "vdot": (lambda M, g: M.vdot(g("v"), g("v2")), ("v", "v2")),
    "addr": (lambda M, g: M.addr(g("m"), g("v")[:4], g("v2"), beta=0.5, alpha=2.0),
             ("m", "v", "v2")),
    "addbmm": (lambda M, g: M.addbmm(g("sq")[:, :1], g("b1").transpose(1, 2)[:, :, :4]
                                     .transpose(1, 2), g("b1").transpose(1, 2)),
               ("sq", "b1")),
    "multi_dot": (lambda M, g: M.linalg.multi_dot([g("c1"), g("c2"), g("c3")]),
                  ("c1", "c2", "c3")),
    "multi_dot_vec": (lambda M, g: M.linalg.multi_dot([g("c1")[0], g("c2"), g("c3")[:, 0]]),
                      ("c1", "c2", "c3")),
    "cross": (lambda M, g: M.cross(g("v3"), g("w3"), dim=1), ("v3", "w3")),
    "linalg_cross": (lambda M, g: M.linalg.cross(g("v3"), g("w3")), ("v3", "w3")),
    "dist": (lambda M, g: M.dist(g("m"), g("m2"), 3), ("m", "m2")),
    "dist_inf": (lambda M, g: M.dist(g("m"), g("m2"), float("inf")), ("m", "m2")),
    "rot90": (lambda M, g: M.rot90(g("m"), 1, (0, 1)), ("m",)),
    "rot90_3": (lambda M, g: M.rot90(g("img"), 3, (2, 3)), ("img",)),
    "rot90_neg": (lambda M, g: M.rot90(g("m"), -2), ("m",)),
    "block_diag": (lambda M, g: M.block_diag(g("c1"), g("v"), g("sq")), ("c1", "v", "sq")),
    "cartesian_prod": (lambda M, g: M.cartesian_prod(g("v")[:3], g("v2")[:2]), ("v", "v2")),
    "combinations": (lambda M, g: M.combinations(g("v"), 3), ("v",)),
    "combinations_rep": (lambda M, g: M.combinations(g("v")[:3], 2, with_replacement=True),
                         ("v",)),
    "inv": (lambda M, g: M.linalg.inv(g("wc")), ("wc",)),
    "inverse": (lambda M, g: g("wc").inverse(), ("wc",)),
    "det": (lambda M, g: M.det(g("wc")), ("wc",)),
    "logdet": (lambda M, g: g("spd").logdet(), ("spd",)),
    "slogdet": (lambda M, g: M.linalg.slogdet(g("wc"))[1], ("wc",)),
    "slogdet_sign": (lambda M, g: M.linalg.slogdet(g("wc") - 3.5 * M.eye(4))[0], ()),
    "solve": (lambda M, g: M.linalg.solve(g("wc"), g("rhs")), ("wc", "rhs")),
    "solve_vector": (lambda M, g: M.linalg.solve(g("wc")[0], g("rhs")[0, :, 0]),
                     ("wc", "rhs")),
    "solve_right": (lambda M, g: M.linalg.solve(g("wc"), g("rhs").mT, left=False),
                    ("wc", "rhs")),
    "cholesky": (lambda M, g: M.linalg.cholesky((g("spd") + g("spd").mT) * 0.5), ("spd",)),
    "cholesky_upper": (lambda M, g: M.linalg.cholesky((g("spd") + g("spd").mT) * 0.5,
                                                      upper=True), ("spd",)),
    "matrix_power": (lambda M, g: M.linalg.matrix_power(g("wc"), 3), ("wc",)),
    "matrix_power_neg": (lambda M, g: g("wc").matrix_power(-2), ("wc",)),
    "matrix_norm_fro": (lambda M, g: M.linalg.matrix_norm(g("wc")), ("wc",)),
    "matrix_norm_1": (lambda M, g: M.linalg.matrix_norm(g("wc"), 1), ("wc",)),
    "matrix_norm_inf": (lambda M, g: M.linalg.matrix_norm(g("wc"), float("-inf"),
                                                          keepdim=True), ("wc",)),
    "linalg_norm": (lambda M, g: M.linalg.norm(g("m")), ("m",)),
    "linalg_norm_dim": (lambda M, g: M.linalg.norm(g("m"), 3, dim=1), ("m",)),
    "linalg_norm_matrix": (lambda M, g: M.linalg.norm(g("m"), "fro", dim=(0, 1)), ("m",)),
    "vecdot": (lambda M, g: M.linalg.vecdot(g("m"), g("m2"), dim=0), ("m", "m2")),
    "diagonal": (lambda M, g: M.diagonal(g("img"), 1, 3, 2), ("img",)),
    "diagonal_method": (lambda M, g: g("m").diagonal(-2), ("m",)),
    "diag_embed": (lambda M, g: M.diag_embed(g("m"), -1, 0, 2), ("m",)),
    "fill_diagonal": (lambda M, g: (g("m") * 1).fill_diagonal_(2.5), ("m",)),
    "fill_diagonal_wrap": (lambda M, g: (g("c3").mT.mT.repeat(2, 1) * 1).fill_diagonal_(
        -1.0, wrap=True), ("c3",)),
    "logcumsumexp": (lambda M, g: M.logcumsumexp(g("img"), 2), ("img",)),
    "logcumsumexp_wide": (lambda M, g: (g("m") * 300).logcumsumexp(-1), ("m",)),
    "cummax": (lambda M, g: M.cummax(g("ties"), 1)[0], ("ties",)),
    "cummin_idx": (lambda M, g: g("ties").cummin(0)[1], ()),
    "cummax_idx": (lambda M, g: M.cummax(g("ties"), -1).indices, ()),
    "cummax_nan": (lambda M, g: M.cummax(g("nanm"), 1)[1], ()),
    "adaptive_max_pool2d": (lambda M, g: M.nn.functional.adaptive_max_pool2d(
        g("img"), (4, 3)), ("img",)),
    "adaptive_max_pool2d_idx": (lambda M, g: M.nn.functional.adaptive_max_pool2d(
        g("img"), (None, 2), return_indices=True)[1], ()),
    "adaptive_max_pool1d": (lambda M, g: M.nn.functional.adaptive_max_pool1d(
        g("m"), 3), ("m",)),
    "scatter_reduce_mean": (lambda M, g: M.scatter_reduce(
        g("m"), 1, g("sr_idx"), g("m2")[:, :3], "mean"), ("m", "m2")),
    "scatter_reduce_amin": (lambda M, g: g("m").scatter_reduce(
        1, g("sr_idx"), g("m2")[:, :3], "amin", include_self=False), ("m", "m2")),
    "conv_transpose1d": (lambda M, g: M.nn.functional.conv_transpose1d(
        g("img")[:, :, 0, :], g("ctw"), g("bb"), stride=2, padding=1, output_padding=1),
        ("img", "ctw", "bb")),
    "swapdims": (lambda M, g: g("img").swapdims(1, 3), ("img",)),
    "moveaxis": (lambda M, g: M.moveaxis(g("img"), 0, 2), ("img",)),
    "rms_norm": (lambda M, g: M.nn.functional.rms_norm(g("img"), (6, 5), g("m2")[:, :5]
                                                       .repeat(2, 1)[:6]), ("img", "m2")),
    "rms_norm_eps": (lambda M, g: M.nn.functional.rms_norm(g("m"), [5], eps=1e-3), ("m",)),
    "bilinear": (lambda M, g: M.nn.functional.bilinear(g("x1"), g("x2"), g("bw"), g("bb")),
                 ("x1", "x2", "bw", "bb")),
    "unfold": (lambda M, g: M.nn.functional.unfold(g("img"), (2, 3), dilation=(1, 2),
                                                   padding=1, stride=(2, 1)), ("img",)),
    "fold": (lambda M, g: M.nn.functional.fold(
        M.nn.functional.unfold(g("img"), 3, padding=1), (6, 5), 3, padding=1), ("img",)),
    "hardshrink": (lambda M, g: M.nn.functional.hardshrink(g("mixed"), 0.5), ("mixed",)),
    "hardshrink_off_kinks": (lambda M, g: M.nn.functional.hardshrink(g("mixed"), 0.45),
                             ("mixed",)),
    "softshrink": (lambda M, g: M.nn.functional.softshrink(g("mixed"), 0.35), ("mixed",)),
    "tanhshrink": (lambda M, g: M.nn.functional.tanhshrink(g("m")), ("m",)),
    "channel_shuffle": (lambda M, g: M.nn.functional.channel_shuffle(
        g("img").reshape(2, 6, 5, 3), 3), ("img",)),
}
#: integer-valued / non-differentiable functions: values (and dtypes) only
VALUES = {
    "bincount": lambda M: M.bincount(M.tensor([0, 3, 3, 1, 7])),
    "bincount_w": lambda M: M.bincount(M.tensor([0, 3, 3, 1]), M.tensor([0.5, 1.0, 2.0, 4.0]),
                                       minlength=6),
    "bincount_w32": lambda M: M.bincount(M.tensor([0, 2]),
                                         M.tensor([0.5, 1.5], dtype=M.float32)),
    "histc": lambda M: M.histc(M.tensor([0.0, 0.1, 0.5, 1.0, 2.0, -1.0]), 4, 0, 1),
    "histc_auto": lambda M: M.histc(M.tensor([1.0, 2.0, 2.5, 4.0]), 3),
    "searchsorted": lambda M: M.searchsorted(M.tensor([1.0, 3.0, 3.0, 7.0]),
                                             M.tensor([[3.0, 0.0], [8.0, 3.5]])),
    "searchsorted_right": lambda M: M.searchsorted(M.tensor([1, 3, 3, 7]), M.tensor([3, 7]),
                                                   right=True),
    "searchsorted_batch": lambda M: M.searchsorted(
        M.tensor([[1, 3, 5], [2, 4, 6]]), M.tensor([[3, 6], [1, 5]]), side="right"),
    "searchsorted_i32": lambda M: M.searchsorted(M.tensor([1, 3]), M.tensor([2]),
                                                 out_int32=True),
    "searchsorted_scalar": lambda M: M.searchsorted(M.tensor([1, 3]), 2),
    "bucketize": lambda M: M.bucketize(M.tensor([[0.5, 3.0], [9.0, 1.0]]),
                                       M.tensor([1.0, 3.0, 5.0])),
    "tril_indices": lambda M: M.tril_indices(4, 3, -1),
    "triu_indices": lambda M: M.triu_indices(3, 5, 1),
    "tril_indices_i32": lambda M: M.tril_indices(2, 2, dtype=M.int32),
    "prod_int": lambda M: M.prod(M.tensor([[2, 3], [4, 5]], dtype=M.int32), 0),
    "cumprod_int": lambda M: M.cumprod(M.tensor([2, 3, 4], dtype=M.int16), 0),
    "prod_dtype": lambda M: M.tensor([1.5, 2.0]).prod(dtype=M.float64),
}


def _run(lib, name, arrays, dtype=None, device=None):
    from helpers import case_inputs

    fn, diff = CASES[name]
    get, _ = case_inputs(lib, arrays, diff, _INT, dtype, device)
    return fn(lib, get), [get(k) for k in diff]


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_pytorch(name):
    torch = pytest.importorskip("torch")
    arrays = _arrays(np.random.default_rng(11))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, ins = _run(jitgrad, name, arrays)
        tout, tins = _run(torch, name, arrays)
    assert out.dtype.name == str(tout.dtype).replace("torch.", "")
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12,
                               atol=1e-13)
    if not ins:
        return
    w = np.cos(np.arange(out.numel()) + 0.5).reshape(tuple(out.shape))
    (out * jitgrad.tensor(w)).nansum().backward()
    (tout * torch.tensor(w)).nansum().backward()
    for a, b in zip(ins, tins):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_integer_functions_match_pytorch(name):
    torch = pytest.importorskip("torch")
    got, want = VALUES[name](jitgrad), VALUES[name](torch)
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    np.testing.assert_array_equal(got.numpy(), want.numpy())


_NO_GRADCHECK = {"nanmedian_idx", "quantile_nan", "nanquantile", "nanmedian_dim", "nanmedian",
                 "fmax", "fmin",  # NaNs in the input (values, not differentiable there)
                 "hardshrink",  # inputs on its kinks (hardshrink_off_kinks is checked)
                 "cummax"}  # ties in its input (kinks)


@pytest.mark.parametrize("name", sorted(set(CASES) - _NO_GRADCHECK))
def test_gradcheck(name):
    arrays = _arrays(np.random.default_rng(12))
    fn, diff = CASES[name]
    _, ins = _run(jitgrad, name, arrays)

    def f(*ts):
        table = dict(zip(diff, ts))
        return fn(jitgrad, lambda k: table[k] if k in table else jitgrad.tensor(arrays[k]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert gradcheck(f, tuple(ins), eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["inv", "det", "solve", "cholesky", "slogdet",
                                  "copysign", "fmax", "sinc", "cumprod", "cov", "quantile_q",
                                  "nanquantile", "multi_dot", "cross", "rot90_3", "block_diag",
                                  "rms_norm", "bilinear", "unfold", "fold", "softshrink",
                                  "adaptive_max_pool2d", "diagonal"])
def test_cuda_matches_cpu(name):
    if not jitgrad.cuda.is_available():
        pytest.skip("no CUDA (the simulator)")
    arrays = _arrays(np.random.default_rng(13))
    out, ins = _run(jitgrad, name, arrays, dtype=np.float32)
    cout, cins = _run(jitgrad, name, arrays, dtype=np.float32, device="cuda")
    assert cout.is_cuda
    np.testing.assert_allclose(cout.detach().cpu().numpy(), out.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    out.nansum().backward()
    cout.nansum().backward()
    for a, b in zip(ins, cins):
        np.testing.assert_allclose(b.grad.cpu().numpy(), a.grad.numpy(), rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize("name", ["deg2rad", "copysign", "fmax_ties", "sinc", "prod_dim",
                                  "cumprod", "cov", "quantile", "nanquantile", "vdot", "addr",
                                  "multi_dot", "cross", "dist", "rot90", "block_diag",
                                  "cartesian_prod", "combinations", "rms_norm", "bilinear",
                                  "unfold", "fold", "hardshrink", "softshrink", "inv", "det",
                                  "solve", "cholesky", "matrix_power_neg", "logdet",
                                  "diagonal", "diag_embed", "fill_diagonal",
                                  "adaptive_max_pool2d", "scatter_reduce_mean",
                                  "conv_transpose1d", "logcumsumexp",
                                  "scatter_reduce_amin"])
def test_compiled_matches_eager(name):
    arrays = _arrays(np.random.default_rng(14))
    fn, diff = CASES[name]
    _, ins = _run(jitgrad, name, arrays, dtype=np.float32)
    fixed = {k: jitgrad.tensor(a if k in _INT else a.astype(np.float32))
             for k, a in arrays.items()}

    def step(*ts):
        table = dict(zip(diff, ts))
        return fn(jitgrad, lambda k: table.get(k, fixed[k])).nansum()
    assert_compiled_step_matches_eager(step, ins, *ins, rtol=1e-6, atol=1e-6)


def test_modules():
    torch = pytest.importorskip("torch")
    jnn, tnn = jitgrad.nn, torch.nn
    x = np.random.default_rng(15).standard_normal((2, 4, 6, 6)).astype(np.float32)
    jx, tx = jitgrad.tensor(x), torch.tensor(x)
    for jm, tm in [(jnn.RMSNorm([6, 6]), tnn.RMSNorm([6, 6])),
                   (jnn.Unfold(3, padding=1), tnn.Unfold(3, padding=1)),
                   (jnn.Hardshrink(0.3), tnn.Hardshrink(0.3)),
                   (jnn.Softshrink(), tnn.Softshrink()), (jnn.Tanhshrink(), tnn.Tanhshrink()),
                   (jnn.Softmax2d(), tnn.Softmax2d()),
                   (jnn.ChannelShuffle(2), tnn.ChannelShuffle(2)),
                   (jnn.UpsamplingNearest2d(scale_factor=2),
                    tnn.UpsamplingNearest2d(scale_factor=2)),
                   (jnn.UpsamplingBilinear2d(size=(9, 7)), tnn.UpsamplingBilinear2d(size=(9, 7))),
                   (jnn.Dropout3d(0.5).eval(), tnn.Dropout3d(0.5).eval())]:
        np.testing.assert_allclose(jm(jx).detach().numpy(), tm(tx).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        assert repr(jm) == repr(tm)
    fold_j, fold_t = jnn.Fold((6, 6), 3, padding=1), tnn.Fold((6, 6), 3, padding=1)
    cols = jnn.Unfold(3, padding=1)(jx)
    np.testing.assert_allclose(fold_j(cols).numpy(), fold_t(torch.tensor(cols.numpy())).numpy(),
                               rtol=1e-5, atol=1e-5)
    assert repr(fold_j) == repr(fold_t)
    b = jnn.Bilinear(3, 4, 5)
    assert [n for n, _ in b.named_parameters()] == ["weight", "bias"]
    assert tuple(b.weight.shape) == (5, 3, 4) and repr(b) == repr(tnn.Bilinear(3, 4, 5))
    assert repr(jnn.RMSNorm(4)) == repr(tnn.RMSNorm(4))
    d = jnn.Dropout3d(0.5)
    y = d(jitgrad.ones(4, 8, 2, 2, 2))
    per_channel = y.reshape(4, 8, -1)
    assert bool(((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all())


def test_gumbel_softmax():
    logits = jitgrad.randn(64, 5, requires_grad=True)
    soft = jitgrad.nn.functional.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(1).detach().numpy(), 1.0, rtol=1e-6)
    hard = jitgrad.nn.functional.gumbel_softmax(logits, hard=True)
    assert set(np.unique(hard.detach().numpy())) <= {0.0, 1.0}
    np.testing.assert_array_equal(hard.sum(1).detach().numpy(), 1.0)
    (hard * jitgrad.arange(5.0)).sum().backward()  # straight-through: the soft gradient
    assert logits.grad is not None and float(logits.grad.abs().sum()) > 0


def test_init_functions():
    g = jitgrad.Generator().manual_seed(3)
    w = jitgrad.empty(400, 50)
    jitgrad.nn.init.trunc_normal_(w, mean=0.1, std=0.5, a=-0.3, b=0.6, generator=g)
    assert float(w.min()) >= -0.3 and float(w.max()) <= 0.6
    q = jitgrad.nn.init.orthogonal_(jitgrad.empty(3, 6), gain=2.0)
    np.testing.assert_allclose((q @ q.t()).numpy(), 4 * np.eye(3), atol=1e-5)
    q = jitgrad.nn.init.orthogonal_(jitgrad.empty(6, 2, 2))
    flat = q.reshape(6, 4)
    np.testing.assert_allclose((flat.t() @ flat).numpy(), np.eye(4), atol=1e-5)
    torch = pytest.importorskip("torch")
    for shape, groups in (((4, 2, 3), 1), ((4, 2, 3, 3), 2), ((2, 3, 1, 3, 3), 1)):
        a = jitgrad.nn.init.dirac_(jitgrad.empty(*shape), groups)
        b = torch.nn.init.dirac_(torch.empty(*shape), groups)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(jitgrad.nn.init.eye_(jitgrad.empty(2, 3)).numpy(), np.eye(2, 3))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        jitgrad.nn.init.eye_(jitgrad.empty(3))


def test_errors():
    m = jitgrad.randn(3, 4)
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\] but got 1.5"):
        jitgrad.quantile(m, 1.5)
    with pytest.raises(RuntimeError, match="q values must be in the range"):
        jitgrad.quantile(m, jitgrad.tensor([0.5, 1.5]))
    with pytest.raises(RuntimeError, match="q tensor must be same dtype"):
        jitgrad.quantile(m, jitgrad.tensor([0.5], dtype=jitgrad.float64))
    with pytest.raises(RuntimeError, match="input tensor must be either float or double"):
        jitgrad.quantile(jitgrad.tensor([1, 2]), 0.5)
    with pytest.raises(RuntimeError, match="expected total rotation dims == 2"):
        jitgrad.rot90(m, 1, (0, 1, 2))
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative"):
        jitgrad.bincount(jitgrad.tensor([1, -1]))
    with pytest.raises(RuntimeError, match="inputs dimension -1 must have length 3"):
        jitgrad.linalg.cross(m, m)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        jitgrad.linalg.multi_dot([m, m])
    with pytest.raises(RuntimeError, match="lambda must be greater or equal to 0"):
        jitgrad.nn.functional.softshrink(m, -1.0)
    with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor"):
        jitgrad.positive(jitgrad.tensor([True]))
    with pytest.raises(RuntimeError, match="input matrix is singular"):
        jitgrad.linalg.inv(jitgrad.zeros(2, 2))
    with pytest.raises(RuntimeError, match="not positive-definite"):
        jitgrad.linalg.cholesky(-jitgrad.eye(3))
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        jitgrad.det(jitgrad.ones(2, 3))
    with pytest.raises(RuntimeError, match="Order 3 not supported"):
        jitgrad.linalg.matrix_norm(m, 3)
    with pytest.warns(UserWarning, match="chain_matmul is deprecated"):
        jitgrad.chain_matmul(m, m.t())


@pytest.mark.parametrize("call", ["t_()", "transpose_(0, 1)", "swapdims_(1, 0)",
                                  "swapaxes_(0, 1)", "squeeze_()", "squeeze_(0)",
                                  "unsqueeze_(1)", "unsqueeze_(-1)"])
def test_inplace_view_methods_match_pytorch(call):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(16).standard_normal((1, 3) if "squeeze" in call else (2, 3))
    outs = []
    for M in (jitgrad, torch):
        leaf = M.tensor(a, requires_grad=True)
        x = leaf * 2
        v0 = x._version
        y = eval(f"x.{call}")  # noqa: S307 - the method call under test
        assert y is x and x._version == v0 + 1
        (x * M.tensor(np.arange(x.numel(), dtype=np.float64).reshape(tuple(x.shape)))
         ).sum().backward()
        outs.append((tuple(x.shape), x.detach().numpy().copy(), leaf.grad.numpy()))
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            eval(f"leaf.{call}")  # noqa: S307
    (js, jv, jg), (ts, tv, tg) = outs
    assert js == ts
    np.testing.assert_array_equal(jv, tv)
    np.testing.assert_array_equal(jg, tg)


def test_inplace_view_in_a_compiled_function_runs_eagerly():
    def f(x):
        y = x * 2
        y.unsqueeze_(0)
        return (y * y).sum(1)

    cf = jitgrad.compile(f)
    x = jitgrad.randn(3)
    with pytest.warns(UserWarning, match="changes a tensor's shape in place"):
        got = cf(x)
    np.testing.assert_array_equal(got.numpy(), f(x).numpy())
    assert tuple(x.shape) == (3,)


def test_diagonal_is_a_view_as_in_pytorch():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        x = M.arange(24.0).reshape(2, 3, 4)
        d = x.diagonal(1, 1, 2)
        d.mul_(-1)
        assert x._version == d._version == 1
        x[0, 0, 1] = 100.0
        assert float(d[0, 0]) == 100.0
        if M is jitgrad:
            got = x.numpy().copy()
        else:
            np.testing.assert_array_equal(got, x.numpy())


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("layout", ["offsets", "last_offset", "2d", "padding"])
def test_embedding_bag_matches_pytorch(mode, layout):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(17)
    w = rng.standard_normal((10, 4))
    inp = np.array([1, 2, 4, 5, 4, 3, 2, 9])
    psw = rng.standard_normal(8)
    res = []
    for M in (jitgrad, torch):
        wt = M.tensor(w, requires_grad=True)
        kw = {"mode": mode}
        if mode == "sum":
            kw["per_sample_weights"] = M.tensor(psw if layout != "2d" else psw.reshape(2, 4))
        if layout == "2d":
            args = (M.tensor(inp.reshape(2, 4)), wt)
        else:
            last = layout == "last_offset"
            args = (M.tensor(inp), wt, M.tensor([0, 4, 4, 6] + ([8] if last else [])))
            kw["include_last_offset"] = last
            if layout == "padding":
                kw["padding_idx"] = 2
        o = M.nn.functional.embedding_bag(*args, **kw)
        (o * M.tensor(np.cos(np.arange(o.numel())).reshape(tuple(o.shape)))).sum().backward()
        res.append((o.detach().numpy(), wt.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12, atol=1e-12)


def test_embedding_bag_module_and_adaptive_max_pool_modules():
    torch = pytest.importorskip("torch")
    bag = jitgrad.nn.EmbeddingBag(10, 3, mode="max", padding_idx=0)
    tbag = torch.nn.EmbeddingBag(10, 3, mode="max", padding_idx=0)
    assert repr(bag) == repr(tbag)
    assert [n for n, _ in bag.named_parameters()] == ["weight"]
    assert float(bag.weight[0].abs().sum()) == 0.0
    pre = jitgrad.nn.EmbeddingBag.from_pretrained(jitgrad.ones(4, 2), mode="sum")
    np.testing.assert_array_equal(pre(jitgrad.tensor([[0, 1], [2, 3]])).numpy(), 2.0)
    assert not pre.weight.requires_grad
    with pytest.raises(RuntimeError, match="last offset must be the input's length"):
        jitgrad.nn.functional.embedding_bag(jitgrad.tensor([1, 2]), jitgrad.ones(4, 2),
                                            jitgrad.tensor([0, 1]), include_last_offset=True)
    ct, tct = jitgrad.nn.ConvTranspose1d(4, 6, 3, 2, 1, 1, groups=2), torch.nn.ConvTranspose1d(
        4, 6, 3, 2, 1, 1, groups=2)
    assert repr(ct) == repr(tct) and tuple(ct.weight.shape) == tuple(tct.weight.shape)
    assert [n for n, _ in ct.named_parameters()] == ["weight", "bias"]
    assert tuple(ct(jitgrad.ones(2, 4, 5), output_size=[10]).shape) == (2, 6, 10)
    m, tm = jitgrad.nn.AdaptiveMaxPool2d((2, 3)), torch.nn.AdaptiveMaxPool2d((2, 3))
    assert repr(m) == repr(tm)
    x = np.random.default_rng(18).standard_normal((2, 3, 5, 7))
    np.testing.assert_array_equal(m(jitgrad.tensor(x)).numpy(), tm(torch.tensor(x)).numpy())
    m1 = jitgrad.nn.AdaptiveMaxPool1d(3, return_indices=True)
    t1 = torch.nn.AdaptiveMaxPool1d(3, return_indices=True)
    a, ai = m1(jitgrad.tensor(x[0]))
    b, bi = t1(torch.tensor(x[0]))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(ai.numpy(), bi.numpy())


def test_compiled_functions_follow_python_state_between_calls():
    """Python values the new functions read (a quantile, a reduction's name, a fill value,
    a scan's dim, an eps, a threshold), changed between calls of a compiled function: each
    call equals eager."""
    state = {"q": 0.3, "reduce": "amax", "fill": 2.0, "dim": 1, "eps": 1e-3, "lambd": 0.5}
    x = jitgrad.randn(4, 5)
    idx = jitgrad.tensor([[0, 4, 4], [1, 1, 0], [3, 2, 3], [0, 0, 0]])

    def f(x):
        return (jitgrad.quantile(x, state["q"], dim=1).sum()
                + jitgrad.scatter_reduce(x, 1, idx, x[:, :3] * 2, state["reduce"]).sum()
                + (x * 1).fill_diagonal_(state["fill"]).sum()
                + jitgrad.logcumsumexp(x, state["dim"]).sum()
                + jitgrad.nn.functional.rms_norm(x, [5], eps=state["eps"]).sum()
                + jitgrad.nn.functional.softshrink(x, state["lambd"]).sum())

    cf = jitgrad.compile(f)
    for new in ({}, {"q": 0.7, "reduce": "sum", "fill": -1.0, "dim": 0, "eps": 0.5,
                     "lambd": 0.1}, {"q": 0.1, "reduce": "mean", "fill": 5.0}):
        state.update(new)
        np.testing.assert_allclose(cf(x).item(), f(x).item(), rtol=1e-6)
