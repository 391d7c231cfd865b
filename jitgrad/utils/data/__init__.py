"""Datasets and batching, as ``torch.utils.data``: ``Dataset``, ``TensorDataset``,
``DataLoader`` (``batch_size``, seeded ``shuffle``, ``drop_last``, ``sampler``,
``batch_sampler``, ``default_collate``), samplers (``DistributedSampler``: one rank's shard),
``IterableDataset`` / ``ChainDataset`` / ``ConcatDataset`` / ``StackDataset``,
``SubsetRandomSampler`` / ``WeightedRandomSampler``, ``get_worker_info``, ``default_convert``.

>>> import jitgrad
>>> from jitgrad.utils.data import DataLoader, TensorDataset
>>> ds = TensorDataset(jitgrad.arange(10.0).reshape(5, 2), jitgrad.arange(5))
>>> [y.tolist() for _, y in DataLoader(ds, batch_size=2)]
[[0, 1], [2, 3], [4]]
"""

from .composite import ChainDataset, ConcatDataset, IterableDataset, StackDataset
from .dataloader import DataLoader, default_collate
from .dataset import Dataset, Subset, TensorDataset, random_split
from .more_samplers import SubsetRandomSampler, WeightedRandomSampler
from .sampler import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
)
from .worker import default_convert, get_worker_info

__all__ = ["Dataset", "TensorDataset", "Subset", "random_split", "DataLoader",
           "default_collate", "Sampler", "SequentialSampler", "RandomSampler", "BatchSampler",
           "DistributedSampler", "IterableDataset", "ChainDataset", "ConcatDataset",
           "StackDataset", "SubsetRandomSampler", "WeightedRandomSampler", "get_worker_info",
           "default_convert"]
