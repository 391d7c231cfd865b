"""``Optimizer``: parameter groups with per-group options, per-parameter state,
``zero_grad``, ``step(closure)``, ``state_dict``/``load_state_dict`` as PyTorch's.

Subclasses implement ``_step_group(group)``, which runs under ``no_grad`` and updates the
parameters in place with jitgrad tensor ops (so a compiled training step can trace it).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from copy import deepcopy
from itertools import chain

import numpy as np

from ..autograd.grad_mode import enable_grad, no_grad
from ..nn.mutation import OPTIM_EPOCH, OptimDict, OptimList, OptimState
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


class Optimizer:
    """Base class of the optimizers (see :class:`jitgrad.optim.SGD` for an example)."""

    def __init__(self, params, defaults: dict) -> None:
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
                    self._step_group(group)
        return loss

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
                            self._step_group(group)

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

    # -------------------------------------------------------------------- state
    def state_dict(self) -> dict:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``;
        parameters are referred to by their position across groups."""
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
        dtype; the ``step`` count keeps its own)."""
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
