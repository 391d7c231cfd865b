"""``nn.Buffer``, as PyTorch 2's: a tensor that registers itself as a buffer when assigned
to a module attribute (``persistent=False``: left out of ``state_dict``). Like
``Parameter``, it is an ordinary tensor with a flag (``_is_buffer``);
``isinstance(t, nn.Buffer)`` checks it."""

from __future__ import annotations

from ..tensor import Tensor

__all__ = ["Buffer"]


class _BufferMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and bool(getattr(obj, "_is_buffer", False))


class Buffer(metaclass=_BufferMeta):
    """A tensor to be registered as a module buffer on assignment.

    >>> import jitgrad
    >>> import jitgrad.nn as nn
    >>> m = nn.Module()
    >>> m.stats = nn.Buffer(jitgrad.zeros(2))
    >>> m.scratch = nn.Buffer(jitgrad.ones(1), persistent=False)
    >>> [name for name, _ in m.named_buffers()], list(m.state_dict())
    (['stats', 'scratch'], ['stats'])
    """

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> Tensor:
        if data is None:
            from ..creation import empty

            data = empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t
