"""PyTorch names tutorial scripts use, added in one sweep: ``jitgrad.version``,
``jitgrad.multiprocessing`` (the standard API re-exported, ``spawn`` / ``start_processes``
and their exceptions), ``jitgrad.testing.make_tensor`` and
``jitgrad.nn.utils.parametrizations.orthogonal``. Each checked against PyTorch where
comparable. The child processes run functions of ``tests/mp_helpers_52.py`` (the spawn
start method imports them by name) and are kept very short."""

from __future__ import annotations

import math
import multiprocessing
import os
import pickle
import warnings

import mp_helpers_52 as helpers
import numpy as np
import pytest
from helpers import python_prints

import jitgrad
import jitgrad.nn as nn
from jitgrad.nn.utils import parametrize
from jitgrad.nn.utils.parametrizations import orthogonal
from jitgrad.testing import make_tensor

RNG = np.random.default_rng(52)


# ==================================================================== version
def test_version_module():
    import jitgrad.version as v

    assert jitgrad.version is v
    assert v.__version__ == jitgrad.__version__
    assert v.cuda is None and v.hip is None and v.rocm is None and v.xpu is None
    assert v.debug is False and isinstance(v.git_version, str) and v.git_version
    assert all(hasattr(v, n) for n in v.__all__)


def test_version_names_are_torchs():
    torch = pytest.importorskip("torch")
    import jitgrad.version as v

    assert set(v.__all__) == set(torch.version.__all__)
    for n in ("cuda", "hip", "rocm", "xpu", "debug"):
        assert type(getattr(v, n)) is type(getattr(torch.version, n)), n


def test_new_submodules_import_lazily():
    words = python_prints("import sys, jitgrad; print('jitgrad.version' in sys.modules, "
                          "'jitgrad.multiprocessing' in sys.modules); "
                          "print(jitgrad.version.cuda, jitgrad.multiprocessing.spawn.__name__)")
    assert words == ["False", "False", "None", "spawn"]


# ============================================================ multiprocessing
def test_multiprocessing_reexports_standard_api():
    mp = jitgrad.multiprocessing
    for name in multiprocessing.__all__:
        assert getattr(mp, name) is getattr(multiprocessing, name), name
        assert name in mp.__all__
    for name in ("spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
                 "ProcessExitedException", "ProcessException"):
        assert name in mp.__all__
    assert mp.get_context("spawn").get_start_method() == "spawn"


def test_multiprocessing_names_are_torchs():
    torch = pytest.importorskip("torch")
    mp = jitgrad.multiprocessing
    assert set(torch.multiprocessing.__all__) <= set(mp.__all__)
    for name in ("spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
                 "ProcessExitedException", "SpawnContext"):
        assert hasattr(torch.multiprocessing, name)
    assert mp.get_sharing_strategy() == torch.multiprocessing.get_sharing_strategy()
    assert mp.get_all_sharing_strategies() == torch.multiprocessing.get_all_sharing_strategies()


def test_multiprocessing_exceptions():
    mp = jitgrad.multiprocessing
    assert issubclass(mp.ProcessRaisedException, mp.ProcessException)
    assert issubclass(mp.ProcessExitedException, mp.ProcessException)
    assert issubclass(mp.ProcessException, Exception)
    e = pickle.loads(pickle.dumps(mp.ProcessExitedException("m", 1, 42, -9, "SIGKILL")))
    assert (e.msg, e.error_index, e.error_pid, e.exit_code, e.signal_name) == \
        ("m", 1, 42, -9, "SIGKILL")
    r = pickle.loads(pickle.dumps(mp.ProcessRaisedException("tb", 0, 7)))
    assert type(r) is mp.ProcessRaisedException and (r.msg, r.error_index) == ("tb", 0)


def test_sharing_strategy():
    mp = jitgrad.multiprocessing
    before = mp.get_sharing_strategy()
    try:
        mp.set_sharing_strategy("file_system")
        assert mp.get_sharing_strategy() == "file_system"
        with pytest.raises(AssertionError, match="invalid sharing strategy"):
            mp.set_sharing_strategy("nope")
    finally:
        mp.set_sharing_strategy(before)


def test_spawn_runs_fn_with_index(tmp_path):
    path = str(tmp_path / "out")
    assert jitgrad.multiprocessing.spawn(helpers.write_square, args=(path,), nprocs=2) is None
    values = [int(open(f"{path}.{i}").read().split()[0]) for i in range(2)]
    assert values == [0, 1]


def test_spawn_child_exception_is_raised_with_traceback():
    mp = jitgrad.multiprocessing
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.spawn(helpers.raise_in_one, args=(1,), nprocs=2)
    e = info.value
    assert e.error_index == 1 and isinstance(e.error_pid, int)
    assert str(e).startswith("\n\n-- Process 1 terminated with the following error:\n"
                             "Traceback (most recent call last):")
    assert "ValueError: boom from process 1" in str(e) and "raise_in_one" in str(e)


def test_spawn_child_exit_code():
    mp = jitgrad.multiprocessing
    with pytest.raises(mp.ProcessExitedException,
                       match="process 0 terminated with exit code 3") as info:
        mp.spawn(helpers.exit_with, args=(3,), nprocs=1)
    assert info.value.exit_code == 3 and info.value.signal_name is None


def test_start_processes_context_without_join():
    mp = jitgrad.multiprocessing
    queue = mp.get_context("spawn").SimpleQueue()
    with pytest.warns(FutureWarning, match="only supports start_method=spawn"):
        context = mp.spawn(helpers.put_tensor, args=(queue,), nprocs=2, join=False,
                           start_method="fork")
    assert isinstance(context, mp.ProcessContext)
    assert len(context.processes) == 2 and context.pids() == [p.pid for p in context.processes]
    assert all(type(p).__name__ == "SpawnProcess" for p in context.processes)
    while not context.join():
        pass
    assert context.join() is True
    got = sorted((i, t.tolist()) for i, t in (queue.get() for _ in range(2)))
    assert got == [(0, [0.0, 1.0]), (1, [1.0, 1.0])]
    assert all(p.exitcode == 0 for p in context.processes)


# ================================================================ make_tensor
DEFAULT_RANGES = {"bool": (0, 1), "uint8": (0, 9), "int8": (-9, 9), "int16": (-9, 9),
                  "int32": (-9, 9), "int64": (-9, 9), "float16": (-9, 9),
                  "float32": (-9, 9), "float64": (-9, 9)}


@pytest.mark.parametrize("name", list(DEFAULT_RANGES))
def test_make_tensor_default_ranges(name):
    dtype = getattr(jitgrad, name)
    t = make_tensor(4000, dtype=dtype, device="cpu")
    assert t.dtype == dtype and t.shape == (4000,) and t.device == jitgrad.device("cpu")
    a = t.numpy().astype(np.float64)
    lo, hi = DEFAULT_RANGES[name]
    assert a.min() >= lo and a.max() <= hi
    if name in ("bool", "uint8", "int8", "int64"):  # every value is drawn
        assert set(np.unique(a)) == set(range(lo, hi + 1))
    else:
        assert a.min() < lo + 0.5 and a.max() > hi - 0.5
    assert not t.requires_grad


def test_make_tensor_shapes_and_seed():
    assert make_tensor(2, 3, dtype=jitgrad.float32, device="cpu").shape == (2, 3)
    assert make_tensor((2, 3), dtype=jitgrad.float32, device="cpu").shape == (2, 3)
    assert make_tensor([4], dtype=jitgrad.int32, device="cpu").shape == (4,)
    assert make_tensor(jitgrad.Size([1, 2]), dtype=jitgrad.int32, device="cpu").shape == (1, 2)
    assert make_tensor(dtype=jitgrad.float32, device="cpu").shape == ()
    assert make_tensor((), dtype=jitgrad.float32, device=jitgrad.device("cpu")).shape == ()
    jitgrad.manual_seed(3)
    a = make_tensor(5, 5, dtype=jitgrad.float32, device="cpu")
    b = make_tensor(5, dtype=jitgrad.int64, device="cpu")
    jitgrad.manual_seed(3)
    assert a.equal(make_tensor(5, 5, dtype=jitgrad.float32, device="cpu"))
    assert b.equal(make_tensor(5, dtype=jitgrad.int64, device="cpu"))


def test_make_tensor_low_high():
    t = make_tensor(1000, dtype=jitgrad.float32, device="cpu", low=-1, high=1)
    assert -1 <= t.min().item() and t.max().item() < 1
    t = make_tensor(1000, dtype=jitgrad.int32, device="cpu", low=0.5, high=2.5)  # ceiled
    assert set(t.tolist()) == {1, 2}
    t = make_tensor(2000, dtype=jitgrad.int8, device="cpu", low=-1000, high=1000)  # clamped
    assert t.min().item() == -128 and t.max().item() == 127
    t = make_tensor(2000, dtype=jitgrad.uint8, device="cpu")  # default low clamped to 0
    assert t.min().item() == 0
    t = make_tensor(100, dtype=jitgrad.float32, device="cpu", low=-1e300, high=1e300)
    assert bool(t.isfinite().all()) and t.abs().max().item() > 1e37
    t = make_tensor(10, dtype=jitgrad.int64, device="cpu", low=-2 ** 70, high=2 ** 70)
    assert t.dtype == jitgrad.int64
    t = make_tensor(8, dtype=jitgrad.bool, device="cpu", low=1)
    assert bool(t.all())
    with pytest.warns(FutureWarning, match="low==high"):
        t = make_tensor(3, dtype=jitgrad.float32, device="cpu", low=2, high=2)
    assert t.tolist() == [2.0, 2.0, 2.0]


def test_make_tensor_layouts_and_flags():
    t = make_tensor(3, 4, dtype=jitgrad.float32, device="cpu", noncontiguous=True)
    assert t.shape == (3, 4) and not t.is_contiguous()
    assert make_tensor(1, dtype=jitgrad.float32, device="cpu", noncontiguous=True) \
        .is_contiguous()
    t = make_tensor(2, 3, 4, 5, dtype=jitgrad.float32, device="cpu",
                    memory_format=jitgrad.channels_last)
    assert t.is_contiguous(memory_format=jitgrad.channels_last) and not t.is_contiguous()
    t = make_tensor(500, dtype=jitgrad.int8, device="cpu", low=-1, high=1, exclude_zero=True)
    assert set(t.tolist()) == {-1, 1}
    t = make_tensor(50, dtype=jitgrad.bool, device="cpu", exclude_zero=True)
    assert bool(t.all())
    t = make_tensor(4, dtype=jitgrad.float64, device="cpu", requires_grad=True,
                    exclude_zero=True, noncontiguous=True)
    assert t.requires_grad and t.is_leaf
    (t * 2).sum().backward()
    assert t.grad.tolist() == [2.0] * 4


MAKE_TENSOR_ERRORS = {
    "low >= high": ((3,), {"dtype": "float32", "low": 2, "high": 1}, ValueError),
    "nan": ((3,), {"dtype": "float32", "low": math.nan}, ValueError),
    "outside int": ((3,), {"dtype": "uint8", "low": -10, "high": -1}, ValueError),
    "outside bool": ((3,), {"dtype": "bool", "low": 5, "high": 7}, ValueError),
    "int grad": ((3,), {"dtype": "int64", "requires_grad": True}, ValueError),
    "bool grad": ((3,), {"dtype": "bool", "requires_grad": True}, ValueError),
    "layout": ((2, 2), {"dtype": "float32", "noncontiguous": True,
                        "memory_format": "contiguous_format"}, ValueError),
}


def _make_tensor_error(M, make, shape, kw):
    kw = {k: getattr(M, v) if k in ("dtype", "memory_format") else v for k, v in kw.items()}
    try:
        make(*shape, device="cpu", **kw)
    except Exception as e:  # noqa: BLE001
        return type(e), str(e).replace("torch.", "M.").replace("jitgrad.", "M.")
    return None


@pytest.mark.parametrize("case", list(MAKE_TENSOR_ERRORS))
def test_make_tensor_errors_match_torch(case):
    shape, kw, exc = MAKE_TENSOR_ERRORS[case]
    ours = _make_tensor_error(jitgrad, make_tensor, shape, kw)
    assert ours is not None and ours[0] is exc
    torch = pytest.importorskip("torch")
    assert ours == _make_tensor_error(torch, torch.testing.make_tensor, shape, kw)


def test_make_tensor_unsupported_dtype():
    with pytest.raises(TypeError, match="is not supported by torch.testing.make_tensor"):
        make_tensor(3, dtype="float32", device="cpu")
    with pytest.raises(TypeError, match="bfloat16"):
        make_tensor(3, dtype=jitgrad.bfloat16, device="cpu")


def test_make_tensor_ranges_match_torch():
    torch = pytest.importorskip("torch")
    for name in DEFAULT_RANGES:
        for kw in ({}, {"low": -3, "high": 4}, {"low": -1e9, "high": 1e9}):
            ours = make_tensor(3000, dtype=getattr(jitgrad, name), device="cpu", **kw).numpy()
            theirs = torch.testing.make_tensor(3000, dtype=getattr(torch, name), device="cpu",
                                               **kw).numpy()
            assert ours.dtype == theirs.dtype
            span = float(theirs.max()) - float(theirs.min())
            if ours.dtype.kind in "biu" and span <= 20:  # a few integers: all drawn
                assert set(np.unique(ours)) == set(np.unique(theirs)), (name, kw)
            else:
                assert abs(float(ours.min()) - float(theirs.min())) < 0.05 * span, (name, kw)
                assert abs(float(ours.max()) - float(theirs.max())) < 0.05 * span, (name, kw)


# ================================================================= orthogonal
ORTH_CASES = [((4, 4), None, True), ((4, 4), "cayley", True), ((4, 4), "householder", True),
              ((5, 3), None, True), ((3, 5), None, True), ((5, 3), "matrix_exp", True),
              ((3, 5), "cayley", True), ((4, 4), "householder", False),
              ((5, 3), "householder", False), ((3, 5), "householder", False),
              ((4, 4), "matrix_exp", False), ((4, 4), "cayley", False),
              ((5, 3), "cayley", False)]


def _orth_gram(Q: np.ndarray) -> np.ndarray:
    """``Q^T Q`` for tall (and square) ``Q``, ``Q Q^T`` for wide: the identity when
    orthogonal."""
    return np.swapaxes(Q, -1, -2) @ Q if Q.shape[-2] >= Q.shape[-1] else \
        Q @ np.swapaxes(Q, -1, -2)


def _perturbed_original(original: np.ndarray, householder: bool) -> np.ndarray:
    """A random original tensor; Householder's keeps the diagonal (its column signs) and
    gets random reflectors below it."""
    X = RNG.standard_normal(original.shape) * 0.3
    if not householder:
        return X
    wide = original.shape[0] < original.shape[1]
    low = np.tril(X.T if wide else X, -1)
    return (low.T if wide else low) + np.where(np.eye(*original.shape, dtype=bool), original, 0)


@pytest.mark.parametrize("shape,orth_map,triv", ORTH_CASES)
def test_orthogonal_matches_torch(shape, orth_map, triv):
    torch = pytest.importorskip("torch")
    W = RNG.standard_normal(shape)
    theirs = torch.nn.Linear(shape[1], shape[0]).double()
    ours = nn.Linear(shape[1], shape[0]).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(W))
    with jitgrad.no_grad():
        ours.weight.copy_(jitgrad.tensor(W))
    torch.nn.utils.parametrizations.orthogonal(theirs, orthogonal_map=orth_map,
                                               use_trivialization=triv)
    orthogonal(ours, orthogonal_map=orth_map, use_trivialization=triv)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    if triv and shape[0] != shape[1]:  # the base is completed by random columns
        with jitgrad.no_grad():
            ours.parametrizations.weight[0].base.copy_(
                jitgrad.tensor(theirs.parametrizations.weight[0].base.numpy()))
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(),
                               atol=1e-12)
    householder = orth_map == "householder" or (orth_map is None and shape[0] != shape[1])
    X = _perturbed_original(theirs.parametrizations.weight.original.detach().numpy(),
                            householder)
    with torch.no_grad():
        theirs.parametrizations.weight.original.copy_(torch.tensor(X))
    with jitgrad.no_grad():
        ours.parametrizations.weight.original.copy_(jitgrad.tensor(X))
    q_ours, q_theirs = ours.weight, theirs.weight
    np.testing.assert_allclose(q_ours.detach().numpy(), q_theirs.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(_orth_gram(q_ours.detach().numpy()), np.eye(min(shape)),
                               atol=1e-12)
    G = RNG.standard_normal(shape)
    (q_ours * jitgrad.tensor(G)).sum().backward()
    (q_theirs * torch.tensor(G)).sum().backward()
    g_ours = ours.parametrizations.weight.original.grad.numpy()
    g_theirs = theirs.parametrizations.weight.original.grad.numpy()
    assert np.abs(g_ours).max() > 0
    np.testing.assert_allclose(g_ours, g_theirs, atol=1e-12)


@pytest.mark.parametrize("orth_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 4, 4), (2, 5, 3)])
def test_orthogonal_is_orthogonal(shape, orth_map):
    m = nn.Module()
    m.weight = nn.Parameter(jitgrad.randn(*shape))
    orthogonal(m, orthogonal_map=orth_map)
    W = m.weight
    assert W.shape == shape and W.dtype == jitgrad.float32
    if len(shape) == 2:
        eye = W @ W.T if shape[0] <= shape[1] else W.T @ W
        assert jitgrad.allclose(eye, jitgrad.eye(min(shape)), atol=1e-5)
    np.testing.assert_allclose(_orth_gram(W.detach().numpy()),
                               np.broadcast_to(np.eye(min(shape[-2:])), W.shape[:-2] +
                                               (min(shape[-2:]),) * 2), atol=1e-5)
    W.sum().backward()
    assert m.parametrizations.weight.original.grad is not None


def test_orthogonal_defaults_and_registration():
    lin = orthogonal(nn.Linear(4, 4))
    assert type(lin).__name__ == "ParametrizedLinear"
    p = lin.parametrizations.weight[0]
    assert p.orthogonal_map.name == "matrix_exp" and p.base.shape == (4, 4)
    assert parametrize.is_parametrized(lin, "weight")
    assert sorted(lin.state_dict()) == ["bias", "parametrizations.weight.0.base",
                                        "parametrizations.weight.original"]
    assert orthogonal(nn.Linear(3, 5)).parametrizations.weight[0].orthogonal_map.name == \
        "householder"
    plain = orthogonal(nn.Linear(3, 3), use_trivialization=False)
    assert not hasattr(plain.parametrizations.weight[0], "base")
    assert list(plain.state_dict()) == ["bias", "parametrizations.weight.original"]
    out = lin(jitgrad.randn(2, 4))
    assert out.shape == (2, 4)


def test_orthogonal_right_inverse_round_trip():
    lin = orthogonal(nn.Linear(4, 6))  # householder, trivialized
    Q = np.linalg.qr(RNG.standard_normal((6, 4)))[0].astype(np.float32)
    lin.weight = jitgrad.tensor(Q)
    np.testing.assert_allclose(lin.weight.detach().numpy(), Q, atol=1e-5)
    sq = orthogonal(nn.Linear(5, 5), orthogonal_map="cayley")
    Q = np.linalg.qr(RNG.standard_normal((5, 5)))[0].astype(np.float32)
    sq.weight = jitgrad.tensor(Q)
    np.testing.assert_allclose(sq.weight.detach().numpy(), Q, atol=1e-5)
    # a matrix that is not orthogonal is orthogonalised: its QR's Q with diag(R) >= 0
    A = RNG.standard_normal((5, 5)).astype(np.float32)
    sq.weight = jitgrad.tensor(A)
    q, r = np.linalg.qr(A)
    np.testing.assert_allclose(sq.weight.detach().numpy(), q * np.sign(np.diag(r)), atol=1e-5)
    # without trivialization, the Householder map inverts itself
    hh = orthogonal(nn.Linear(3, 5), use_trivialization=False)
    Q = np.linalg.qr(RNG.standard_normal((5, 3)))[0].astype(np.float32)
    hh.weight = jitgrad.tensor(Q)
    np.testing.assert_allclose(hh.weight.detach().numpy(), Q, atol=1e-5)
    p = hh.parametrizations.weight[0]
    np.testing.assert_allclose(p(p.right_inverse(jitgrad.tensor(Q))).numpy(), Q, atol=1e-5)
    me = orthogonal(nn.Linear(3, 3), orthogonal_map="matrix_exp", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        me.weight = jitgrad.tensor(Q[:3])
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices of shape"):
        lin.weight = jitgrad.eye(3)


def test_orthogonal_errors_match_torch():
    cases = [(lambda M: M.nn.Linear(3, 3), "bias", None),
             (lambda M: M.nn.Linear(3, 3), "weight", "qr"),
             (lambda M: M.nn.Linear(3, 3), "nothing", None)]
    ours = []
    for make, name, orth_map in cases:
        with pytest.raises(ValueError) as info:
            orthogonal(make(jitgrad), name, orth_map)
        ours.append(str(info.value))
    assert ours[0] == "Expected a matrix or batch of matrices. Got a tensor of 1 dimensions."
    torch = pytest.importorskip("torch")
    for (make, name, orth_map), msg in zip(cases[:2], ours):
        with pytest.raises(ValueError) as info:
            torch.nn.utils.parametrizations.orthogonal(make(torch), name, orth_map)
        assert str(info.value) == msg


def test_orthogonal_training_stays_orthogonal():
    jitgrad.manual_seed(0)
    lin = orthogonal(nn.Linear(4, 4, bias=False))
    opt = jitgrad.optim.SGD(lin.parameters(), lr=0.1)
    x, y = jitgrad.randn(16, 4), jitgrad.randn(16, 4)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = ((lin(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    W = lin.weight.detach().numpy()
    np.testing.assert_allclose(W @ W.T, np.eye(4), atol=1e-5)


def test_orthogonal_loads_torch_state_dict():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(3, 5))
    ours = orthogonal(nn.Linear(3, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours.load_state_dict({k: jitgrad.tensor(v.numpy())
                              for k, v in theirs.state_dict().items()})
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(),
                               atol=1e-6)


def test_helpers_module_is_importable_by_children():
    # the spawn start method pickles functions by module and name
    assert helpers.write_square.__module__ == "mp_helpers_52"
    assert os.path.dirname(helpers.__file__) == os.path.dirname(__file__)
