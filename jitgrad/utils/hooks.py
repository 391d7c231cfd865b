"""``torch.utils.hooks``: the handle type ``register_*_hook`` returns, and its helpers.

jitgrad's module hooks and tensor hooks have a handle class each
(:class:`jitgrad.nn.hooks.RemovableHandle`, :class:`jitgrad.tensor.RemovableHandle`);
``isinstance(h, RemovableHandle)`` is true of both, and calling ``RemovableHandle(hooks_dict,
extra_dict=...)`` makes a module-hook handle, as PyTorch's one class does.
"""

from __future__ import annotations

import warnings

from ..nn import hooks as _module_hooks
from ..tensor import RemovableHandle as _TensorHandle

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]


class _HandleMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, (_module_hooks.RemovableHandle, _TensorHandle))

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, (_module_hooks.RemovableHandle, _TensorHandle))

    def __call__(cls, hooks_dict, *, extra_dict=None):
        return _module_hooks.RemovableHandle(hooks_dict, extra_dict=extra_dict)


class RemovableHandle(metaclass=_HandleMeta):
    """A handle whose ``remove()`` unregisters a hook (usable as a context manager)."""


def unserializable_hook(f):
    """Mark hook ``f`` as not to be serialized (no warning from :func:`warn_if_has_hooks`)."""
    f.__torch_unserializable__ = True
    return f


def warn_if_has_hooks(tensor) -> None:
    """Warn when ``tensor`` has backward hooks that are not marked unserializable (they are
    not saved with it)."""
    fn = tensor.grad_fn
    hooks = tensor._hooks if fn is None else (fn._tensor_hooks or {}).get(tensor._output_nr)
    for hook in (hooks or {}).values():
        if not getattr(hook, "__torch_unserializable__", False):
            warnings.warn(f"backward hook {hook!r} on tensor will not be serialized.  If "
                          "this is expected, you can decorate the function with "
                          "@torch.utils.hooks.unserializable_hook to suppress this warning",
                          stacklevel=2)
