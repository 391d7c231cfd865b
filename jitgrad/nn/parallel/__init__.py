"""Data parallelism, as ``torch.nn.parallel``: :class:`DistributedDataParallel` and (loaded
on first use) :class:`DataParallel` / ``data_parallel`` on one device."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel", "DataParallel", "data_parallel"]


def __getattr__(name: str):
    if name in ("DataParallel", "data_parallel"):
        from . import data_parallel as module

        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
