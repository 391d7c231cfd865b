"""``scratch_*(n)``: a fixed-size array on the calling kernel's stack.

Generated kernels keep the lanes of their sums and the running totals of column sums in
small arrays (``jitgrad/compiler/render_cpu.py``). ``np.empty`` inside a kernel would
allocate through Numba's runtime (NRT) at every call and tie the compiled code to it, so its
native object (``compiler/native.py``) could not be linked on its own. This intrinsic emits
one ``alloca`` in the kernel's entry block instead: no allocation, no runtime reference, and
each thread running the kernel has its own copy. ``n`` must be a literal integer; the array
lives until the kernel returns.
"""

from __future__ import annotations

from numba import carray, njit, types
from numba.core import cgutils
from numba.core.extending import intrinsic

__all__ = ["scratch_f32", "scratch_f64", "scratch_bool"]


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

