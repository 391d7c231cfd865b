"""Which equations of a graph may raise on the values they get at run time.

A compiled call must raise where eager mode raises, with eager mode's effects: an index out
of range, a target out of range, a probability outside [0, 1], a singular matrix. Two
passes ask:

* dead-code elimination (``passes.dce``) keeps such an equation even when nothing reads
  its value (a metric computed and dropped after the step still raises, as in eager mode);
* in-place writes (``inplace_writes``) are not made before such a step: a plan that
  raises before its first write to outside state runs the call again eagerly
  (``jit/function.py``), which a write already done would make impossible.

Fused element-wise code, views and reductions (sums, maxima, pooling, norms) never raise;
backward ops re-read indices their forward has checked.
"""

from __future__ import annotations

import numpy as np

from ..trace.ir import Eqn, Var

__all__ = ["may_raise"]

#: ops whose kernels raise on the values they get, whatever their operands' dtypes: a
#: target out of range, an input outside [0, 1], a singular or non-positive-definite
#: matrix, a decomposition that does not converge
_VALUE_CHECKING = frozenset({"nll_loss", "binary_cross_entropy", "ctc_loss", "inv", "solve",
                             "cholesky", "pinv", "svd_factors", "qr_factors", "eigh_factors"})


def may_raise(e: Eqn) -> bool:
    """Whether equation ``e`` may raise on the values it gets: a check (an effect equation
    named "check"), a value-checking op, or an op with an integer or bool operand (indices,
    targets, masks) other than an element-wise op, a reduction or a backward op."""
    op = e.op
    if isinstance(op, str):
        return op == "check"
    if op.name in _VALUE_CHECKING:
        return True
    if op.kind in ("elementwise", "reduce") or op.name.endswith("_backward"):
        return False
    return any(isinstance(i, Var) and np.dtype(i.dtype).kind in "biu" for i in e.ins)
