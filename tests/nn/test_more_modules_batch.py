"""The modules and functions of the nn batch against torch: AdaptiveAvgPool1d, InstanceNorm3d,
the 3-D and circular pads, MaxUnpool1d/2d/3d, LPPool1d/2d/3d, LocalResponseNorm, RReLU,
AlphaDropout / FeatureAlphaDropout, the in-place activations, max_pool*_with_indices, pdist,
nn.Buffer, the lazy modules, SyncBatchNorm, DataParallel: values, gradients, reprs,
state_dict keys and error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import assert_close as _close
from helpers import assert_same_error as _errors

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _compare(fj, ft, *shapes, seed=0, positive=False, tol=1e-10):
    """``fj`` and ``ft`` on the same float64 inputs: outputs and input gradients."""
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(s) for s in shapes]
    if positive:
        xs = [np.abs(x) + 0.1 for x in xs]
    jx = [jitgrad.tensor(x, requires_grad=True) for x in xs]
    tx = [torch.tensor(x, requires_grad=True) for x in xs]
    jo, to = fj(*jx), ft(*tx)
    _close(jo, to, tol)
    w = rng.standard_normal(tuple(jo.shape))
    (jo * jitgrad.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    for a, b in zip(jx, tx):
        _close(a.grad, b.grad, tol)


def _module_pair(name, *args, **kwargs):
    return getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


# ------------------------------------------------------------------------ pooling
def test_adaptive_avg_pool1d():
    for out, shape in ((3, (2, 3, 7)), (4, (3, 9)), (1, (1, 2, 5)), (5, (2, 2, 5))):
        jm, tm = _module_pair("AdaptiveAvgPool1d", out)
        assert repr(jm) == repr(tm)
        _compare(jm, tm, shape)
    _errors(lambda: F.adaptive_avg_pool1d(jitgrad.ones(2, 3, 4, 5), 2),
            lambda: TF.adaptive_avg_pool1d(torch.ones(2, 3, 4, 5), 2))


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_unpool(dims):
    pool = {1: (F.max_pool1d, TF.max_pool1d), 2: (F.max_pool2d, TF.max_pool2d),
            3: (F.max_pool3d, TF.max_pool3d)}[dims]
    shape = (2, 3) + (8, 6, 4)[:dims]
    x = np.random.default_rng(1).standard_normal(shape)
    jo, ji = pool[0](jitgrad.tensor(x), 2, 2, return_indices=True)
    to, ti = pool[1](torch.tensor(x), 2, 2, return_indices=True)
    assert ji.tolist() == ti.tolist()
    jm, tm = _module_pair(f"MaxUnpool{dims}d", 2)
    assert repr(jm) == repr(tm)
    _compare(lambda v: jm(v, ji), lambda v: tm(v, ti), tuple(jo.shape))
    bigger = [s * 2 + 1 for s in jo.shape[2:]]
    _compare(lambda v: jm(v, ji, output_size=bigger), lambda v: tm(v, ti, output_size=bigger),
             tuple(jo.shape))
    full = list(shape[:2]) + bigger
    _compare(lambda v: jm(v, ji, output_size=full), lambda v: tm(v, ti, output_size=full),
             tuple(jo.shape))
    too_big = [s * 2 + 2 for s in jo.shape[2:]]
    _errors(lambda: jm(jitgrad.tensor(jo.numpy()), ji, output_size=too_big),
            lambda: tm(torch.tensor(jo.numpy()), ti, output_size=too_big))
    _errors(lambda: jm(jitgrad.tensor(jo.numpy()), ji, output_size=[1] * (dims + 1)),
            lambda: tm(torch.tensor(jo.numpy()), ti, output_size=[1] * (dims + 1)))
    bad = jitgrad.full(tuple(ji.shape), 999, dtype=jitgrad.int64)
    _errors(lambda: jm(jitgrad.tensor(jo.numpy()), bad),
            lambda: tm(torch.tensor(jo.numpy()), torch.full(tuple(ti.shape), 999)))


def test_max_unpool_errors_and_with_indices():
    _errors(lambda: F.max_unpool2d(jitgrad.ones(2, 2), jitgrad.zeros(2, 2, dtype=jitgrad.int64),
                                   2),
            lambda: TF.max_unpool2d(torch.ones(2, 2), torch.zeros(2, 2, dtype=torch.long), 2))
    _errors(lambda: F.max_unpool1d(jitgrad.ones(1, 1, 2),
                                   jitgrad.zeros(1, 1, 3, dtype=jitgrad.int64), 2),
            lambda: TF.max_unpool1d(torch.ones(1, 1, 2), torch.zeros(1, 1, 3, dtype=torch.long),
                                    2))
    x = np.random.default_rng(2).standard_normal((2, 2, 6, 6, 6))
    for dims in (1, 2, 3):
        xs = x[(slice(None),) * 2 + (0,) * (3 - dims)]
        jo, ji = getattr(F, f"max_pool{dims}d_with_indices")(jitgrad.tensor(xs), 3, 2, 1)
        to, ti = getattr(TF, f"max_pool{dims}d_with_indices")(torch.tensor(xs), 3, 2, 1)
        _close(jo, to)
        assert ji.tolist() == ti.tolist()
    for dims, size in ((1, 4), (2, (3, 4))):
        xs = x[(slice(None),) * 2 + (0,) * (3 - dims)]
        jo, ji = getattr(F, f"adaptive_max_pool{dims}d_with_indices")(jitgrad.tensor(xs), size)
        to, ti = getattr(TF, f"adaptive_max_pool{dims}d_with_indices")(torch.tensor(xs), size)
        _close(jo, to)
        assert ji.tolist() == ti.tolist()


@pytest.mark.parametrize("norm_type", [2, 1.5, 3, math.inf])
def test_lp_pool(norm_type):
    cases = ((1, (2, 3, 9), dict(kernel_size=3), {}),
             (1, (2, 3, 10), dict(kernel_size=3, stride=2, ceil_mode=True), {}),
             (2, (2, 2, 6, 7), dict(kernel_size=(2, 3), stride=1), {}),
             (2, (2, 2, 6, 6), dict(kernel_size=2), {}),
             (3, (1, 2, 4, 4, 6), dict(kernel_size=2), {}))
    for dims, shape, kw, _ in cases:
        jm, tm = _module_pair(f"LPPool{dims}d", norm_type, **kw)
        assert repr(jm) == repr(tm)
        _compare(jm, tm, shape, positive=norm_type != 2 and norm_type != math.inf)


# -------------------------------------------------------------------- normalisation
def test_instance_norm3d():
    jm, tm = _module_pair("InstanceNorm3d", 3, affine=True, dtype=None)
    jm.double()
    tm.double()
    assert repr(jm) == repr(tm) and list(jm.state_dict()) == list(tm.state_dict())
    jm.load_state_dict({"weight": jitgrad.tensor([1.0, 2.0, 0.5], dtype=jitgrad.float64),
                        "bias": jitgrad.tensor([0.0, 1.0, -1.0], dtype=jitgrad.float64)})
    tm.load_state_dict({"weight": torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64),
                        "bias": torch.tensor([0.0, 1.0, -1.0], dtype=torch.float64)})
    _compare(jm, tm, (2, 3, 3, 4, 2))
    _compare(jm, tm, (3, 3, 4, 2))
    assert repr(nn.InstanceNorm3d(4)) == repr(torch.nn.InstanceNorm3d(4))
    _errors(lambda: nn.InstanceNorm3d(3)(jitgrad.ones(2, 3, 4)),
            lambda: torch.nn.InstanceNorm3d(3)(torch.ones(2, 3, 4)))


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_local_response_norm(size):
    jm, tm = _module_pair("LocalResponseNorm", size, alpha=0.5, beta=0.6, k=1.5)
    assert repr(jm) == repr(tm)
    for shape in ((2, 6, 5), (2, 6, 3, 4), (1, 4, 2, 3, 2)):
        _compare(jm, tm, shape)
    assert repr(nn.LocalResponseNorm(3)) == repr(torch.nn.LocalResponseNorm(3))
    _errors(lambda: F.local_response_norm(jitgrad.ones(2, 3), 2),
            lambda: TF.local_response_norm(torch.ones(2, 3), 2))


# --------------------------------------------------------------------------- pads
@pytest.mark.parametrize("name,args", [
    ("ZeroPad3d", (1,)), ("ZeroPad3d", ((1, 0, 2, 1, 0, 2),)), ("ConstantPad3d", (2, 3.5)),
    ("ReflectionPad3d", (1,)), ("ReflectionPad3d", ((2, 1, 1, 0, 1, 2),)),
    ("ReplicationPad3d", ((1, 2, 1, 2, 0, 1),)), ("CircularPad1d", (2,)),
    ("CircularPad2d", ((1, 2, 0, 1),)), ("CircularPad3d", (1,))])
def test_pads(name, args):
    jm, tm = _module_pair(name, *args)
    assert repr(jm) == repr(tm)
    dims = int(name[-2])
    for shape in ((2, 2) + (4, 5, 3)[:dims], (2,) + (4, 5, 3)[:dims]):
        _compare(jm, tm, shape)


def test_circular_pad_errors():
    for dims, bad in ((1, (2, 3, 4, 5)), (2, (2, 3, 4, 5, 6)), (3, (3, 4, 5))):
        jm, tm = _module_pair(f"CircularPad{dims}d", 1)
        _errors(lambda m=jm, s=bad: m(jitgrad.ones(*s)),
                lambda m=tm, s=bad: m(torch.ones(*s)))


# --------------------------------------------------------------- activations
def test_rrelu():
    jm, tm = _module_pair("RReLU", 0.1, 0.3)
    assert repr(jm) == repr(tm) and repr(nn.RReLU()) == repr(torch.nn.RReLU())
    assert repr(nn.RReLU(inplace=True)) == repr(torch.nn.RReLU(inplace=True))
    jm.eval()
    tm.eval()
    _compare(jm, tm, (4, 5))
    _compare(lambda x: F.rrelu(x), lambda x: TF.rrelu(x), (3, 3))
    jm.train()
    jitgrad.manual_seed(0)
    x = jitgrad.tensor(np.linspace(-3, 3, 61), requires_grad=True)
    y = jm(x)
    slope = (y / x).detach().numpy()
    neg = x.detach().numpy() < 0
    assert np.all((slope[neg] >= 0.1) & (slope[neg] <= 0.3)) and np.all(slope[~neg & (
        x.detach().numpy() != 0)] == 1)
    assert len(np.unique(slope[neg])) > 10  # one draw per element
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[neg], slope[neg])
    jitgrad.manual_seed(0)
    np.testing.assert_array_equal(jm(x).detach().numpy(), y.detach().numpy())
    _errors(lambda: F.rrelu(jitgrad.ones(2), 0.5, 0.2, True),
            lambda: TF.rrelu(torch.ones(2), 0.5, 0.2, True))
    z = jitgrad.tensor([-2.0, 1.0])
    assert F.rrelu_(z, 0.25, 0.25) is z and z.tolist() == [-0.5, 1.0]


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout(feature):
    name = "FeatureAlphaDropout" if feature else "AlphaDropout"
    jm, tm = _module_pair(name, 0.2)
    assert repr(jm) == repr(tm)
    shape = (40, 12, 10) if feature else (20000,)
    x = np.random.default_rng(3).standard_normal(shape)
    jm.eval()
    assert jm(jitgrad.tensor(x)).tolist() == x.tolist()
    jm.train()
    jitgrad.manual_seed(1)
    jx = jitgrad.tensor(x, requires_grad=True)
    y = jm(jx).detach().numpy()
    ty = tm(torch.tensor(x)).numpy()
    # PyTorch's constants: the dropped value and the affine map of the kept ones
    p, alpha = 0.2, 1.7580993408473766
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    for out in (y, ty):
        kept = np.isclose(out, x * a + alpha * a * p)
        dropped = np.isclose(out, -alpha * a + alpha * a * p)
        assert np.all(kept | dropped) and 0.1 < dropped.mean() < 0.3
        if feature:  # whole channels
            assert np.all(dropped.all(-1) | kept.all(-1))
    if not feature:
        assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05  # SELU's fixed point kept
    jm(jx).sum().backward()
    assert set(np.unique(np.round(jx.grad.numpy(), 12))) <= {0.0, round(a, 12)}
    _errors(lambda: F.alpha_dropout(jitgrad.ones(2), 1.5, True),
            lambda: TF.alpha_dropout(torch.ones(2), 1.5, True))
    _errors(lambda: F.feature_alpha_dropout(jitgrad.ones(3), 0.5, True),
            lambda: TF.feature_alpha_dropout(torch.ones(3), 0.5, True))
    assert F.alpha_dropout(jitgrad.ones(3), 0.5).tolist() == [1.0] * 3  # training=False
    assert F.alpha_dropout(jitgrad.ones(3), 1.0, True).tolist() == [0.0] * 3


@pytest.mark.parametrize("name,args", [("relu_", ()), ("elu_", (0.5,)),
                                       ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.7)),
                                       ("selu_", ()), ("celu_", (1.3,)),
                                       ("threshold_", (0.1, -2.0))])
def test_inplace_activations(name, args):
    x = np.random.default_rng(4).standard_normal((3, 4))
    jx = jitgrad.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    jy, ty = jx * 1.0, tx * 1.0
    jr, tr = getattr(F, name)(jy, *args), getattr(TF, name)(ty, *args)
    assert jr is jy and tr is ty
    _close(jy, ty)
    jy.sum().backward()
    ty.sum().backward()
    # PyTorch's CELU gradient rounds its 1/alpha in float32 (~4e-8 relative)
    _close(jx.grad, tx.grad, 1e-7 if name == "celu_" else 1e-10)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        getattr(F, name)(jitgrad.tensor(x, requires_grad=True), *args)


@pytest.mark.parametrize("p", [2, 1, 0.5, 3, math.inf])
def test_pdist(p):
    _compare(lambda x: F.pdist(x, p), lambda x: TF.pdist(x, p), (6, 3))
    rows = np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]])  # a zero distance
    _compare(lambda x: F.pdist(x + jitgrad.tensor(rows), p),
             lambda x: TF.pdist(x + torch.tensor(rows), p), (1, 2))


def test_pdist_edges_and_errors():
    _close(F.pdist(jitgrad.tensor([[0.0, 0.0], [3.0, 4.0]]), 0),
           TF.pdist(torch.tensor([[0.0, 0.0], [3.0, 4.0]]), 0))
    assert F.pdist(jitgrad.ones(1, 3)).shape == (0,)
    _errors(lambda: F.pdist(jitgrad.ones(2, 3, 4)), lambda: TF.pdist(torch.ones(2, 3, 4)))
    _errors(lambda: F.pdist(jitgrad.ones(2, 3), p=-1), lambda: TF.pdist(torch.ones(2, 3), p=-1))
    _errors(lambda: F.pdist(jitgrad.ones(2, 3, dtype=jitgrad.int64)),
            lambda: TF.pdist(torch.ones(2, 3, dtype=torch.int64)))


# ------------------------------------------------------------------------ buffers
def test_buffer():
    for M in (jitgrad, torch):
        m = M.nn.Module()
        m.stats = M.nn.Buffer(M.zeros(2))
        m.scratch = M.nn.Buffer(M.ones(1), persistent=False)
        m.plain = M.ones(3)
        assert [k for k, _ in m.named_buffers()] == ["stats", "scratch"]
        assert list(m.state_dict()) == ["stats"]
        assert isinstance(m.stats, M.nn.Buffer) and not isinstance(m.plain, M.nn.Buffer)
        m.stats = M.ones(2)  # a plain tensor into an existing buffer stays one
        assert [k for k, _ in m.named_buffers()] == ["stats", "scratch"]
        assert M.nn.Buffer(M.ones(1, requires_grad=True)).requires_grad
    from jitgrad.nn.parameter import Buffer

    assert Buffer is nn.Buffer


# ---------------------------------------------------------------------- lazy modules
@pytest.mark.parametrize("name,args,shape", [
    ("LazyLinear", (4,), (3, 5)), ("LazyLinear", (2,), (2, 3, 6)),
    ("LazyConv1d", (4, 3), (2, 3, 9)), ("LazyConv2d", (8, 3), (2, 3, 6, 6)),
    ("LazyConv2d", (4, 3), (3, 6, 6)), ("LazyConv3d", (2, 2), (1, 2, 4, 4, 4))])
def test_lazy_modules(name, args, shape):
    jm, tm = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(jm) == repr(tm)
    assert isinstance(jm.weight, nn.UninitializedParameter)
    assert isinstance(jm.weight, nn.Parameter) and repr(jm.weight) == repr(tm.weight)
    jm(jitgrad.ones(*shape))
    tm(torch.ones(*shape))
    assert type(jm).__name__ == type(tm).__name__ and repr(jm) == repr(tm)
    assert [(k, tuple(p.shape)) for k, p in jm.named_parameters()] == \
        [(k, tuple(p.shape)) for k, p in tm.named_parameters()]
    assert not jm._forward_pre_hooks and type(jm.weight) is jitgrad.Tensor
    # the initialisation bounds of the plain layer
    fan_in = math.prod(jm.weight.shape[1:])
    assert float(jm.weight.abs().max()) <= 1 / math.sqrt(fan_in) + 1e-7


def test_lazy_state_dict_optimizer_and_errors():
    src = nn.Linear(5, 4, dtype=jitgrad.float64)
    lazy = nn.LazyLinear(4, dtype=jitgrad.float64)
    lazy.load_state_dict(src.state_dict())
    x = jitgrad.ones(2, 5, dtype=jitgrad.float64)
    _close(lazy(x), src(x))
    assert type(lazy) is nn.Linear
    m = nn.LazyLinear(3)
    w = m.weight
    opt = jitgrad.optim.SGD(m.parameters(), lr=0.1)  # built before the first forward
    m(jitgrad.ones(2, 4)).sum().backward()
    before = w.detach().numpy().copy()
    opt.step()
    assert m.weight is w and not np.allclose(before, w.detach().numpy())
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized "
                                           "parameter or buffer"):
        _ = nn.LazyLinear(3).weight.shape
    _errors(lambda: nn.LazyConv2d(4, 3, groups=2)(jitgrad.ones(1, 3, 5, 5)),
            lambda: torch.nn.LazyConv2d(4, 3, groups=2)(torch.ones(1, 3, 5, 5)))
    assert nn.LazyLinear(2, dtype=jitgrad.float64)(jitgrad.ones(1, 3, dtype=jitgrad.float64)
                                                   ).dtype == jitgrad.float64


# ------------------------------------------------------------------- SyncBatchNorm
def test_sync_batchnorm_one_process():
    jm, tm = _module_pair("SyncBatchNorm", 3)
    assert repr(jm) == repr(tm) and list(jm.state_dict()) == list(tm.state_dict())
    jm.double()
    tm.double()
    for shape in ((4, 3), (4, 3, 5), (2, 3, 2, 2, 2)):
        _compare(jm, tm, shape)
    _close(jm.running_mean, tm.running_mean)
    _close(jm.running_var, tm.running_var)
    _errors(lambda: jm(jitgrad.ones(3, dtype=jitgrad.float64)),
            lambda: tm(torch.ones(3, dtype=torch.float64)))
    jmodel = nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3),
                           nn.Sequential(nn.BatchNorm1d(4).eval()))
    tmodel = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 1), torch.nn.BatchNorm2d(3),
                                 torch.nn.Sequential(torch.nn.BatchNorm1d(4).eval()))
    weight = jmodel[1].weight
    jc = nn.SyncBatchNorm.convert_sync_batchnorm(jmodel)
    tc = torch.nn.SyncBatchNorm.convert_sync_batchnorm(tmodel)
    assert repr(jc) == repr(tc) and list(jc.state_dict()) == list(tc.state_dict())
    assert jc[1].weight is weight and jc[2][0].training is False


# -------------------------------------------------------------------- DataParallel
def test_data_parallel_one_device():
    inner = nn.Linear(2, 3)
    jm = nn.DataParallel(inner)
    tm = torch.nn.DataParallel(torch.nn.Linear(2, 3))
    assert repr(jm) == repr(tm) and list(jm.state_dict()) == list(tm.state_dict())
    assert jm.module is inner
    x = jitgrad.ones(4, 2)
    if jitgrad.cuda.is_available():  # the module moved to cuda:0, the input follows it
        assert jm.device_ids == [0] and jm.output_device == 0
        out = jm(x)
        assert out.is_cuda
        _close(out.cpu(), inner(x.cuda()).cpu())
        with pytest.raises(NotImplementedError, match="DataParallel over several GPUs"):
            nn.DataParallel(nn.Linear(2, 3), device_ids=[0, 1])
    else:  # PyTorch's behaviour without an accelerator: the module, called as it is
        assert jm.device_ids == tm.device_ids == []
        _close(jm(x), inner(x))
        assert nn.parallel.data_parallel(inner, x).shape == (4, 3)
