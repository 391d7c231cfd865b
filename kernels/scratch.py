"""Helpers of generated kernels: ``scratch_*(n)``, a fixed-size array on the calling kernel's
stack, and ``block_sum_*``, the one loop that sums a block of values.

Generated kernels stage the values they sum in a block buffer, and column sums keep a block
of running totals (``jitgrad/compiler/render_cpu.py``). ``np.empty`` inside a kernel would
allocate through Numba's runtime (NRT) at every call and tie the compiled code to it, so its
native object (``compiler/native.py``) could not be linked on its own. This intrinsic emits
one ``alloca`` in the kernel's entry block instead: no allocation, no runtime reference, and
each thread running the kernel has its own copy. ``n`` must be a literal integer; the array
lives until the kernel returns.
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit, types
from numba.core import cgutils
from numba.core.extending import intrinsic

__all__ = ["scratch_f32", "scratch_f64", "scratch_bool", "block_sum_f32", "block_sum_f64"]


def _stack_pointer(dtype):
    @intrinsic
    def pointer(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            return None
        count = n.literal_value

        def codegen(context, builder, sig, args):
            return cgutils.alloca_once(builder, context.get_data_type(dtype), size=count)

        return types.CPointer(dtype)(n), codegen

    return pointer


_ptr_f32 = _stack_pointer(types.float32)
_ptr_f64 = _stack_pointer(types.float64)
_ptr_bool = _stack_pointer(types.uint8)


@njit(inline="always")
def scratch_f32(n):
    """A float32 array of ``n`` (literal) elements on the stack, uninitialised."""
    return carray(_ptr_f32(n), n)


@njit(inline="always")
def scratch_f64(n):
    """A float64 array of ``n`` (literal) elements on the stack, uninitialised."""
    return carray(_ptr_f64(n), n)


@njit(inline="always")
def scratch_bool(n):
    """A uint8 array of ``n`` (literal) elements on the stack (bool values), uninitialised."""
    return carray(_ptr_bool(n), n)


# Block sums. Generated kernels are compiled without fastmath flags: with "reassoc" on the
# whole kernel LLVM reassociates products too ((x * d) * d -> x * (d * d): a fused chain would
# no longer round as the eager ops do). Only the sum of a block may be reordered (that is what
# vectorises it), so it is this function of its own, compiled with "reassoc" and inlined by
# LLVM into the kernel, where its instructions keep their own flags. The loop is the same
# wherever it is inlined, so LLVM vectorises it the same way: a block of values sums to the
# same bits in every kernel.
_SUM_OPTIONS = {"fastmath": {"reassoc"}, "error_model": "numpy", "forceinline": True}


@njit(**_SUM_OPTIONS)
def block_sum_f32(x, start, n):
    """``sum(x[start:start + n])`` of float32 values, in float32."""
    s = np.float32(0.0)
    for q in range(n):
        s += x[np.uint64(start + q)]
    return s


@njit(**_SUM_OPTIONS)
def block_sum_f64(x, start, n):
    """``sum(x[start:start + n])`` of float64 values."""
    s = 0.0
    for q in range(n):
        s += x[np.uint64(start + q)]
    return s
