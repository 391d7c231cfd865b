"""OpenBLAS's threaded work on jitgrad's C pool (kernels/blas_threads.py): routed where
NumPy's OpenBLAS has the threads callback, the same bits as on OpenBLAS's own threads,
correct when several threads multiply at once and after ``fork``, and the rule that kept
kernels on one thread after a GEMM (OpenBLAS's spinning workers) off while routed."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from helpers import python_prints
from jitgrad.kernels import blas_threads, native_launch, parallel, pool

import jitgrad

pytestmark = pytest.mark.skipif(
    not native_launch.native_pool_enabled() or pool.pool_threads() < 2
    or os.environ.get("JITGRAD_BLAS_THREADS", "pool") == "openblas",
    reason="needs the C pool and two threads")


def _routable() -> bool:
    return any(blas_threads._openblas_entry(p) for p in blas_threads._openblas_libraries())


needs_callback = pytest.mark.skipif(not _routable(),
                                    reason="NumPy's BLAS is not an OpenBLAS with the callback")


def _threaded_product(seed: int = 0):
    """Operands big enough for OpenBLAS to thread the product (M*N*K >= 4 * 65536)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((192, 300), dtype=np.float32),
            rng.standard_normal((300, 160), dtype=np.float32))


@needs_callback
def test_a_kernel_load_routes_openblas_to_the_pool():
    (jitgrad.ones(8) * 2).sum()  # loads the eager kernels
    assert blas_threads.route_blas_threads()
    assert blas_threads.blas_routed()
    assert parallel.parallel_ok(1 << 17)  # no spinning OpenBLAS worker to wait for
    a, b = _threaded_product()
    runs = blas_threads.blas_counts()[0]
    a @ b
    assert blas_threads.blas_counts()[0] > runs


@needs_callback
def test_products_have_the_same_bits_on_the_pool_and_on_openblas_threads():
    blas_threads.route_blas_threads()
    cases = [_threaded_product(s) for s in range(3)]
    cases.append((np.random.default_rng(5).standard_normal((600, 500)),
                  np.random.default_rng(6).standard_normal((500, 400))))  # float64
    pooled = [a @ b for a, b in cases]
    pooled.append(cases[0][0].T.copy().T @ cases[0][1])  # a transposed operand
    blas_threads.unroute_blas_threads()
    try:
        assert not blas_threads.blas_routed()
        assert not parallel._blas_on_pool[0]
        own = [a @ b for a, b in cases]
        own.append(cases[0][0].T.copy().T @ cases[0][1])
    finally:
        assert blas_threads.route_blas_threads()
    for p, o in zip(pooled, own):
        assert np.array_equal(p, o)


@needs_callback
def test_threads_multiplying_at_once_get_correct_products():
    """One caller holds the pool; the others' jobs run on threads started for them, each in
    slots (OpenBLAS's per-thread buffers) of its own."""
    blas_threads.route_blas_threads()
    a, b = _threaded_product(7)
    want = a @ b
    results: list = []
    spawned = blas_threads.blas_counts()[1]

    def work():
        for _ in range(30):
            results.append(np.array_equal(a @ b, want))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 120 and all(results)
    assert blas_threads.blas_counts()[1] >= spawned


@needs_callback
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_multiplies_on_a_new_pool():
    blas_threads.route_blas_threads()
    a, b = _threaded_product(3)
    want = a @ b
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's pool threads do not exist here
        ok = all(np.array_equal(a @ b, want) for _ in range(5))
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"1"


def test_the_environment_switch_leaves_openblas_threads_alone():
    code = ("import jitgrad, numpy as np\n"
            "from jitgrad.kernels import blas_threads, parallel\n"
            "(jitgrad.ones(8) * 2).sum()\n"
            "print(blas_threads.route_blas_threads(), parallel._blas_on_pool[0])\n")
    assert python_prints(code, JITGRAD_BLAS_THREADS="openblas") == ["False", "False"]


@needs_callback
def test_a_plan_kernel_after_a_product_runs_on_the_awake_workers():
    """A fused kernel of middling size (between HOT_MIN_WORK and PARALLEL_MIN_WORK) runs on
    the pool when its workers are awake, as after a product they ran; eager's bits."""
    rng = np.random.default_rng(0)
    x = jitgrad.tensor(rng.standard_normal((256, 300), dtype=np.float32))
    w = jitgrad.tensor(rng.standard_normal((300, 384), dtype=np.float32))
    b = jitgrad.tensor(rng.standard_normal(384, dtype=np.float32))

    def f(x, w, b):
        return ((x @ w) + b).relu() * 0.5

    cf = jitgrad.compile(f)
    want = f(x, w, b).numpy()
    cf(x, w, b)
    from jitgrad import _nativepool

    before = _nativepool.launches()
    outs = []
    for _ in range(200):  # (a call delayed past the workers' spin -- a loaded machine --
        outs.append(cf(x, w, b).numpy())  # finds them asleep: not all, not most)
        if len(outs) >= 20 and _nativepool.launches() > before:
            break
    assert _nativepool.launches() > before
    for got in outs:
        assert np.array_equal(got, want)


@needs_callback
def test_set_num_threads_governs_the_products_on_the_pool():
    """As PyTorch's ``set_num_threads`` governs its BLAS: one thread, no job set on the pool
    (OpenBLAS multiplies on the calling thread); three, all three jobs on the pool. (Another
    split of the product may round differently: OpenBLAS's Haswell kernels, which
    ``kernels/blas_core.py`` picks on Zen 4, give 3 threads other bits than 2.)"""
    blas_threads.route_blas_threads()
    a, b = _threaded_product(11)
    want = a @ b
    before = jitgrad.get_num_threads()
    try:
        jitgrad.set_num_threads(1)
        runs, spawned = blas_threads.blas_counts()
        np.testing.assert_allclose(a @ b, want, rtol=1e-5, atol=1e-4)
        assert blas_threads.blas_counts() == (runs, spawned)
        jitgrad.set_num_threads(3)
        three = a @ b
        np.testing.assert_allclose(three, want, rtol=1e-5, atol=1e-4)
        assert np.array_equal(a @ b, three)  # the same split: the same bits
        assert blas_threads.blas_counts() == (runs + 2, spawned)  # no thread started for it
    finally:
        jitgrad.set_num_threads(before)
    runs = blas_threads.blas_counts()[0]
    assert np.array_equal(a @ b, want)
    assert blas_threads.blas_counts()[0] == runs + 1
