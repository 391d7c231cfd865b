"""PyTorch's ``torch.nn.modules.module`` path: ``Module`` and the global module hooks. The
classes are jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..hooks import (  # noqa: F401 - re-exported
    RemovableHandle,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from ..module import (  # noqa: F401 - re-exported
    Module,
)

__all__ = ["RemovableHandle", "register_module_forward_hook",
           "register_module_forward_pre_hook", "register_module_full_backward_hook",
           "register_module_full_backward_pre_hook", "Module"]
