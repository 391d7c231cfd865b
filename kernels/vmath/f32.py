"""float32 implementations, for direct use from jitted code: ``exp_f32(x)``, ``pow_f32(x, y)``.

Each argument is converted to float32 on entry; each function is a separate Numba
dispatcher that LLVM inlines into the calling loop (see ``_common.IMPL_OPTIONS``).
"""

from __future__ import annotations

from ._build import build_all
from ._consts import F32

_fns = build_all(F32)

exp_f32 = _fns["exp"]
expm1_f32 = _fns["expm1"]
log_f32 = _fns["log"]
log1p_f32 = _fns["log1p"]
tanh_f32 = _fns["tanh"]
sigmoid_f32 = _fns["sigmoid"]
softplus_f32 = _fns["softplus"]
erf_f32 = _fns["erf"]
sin_f32 = _fns["sin"]
cos_f32 = _fns["cos"]
pow_f32 = _fns["pow"]
sqrt_f32 = _fns["sqrt"]
rsqrt_f32 = _fns["rsqrt"]

del _fns
