"""Batched matrix products split across the pool (kernels/blas_batch.py): the bits of
``np.matmul`` (the same single-threaded GEMM per matrix) for every operand layout BLAS reads
in place, independent of the thread count, written into ``out=``, declined (None) where it
does not apply, and taken by eager ``matmul``, its backward and compiled plans alike."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import python_prints
from jitgrad.kernels import blas_batch, pool

import jitgrad

pytestmark = pytest.mark.skipif(
    pool.pool_threads() < 2 or blas_batch._gemm_addresses() is None,
    reason="needs two threads and NumPy's OpenBLAS with 64-bit integers")

RNG = np.random.default_rng(0)


def _operands(batch, m, k, n, dtype, ta=False, tb=False):
    """``a`` (batch, m, k) and ``b`` (batch, k, n); ``ta``/``tb``: as transposed views of
    contiguous (k, m) / (n, k) matrices (attention's ``k.transpose(-2, -1)``)."""
    a = RNG.standard_normal(batch + ((k, m) if ta else (m, k))).astype(dtype)
    b = RNG.standard_normal(batch + ((n, k) if tb else (k, n))).astype(dtype)
    return (a.swapaxes(-1, -2) if ta else a), (b.swapaxes(-1, -2) if tb else b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_batched_products_have_the_bits_of_numpy(dtype, ta, tb):
    a, b = _operands((8, 8), 48, 32, 40, dtype, ta, tb)
    out = blas_batch.batched_matmul(a, b)
    assert out is not None and out.flags.c_contiguous
    np.testing.assert_array_equal(out, np.matmul(a, b))


def test_views_into_a_wider_buffer_and_broadcast_batches():
    qkv = RNG.standard_normal((16, 64, 192), dtype=np.float32)  # (B, T, 3C), 2 heads of 32
    q = qkv[:, :, :64].reshape(16, 64, 2, 32).transpose(0, 2, 1, 3)
    k = qkv[:, :, 64:128].reshape(16, 64, 2, 32).transpose(0, 2, 1, 3)
    att = blas_batch.batched_matmul(q, k.transpose(0, 1, 3, 2))
    np.testing.assert_array_equal(att, np.matmul(q, k.transpose(0, 1, 3, 2)))
    a = RNG.standard_normal((3, 1, 64, 64), dtype=np.float32)
    b = RNG.standard_normal((5, 64, 64), dtype=np.float32)
    np.testing.assert_array_equal(blas_batch.batched_matmul(a, b), np.matmul(a, b))
    w = RNG.standard_normal((32, 40), dtype=np.float32)  # one matrix for every batch entry
    x = RNG.standard_normal((64, 48, 32), dtype=np.float32)
    np.testing.assert_array_equal(blas_batch.batched_matmul(x, w), np.matmul(x, w))


def test_written_into_out_and_a_mismatched_out_declined():
    a, b = _operands((64,), 48, 32, 40, np.float32)
    out = np.full((64, 48, 40), np.nan, np.float32)
    assert blas_batch.batched_matmul(a, b, out) is out
    np.testing.assert_array_equal(out, np.matmul(a, b))
    for bad in (np.empty((64, 40, 48), np.float32), np.empty((64, 48, 40), np.float64),
                np.empty((64, 40, 48), np.float32).swapaxes(1, 2)):
        assert blas_batch.batched_matmul(a, b, bad) is None


def test_the_result_does_not_depend_on_the_thread_count():
    a, b = _operands((64,), 48, 32, 40, np.float32, tb=True)
    pooled = blas_batch.batched_matmul(a, b)
    threads = jitgrad.get_num_threads()
    jitgrad.set_num_threads(1)
    try:
        assert blas_batch.batched_matmul(a, b) is None  # one thread: NumPy's loop
        one = jitgrad.matmul(jitgrad.from_numpy(a), jitgrad.from_numpy(b)).numpy()
    finally:
        jitgrad.set_num_threads(threads)
    np.testing.assert_array_equal(pooled, one)


@pytest.mark.parametrize("case", ["ints", "mixed", "matrices", "big", "tiny", "single",
                                  "mismatch"])
def test_declined_where_it_does_not_apply(case):
    a, b = _operands((64,), 48, 32, 40, np.float32)
    assert blas_batch.batched_matmul(a, b) is not None
    if case == "ints":
        a, b = a.astype(np.int64), b.astype(np.int64)
    elif case == "mixed":
        b = b.astype(np.float64)
    elif case == "matrices":  # 2-D: one GEMM, OpenBLAS threads it itself
        a, b = a[0], b[0]
    elif case == "big":  # each matrix big enough for OpenBLAS to thread
        a, b = _operands((4,), 128, 64, 64, np.float32)
    elif case == "tiny":  # too little work to pay a launch
        a, b = _operands((8,), 48, 32, 40, np.float32)
    elif case == "strided":  # no unit stride along either axis of a matrix
        a = RNG.standard_normal((8, 48, 64), dtype=np.float32)[:, :, ::2]
    elif case == "single":
        a, b = a[:1], b[:1]
    else:
        b = b[:, :16]
    assert blas_batch.batched_matmul(a, b) is None


@pytest.mark.parametrize("case", ["strided", "expanded"])
def test_operands_blas_cannot_read_are_copied_first(case):
    """No unit stride along either axis of a matrix (a strided slice; the gradient of a sum,
    expanded from one number): computed on a contiguous copy, as BLAS multiplies it."""
    b = RNG.standard_normal((64, 32, 40), dtype=np.float32)
    if case == "strided":
        a = RNG.standard_normal((64, 48, 64), dtype=np.float32)[:, :, ::2]
    else:
        a = np.broadcast_to(np.float32(1.5), (64, 48, 32))
    out = blas_batch.batched_matmul(a, b)
    np.testing.assert_array_equal(out, np.matmul(np.ascontiguousarray(a), b))
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-5, atol=1e-5)


def _attention_scores(q, k, v):
    att = q @ k.transpose(-2, -1)
    return (att.softmax(-1) @ v).sum()


def test_eager_backward_and_compiled_take_the_same_products():
    q, k, v = (jitgrad.from_numpy(RNG.standard_normal((8, 4, 64, 32), dtype=np.float32))
               for _ in range(3))
    calls = []
    real = blas_batch.batched_matmul

    def counted(a, b, out=None):
        r = real(a, b, out)
        calls.append(r is not None)
        return r

    import jitgrad.ops.linalg as linalg

    linalg.batched_matmul = counted
    try:
        grads = []
        for fn in (_attention_scores, jitgrad.compile(_attention_scores)):
            for t in (q, k, v):
                t.requires_grad_(True)
                t.grad = None
            loss = fn(q, k, v)
            loss.backward()
            grads.append([loss.detach().numpy()] + [t.grad.numpy() for t in (q, k, v)])
    finally:
        linalg.batched_matmul = real
    assert sum(calls) >= 8  # forward and backward products, eager and compiled
    for e, c in zip(*grads):
        np.testing.assert_array_equal(e, c)


def test_switched_off_by_the_environment():
    a, b = np.ones((64, 48, 32), np.float32), np.ones((64, 32, 40), np.float32)
    assert blas_batch.batched_matmul(a, b) is not None
    words = python_prints(
        "import numpy as np; from jitgrad.kernels import blas_batch; "
        "a = np.ones((64, 48, 32), np.float32); b = np.ones((64, 32, 40), np.float32); "
        "print(blas_batch.batched_matmul(a, b) is None)", JITGRAD_BATCHED_GEMM="0")
    assert words == ["True"]


def test_switched_off_and_on_in_a_process():
    a, b = _operands((64,), 48, 32, 40, np.float32)
    blas_batch.set_batched_gemm(False)
    try:
        assert blas_batch.batched_matmul(a, b) is None
    finally:
        blas_batch.set_batched_gemm(True)
    assert blas_batch.batched_matmul(a, b) is not None
