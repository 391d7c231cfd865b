"""``torch.nn.utils.stateless.functional_call``: PyTorch's deprecated name of
``jitgrad.func.functional_call`` (same arguments; a FutureWarning)."""

from __future__ import annotations

import warnings
from typing import Any

from ...tensor import Tensor
from ..module import Module

__all__ = ["functional_call"]


def functional_call(module: Module, parameters_and_buffers: dict[str, Tensor],
                    args: Any = None, kwargs: dict[str, Any] | None = None, *,
                    tie_weights: bool = True, strict: bool = False) -> Any:
    """Call ``module`` with its parameters and buffers replaced by
    ``parameters_and_buffers`` (see :func:`jitgrad.func.functional_call`)."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 "
                  "and will be removed in a future version of PyTorch. Please use "
                  "`torch.func.functional_call` instead which is a drop-in replacement.",
                  FutureWarning, stacklevel=2)
    from ...func import functional_call as call

    return call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights,
                strict=strict)
