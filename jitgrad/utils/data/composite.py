"""Datasets made of other datasets, as ``torch.utils.data``: ``IterableDataset`` (a stream
of samples) and ``ChainDataset`` (streams one after another), ``ConcatDataset`` (map-style
datasets end to end) and ``StackDataset`` (datasets side by side: tuples or dicts of their
samples)."""

from __future__ import annotations

import bisect
import warnings
from collections.abc import Iterable, Iterator

from .dataset import Dataset

__all__ = ["IterableDataset", "ChainDataset", "ConcatDataset", "StackDataset"]


class IterableDataset(Dataset):
    """A dataset that is a stream of samples: subclasses define ``__iter__`` (a
    ``DataLoader`` over it batches what the stream yields; no sampler or shuffle).
    ``a + b`` chains two of them."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """The samples of several ``IterableDataset`` s, one after the other."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        super().__init__()
        self.datasets = datasets

    def __iter__(self) -> Iterator:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class ConcatDataset(Dataset):
    """Map-style datasets end to end: index ``i`` reads the dataset holding it
    (``cumulative_sizes`` are the running totals of their lengths).

    >>> ds = ConcatDataset([[1, 2], [3, 4, 5]])
    >>> len(ds), ds[2], ds[-1]
    (5, 3, 5)
    """

    datasets: list
    cumulative_sizes: list

    @staticmethod
    def cumsum(sequence) -> list[int]:
        """The running totals of the lengths of ``sequence``'s elements."""
        r, s = [], 0
        for e in sequence:
            s += len(e)
            r.append(s)
        return r

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        super().__init__()
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]

    @property
    def cummulative_sizes(self) -> list[int]:
        """The old (misspelt) name of ``cumulative_sizes`` (a FutureWarning)."""
        warnings.warn("`cummulative_sizes` attribute is renamed to `cumulative_sizes`",
                      FutureWarning, stacklevel=2)
        return self.cumulative_sizes


class StackDataset(Dataset):
    """Datasets of one length side by side: sample ``i`` is the tuple of their samples
    ``i`` (datasets given positionally) or the dict of them (given by keyword).

    >>> StackDataset(image=[10, 11], label=[0, 1])[1]
    {'image': 11, 'label': 1}
    """

    datasets: tuple | dict

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args:
            if kwargs:
                raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                                 "``kwargs``) like input/output, but both types are given.")
            parts = list(args)
            self.datasets = args
        elif kwargs:
            parts = list(kwargs.values())
            self.datasets = kwargs
        else:
            raise ValueError("At least one dataset should be passed")
        self._length = len(parts[0])
        if any(self._length != len(d) for d in parts):
            raise ValueError("Size mismatch between datasets")

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        """The samples at ``indices`` (each dataset's ``__getitems__`` used when it has
        one)."""
        def column(d) -> list:
            get = getattr(d, "__getitems__", None)
            if not callable(get):
                return [d[i] for i in indices]
            items = get(indices)
            if len(items) != len(indices):
                raise ValueError(f"Nested dataset's output size mismatch. Expected "
                                 f"{len(indices)}, got {len(items)}")
            return list(items)

        if isinstance(self.datasets, dict):
            cols = {k: column(d) for k, d in self.datasets.items()}
            return [{k: c[j] for k, c in cols.items()} for j in range(len(indices))]
        cols = [column(d) for d in self.datasets]
        return [tuple(c[j] for c in cols) for j in range(len(indices))]

    def __len__(self) -> int:
        return self._length
