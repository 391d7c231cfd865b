"""More samplers, as ``torch.utils.data``: ``SubsetRandomSampler`` (a random order of given
indices) and ``WeightedRandomSampler`` (indices drawn with given weights). Both draw from
``generator`` (the default generator when None)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ...random import Generator, rng
from .sampler import Sampler

__all__ = ["SubsetRandomSampler", "WeightedRandomSampler"]


class SubsetRandomSampler(Sampler):
    """The elements of ``indices`` in a random order (a new one each epoch).

    >>> import jitgrad
    >>> sorted(SubsetRandomSampler([3, 5, 7], generator=jitgrad.Generator().manual_seed(0)))
    [3, 5, 7]
    """

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in rng(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices of ``[0, len(weights))`` drawn with probabilities
    proportional to ``weights`` (with ``replacement``, or each index at most once, as
    ``multinomial``)."""

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Generator | None = None) -> None:
        from ... import creation, dtypes

        if (not isinstance(num_samples, int) or isinstance(num_samples, bool)
                or num_samples <= 0):
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        w = creation.as_tensor(np.asarray(weights.numpy() if hasattr(weights, "numpy")
                                          else weights, dtype=np.float64),
                               dtype=dtypes.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        from ...creation import multinomial

        yield from multinomial(self.weights, self.num_samples, self.replacement,
                               generator=self.generator).tolist()

    def __len__(self) -> int:
        return self.num_samples
