"""``torch.cpu.amp``: PyTorch's older CPU spelling of :class:`jitgrad.amp.autocast`
(deprecated as in PyTorch)."""

from __future__ import annotations

import warnings

from ... import amp as _amp
from ...dtypes import bfloat16

__all__ = ["autocast"]


class autocast(_amp.autocast):
    """``jitgrad.amp.autocast("cpu", ...)`` (deprecated spelling; the default dtype is
    PyTorch's bfloat16, which jitgrad cannot store: pass ``dtype=jitgrad.float16``)."""

    def __init__(self, enabled: bool = True, dtype=bfloat16, cache_enabled: bool = True) -> None:
        warnings.warn("`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)
