"""``Optimizer``: parameter groups with per-group options, per-parameter state,
``zero_grad``, ``step(closure)``, ``state_dict``/``load_state_dict`` as PyTorch's.

Subclasses implement ``_step_group(group)``, which runs under ``no_grad`` and updates the
parameters in place with jitgrad tensor ops (so a compiled training step can trace it).
"""

from __future__ import annotations

import functools
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from copy import deepcopy
from itertools import chain

import numpy as np

from ..autograd.grad_mode import enable_grad, no_grad
from ..nn.mutation import OPTIM_EPOCH, OptimDict, OptimHookDict, OptimList, OptimState
from ..ops.arithmetic import ADD_SCALED
from ..ops.dispatch import binary_into
from ..tensor import Tensor
from ..trace.state import STATE as TRACE

__all__ = ["Optimizer", "required", "params_with_grad", "check_options", "check_fused",
           "descend", "new_step", "step_gradient"]


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


def _typename(obj) -> str:
    return f"jitgrad.{obj.dtype.tensor_type}" if isinstance(obj, Tensor) else \
        type(obj).__qualname__


#: hooks every optimizer's step runs (``register_optimizer_step_pre_hook`` / ``post``)
_GLOBAL_STEP_PRE_HOOKS: OptimHookDict = OptimHookDict()
_GLOBAL_STEP_POST_HOOKS: OptimHookDict = OptimHookDict()
#: an optimizer's own hook dicts (made empty by ``__init__`` and ``__setstate__``)
_HOOK_DICTS = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
               "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
               "_optimizer_load_state_dict_pre_hooks", "_optimizer_load_state_dict_post_hooks")


def register_optimizer_step_pre_hook(hook: Callable):
    """``hook(optimizer, args, kwargs)`` before every optimizer's ``step`` (it may return
    new ``(args, kwargs)``); returns a handle whose ``remove()`` unregisters it."""
    from ..nn.hooks import add_hook

    return add_hook(_GLOBAL_STEP_PRE_HOOKS, hook)


def register_optimizer_step_post_hook(hook: Callable):
    """``hook(optimizer, args, kwargs)`` after every optimizer's ``step``."""
    from ..nn.hooks import add_hook

    return add_hook(_GLOBAL_STEP_POST_HOOKS, hook)


def _with_step_hooks(step: Callable) -> Callable:
    """``step`` running the step hooks around it, PyTorch's order: the global pre-hooks,
    the optimizer's own pre-hooks (each may return new ``(args, kwargs)``), the step, the
    optimizer's post-hooks, the global post-hooks. Only the class whose ``step`` the object
    resolves to runs them (a subclass's step calling ``super().step()`` runs them once)."""
    if getattr(step, "_runs_step_hooks", False):
        return step

    @functools.wraps(step)
    def hooked(self, *args, **kwargs):
        d = self.__dict__
        pre, post = d.get("_optimizer_step_pre_hooks"), d.get("_optimizer_step_post_hooks")
        if not (pre or post or _GLOBAL_STEP_PRE_HOOKS or _GLOBAL_STEP_POST_HOOKS) or \
                getattr(type(self), "step", None) is not hooked:
            return step(self, *args, **kwargs)
        for hook in (*_GLOBAL_STEP_PRE_HOOKS.values(), *(pre or {}).values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{hook} must return None or a tuple of (new_args, "
                                       f"new_kwargs), but got {result}.")
                args, kwargs = result
        out = step(self, *args, **kwargs)
        for hook in (*(post or {}).values(), *_GLOBAL_STEP_POST_HOOKS.values()):
            hook(self, args, kwargs)
        return out
    hooked._runs_step_hooks = True
    return hooked


class Optimizer:
    """Base class of the optimizers (see :class:`jitgrad.optim.SGD` for an example)."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if callable(step):  # (a subclass's own step runs the step hooks too)
            cls.step = _with_step_hooks(step)

    def __init__(self, params, defaults: dict) -> None:
        for name in _HOOK_DICTS:
            setattr(self, name, OptimHookDict())
        self.defaults = defaults
        # tracked containers: a compiled step's guard re-reads them only after a change
        # (``nn/mutation.py``, ``jit/guards.py``)
        self.state: defaultdict = OptimState()
        self.param_groups: list[dict] = OptimList()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {_typename(params)}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(OptimDict(g))  # (a copy, as PyTorch's: tracked)

    # -------------------------------------------------------------------- groups
    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own options (unset ones take the defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        params = list(params)
        if params and isinstance(params[0], tuple):  # named parameters
            param_group["param_names"] = [n for n, _ in params]
            params = [p for _, p in params]
        param_group["params"] = params = OptimList(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                f"{_typename(p)}")
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        # the dict itself, as PyTorch keeps it (a caller's plain dict stays untracked: the
        # guard of a compiled step reads such an optimizer at every call)
        self.param_groups.append(param_group)

    def __setattr__(self, name: str, value) -> None:
        OPTIM_EPOCH[0] += 1  # param_groups, state... rebound: a guard must read them again
        object.__setattr__(self, name, value)

    def _track(self) -> None:
        """``param_groups`` and ``state`` (as loaded or unpickled) in tracked containers."""
        self.param_groups = OptimList(
            OptimDict(g, params=OptimList(g["params"])) for g in self.param_groups)
        self.state = OptimState(
            (k, OptimDict(v) if type(v) is dict else v) for k, v in self.state.items())

    # ----------------------------------------------------------------- stepping
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter (to None, or zeroed in place)."""
        from ..nn.parameter import zero_grads

        for group in self.param_groups:
            zero_grads(group["params"], set_to_none)

    def step(self, closure: Callable[[], Tensor] | None = None):
        """One update of every parameter that has a gradient; ``closure`` (re-evaluating
        the loss, run with grad enabled) is called first and its loss returned. Groups with
        ``fused=True`` are updated by one compiled plan (:meth:`_fused_step`)."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        fused = TRACE.tracer is None and any(g.get("fused") for g in self.param_groups)
        if fused:  # the fused groups' update: one compiled plan (see _fused_step)
            self._fused_step()()
        with no_grad():
            for group in self.param_groups:
                if not (fused and group.get("fused")):
                    self._run_group(group)
        return loss

    def _run_group(self, group: dict) -> None:
        """:meth:`_step_group`, with PyTorch's handling of complex parameters: the step
        runs on ``view_as_real`` views of each complex parameter, its gradient and its
        state, so every optimizer treats the real and imaginary parts as two real numbers
        (Adam's second moment of a part is that part squared, not ``g * g``). The state
        stays complex, as PyTorch keeps it."""
        for p in group["params"]:
            if p._data.dtype.kind == "c":
                break
        else:
            self._step_group(group)
            return
        from ..ops.complex_functions import view_as_complex, view_as_real

        views, params = [], []
        for p in group["params"]:
            if p._data.dtype.kind != "c":
                params.append(p)
                continue
            v = view_as_real(p)
            if p.grad is not None:
                v.grad = view_as_real(p.grad)
            state = self.state.get(p)
            if state:
                self.state[v] = {k: view_as_real(t) if isinstance(t, Tensor) and
                                 t._data.dtype.kind == "c" else t for k, t in state.items()}
            views.append((v, p))
            params.append(v)
        try:
            self._step_group({**group, "params": params})
        finally:
            for v, p in views:
                state = self.state.pop(v, None)
                if state is not None:  # (a state made on the view: made complex again)
                    self.state[p] = {k: view_as_complex(t) if isinstance(t, Tensor) and
                                     t.shape == v.shape and t._data.dtype.kind == "f"
                                     else t for k, t in state.items()}

    def _fused_step(self) -> Callable[[], None]:
        """The update of the groups with ``fused=True`` as one function compiled by
        :func:`jitgrad.compile` (built at the first fused step): the step's tensor ops traced
        once -- as a compiled training step traces them, with the learning rate read at every
        call and the bias corrections computed from the ``step`` tensor -- and run as fused
        kernels, each parameter's update one pass over its arrays. Its results are the bits
        of the same step traced inside a compiled training step; they differ from the
        unfused eager step's within the documented bound (``capturable`` vs float bias
        corrections, ``tests/nn/test_optim.py``). The plan's guards see a new gradient,
        state or option and trace the step again."""
        fn = self.__dict__.get("_fused_fn")
        if fn is None:
            from ..jit.function import compile as jit_compile

            def fused_groups_step() -> None:
                with no_grad():
                    for group in self.param_groups:
                        if group.get("fused"):
                            self._run_group(group)

            fused_groups_step.__name__ = f"{type(self).__name__}.step"
            fn = jit_compile(fused_groups_step)
            object.__setattr__(self, "_fused_fn", fn)
        return fn

    def _step_group(self, group: dict) -> None:
        raise NotImplementedError

    #: group options that a step traced by ``jitgrad.compile`` reads afresh at every call
    #: (so an LR scheduler changing them does not retrace); others are baked into the plan
    traced_hyperparameters: tuple[str, ...] = ()
    #: options baked into the plan until a trace finds one changed since an earlier trace
    #: (OneCycleLR cycles ``momentum`` / ``betas`` at every step), then read at every call
    #: like the learning rate (as ``torch.compile`` makes a changing number dynamic): a plan
    #: for constant ones keeps their arithmetic out of every call
    varying_hyperparameters: tuple[str, ...] = ()
    #: varying options whose being zero decides what the step computes (SGD's momentum
    #: buffer): the compiled step's guard keeps that, not the value
    traced_zero_tests: tuple[str, ...] = ()

    def traced_options(self) -> tuple:
        """The group options a compiled step reads at every call (not baked in)."""
        return (*self.traced_hyperparameters, *self.__dict__.get("_varying", ()))

    def _hyper(self, group: dict, key: str):
        """``group[key]``: a Python number eagerly, a 0-d float64 tensor read at every call of
        the compiled plan when tracing (for keys in ``traced_hyperparameters``, and
        ``varying_hyperparameters`` once seen changed); a tuple option (``betas``) as a
        tuple of them."""
        tracer = TRACE.tracer
        if tracer is None or key not in self.traced_options() and not self._varies(group,
                                                                                  key):
            return group[key]
        name = f"{type(self).__name__}.{key}"
        if type(group[key]) is tuple:
            return tuple(tracer.scalar_input(group, (key, i), np.float64, name=f"{name}[{i}]")
                         for i in range(len(group[key])))
        return tracer.scalar_input(group, key, np.float64, name=name)

    def _varies(self, group: dict, key: str) -> bool:
        """Whether option ``key`` (a varying one) changed since a trace read it: from then
        on it is read at every call."""
        if key not in self.varying_hyperparameters:
            return False
        d = self.__dict__
        seen = d.setdefault("_seen_options", {})
        value = group[key]
        before = seen.setdefault((id(group), key), value)
        if before == value:
            return False
        d.setdefault("_varying", set()).add(key)
        return True

    # -------------------------------------------------------------------- hooks
    def register_step_pre_hook(self, hook: Callable):
        """``hook(optimizer, args, kwargs)`` before each ``step`` (it may return new
        ``(args, kwargs)``); returns a handle whose ``remove()`` unregisters it."""
        return self._add_hook("_optimizer_step_pre_hooks", hook)

    def register_step_post_hook(self, hook: Callable):
        """``hook(optimizer, args, kwargs)`` after each ``step``."""
        return self._add_hook("_optimizer_step_post_hooks", hook)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False):
        """``hook(optimizer)`` before :meth:`state_dict` builds the dict."""
        return self._add_hook("_optimizer_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False):
        """``hook(optimizer, state_dict)`` after :meth:`state_dict`; a dict it returns is
        the result."""
        return self._add_hook("_optimizer_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False):
        """``hook(optimizer, state_dict)`` before :meth:`load_state_dict`; a dict it returns
        is loaded instead."""
        return self._add_hook("_optimizer_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False):
        """``hook(optimizer)`` after :meth:`load_state_dict`."""
        return self._add_hook("_optimizer_load_state_dict_post_hooks", hook, prepend)

    def _add_hook(self, name: str, hook: Callable, prepend: bool = False):
        from ..nn.hooks import add_hook

        hooks = self.__dict__.get(name)
        if hooks is None:  # (a subclass that never called Optimizer.__init__)
            hooks = OptimHookDict()
            object.__setattr__(self, name, hooks)
        return add_hook(hooks, hook, prepend)

    def _hooks(self, name: str) -> tuple:
        hooks = self.__dict__.get(name)
        return tuple(hooks.values()) if hooks else ()

    # -------------------------------------------------------------------- state
    def state_dict(self) -> dict:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``;
        parameters are referred to by their position across groups. The state-dict hooks
        run before and after."""
        for hook in self._hooks("_optimizer_state_dict_pre_hooks"):
            hook(self)
        out = self._state_dict()
        for hook in self._hooks("_optimizer_state_dict_post_hooks"):
            result = hook(self, out)
            if result is not None:
                out = result
        return out

    def _state_dict(self) -> dict:
        mapping: dict[int, int] = {}
        start = 0

        def pack(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack(g) for g in self.param_groups]
        state = {mapping[id(k)] if isinstance(k, Tensor) else k: v for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a :meth:`state_dict` (state tensors are copied and cast to each parameter's
        dtype; the ``step`` count keeps its own). The load hooks run before (a dict one
        returns is loaded instead) and after."""
        for hook in self._hooks("_optimizer_load_state_dict_pre_hooks"):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        self._load_state_dict(state_dict)
        for hook in self._hooks("_optimizer_load_state_dict_post_hooks"):
            hook(self)

    def _load_state_dict(self, state_dict: dict) -> None:
        groups = self.param_groups
        saved = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                if key == "step" or not param.is_floating_point():
                    return value.clone()
                return value.to(param.dtype).clone()
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            return value

        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = cast(id_map[k], v)
            else:
                state[k] = v
        new_groups = []
        for group, new in zip(groups, saved):
            new["params"] = group["params"]
            if "param_names" in group and "param_names" not in new:
                new["param_names"] = group["param_names"]
            new_groups.append(new)
        self.state = state
        self.param_groups = new_groups
        self._track()

    def __getstate__(self) -> dict:
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for name in _HOOK_DICTS:  # (hooks are not pickled, as PyTorch's)
            self.__dict__.setdefault(name, OptimHookDict())
        OPTIM_EPOCH[0] += 1
        self._track()

    def __repr__(self) -> str:
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"


Optimizer.step = _with_step_hooks(Optimizer.step)


def params_with_grad(group: dict) -> Iterable[Tensor]:
    """The group's parameters that have a gradient (the ones a step updates)."""
    return [p for p in group["params"] if p.grad is not None]


#: how PyTorch's optimizers name an option in their "Invalid ..." errors
_LABELS = {"lr": "learning rate", "eps": "epsilon value"}


def check_options(opt_name: str, differentiable: bool = False, fused: bool | None = None,
                  foreach: bool | None = None, **options: float) -> None:
    """PyTorch's argument checks, in the order given: ``ValueError("Invalid <label>:
    <value>")`` for the first negative option (``lr`` is "learning rate", ``eps`` "epsilon
    value", others "<name> value"; ``rho`` must also be at most 1); then ``fused``'s
    (:func:`check_fused`); then ``differentiable``, which jitgrad has no implementation of."""
    for name, value in options.items():
        if not 0.0 <= value or (name == "rho" and value > 1.0):
            raise ValueError(f"Invalid {_LABELS.get(name, name + ' value')}: {value}")
    check_fused(differentiable, fused, foreach)
    if differentiable:
        raise NotImplementedError(f"{opt_name}: differentiable=True is not supported by "
                                  "jitgrad")


def check_fused(differentiable: bool, fused: bool | None, foreach: bool | None) -> None:
    """PyTorch's checks of ``fused=True`` (SGD, Adam, AdamW, Adagrad), in its order: not
    with ``differentiable``, not with ``foreach=True``."""
    if not fused:
        return
    if differentiable:
        raise RuntimeError("`fused` does not support `differentiable`")
    if foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def in_dtype(value, like: Tensor):
    """A hyper-parameter as eager arithmetic with ``like`` uses it: a Python number as it
    is, a traced one (a 0-d float64 tensor) rounded to ``like``'s dtype as eager mode
    rounds the number."""
    return value.to(like.dtype) if isinstance(value, Tensor) else value


def add_scaled(grad: Tensor, p: Tensor, alpha) -> Tensor:
    """``grad.add(p, alpha=alpha)`` (weight decay), for a traced ``alpha`` too (a 0-d float64
    tensor, rounded to ``p``'s dtype as eager mode rounds the number: eager's bits)."""
    if isinstance(alpha, Tensor):
        return grad + p * alpha.to(p.dtype)
    return grad.add(p, alpha=alpha)


def descend(p: Tensor, update: Tensor, lr, den: Tensor | None = None) -> None:
    """``p -= lr * update`` (``update / den`` with ``den``), in place, as PyTorch's
    ``p.add_(update, alpha=-lr)`` / ``p.addcdiv_(update, den, value=-lr)``; a traced rate
    (a tensor, read at every call of a compiled step) the same way, in the same order and
    dtype (``-lr`` rounded to ``p``'s dtype, ``(value * update) / den``): eager's bits."""
    if isinstance(lr, Tensor):  # eager's arithmetic: -lr in p's dtype, (value * t1) / t2
        neg = (-lr).to(p.dtype)
        p.add_(update * neg if den is None else (update * neg) / den)
    elif den is None:
        if not binary_into(ADD_SCALED, p, update, {"alpha": -lr}):  # one pass, into p
            p.add_(update, alpha=-lr)
    else:
        p.addcdiv_(update, den, value=-lr)


def new_step() -> Tensor:
    """A fresh per-parameter step counter: a float tensor of the default dtype, as
    PyTorch's."""
    from ..creation import tensor
    from ..dtypes import get_default_dtype

    return tensor(0.0, dtype=get_default_dtype())


def step_gradient(p: Tensor, group: dict) -> Tensor:
    """``p``'s gradient as the step uses it: negated under ``maximize``, plus
    ``weight_decay * p`` (PyTorch's coupled weight decay)."""
    grad = -p.grad if group["maximize"] else p.grad
    wd = group["weight_decay"]
    return grad.add(p, alpha=wd) if wd != 0 else grad
