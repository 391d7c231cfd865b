"""float64 implementations, for direct use from jitted code: ``exp_f64(x)``, ``pow_f64(x, y)``.

Each argument is converted to float64 on entry; each function is a separate Numba
dispatcher that LLVM inlines into the calling loop (see ``_common.IMPL_OPTIONS``).
"""

from __future__ import annotations

from ._build import build_all
from ._consts import F64

_fns = build_all(F64)

exp_f64 = _fns["exp"]
expm1_f64 = _fns["expm1"]
log_f64 = _fns["log"]
log1p_f64 = _fns["log1p"]
tanh_f64 = _fns["tanh"]
sigmoid_f64 = _fns["sigmoid"]
softplus_f64 = _fns["softplus"]
erf_f64 = _fns["erf"]
sin_f64 = _fns["sin"]
cos_f64 = _fns["cos"]
pow_f64 = _fns["pow"]
sqrt_f64 = _fns["sqrt"]
rsqrt_f64 = _fns["rsqrt"]

del _fns
