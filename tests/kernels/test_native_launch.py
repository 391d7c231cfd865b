"""Parallel kernels launched on the C pool (jitgrad._nativepool via kernels/native_launch.py):
the kernel's machine code called with its arguments flattened, the same bits as the Python
pool and as one thread, and the Python pool for everything the native path cannot pass."""

from __future__ import annotations

import numpy as np
import pytest
from jitgrad.kernels import native_launch, pool
from numba import njit

pytestmark = pytest.mark.skipif(not native_launch.native_pool_enabled(),
                                reason="the C pool is not built on this platform")


def _launches() -> int:
    from jitgrad import _nativepool

    return _nativepool.launches()


@njit(nogil=True, cache=True)
def _axpb(lo, hi, x, a, b, flag, scale32, out):
    """Every kind of argument: arrays, a float64, an int, a bool, a float32."""
    for i in range(lo, hi):
        v = x[i] * a + b
        out[i] = (v if flag else -v) * scale32


@njit(nogil=True, cache=True)
def _rows(lo, hi, m, col, out):
    """2-D arrays, one strided (a column view), one C-contiguous."""
    for r in range(lo, hi):
        for c in range(m.shape[1]):
            out[r, c] = m[r, c] + col[r, 0]


@njit(nogil=True, cache=True)
def _nine_numbers(lo, hi, out, a, b, c, d, e, f, g, h, i):
    for k in range(lo, hi):
        out[k] = a + b + c + d + e + f + g + h + i + k


@njit(nogil=True, cache=True)
def _fail_at(lo, hi, bad, out):
    for k in range(lo, hi):
        if k == bad:
            raise ValueError("bad part")
        out[k] = 1


def _on_pool(fn, parts, args):
    """Run through the pool twice (the first launch finds the compiled overload) and return
    how many of those launches ran on the C pool."""
    before = _launches()
    pool.run_parts(fn, parts, args)
    pool.run_parts(fn, parts, args)
    return _launches() - before


@pytest.fixture
def two_threads():
    before = pool.pool_threads()
    pool.set_pool_threads(2)
    yield
    pool.set_pool_threads(before)


def test_every_kind_of_argument_gives_the_bits_of_one_thread(two_threads, rng):
    x = rng.standard_normal(10_001)
    out, ref = np.empty_like(x), np.empty_like(x)
    args = (x, 1.25, 3, True, np.float32(0.7))
    _axpb(0, x.size, *args, ref)
    assert _on_pool(_axpb, x.size, (*args, out)) >= 1
    np.testing.assert_array_equal(out, ref)
    _axpb(0, x.size, x, -2.5, -7, False, np.float32(1e-3), ref)
    pool.run_parts(_axpb, x.size, (x, -2.5, -7, False, np.float32(1e-3), out))
    np.testing.assert_array_equal(out, ref)


def test_strided_two_dimensional_arrays(two_threads, rng):
    m = rng.standard_normal((37, 5)).astype(np.float32)
    col = rng.standard_normal((37, 3)).astype(np.float32)[:, 1:2]  # not contiguous
    out, ref = np.empty_like(m), np.empty_like(m)
    _rows(0, 37, m, col, ref)
    assert _on_pool(_rows, 37, (m, col, out)) >= 1
    np.testing.assert_array_equal(out, ref)


def test_what_it_cannot_pass_runs_on_the_python_pool(two_threads):
    out = np.zeros(100)
    before = _launches()
    pool.run_parts(_nine_numbers, 100, (out, *[1.0] * 9))  # nine numbers: not in xmm0-7
    pool.run_parts(_nine_numbers, 100, (out, *[1.0] * 9))
    assert _launches() == before
    np.testing.assert_array_equal(out, 9.0 + np.arange(100))
    seen = []
    pool.run_parts(lambda lo, hi, acc: acc.append((lo, hi)), 4, (seen,))  # not a dispatcher
    assert sorted(seen) == [(0, 2), (2, 4)]


def test_a_failing_share_raises_the_kernels_error_and_the_pool_stays_usable(two_threads):
    out = np.zeros(64, np.int64)
    pool.run_parts(_fail_at, 64, (-1, out))  # compiled, no error
    with pytest.raises(ValueError, match="bad part"):
        pool.run_parts(_fail_at, 64, (50, out))  # a worker's share fails
    with pytest.raises(ValueError, match="bad part"):
        pool.run_parts(_fail_at, 64, (3, out))  # the caller's share fails
    out[:] = 0
    before = _launches()
    pool.run_parts(_fail_at, 64, (-1, out))
    assert _launches() == before + 1
    assert (out == 1).all()


def test_eager_ops_run_natively_with_the_bits_of_the_python_pool(two_threads, monkeypatch,
                                                                 rng):
    import jitgrad as jg

    n = 1 << 20  # above PARALLEL_MIN_SIZE
    x = jg.tensor(rng.standard_normal(n), dtype=jg.float32, requires_grad=True)
    w = jg.tensor(rng.standard_normal(n), dtype=jg.float32, requires_grad=True)

    def step():
        x.grad = w.grad = None
        loss = (jg.tanh(x * w + 0.5) ** 2 * jg.sigmoid(x)).sum()
        loss.backward()
        return loss.detach().numpy(), x.grad.numpy(), w.grad.numpy()

    step()
    before = _launches()
    native = step()
    assert _launches() - before >= 5
    monkeypatch.setattr(native_launch, "_enabled", False)
    monkeypatch.setattr(native_launch, "_specs", {})
    before = _launches()
    python = step()
    assert _launches() == before
    for a, b in zip(native, python):
        np.testing.assert_array_equal(a, b)


def test_changing_the_thread_count_replaces_the_c_pool(rng):
    x = rng.standard_normal(10_000)
    ref = np.empty_like(x)
    _axpb(0, x.size, x, 2.0, 1, True, np.float32(1.0), ref)
    before = pool.pool_threads()
    try:
        for n in (3, 2, 4):
            pool.set_pool_threads(n)
            out = np.empty_like(x)
            assert _on_pool(_axpb, 1000, (x[:1000], 2.0, 1, True, np.float32(1.0),
                                          out[:1000])) >= 1
            np.testing.assert_array_equal(out[:1000], ref[:1000])
    finally:
        pool.set_pool_threads(before)


def test_mid_size_eager_ops_go_parallel_while_the_workers_are_awake(two_threads, rng,
                                                                   monkeypatch):
    from jitgrad.kernels import parallel
    from jitgrad.kernels.parallel import HOT_MIN_SIZE, PARALLEL_MIN_SIZE

    import jitgrad as jg

    # (a GEMM of an earlier test keeps kernels on the calling thread for a while: not here)
    monkeypatch.setattr(parallel, "_blas_at", [float("-inf")])
    # workers spin longer than one of these ops takes on a slow or busy machine (on the
    # default 100 us, a host where each op takes longer found them asleep at every launch)
    monkeypatch.setattr(native_launch, "_spin_us", 20_000.0)

    n = (HOT_MIN_SIZE + PARALLEL_MIN_SIZE) // 2
    x = jg.tensor(rng.standard_normal(n), dtype=jg.float32)
    w = jg.tensor(rng.standard_normal(n), dtype=jg.float32)
    with jg.no_grad():
        x * w, jg.tanh(x), x.sum()
        before = _launches()
        results = [(x * w, jg.tanh(x), x.sum()) for _ in range(20)]
    assert _launches() > before  # the first wakes the workers, the next find them spinning
    for prod, th, s in results:
        np.testing.assert_array_equal(prod.numpy(), x.numpy() * w.numpy())
        np.testing.assert_array_equal(th.numpy(), results[0][1].numpy())
        np.testing.assert_array_equal(s.numpy(), results[0][2].numpy())
    native_launch._enabled, saved = False, native_launch._enabled
    try:
        with jg.no_grad():
            seq = (jg.tanh(x), x.sum())
    finally:
        native_launch._enabled = saved
    np.testing.assert_array_equal(seq[0].numpy(), results[-1][1].numpy())
    np.testing.assert_array_equal(seq[1].numpy(), results[-1][2].numpy())
