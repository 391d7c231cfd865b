"""``Module``: the base class of layers and models, with PyTorch's semantics.

Assigning a :class:`Parameter`, a ``Module`` or (via :meth:`Module.register_buffer`) a
buffer tensor to an attribute registers it; iteration (``parameters``, ``named_modules``...),
``state_dict``, ``train``/``eval``, ``to`` and ``zero_grad`` walk the registered tree.
Calling a module runs its hooks around ``forward`` (see :mod:`jitgrad.nn.hooks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .. import dtypes
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from . import hooks as H
from . import state_dict as SD
from .mutation import TrackedDict, TrackedSet, bump
from .parameter import Parameter, zero_grads

__all__ = ["Module"]

# the state-dict hook dicts (tracked as the other hook dicts, so a compiled call's module
# guard can keep its walk of the tree; no guard compares them: they do not affect forward)
_STATE_DICT_HOOKS = ("_state_dict_hooks", "_state_dict_pre_hooks",
                     "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")


def _typename(obj) -> str:
    if isinstance(obj, Tensor):
        return f"jitgrad.{obj.dtype.tensor_type}"
    return type(obj).__module__ + "." + type(obj).__qualname__ if type(
        obj).__module__ != "builtins" else type(obj).__qualname__


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _check_name(kind: str, name) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
    if "." in name:  # (PyTorch's add_module says which name)
        got = f", got: {name}" if kind == "module" else ""
        raise KeyError(f'{kind} name can\'t contain "."{got}')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')


class Module:
    """Base class of all neural-network modules; subclasses define ``forward``.

    >>> import jitgrad
    >>> import jitgrad.nn as nn
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = nn.Linear(2, 1)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    >>> net = Net()
    >>> [name for name, _ in net.named_parameters()]
    ['fc.weight', 'fc.bias']
    >>> net
    Net(
      (fc): Linear(in_features=2, out_features=1, bias=True)
    )
    """

    training: bool
    dump_patches = False
    #: Saved in ``state_dict()._metadata`` (``local_metadata["version"]`` of the hooks)
    _version: int = 1
    _compiled_call_impl = None  # set by compile(): serves every later call

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() takes no arguments")
        setattr_ = object.__setattr__
        bump()
        setattr_(self, "training", True)
        setattr_(self, "_parameters", TrackedDict())
        setattr_(self, "_buffers", TrackedDict())
        setattr_(self, "_non_persistent_buffers_set", TrackedSet())
        setattr_(self, "_modules", TrackedDict())
        for name in ("_forward_hooks", "_forward_hooks_with_kwargs",
                     "_forward_hooks_always_called", "_forward_pre_hooks",
                     "_forward_pre_hooks_with_kwargs", "_backward_hooks",
                     "_backward_pre_hooks"):
            setattr_(self, name, H.HookDict())
        setattr_(self, "_is_full_backward_hook", None)
        for name in _STATE_DICT_HOOKS:
            setattr_(self, name, H.HookDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    # --------------------------------------------------------------------- calling
    def __call__(self, *args, **kwargs):
        if self._compiled_call_impl is not None:  # Module.compile()
            return self._compiled_call_impl(*args, **kwargs)
        if not (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks
                or self._backward_pre_hooks or H.any_global_hooks()):
            return self.forward(*args, **kwargs)
        return H.call_with_hooks(self, args, kwargs)

    def compile(self, *args, **kwargs) -> None:
        """Compile this module in place: later calls run compiled (the keyword arguments of
        :func:`jitgrad.compile`). Unlike ``jitgrad.compile(module)``, the module stays
        itself: no wrapper, no ``_orig_mod.`` prefix in ``state_dict``."""
        from ..jit.module_wrapper import compile_in_place

        compile_in_place(self, *args, **kwargs)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_compiled_call_impl", None)  # copies and pickles are not compiled
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for name in _STATE_DICT_HOOKS:  # modules pickled before these hooks existed
            if name not in self.__dict__:
                self.__dict__[name] = H.HookDict()

    # ----------------------------------------------------------------- registration
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or None) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None:
            if not isinstance(param, Parameter):
                raise TypeError(f"cannot assign '{_typename(param)}' object to parameter "
                                f"'{name}' (torch.nn.Parameter or None required)")
            if param.grad_fn is not None:
                raise ValueError(
                    f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters "
                    f"must be created explicitly. To express '{name}' as a function of "
                    "another Tensor, compute the value in the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer (state that is not a parameter, e.g. running statistics); a
        non-``persistent`` buffer is left out of ``state_dict``."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under ``name``."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        _check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name: str):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            members = d.get(store)
            if members is not None and name in members:
                return members[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        bump()  # compiled calls' guards re-read this tree (nn/mutation.py)
        d = self.__dict__
        params = d.get("_parameters")

        def drop(*stores):
            for s in stores:
                if isinstance(s, dict):
                    s.pop(name, None)
                else:
                    s.discard(name)

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            drop(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                drop(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module "
                                    f"'{name}' (torch.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if isinstance(value, Tensor) and getattr(value, "_is_buffer", False):
                    # an nn.Buffer registers itself (persistent as it says)
                    self.register_buffer(name, value, value.persistent)
                elif buffers is not None and name in buffers:
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer "
                                        f"'{name}' (torch.nn.Buffer, torch.Tensor or None "
                                        "expected)")
                    buffers[name] = value
                else:
                    object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        bump()
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    # -------------------------------------------------------------------- iteration
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` for this module and every descendant (each once)."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name,
                                            remove_duplicate)

    def modules(self) -> Iterator[Module]:
        """This module and every descendant."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` of the direct children."""
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        """The direct children."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool, remove_duplicate: bool):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for k, v in getattr(mod, store).items():
                if v is None or id(v) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + k, v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` of this module (and descendants when ``recurse``)."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters (shared ones once)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, buffer)`` of this module (and descendants when ``recurse``)."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        """The descendant at dotted path ``target`` ("" is this module)."""
        mod = self
        for item in target.split(".") if target else []:
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def _get_member(self, target: str, store: str, kind: str):
        """The entry of ``store`` (``_parameters`` or ``_buffers``) at dotted path ``target``;
        AttributeError "`name` is not <kind>" when the module there has none by that name
        (but another attribute), "<Module> has no attribute `name`" when it has nothing."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        members = getattr(mod, store)
        if name not in members:
            raise AttributeError(f"`{name}` is not {kind}")
        return members[name]

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target``."""
        return self._get_member(target, "_parameters", "an nn.Parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``."""
        return self._get_member(target, "_buffers", "a buffer")

    # ------------------------------------------------------------------------ state
    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active, batch norm on batch statistics) recursively."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        """``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set ``requires_grad`` of every parameter."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the parameters' gradients (to None, or zeroed in place)."""
        zero_grads(self.parameters(), set_to_none)

    def state_dict(self, *, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Any]:
        """Parameters and persistent buffers by dotted name (detached unless ``keep_vars``,
        sharing memory), in an ``OrderedDict`` whose ``_metadata`` maps each module's
        prefix to ``{"version": module._version}``. Runs each module's state-dict pre-hooks
        before saving it and its post-hooks after its children (see
        :meth:`register_state_dict_post_hook`)."""
        return SD.state_dict(self, destination, prefix, keep_vars)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        """Save this module's own parameters and persistent buffers (not its children's)
        into ``destination``; called on every module by :meth:`state_dict`."""
        SD.save_to_state_dict(self, destination, prefix, keep_vars)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> SD._IncompatibleKeys:
        """Copy ``state_dict`` in; ``strict`` raises on missing or unexpected keys (shape
        mismatches always raise). Returns ``_IncompatibleKeys(missing_keys,
        unexpected_keys)``, whose repr is ``<All keys matched successfully>`` when both are
        empty. Load pre-hooks run on each module before it loads, load post-hooks after it
        and its children, before ``strict`` is checked."""
        return SD.load_state_dict(self, state_dict, strict, assign)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict,
                              strict: bool, missing_keys: list[str],
                              unexpected_keys: list[str], error_msgs: list[str]) -> None:
        """Run the load pre-hooks, then copy this module's own parameters and buffers (not
        its children's) from ``state_dict``, recording missing and unexpected keys and
        errors in the lists given; called on every module by :meth:`load_state_dict`."""
        SD.load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                                missing_keys, unexpected_keys, error_msgs)

    # ---------------------------------------------------------- state-dict hooks
    def register_state_dict_pre_hook(self, hook: Callable[..., None]) -> H.RemovableHandle:
        """Run ``hook(module, prefix, keep_vars) -> None`` when :meth:`state_dict` reaches
        this module, before it saves its tensors."""
        return H.add_hook(self._state_dict_pre_hooks, hook)

    def register_state_dict_post_hook(self, hook: Callable[..., None]) -> H.RemovableHandle:
        """Run ``hook(module, state_dict, prefix, local_metadata) -> None`` after
        :meth:`state_dict` saved this module and its children; it may edit ``state_dict``
        in place (returning anything but None raises RuntimeError). Marks ``hook`` with
        ``_from_public_api = True``, as PyTorch does."""
        hook._from_public_api = True
        return H.add_hook(self._state_dict_hooks, hook)

    def _register_state_dict_hook(self, hook: Callable[..., Any]) -> H.RemovableHandle:
        """The older post-hook API: ``hook(module, state_dict, prefix, local_metadata)`` may
        return a new state dict, which replaces the one being built (only the root
        module's replacement reaches :meth:`state_dict`'s caller, as in PyTorch)."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook "
                               "that was previously registered via "
                               "register_state_dict_post_hook")
        return H.add_hook(self._state_dict_hooks, hook)

    def _register_load_state_dict_pre_hook(self, hook: Callable[..., None],
                                           with_module: bool = False) -> H.RemovableHandle:
        """Run ``hook(state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` (the module first when ``with_module``, held
        weakly) before this module loads from ``state_dict``."""
        return H.add_hook(self._load_state_dict_pre_hooks,
                          H._WrappedHook(hook, self if with_module else None))

    def register_load_state_dict_pre_hook(self, hook: Callable[..., None]
                                          ) -> H.RemovableHandle:
        """Run ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs) -> None`` before this module loads: it may edit the
        ``state_dict`` it receives (this module's part of a copy of the one loaded) and
        the key and error lists. ``strict`` is always True there, as in PyTorch."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook: Callable[..., None]
                                           ) -> H.RemovableHandle:
        """Run ``hook(module, incompatible_keys) -> None`` after this module and its
        children loaded; ``incompatible_keys`` (``missing_keys``, ``unexpected_keys``)
        holds the lists of the whole load, which the hook may edit in place: with
        ``strict=True``, :meth:`load_state_dict` raises only for the keys left in them.
        Returning anything but None raises AssertionError."""
        return H.add_hook(self._load_state_dict_post_hooks, hook)

    # -------------------------------------------------------------- conversions
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        for m in self.children():
            m._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    p.data = new  # same Parameter object: optimizers keep working
                    g = p._grad
                    if g is not None:
                        p._grad = fn(g)
            for k, b in self._buffers.items():
                if b is not None:
                    self._buffers[k] = fn(b)
        return self

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every descendant, then on this module (e.g. custom init)."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move parameters and buffers to a device and/or cast the floating-point ones to
        a dtype (``to(device)``, ``to(dtype)``, ``to(tensor)``, ``to(device, dtype)``), in
        place: the Parameter objects stay (optimizers keep working)."""
        from ..ops.methods import parse_to_args

        fmt = kwargs.get("memory_format")
        dtype, _, device = parse_to_args(args, dict(kwargs), "modules")
        if dtype is not None:
            dt = dtypes.to_dtype(dtype)
            if not dt.is_floating_point:
                raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got "
                                f"desired dtype={dt}")
        else:
            dt = None

        def convert(t: Tensor) -> Tensor:
            if device is not None:
                t = t.to(device)
            if fmt is not None and t.dim() in (4, 5):  # PyTorch: 4-D and 5-D tensors only
                t = t.to(memory_format=fmt)
            return t.to(dt) if dt is not None and t.is_floating_point() else t

        if dt is None and device is None and fmt is None:
            return self
        return self._apply(convert)

    def cuda(self, device=None) -> Module:
        """Move every parameter and buffer to the CUDA device."""
        return self.to("cuda" if device is None else device)

    def cpu(self) -> Module:
        """Move every parameter and buffer to host memory."""
        return self.to("cpu")

    def float(self) -> Module:
        """Floating-point parameters and buffers to float32."""
        return self.to(dtypes.float32)

    def double(self) -> Module:
        """Floating-point parameters and buffers to float64."""
        return self.to(dtypes.float64)

    def half(self) -> Module:
        """Floating-point parameters and buffers to float16."""
        return self.to(dtypes.float16)

    def bfloat16(self) -> Module:
        """Floating-point parameters and buffers to bfloat16: raises, jitgrad has no
        bfloat16 storage (see ``jitgrad.bfloat16``)."""
        return self.to(dtypes.bfloat16)

    def type(self, dst_type) -> Module:
        """Cast every parameter and buffer to ``dst_type``."""
        dt = dtypes.to_dtype(dst_type)
        return self._apply(lambda t: t.to(dt))

    def share_memory(self) -> Module:
        """``Tensor.share_memory_`` on every parameter and buffer, as PyTorch; returns
        ``self``. jitgrad's tensors are NumPy arrays in ordinary process memory and are
        not moved to shared memory (``share_memory_`` leaves them as they are): worker
        processes started by fork (e.g. DataLoader workers) see them copy-on-write, and
        updates made in another process are not seen by this one."""
        return self._apply(lambda t: t.share_memory_())

    # ------------------------------------------------------------------------ hooks
    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> H.RemovableHandle:
        """Run ``hook(module, args)`` (or ``hook(module, args, kwargs)`` with
        ``with_kwargs``) before ``forward``; it may return replacement args."""
        return H.add_hook(self._forward_pre_hooks, hook, prepend,
                          [self._forward_pre_hooks_with_kwargs] if with_kwargs else None)

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> H.RemovableHandle:
        """Run ``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with
        ``with_kwargs``) after ``forward``; it may return a replacement output."""
        extra = [self._forward_hooks_with_kwargs] if with_kwargs else []
        if always_call:
            extra.append(self._forward_hooks_always_called)
        return H.add_hook(self._forward_hooks, hook, prepend, extra)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False
                                        ) -> H.RemovableHandle:
        """Run ``hook(module, grad_output)`` when the gradient of the output is known; it may
        return a replacement ``grad_output``."""
        return H.add_hook(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend: bool = False) -> H.RemovableHandle:
        """Run ``hook(module, grad_input, grad_output)`` once the gradients w.r.t. the
        module's inputs are computed; it may return a replacement ``grad_input``."""
        if self._is_full_backward_hook is False:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        self._is_full_backward_hook = True
        return H.add_hook(self._backward_hooks, hook, prepend)

    def register_backward_hook(self, hook) -> H.RemovableHandle:
        """Deprecated (as in PyTorch): a hook on the ``grad_fn`` of the output, whose
        ``grad_input`` are that one node's input gradients. Prefer
        :meth:`register_full_backward_hook`."""
        if self._is_full_backward_hook is True:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        self._is_full_backward_hook = False
        return H.add_hook(self._backward_hooks, hook)

    def _get_backward_hooks(self) -> tuple[list, list]:
        hooks = list(H._global_backward_hooks.values())
        full = hooks + (list(self._backward_hooks.values())
                        if self._is_full_backward_hook is True else [])
        non_full = list(self._backward_hooks.values()) \
            if self._is_full_backward_hook is False else []
        return full, non_full

    def _get_backward_pre_hooks(self) -> list:
        return [*H._global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]

    # ------------------------------------------------------------------------- repr
    def extra_repr(self) -> str:
        """Extra text inside this module's repr (override, e.g. ``in_features=2``)."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): {_addindent(repr(m), 2)}" for key, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"
