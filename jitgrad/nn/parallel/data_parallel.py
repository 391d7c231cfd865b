"""``DataParallel``, as ``torch.nn.parallel.DataParallel`` on one device: without CUDA it
calls the wrapped module as it is (PyTorch's behaviour on a CPU-only machine); with CUDA it
moves the module to ``device_ids[0]``, moves the inputs there and calls the module (jitgrad
drives one GPU per process: more ``device_ids`` than one raise, use
``DistributedDataParallel``). The module is ``.module``, so ``state_dict`` keys gain the
``module.`` prefix, as PyTorch's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

from ...tensor import Tensor
from ..module import Module

__all__ = ["DataParallel", "data_parallel"]


def _device_index(d) -> int:
    if isinstance(d, int):
        return d
    index = getattr(d, "index", None)
    if index is None and isinstance(d, str):
        index = int(d.split(":")[1]) if ":" in d else 0
    return 0 if index is None else int(index)


def _to(obj: Any, device) -> Any:
    """``obj`` with its tensors moved to ``device`` (tuples, lists, dicts recursively)."""
    if isinstance(obj, Tensor):
        return obj.to(device)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_to(o, device) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to(o, device) for o in obj)
    if isinstance(obj, Mapping):
        return type(obj)((k, _to(v, device)) for k, v in obj.items())
    return obj


class DataParallel(Module):
    """Run ``module`` on the available device (see the module docstring): the forward is
    ``module(*inputs, **kwargs)``."""

    def __init__(self, module: Module, device_ids: Sequence[int] | None = None,
                 output_device: int | None = None, dim: int = 0) -> None:
        super().__init__()
        from ... import cuda

        if not cuda.is_available():
            self.module = module
            self.device_ids = []
            return
        if device_ids is None:
            device_ids = list(range(cuda.device_count()))
        if not device_ids:
            raise RuntimeError("no available devices were found")
        if len(device_ids) > 1:
            raise NotImplementedError("DataParallel over several GPUs is not supported by "
                                      "jitgrad: use DistributedDataParallel (one process per "
                                      "GPU)")
        if output_device is None:
            output_device = device_ids[0]
        self.dim = dim
        self.module = module
        self.device_ids = [_device_index(d) for d in device_ids]
        self.output_device = _device_index(output_device)
        self.src_device_obj = f"cuda:{self.device_ids[0]}"
        self.module.to(self.src_device_obj)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        from ...devices import parse

        src = parse(self.src_device_obj)
        for t in chain(self.module.parameters(), self.module.buffers()):
            if t.device != src:
                raise RuntimeError(f"module must have its parameters and buffers on device "
                                   f"{src} (device_ids[0]) but found one of them on device: "
                                   f"{t.device}")
        return self.module(*_to(inputs, src), **_to(kwargs, src))


def data_parallel(module: Module, inputs: Any, device_ids: Sequence[int] | None = None,
                  output_device: int | None = None, dim: int = 0,
                  module_kwargs: dict | None = None) -> Any:
    """``DataParallel(module, device_ids, output_device, dim)(*inputs, **module_kwargs)``
    without keeping the wrapper."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return DataParallel(module, device_ids, output_device, dim)(*inputs,
                                                                **(module_kwargs or {}))
