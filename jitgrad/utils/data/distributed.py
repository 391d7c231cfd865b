"""``torch.utils.data.distributed``: where PyTorch scripts import ``DistributedSampler`` from
(the sampler itself is :class:`jitgrad.utils.data.sampler.DistributedSampler`)."""

from __future__ import annotations

from .sampler import DistributedSampler

__all__ = ["DistributedSampler"]
