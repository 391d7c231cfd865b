"""Stochastic weight averaging and exponential moving averages of a model, as PyTorch's
``torch.optim.swa_utils``: :class:`AveragedModel` (a copy of the model whose parameters --
and, with ``use_buffers``, buffers -- are a running average), the averaging functions
(``get_swa_avg_fn`` / ``get_ema_avg_fn`` for one tensor, ``get_swa_multi_avg_fn`` /
``get_ema_multi_avg_fn`` for lists updated in place), :func:`update_bn` (recompute the
BatchNorm statistics of the averaged weights with one pass over the data) and the
:class:`SWALR` schedule (anneal to a constant SWA learning rate).

>>> import jitgrad
>>> model = jitgrad.nn.Linear(2, 1)
>>> swa = jitgrad.optim.swa_utils.AveragedModel(model)
>>> for v in (1.0, 3.0):
...     _ = jitgrad.nn.init.constant_(model.weight, v)
...     swa.update_parameters(model)
>>> swa.module.weight, swa.n_averaged
(Parameter containing:
tensor([[2., 2.]], requires_grad=True), tensor(2))
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any, Literal

from ..autograd.grad_mode import no_grad
from ..creation import tensor
from ..devices import device as Device
from ..dtypes import int64
from ..nn.module import Module
from ..nn.normalization import _BatchNorm
from ..tensor import Tensor
from .cyclic_schedules import _per_group_values
from .lr_scheduler import LRScheduler
from .optimizer import Optimizer

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]

PARAM_LIST = tuple[Tensor, ...] | list[Tensor]
#: device types whose tensors PyTorch averages with its foreach kernels (``lerp``)
_FOREACH_DEVICES = ("cuda",)


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[[PARAM_LIST, PARAM_LIST, Any],
                                                               None]:
    """The in-place exponential moving average of lists of tensors:
    ``ema = decay * ema + (1 - decay) * current`` (floating tensors: ``lerp_``, as
    PyTorch's ``_foreach_lerp_``), for :class:`AveragedModel`'s ``multi_avg_fn``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list: PARAM_LIST, current_param_list: PARAM_LIST, _) -> None:
        if ema_param_list[0].is_floating_point():
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.lerp_(p_model, 1 - decay)
        else:
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable[[PARAM_LIST, PARAM_LIST, Tensor | int], None]:
    """The in-place equal-weight running average of lists of tensors:
    ``avg += (current - avg) / (num_averaged + 1)`` (floating tensors: ``lerp_`` with that
    weight, as PyTorch's ``_foreach_lerp_``), for :class:`AveragedModel`'s
    ``multi_avg_fn``. Integer tensors (``use_buffers`` with BatchNorm's count) go through
    ``addcdiv_`` as PyTorch's, which refuses them: a ``RuntimeError`` in both, worded as
    jitgrad words it."""

    @no_grad()
    def swa_update(averaged_param_list: PARAM_LIST, current_param_list: PARAM_LIST,
                   num_averaged: Tensor | int) -> None:
        if averaged_param_list[0].is_floating_point():
            weight = 1 / (num_averaged + 1)
            for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                p_avg.lerp_(p_model, weight)
            return
        diffs = [c - a for a, c in zip(averaged_param_list, current_param_list, strict=True)]
        for p_avg, diff in zip(averaged_param_list, diffs):
            if isinstance(num_averaged, Tensor):
                p_avg.addcdiv_(diff, num_averaged + 1)
            else:
                p_avg.add_(diff, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[[Tensor, Tensor, Any], Tensor]:
    """The exponential moving average of one tensor:
    ``decay * ema + (1 - decay) * current``, for :class:`AveragedModel`'s ``avg_fn``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable[[Tensor, Tensor, Tensor | int], Tensor]:
    """The equal-weight running average of one tensor:
    ``avg + (current - avg) / (num_averaged + 1)``, for :class:`AveragedModel`'s
    ``avg_fn`` (and its default on the CPU)."""

    @no_grad()
    def swa_update(averaged_param: Tensor, current_param: Tensor,
                   num_averaged: Tensor | int) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _group_by_device_and_dtype(averaged: list[Tensor], current: list[Tensor]) -> dict:
    """``{(device, dtype): ([averaged], [current])}``, in order of first appearance."""
    groups: dict = {}
    for a, c in zip(averaged, current, strict=True):
        lists = groups.setdefault((a.device, a.dtype), ([], []))
        lists[0].append(a)
        lists[1].append(c)
    return groups


class AveragedModel(Module):
    """A copy of ``model`` (moved to ``device`` if given) whose parameters are a running
    average of ``model``'s, updated by :meth:`update_parameters`: the first call copies
    them, the next ones average with ``avg_fn(averaged, current, n_averaged)`` (one tensor,
    returns the new value) or ``multi_avg_fn(averaged_list, current_list, n_averaged)`` (in
    place), by default the equal-weight average (SWA). ``use_buffers=True`` averages the
    buffers too; otherwise they are copied from ``model``. ``n_averaged`` is a buffer (so in
    the ``state_dict``); the averaging functions are not saved. Calling it runs the averaged
    model.

    >>> import jitgrad
    >>> from jitgrad.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
    >>> model = jitgrad.nn.Linear(1, 1, bias=False)
    >>> ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.5))
    >>> for v in (4.0, 2.0, 0.0):
    ...     _ = jitgrad.nn.init.constant_(model.weight, v)
    ...     ema.update_parameters(model)
    >>> ema.module.weight.item()
    1.5
    """

    n_averaged: Tensor

    def __init__(self, model: Module, device: Device | str | int | None = None,
                 avg_fn: Callable[[Tensor, Tensor, Tensor | int], Tensor] | None = None,
                 multi_avg_fn: Callable[[PARAM_LIST, PARAM_LIST, Tensor | int], None]
                 | None = None,
                 use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        """The averaged model's forward."""
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s current parameters (and buffers, with ``use_buffers``) in."""
        self_param = itertools.chain(self.module.parameters(), self.module.buffers()) \
            if self.use_buffers else self.parameters()
        model_param = itertools.chain(model.parameters(), model.buffers()) \
            if self.use_buffers else model.parameters()
        self_param_detached: list[Tensor] = []
        model_param_detached: list[Tensor] = []
        copy_param = bool(self.n_averaged == 0)
        for p_averaged, p_model in zip(self_param, model_param):
            p_model_ = p_model.detach().to(p_averaged.device)
            self_param_detached.append(p_averaged.detach())
            model_param_detached.append(p_model_)
            if copy_param:
                p_averaged.detach().copy_(p_model_)

        if self.n_averaged > 0:
            if self.multi_avg_fn is not None or self.avg_fn is None:
                groups = _group_by_device_and_dtype(self_param_detached, model_param_detached)
                for (device, _), (self_params, model_params) in groups.items():
                    n_averaged = self.n_averaged.to(device)
                    if self.multi_avg_fn:
                        self.multi_avg_fn(self_params, model_params, n_averaged)
                    elif device.type in _FOREACH_DEVICES:
                        get_swa_multi_avg_fn()(self_params, model_params, n_averaged)
                    else:  # PyTorch's default on the CPU: one tensor at a time
                        avg_fn = get_swa_avg_fn()
                        for p_averaged, p_model in zip(self_params, model_params, strict=True):
                            p_averaged.copy_(avg_fn(p_averaged, p_model, n_averaged))
            else:
                for p_averaged, p_model in zip(self_param_detached, model_param_detached,
                                               strict=True):
                    n_averaged = self.n_averaged.to(p_averaged.device)
                    p_averaged.detach().copy_(
                        self.avg_fn(p_averaged.detach(), p_model, n_averaged))

        if not self.use_buffers:
            for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged += 1


@no_grad()
def update_bn(loader: Iterable[Any], model: Module, device: Device | str | int | None = None
              ) -> None:
    """Recompute the running statistics of ``model``'s BatchNorm layers with one pass over
    ``loader`` (each batch a tensor, or a list / tuple whose first element is the input),
    as cumulative averages (momentum ``None`` during the pass); the layers' momenta and the
    model's train/eval mode are restored. A model without BatchNorm is left alone.

    >>> import jitgrad
    >>> model = jitgrad.nn.BatchNorm1d(1)
    >>> batches = [jitgrad.tensor([[0.0], [2.0]]), jitgrad.tensor([[4.0], [6.0]])]
    >>> jitgrad.optim.swa_utils.update_bn(batches, model)
    >>> model.running_mean, model.momentum
    (tensor([3.]), 0.1)
    """
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):  # BatchNorm1d/2d/3d, SyncBatchNorm, the lazy ones
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for input in loader:
        if isinstance(input, (list, tuple)):
            input = input[0]
        if device is not None:
            input = input.to(device)
        model(input)
    for bn_module, momentum in momenta.items():
        bn_module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate to ``swa_lr`` (one value, or one per group) over
    ``anneal_epochs`` steps, by cosine (``"cos"``) or linear (``"linear"``) interpolation,
    then hold it there: PyTorch's recursive formula, so its values match step for step.

    >>> import jitgrad
    >>> opt = jitgrad.optim.SGD([jitgrad.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = jitgrad.optim.swa_utils.SWALR(opt, swa_lr=0.5, anneal_epochs=2,
    ...                                       anneal_strategy="linear")
    >>> lrs = []
    >>> for _ in range(3):
    ...     opt.step(); sched.step(); lrs.append(round(sched.get_last_lr()[0], 6))
    >>> lrs
    [0.75, 0.5, 0.5]
    """

    def __init__(self, optimizer: Optimizer, swa_lr: float | list[float],
                 anneal_epochs: int = 10, anneal_strategy: Literal["cos", "linear"] = "cos",
                 last_epoch: int = -1) -> None:
        swa_lrs = _per_group_values(optimizer, "swa_lr", swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups, strict=True):
            group["swa_lr"] = lr
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list[float]:
        # the rate before this step's interpolation, recovered from the current one
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha)
                for group, lr in zip(self.optimizer.param_groups, prev_lrs, strict=True)]

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" \
            else self._linear_anneal

    def state_dict(self) -> dict:
        """Everything but the optimizer and the annealing function (its name is saved)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
