"""More names for existing ops, as PyTorch has them: the comparison aliases (``greater``,
``greater_equal``, ``less``, ``less_equal``, ``not_equal``), the in-place comparisons
(``eq_``, ``gt_``... : ``self`` gets 1 where true, 0 where false, in its own dtype), the
in-place forms of element-wise functions (``sign_``, ``log1p_``, ``logical_and_``...), the
in-place aliases of arithmetic (``multiply_``, ``subtract_``, ``divide_``...), the in-place
forms of the ``add*`` products (``addmm_``, ``addmv_``, ``baddbmm_``...) and the other
names of ``outer`` (``ger``), ``cat`` (``concat``) and ``argwhere`` (its method).

Each is declared on the existing public function (``jitgrad.greater is jitgrad.gt``), so the
methods are that function and the in-place ones run it and write the result back
(:func:`jitgrad.ops.inplace.apply_inplace`: PyTorch's casting and autograd rules).
"""

from __future__ import annotations

from .api import api
from .arithmetic import ADD, DIV, MUL, NEG, RSUB, SUB, div, mul, neg, sub
from .concat import CAT, cat
from .contractions import addbmm, addmv, addr, baddbmm
from .linalg import MATMUL, outer
from .math_functions import ABS, EXPM1, LOG1P, RSQRT, SIGN, abs, expm1, log1p, rsqrt, sign
from .nnops.linear import ADDMM, addmm
from .sampling_and_sets import argwhere
from .selection import (
                        EQ,
                        GE,
                        GT,
                        LE,
                        LOGICAL_AND,
                        LOGICAL_NOT,
                        LOGICAL_OR,
                        LOGICAL_XOR,
                        LT,
                        NE,
                        eq,
                        ge,
                        gt,
                        le,
                        logical_and,
                        logical_not,
                        logical_or,
                        logical_xor,
                        lt,
                        ne,
)

__all__: list[str] = []

# comparisons: the aliases, and the in-place forms of both spellings
api(GT, method="greater", inplace=("gt_", "greater_"), export="greater")(gt)
api(GE, method="greater_equal", inplace=("ge_", "greater_equal_"), export="greater_equal")(ge)
api(LT, method="less", inplace=("lt_", "less_"), export="less")(lt)
api(LE, method="less_equal", inplace=("le_", "less_equal_"), export="less_equal")(le)
api(NE, method="not_equal", inplace=("ne_", "not_equal_"), export="not_equal")(ne)
api(EQ, inplace="eq_")(eq)

# in-place forms of element-wise functions
api(SIGN, inplace=("sign_", "sgn_"))(sign)
api(LOG1P, inplace="log1p_")(log1p)
api(EXPM1, inplace="expm1_")(expm1)
api(RSQRT, inplace="rsqrt_")(rsqrt)
api(LOGICAL_NOT, inplace="logical_not_")(logical_not)
api(LOGICAL_AND, inplace="logical_and_")(logical_and)
api(LOGICAL_OR, inplace="logical_or_")(logical_or)
api(LOGICAL_XOR, inplace="logical_xor_")(logical_xor)
api(NEG, inplace="negative_")(neg)
api(ABS, method="absolute", inplace="absolute_")(abs)

# in-place aliases of arithmetic
api(MUL, inplace="multiply_")(mul)
api(SUB, RSUB, inplace="subtract_")(sub)
api(DIV, inplace=("divide_", "true_divide_"))(div)

# in-place forms of the add* products (PyTorch's addmm_, addmv_...)
api(MATMUL, MUL, ADD, inplace="addmv_")(addmv)
api(MATMUL, MUL, ADD, inplace="addr_")(addr)
api(MATMUL, MUL, ADD, inplace="addbmm_")(addbmm)
api(MATMUL, MUL, ADD, inplace="baddbmm_")(baddbmm)
api(ADDMM, MATMUL, inplace="addmm_")(addmm)

# other names
api(MUL, method="ger", export="ger")(outer)  # torch.ger: the deprecated outer
api(CAT, export="concat")(cat)
api(LT, method="argwhere")(argwhere)
