"""Datasets and batching, as ``torch.utils.data``: ``Dataset``, ``TensorDataset``,
``DataLoader`` (``batch_size``, seeded ``shuffle``, ``drop_last``, ``sampler``,
``batch_sampler``, ``default_collate``), samplers (``DistributedSampler``: one rank's shard).

>>> import jitgrad
>>> from jitgrad.utils.data import DataLoader, TensorDataset
>>> ds = TensorDataset(jitgrad.arange(10.0).reshape(5, 2), jitgrad.arange(5))
>>> [y.tolist() for _, y in DataLoader(ds, batch_size=2)]
[[0, 1], [2, 3], [4]]
"""

from .dataloader import DataLoader, default_collate
from .dataset import Dataset, Subset, TensorDataset, random_split
from .sampler import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

__all__ = ["Dataset", "TensorDataset", "Subset", "random_split", "DataLoader",
           "default_collate", "Sampler", "SequentialSampler", "RandomSampler", "BatchSampler",
           "DistributedSampler"]
