"""Cyclic learning-rate schedules (PyTorch's): ``CyclicLR`` and ``OneCycleLR``, which also
cycle the optimizer's momentum (``momentum``, or Adam's ``beta1``) the other way. Their
state is PyTorch's attributes (``use_beta1``, ``_schedule_phases``, ``_anneal_func_type``),
so a ``state_dict`` has PyTorch's keys; one of an older jitgrad (``_momentum_key``,
``_phases``, ``anneal_strategy``) still loads."""

from __future__ import annotations

import math
import types
from collections.abc import Callable

from .lr_scheduler import LRScheduler
from .optimizer import Optimizer

__all__ = ["CyclicLR", "OneCycleLR"]


def _per_group_values(optimizer: Optimizer, name: str, value) -> list:
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(value)} values, param_groups has {n}.")
        return list(value)
    return [value] * n


def _use_beta1(optimizer: Optimizer) -> bool:
    """Whether the cycled momentum is Adam's beta1 (else ``momentum``); PyTorch's error when
    the optimizer has neither."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                         "option enabled")
    return "betas" in optimizer.defaults


def _set_momentum(group: dict, use_beta1: bool, value: float) -> None:
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


def _init_momentums(optimizer: Optimizer, use_beta1: bool, highs: list, lows: list) -> None:
    """Each group's momentum at its maximum, and its ``max_momentum`` / ``base_momentum``
    (PyTorch's keys)."""
    for hi, lo, group in zip(highs, lows, optimizer.param_groups):
        _set_momentum(group, use_beta1, hi)
        group["max_momentum"], group["base_momentum"] = hi, lo


def _legacy_state(state: dict) -> dict:
    """A copy of a scheduler's ``state``, an older jitgrad's ``_momentum_key`` as PyTorch's
    ``use_beta1``."""
    state = dict(state)
    if "_momentum_key" in state:
        state["use_beta1"] = state.pop("_momentum_key") == "betas"
    return state


class CyclicLR(LRScheduler):
    """The learning rate cycles between ``base_lr`` and ``max_lr`` (up in ``step_size_up``
    iterations, down in ``step_size_down``), the cycle's amplitude per ``mode``
    ("triangular", "triangular2", "exp_range") or ``scale_fn``; the momentum cycles between
    ``max_momentum`` and ``base_momentum`` the other way. Step it every batch."""

    def __init__(self, optimizer: Optimizer, base_lr, max_lr, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum=0.8, max_momentum=0.9, last_epoch: int = -1) -> None:
        base_lrs = _per_group_values(optimizer, "base_lr", base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group_values(optimizer, "max_lr", max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else (
            "iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _use_beta1(optimizer)
            self.base_momentums = _per_group_values(optimizer, "base_momentum", base_momentum)
            self.max_momentums = _per_group_values(optimizer, "max_momentum", max_momentum)
            if last_epoch == -1:
                _init_momentums(optimizer, self.use_beta1, self.max_momentums,
                                self.base_momentums)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at cycle (or iteration) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [b + (m - b) * scale_factor * scale for b, m in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, lo, hi in zip(self.optimizer.param_groups, self.base_momentums,
                                     self.max_momentums):
                _set_momentum(group, self.use_beta1, hi - (hi - lo) * scale_factor * scale)
        return lrs

    def state_dict(self) -> dict:
        """Everything but the optimizer; a custom ``scale_fn`` as PyTorch saves it: None for
        a function, a callable object's ``__dict__``."""
        state = super().state_dict()
        fn = state["_scale_fn_custom"]
        state["_scale_fn_custom"] = None if fn is None or isinstance(
            fn, types.FunctionType) else fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """PyTorch's, or an older jitgrad's, ``state_dict``; a saved callable ``scale_fn``'s
        attributes go to this scheduler's."""
        state = _legacy_state(state_dict)
        fn = state.pop("_scale_fn_custom", None)
        super().load_state_dict(state)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)


#: the keys of a ``OneCycleLR`` phase (PyTorch's ``_SchedulePhase``)
_PHASE_KEYS = ("end_step", "start_lr", "end_lr", "start_momentum", "end_momentum")


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the learning rate rises from ``max_lr / div_factor`` to ``max_lr``
    over ``pct_start`` of ``total_steps`` (or ``epochs * steps_per_epoch``), then anneals to
    ``initial / final_div_factor`` ("cos" or "linear"); with ``three_phase`` it comes back to
    the initial rate first. The momentum moves the other way. Step it every batch."""

    def __init__(self, optimizer: Optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1) -> None:
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        n = self.total_steps
        if three_phase:
            phases = [
                (float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum",
                 "base_momentum"),
                (float(2 * pct_start * n) - 2, "max_lr", "initial_lr", "base_momentum",
                 "max_momentum"),
                (n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            phases = [
                (float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum",
                 "base_momentum"),
                (n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        self._schedule_phases = [dict(zip(_PHASE_KEYS, p)) for p in phases]
        max_lrs = _per_group_values(optimizer, "max_lr", max_lr)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _use_beta1(optimizer)
            if last_epoch == -1:
                _init_momentums(optimizer, self.use_beta1,
                                _per_group_values(optimizer, "max_momentum", max_momentum),
                                _per_group_values(optimizer, "base_momentum", base_momentum))
        super().__init__(optimizer, last_epoch)

    def load_state_dict(self, state_dict: dict) -> None:
        """PyTorch's, or an older jitgrad's, ``state_dict`` (``_phases`` as tuples,
        ``anneal_strategy``)."""
        state = _legacy_state(state_dict)
        if "_phases" in state:
            state["_schedule_phases"] = [dict(zip(_PHASE_KEYS, p)) for p in state.pop("_phases")]
        if "anneal_strategy" in state:
            state["_anneal_func_type"] = state.pop("anneal_strategy")
        super().load_state_dict(state)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total "
                             f"steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]],
                                            pct))
                    if self.cycle_momentum:
                        _set_momentum(group, self.use_beta1, self._anneal(
                            group[phase["start_momentum"]], group[phase["end_momentum"]], pct))
                    break
                start = end
        return lrs
