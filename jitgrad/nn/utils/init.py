"""``skip_init``: a module built without running its parameter initialisation, as
``torch.nn.utils.skip_init``."""

from __future__ import annotations

import inspect
from typing import Any

from ..module import Module

__all__ = ["skip_init"]


def skip_init(module_cls: type, *args: Any, **kwargs: Any) -> Module:
    """``module_cls(*args, **kwargs)`` with its parameters left uninitialised (their values
    are whatever the memory held; initialise them yourself). The class must take a
    ``device`` argument, as PyTorch requires.

    PyTorch builds the module on the meta device; here it is built with a
    ``reset_parameters`` that does nothing, then given its own class back.
    """
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    kwargs.setdefault("device", "cpu")
    uninit = type(module_cls.__name__, (module_cls,),
                  {"reset_parameters": lambda self, *a, **k: None,
                   "__module__": module_cls.__module__})
    module = uninit(*args, **kwargs)
    module.__class__ = module_cls
    return module
