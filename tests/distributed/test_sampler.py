"""Samplers and DataLoader(sampler=...): DistributedSampler's index semantics (PyTorch's
padding, drop_last, rank striding, seed + epoch shuffles), the DataLoader's sampler rules."""

from __future__ import annotations

import math

import pytest

import jitgrad
from jitgrad.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
)


def torch_reference(n, replicas, rank, drop_last, order):
    """PyTorch's DistributedSampler.__iter__ on a given epoch order (torch/utils/data/
    distributed.py), to check the padding and striding."""
    if drop_last and n % replicas:
        num_samples = math.ceil((n - replicas) / replicas)
    else:
        num_samples = math.ceil(n / replicas)
    total = num_samples * replicas
    indices = list(order)
    if not drop_last:
        pad = total - len(indices)
        if pad <= len(indices):
            indices += indices[:pad]
        else:
            indices += (indices * math.ceil(pad / len(indices)))[:pad]
    else:
        indices = indices[:total]
    return indices[rank:total:replicas]


@pytest.mark.parametrize("n", [1, 2, 5, 10, 11])
@pytest.mark.parametrize("replicas", [1, 2, 3, 7])
@pytest.mark.parametrize("drop_last", [False, True])
def test_unshuffled_matches_pytorch(n, replicas, drop_last):
    shards = []
    for rank in range(replicas):
        s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False,
                               drop_last=drop_last)
        got = list(s)
        assert got == torch_reference(n, replicas, rank, drop_last, range(n))
        assert len(got) == len(s)
        shards += got
    if drop_last:
        assert len(set(shards)) == len(shards) == n - n % replicas
    else:
        assert set(shards) == set(range(n)) and len(shards) == replicas * math.ceil(n / replicas)


def test_examples():
    assert list(DistributedSampler(range(5), 2, 1, shuffle=False)) == [1, 3, 0]
    assert list(DistributedSampler(range(5), 2, 1, shuffle=False, drop_last=True)) == [1, 3]
    assert list(DistributedSampler(range(2), 5, 4, shuffle=False)) == [0]


def test_shuffle_seed_and_epoch():
    n, replicas = 23, 3
    samplers = [DistributedSampler(range(n), replicas, r, seed=7) for r in range(replicas)]

    def epoch_order():
        return [list(s) for s in samplers]

    first = epoch_order()
    assert epoch_order() == first  # the same epoch draws the same permutation
    union = sorted(i for shard in first for i in shard)
    assert set(union) == set(range(n)) and len(union) == 24  # one index repeated as padding
    perm = [first[k % replicas][k // replicas] for k in range(n)]
    for r in range(replicas):
        assert first[r] == torch_reference(n, replicas, r, False, perm)
    for s in samplers:
        s.set_epoch(1)
    second = epoch_order()
    assert second != first
    assert set(i for shard in second for i in shard) == set(range(n))
    other_seed = DistributedSampler(range(n), replicas, 0, seed=8)
    assert list(other_seed) != first[0]


def test_rank_checks_and_defaults():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval "
                                         r"\[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DistributedSampler(range(4))
    pytest.importorskip("mpi4py")
    jitgrad.distributed.init_process_group("mpi")
    try:
        s = DistributedSampler(range(4), shuffle=False)
        assert (s.num_replicas, s.rank, list(s)) == (1, 0, [0, 1, 2, 3])
    finally:
        jitgrad.distributed.destroy_process_group()


def test_dataloader_with_sampler():
    ds = TensorDataset(jitgrad.arange(10.0), jitgrad.arange(10))
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False)
    loader = DataLoader(ds, batch_size=2, sampler=sampler)
    assert [y.tolist() for _, y in loader] == [[1, 3], [5, 7], [9]]
    assert len(loader) == 3 and loader.sampler is sampler
    dropped = DataLoader(ds, batch_size=2, sampler=sampler, drop_last=True)
    assert [y.tolist() for _, y in dropped] == [[1, 3], [5, 7]] and len(dropped) == 2
    pairs = DataLoader(list(zip(range(4), "abcd")), batch_size=None,
                       sampler=SequentialSampler(range(3)))
    # batch_size=None: each sample through default_convert, which makes tuples lists (as
    # PyTorch's loader gives them)
    assert list(pairs) == [[0, "a"], [1, "b"], [2, "c"]] and len(pairs) == 3
    shuffled = DistributedSampler(ds, num_replicas=2, rank=0, seed=3)
    epoch0 = [y.tolist() for _, y in DataLoader(ds, batch_size=5, sampler=shuffled)]
    assert epoch0 == [list(shuffled)]


def test_dataloader_batch_sampler():
    ds = TensorDataset(jitgrad.arange(5.0))
    bs = BatchSampler(SequentialSampler(ds), batch_size=2, drop_last=False)
    loader = DataLoader(ds, batch_sampler=bs)
    assert [x.tolist() for (x,) in loader] == [[0.0, 1.0], [2.0, 3.0], [4.0]]
    assert len(loader) == 3
    assert list(BatchSampler(range(5), 2, drop_last=True)) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        BatchSampler(range(5), 0, False)


def test_dataloader_sampler_rules():
    ds = TensorDataset(jitgrad.arange(4.0))
    s = SequentialSampler(ds)
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        DataLoader(ds, sampler=s, shuffle=True)
    bs = BatchSampler(s, 2, False)
    for kwargs in ({"batch_size": 2}, {"shuffle": True}, {"sampler": s}, {"drop_last": True}):
        with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive with "
                                             "batch_size, shuffle, sampler, and drop_last"):
            DataLoader(ds, batch_sampler=bs, **kwargs)
    with pytest.raises(ValueError, match="batch_size=None option disables auto-batching"):
        DataLoader(ds, batch_size=None, drop_last=True)


def test_random_sampler():
    g = jitgrad.Generator().manual_seed(0)
    order = list(RandomSampler(range(6), generator=g))
    assert sorted(order) == list(range(6))
    longer = list(RandomSampler(range(4), num_samples=10, generator=g))
    assert len(longer) == 10 and sorted(longer[:8]) == sorted(list(range(4)) * 2)
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=20, generator=g))
    assert len(drawn) == 20 and set(drawn) <= {0, 1, 2}
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        RandomSampler(range(3), replacement=1)
