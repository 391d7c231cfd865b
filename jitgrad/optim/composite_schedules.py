"""Schedules made of schedules, and the one driven by a metric (PyTorch's):
``SequentialLR`` (one scheduler after another at milestones), ``ChainedScheduler`` (all of
them every step) and ``ReduceLROnPlateau`` (divide the learning rate when a metric stops
improving)."""

from __future__ import annotations

import math
import warnings
from bisect import bisect_right

from .lr_scheduler import EPOCH_DEPRECATION_WARNING, LRScheduler
from .optimizer import Optimizer

__all__ = ["SequentialLR", "ChainedScheduler", "ReduceLROnPlateau"]


def _check_members(owner: str, schedulers: list, optimizer: Optimizer) -> None:
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{owner} at index {i} should have `optimizer` as its attribute.")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"{owner} does not support `ReduceLROnPlateau` scheduler as it "
                             "requires additional kwargs to be specified when calling `step`, "
                             f"but got one at index {i} in the given schedulers sequence.")
        if optimizer != s.optimizer:
            raise ValueError(f"{owner} expects all schedulers to belong to the same optimizer, "
                             f"but got scheduler {type(s).__name__} at index {i} has "
                             f"{s.optimizer}, which is different from "
                             f"{type(optimizer).__name__}.")


class _Composite(LRScheduler):
    """``state_dict`` / ``load_state_dict`` with the member schedulers' states."""

    _schedulers: list

    def state_dict(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        members = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, saved in zip(self._schedulers, members):
            s.load_state_dict(saved)


class SequentialLR(_Composite):
    """``schedulers[i]`` sets the learning rate from ``milestones[i - 1]`` on (a warm-up,
    then a decay, ...)."""

    def __init__(self, optimizer: Optimizer, schedulers: list, milestones: list[int],
                 last_epoch: int = -1) -> None:
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got "
                             f"no scheduler.")
        _check_members(type(self).__name__, schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                f"than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self._undo_initial_steps(self)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def _undo_initial_steps(self, sched) -> None:
        """Take back the step each member (and their members) took when made."""
        if hasattr(sched, "_schedulers"):
            for s in sched._schedulers:
                self._undo_initial_steps(s)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    def step(self) -> None:
        """Advance one epoch: the scheduler of this epoch's span steps (from its start at a
        milestone)."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()


class ChainedScheduler(_Composite):
    """Every scheduler steps each time, in order (their effects multiply)."""

    def __init__(self, schedulers: list, optimizer: Optimizer | None = None) -> None:
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler to be "
                             f"chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_members(type(self).__name__, schedulers, optimizer)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in schedulers[-1].optimizer.param_groups]

    def step(self) -> None:
        """Step every scheduler."""
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]


class ReduceLROnPlateau(LRScheduler):
    """Multiply the learning rate by ``factor`` when the metric passed to :meth:`step` has
    not improved (by ``threshold``, "rel" or "abs") for ``patience`` epochs; then wait
    ``cooldown`` epochs; never below ``min_lr``."""

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr=0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"expected {n} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * n
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        """Whether the scheduler is waiting out its cooldown."""
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        """Whether metric ``a`` improves on ``best`` by the threshold."""
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if rel else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if rel else a > best + self.threshold

    def step(self, metrics, epoch: int | None = None) -> None:
        """Record this epoch's ``metrics`` value; lower the learning rate on a plateau."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                    "usually due to a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the `optimizer` param "
                    "groups.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, low in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, low)
            if old - new > self.eps:
                group["lr"] = new
