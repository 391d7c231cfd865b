"""``DataLoader``: batches of a map-style dataset, optionally shuffled by a seeded
generator, collated into tensors (or of an ``IterableDataset``'s stream)."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from ... import creation, dtypes
from ...ops.movement import stack
from ...random import Generator, rng
from ...tensor import Tensor, wrap
from .dataset import Dataset, TensorDataset
from .sampler import check_positive_int

__all__ = ["DataLoader", "default_collate", "pin_batch"]


def default_collate(batch: list):
    """Stack a list of samples: tensors and NumPy arrays into one tensor (a new leading
    dim), Python floats into float64, ints into int64, bools into bool; tuples, lists and
    dicts field by field.

    >>> import jitgrad
    >>> default_collate([(jitgrad.ones(2), 1), (jitgrad.zeros(2), 0)])
    [tensor([[1., 1.],
            [0., 0.]]), tensor([1, 0])]
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        return wrap(np.stack(batch))
    if isinstance(elem, np.generic):
        return wrap(np.asarray(batch))
    if isinstance(elem, bool):
        return creation.tensor(batch, dtype=dtypes.bool_)
    if isinstance(elem, numbers.Integral):
        return creation.tensor(batch, dtype=dtypes.int64)
    if isinstance(elem, numbers.Real):
        return creation.tensor(batch, dtype=dtypes.float64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(s) for s in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem)}")


def pin_batch(batch):
    """``batch`` with its CPU tensors in pinned memory (tuples, lists, dicts and namedtuples
    field by field; anything else as it is)."""
    if isinstance(batch, Tensor):
        return batch.pin_memory() if not batch.is_cuda else batch
    if isinstance(batch, Mapping):
        return {k: pin_batch(v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(pin_batch(v) for v in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(pin_batch(v) for v in batch)
    return batch


class DataLoader:
    """Iterate over ``dataset`` in batches.

    The indices come from ``sampler`` when given (e.g. a :class:`DistributedSampler`;
    exclusive with ``shuffle``), in batches of ``batch_size``, or in the lists of
    ``batch_sampler`` (exclusive with ``batch_size``, ``shuffle``, ``sampler`` and
    ``drop_last``). Otherwise ``shuffle`` draws a new permutation each epoch from
    ``generator`` (or the default generator), so a seeded generator gives the same batches
    run after run; ``drop_last`` drops a final short batch. A :class:`TensorDataset` with the
    default collation is batched by indexing its tensors directly (no per-sample stacking).
    ``pin_memory=True`` puts each batch's CPU tensors in pinned memory when CUDA is available
    (``Tensor.pin_memory``), and warns as PyTorch does when it is not.
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool = False,
                 sampler=None, batch_sampler=None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None,
                 generator: Generator | None = None, **kwargs) -> None:
        from .composite import IterableDataset

        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:  # a stream: no order to choose
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if num_workers:
            raise NotImplementedError("DataLoader: worker processes are not supported by "
                                      "jitgrad (use num_workers=0)")
        if batch_size is not None:
            check_positive_int("batch_size", batch_size)
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.generator = generator
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        # a TensorDataset with the default collation is batched by indexing its tensors
        # (decided before collate_fn is filled in with that default)
        self._fast = isinstance(dataset, TensorDataset) and collate_fn is None \
            and batch_size is not None
        if collate_fn is None:  # samples one by one (batch_size=None): converted only
            from .worker import default_convert

            collate_fn = default_collate if batch_size is not None or \
                batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory

    def _order(self) -> np.ndarray:
        if self.sampler is not None:
            return np.fromiter(iter(self.sampler), dtype=np.int64)
        n = len(self.dataset)
        return rng(self.generator).permutation(n) if self.shuffle else np.arange(n)

    def _batches(self) -> Iterator[np.ndarray]:
        if self.batch_sampler is not None:
            for batch in self.batch_sampler:
                yield np.asarray(batch, dtype=np.int64)
            return
        order = self._order()
        if self.batch_size is None:
            yield from order
            return
        n, bs = len(order), self.batch_size
        stop = n - n % bs if self.drop_last else n
        for start in range(0, stop, bs):
            yield order[start:start + bs]

    def __iter__(self) -> Iterator:
        batches = self._unpinned()
        if not self.pin_memory:
            return batches
        from ... import cuda

        if not cuda.is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=2)
            return batches
        return (pin_batch(b) for b in batches)

    def _unpinned(self) -> Iterator:
        if self._iterable:
            yield from self._stream()
            return
        if self.batch_size is None and self.batch_sampler is None:  # samples one by one
            for i in self._batches():
                yield self.collate_fn(self.dataset[int(i)])
            return
        getitems = getattr(self.dataset, "__getitems__", None)
        for idx in self._batches():
            rows = self.dataset.batch(idx) if self._fast else None
            if rows is not None:
                yield list(rows)
            elif callable(getitems):
                yield self.collate_fn(getitems([int(i) for i in idx]))
            else:
                yield self.collate_fn([self.dataset[int(i)] for i in idx])

    def _stream(self) -> Iterator:
        """An ``IterableDataset``: its samples in batches of ``batch_size`` (the last one
        dropped when short and ``drop_last``), or one by one."""
        it = iter(self.dataset)
        if self.batch_size is None:
            for sample in it:
                yield self.collate_fn(sample)
            return
        while True:
            batch = []
            for sample in it:
                batch.append(sample)
                if len(batch) == self.batch_size:
                    break
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:  # the dataset's own length (a TypeError when it has none)
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        n = len(self.dataset) if self.sampler is None else len(self.sampler)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
