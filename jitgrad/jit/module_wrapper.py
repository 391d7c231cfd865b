"""Compiling modules as ``torch.compile`` does.

* ``jitgrad.compile(module)`` returns an :class:`OptimizedModule`: a ``Module`` whose only
  child is the original (``_orig_mod``) and whose ``forward`` is the compiled original module
  (``CompiledFunction(module)``: the module's own ``__call__``, hooks included, traced per
  input signature). Everything else is the original's: attributes read and written through
  the wrapper, parameters, buffers, ``train``/``eval``, ``to``, ``zero_grad``;
  ``state_dict`` keys carry the ``_orig_mod.`` prefix, as PyTorch's do.
* ``Module.compile()`` compiles a module in place: its ``_compiled_call_impl`` (PyTorch's
  name) serves every later ``module(...)``. The compiled function guards the module's state
  as ``compile(module)`` does, and traces (or runs eagerly) :class:`UncompiledCall`, the
  module's call without the compiled path.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sized
from typing import Any

from ..nn import hooks as H
from ..nn.module import Module
from .function import CompiledFunction, _uncompiled
from .options import CompileOptions, resolve

__all__ = ["OptimizedModule", "UncompiledCall", "compile_in_place", "is_module"]


def is_module(obj: Any) -> bool:
    """Whether ``obj`` is a ``jitgrad.nn.Module`` (compiled into an OptimizedModule)."""
    return isinstance(obj, Module)


class OptimizedModule(Module):
    """What ``jitgrad.compile(module)`` returns (PyTorch's
    ``torch._dynamo.eval_frame.OptimizedModule``).

    >>> import jitgrad
    >>> net = jitgrad.nn.Linear(2, 1)
    >>> cnet = jitgrad.compile(net)
    >>> cnet._orig_mod is net, cnet.weight is net.weight, list(cnet.state_dict())
    (True, True, ['_orig_mod.weight', '_orig_mod.bias'])
    >>> cnet
    OptimizedModule(
      (_orig_mod): Linear(in_features=2, out_features=1, bias=True)
    )

    Calling it runs ``forward``: the compiled original module (its ``CompiledFunction``:
    ``cnet.forward.stats``, ``cnet.forward.lower(x)``, ``jitgrad.explain(cnet, x)``), or the
    original module itself under an eager backend. Hooks registered on the original run
    inside the compiled call, hooks on the wrapper around it.
    """

    #: Attributes the wrapper keeps; every other one is the original module's.
    _opt_mod_attributes = frozenset({"_orig_mod", "forward", "_compile_options", "__dict__",
                                     "_super_module_initialized"})

    def __init__(self, mod: Module, options: CompileOptions | None = None) -> None:
        object.__setattr__(self, "_super_module_initialized", False)
        super().__init__()
        self._super_module_initialized = True
        self._orig_mod = mod  # registered as the only child
        self._compile_options = options if options is not None else resolve()
        self._initialize()

    def _initialize(self) -> None:
        mod, opts = self._orig_mod, self._compile_options
        self.forward = _uncompiled(mod) if opts.eager else CompiledFunction(
            mod, **opts.as_kwargs())

    def __call__(self, *args, **kwargs):
        if H.any_global_hooks():
            warnings.warn(
                "Using `jitgrad.compile(module)` when there are global hooks on modules (e.g., "
                "from `register_module_forward_hook`); this will cause the hooks to fire an "
                "extra time for the `OptimizedModule` created by `jitgrad.compile(module)`. "
                "If this causes undesired behavior, please try using `module.compile()`, or "
                "use the per-module hooks instead", stacklevel=2)
        return super().__call__(*args, **kwargs)

    # ------------------------------------------------- the original's attributes
    @property
    def training(self) -> bool:  # type: ignore[override]
        """The original module's ``training`` flag."""
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        if self.__dict__.get("_super_module_initialized"):  # not Module.__init__'s default
            self._orig_mod.training = value

    def __getattr__(self, name: str):
        modules = self.__dict__.get("_modules")
        if modules is None or "_orig_mod" not in modules:
            raise AttributeError(f"'OptimizedModule' object has no attribute '{name}'")
        if name == "_orig_mod":
            return modules["_orig_mod"]
        return getattr(modules["_orig_mod"], name)

    def __setattr__(self, name: str, value) -> None:
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__setattr__(name, value)
        return setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__delattr__(name)
        return delattr(self._orig_mod, name)

    def __len__(self) -> int:
        if isinstance(self._orig_mod, Sized):
            return len(self._orig_mod)
        raise TypeError(f"{type(self._orig_mod).__name__} does not support len()")

    def __dir__(self) -> list[str]:
        orig = self._orig_mod.__dir__()
        return orig + [a for a in super().__dir__() if a not in orig]

    # ------------------------------------------------------------ copies, pickles
    def __reduce__(self):
        """Copies and pickles hold the original module and the options; the copy compiles
        afresh (compiled plans are not copied)."""
        return (_rebuild, (self._orig_mod, self._compile_options.as_kwargs()))


def _rebuild(mod: Module, kwargs: dict) -> OptimizedModule:
    return OptimizedModule(mod, resolve(**kwargs))


class UncompiledCall:
    """``module(...)`` without ``Module.compile()``'s compiled path: hooks around
    ``forward``. What the compiled function serving ``Module.compile()`` traces, and runs
    when a signature runs eagerly. Attribute reads are the module's (``parameters``,
    ``named_parameters``, the hook dicts...), so it reads as the module it calls."""

    def __init__(self, module: Module) -> None:
        object.__setattr__(self, "module", module)
        object.__setattr__(self, "__name__", type(module).__name__)

    def __call__(self, *args, **kwargs):
        m = self.module
        if not (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or m._backward_pre_hooks or H.any_global_hooks()):
            return m.forward(*args, **kwargs)
        return H.call_with_hooks(m, args, kwargs)

    def __getattr__(self, name: str):
        module = self.__dict__.get("module")
        if module is None:
            raise AttributeError(name)
        return getattr(module, name)

    def __repr__(self) -> str:
        return f"<uncompiled call of {type(self.module).__name__}>"


class _InPlaceCompiled(CompiledFunction):
    """The compiled call ``Module.compile()`` installs: guards (and names captured tensors
    by) the module itself, as ``compile(module)`` does, and calls it without the compiled
    path (:class:`UncompiledCall`; calling the module would come back here)."""

    def __init__(self, module: Module, options: CompileOptions) -> None:
        super().__init__(module, **options.as_kwargs())
        self.fn = UncompiledCall(module)



_COMPILE_KWARGS = frozenset({"fullgraph", "dynamic", "backend", "mode", "options", "disable",
                             "fallback", "cache_dir"})


def compile_in_place(module: Module, *args, **kwargs) -> None:
    """``Module.compile(**kwargs)``: later calls of ``module`` run compiled (``kwargs`` as
    for ``jitgrad.compile``); an eager backend or ``disable=True`` keep them uncompiled."""
    if args:
        raise TypeError(f"Module.compile() takes keyword arguments only (those of "
                        f"jitgrad.compile), got {len(args)} positional")
    for name in kwargs:
        if name not in _COMPILE_KWARGS:
            raise TypeError(f"Module.compile() got an unexpected keyword argument '{name}'")
    disable = kwargs.pop("disable", False)
    opts = resolve(**kwargs)
    if disable or opts.eager:
        impl: Callable = UncompiledCall(module)
    else:
        impl = _InPlaceCompiled(module, opts)
    object.__setattr__(module, "_compiled_call_impl", impl)
