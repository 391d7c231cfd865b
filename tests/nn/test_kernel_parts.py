"""The hand-written part kernels (softmax family, layer norm, conv, pooling, BCE with logits)
run on the calling thread or split over jitgrad's thread pool with bit-identical results,
never start Numba's OpenMP threading layer, and keep working in forked children.

Each op runs twice: with its size thresholds patched so that the pool always takes the parts
(three pool threads, so the split is uneven on any machine) and so that the calling thread
always runs them all; a spy on ``run_parts`` checks which path ran.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tokenize
from pathlib import Path

import numpy as np
import pytest
from jitgrad.kernels import pool

import jitgrad
import jitgrad.nn.functional as F
from jitgrad.ops import conv_common, losses, rowwise
from jitgrad.ops.conv import avg_pool2d, conv2d, max_pool2d
from jitgrad.ops.nnops import norm

F32, F64 = np.float32, np.float64
#: modules that choose between the pool and the calling thread, with their size thresholds
_CALLERS = [(losses, ("PARALLEL_MIN_SIZE",)), (conv_common, ("PARALLEL_MIN_WORK",))]
#: modules that leave the choice to ``kernels.pool.run_sized``
_SIZED = [rowwise, norm, losses]


@pytest.fixture(scope="module", autouse=True)
def three_pool_threads():
    before = pool.pool_threads()
    pool.set_pool_threads(3)
    yield
    pool.set_pool_threads(before)


def _run(fn, pooled: bool):
    """``fn()`` (a list of arrays or tensors) with every caller forced onto the pool or onto
    the calling thread; returns the arrays and, per kernel run on the pool, its most parts."""
    calls = {}

    def spy(kernel, parts, args):
        name = kernel.py_func.__name__
        calls[name] = max(calls.get(name, 0), parts)
        pool.run_parts(kernel, parts, args)

    def sized(kernel, parts, size, args):
        if pooled and parts > 1:
            spy(kernel, parts, args)
        else:
            kernel(0, parts, *args)

    with pytest.MonkeyPatch.context() as mp:
        for mod, names in _CALLERS:
            mp.setattr(mod, "run_parts", spy)
            # as if no OpenBLAS spinner
            mp.setattr(mod, "parallel_ok", lambda n: True, raising=False)
            for name in names:
                mp.setattr(mod, name, 0 if pooled else 1 << 62)
        for mod in _SIZED:
            mp.setattr(mod, "run_sized", sized)
        res = [r.detach().numpy().copy() if isinstance(r, jitgrad.Tensor) else np.array(r)
               for r in fn()]
    return res, calls


def _assert_same_bits(fn, kernels):
    """``fn``'s results are bitwise equal on both paths; the pooled run split each of
    ``kernels`` over at least three parts."""
    seq, seq_calls = _run(fn, pooled=False)
    par, par_calls = _run(fn, pooled=True)
    assert not seq_calls
    assert all(par_calls.get(k, 0) >= 3 for k in kernels), par_calls
    assert len(seq) == len(par)
    for a, b in zip(seq, par):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)  # NaN-aware, bitwise for finite values
        assert a.tobytes() == b.tobytes()


# ---------------------------------------------------------------------------- softmax family
@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_family_pooled_equals_sequential(name, dim, dt):
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((37, 301)) * 4
    xa[3, 5] = np.inf  # rows with inf/NaN take the same path on every thread
    xa[7, 9] = np.nan

    def fn():
        x = jitgrad.tensor(xa.astype(dt), requires_grad=True)
        if name == "logsumexp":
            y = x.logsumexp(dim)
        else:
            y = getattr(F, name)(x, dim)
        g = jitgrad.tensor(np.random.default_rng(1).standard_normal(y.shape).astype(dt))
        y.backward(g)
        return [y, x.grad]

    _assert_same_bits(fn, [name] if name == "logsumexp" else [name, name + "_backward"])


# -------------------------------------------------------------------------------- layer norm
@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_pooled_equals_sequential(dt, affine):
    rng = np.random.default_rng(2)
    xa = (rng.standard_normal((29, 7, 33)) * 3 + 1).astype(dt)
    wa, ba = (rng.standard_normal((2, 7, 33))).astype(dt)
    ga = rng.standard_normal(xa.shape).astype(dt)

    def fn():
        x = jitgrad.tensor(xa, requires_grad=True)
        w = jitgrad.tensor(wa, requires_grad=True) if affine else None
        b = jitgrad.tensor(ba, requires_grad=True) if affine else None
        y = F.layer_norm(x, (7, 33), w, b)
        y.backward(jitgrad.tensor(ga))
        return [y, x.grad] + ([w.grad, b.grad] if affine else [])

    _assert_same_bits(fn, ["layer_norm", "layer_norm_backward"])


# ------------------------------------------------------------------------------ conv, pool
@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", [
    # (input, weight, stride, padding, dilation, groups), each big enough for >= 3 blocks of
    # every kernel: the strided input gradient runs the col2im kernel; stride 1 with >= 4
    # channels per group runs it as a forward convolution
    ((24, 6, 22, 20), (8, 3, 3, 3), 2, 1, 1, 2),
    ((12, 8, 14, 14), (12, 8, 3, 3), 1, 1, 1, 1),
    ((64, 1, 8, 8), (32, 1, 3, 3), 1, 1, 1, 1),  # the digits CNN's first layer
    ((20, 4, 16, 15), (6, 4, 3, 2), (2, 1), (1, 0), (1, 2), 1),
], ids=["strided-groups", "stride1", "digits-first", "dilated"])
def test_conv2d_pooled_equals_sequential(case, dt):
    xs, ws, s, p, d, grp = case
    rng = np.random.default_rng(3)
    xa = rng.standard_normal(xs).astype(dt)
    wa = (rng.standard_normal(ws) * 0.3).astype(dt)
    ba = rng.standard_normal(ws[0]).astype(dt)

    def fn():
        x = jitgrad.tensor(xa, requires_grad=True)
        w = jitgrad.tensor(wa, requires_grad=True)
        b = jitgrad.tensor(ba, requires_grad=True)
        y = conv2d(x, w, b, stride=s, padding=p, dilation=d, groups=grp)
        y.backward(jitgrad.tensor(np.random.default_rng(4).standard_normal(y.shape).astype(dt)))
        return [y, x.grad, w.grad, b.grad]

    # patch columns: the lowering kernels' parts are input channels, the layout kernels'
    # output channels; short patches in sample-major columns are multiplied per sample (no
    # layout kernel); patch rows (ungrouped, not short): every kernel's parts are samples
    ow = conv2d(jitgrad.zeros(1, *xs[1:]), jitgrad.zeros(ws), stride=s, padding=p, dilation=d,
                groups=grp).shape[-1]
    small = ws[1] * ws[2] * ws[3] < 32 and ow >= 8
    if grp == 1 and not small:
        _assert_same_bits(fn, ["lower_rows", "unlower_rows", "nc_to_rows", "rows_to_nc"])
    else:
        _assert_same_bits(fn, ["nc_to_cn"] + (["lower", "unlower"] if xs[1] >= 3 else [])
                          + ([] if small else ["cn_to_nc"]))


@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
def test_max_pool2d_pooled_equals_sequential(dt):
    rng = np.random.default_rng(5)
    xa = rng.standard_normal((6, 5, 13, 12)).astype(dt)
    xa[0, 0, 2, 2] = np.nan
    xa[1, 1, 4:6, 4:6] = 1.0  # ties: the first maximum in window order

    def fn():
        x = jitgrad.tensor(xa, requires_grad=True)
        y, idx = max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
        y.backward(jitgrad.tensor(np.random.default_rng(6).standard_normal(y.shape).astype(dt)))
        return [y, idx, x.grad]

    _assert_same_bits(fn, ["max_pool", "max_pool_backward"])


@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_pooled_equals_sequential(dt, count_include_pad):
    rng = np.random.default_rng(7)
    xa = rng.standard_normal((6, 5, 13, 12)).astype(dt)

    def fn():
        x = jitgrad.tensor(xa, requires_grad=True)
        y = avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True,
                       count_include_pad=count_include_pad)
        y.backward(jitgrad.tensor(np.random.default_rng(8).standard_normal(y.shape).astype(dt)))
        return [y, x.grad]

    _assert_same_bits(fn, ["avg_pool", "avg_pool_backward"])


# --------------------------------------------------------------------------------------- BCE
@pytest.mark.parametrize("dt", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_pooled_equals_sequential(dt, reduction):
    from jitgrad.kernels.losses import SUM_CHUNK

    n = 7 * SUM_CHUNK + 123  # several partial sums, the last one short
    rng = np.random.default_rng(9)
    xa = (rng.standard_normal(n) * 5).astype(dt)
    ya = (rng.random(n) > 0.4).astype(dt)
    wa = rng.random(n).astype(dt)
    pwa = np.asarray([1.5], dt)

    def fn():
        x = jitgrad.tensor(xa, requires_grad=True)
        loss = F.binary_cross_entropy_with_logits(
            x, jitgrad.tensor(ya), weight=jitgrad.tensor(wa), pos_weight=jitgrad.tensor(pwa),
            reduction=reduction)
        loss.backward(jitgrad.ones_like(loss) * 0.5)
        return [loss, x.grad]

    _assert_same_bits(fn, ["bce_logits_grad"] + ([] if reduction == "none" else ["bce_logits_sum"]))


def test_bce_sum_is_exact_sum_of_fixed_chunks():
    """The reduced loss is the correctly rounded sum of its chunks' float64 partial sums."""
    import math

    from jitgrad.kernels import losses as K

    rng = np.random.default_rng(10)
    n = 3 * K.SUM_CHUNK + 5
    x = rng.standard_normal(n)
    y = (rng.random(n) > 0.5).astype(np.float64)
    partial = np.empty(K.sum_chunks(n))
    K.bce_logits_sum(0, len(partial), x, y, None, None, partial)
    ref = [np.sum(np.maximum(x[i:i + K.SUM_CHUNK], 0) - x[i:i + K.SUM_CHUNK] * y[i:i + K.SUM_CHUNK]
                  + np.log1p(np.exp(-np.abs(x[i:i + K.SUM_CHUNK]))))
           for i in range(0, n, K.SUM_CHUNK)]
    np.testing.assert_allclose(partial, ref, rtol=1e-12)
    got = F.binary_cross_entropy_with_logits(jitgrad.tensor(x), jitgrad.tensor(y),
                                             reduction="sum").item()
    assert got == math.fsum(partial.tolist())


# ------------------------------------------------------------------- no OpenMP, fork-safe
_MINE = ["softmax.py", "nn.py", "conv.py", "pooling.py", "losses.py"]


def _sources():
    for root, prefix in ((Path(jitgrad.__file__).parent, "jitgrad"),
                         (Path(pool.__file__).parent, "kernels")):
        for path in sorted(root.rglob("*.py")):
            rel = f"{prefix}/{path.relative_to(root).as_posix()}"
            if prefix == "jitgrad" and rel.startswith("jitgrad/kernels/"):
                continue  # (only when kernels/ is installed inside the package)
            yield rel, path


def _parallel_code(src: str) -> list:
    """``prange`` names and ``parallel=True`` arguments in code (not comments or strings)."""
    toks = [t for t in tokenize.generate_tokens(io.StringIO(src).readline)
            if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE)]
    hits = []
    for i, t in enumerate(toks):
        if t.type == tokenize.NAME and t.string == "prange":
            hits.append((t.start[0], "prange"))
        if (t.type == tokenize.NAME and t.string == "parallel" and i + 2 < len(toks)
                and toks[i + 1].string == "=" and toks[i + 2].string == "True"):
            hits.append((t.start[0], "parallel=True"))
    return hits


def test_part_kernel_modules_have_no_prange():
    root = Path(pool.__file__).parent
    for name in _MINE:
        src = (root / name).read_text()
        assert "prange" not in src and "parallel=True" not in src, name


def test_no_module_starts_openmp():
    found = {rel: hits for rel, path in _sources()
             for hits in [_parallel_code(path.read_text())] if hits}
    assert not found


_FORK_SCRIPT = r"""
import multiprocessing as mp
import numpy as np
import jitgrad
import jitgrad.nn.functional as F
from jitgrad.kernels import parallel
from jitgrad.ops import conv_common, losses, rowwise
from jitgrad.ops.conv import conv2d, max_pool2d
from jitgrad.ops.nnops import norm
import numba.np.ufunc.parallel as npar

from jitgrad.compiler import group_runner
from jitgrad.ops import dispatch, eager_kernels, eager_reduce

for mod, names in [(rowwise, ["PARALLEL_MIN_SIZE"]), (norm, ["PARALLEL_MIN_SIZE"]),
                   (losses, ["PARALLEL_MIN_SIZE"]),
                   (conv_common, ["PARALLEL_MIN_WORK"]),
                   (eager_kernels, ["PARALLEL_MIN_SIZE"]), (dispatch, ["_PAR_MIN"]),
                   (eager_reduce, ["PARALLEL_MIN_SIZE"]),
                   (group_runner, ["PARALLEL_MIN_WORK"])]:
    for name in names:
        setattr(mod, name, 0)  # every kernel on the pool
step = jitgrad.compile(lambda a, b: (jitgrad.tanh(a * b) + a).sum(1))


def work(seed):
    parallel._blas_at[0] = float("-inf")
    rng = np.random.default_rng(seed)
    x = jitgrad.tensor(rng.standard_normal((8, 4, 10, 10)).astype(np.float32))
    w = jitgrad.tensor(rng.standard_normal((6, 4, 3, 3)).astype(np.float32))
    y = max_pool2d(conv2d(x, w, padding=1), 2)
    z = F.layer_norm(F.softmax(y.reshape(8, -1), -1), (150,))
    t = jitgrad.tensor((rng.random(z.shape) > 0.5).astype(np.float32))
    loss = F.binary_cross_entropy_with_logits(z, t)
    a = jitgrad.tensor(rng.standard_normal((64, 300)).astype(np.float32))
    e = (jitgrad.sigmoid(a) * a + 1.0).sum(0)  # eager element-wise kernels and a sum
    c = step(a, a)  # a compiled plan's fused kernel
    return (float(loss.item()), float(z.sum().item()), float(e.sum().item()),
            float(c.sum().item()))


ref = [work(s) for s in range(4)]
assert not npar._is_initialized, "Numba's threading layer was started"
with mp.get_context("fork").Pool(2) as p:
    got = p.map(work, range(4))
assert got == ref, (got, ref)
print("ok")
"""


def test_forked_children_run_the_kernels():
    """A process that ran the kernels on the pool forks workers that run them again (with
    OpenMP started in the parent, children died or ``Pool.map`` hung)."""
    r = subprocess.run([sys.executable, "-c", _FORK_SCRIPT], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
