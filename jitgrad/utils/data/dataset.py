"""Map-style datasets: ``Dataset``, ``TensorDataset``, ``Subset``, ``random_split``."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ...random import Generator, rng
from ...tensor import Tensor

__all__ = ["Dataset", "TensorDataset", "Subset", "random_split"]


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` (and ``__len__``)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset) -> Dataset:
        """``ConcatDataset([self, other])``."""
        from .composite import ConcatDataset

        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the ``index``-th rows of tensors (or NumPy arrays) of equal length.

    >>> import jitgrad
    >>> ds = TensorDataset(jitgrad.zeros(3, 2), jitgrad.tensor([1, 2, 3]))
    >>> len(ds), ds[1][1]
    (3, tensor(2))
    """

    def __init__(self, *tensors) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = len(tensors[0])
        if any(len(t) != n for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tuple(tensors)

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return len(self.tensors[0])

    def batch(self, indices: np.ndarray) -> tuple | None:
        """Rows ``indices`` of every tensor at once: what collating the samples one by one
        gives (tensors, NumPy arrays made tensors), without the per-sample indexing and
        stacking. ``None`` where that would differ: a subclass with its own
        ``__getitem__``, a tensor that requires grad (stacking records a graph), an entry
        that is neither a tensor nor an array."""
        from ...tensor import wrap

        if type(self).__getitem__ is not TensorDataset.__getitem__:
            return None
        rows = []
        for t in self.tensors:
            if isinstance(t, Tensor) and not t.requires_grad and t.dim() > 0:
                rows.append(wrap(t._data[indices]))
            elif isinstance(t, np.ndarray) and t.ndim > 0:
                rows.append(wrap(t[indices]))
            else:
                return None
        return tuple(rows)


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset: Dataset, indices) -> None:
        self.dataset = dataset
        self.indices = indices  # as given (a list, a range, a tensor...), as PyTorch keeps it

    def _at(self, i) -> int:
        return int(self.indices[i])

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self._at(i) for i in idx]]
        return self.dataset[self._at(idx)]

    def __getitems__(self, indices: list) -> list:
        """The samples at ``indices`` (the dataset's own ``__getitems__`` when it has one)."""
        get = getattr(self.dataset, "__getitems__", None)
        if callable(get):
            return get([self._at(i) for i in indices])
        return [self.dataset[self._at(i)] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: Dataset, lengths, generator: Generator | None = None) -> list:
    """Split into non-overlapping random subsets of the given lengths (or fractions)."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, f in enumerate(lengths):
            if f < 0 or f > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        sizes = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
        for i, k in enumerate(lengths):
            if k == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.", stacklevel=2)
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = rng(generator).permutation(n).tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out
