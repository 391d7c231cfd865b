"""PyTorch's top-level functions and ``Tensor`` members written with existing ops
(``jitgrad/ops/nn_namespace.py``, ``legacy_linalg.py``, ``torch_namespace.py``,
``view_copies.py``, ``method_aliases.py``): each exported, documented, and equal to PyTorch
in values and gradients, called positionally and with keywords; hand-computed checks of the
core ones run without PyTorch."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.ops import legacy_linalg, nn_namespace, torch_namespace, view_copies

MODULES = (legacy_linalg, nn_namespace, torch_namespace, view_copies)
#: the op aliases declared in jitgrad/ops/method_aliases.py: (jitgrad name, what it is)
EXPORT_ALIASES = {"ger": jitgrad.outer, "concat": jitgrad.cat}
METHOD_ALIASES = ("ger", "argwhere", "addmm_", "addbmm_", "baddbmm_", "addmv_", "addr_")

RNG = np.random.default_rng(1234)


def _arr(*shape, lo=-2.0, hi=2.0, dtype=np.float64):
    return RNG.uniform(lo, hi, shape).astype(dtype)


# ============================================================================ exports
def test_every_name_is_exported_documented_and_torchs():
    torch = pytest.importorskip("torch")
    for mod in MODULES:
        for name in mod.__all__:
            obj = getattr(jitgrad, name)
            # (a function with a dim parameter is exported taking NumPy's names too)
            assert getattr(obj, "__wrapped__", obj) is getattr(mod, name), name
            assert name in jitgrad.__all__, name
            assert obj.__doc__, name
            assert hasattr(torch, name), name
    for name, fn in EXPORT_ALIASES.items():
        unwrapped = [getattr(f, "__wrapped__", f) for f in (getattr(jitgrad, name), fn)]
        assert unwrapped[0] is unwrapped[1] and name in jitgrad.__all__
        assert hasattr(torch, name)


def test_tensor_members_are_torchs():
    torch = pytest.importorskip("torch")
    for name in (*torch_namespace.TENSOR_METHODS, *METHOD_ALIASES):
        assert hasattr(jitgrad.Tensor, name) and hasattr(torch.Tensor, name), name


def test_export_list_without_torch():
    for name in ("conv1d", "dropout", "embedding", "layer_norm", "batch_norm", "kl_div",
                 "cholesky_solve", "triangular_solve", "asarray", "fill", "mode",
                 "histogram", "gradient", "exp_", "clamp_", "zero_", "strided", "t_copy",
                 "ger", "concat", "dsplit", "split_with_sizes", "is_complex", "typename"):
        assert name in jitgrad.__all__ and callable(getattr(jitgrad, name)) or \
            name == "strided", name
    for name in jitgrad.__all__:  # (what `from jitgrad import *` reads)
        getattr(jitgrad, name)
    x = jitgrad.ones(2, 3)
    for name in ("mode", "dsplit", "sum_to_size", "is_complex", "layout", "cholesky",
                 "triangular_solve", "hardshrink", "prelu", "adjoint", "resize_", "ger",
                 "argwhere", "addmm_", "addmv_", "narrow_copy", "unsafe_chunk", "output_nr"):
        assert hasattr(x, name), name


# ===================================================================== the oracle
def _make(M, arrays, grad):
    out = []
    for i, a in enumerate(arrays):
        if isinstance(a, np.ndarray):
            out.append(M.tensor(a, requires_grad=i in grad))
        else:
            out.append(a)
    return out


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def compare(fn, arrays, grad=(), rtol=1e-6, atol=1e-7):
    """``fn(M, *tensors)`` with M jitgrad and torch on the same data: the same outputs
    (values, shapes, dtypes) and, for the inputs listed in ``grad``, the same gradients of
    ``sum(out * w)`` over the float outputs."""
    torch = pytest.importorskip("torch")
    jin, tin = _make(jitgrad, arrays, grad), _make(torch, arrays, grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        jout, tout = _flat(fn(jitgrad, *jin)), _flat(fn(torch, *tin))
    assert len(jout) == len(tout)
    for j, t in zip(jout, tout):
        if not hasattr(t, "detach"):
            assert j == t
            continue
        assert tuple(j.shape) == tuple(t.shape)
        assert str(j.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_allclose(j.detach().numpy(), t.detach().numpy(), rtol=rtol,
                                   atol=atol)
    if not grad:
        return jout
    jl = tl = 0
    for j, t in zip(jout, tout):
        if hasattr(t, "requires_grad") and t.requires_grad:
            w = RNG.standard_normal(tuple(t.shape))
            jl = jl + (j * jitgrad.tensor(w, dtype=j.dtype)).sum()
            tl = tl + (t * torch.tensor(w, dtype=t.dtype)).sum()
    jl.backward()
    tl.backward()
    for i in grad:
        jg, tg = jin[i].grad, tin[i].grad
        if tg is None:
            assert jg is None or not jg.numpy().any(), i
            continue
        np.testing.assert_allclose(jg.numpy(), tg.numpy(), rtol=rtol * 10, atol=atol * 10)
    return jout


X3 = _arr(2, 3, 8)
X4 = _arr(2, 3, 6, 6)
X5 = _arr(1, 2, 4, 4, 4)
W1 = _arr(4, 3, 3)
W1T = _arr(3, 4, 3)
W2 = _arr(4, 3, 3, 3)
W2T = _arr(3, 2, 3, 3)
W3 = _arr(2, 2, 3, 3, 3)
C3 = _arr(3)
P01 = _arr(2, 3, 8, lo=0.05, hi=0.95)
SIGN = np.where(_arr(6) > 0, 1.0, -1.0)

NN_CASES = {
    # convolutions: positional and keyword forms
    "conv1d": (lambda M, x, w, b: M.conv1d(x, w, b, 2, 1, 1, 1), [X3, W1, _arr(4)]),
    "conv1d-kw": (lambda M, x, w: M.conv1d(input=x, weight=w, padding="same", dilation=2),
                  [X3, W1]),
    "conv2d": (lambda M, x, w: M.conv2d(x, w, None, 1, (1, 0)), [X4, W2]),
    "conv2d-kw": (lambda M, x, w: M.conv2d(input=x, weight=w, stride=2, groups=1), [X4, W2]),
    "conv3d": (lambda M, x, w: M.conv3d(x, w, None, 1, 1), [X5, W3]),
    "conv_transpose1d": (lambda M, x, w: M.conv_transpose1d(x, w, None, 2, 1, 1),
                         [X3, W1T]),
    "conv_transpose2d": (lambda M, x, w: M.conv_transpose2d(input=x, weight=w, stride=2,
                                                            output_padding=1), [X4, W2T]),
    "conv_transpose3d": (lambda M, x, w: M.conv_transpose3d(x, w, stride=1, padding=1),
                         [X5, _arr(2, 3, 3, 3, 3)]),
    "convolution": (lambda M, x, w: M.convolution(x, w, None, [2], [1], [1], False, [0], 1),
                    [X3, W1]),
    "convolution-t": (lambda M, x, w: M.convolution(x, w, None, [2, 2], [1, 1], [1, 1], True,
                                                    [1, 1], 1), [X4, W2T]),
    # pools
    "avg_pool1d": (lambda M, x: M.avg_pool1d(x, 3, 2, 1, True, False), [X3]),
    "avg_pool1d-kw": (lambda M, x: M.avg_pool1d(input=x, kernel_size=2), [X3]),
    "max_pool1d": (lambda M, x: M.max_pool1d(x, 3, [], 1, 1, True), [X3]),
    "max_pool1d-kw": (lambda M, x: M.max_pool1d(input=x, kernel_size=2, dilation=2), [X3]),
    "max_pool1d_with_indices": (lambda M, x: M.max_pool1d_with_indices(x, 3, 2), [X3]),
    "max_pool2d": (lambda M, x: M.max_pool2d(x, 2), [X4]),
    "max_pool2d-kw": (lambda M, x: M.max_pool2d(input=x, kernel_size=3, stride=2, padding=1,
                                                 ceil_mode=True), [X4]),
    "max_pool3d": (lambda M, x: M.max_pool3d(x, (2, 2, 2), (), 0, 1, False), [X5]),
    "adaptive_avg_pool1d": (lambda M, x: M.adaptive_avg_pool1d(x, 3), [X3]),
    "adaptive_max_pool1d": (lambda M, x: M.adaptive_max_pool1d(input=x, output_size=5), [X3]),
    # norms
    "layer_norm": (lambda M, x, w, b: M.layer_norm(x, [6, 6], w, b, 1e-3, False),
                   [X4, _arr(6, 6), _arr(6, 6)]),
    "layer_norm-kw": (lambda M, x: M.layer_norm(input=x, normalized_shape=(8,)), [X3]),
    "group_norm": (lambda M, x, w, b: M.group_norm(x, 3, w, b, 1e-4, True), [X4, C3, C3]),
    "instance_norm": (lambda M, x, w, b: M.instance_norm(x, w, b, None, None, True, 0.1, 1e-5,
                                                         False), [X4, C3, C3]),
    "batch_norm": (lambda M, x, w, b: M.batch_norm(x, w, b, None, None, True, 0.1, 1e-5,
                                                   False), [X4, C3, C3]),
    "batch_norm-eval": (lambda M, x, w, m, v: M.batch_norm(
        input=x, weight=w, bias=None, running_mean=m, running_var=v, training=False,
        momentum=0.1, eps=1e-5, cudnn_enabled=True), [X4, C3, C3, _arr(3, lo=0.5, hi=2)]),
    "rms_norm": (lambda M, x, w: M.rms_norm(x, [8], w, 1e-6), [X3, _arr(8)]),
    "rms_norm-kw": (lambda M, x: M.rms_norm(input=x, normalized_shape=[3, 8]), [X3]),
    "bilinear": (lambda M, a, b, w, c: M.bilinear(a, b, w, c), [_arr(4, 3), _arr(4, 5),
                                                                _arr(2, 3, 5), _arr(2)]),
    "embedding": (lambda M, w, i: M.embedding(w, i), [_arr(5, 3), np.array([[0, 4], [1, 1]])]),
    "embedding-pad": (lambda M, w, i: M.embedding(weight=w, indices=i, padding_idx=1),
                      [_arr(5, 3), np.array([0, 1, 1, 4])]),
    "embedding-negpad": (lambda M, w, i: M.embedding(w, i, -2), [_arr(5, 3),
                                                                 np.array([0, 3, 3])]),
    # activations
    "celu": (lambda M, x: M.celu(x, 0.7), [X3]),
    "celu-kw": (lambda M, x: M.celu(input=x), [X3]),
    "celu_": (lambda M, x: M.celu_(x.clone(), alpha=2.0), [X3]),
    "selu": (lambda M, x: M.selu(x), [X3]),
    "selu_": (lambda M, x: M.selu_(input=x.clone()), [X3]),
    "rrelu-eval": (lambda M, x: M.rrelu(x, 0.1, 0.3), [X3]),
    "rrelu_-eval": (lambda M, x: M.rrelu_(x.clone(), lower=0.2, upper=0.4, training=False),
                    [X3]),
    "prelu": (lambda M, x, w: M.prelu(x, w), [X4, C3]),
    "threshold": (lambda M, x: M.threshold(x, 0.3, -1.0), [X3]),
    "threshold_": (lambda M, x: M.threshold_(input=x.clone(), threshold=0.0, value=2.0), [X3]),
    "hardshrink": (lambda M, x: M.hardshrink(x), [X3]),
    "hardshrink-kw": (lambda M, x: M.hardshrink(input=x, lambd=1.0), [X3]),
    "relu_": (lambda M, x: M.relu_(x.clone()), [X3]),
    # rearranges and pads
    "pixel_shuffle": (lambda M, x: M.pixel_shuffle(x, 2), [_arr(2, 8, 3, 3)]),
    "pixel_unshuffle": (lambda M, x: M.pixel_unshuffle(input=x, downscale_factor=3), [X4]),
    "channel_shuffle": (lambda M, x: M.channel_shuffle(x, 2), [_arr(2, 4, 3, 3)]),
    "constant_pad_nd": (lambda M, x: M.constant_pad_nd(x, [1, 2, -1, 1], 0.5), [X3]),
    "constant_pad_nd-kw": (lambda M, x: M.constant_pad_nd(input=x, pad=(2, 0)), [X3]),
    # distances
    "cosine_similarity": (lambda M, a, b: M.cosine_similarity(a, b), [X3, _arr(2, 3, 8)]),
    "cosine_similarity-kw": (lambda M, a, b: M.cosine_similarity(x1=a, x2=b, dim=-1, eps=1e-6),
                             [X3, _arr(2, 3, 8)]),
    "pairwise_distance": (lambda M, a, b: M.pairwise_distance(a, b, 3.0, 1e-6, True),
                          [_arr(4, 5), _arr(4, 5)]),
    "pdist": (lambda M, x: M.pdist(x), [_arr(5, 3)]),
    "pdist-kw": (lambda M, x: M.pdist(input=x, p=1.5), [_arr(5, 3)]),
    # losses (reduction an int; unreduced by default, as PyTorch's binding)
    "kl_div": (lambda M, x, y: M.kl_div(x, y), [X3, P01]),
    "kl_div-mean": (lambda M, x, y: M.kl_div(x, y, 1), [X3, P01]),
    "kl_div-kw": (lambda M, x, y: M.kl_div(input=x, target=y, reduction=2, log_target=True),
                  [X3, _arr(2, 3, 8)]),
    "bce_logits": (lambda M, x, y, w, pw: M.binary_cross_entropy_with_logits(x, y, w, pw, 1),
                   [X3, P01, _arr(8, lo=0.5, hi=1.5), _arr(8, lo=0.5, hi=2)]),
    "bce_logits-kw": (lambda M, x, y: M.binary_cross_entropy_with_logits(
        input=x, target=y, reduction=2), [X3, P01]),
    "bce_logits-none": (lambda M, x, y: M.binary_cross_entropy_with_logits(x, y), [X3, P01]),
    "poisson_nll_loss": (lambda M, x, y: M.poisson_nll_loss(x, y, True, True, 1e-8, 1),
                         [X3, P01 * 4]),
    "poisson_nll_loss-kw": (lambda M, x, y: M.poisson_nll_loss(
        input=x, target=y, log_input=False, full=False, eps=1e-6, reduction=0),
        [P01, P01 * 3]),
    "margin_ranking_loss": (lambda M, a, b, t: M.margin_ranking_loss(a, b, t, 0.2, 1),
                            [_arr(6), _arr(6), SIGN]),
    "margin_ranking_loss-none": (lambda M, a, b, t: M.margin_ranking_loss(a, b, t),
                                 [_arr(6), _arr(6), SIGN]),
    "hinge_embedding_loss": (lambda M, x, t: M.hinge_embedding_loss(x, t, 1.5, 2),
                             [_arr(6), SIGN]),
    "hinge_embedding_loss-kw": (lambda M, x, t: M.hinge_embedding_loss(input=x, target=t),
                                [_arr(6), SIGN]),
    "cosine_embedding_loss": (lambda M, a, b, t: M.cosine_embedding_loss(a, b, t, 0.1, 1),
                              [_arr(6, 4), _arr(6, 4), SIGN]),
    "triplet_margin_loss": (lambda M, a, p, n: M.triplet_margin_loss(a, p, n, 1.0, 2.0, 1e-6,
                                                                     True, 1),
                            [_arr(5, 4), _arr(5, 4), _arr(5, 4)]),
    "triplet_margin_loss-kw": (lambda M, a, p, n: M.triplet_margin_loss(
        anchor=a, positive=p, negative=n, p=1.0), [_arr(5, 4), _arr(5, 4), _arr(5, 4)]),
    # grids
    "grid_sampler": (lambda M, x, g: M.grid_sampler(x, g, 0, 1, False),
                     [X4, _arr(2, 4, 5, 2, lo=-1.1, hi=1.1)]),
    "grid_sampler-nearest": (lambda M, x, g: M.grid_sampler(x, g, 1, 0, True),
                             [X4, _arr(2, 4, 5, 2, lo=-1.1, hi=1.1)]),
    "affine_grid_generator": (lambda M, t: M.affine_grid_generator(t, [2, 3, 4, 5], False),
                              [_arr(2, 2, 3)]),
    "norm_except_dim": (lambda M, v: M.norm_except_dim(v, 2, 1), [X3]),
    "norm_except_dim-all": (lambda M, v: M.norm_except_dim(v, 3, -1), [X3]),
}
NN_NOGRAD_INPUTS = {"embedding": (1,), "embedding-pad": (1,), "embedding-negpad": (1,),
                    "margin_ranking_loss": (2,), "margin_ranking_loss-none": (2,),
                    "hinge_embedding_loss": (1,), "hinge_embedding_loss-kw": (1,),
                    "cosine_embedding_loss": (2,), "batch_norm-eval": (2, 3),
                    "bce_logits": (2, 3)}  # (not differentiable in PyTorch either)


@pytest.mark.parametrize("case", sorted(NN_CASES))
def test_nn_names_match_torch(case):
    fn, arrays = NN_CASES[case]
    skip = NN_NOGRAD_INPUTS.get(case, ())
    grad = tuple(i for i, a in enumerate(arrays)
                 if isinstance(a, np.ndarray) and a.dtype.kind == "f" and i not in skip)
    compare(fn, arrays, grad)


def test_ctc_loss_matches_torch():
    lp = np.log(RNG.dirichlet(np.ones(5), (6, 2)))
    targets = np.array([[1, 2, 2], [3, 1, 0]])
    for red in (0, 1, 2):
        compare(lambda M, x, t, red=red: M.ctc_loss(x, t, [6, 5], [3, 2], 0, red),
                [lp, targets], (0,))
    compare(lambda M, x, t: M.ctc_loss(log_probs=x, targets=t, input_lengths=[6, 6],
                                       target_lengths=[3, 2], zero_infinity=True),
            [lp, targets], (0,))


def test_stride_default_is_the_kernel_size():
    x = jitgrad.tensor(X4)
    for s in ((), [], None):
        assert jitgrad.max_pool2d(x, 2, s).shape == (2, 3, 3, 3)
        assert jitgrad.max_pool1d(jitgrad.tensor(X3), 4, s).shape == (2, 3, 2)


def test_embedding_is_weight_first_without_torch():
    w = jitgrad.arange(6.0).reshape(3, 2).requires_grad_()
    out = jitgrad.embedding(w, jitgrad.tensor([2, 0, 2]), padding_idx=2)
    assert out.tolist() == [[4.0, 5.0], [0.0, 1.0], [4.0, 5.0]]
    out.sum().backward()
    assert w.grad.tolist() == [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]  # row 2 is padding
    w.grad = None
    jitgrad.embedding(w, jitgrad.tensor([2, 2])).sum().backward()  # -1: no padding
    assert w.grad.tolist() == [[0.0, 0.0], [0.0, 0.0], [2.0, 2.0]]


def test_batch_norm_argument_order_without_torch():
    x = jitgrad.tensor([[1.0, 10.0], [3.0, 30.0]])
    w, b = jitgrad.tensor([2.0, 1.0]), jitgrad.tensor([0.0, 5.0])
    mean, var = jitgrad.tensor([1.0, 10.0]), jitgrad.tensor([4.0, 100.0])
    out = jitgrad.batch_norm(x, w, b, mean, var, False, 0.1, 0.0, False)
    np.testing.assert_allclose(out.numpy(), [[0.0, 5.0], [2.0, 7.0]])
    out = jitgrad.layer_norm(jitgrad.tensor([[1.0, 3.0]]), [2], eps=0.0)
    np.testing.assert_allclose(out.numpy(), [[-1.0, 1.0]])


def test_losses_reduce_by_int_without_torch():
    x, y = jitgrad.tensor([1.0, -2.0]), jitgrad.tensor([1.0, -1.0])
    assert jitgrad.hinge_embedding_loss(x, y).tolist() == [1.0, 3.0]  # default 0: none
    assert jitgrad.hinge_embedding_loss(x, y, 1.0, 1).item() == 2.0
    assert jitgrad.hinge_embedding_loss(x, y, 1.0, 2).item() == 4.0
    assert jitgrad.hinge_embedding_loss(x, y, 1.0, 7).tolist() == [1.0, 3.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no batchmean warning, unlike F.kl_div
        jitgrad.kl_div(x, jitgrad.tensor([0.5, 0.5]), 1)


def test_grid_sampler_checks_modes():
    x, g = jitgrad.tensor(X4), jitgrad.tensor(_arr(2, 2, 2, 2))
    with pytest.raises(RuntimeError, match="interpolation_mode"):
        jitgrad.grid_sampler(x, g, 5, 0, False)
    with pytest.raises(RuntimeError, match="padding_mode"):
        jitgrad.grid_sampler(x, g, 0, 3, False)


# ----------------------------------------------------------------------------- dropouts
DROPOUTS = ("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")


@pytest.mark.parametrize("name", DROPOUTS)
def test_dropouts_off_and_errors_match_torch(name):
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        x = M.ones(4, 3, 2)
        assert getattr(M, name)(x, 0.5, False) is x
        assert getattr(M, name)(input=x, p=0.0, train=True) is x
        assert getattr(M, name + "_")(x, 0.3, False) is x
        one_d = M.ones(3)
        assert getattr(M, name)(one_d, 0.5, False) is one_d
        for p in (-0.1, 1.5):
            with pytest.raises(RuntimeError, match="dropout probability has to be between 0 "
                               f"and 1, but got {p}"):
                getattr(M, name)(x, p, True)
        if name.startswith("feature"):
            with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 "
                               "dimensions in the input"):
                getattr(M, name)(one_d, 0.5, True)
        zeroed = getattr(M, name)(x, 1.0, True)
        if "alpha" not in name:
            assert not zeroed.numpy().any()
        leaf = M.ones(3, 2, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            getattr(M, name + "_")(leaf, 0.5, True)


def test_dropout_masks_and_gradients():
    jitgrad.manual_seed(0)
    x = jitgrad.ones(50, 40, requires_grad=True)
    out = jitgrad.dropout(x, 0.25, True)
    vals = set(np.unique(out.detach().numpy()).tolist())
    assert vals == {0.0, float(np.float32(1.0) / np.float32(0.75))}
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), out.detach().numpy())
    f = jitgrad.feature_dropout(jitgrad.ones(30, 20, 5), 0.5, True).numpy()
    assert (f == f[:, :, :1]).all() and set(np.unique(f).tolist()) == {0.0, 2.0}
    a = jitgrad.feature_alpha_dropout(jitgrad.zeros(30, 20, 4), 0.5, True).numpy()
    assert (a == a[:, :, :1]).all() and len(np.unique(a)) == 2
    y = jitgrad.ones(200, 10)
    assert jitgrad.dropout_(y, 0.5, True) is y and set(np.unique(y.numpy()).tolist()) == {
        0.0, 2.0}
    z = jitgrad.zeros(400)
    r = jitgrad.alpha_dropout_(z, 0.2, True)
    assert r is z and len(np.unique(z.numpy())) == 2
    w = jitgrad.ones(10, 3, 4)
    assert jitgrad.feature_dropout_(w, 0.5, True) is w
    assert jitgrad.feature_alpha_dropout_(w, 0.5, True) is w


def test_rrelu_training_draws_from_the_generator():
    x = jitgrad.tensor(-np.ones((100,)))
    g1, g2 = jitgrad.Generator(), jitgrad.Generator()
    g1.manual_seed(3)
    g2.manual_seed(3)
    a = jitgrad.rrelu(x, 0.1, 0.3, True, g1)
    b = jitgrad.rrelu(x, 0.1, 0.3, training=True, generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert ((-a.numpy() >= 0.1) & (-a.numpy() <= 0.3)).all() and len(np.unique(a.numpy())) > 50
    y = x.clone()
    assert jitgrad.rrelu_(y, 0.2, 0.25, True) is y and (y.numpy() <= -0.2).all()


# ======================================================================= in-place forms
POS, UNIT, ABOVE1 = (0.1, 2.0), (-0.9, 0.9), (1.1, 3.0)
INPLACE = {
    "abs_": (), "acos_": ((), UNIT), "acosh_": ((), ABOVE1), "arccos_": ((), UNIT),
    "arccosh_": ((), ABOVE1), "arcsin_": ((), UNIT), "arcsinh_": (), "arctan_": (),
    "arctanh_": ((), UNIT), "asin_": ((), UNIT), "asinh_": (), "atan_": (),
    "atanh_": ((), UNIT), "ceil_": (), "clamp_": ((-0.5, 0.7),), "clamp_max_": ((0.2,),),
    "clamp_min_": ((-0.1,),), "clip_": ((None, 0.3),), "cos_": (), "cosh_": (),
    "deg2rad_": (), "erf_": (), "erfc_": (), "exp2_": (), "exp_": (), "expm1_": (),
    "fill_": ((2.5,),), "fix_": (), "floor_": (), "frac_": (), "i0_": (),
    "log10_": ((), POS), "log1p_": ((), POS), "log2_": ((), POS), "log_": ((), POS),
    "logit_": ((1e-3,), (0.05, 0.95)), "nan_to_num_": (), "neg_": (), "negative_": (),
    "rad2deg_": (), "reciprocal_": ((), POS), "relu_": (), "round_": (),
    "rsqrt_": ((), POS), "sigmoid_": (), "sin_": (), "sinc_": (), "sinh_": (),
    "sqrt_": ((), POS), "square_": (), "tan_": ((), UNIT), "tanh_": (), "trunc_": (),
    "zero_": (),
}


#: PyTorch has no derivative for these in place ("the derivative for 'inplace version of
#: acosh' is not implemented"); jitgrad's is the out-of-place one's (checked against it)
NO_TORCH_INPLACE_GRAD = {"acosh_", "arccosh_", "asinh_", "arcsinh_", "atanh_", "arctanh_"}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_forms_match_torch(name):
    spec = INPLACE[name]
    args = spec[0] if spec else ()
    lo, hi = spec[1] if len(spec) > 1 else (-2.0, 2.0)
    x = _arr(3, 4, lo=lo, hi=hi)
    if name in NO_TORCH_INPLACE_GRAD:
        compare(lambda M, t: getattr(M, name)(t.clone(), *args), [x])
        compare(lambda M, t: getattr(M, name[:-1])(t), [x], (0,))
        a = jitgrad.tensor(x, requires_grad=True)
        b = jitgrad.tensor(x, requires_grad=True)
        getattr(jitgrad, name)(a.clone()).sum().backward()
        getattr(jitgrad, name[:-1])(b).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())
    else:
        compare(lambda M, t: getattr(M, name)(t.clone(), *args), [x], (0,))
    t = jitgrad.tensor(x)
    assert getattr(jitgrad, name)(t, *args) is t
    np.testing.assert_array_equal(t.numpy(), getattr(jitgrad.tensor(x), name)(*args).numpy())


def test_inplace_forms_with_other_operands_match_torch():
    ints = [np.array([4, 6, 9]), np.array([6, 4, 3])]
    compare(lambda M, a, b: M.gcd_(a, b), ints)
    compare(lambda M, a, b: M.lcm_(a, b), ints)
    compare(lambda M, x, e: M.ldexp_(x.clone(), e), [_arr(3), np.array([1, 2, 3])], (0,))
    # (PyTorch's gradient is 0 for negative exponents: it takes 2**e in integers)
    compare(lambda M, x, e: M.ldexp_(x.clone(), e), [_arr(3), np.array([1, -2, 3])])
    compare(lambda M, x, y: M.xlogy_(x.clone(), y), [_arr(4), _arr(4, lo=0.1)], (0, 1))
    compare(lambda M, x: M.round_(x.clone(), decimals=1), [_arr(5)], (0,))
    compare(lambda M, x: M.clamp_(x.clone(), min=-0.5), [_arr(5)], (0,))
    compare(lambda M, x: M.nan_to_num_(x.clone(), nan=0.5, posinf=9.0),
            [np.array([np.nan, np.inf, -np.inf, 1.0])])
    compare(lambda M, x, v: M.index_put_(x.clone(), (M.tensor([0, 2]),), v),
            [_arr(4), _arr(2)], (0, 1))
    compare(lambda M, x, m, v: M.addmv_(x.clone(), m, v, beta=0.5, alpha=2),
            [_arr(3), _arr(3, 4), _arr(4)], (0, 1, 2))
    compare(lambda M, x: M.detach_(x.clone()), [_arr(3)])


def test_inplace_forms_without_torch():
    x = jitgrad.tensor([-1.5, 0.25, 2.0])
    assert jitgrad.clamp_(x, -1.0, 1.0) is x and x.tolist() == [-1.0, 0.25, 1.0]
    assert jitgrad.exp_(jitgrad.zeros(2)).tolist() == [1.0, 1.0]
    assert jitgrad.zero_(x) is x and x.tolist() == [0.0, 0.0, 0.0]
    assert jitgrad.fill_(x, 3).tolist() == [3.0, 3.0, 3.0]
    leaf = jitgrad.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        jitgrad.sqrt_(leaf)
    assert torch_namespace.INPLACE_FORMS == tuple(sorted(torch_namespace.INPLACE_FORMS))


# ================================================================ product aliases
@pytest.mark.parametrize("name, shapes", [
    ("addmm_", [(3, 4), (3, 2), (2, 4)]), ("addmv_", [(3,), (3, 2), (2,)]),
    ("addr_", [(3, 4), (3,), (4,)]), ("addbmm_", [(3, 4), (2, 3, 5), (2, 5, 4)]),
    ("baddbmm_", [(2, 3, 4), (2, 3, 5), (2, 5, 4)])])
def test_product_inplace_methods_match_torch(name, shapes):
    arrays = [_arr(*s) for s in shapes]
    compare(lambda M, a, b, c: getattr(a.clone(), name)(b, c, beta=0.5, alpha=1.5), arrays,
            (0, 1, 2))
    compare(lambda M, a, b, c: getattr(a.clone(), name)(b, c), arrays, (0, 1, 2))


def test_ger_concat_argwhere():
    compare(lambda M, a, b: M.ger(a, b), [_arr(3), _arr(4)], (0, 1))
    compare(lambda M, a, b: a.ger(vec2=b), [_arr(3), _arr(4)], (0, 1))
    compare(lambda M, a, b: M.concat((a, b), 1), [_arr(2, 3), _arr(2, 1)], (0, 1))
    compare(lambda M, a, b: M.concat(tensors=[a, b], dim=0), [_arr(2, 3), _arr(1, 3)], (0, 1))
    compare(lambda M, a: a.argwhere(), [np.array([[0, 1], [2, 0]])])
    assert jitgrad.ger(jitgrad.tensor([1.0, 2.0]), jitgrad.tensor([3.0])).tolist() == [[3.0],
                                                                                      [6.0]]


# ==================================================================== legacy linalg
def _spd(n=4, batch=()):
    a = _arr(*batch, n, n)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def test_cholesky_matches_torch():
    a = _spd(4, (2,))
    for upper in (False, True):
        compare(lambda M, x, upper=upper: M.cholesky(x, upper), [a], (0,), rtol=1e-9, atol=1e-10)
        compare(lambda M, x, upper=upper: x.cholesky(upper=upper), [a], (0,), rtol=1e-9, atol=1e-10)
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        jitgrad.cholesky(jitgrad.tensor(_spd()))


def _tri_grads_agree(fn, upper_of_factor, arrays, factor_index):
    """``fn`` against PyTorch: values, the gradients of every input but the factor, and the
    factor's on the triangle it is read from (PyTorch's formula also fills the other)."""
    torch = pytest.importorskip("torch")
    out = compare(fn, arrays)
    grads = []
    for M in (jitgrad, torch):
        ins = [M.tensor(a, requires_grad=True) for a in arrays]
        r = fn(M, *ins)
        r = r[0] if isinstance(r, tuple) else r
        (r * M.tensor(np.linspace(-1, 1, r.numel()).reshape(tuple(r.shape)))).sum().backward()
        grads.append([t.grad.numpy() for t in ins])
    tri = np.triu if upper_of_factor else np.tril
    for i, (j, t) in enumerate(zip(*grads)):
        if i == factor_index:
            j, t = tri(j), tri(t)
        np.testing.assert_allclose(j, t, rtol=1e-8, atol=1e-9)
    return out


def test_cholesky_solve_and_inverse_match_torch():
    lower = np.linalg.cholesky(_spd(3, (2,)))
    b = _arr(2, 3, 2)
    _tri_grads_agree(lambda M, x, u: M.cholesky_solve(x, u), False, [b, lower], 1)
    _tri_grads_agree(lambda M, x, u: M.cholesky_solve(input=x, input2=u, upper=True), True,
                     [b, np.swapaxes(lower, -1, -2)], 1)
    _tri_grads_agree(lambda M, x, u: x.cholesky_solve(u), False, [_arr(3, 1), lower], 1)
    _tri_grads_agree(lambda M, u: M.cholesky_inverse(u), False, [lower], 0)
    _tri_grads_agree(lambda M, u: u.cholesky_inverse(upper=True), True,
                     [np.swapaxes(lower, -1, -2)], 0)


def test_triangular_solve_matches_torch():
    a = np.triu(_arr(2, 1, 3, 3)) + 3 * np.eye(3)
    b = _arr(4, 3, 2)
    for kw in ({}, {"upper": True, "transpose": True}, {"unitriangular": True}):
        compare(lambda M, x, y, kw=kw: M.triangular_solve(x, y, **kw), [b, a], (0, 1))
    compare(lambda M, x, y: x.triangular_solve(y.mT, upper=False), [b, a], (0, 1))
    with pytest.warns(UserWarning, match="torch.triangular_solve is deprecated"):
        r = jitgrad.triangular_solve(jitgrad.tensor(b), jitgrad.tensor(a))
    assert r.solution.shape == (2, 4, 3, 2) and r.cloned_coefficient.shape == (2, 4, 3, 3)
    assert "torch.return_types.triangular_solve" in repr(r)


def test_legacy_linalg_errors_match_torch():
    torch = pytest.importorskip("torch")
    cases = [
        lambda M: M.cholesky_solve(M.ones(3), M.eye(3)),
        lambda M: M.cholesky_solve(M.ones(3, 2), M.ones(3)),
        lambda M: M.cholesky_solve(M.ones(4, 2), M.eye(3)),
        lambda M: M.cholesky_solve(M.ones(3, 2), M.ones(3, 4)),
        lambda M: M.cholesky_solve(M.ones(3, 2, dtype=M.float64), M.eye(3)),
        lambda M: M.cholesky_inverse(M.ones(3)),
        lambda M: M.cholesky_inverse(M.ones(3, 4)),
        lambda M: M.triangular_solve(M.ones(3), M.eye(3)),
        lambda M: M.triangular_solve(M.ones(4, 2), M.eye(3)),
        lambda M: M.cholesky(M.ones(3)),
        lambda M: M.cholesky(-M.eye(3)),
        lambda M: M.frobenius_norm(M.ones(2, 2, 2), (0, 1, 2)),
        lambda M: M.nuclear_norm(M.ones(3)),
    ]
    for case in cases:
        errors = []
        for M in (jitgrad, torch):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                with pytest.raises((RuntimeError, NotImplementedError)) as info:
                    case(M)
            errors.append(str(info.value).split("\n")[0])
        assert errors[0] == errors[1]


def test_norms_match_torch():
    x = _arr(2, 3, 4)
    compare(lambda M, t: M.nuclear_norm(t), [x], (0,), rtol=1e-9, atol=1e-10)
    compare(lambda M, t: M.nuclear_norm(t, True), [x[0]], (0,), rtol=1e-9, atol=1e-10)
    compare(lambda M, t: M.nuclear_norm(input=t, dim=(0, 2), keepdim=True), [x], (0,),
            rtol=1e-9, atol=1e-10)
    compare(lambda M, t: M.frobenius_norm(t, (0, 2)), [x], (0,))
    compare(lambda M, t: M.frobenius_norm(input=t, dim=[1], keepdim=True), [x], (0,))
    with pytest.warns(UserWarning, match="at::frobenius_norm is deprecated"):
        assert jitgrad.frobenius_norm(jitgrad.tensor([3.0, 4.0]), 0).item() == 5.0
    with pytest.warns(UserWarning, match="at::nuclear_norm is deprecated"):
        assert jitgrad.nuclear_norm(jitgrad.eye(3) * 2).item() == pytest.approx(6.0)


def test_legacy_linalg_without_torch():
    L = jitgrad.tensor([[2.0, 0.0], [1.0, 3.0]])
    A = L @ L.mT
    b = jitgrad.tensor([[1.0], [2.0]])
    x = jitgrad.cholesky_solve(b, L)
    np.testing.assert_allclose((A @ x).numpy(), b.numpy(), atol=1e-6)
    np.testing.assert_allclose((jitgrad.cholesky_inverse(L) @ A).numpy(), np.eye(2),
                               atol=1e-6)
    with pytest.warns(UserWarning):
        s, c = jitgrad.triangular_solve(b, L, upper=False)
    np.testing.assert_allclose((L @ s).numpy(), b.numpy(), atol=1e-6)
    assert c.tolist() == L.tolist()


# ================================================================= misc functions
def test_asarray_matches_torch():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        t = M.arange(3.0)
        assert M.asarray(t) is t
        assert M.asarray(t, copy=False) is t and M.asarray(t, device="cpu") is t
        c = M.asarray(t, copy=True)
        assert c is not t and c.tolist() == t.tolist()
        assert M.asarray(t, dtype=M.float64).dtype == M.float64
        with pytest.raises(ValueError, match="can't alias tensor with dtype 'Float' into dtype "
                           "'Double'."):
            M.asarray(t, dtype=M.float64, copy=False)
        with pytest.raises(ValueError, match="can't alias arbitrary sequence into a tensor."):
            M.asarray([1, 2], copy=False)
        assert M.asarray([1, 2]).dtype == M.int64 and M.asarray([1.0, 2]).dtype == M.float32
        assert M.asarray(3.5).shape == () and M.asarray((1, 2.5)).tolist() == [1.0, 2.5]
        assert M.asarray([[1, 2]], dtype=M.float64).dtype == M.float64
        n = np.arange(4.0)
        a = M.asarray(n)
        n[0] = 9.0
        assert a[0].item() == 9.0 and a.dtype == M.float64
        s = M.asarray(n[::2])
        n[2] = 7.0
        assert s.tolist() == [9.0, 7.0]
        conv = M.asarray(n, dtype=M.float32)
        n[1] = 5.0
        assert conv[1].item() == 1.0
        with pytest.raises(ValueError, match="can't alias tensor with dtype 'Double' into "
                           "dtype 'Float'."):
            M.asarray(n, dtype=M.float32, copy=False)
        # requires_grad: None keeps; True/False set a leaf's flag (itself), False detaches
        leaf = M.arange(3.0, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            assert M.asarray(leaf) is leaf and leaf.requires_grad
        y = leaf * 2
        assert M.asarray(y, requires_grad=True) is y
        d = M.asarray(y, requires_grad=False)
        assert d is not y and d.grad_fn is None and not d.requires_grad
        conv = M.asarray(leaf, dtype=M.float64, requires_grad=True)
        assert conv.grad_fn is not None
        conv = M.asarray(leaf, dtype=M.float64, requires_grad=False)
        assert conv.grad_fn is None and conv.is_leaf and leaf.requires_grad
        plain = M.arange(3.0)
        assert M.asarray(plain, requires_grad=True) is plain and plain.requires_grad
        assert M.asarray(leaf, requires_grad=False) is leaf and not leaf.requires_grad
        fresh = M.asarray([1.0, 2.0], requires_grad=True)
        assert fresh.requires_grad and fresh.is_leaf
        with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
            M.asarray(M.arange(3), requires_grad=True)


def test_asarray_shares_dlpack_memory():
    torch = pytest.importorskip("torch")
    t = torch.arange(3.0)
    a = jitgrad.asarray(t)
    t[0] = 5.0
    assert a.tolist() == [5.0, 1.0, 2.0]


def test_fill_matches_torch():
    compare(lambda M, x: M.fill(x, 2.5), [_arr(2, 3)], (0,))
    compare(lambda M, x, v: M.fill(x, v), [_arr(2, 3), np.array(1.5)], (0, 1))
    compare(lambda M, x: M.fill(input=x, value=True), [_arr(2)])
    compare(lambda M, x: M.fill(x, 2.7), [np.arange(3)])
    for M in (jitgrad,):
        with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor "
                           "but got tensor with 1 dimensions."):
            M.fill(M.ones(3), M.ones(2))
    x = jitgrad.tensor([np.nan, 1.0], requires_grad=True)
    out = jitgrad.fill(x, 2.0)
    assert out.tolist() == [2.0, 2.0]  # NaN-safe
    out.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_type_queries_match_torch():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        x = M.ones(2, 3)
        assert M.is_complex(x) is False and x.is_complex() is False
        assert M.isreal(x).tolist() == [[True] * 3] * 2 and x.isreal().dtype == M.bool
        assert M.is_conj(x) is False and M.is_neg(x) is False
        assert x.is_conj() is False and x.is_neg() is False
        for f in ("conj", "resolve_conj", "resolve_neg", "real", "conj_physical"):
            assert getattr(M, f)(x) is x, f
        for f in ("conj", "resolve_conj", "resolve_neg", "conj_physical"):
            assert getattr(x, f)() is x, f
        assert x.real is x
        with pytest.raises(RuntimeError, match="imag is not implemented for tensors with "
                           "non-complex dtypes."):
            M.imag(x)
        with pytest.raises(RuntimeError, match="imag is not implemented"):
            x.imag  # noqa: B018
        assert M.get_device(x) == -1
        for flag in ("is_sparse", "is_sparse_csr", "is_quantized", "is_meta", "is_mkldnn",
                     "is_nested", "is_mps", "is_xpu", "is_xla", "is_ipu", "is_vulkan",
                     "is_mtia", "is_maia"):
            assert getattr(x, flag) is False, flag
        assert x.layout is M.strided and isinstance(M.strided, M.layout)
        assert x.output_nr == 0 and (x * 2).output_nr == 0
    assert repr(jitgrad.strided) == "jitgrad.strided"
    assert pickle.loads(pickle.dumps(jitgrad.strided)) is jitgrad.strided


def test_output_nr_of_a_function_with_two_outputs():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        class Two(M.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, a, b):
                return a * 2 + b * 3

        a, b = Two.apply(M.ones(2, requires_grad=True))
        assert (a.output_nr, b.output_nr) == (0, 1)


def test_typename_matches_torch():
    torch = pytest.importorskip("torch")

    class Local:
        pass

    for obj in (3, int, object(), Local, Local(), "s", np.float64(1.0)):
        assert jitgrad.typename(obj) == torch.typename(obj)
    assert jitgrad.typename(jitgrad.ones(2)) == "jitgrad.FloatTensor"
    assert torch.typename(torch.ones(2)) == "torch.FloatTensor"
    assert jitgrad.typename(jitgrad.ones(2, dtype=jitgrad.int64)) == "jitgrad.LongTensor"


def test_anomaly_and_warn_always_flags_match_torch():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        assert M.is_anomaly_enabled() is False and M.is_anomaly_check_nan_enabled() is True
        M.set_anomaly_enabled(True, False)
        try:
            assert M.is_anomaly_enabled() is True
            assert M.is_anomaly_check_nan_enabled() is False
        finally:
            M.set_anomaly_enabled(False)
        assert M.is_anomaly_enabled() is False and M.is_anomaly_check_nan_enabled() is True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # (PyTorch's "has been enabled")
            with M.autograd.detect_anomaly(check_nan=False):
                assert M.is_anomaly_enabled() and not M.is_anomaly_check_nan_enabled()
        assert not M.is_anomaly_enabled() and M.is_anomaly_check_nan_enabled()
        M.autograd.set_detect_anomaly(True)
        assert M.is_anomaly_enabled()
        M.autograd.set_detect_anomaly(False)
        assert M.is_warn_always_enabled() is False
        M.set_warn_always(True)
        try:
            assert M.is_warn_always_enabled() is True
        finally:
            M.set_warn_always(False)
        assert M.is_warn_always_enabled() is False


def test_adjoint_matches_torch():
    compare(lambda M, x: M.adjoint(x), [_arr(2, 3, 4)], (0,))
    compare(lambda M, x: x.adjoint(), [_arr(3, 4)], (0,))
    x = jitgrad.ones(3)
    with pytest.raises(RuntimeError, match=r"tensor.adjoint\(\) is only supported on matrices "
                       "or batches of matrices. Got 1-D tensor."):
        jitgrad.adjoint(x)
    m = jitgrad.ones(2, 3)
    assert m.adjoint()._base is m  # a view


# ------------------------------------------------------------------------------ splits
def test_splits_match_torch():
    x = _arr(4, 6, 6)
    compare(lambda M, t: M.split_with_sizes(t, [1, 3], 0), [x], (0,))
    compare(lambda M, t: M.split_with_sizes(input=t, split_sizes=(2, 4), dim=1), [x], (0,))
    compare(lambda M, t: t.split_with_sizes([5, 1], dim=-1), [x], (0,))
    compare(lambda M, t: M.unsafe_split(t, 4, 1), [x], (0,))
    compare(lambda M, t: M.unsafe_split(input=t, split_size=3), [x], (0,))
    compare(lambda M, t: t.unsafe_split(5, -1), [x], (0,))
    compare(lambda M, t: M.unsafe_split_with_sizes(t, [2, 2, 2], 2), [x], (0,))
    compare(lambda M, t: t.unsafe_split_with_sizes([3, 3]), [_arr(6)], (0,))
    compare(lambda M, t: M.unsafe_chunk(t, 4, 1), [x], (0,))
    compare(lambda M, t: t.unsafe_chunk(chunks=3, dim=2), [x], (0,))
    compare(lambda M, t: M.dsplit(t, 3), [x], (0,))
    compare(lambda M, t: M.dsplit(t, [1, 4]), [x], (0,))
    compare(lambda M, t: t.dsplit((2,)), [x], (0,))
    compare(lambda M, t: M.narrow_copy(t, 1, 2, 3), [x], (0,))
    compare(lambda M, t: t.narrow_copy(dim=-1, start=1, length=2), [x], (0,))


def test_split_errors_match_torch():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        x = M.ones(2, 3, 4)
        with pytest.raises(RuntimeError, match=r"split_with_sizes expects split_sizes to sum "
                           r"exactly to 2 \(input tensor's size at dimension 0\), but got "
                           r"split_sizes=\[1, 2\]"):
            M.split_with_sizes(x, [1, 2])
        with pytest.raises(RuntimeError, match="torch.dsplit requires a tensor with at least 3 "
                           "dimension, but got a tensor with 2 dimensions!"):
            M.dsplit(M.ones(2, 4), 2)
        with pytest.raises(RuntimeError, match="torch.dsplit attempted to split along "
                           "dimension 2, but the size of the dimension 4 is not divisible by "
                           "the split_size 3!"):
            M.dsplit(x, 3)
        with pytest.raises(TypeError, match=r"unsafe_split\(\): argument 'split_size' "
                           r"\(position 2\) must be int, not list"):
            M.unsafe_split(x, [1, 1])
        with pytest.raises(TypeError, match=r"argument 'split_size' \(position 1\)"):
            x.unsafe_split([1, 1])


def test_splits_without_torch():
    x = jitgrad.arange(12.0).reshape(1, 2, 6)
    parts = jitgrad.dsplit(x, [2, 3])
    assert [p.shape[2] for p in parts] == [2, 1, 3] and parts[1].tolist() == [[[2.0], [8.0]]]
    assert [p.tolist() for p in jitgrad.split_with_sizes(jitgrad.arange(5), [2, 3])] == [
        [0, 1], [2, 3, 4]]
    c = jitgrad.narrow_copy(x, 2, 1, 2)
    assert c.tolist() == [[[1.0, 2.0], [7.0, 8.0]]] and c.is_contiguous()
    c[0, 0, 0] = 100.0
    assert x[0, 0, 1].item() == 1.0  # a copy


# --------------------------------------------------------------------------- sum_to_size
def test_sum_to_size_matches_torch():
    x = _arr(2, 3, 4)
    for size in ((4,), (3, 1), (1, 3, 4), (2, 1, 1), (2, 3, 4)):
        compare(lambda M, t, size=size: t.sum_to_size(*size), [x], (0,))
        compare(lambda M, t, size=size: t.sum_to_size(size), [x], (0,))
    compare(lambda M, t: t.sum_to_size(size=(1, 4)), [x], (0,))
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        with pytest.raises(RuntimeError, match=r"size \{\[5\]\} is not expandable to size "
                           r"\{\[2, 3, 4\]\}."):
            M.ones(2, 3, 4).sum_to_size(5)
        with pytest.raises(RuntimeError, match="is not expandable"):
            M.ones(2, 3).sum_to_size(1, 2, 3)


def test_sum_to_size_without_torch():
    x = jitgrad.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    s = x.sum_to_size(1, 2)
    assert s.tolist() == [[4.0, 6.0]]
    s.sum().backward()
    assert x.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]


# --------------------------------------------------------------------------------- mode
@pytest.mark.parametrize("values", [[1.0, 2, 2, 3, 3], [3.0, 3, 2, 2, 1], [5.0, 1, 5, 1, 7],
                                    [1.0, np.nan, np.nan, 2], [2.0, 1, 1, 2, 2, 1], [4.0]])
def test_mode_matches_torch_on_small_rows(values):
    compare(lambda M, x: M.mode(x), [np.array(values)], (0,))


def test_mode_matches_torch():
    torch = pytest.importorskip("torch")
    v = RNG.integers(0, 4, (5, 40))
    for dim, keepdim in ((1, False), (0, True), (-1, True)):
        j = jitgrad.mode(jitgrad.tensor(v), dim, keepdim)
        t = torch.mode(torch.tensor(v), dim=dim, keepdim=keepdim)
        np.testing.assert_array_equal(j.values.numpy(), t.values.numpy())
        assert tuple(j.indices.shape) == tuple(t.indices.shape)
        # (PyTorch's index is some occurrence: its sort is not stable)
        picked = np.take_along_axis(v, j.indices.numpy() if keepdim else
                                    np.expand_dims(j.indices.numpy(), dim), dim)
        np.testing.assert_array_equal(picked.squeeze(dim) if not keepdim else picked,
                                      j.values.numpy())
    compare(lambda M, x: M.mode(input=x, dim=0), [np.array([[1, 2], [1, 3], [0, 2]])])
    compare(lambda M, x: x.mode(1, True), [np.array([[True, False, True]])])
    compare(lambda M, x: M.mode(x), [np.array(3.0)], (0,))
    compare(lambda M, x: M.mode(x, 0), [np.zeros((2, 0))])
    for M in (jitgrad, torch):
        with pytest.raises(IndexError, match="mode\\(\\): Expected reduction dim 0 to have "
                           "non-zero size."):
            M.mode(M.tensor([]))


def test_mode_without_torch():
    x = jitgrad.tensor([[3.0, 1.0, 3.0, 2.0], [2.0, 2.0, 1.0, 1.0]], requires_grad=True)
    values, indices = jitgrad.mode(x)
    assert values.tolist() == [3.0, 1.0] and indices.tolist() == [2, 3]
    values.sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    assert repr(jitgrad.mode(jitgrad.tensor([1, 1]))).startswith("jitgrad.return_types.mode(")


# ---------------------------------------------------------------------------- histogram
def test_histogram_matches_torch():
    x = _arr(4, 5, 6, dtype=np.float32)
    w = _arr(4, 5, 6, lo=0, hi=1, dtype=np.float32)
    edges = np.array([-1.5, -0.2, 0.0, 0.7, 1.9], np.float32)
    # (the equal bins' edges are linspace's, which may differ from PyTorch's in the last bit)
    compare(lambda M, t: M.histogram(t, 7), [x], atol=3e-7)
    compare(lambda M, t: M.histogram(t), [x], atol=3e-7)
    compare(lambda M, t: M.histogram(input=t, bins=4, range=(-1.0, 1.0), density=True), [x],
            atol=3e-7)
    compare(lambda M, t, wt: M.histogram(t, 5, weight=wt), [x, w], atol=3e-7)
    compare(lambda M, t, e, wt: M.histogram(t, e, weight=wt, density=True), [x, edges, w])
    compare(lambda M, t, e: t.histogram(e), [x, edges])
    compare(lambda M, t: M.histogram(t, 2), [np.array([2.0, 2.0])])
    compare(lambda M, t: M.histogram(t, 3), [np.array([], np.float32)])
    compare(lambda M, t: M.histogram(t, 4), [np.array([0.0, 1.0, 2.0, 4.0])])


def test_histogram_errors_match_torch():
    torch = pytest.importorskip("torch")
    cases = [
        lambda M: M.histogram(M.arange(4), 3),
        lambda M: M.histogram(M.ones(3), M.tensor([0, 1, 2])),
        lambda M: M.histogram(M.ones(3), 3, range=(3.0, 1.0)),
        lambda M: M.histogram(M.ones(3), 0),
        lambda M: M.histogram(M.ones(3), 3, range=(0.0, float("inf"))),
        lambda M: M.histogram(M.ones(3), M.tensor([[0.0, 1.0]])),
        lambda M: M.histogram(M.ones(6), 3, weight=M.ones(5)),
        lambda M: M.histogram(M.ones(3), 3, range=(0.0, 1.0, 2.0)),
    ]
    for case in cases:
        errors = []
        for M in (jitgrad, torch):
            with pytest.raises((RuntimeError, NotImplementedError)) as info:
                case(M)
            errors.append((type(info.value), str(info.value)))
        assert errors[0] == errors[1]


def test_histogram_without_torch():
    h, e = jitgrad.histogram(jitgrad.tensor([0.0, 0.5, 1.0, 1.0, 3.0]), 3)
    assert h.tolist() == [2.0, 2.0, 1.0] and e.tolist() == [0.0, 1.0, 2.0, 3.0]
    h, _ = jitgrad.histogram(jitgrad.tensor([0.0, 2.0]), jitgrad.tensor([0.0, 1.0, 4.0]),
                             density=True)
    assert h.tolist() == pytest.approx([0.5, 1.0 / 6.0])


# ----------------------------------------------------------------------------- gradient
@pytest.mark.parametrize("order", [1, 2])
def test_gradient_matches_torch(order):
    x = _arr(4, 5, 6)
    coords = [np.arange(4.0), np.arange(5.0) ** 2, np.cumsum(_arr(6, lo=0.1, hi=1.0))]
    exact = {"rtol": 1e-12, "atol": 1e-12}
    compare(lambda M, t: M.gradient(t, edge_order=order), [x], (0,), **exact)
    compare(lambda M, t: M.gradient(t, spacing=2.0, dim=1, edge_order=order), [x], (0,),
            **exact)
    compare(lambda M, t: M.gradient(t, spacing=[2.0, 0.5], dim=[0, -1], edge_order=order),
            [x], (0,))
    compare(lambda M, t, a, b, c: M.gradient(t, spacing=[a, b, c], edge_order=order),
            [x, *coords], (0,), **exact)
    compare(lambda M, t, c: M.gradient(input=t, spacing=(c,), dim=2, edge_order=order),
            [x.astype(np.float32), coords[2].astype(np.float32)], (0,), rtol=1e-6)
    compare(lambda M, t: M.gradient(t, spacing=2, edge_order=order),
            [RNG.integers(0, 9, (5, 6))])
    compare(lambda M, t: M.gradient(t, dim=(1,), edge_order=order), [x], (0,))
    compare(lambda M, t, c: M.gradient(t, spacing=[c], dim=(1,), edge_order=order),
            [x, np.array([1, 2, 3, 5, 8])], (0,))


def test_gradient_errors_match_torch():
    torch = pytest.importorskip("torch")
    cases = [
        lambda M: M.gradient(M.ones(3, 4), spacing=[1.0]),
        lambda M: M.gradient(M.ones(3, 4), spacing=[1.0, 2.0], dim=0),
        lambda M: M.gradient(M.ones(3, 4), edge_order=3),
        lambda M: M.gradient(M.ones(2), edge_order=2),
        lambda M: M.gradient(M.ones(3, dtype=M.uint8)),
        lambda M: M.gradient(M.ones(3, 3), spacing=[M.ones(3, 1), M.ones(3)]),
        lambda M: M.gradient(M.ones(3, 3), dim=[0, 0]),
    ]
    for case in cases:
        errors = []
        for M in (jitgrad, torch):
            with pytest.raises(RuntimeError) as info:
                case(M)
            errors.append(str(info.value))
        assert errors[0] == errors[1]


def test_gradient_without_torch():
    (g,) = jitgrad.gradient(jitgrad.tensor([1.0, 2.0, 4.0, 8.0]))
    assert g.tolist() == [1.0, 1.5, 3.0, 4.0]
    (g,) = jitgrad.gradient(jitgrad.tensor([1.0, 2.0, 4.0, 8.0]), spacing=2.0, edge_order=2)
    assert g.tolist() == [0.25, 0.75, 1.5, 2.5]
    gy, gx = jitgrad.gradient(jitgrad.tensor([[0.0, 1.0], [2.0, 3.0]]))
    assert gy.tolist() == [[2.0, 2.0], [2.0, 2.0]] and gx.tolist() == [[1.0, 1.0], [1.0, 1.0]]


# ----------------------------------------------------------------------------- sampling
def test_poisson_and_binomial_draws():
    g = jitgrad.Generator()
    g.manual_seed(5)
    rates = jitgrad.tensor([0.0, 1.0, 50.0] * 2000).reshape(3000, 2)
    p = jitgrad.poisson(rates, g)
    assert p.dtype == jitgrad.float32 and p.shape == (3000, 2)
    a = p.numpy().reshape(-1, 3)
    assert (a[:, 0] == 0).all() and abs(a[:, 2].mean() - 50) < 1.0
    assert (a == np.round(a)).all()
    g2 = jitgrad.Generator()
    g2.manual_seed(5)
    np.testing.assert_array_equal(jitgrad.poisson(input=rates, generator=g2).numpy(), p.numpy())
    count = jitgrad.full((4000,), 10.0, dtype=jitgrad.float64)
    b = jitgrad.binomial(count, jitgrad.tensor([0.3], dtype=jitgrad.float64))
    assert b.dtype == jitgrad.float64 and b.shape == (4000,)
    assert 0 <= b.min().item() and b.max().item() <= 10 and abs(b.mean().item() - 3) < 0.2
    assert jitgrad.binomial(jitgrad.tensor([10.0]), jitgrad.tensor([1.5])).item() == 10.0


def test_sampler_errors_match_torch():
    torch = pytest.importorskip("torch")
    cases = [
        lambda M: M.poisson(M.tensor([-1.0])),
        lambda M: M.poisson(M.tensor([1, 2])),
        lambda M: M.binomial(M.tensor([10, 5]), M.tensor([0.5, 0.1])),
        lambda M: M.binomial(M.tensor([10.0], dtype=M.float64), M.tensor([0.5])),
    ]
    for case in cases:
        errors = []
        for M in (jitgrad, torch):
            with pytest.raises((RuntimeError, NotImplementedError, ValueError)) as info:
                case(M)
            errors.append((type(info.value), str(info.value)))
        assert errors[0] == errors[1]


def test_distributions_sample_through_the_samplers():
    from jitgrad.distributions import Binomial, NegativeBinomial, Poisson

    for dist in (Poisson(jitgrad.tensor([2.0, 3.0])),
                 Binomial(5, probs=jitgrad.tensor([0.2, 0.9])),
                 NegativeBinomial(3.0, probs=jitgrad.tensor([0.5]))):
        jitgrad.manual_seed(11)
        a = dist.sample((100,))
        jitgrad.manual_seed(11)
        b = dist.sample((100,))
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert (a.numpy() >= 0).all() and (a.numpy() == np.round(a.numpy())).all()


# ------------------------------------------------------------------- strided creation
def test_empty_strided_matches_torch():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        t = M.empty_strided((2, 3), (1, 2))
        assert t.shape == (2, 3) and t.stride() == (1, 2) and t.dtype == M.float32
        t.fill_(1.0)
        assert t.sum().item() == 6.0
        o = M.empty_strided([2, 3], [0, 0], dtype=M.float64)
        assert o.stride() == (0, 0) and o.dtype == M.float64
        r = M.empty_strided([2, 3], [3, 1], dtype=M.float64, requires_grad=True)
        assert r.requires_grad and r.is_leaf and r.is_contiguous()
        z = M.empty_strided((0, 3), (3, 1))
        assert z.numel() == 0
        n = M.ones(2, dtype=M.float64).new_empty_strided((3, 2), (2, 1))
        assert n.dtype == M.float64 and n.stride() == (2, 1)
        assert M.ones(1).new_empty_strided((2,), (1,), dtype=M.int64).dtype == M.int64
        with pytest.raises(RuntimeError, match=r"dimensionality of sizes \(2\) must match "
                           r"dimensionality of strides \(1\)"):
            M.empty_strided((2, 3), (1,))
        with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
            M.empty_strided((2, 3), (-1, 2))


def test_nonzero_static_matches_torch():
    compare(lambda M, x: M.nonzero_static(x, size=3), [np.array([0, 1, 0, 2])])
    compare(lambda M, x: M.nonzero_static(x, size=1, fill_value=9), [np.array([[0, 1],
                                                                                [3, 0]])])
    compare(lambda M, x: x.nonzero_static(size=4), [np.array([1.0, 0.0])])


def test_resize_matches_torch():
    torch = pytest.importorskip("torch")
    for M in (jitgrad, torch):
        x = M.arange(6.0)
        v = x._version
        assert x.resize_(2, 3) is x and x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        assert x._version > v or M is torch
        x.resize_(4)
        assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
        x.resize_((3, 3))  # grows: the old memory first
        assert x.shape == (3, 3) and x.flatten()[:6].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0,
                                                                    5.0]
        y = M.arange(10.0)[2:5]
        y.resize_(5)
        assert y.tolist() == [2.0, 3.0, 4.0, 5.0, 6.0]
        assert M.arange(4.0).resize_as_(M.ones(2, 2)).tolist() == [[0.0, 1.0], [2.0, 3.0]]
        assert M.resize_as_(M.arange(4.0), M.ones(1, 4)).shape == (1, 4)
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            M.ones(2, requires_grad=True).resize_(3)


def test_resize_refuses_non_contiguous():
    x = jitgrad.arange(6.0).reshape(2, 3).t()
    with pytest.raises(NotImplementedError, match="contiguous"):
        x.resize_(6)
    with pytest.raises(RuntimeError, match="negative dimension"):
        jitgrad.ones(2).resize_(-1)


# --------------------------------------------------------------------------- *_copy
COPIES = {
    "alias_copy": (lambda M, x: M.alias_copy(x), True),
    "detach_copy": (lambda M, x: M.detach_copy(x), False),
    "diagonal_copy": (lambda M, x: M.diagonal_copy(x, 1, 1, 2), True),
    "expand_copy": (lambda M, x: M.expand_copy(x[:, :1], [2, 5, 4]), True),
    "permute_copy": (lambda M, x: M.permute_copy(x, (2, 0, 1)), True),
    "select_copy": (lambda M, x: M.select_copy(x, 1, -1), True),
    "slice_copy": (lambda M, x: M.slice_copy(x, 1, 1, None, 2), True),
    "slice_copy-kw": (lambda M, x: M.slice_copy(input=x, dim=2, end=-1), True),
    "split_copy": (lambda M, x: M.split_copy(x, 2, 1), True),
    "split_with_sizes_copy": (lambda M, x: M.split_with_sizes_copy(x, [1, 3], 2), True),
    "squeeze_copy": (lambda M, x: M.squeeze_copy(x[:1]), True),
    "squeeze_copy-dims": (lambda M, x: M.squeeze_copy(x[:1, :, :1], [0, 2]), True),
    "t_copy": (lambda M, x: M.t_copy(x[0]), True),
    "transpose_copy": (lambda M, x: M.transpose_copy(x, 0, 2), True),
    "unbind_copy": (lambda M, x: M.unbind_copy(x, 2), True),
    "unfold_copy": (lambda M, x: M.unfold_copy(x, 1, 2, 2), True),
    "unsqueeze_copy": (lambda M, x: M.unsqueeze_copy(x, -1), True),
    "view_copy": (lambda M, x: M.view_copy(x, [8, 5]), True),
}


@pytest.mark.parametrize("case", sorted(COPIES))
def test_view_copies_match_torch(case):
    fn, differentiable = COPIES[case]
    out = compare(fn, [_arr(2, 5, 4)], (0,) if differentiable else ())
    for o in out:
        assert o.is_contiguous() and o._base is None


def test_view_copies_without_torch():
    x = jitgrad.arange(6.0).reshape(2, 3)
    t = jitgrad.t_copy(x)
    assert t.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]] and t.is_contiguous()
    t[0, 0] = 9.0
    assert x[0, 0].item() == 0.0
    assert jitgrad.slice_copy(jitgrad.arange(10), 0, 2, None, 3).tolist() == [2, 5, 8]
    with pytest.raises(RuntimeError, match="slice step must be positive"):
        jitgrad.slice_copy(x, 0, None, None, 0)
    leaf = jitgrad.ones(2, requires_grad=True)
    assert not jitgrad.detach_copy(leaf).requires_grad
