"""Batched matrix products split across the pool: one OpenBLAS GEMM per matrix of the batch.

``np.matmul`` of stacked matrices (attention's ``q @ k.transpose(-2, -1)`` and ``att @ v``,
their gradients) calls BLAS once per matrix, one after the other. OpenBLAS runs a GEMM of
at most ``GEMM_MULTITHREAD_THRESHOLD`` (4 * 65536) multiply-adds on the calling thread, so a
batch of such matrices -- the GPT example's 128 heads of 64 x 32 x 64 -- used one core of
the machine (the compiled GPT "small" step: 13.7 ms of 111 in its 24 batched products).

:func:`gemm_slices` runs the same per-matrix ``cblas_?gemm`` calls from the parts of a pool
launch (``kernels/pool.run_parts``): a part is a range of the batch, and each matrix is one
single-threaded GEMM whichever thread runs it, so the result does not depend on the number
of threads (eager mode and compiled plans both call it through ``ops/linalg``: the same
bits). The GEMM is called through its address (an intrinsic casting the integer to a
function pointer), so the kernel has no process-specific constant and Numba caches it.

Only NumPy's own OpenBLAS with 64-bit integers is used (the ``scipy_cblas_?gemm64_``
functions of NumPy's PyPI wheels, or a plain ``cblas_?gemm64_``): the function is looked up
in the library NumPy's BLAS lives in, so it computes what ``np.matmul`` would. Anything else
(another BLAS, 32-bit integers, an operand whose matrices are not BLAS-shaped) is answered
None by :func:`batched_matmul` and the caller keeps ``np.matmul``.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic

from .blas_batch import ROW_MAJOR
from .cached import cached_njit

__all__ = ["gemm_slices"]


def _gemm_intrinsic(double: bool):
    """``gemm(fn, ta, tb, m, n, k, a, lda, b, ldb, c, ldc)``: calls the ``cblas_?gemm`` at
    address ``fn`` (row-major, alpha 1, beta 0) on the matrices at addresses ``a``, ``b``,
    ``c``; every argument an int64."""

    @intrinsic
    def gemm(typingctx, fn, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
        sig = types.void(*([types.int64] * 12))

        def codegen(context, builder, signature, args):
            fn, ta, tb, m, n, k, a, lda, b, ldb, c, ldc = args
            i32, i64 = ir.IntType(32), ir.IntType(64)
            real = ir.DoubleType() if double else ir.FloatType()
            ptr = real.as_pointer()
            fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, real, ptr,
                                                   i64, ptr, i64, real, ptr, i64])
            target = builder.inttoptr(fn, fnty.as_pointer())
            builder.call(target, [
                ir.Constant(i32, ROW_MAJOR), builder.trunc(ta, i32), builder.trunc(tb, i32),
                m, n, k, ir.Constant(real, 1.0), builder.inttoptr(a, ptr), lda,
                builder.inttoptr(b, ptr), ldb, ir.Constant(real, 0.0), builder.inttoptr(c, ptr),
                ldc])
            return context.get_dummy_value()

        return sig, codegen

    return gemm


_sgemm = _gemm_intrinsic(False)
_dgemm = _gemm_intrinsic(True)


@cached_njit(nogil=True)
def gemm_slices(lo, hi, fn, double, ta, tb, m, n, k, lda, ldb, a, b, c, a_off, b_off, c_off):
    """Matrices ``[lo, hi)`` of a batch: ``C_i = op(A_i) @ op(B_i)``, the i-th matrix of
    each operand at byte address ``a + a_off[i]`` (``b``, ``c`` alike); ``fn`` the address
    of ``cblas_dgemm`` if ``double`` else of ``cblas_sgemm`` (64-bit integers)."""
    for i in range(lo, hi):
        if double:
            _dgemm(fn, ta, tb, m, n, k, a + a_off[i], lda, b + b_off[i], ldb, c + c_off[i], n)
        else:
            _sgemm(fn, ta, tb, m, n, k, a + a_off[i], lda, b + b_off[i], ldb, c + c_off[i], n)
