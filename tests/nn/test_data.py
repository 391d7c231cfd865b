"""utils.data: TensorDataset, DataLoader batching (sizes, drop_last, len), seeded shuffling
(deterministic, a permutation per epoch), default_collate of tensors, arrays, numbers, tuples
and dicts (PyTorch's dtypes)."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
from jitgrad.utils.data import DataLoader, Dataset, TensorDataset, default_collate, random_split

X = jitgrad.arange(20.0).reshape(10, 2)
Y = jitgrad.arange(10)


def _ys(loader):
    return [y.tolist() for _, y in loader]


def test_batches_in_order_and_drop_last():
    ds = TensorDataset(X, Y)
    assert _ys(DataLoader(ds, batch_size=4)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert _ys(DataLoader(ds, batch_size=4, drop_last=True)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(DataLoader(ds, batch_size=4)) == 3
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    x, y = next(iter(DataLoader(ds, batch_size=3)))
    assert x.shape == (3, 2) and x.dtype == jitgrad.float32 and y.dtype == jitgrad.int64


def test_seeded_shuffle_is_deterministic_and_a_permutation():
    ds = TensorDataset(X, Y)
    runs = []
    for _ in range(2):
        loader = DataLoader(ds, batch_size=3, shuffle=True,
                            generator=jitgrad.Generator().manual_seed(42))
        runs.append([_ys(loader), _ys(loader)])  # two epochs
    assert runs[0] == runs[1]
    epoch1, epoch2 = runs[0]
    assert sorted(sum(epoch1, [])) == list(range(10))
    assert epoch1 != epoch2  # a new permutation each epoch
    for xb, yb in DataLoader(ds, batch_size=4, shuffle=True):
        np.testing.assert_array_equal(xb.numpy()[:, 0], yb.numpy() * 2.0)  # rows stay paired


class Pairs(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"x": np.full(2, i, np.float32), "n": i, "f": i / 2, "t": jitgrad.tensor([i])}


def test_default_collate_matches_torch(torch):
    batch = [Pairs()[i] for i in range(3)]
    j = default_collate(batch)
    t = torch.utils.data.default_collate([{k: torch.tensor(v.numpy()) if k == "t" else v
                                           for k, v in s.items()} for s in batch])
    for k in ("x", "n", "f", "t"):
        assert str(j[k].dtype).split(".")[-1] == str(t[k].dtype).split(".")[-1], k
        np.testing.assert_array_equal(j[k].numpy(), t[k].numpy())
    out = default_collate([(jitgrad.ones(2), 1), (jitgrad.zeros(2), 0)])
    assert isinstance(out, list) and out[0].shape == (2, 2) and out[1].tolist() == [1, 0]


def test_map_style_dataset_and_no_batching():
    loader = DataLoader(Pairs(), batch_size=2)
    batches = list(loader)
    assert len(batches) == 3 and batches[-1]["n"].tolist() == [4]
    assert [s["n"] for s in DataLoader(Pairs(), batch_size=None)] == [0, 1, 2, 3, 4]


def test_random_split_and_errors():
    a, b = random_split(TensorDataset(X, Y), [7, 3], generator=jitgrad.Generator().manual_seed(0))
    assert len(a) == 7 and len(b) == 3
    assert sorted(a.indices + b.indices) == list(range(10))
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(X, jitgrad.arange(3))
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        DataLoader(TensorDataset(X), batch_size=0)


def _collated_one_by_one(ds, batch_size):
    """The batches a loader gives when it indexes ``ds`` sample by sample."""
    return [default_collate([ds[i] for i in range(s, min(s + batch_size, len(ds)))])
            for s in range(0, len(ds), batch_size)]


def test_tensor_dataset_is_batched_without_indexing_each_sample(monkeypatch):
    """The loader indexes a TensorDataset's tensors once per batch (a regression made it
    index every sample and stack them: 60x slower per batch); its batches equal the
    per-sample collation, NumPy arrays made tensors."""
    calls = []
    plain = TensorDataset.__getitem__

    def counting(self, index):
        calls.append(index)
        return plain(self, index)

    ds = TensorDataset(X, np.arange(10.0, dtype=np.float32), Y)
    want = _collated_one_by_one(ds, 4)
    monkeypatch.setattr(TensorDataset, "__getitem__", counting)
    got = list(DataLoader(ds, batch_size=4))
    assert calls == []
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, list) and len(g) == 3
        for a, b in zip(g, w):
            assert isinstance(a, jitgrad.Tensor) and a.dtype == b.dtype
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_tensor_dataset_batches_that_per_sample_indexing_changes():
    """A subclass's own ``__getitem__`` is called, and a tensor that requires grad is
    stacked (its batch has a graph), as when collating sample by sample."""
    class Doubled(TensorDataset):
        def __getitem__(self, index):
            x, y = super().__getitem__(index)
            return x * 2, y

    x, y = next(iter(DataLoader(Doubled(X, Y), batch_size=3)))
    np.testing.assert_array_equal(x.numpy(), X.numpy()[:3] * 2)
    w = jitgrad.ones(10, 2, requires_grad=True)
    wb, yb = next(iter(DataLoader(TensorDataset(w, Y), batch_size=3)))
    assert wb.requires_grad and wb.grad_fn is not None
    wb.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy()[:4, 0], [1, 1, 1, 0])
