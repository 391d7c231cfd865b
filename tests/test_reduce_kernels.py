"""Float sums: float64 accumulation, every axis layout, determinism across thread counts."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as jg


@pytest.mark.parametrize("shape,dims", [
    ((1000,), None), ((300_000,), None), ((300, 500), 0), ((300, 500), 1), ((1024, 256), 0),
    ((4, 300, 500), (0, 2)), ((2, 3, 4), 1), ((2, 3, 4), (1, 2)), ((5, 1, 3), 1), ((0, 3), 0),
    ((2, 200_000), 1), ((200_000, 2), 0), ((3, 70_000, 2), 1),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_matches_float64_reference(shape, dims, dtype, rng):
    a = rng.standard_normal(shape).astype(dtype)
    got = jg.tensor(a).sum(dim=dims) if dims is not None else jg.tensor(a).sum()
    ref = a.astype(np.float64).sum(axis=dims)
    assert got.dtype == jg.from_numpy(a).dtype and got.shape == np.shape(ref)
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got.numpy(), ref, rtol=tol, atol=tol * np.sqrt(a.size + 1))


def test_mean_keepdim_and_empty(rng):
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    got = jg.tensor(a).mean(dim=(0, 2), keepdim=True)
    np.testing.assert_allclose(got.numpy(), a.mean(axis=(0, 2), keepdims=True), rtol=1e-6)
    assert np.isnan(jg.zeros(0).mean().item())


def test_float32_sum_of_1e7_elements_is_accurate():
    x = np.full(10_000_000, 0.1, np.float32)
    exact = 1e7 * float(np.float32(0.1))
    got = jg.tensor(x).sum().item()
    assert abs(got - exact) / exact <= 1e-6


def test_sum_propagates_nan_and_inf():
    assert np.isnan(jg.tensor([1.0, float("nan"), 2.0]).sum().item())
    assert jg.tensor([1.0, float("inf")]).sum().item() == float("inf")
    big = np.ones(300_000, np.float32)
    big[5] = np.nan
    assert np.isnan(jg.tensor(big).sum().item())


_PROBE = """
import numpy as np, jitgrad as jg
rng = np.random.default_rng(7)
a = jg.tensor(rng.standard_normal(3_000_001).astype(np.float32))
m = jg.tensor(rng.standard_normal((4, 500_000)).astype(np.float32))
print(a.sum().item().hex(), m.sum(1).numpy().tobytes().hex(), m.sum(0)[:64].numpy().tobytes().hex())
"""


def test_parallel_sums_are_deterministic_across_thread_counts():
    outs = []
    for threads in ("1", "2"):
        env = dict(os.environ, NUMBA_NUM_THREADS=threads)
        r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                           env=env, check=True, timeout=300)
        outs.append(r.stdout)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("shape,dims", [((300_001,), None), ((7, 50_001), 1),
                                        ((50_001, 3), 0), ((3, 20_000, 300), 1),
                                        ((3, 20_000, 30), (0, 2))])
def test_sequential_and_parallel_kernels_give_the_same_bits(shape, dims, rng, monkeypatch):
    """Eager sums run on the calling thread or on the pool, decided at run time (sequential
    while BLAS workers may spin): both must produce identical results."""
    from jitgrad.kernels import pool as kernel_pool

    from jitgrad.ops import eager_reduce

    a = jg.tensor(rng.standard_normal(shape).astype(np.float32))
    outs = []
    for pool in (False, True):
        monkeypatch.setattr(eager_reduce, "HOT_MIN_SIZE", 1 if pool else 1 << 62)
        # (eager sums choose through kernels.pool.run_sized)
        monkeypatch.setattr(kernel_pool, "parallel_mode", lambda n, pool=pool: 2 if pool else 0)
        outs.append((a.sum() if dims is None else a.sum(dims)).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])


def test_parallel_use_waits_for_blas_spinners(monkeypatch):
    from jitgrad.kernels import parallel

    # (the rule for OpenBLAS's own workers: not routed to jitgrad's pool, test_blas_threads)
    monkeypatch.setattr(parallel, "_blas_on_pool", [False])
    parallel._blas_at[0] = float("-inf")
    assert parallel.parallel_ok(1 << 18)
    parallel.note_blas(1 << 10)  # too small for OpenBLAS to thread: no spinners
    assert parallel.parallel_ok(1 << 18)
    parallel.note_blas(1 << 20)
    assert not parallel.parallel_ok(1 << 18)
    assert parallel.parallel_ok(parallel.BLAS_PARALLEL_MIN)  # huge work: still parallel
    parallel._blas_at[0] = float("-inf")


@pytest.mark.parametrize("shape,dims,keepdim", [
    ((64, 128), (1,), False), ((64, 128), (0,), True), ((64, 128), (0, 1), False),
    ((2, 3, 4), (1, 2), True), ((5, 1, 3), (1,), False), ((4, 6, 5), (0, 2), False),
    ((3, 7), (0,), False),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_repeated_sum_takes_its_remembered_layout_with_the_same_bits(shape, dims, keepdim,
                                                                       dtype, rng):
    """``sum_float`` remembers what it derived for a C-contiguous array of a shape, dims and
    dtype (the second call of a training loop's sum takes it); the bits are those of the
    first call, and arrays that are not C-contiguous take the general path."""
    from jitgrad.ops import eager_reduce as er
    from jitgrad.ops.eager_kernels import sum_kind

    a = rng.standard_normal(shape).astype(dtype)
    first = er.sum_float(a, dims, keepdim, 0.25)
    key = (a.dtype, a.shape, dims, keepdim)
    # (a "general" sum copies first; summing only size-1 dims is a copy: neither is kept)
    assert (key in er._layouts) == (sum_kind(shape, dims) not in (None, "general"))
    again = er.sum_float(a, dims, keepdim, 0.25)
    np.testing.assert_array_equal(again, first)
    assert again.dtype == first.dtype and again.shape == first.shape
    b = rng.standard_normal(shape).astype(dtype)
    np.testing.assert_array_equal(er.sum_float(b, dims, keepdim),
                                  er._sum_float(b, dims, keepdim, 1.0))
    if a.ndim == 2:  # a transposed view of the same shape: not C-contiguous, general path
        t = np.ascontiguousarray(a.T).T
        np.testing.assert_array_equal(er.sum_float(t, dims, keepdim, 0.25), first)
