"""PyTorch names real scripts use, added in one sweep: the constants, ``nn.modules`` paths,
``nn.common_types`` and ``nn.grad``, top-level helpers (``range``, ``frombuffer``,
``set_default_tensor_type``, ``sym_*``...), ``svd_lowrank`` / ``pca_lowrank``, the storage
and compatibility ``Tensor`` methods, and the lazy norms / transposed convolutions,
``AdaptiveMaxPool3d`` and ``NLLLoss2d``. Each checked against PyTorch where comparable."""

from __future__ import annotations

import array
import importlib
import math
import warnings

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.autograd import gradcheck

RNG = np.random.default_rng(51)


# ================================================================== constants
def test_constants_values_and_types():
    assert jitgrad.pi == math.pi and jitgrad.e == math.e and jitgrad.inf == math.inf
    assert math.isnan(jitgrad.nan) and jitgrad.newaxis is None
    assert all(type(v) is float for v in (jitgrad.pi, jitgrad.e, jitgrad.inf, jitgrad.nan))
    assert jitgrad.ones(3)[jitgrad.newaxis].shape == (1, 3)


def test_constants_match_torch():
    torch = pytest.importorskip("torch")
    for n in ("pi", "e", "inf"):
        assert getattr(jitgrad, n) == getattr(torch, n)
    assert torch.newaxis is jitgrad.newaxis


# ================================================================ nn.modules
MODULE_PATHS = ("utils", "loss", "batchnorm", "conv", "module", "activation", "linear",
                "container", "dropout", "normalization", "pooling", "sparse", "rnn",
                "transformer", "padding", "flatten", "pixelshuffle", "upsampling", "distance",
                "instancenorm", "fold", "channelshuffle", "lazy")


def test_nn_modules_imports():
    from jitgrad.nn.modules.batchnorm import _BatchNorm, _NormBase  # noqa: F401
    from jitgrad.nn.modules.conv import _ConvNd
    from jitgrad.nn.modules.linear import Identity, Linear
    from jitgrad.nn.modules.loss import _Loss, _WeightedLoss  # noqa: F401
    from jitgrad.nn.modules.module import Module
    from jitgrad.nn.modules.utils import _ntuple, _pair, _quadruple, _single, _triple

    assert Module is nn.Module and Linear is nn.Linear and Identity is nn.Identity
    assert _single(3) == (3,) and _pair(3) == (3, 3) and _triple([1, 2, 3]) == (1, 2, 3)
    assert _quadruple(0) == (0, 0, 0, 0) and _ntuple(5)(1) == (1,) * 5
    for m in (nn.Conv1d(1, 1, 3), nn.Conv2d(1, 1, 3), nn.ConvTranspose2d(1, 1, 3)):
        assert isinstance(m, _ConvNd)
    assert nn.modules is importlib.import_module("jitgrad.nn.modules")


def test_nn_modules_names_are_torchs():
    torch = pytest.importorskip("torch")
    for sub in MODULE_PATHS:
        ours = importlib.import_module(f"jitgrad.nn.modules.{sub}")
        theirs = importlib.import_module(f"torch.nn.modules.{sub}")
        for name in ours.__all__:
            assert hasattr(theirs, name), (sub, name)
            if not name.startswith("_") and hasattr(nn, name):
                assert getattr(ours, name) is getattr(nn, name), name
    for name in nn.modules.__all__:
        assert hasattr(torch.nn.modules, name), name


def test_user_loss_subclass_reduction():
    from jitgrad.nn.modules.loss import _Loss, _WeightedLoss

    class AbsLoss(_Loss):
        def forward(self, input, target):
            d = (input - target).abs()
            return d.mean() if self.reduction == "mean" else (
                d.sum() if self.reduction == "sum" else d)

    x, y = jitgrad.tensor([1.0, -2.0]), jitgrad.tensor([0.0, 0.0])
    assert AbsLoss().reduction == "mean" and AbsLoss()(x, y).item() == 1.5
    assert AbsLoss(reduction="sum")(x, y).item() == 3.0
    assert AbsLoss(size_average=False).reduction == "sum"  # the legacy size_average
    w = _WeightedLoss(weight=jitgrad.ones(2))
    assert "weight" in dict(w.named_buffers())


def test_user_batchnorm_subclass():
    from jitgrad.nn.modules.batchnorm import _BatchNorm

    class AnyBN(_BatchNorm):
        def _check_input_dim(self, input):
            if input.ndim < 2:
                raise ValueError("expected at least 2D input")

    m = AnyBN(3, momentum=0.5)
    x = jitgrad.tensor(RNG.standard_normal((4, 3, 2)))
    ref = nn.BatchNorm1d(3, momentum=0.5).double()
    assert np.allclose(m.double()(x).detach().numpy(), ref(x).detach().numpy())
    assert np.allclose(m.running_mean.numpy(), ref.running_mean.numpy())
    assert int(m.num_batches_tracked) == 1
    with pytest.raises(ValueError):
        m(jitgrad.ones(3))
    with pytest.raises(NotImplementedError):
        _BatchNorm(3)(jitgrad.ones(2, 3))
    assert isinstance(nn.BatchNorm2d(2), _BatchNorm) and not isinstance(nn.BatchNorm2d(2),
                                                                         nn.BatchNorm1d)


def test_user_convnd_subclass_and_conv_forward():
    from jitgrad.nn.modules.conv import _ConvNd
    from jitgrad.nn.modules.utils import _pair

    class MyConv(_ConvNd):
        def __init__(self, cin, cout, k):
            super().__init__(cin, cout, _pair(k), _pair(1), _pair(1), _pair(1), False,
                             _pair(0), 1, True, "zeros")

        def forward(self, x):
            return self._conv_forward(x, self.weight * 2, self.bias)

    m = MyConv(2, 3, 3)
    assert m.weight.shape == (3, 2, 3, 3) and m.bias.shape == (3,) and not m.transposed
    x = jitgrad.randn(1, 2, 5, 5)
    assert np.allclose(m(x).detach().numpy(),
                       F.conv2d(x, m.weight * 2, m.bias, 1, 1).detach().numpy(), atol=1e-5)


def test_common_types():
    from jitgrad.nn import common_types as ct

    for name in ("_size_1_t", "_size_2_t", "_size_3_t", "_size_any_t", "_ratio_2_t",
                 "_ratio_any_t", "_size_2_opt_t", "_tensor_list_t"):
        assert getattr(ct, name) is not None
    assert int in ct._size_2_t.__args__ and tuple[int, int] in ct._size_2_t.__args__


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_nn_grad_against_torch(dims):
    torch = pytest.importorskip("torch")
    import torch.nn.grad as tgrad

    shapes = {1: ((2, 4, 9), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
              2: ((2, 4, 7, 6), (6, 4, 3, 2), dict(stride=(2, 1), padding=1, dilation=(1, 2))),
              3: ((1, 2, 5, 5, 4), (3, 2, 2, 3, 2), dict(padding=1))}
    xs, ws, kw = shapes[dims]
    x, w = RNG.standard_normal(xs), RNG.standard_normal(ws)
    out = getattr(torch.nn.functional, f"conv{dims}d")(torch.tensor(x), torch.tensor(w), **kw)
    g = RNG.standard_normal(out.shape)
    ours = getattr(jitgrad.nn.grad, f"conv{dims}d_input")(xs, jitgrad.tensor(w),
                                                          jitgrad.tensor(g), **kw)
    theirs = getattr(tgrad, f"conv{dims}d_input")(xs, torch.tensor(w), torch.tensor(g), **kw)
    assert np.allclose(ours.numpy(), theirs.numpy())
    ours = getattr(jitgrad.nn.grad, f"conv{dims}d_weight")(jitgrad.tensor(x), ws,
                                                           jitgrad.tensor(g), **kw)
    theirs = getattr(tgrad, f"conv{dims}d_weight")(torch.tensor(x), ws, torch.tensor(g), **kw)
    assert np.allclose(ours.numpy(), theirs.numpy())


def test_nn_grad_matches_autograd_and_is_differentiable():
    x = jitgrad.tensor(RNG.standard_normal((1, 2, 5)), requires_grad=True)
    w = jitgrad.tensor(RNG.standard_normal((3, 2, 2)), requires_grad=True)
    out = F.conv1d(x, w)
    g = jitgrad.tensor(RNG.standard_normal(tuple(out.shape)))
    gx, gw = jitgrad.autograd.grad(out, (x, w), g)
    assert np.allclose(jitgrad.nn.grad.conv1d_input(x.shape, w, g).detach().numpy(),
                       gx.numpy())
    assert np.allclose(jitgrad.nn.grad.conv1d_weight(x, w.shape, g).detach().numpy(),
                       gw.numpy())
    assert gradcheck(lambda w: jitgrad.nn.grad.conv1d_input((1, 2, 5), w, g), (w,))
    with pytest.raises(RuntimeError, match="grad_output"):
        jitgrad.nn.grad.conv1d_input((1, 2, 5), w, jitgrad.ones(1, 3, 9))


# ======================================================== top-level helpers
def test_is_inference_and_aliases():
    assert jitgrad.is_inference(jitgrad.ones(2)) is False
    with pytest.raises(TypeError):
        jitgrad.is_inference([1.0])
    assert jitgrad.GradScaler is jitgrad.amp.GradScaler
    assert jitgrad.OutOfMemoryError is jitgrad.cuda.OutOfMemoryError
    assert issubclass(jitgrad.OutOfMemoryError, RuntimeError)


def test_range_values_dtype_and_warning():
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        r = jitgrad.range(1, 4)
    assert r.dtype == jitgrad.float32 and r.tolist() == [1.0, 2.0, 3.0, 4.0]
    with pytest.warns(UserWarning):
        assert jitgrad.range(1, 4, dtype=jitgrad.int64).tolist() == [1, 2, 3, 4]
        assert np.allclose(jitgrad.range(0, 1, 0.3).numpy(), [0, 0.3, 0.6, 0.9])
        with pytest.raises(RuntimeError, match="step must be nonzero"):
            jitgrad.range(1, 4, 0)
        with pytest.raises(RuntimeError, match="inconsistent with step sign"):
            jitgrad.range(4, 1)


def test_range_matches_torch():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args in ((1, 4), (0, 1, 0.25), (5, -1, -2), (0.5, 3.2, 0.7)):
            ours, theirs = jitgrad.range(*args), torch.range(*args)
            assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
            assert np.allclose(ours.numpy(), theirs.numpy())


def test_set_default_tensor_type():
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            jitgrad.set_default_tensor_type(jitgrad.DoubleTensor)
        assert jitgrad.get_default_dtype() == jitgrad.float64
        assert jitgrad.tensor([1.5]).dtype == jitgrad.float64
        with pytest.warns(UserWarning):
            jitgrad.set_default_tensor_type("torch.FloatTensor")
        assert jitgrad.get_default_dtype() == jitgrad.float32
        with pytest.warns(UserWarning):
            with pytest.raises(TypeError, match="only floating-point types"):
                jitgrad.set_default_tensor_type(jitgrad.LongTensor)
            with pytest.raises(TypeError, match="invalid type object"):
                jitgrad.set_default_tensor_type(3)
            if not jitgrad.cuda.is_available():
                with pytest.raises(TypeError, match="not available"):
                    jitgrad.set_default_tensor_type("torch.cuda.FloatTensor")
    finally:
        jitgrad.set_default_dtype(jitgrad.float32)


def test_frombuffer():
    b = bytearray(b"\x01\x02\x03\x04")
    t = jitgrad.frombuffer(b, dtype=jitgrad.int8)
    assert t.tolist() == [1, 2, 3, 4]
    t[0] = 9  # shares the buffer's memory
    assert b[0] == 9
    assert jitgrad.frombuffer(array.array("f", [1, 2]), dtype=jitgrad.float32,
                              requires_grad=True).requires_grad
    for kw, msg in ((dict(dtype=jitgrad.int32, count=2), "requested buffer length"),
                    (dict(dtype=jitgrad.int32, offset=5), "offset"),
                    (dict(dtype=jitgrad.int16, offset=1), "multiple of element size")):
        with pytest.raises(ValueError, match=msg):
            jitgrad.frombuffer(b, **kw)
    with pytest.raises(ValueError, match="must not be 0"):
        jitgrad.frombuffer(bytearray(), dtype=jitgrad.float32)
    with pytest.raises(ValueError, match="buffer protocol"):
        jitgrad.frombuffer([1, 2], dtype=jitgrad.int8)


def test_frombuffer_matches_torch():
    torch = pytest.importorskip("torch")
    b = bytes(range(16))
    for kw in (dict(count=2, offset=4), dict(offset=8), dict()):
        ours = jitgrad.frombuffer(bytearray(b), dtype=jitgrad.int16, **kw)
        theirs = torch.frombuffer(bytearray(b), dtype=torch.int16, **kw)
        assert ours.tolist() == theirs.tolist()


def test_to_dlpack_roundtrip():
    x = jitgrad.arange(4.0)
    cap = jitgrad.to_dlpack(x)
    assert type(cap).__name__ == "PyCapsule"
    assert np.from_dlpack(x).tolist() == x.tolist()
    with pytest.raises(TypeError):
        jitgrad.to_dlpack([1, 2])


def test_to_dlpack_into_torch():
    torch = pytest.importorskip("torch")
    x = jitgrad.arange(4.0)
    assert torch.from_dlpack(jitgrad.to_dlpack(x)).tolist() == x.tolist()


def test_flush_denormal_and_interop_threads():
    assert jitgrad.set_flush_denormal(True) is False
    assert jitgrad.set_flush_denormal(False) is False
    with pytest.raises(RuntimeError, match="expects a bool"):
        jitgrad.set_flush_denormal("x")
    assert jitgrad.get_num_interop_threads() >= 1
    with pytest.raises(RuntimeError, match="positive integer"):
        jitgrad.set_num_interop_threads(0)
    with pytest.raises(RuntimeError, match="expects an int"):
        jitgrad.set_num_interop_threads(True)


def test_set_num_interop_threads_once():
    import subprocess
    import sys

    code = ("import jitgrad; jitgrad.set_num_interop_threads(3); "
            "assert jitgrad.get_num_interop_threads() == 3\n"
            "try:\n    jitgrad.set_num_interop_threads(2)\nexcept RuntimeError as e:\n"
            "    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "cannot set number of interop threads" in out


def test_is_storage_and_get_device_module():
    x = jitgrad.ones(2)
    assert not jitgrad.is_storage(x) and not jitgrad.is_storage([1])
    assert jitgrad.is_storage(x.untyped_storage())
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        assert jitgrad.is_storage(x.storage())
    assert jitgrad.get_device_module("cpu") is jitgrad.cpu
    assert jitgrad.get_device_module(jitgrad.device("cuda")) is jitgrad.cuda
    expected = jitgrad.cuda if jitgrad.cuda.is_available() else jitgrad.cpu
    assert jitgrad.get_device_module() is expected
    with pytest.raises(RuntimeError, match="Invalid value of device"):
        jitgrad.get_device_module(3)


def test_sym_functions():
    assert jitgrad.sym_int(3.7) == 3 and jitgrad.sym_int(-3.7) == -3
    assert jitgrad.sym_float(3) == 3.0 and type(jitgrad.sym_float(3)) is float
    assert jitgrad.sym_max(1, 2.0) == 2.0 and type(jitgrad.sym_max(2, 1.0)) is float
    assert jitgrad.sym_min(1, 2) == 1 and type(jitgrad.sym_min(1, 2)) is int
    assert jitgrad.sym_not(True) is False and jitgrad.sym_ite(True, 1, 2) == 1
    assert jitgrad.sym_sqrt(4) == 2.0
    assert jitgrad.sym_sum([1, 2, 3]) == 6 and jitgrad.sym_sum(1, 2.5) == 3.5
    with pytest.raises(AssertionError, match="type mismatch"):
        jitgrad.sym_ite(True, 1, 2.0)
    with pytest.raises(AssertionError, match="expected SymBool or bool"):
        jitgrad.sym_ite(1, 1, 2)
    with pytest.raises(AssertionError):
        jitgrad.sym_max("a", 1)


def test_sym_functions_match_torch():
    torch = pytest.importorskip("torch")
    cases = {"sym_int": [(3.7,), (-2.5,), (4,)], "sym_float": [(3,), (2.5,)],
             "sym_max": [(1, 2.0), (3, 2), (1.5, 1)], "sym_min": [(1, 2.0), (3, 2)],
             "sym_not": [(True,), (0,)], "sym_ite": [(False, 1, 2)], "sym_sqrt": [(9,), (2.0,)],
             "sym_sum": [([1, 2, 3],), ([1.5, 2],)]}
    for name, calls in cases.items():
        for args in calls:
            ours, theirs = getattr(jitgrad, name)(*args), getattr(torch, name)(*args)
            assert ours == theirs and type(ours) is type(theirs), (name, args)


# ============================================================ low-rank SVD/PCA
def _low_rank(m, n, r, batch=()):
    a = RNG.standard_normal((*batch, m, r)) @ RNG.standard_normal((*batch, r, n))
    return a


@pytest.mark.parametrize("shape", [(20, 12), (12, 20), (3, 15, 10)])
def test_svd_lowrank_reconstructs(shape):
    *batch, m, n = shape
    A = jitgrad.tensor(_low_rank(m, n, 3, tuple(batch)))
    U, S, V = jitgrad.svd_lowrank(A, q=5)
    assert U.shape == (*batch, m, 5) and S.shape == (*batch, 5) and V.shape == (*batch, n, 5)
    assert np.allclose(((U * S.unsqueeze(-2)) @ V.mT).numpy(), A.numpy(), atol=1e-8)
    eye = np.eye(5)
    assert np.allclose((U.mT @ U).numpy(), eye, atol=1e-8)
    assert np.allclose((V.mT @ V).numpy(), eye, atol=1e-8)


def test_svd_lowrank_with_mean():
    A = jitgrad.tensor(_low_rank(10, 8, 2) + 3.0)
    M = jitgrad.full((1, 8), 3.0, dtype=jitgrad.float64)
    U, S, V = jitgrad.svd_lowrank(A, q=4, M=M)
    assert np.allclose(((U * S) @ V.mT).numpy(), (A - M).numpy(), atol=1e-8)


def test_svd_pca_lowrank_match_torch():
    torch = pytest.importorskip("torch")
    a = _low_rank(16, 9, 4)
    for fn, kw in (("svd_lowrank", dict(q=6)), ("pca_lowrank", dict(q=5)),
                   ("pca_lowrank", dict(center=False))):
        ours = getattr(jitgrad, fn)(jitgrad.tensor(a), **kw)
        theirs = getattr(torch, fn)(torch.tensor(a), **kw)
        for o, t in zip(ours, theirs):
            assert tuple(o.shape) == tuple(t.shape)
        k = 4 if kw.get("center", True) is False or fn == "svd_lowrank" else 3
        assert np.allclose(ours[1].numpy()[:k], theirs[1].numpy()[:k], rtol=1e-6)
        rec = lambda r: ((r[0] * r[1]) @ r[2].mT).numpy()  # noqa: E731
        assert np.allclose(rec(ours), rec([x for x in theirs]), atol=1e-8)


def test_pca_lowrank_errors():
    A = jitgrad.randn(5, 4)
    with pytest.raises(ValueError, match=r"q\(=7\) must be non-negative integer"):
        jitgrad.pca_lowrank(A, q=7)
    with pytest.raises(ValueError, match=r"niter\(=-1\) must be non-negative integer"):
        jitgrad.pca_lowrank(A, niter=-1)


def test_svd_lowrank_gradcheck():
    a = jitgrad.tensor(_low_rank(6, 4, 4), requires_grad=True)

    def singular_values(x):
        jitgrad.manual_seed(0)  # one random start for every evaluation
        return jitgrad.svd_lowrank(x, q=3, niter=2)[1]

    assert gradcheck(singular_values, (a,))

    def pca_values(x):
        jitgrad.manual_seed(0)
        return jitgrad.pca_lowrank(x, q=3)[1]

    assert gradcheck(pca_values, (a,))


# ============================================================== Tensor members
def test_untyped_storage_sharing():
    x = jitgrad.arange(6.0)
    s = x.untyped_storage()
    assert s.nbytes() == 24 and s.size() == 24 and len(s) == 24
    assert x[2:].untyped_storage().data_ptr() == s.data_ptr() == x.data_ptr()
    assert x.view(2, 3).t().untyped_storage().data_ptr() == s.data_ptr()
    assert x.clone().untyped_storage().data_ptr() != s.data_ptr()
    assert s.tolist()[6:8] == [128, 63] and s[7] == 63


def test_typed_storage():
    x = jitgrad.arange(6.0)
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        st = x[1:].storage()
    assert st.size() == len(st) == 6 and st.nbytes() == 24 and st.dtype == jitgrad.float32
    assert st[1] == 1.0 and st.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert st.data_ptr() == x.data_ptr() and st.element_size() == 4
    with pytest.raises(IndexError):
        st[6]


def test_storage_matches_torch():
    torch = pytest.importorskip("torch")
    x, tx = jitgrad.arange(6.0).view(2, 3)[:, 1:], torch.arange(6.0).view(2, 3)[:, 1:]
    s, ts = x.untyped_storage(), tx.untyped_storage()
    assert (s.nbytes(), s.size(), len(s)) == (ts.nbytes(), ts.size(), len(ts))
    assert s.tolist() == ts.tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert (len(x.storage()), x.storage().tolist()) == (len(tx.storage()),
                                                            tx.storage().tolist())


def test_resize_and_resize_as():
    x = jitgrad.tensor(RNG.standard_normal(6), requires_grad=True)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        y = x.resize(2, 3)
    assert y.shape == (2, 3)
    y.sum().backward()
    assert x.grad.tolist() == [1.0] * 6
    with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
        assert x.resize_as(jitgrad.ones(3, 2)).shape == (3, 2)
    with pytest.warns(UserWarning):
        with pytest.raises(RuntimeError, match="requested resize to 4 .4 elements in total."):
            x.resize(4)


def test_as_subclass():
    class MyTensor(jitgrad.Tensor):
        pass

    x = jitgrad.ones(2, requires_grad=True)
    y = x.as_subclass(MyTensor)
    assert type(y) is MyTensor and y.requires_grad and not y.is_leaf
    assert y.data_ptr() == x.data_ptr()
    (y * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="does not inherit from Tensor"):
        x.as_subclass(int)


@pytest.mark.parametrize("case", ["plain", "transposed", "channels_last", "singleton", "3d"])
def test_dim_order_matches_torch(case):
    torch = pytest.importorskip("torch")

    def make(M):
        if case == "plain":
            return M.empty(2, 3, 5, 7)
        if case == "transposed":
            return M.empty(2, 3, 5, 7).transpose(1, 2)
        if case == "channels_last":
            return M.empty(2, 3, 5, 7).contiguous(memory_format=M.channels_last)
        if case == "singleton":
            return M.empty(1, 2, 3, 4)
        return M.empty(3, 1, 4).permute(2, 1, 0)

    assert make(jitgrad).dim_order() == make(torch).dim_order()


def test_dim_order_ambiguity():
    assert jitgrad.empty(2, 3).dim_order() == (0, 1)
    with pytest.raises(RuntimeError, match="does not have unique dim order"):
        jitgrad.empty(1, 2, 3, 4).dim_order(ambiguity_check=True)
    fmts = [jitgrad.contiguous_format, jitgrad.channels_last]
    assert jitgrad.empty(1, 2, 3, 4).dim_order(ambiguity_check=fmts) == (0, 1, 2, 3)
    with pytest.raises(TypeError, match="must be a bool or a list of memory formats"):
        jitgrad.empty(2).dim_order(ambiguity_check="ILLEGAL")


def test_is_shared_and_const_data_ptr():
    x = jitgrad.ones(2, 3)
    assert x.is_shared() is False
    assert x[1].const_data_ptr() == x[1].data_ptr()


# ========================================================================= nn
@pytest.mark.parametrize("name,shape", [
    ("LazyBatchNorm1d", (4, 3, 5)), ("LazyBatchNorm2d", (4, 3, 5, 5)),
    ("LazyBatchNorm3d", (2, 3, 2, 3, 4)), ("LazyInstanceNorm1d", (2, 3, 5)),
    ("LazyInstanceNorm2d", (2, 3, 4, 5)), ("LazyInstanceNorm3d", (2, 3, 2, 3, 4))])
def test_lazy_norms(name, shape):
    m = getattr(nn, name)()
    assert m.has_uninitialized_params()
    x = jitgrad.tensor(RNG.standard_normal(shape))
    y = m(x.float())
    plain = getattr(nn, name.removeprefix("Lazy"))
    assert type(m) is plain and m.num_features == 3 and y.shape == shape
    assert m.weight.shape == (3,) and m.running_mean.shape == (3,)
    assert m.weight.tolist() == [1.0] * 3 and m.bias.tolist() == [0.0] * 3


def test_lazy_norms_match_torch():
    torch = pytest.importorskip("torch")
    for name, shape in (("LazyBatchNorm2d", (4, 3, 5, 5)), ("LazyInstanceNorm1d", (2, 3, 5))):
        x = RNG.standard_normal(shape).astype(np.float32)
        m, tm = getattr(nn, name)(momentum=0.3), getattr(torch.nn, name)(momentum=0.3)
        assert np.allclose(m(jitgrad.tensor(x)).detach().numpy(),
                           tm(torch.tensor(x)).detach().numpy(), atol=1e-5)
        assert repr(m) == repr(tm)
        assert sorted(m.state_dict()) == sorted(tm.state_dict())
        assert np.allclose(m.running_var.numpy(), tm.running_var.numpy(), atol=1e-5)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_lazy_conv_transpose(dims):
    m = getattr(nn, f"LazyConvTranspose{dims}d")(4, 3, stride=2, groups=2)
    x = jitgrad.randn(2, 6, *([5] * dims))
    y = m(x)
    plain = getattr(nn, f"ConvTranspose{dims}d")
    assert type(m) is plain and m.in_channels == 6
    assert m.weight.shape == (6, 2, *([3] * dims)) and m.bias.shape == (4,)
    ref = plain(6, 4, 3, stride=2, groups=2)
    ref.load_state_dict(m.state_dict())
    assert np.allclose(y.detach().numpy(), ref(x).detach().numpy())


def test_lazy_conv_transpose_matches_torch():
    torch = pytest.importorskip("torch")
    m, tm = nn.LazyConvTranspose2d(5, 3, padding=1), torch.nn.LazyConvTranspose2d(5, 3, padding=1)
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    tm(torch.tensor(x))
    m(jitgrad.tensor(x))
    assert repr(m) == repr(tm)
    m.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    assert np.allclose(m(jitgrad.tensor(x)).detach().numpy(),
                       tm(torch.tensor(x)).detach().numpy(), atol=1e-5)


def test_adaptive_max_pool3d_values_and_indices():
    x = jitgrad.arange(64.0).reshape(1, 1, 4, 4, 4)
    out, idx = F.adaptive_max_pool3d(x, 2, return_indices=True)
    assert out.flatten().tolist() == [21.0, 23.0, 29.0, 31.0, 53.0, 55.0, 61.0, 63.0]
    assert idx.flatten().tolist() == [21, 23, 29, 31, 53, 55, 61, 63]
    assert F.adaptive_max_pool3d_with_indices(x, (1, None, 2))[0].shape == (1, 1, 1, 4, 2)
    assert nn.AdaptiveMaxPool3d((2, 1, 2))(x[0]).shape == (1, 2, 1, 2)
    with pytest.raises(RuntimeError, match="Expected 4D or 5D tensor"):
        F.adaptive_max_pool3d(jitgrad.ones(2, 2, 2), 1)


def test_adaptive_max_pool3d_gradcheck():
    x = jitgrad.tensor(RNG.standard_normal((2, 2, 3, 4, 5)), requires_grad=True)
    assert gradcheck(lambda t: F.adaptive_max_pool3d(t, (2, 3, 2)), (x,))


def test_adaptive_max_pool3d_matches_torch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 3, 5, 6, 7))
    for size in ((2, 3, 4), 3, (None, 2, 5)):
        o, i = nn.AdaptiveMaxPool3d(size, return_indices=True)(jitgrad.tensor(x))
        to, ti = torch.nn.AdaptiveMaxPool3d(size, return_indices=True)(torch.tensor(x))
        assert np.allclose(o.numpy(), to.numpy()) and (i.numpy() == ti.numpy()).all()


def test_nllloss2d():
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        m = nn.NLLLoss2d(ignore_index=1)
    assert isinstance(m, nn.NLLLoss)
    logp = F.log_softmax(jitgrad.tensor(RNG.standard_normal((2, 3, 4, 4))), 1)
    target = jitgrad.tensor(RNG.integers(0, 3, (2, 4, 4)))
    ref = F.nll_loss(logp, target, ignore_index=1)
    assert np.allclose(m(logp, target).numpy(), ref.numpy())
