"""Module hooks as PyTorch runs them: forward pre-hooks, forward hooks and full backward
(pre-)hooks, each registered in an ordered dict and removed through a handle.

Full backward hooks work as PyTorch's: the module's tensor inputs and outputs are passed
through an identity autograd Function (``BackwardHookFunctionBackward`` nodes). A hook on the
output node captures ``grad_output`` (and runs the backward pre-hooks, which may replace it);
a hook on the input node then calls ``hook(module, grad_input, grad_output)``, which may
return a replacement ``grad_input``. So ``grad_input`` is the gradient w.r.t. the module's
inputs, whatever ops the module ran.
"""

from __future__ import annotations

import functools
import itertools
import warnings
import weakref
from collections.abc import Callable

from ..autograd import grad_mode
from ..autograd.function import Function
from ..tensor import Tensor
from .mutation import TrackedOrderedDict

__all__ = ["RemovableHandle", "BackwardHook", "BackwardHookFunction", "HookDict",
           "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_hook", "register_module_full_backward_pre_hook",
           "call_with_hooks"]


class HookDict(TrackedOrderedDict):
    """An ordered hook dict that handles can reference weakly; adding or removing a hook
    bumps the module-tree epoch (``mutation.py``)."""


class RemovableHandle:
    """Returned by ``register_*_hook``; ``remove()`` unregisters the hook (also from the
    ``extra_dict`` flag dicts, e.g. ``with_kwargs``). Usable as a context manager.

    >>> import jitgrad.nn as nn
    >>> m = nn.Identity()
    >>> h = m.register_forward_hook(lambda mod, args, out: None)
    >>> len(m._forward_hooks)
    1
    >>> h.remove(); len(m._forward_hooks)
    0
    """

    _ids = itertools.count()

    def __init__(self, hooks_dict: dict, *, extra_dict=None) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(RemovableHandle._ids)
        extras = extra_dict if isinstance(extra_dict, list) else (
            [] if extra_dict is None else [extra_dict])
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras)

    def remove(self) -> None:
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def add_hook(hooks: HookDict, hook, prepend: bool = False, extra=None) -> RemovableHandle:
    """Register ``hook`` in ``hooks`` (first when ``prepend``); ``extra`` flag dicts get
    ``True`` under its id."""
    extra = extra or []
    handle = RemovableHandle(hooks, extra_dict=extra)
    hooks[handle.id] = hook
    for d in extra:
        d[handle.id] = True
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


# --------------------------------------------------------------------- global hooks
_global_forward_pre_hooks = HookDict()
_global_forward_hooks = HookDict()
_global_forward_hooks_always_called = HookDict()
_global_backward_hooks = HookDict()
_global_backward_pre_hooks = HookDict()


def register_module_forward_pre_hook(hook) -> RemovableHandle:
    """Run ``hook(module, args)`` before every module's forward."""
    return add_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook, *, always_call: bool = False) -> RemovableHandle:
    """Run ``hook(module, args, output)`` after every module's forward."""
    return add_hook(_global_forward_hooks, hook,
                    extra=[_global_forward_hooks_always_called] if always_call else None)


def register_module_full_backward_hook(hook) -> RemovableHandle:
    """Run ``hook(module, grad_input, grad_output)`` in every module's backward."""
    return add_hook(_global_backward_hooks, hook)


def register_module_full_backward_pre_hook(hook) -> RemovableHandle:
    """Run ``hook(module, grad_output)`` when every module's output gradient is known."""
    return add_hook(_global_backward_pre_hooks, hook)


def any_global_hooks() -> bool:
    return bool(_global_forward_pre_hooks or _global_forward_hooks or _global_backward_hooks
                or _global_backward_pre_hooks)


# ------------------------------------------------------------- full backward hooks
class BackwardHookFunction(Function):
    """Identity on its tensor arguments; its node is where backward hooks attach."""

    @staticmethod
    def forward(ctx, *args):
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx, *args):
        return args


class BackwardHook:
    """Wires a module's full backward (pre-)hooks to one forward call (PyTorch's
    ``torch.utils.hooks.BackwardHook``)."""

    def __init__(self, module, user_hooks: list, user_pre_hooks: list) -> None:
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.module = module
        self.grad_outputs = None
        self.n_outputs = -1
        self.output_tensors_index = None
        self.n_inputs = -1
        self.input_tensors_index = None

    @staticmethod
    def _pack_with_none(indices, values, size) -> tuple:
        res = [None] * size
        for idx, val in zip(indices, values):
            res[idx] = val
        return tuple(res)

    @staticmethod
    def _unpack_none(indices, values) -> tuple:
        return tuple(values[idx] for idx in indices)

    def _set_user_hook(self, grad_fn) -> None:
        def hook(grad_input, _):
            if self.grad_outputs is None:
                # the gradient reached the inputs without passing the outputs (double backward)
                return None
            res = self._pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
            for user_hook in self.user_hooks:
                out = user_hook(self.module, res, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(res):
                    raise RuntimeError("Backward hook returned an invalid number of grad_input, "
                                       f"got {len(out)}, but expected {len(res)}")
                res = out
            self.grad_outputs = None
            return self._unpack_none(self.input_tensors_index, res)

        grad_fn.register_hook(hook)

    def _apply_on_tensors(self, fn, args):
        tensors_idx, tensors = [], []
        requires_grad = False
        for i, arg in enumerate(args):
            if isinstance(arg, Tensor):
                tensors_idx.append(i)
                tensors.append(arg)
                requires_grad |= arg.requires_grad
        if not (requires_grad and grad_mode.is_grad_enabled()):
            return args, None
        new_tensors = BackwardHookFunction.apply(*tensors)
        if len(new_tensors) == 0:
            raise RuntimeError("Cannot set Module backward hook for a Module with no input "
                               "Tensors.")
        grad_fns = [t.grad_fn for t in new_tensors if t.grad_fn is not None
                    and t.grad_fn.name() == "BackwardHookFunctionBackward"]
        if not grad_fns:
            raise RuntimeError("Error while setting up backward hooks.")
        fn(grad_fns[0])
        arg_list = list(args)
        for idx, val in zip(tensors_idx, new_tensors):
            arg_list[idx] = val
        return (tuple(arg_list) if type(args) is tuple else type(args)(*arg_list)), tensors_idx

    def setup_input_hook(self, args):
        res, input_idx = self._apply_on_tensors(self._set_user_hook, args)
        self.n_inputs = len(args)
        self.input_tensors_index = input_idx
        return res

    def setup_output_hook(self, args):
        def fn(grad_fn) -> None:
            def hook(_, grad_output):
                self.grad_outputs = self._pack_with_none(self.output_tensors_index,
                                                         grad_output, self.n_outputs)
                for pre_hook in self.user_pre_hooks:
                    new = pre_hook(self.module, self.grad_outputs)
                    if new is None:
                        continue
                    if len(new) != len(self.grad_outputs):
                        raise RuntimeError(
                            "Backward pre hook returned an invalid number of grad_output, got "
                            f"{len(new)}, but expected {len(self.grad_outputs)}")
                    self.grad_outputs = new
                local_grad_outputs = self.grad_outputs
                if self.input_tensors_index is None:  # no input needs a gradient: fire now
                    warnings.warn("Full backward hook is firing when gradients are computed with "
                                  "respect to module outputs since no inputs require gradients.",
                                  UserWarning, stacklevel=2)
                    grad_inputs = self._pack_with_none([], [], self.n_inputs)
                    for user_hook in self.user_hooks:
                        res = user_hook(self.module, grad_inputs, self.grad_outputs)
                        if res is not None and not (isinstance(res, tuple) and
                                                    all(el is None for el in res)):
                            raise RuntimeError(
                                "Backward hook for Modules where no input requires gradient "
                                "should always return None or None for all gradients.")
                    self.grad_outputs = None
                if local_grad_outputs is not None:
                    return tuple(local_grad_outputs[i] for i in self.output_tensors_index)
                return None

            grad_fn.register_hook(hook)

        is_tuple = isinstance(args, tuple)
        if not is_tuple:
            args = (args,)
        res, output_idx = self._apply_on_tensors(fn, args)
        self.n_outputs = len(args)
        self.output_tensors_index = output_idx
        return res if is_tuple else res[0]


# ------------------------------------------------------------------ Module.__call__
class _WrappedHook:
    """``hook`` called with its module (held weakly) as first argument when ``module`` is
    given, else as is (PyTorch's ``torch.nn.modules.module._WrappedHook``): the non-full
    (``register_backward_hook``) hooks on the output's ``grad_fn`` and the load-state-dict
    pre-hooks."""

    def __init__(self, hook: Callable, module=None) -> None:
        self.hook = hook
        functools.update_wrapper(self, hook)
        self.with_module = False
        if module is not None:
            self.module = weakref.ref(module)
            self.with_module = True

    def __call__(self, *args, **kwargs):
        if self.with_module:
            module = self.module()
            if module is None:
                raise RuntimeError("You are trying to call the hook of a dead Module!")
            return self.hook(module, *args, **kwargs)
        return self.hook(*args, **kwargs)

    def __getstate__(self) -> dict:
        result = {"hook": self.hook, "with_module": self.with_module}
        if self.with_module:
            result["module"] = self.module()
        return result

    def __setstate__(self, state: dict) -> None:
        self.hook = state["hook"]
        self.with_module = state["with_module"]
        if self.with_module:
            if state["module"] is None:
                raise RuntimeError("You are trying to revive the hook of a dead Module!")
            self.module = weakref.ref(state["module"])


def _warn_non_full(inputs, result, grad_fn) -> None:
    """PyTorch's deprecation warnings for non-full backward hooks that see partial grads."""
    results = (result,) if isinstance(result, Tensor) else result
    ins = (inputs,) if isinstance(inputs, Tensor) else inputs
    if not all(isinstance(r, Tensor) for r in results) or not all(
            isinstance(i, Tensor) for i in ins):
        return
    out_fns = {id(r.grad_fn) for r in results if r.grad_fn is not None}
    if len(out_fns) != 1 or id(grad_fn) not in out_fns:
        return
    in_fns = {id(i.grad_fn) for i in ins if i.grad_fn is not None}
    nexts = {id(f) for f, _ in grad_fn.next_functions if f is not None}
    if in_fns != nexts:
        warnings.warn(
            "Using a non-full backward hook when the forward contains multiple autograd Nodes "
            "is deprecated and will be removed in future versions. This hook will be missing "
            "some grad_input. Please use register_full_backward_hook to get the documented "
            "behavior.", FutureWarning, stacklevel=3)


def _run_pre_hooks(module, args, kwargs):
    for hook_id, hook in (*_global_forward_pre_hooks.items(),
                          *module._forward_pre_hooks.items()):
        if hook_id in module._forward_pre_hooks_with_kwargs:
            res = hook(module, args, kwargs)
            if res is not None:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {res}.")
                args, kwargs = res
        else:
            res = hook(module, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
    return args, kwargs


def _run_forward_hooks(module, args, kwargs, result, called: set):
    for hook_id, hook in (*_global_forward_hooks.items(), *module._forward_hooks.items()):
        if hook_id in module._forward_hooks_always_called or \
                hook_id in _global_forward_hooks_always_called:
            called.add(hook_id)
        if hook_id in module._forward_hooks_with_kwargs:
            res = hook(module, args, kwargs, result)
        else:
            res = hook(module, args, result)
        if res is not None:
            result = res
    return result


def _run_always_called(module, args, kwargs, result, called: set) -> None:
    """After forward raised: the ``always_call`` forward hooks that did not run yet."""
    hooks = [(i, h, i in module._forward_hooks_with_kwargs) for i, h in
             module._forward_hooks.items() if i in module._forward_hooks_always_called]
    hooks += [(i, h, False) for i, h in _global_forward_hooks.items()
              if i in _global_forward_hooks_always_called]
    for hook_id, hook, with_kwargs in hooks:
        if hook_id in called:
            continue
        try:
            hook(module, args, kwargs, result) if with_kwargs else hook(module, args, result)
        except Exception as e:  # noqa: BLE001 - PyTorch silences these (the forward error wins)
            warnings.warn("module forward hook with ``always_call=True`` raised an exception "
                          f"that was silenced as another error was raised in forward: {e}",
                          stacklevel=3)


def call_with_hooks(module, args: tuple, kwargs: dict):
    """``Module.__call__`` when some hook is registered: PyTorch's ``_call_impl``."""
    from ..trace.state import STATE

    if STATE.tracer is not None:  # hooks are Python callbacks: they run at every call
        STATE.tracer.graph_break(f"{type(module).__name__} has module hooks (they run at "
                                 "every call)")
    called: set = set()
    result = None
    try:
        full, non_full = module._get_backward_hooks()
        pre = module._get_backward_pre_hooks()
        if _global_forward_pre_hooks or module._forward_pre_hooks:
            args, kwargs = _run_pre_hooks(module, args, kwargs)
        bw_hook = None
        if full or pre:
            bw_hook = BackwardHook(module, full, pre)
            args = bw_hook.setup_input_hook(args)
        result = module.forward(*args, **kwargs)
        if _global_forward_hooks or module._forward_hooks:
            result = _run_forward_hooks(module, args, kwargs, result, called)
        if bw_hook is not None:
            if not isinstance(result, (Tensor, tuple)):
                warnings.warn("For backward hooks to be called, module output should be a "
                              f"Tensor or a tuple of Tensors but received {type(result)}",
                              stacklevel=2)
            result = bw_hook.setup_output_hook(result)
        if non_full:
            var = result
            while not isinstance(var, Tensor):
                var = next(v for v in var.values() if isinstance(v, Tensor)) if isinstance(
                    var, dict) else var[0]
            grad_fn = var.grad_fn
            if grad_fn is not None:
                for hook in non_full:
                    grad_fn.register_hook(_WrappedHook(hook, module))
                _warn_non_full(args, result, grad_fn)
        return result
    except Exception:
        _run_always_called(module, args, kwargs, result, called)
        raise
