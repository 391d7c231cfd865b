"""Data parallelism, as ``torch.nn.parallel``: :class:`DistributedDataParallel`."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
