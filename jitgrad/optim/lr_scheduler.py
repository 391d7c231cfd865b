"""Learning-rate schedules as PyTorch's (same recursive formulas, so the values match):
the ``LRScheduler`` base, ``StepLR`` and ``CosineAnnealingLR``; the others live in
``lr_schedules`` (formulas of the epoch), ``cyclic_schedules`` (``CyclicLR``,
``OneCycleLR``) and ``composite_schedules`` (``SequentialLR``, ``ChainedScheduler``,
``ReduceLROnPlateau``), and are names of this module too (``torch.optim.lr_scheduler``)."""

from __future__ import annotations

import math
import warnings
import weakref
from functools import wraps

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR", "EPOCH_DEPRECATION_WARNING"]

#: PyTorch's warning for ``scheduler.step(epoch)``
EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler. During the "
    "deprecation, if epoch is different from None, the closed form is used instead of the new "
    "chainable form, where available. Please open an issue if you are unable to replicate "
    "your use case: https://github.com/pytorch/pytorch/issues/new/choose.")


class LRScheduler:
    """Base class: sets each group's ``lr`` from :meth:`get_lr` on every :meth:`step`."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0.\nThis typically happens "
                        "when:\n1. You're trying to resume training from a checkpoint but "
                        "haven't properly loaded the optimizer state\n2. You're using "
                        "last_epoch >= 0 for a fresh training run (not recommended)")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._wrap_optimizer_step()
        self._initial_step()

    def _initial_step(self) -> None:
        """The step a scheduler takes when made (its first learning rate)."""
        self._step_count = 0
        self._is_initial = True
        self._get_lr_called_within_step = False  # (PyTorch's flag: a state_dict key)
        try:
            self.step()
        finally:
            self._is_initial = False

    def _wrap_optimizer_step(self) -> None:
        """Mark the optimizer when it steps, to warn about a scheduler stepped first."""
        opt = self.optimizer
        if hasattr(opt.step, "_wrapped_by_lr_sched"):
            return
        func = opt.step.__func__
        opt_ref = weakref.ref(opt)

        @wraps(func)
        def wrapper(*args, **kwargs):
            o = opt_ref()
            o._opt_called = True
            return func.__get__(o, type(o))(*args, **kwargs)

        wrapper._wrapped_by_lr_sched = True
        opt.step = wrapper

    def state_dict(self) -> dict:
        """Everything but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the last :meth:`step`."""
        return self._last_lr

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (call after ``optimizer.step()``)."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch "
                "1.1.0 and later, you should call them in the opposite order: "
                "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this will "
                "result in PyTorch skipping the first value of the learning rate schedule.",
                UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        """Advance one epoch, or go to ``epoch`` by the closed form where there is one."""
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") \
                else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _lrs(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs.

    >>> import jitgrad
    >>> opt = jitgrad.optim.SGD([jitgrad.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = jitgrad.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> for _ in range(4):
    ...     opt.step(); sched.step()
    >>> sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the initial learning rate to ``eta_min`` over ``T_max`` epochs
    (PyTorch's recursive form)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._lrs()
        if self._step_count == 1 and e > 0:
            return [lo + (b - lo) * (1 + math.cos(e * math.pi / t)) / 2 for b in self.base_lrs]
        if (e - 1 - t) % (2 * t) == 0:
            return [lr + (b - lo) * (1 - math.cos(math.pi / t)) / 2
                    for b, lr in zip(self.base_lrs, self._lrs())]
        return [(1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
                * (lr - lo) + lo for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (b - self.eta_min) * (1 + math.cos(
            math.pi * self.last_epoch / self.T_max)) / 2 for b in self.base_lrs]


# the other schedules, under this module's name as in PyTorch (imported last: they subclass
# LRScheduler from here)
from .composite_schedules import ChainedScheduler, ReduceLROnPlateau, SequentialLR  # noqa: E402
from .cyclic_schedules import CyclicLR, OneCycleLR  # noqa: E402
from .lr_schedules import (  # noqa: E402
    ConstantLR,
    CosineAnnealingWarmRestarts,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiplicativeLR,
    MultiStepLR,
    PolynomialLR,
)

__all__ += ["LambdaLR", "MultiplicativeLR", "MultiStepLR", "ConstantLR", "LinearLR",
            "ExponentialLR", "PolynomialLR", "CosineAnnealingWarmRestarts", "CyclicLR",
            "OneCycleLR", "SequentialLR", "ChainedScheduler", "ReduceLROnPlateau"]
