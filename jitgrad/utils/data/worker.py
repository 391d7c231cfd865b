"""``get_worker_info``, ``WorkerInfo`` and ``default_convert``, as ``torch.utils.data``.

A ``DataLoader`` with ``num_workers > 0`` loads its batches in worker processes
(:mod:`._worker_loop`); in each of them :func:`get_worker_info` returns a
:class:`WorkerInfo` (the worker's id, the number of workers, its seed and its copy of the
dataset), which an ``IterableDataset`` reads to yield only its share of the stream. In the
main process it returns None."""

from __future__ import annotations

import collections.abc
import copy
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...tensor import Tensor

__all__ = ["get_worker_info", "WorkerInfo", "default_convert"]

_STR_OR_OBJECT = re.compile(r"[SaUO]")


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """Information about the ``DataLoader`` worker process this runs in (read-only, as
    PyTorch's: assigning a field raises ``dataclasses.FrozenInstanceError``).

    Attributes:
        id: the worker's id, ``0`` to ``num_workers - 1``.
        num_workers: how many workers the loader's iterator runs.
        seed: the seed the worker's random generators were seeded with (``base_seed + id``:
            jitgrad's default generator and Python's ``random``).
        dataset: the worker's copy of the dataset (another object than the main
            process's).
        rng: PyTorch's per-thread generator container (thread workers); always None here.
        worker_method: ``"multiprocessing"``.
    """

    id: int
    num_workers: int
    seed: int
    dataset: Any
    rng: Any = None
    worker_method: str | None = "multiprocessing"


#: set in a worker process (by ``_worker_loop.worker_loop``) before the dataset is used
_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Information about the ``DataLoader`` worker process this runs in: a
    :class:`WorkerInfo` (``id``, ``num_workers``, ``seed``, ``dataset``) in a worker, None in
    the main process.

    Useful in an ``IterableDataset``'s ``__iter__`` to yield only this worker's share of the
    stream (each worker iterates its own copy of the dataset), or in a ``worker_init_fn`` to
    configure the worker's copy of the dataset or to seed other libraries from ``seed``.

    >>> get_worker_info() is None  # the main process
    True
    """
    return _worker_info


def default_convert(data: Any) -> Any:
    """NumPy arrays and scalars in ``data`` converted to tensors (arrays of strings or
    objects, and everything else, left as they are); mappings, named tuples and sequences
    converted element by element (a plain tuple becomes a list, as in PyTorch). What a
    ``DataLoader`` with ``batch_size=None`` applies to each sample.

    >>> import numpy as np
    >>> default_convert({"x": np.arange(2), "name": "a"})
    {'x': tensor([0, 1]), 'name': 'a'}
    """
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_,
                                                                           np.bytes_)):
        if isinstance(data, np.ndarray) and _STR_OR_OBJECT.search(data.dtype.str):
            return data
        from ...creation import as_tensor

        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({k: default_convert(data[k]) for k in data})
                return clone
            return type(data)({k: default_convert(data[k]) for k in data})
        except TypeError:
            return {k: default_convert(data[k]) for k in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
