"""``jitgrad.autograd.graph``, as ``torch.autograd.graph``: the backward graph's ``Node``, and
hooks on the tensors nodes save for backward.

``saved_tensors_hooks(pack_hook, unpack_hook)``: inside the context, every tensor an eager
operation saves for its backward is passed to ``pack_hook`` when it is saved, and the node
keeps what ``pack_hook`` returns; when backward (or ``grad_fn._saved_self``...) needs the
tensor, ``unpack_hook`` gets that object and returns the tensor to use. Contexts nest (the
innermost applies) and are per thread. ``save_on_cpu()`` packs each saved tensor on the CPU
(where jitgrad tensors already are: they are kept as they are, no copy is made);
``disable_saved_tensors_hooks(message)`` makes opening ``saved_tensors_hooks`` inside it an
error with ``message``.

Saved tensors of a compiled function's node (``CompiledFunctionBackward``, its residuals)
are not passed to the hooks: the compiled plan keeps them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..tensor import Tensor
from .node import _HOOKS_OPEN, SAVED_HOOKS, Node

__all__ = ["Node", "saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks"]


class saved_tensors_hooks:  # noqa: N801 - PyTorch's name
    """Context manager: ``pack_hook(tensor) -> Any`` runs when an operation saves ``tensor``
    for backward, ``unpack_hook(packed) -> Tensor`` when backward uses it.

    >>> import jitgrad
    >>> from jitgrad.autograd.graph import saved_tensors_hooks
    >>> packed = []
    >>> x = jitgrad.ones(2, requires_grad=True)
    >>> with saved_tensors_hooks(lambda t: packed.append(t) or len(packed) - 1,
    ...                          lambda i: packed[i]):
    ...     y = x * x
    >>> len(packed)
    2
    """

    def __init__(self, pack_hook: Callable[[Tensor], Any],
                 unpack_hook: Callable[[Any], Tensor]) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> saved_tensors_hooks:
        if SAVED_HOOKS.disabled:
            raise RuntimeError(SAVED_HOOKS.disabled[-1])
        SAVED_HOOKS.stack.append((self.pack_hook, self.unpack_hook))
        _HOOKS_OPEN[0] += 1
        return self

    def __exit__(self, *exc) -> None:
        SAVED_HOOKS.stack.pop()
        _HOOKS_OPEN[0] -= 1


class save_on_cpu(saved_tensors_hooks):  # noqa: N801 - PyTorch's name
    """Keep the tensors saved for backward in CPU memory (``pin_memory`` is accepted and has
    no effect): jitgrad's tensors are there already, so they are saved as they are."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack(t: Tensor):
            return (t.device, t if t.device == "cpu" else t.to("cpu"))

        def unpack(packed) -> Tensor:
            device, t = packed
            return t if device == "cpu" else t.to(device)

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:  # noqa: N801 - PyTorch's name
    """Context manager in which opening :class:`saved_tensors_hooks` raises ``RuntimeError``
    with ``error_message`` (hooks already open stay in force, as in PyTorch)."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message

    def __enter__(self) -> disable_saved_tensors_hooks:
        SAVED_HOOKS.disabled.append(self.error_message)
        return self

    def __exit__(self, *exc) -> None:
        SAVED_HOOKS.disabled.pop()
