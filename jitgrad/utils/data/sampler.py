"""Samplers, as ``torch.utils.data``: the order in which a ``DataLoader`` visits a dataset's
indices (``Sampler``, ``SequentialSampler``, ``RandomSampler``, ``BatchSampler``) and the
shard of one rank in data-parallel training (``DistributedSampler``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sized

from ...random import Generator, rng

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "BatchSampler",
           "DistributedSampler", "check_positive_int"]


def check_positive_int(name: str, value: object) -> None:
    """PyTorch's ValueError for a count (``batch_size``, ``num_samples``) that is not a
    positive int."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got "
                         f"{name}={value}")


class Sampler:
    """Base class of samplers: an iterable of dataset indices (subclasses define
    ``__iter__`` and, usually, ``__len__``)."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random order of the indices drawn from ``generator`` (the default generator when
    None): a permutation, or ``num_samples`` draws with replacement."""

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: Generator | None = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        check_positive_int("num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        """How many indices an epoch yields (the dataset's length by default)."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n, g = len(self.data_source), rng(self.generator)
        if self.replacement:
            return iter(g.integers(0, n, size=self.num_samples).tolist())
        whole, rest = divmod(self.num_samples, n)
        order = [i for _ in range(whole) for i in g.permutation(n).tolist()]
        return iter(order + g.permutation(n).tolist()[:rest])

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler`` (the last one shorter unless
    ``drop_last``)."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        check_positive_int("batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class DistributedSampler(Sampler):
    """The indices of rank ``rank`` out of ``num_replicas`` (by default the default process
    group's rank and world size), as PyTorch's ``DistributedSampler``.

    Each epoch orders the indices (a permutation drawn from a generator seeded
    ``seed + epoch`` when ``shuffle``, so every rank draws the same one; call
    :meth:`set_epoch` before each epoch to reshuffle), makes their number a multiple of
    ``num_replicas`` (repeating indices from the start, or dropping the tail when
    ``drop_last``), and gives rank ``r`` every ``num_replicas``-th index from ``r``.

    >>> list(DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False))
    [1, 3, 0]
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None,
                 rank: int | None = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            from ... import distributed

            if num_replicas is None:
                num_replicas = distributed.get_world_size()
            if rank is None:
                rank = distributed.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            g = Generator().manual_seed(self.seed + self.epoch)
            indices = rng(g).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch, which seeds this epoch's shuffle (``seed + epoch``)."""
        self.epoch = epoch
