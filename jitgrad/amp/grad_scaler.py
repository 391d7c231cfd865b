"""``GradScaler``: loss scaling for float16 training (PyTorch's ``torch.amp.GradScaler``).

Small float16 gradients underflow to zero; scaling the loss by ``S`` before ``backward``
scales every gradient by ``S`` and keeps them representable. ``step`` divides the optimizer's
gradients by ``S`` (``unscale_``), skips the optimizer step when any of them is inf or NaN,
and ``update`` adjusts ``S``: times ``backoff_factor`` after a skipped step, times
``growth_factor`` after ``growth_interval`` steps in a row without one. PyTorch's state
machine and messages; the scale is a float32 0-dim tensor on the loss's device, the growth
tracker an int32 one, and the arithmetic is PyTorch's (``inv_scale`` is the float64
reciprocal of the scale rounded to float32, gradients multiplied by it in their dtype, a
grown scale kept only where it is finite), so a run's scales match PyTorch's step for step.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable
from enum import Enum
from typing import Any

import numpy as np

from .. import dtypes
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    """Where an optimizer is in the scaler's iteration."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict[str, Any]:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Scales losses and unscales gradients for float16 training (see the module doc).

    >>> import jitgrad
    >>> scaler = jitgrad.amp.GradScaler("cpu", init_scale=1024.0)
    >>> w = jitgrad.ones(2, requires_grad=True)
    >>> opt = jitgrad.optim.SGD([w], lr=0.1)
    >>> scaler.scale((w * 3).sum()).backward()
    >>> w.grad
    tensor([3072., 3072.])
    >>> scaler.step(opt); scaler.update()
    >>> w, scaler.get_scale()
    (tensor([0.7000, 0.7000], requires_grad=True), 1024.0)
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            from .. import cuda

            if not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not "
                              "available.  Disabling.", stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale: Tensor | None = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: Tensor | None = None
            self._per_optimizer_states: dict = defaultdict(_fresh_state)

    # ------------------------------------------------------------------------ scaling
    def _check_scale_growth_tracker(self, funcname: str) -> tuple[Tensor, Tensor]:
        fix = ("This may indicate your script did not use scaler.scale(loss or outputs) "
               "earlier in the iteration.")
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init(self, device) -> None:
        from ..creation import full

        self._scale = full((), self._init_scale, dtype=dtypes.float32, device=device)
        self._growth_tracker = full((), self._init_growth_tracker, dtype=dtypes.int32,
                                    device=device)

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists/tuples/iterables of them) times the scale;
        unchanged when the scaler is disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init(outputs.device)
            return outputs * self._scale.to(outputs.device)

        def apply(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init(val.device)
                return val * self._scale.to(val.device)
            if isinstance(val, Iterable):
                it = map(apply, val)
                return type(val)(it) if isinstance(val, (list, tuple)) else it
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply(outputs)

    def _unscale_grads_(self, optimizer, inv_scale: Tensor, allow_fp16: bool) -> dict:
        """Multiply the optimizer's gradients by ``inv_scale``; per device, a float32 0-dim
        tensor that is 1 where a gradient held an inf or NaN (checked before any change)."""
        grads = []
        for group in optimizer.param_groups:
            for param in group["params"]:
                if not isinstance(param, Tensor):
                    raise AssertionError(
                        f"expected param to be torch.Tensor, got {type(param).__name__}")
                g = param.grad
                if g is None:
                    continue
                if not allow_fp16 and g.dtype == dtypes.float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                grads.append(g)
        found: dict = {}
        with no_grad():
            for g in grads:  # every check before any change, as PyTorch's kernel reads
                bad = (~g.isfinite()).any()
                dev = g.device
                found[dev] = bad if dev not in found else (found[dev] | bad)
            on_device: dict = {}
            for g in grads:
                dev = g.device
                if dev not in on_device:
                    on_device[dev] = inv_scale.to(dev)
                g.mul_(on_device[dev])
        return {dev: f.to(dtypes.float32) for dev, f in found.items()}

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale (optional before :meth:`step`: to
        clip or inspect the true gradients); once per optimizer per :meth:`update`."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # the float64 reciprocal rounded to float32, on the scale's device (no sync)
        inv_scale = self._scale.to(dtypes.float64).reciprocal().to(dtypes.float32)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args: Any, **kwargs: Any):
        """Unscale the gradients (unless :meth:`unscale_` did) and run ``optimizer.step``
        unless one of them is inf/NaN; returns what ``optimizer.step`` returned (None when
        skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(float(v.item()) for v in state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adjust the scale after the iteration's steps (or set it to ``new_scale``)."""
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor "
                          "or torch.FloatTensor with requires_grad=False.")
                if not isinstance(new_scale, Tensor) or new_scale.dtype != dtypes.float32:
                    raise AssertionError(reason)
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                scale.fill_(float(new_scale.item()))
        else:
            found_infs = [f for st in self._per_optimizer_states.values()
                          for f in st["found_inf_per_device"].values()]
            if len(found_infs) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            found = any(float(f.item()) for f in found_infs)
            cur = np.float32(scale.item())
            with np.errstate(over="ignore"):  # a grown scale past float32's range: kept old
                self._update_scale(scale, tracker, cur, found)
        self._per_optimizer_states = defaultdict(_fresh_state)

    def _update_scale(self, scale: Tensor, tracker: Tensor, cur: np.float32, found: bool
                      ) -> None:
        """PyTorch's ``_amp_update_scale_``: back off after an inf/NaN, else count the step
        and grow the scale every ``growth_interval`` steps (where the result is finite)."""
        if found:
            scale.fill_(float(np.float32(np.float64(cur) * self._backoff_factor)))
            tracker.fill_(0)
            return
        successful = int(tracker.item()) + 1
        if successful == self._growth_interval:
            grown = np.float32(np.float64(cur) * self._growth_factor)
            if np.isfinite(grown):
                scale.fill_(float(grown))
            tracker.fill_(0)
        else:
            tracker.fill_(successful)

    # ------------------------------------------------------------------------ settings
    def get_scale(self) -> float:
        """The current scale as a Python float (1.0 when disabled)."""
        if self._enabled:
            return self._init_scale if self._scale is None else float(self._scale.item())
        return 1.0

    def get_growth_factor(self) -> float:
        """The factor the scale grows by."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the factor the scale grows by."""
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        """The factor the scale shrinks by after a skipped step."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the factor the scale shrinks by after a skipped step."""
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        """Steps without inf/NaN before the scale grows."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Set the steps without inf/NaN before the scale grows."""
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if self._enabled:
            return (self._init_growth_tracker if self._growth_tracker is None
                    else int(self._growth_tracker.item()))
        return 0

    def is_enabled(self) -> bool:
        """Whether this scaler scales (False: every method passes through)."""
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``_growth_tracker`` (empty when disabled), as PyTorch's."""
        if self._enabled:
            return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                    "backoff_factor": self._backoff_factor,
                    "growth_interval": self._growth_interval,
                    "_growth_tracker": self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (a no-op when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning "
                                     "of an iteration, or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
