"""jitgrad.utils.data against torch.utils.data: ConcatDataset, IterableDataset (DataLoader
with batch_size / drop_last / batch_size=None), ChainDataset, StackDataset,
SubsetRandomSampler, WeightedRandomSampler, get_worker_info, default_convert, and the
existing random_split / Subset / default_collate."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest
from helpers import assert_same_error as _errors

import jitgrad
from jitgrad.utils import data as D

torch = pytest.importorskip("torch")
TD = torch.utils.data


def _plain(x):
    """Tensors (of either library) as (dtype name, nested lists); containers kept."""
    if isinstance(x, (jitgrad.Tensor, torch.Tensor)):
        return (str(x.dtype).split(".")[-1], x.tolist())
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__, tuple(_plain(v) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    if isinstance(x, np.ndarray):
        return ("ndarray", x.tolist())
    return x


def _both(fn):
    """``fn(D)`` and ``fn(TD)``, made plain."""
    return _plain(fn(D)), _plain(fn(TD))


class _Range:
    """An iterable dataset of ``n`` numbered samples, in either library."""

    @staticmethod
    def make(M, n, with_len=True):
        class R(M.IterableDataset):
            def __iter__(self):
                return iter({"i": i, "x": np.full(2, i, dtype=np.float32)} for i in range(n))

        if with_len:
            R.__len__ = lambda self: n
        return R()


def test_concat_dataset():
    a, b = list(range(3)), list(range(10, 15))
    for fn in (lambda M: [M.ConcatDataset([a, b])[i] for i in range(-8, 8)],
               lambda M: M.ConcatDataset([a, b]).cumulative_sizes,
               lambda M: len(M.ConcatDataset([a, [], b])),
               lambda M: [list(batch) for batch in M.DataLoader(M.ConcatDataset([a, b]),
                                                                batch_size=3)]):
        j, t = _both(fn)
        assert j == t
    _errors(lambda: D.ConcatDataset([a])[-9], lambda: TD.ConcatDataset([a])[-9])
    _errors(lambda: D.ConcatDataset([]), lambda: TD.ConcatDataset([]))
    _errors(lambda: D.ConcatDataset([_Range.make(D, 2)]),
            lambda: TD.ConcatDataset([_Range.make(TD, 2)]))
    ds = D.TensorDataset(jitgrad.arange(3)) + D.TensorDataset(jitgrad.arange(3, 5))
    assert isinstance(ds, D.ConcatDataset) and [int(ds[i][0]) for i in range(5)] == [
        0, 1, 2, 3, 4]
    with pytest.warns(FutureWarning, match="renamed to `cumulative_sizes`"):
        assert ds.cummulative_sizes == [3, 5]


@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (None, False),
                                                  (1, False), (10, False)])
def test_dataloader_over_iterable_dataset(batch_size, drop_last):
    def run(M):
        loader = M.DataLoader(_Range.make(M, 7), batch_size=batch_size, drop_last=drop_last)
        return [list(loader), list(loader), len(loader)]  # a new stream per epoch

    j, t = _both(run)
    assert j == t


def test_iterable_dataset_errors_and_chain():
    ds = _Range.make(D, 3)
    for kw in ({"shuffle": True}, {"sampler": [0, 1]}, {"batch_sampler": [[0]]}):
        with pytest.raises(ValueError) as ej:
            D.DataLoader(ds, **kw)
        with pytest.raises(ValueError) as et:
            TD.DataLoader(_Range.make(TD, 3), **kw)
        assert str(ej.value).split(", but got")[0] == str(et.value).split(", but got")[0]
    _errors(lambda: len(D.DataLoader(_Range.make(D, 3, with_len=False))),
            lambda: len(TD.DataLoader(_Range.make(TD, 3, with_len=False))))
    j, t = _both(lambda M: [s["i"] for s in M.ChainDataset([_Range.make(M, 2),
                                                            _Range.make(M, 3)])])
    assert j == t == [0, 1, 0, 1, 2]
    chained = _Range.make(D, 2) + _Range.make(D, 4)
    assert isinstance(chained, D.ChainDataset) and len(chained) == 6
    _errors(lambda: list(D.ChainDataset([[1, 2]])), lambda: list(TD.ChainDataset([[1, 2]])))
    _errors(lambda: len(D.ChainDataset([[1, 2]])), lambda: len(TD.ChainDataset([[1, 2]])))
    assert D.get_worker_info() is None is TD.get_worker_info()
    assert isinstance(ds, D.Dataset)


def test_stack_dataset():
    imgs, labels = [np.full(2, i, np.float32) for i in range(5)], list(range(5))
    for fn in (lambda M: M.StackDataset(imgs, labels)[3],
               lambda M: M.StackDataset(image=imgs, label=labels)[2],
               lambda M: M.StackDataset(image=imgs, label=labels).__getitems__([0, 4]),
               lambda M: M.StackDataset(imgs, M.Subset(labels, [4, 3, 2, 1, 0])
                                        ).__getitems__([1, 2]),
               lambda M: list(M.DataLoader(M.StackDataset(image=imgs, label=labels),
                                           batch_size=2)),
               lambda M: len(M.StackDataset(imgs, labels))):
        j, t = _both(fn)
        assert j == t
    _errors(lambda: D.StackDataset(imgs, label=labels), lambda: TD.StackDataset(imgs,
                                                                                label=labels))
    _errors(lambda: D.StackDataset(), lambda: TD.StackDataset())
    _errors(lambda: D.StackDataset(imgs, [1]), lambda: TD.StackDataset(imgs, [1]))


def test_subset_random_sampler():
    idx = [10, 3, 7, 42, 5]
    g = jitgrad.Generator().manual_seed(0)
    s = D.SubsetRandomSampler(idx, generator=g)
    first, second = list(s), list(s)
    assert sorted(first) == sorted(idx) == sorted(second) and len(s) == 5
    assert list(D.SubsetRandomSampler(idx, jitgrad.Generator().manual_seed(0))) == first
    loader = D.DataLoader(list(range(50)), batch_size=2, sampler=D.SubsetRandomSampler(idx))
    assert sorted(int(v) for b in loader for v in b) == sorted(idx) and len(loader) == 3


def test_weighted_random_sampler():
    w = [0.1, 0.0, 3.0, 0.9]
    g = jitgrad.Generator().manual_seed(1)
    s = D.WeightedRandomSampler(w, 4000, generator=g)
    draws = list(s)
    assert len(s) == 4000 and len(draws) == 4000
    counts = np.bincount(draws, minlength=4) / 4000
    np.testing.assert_allclose(counts, np.array(w) / sum(w), atol=0.03)
    assert counts[1] == 0
    assert list(D.WeightedRandomSampler(w, 50, generator=jitgrad.Generator().manual_seed(1))) \
        == draws[:50]
    unique = list(D.WeightedRandomSampler([1.0, 2.0, 3.0, 4.0], 4, replacement=False))
    assert sorted(unique) == [0, 1, 2, 3]
    assert s.weights.dtype == jitgrad.float64
    for args, kw in (((w, 0), {}), ((w, 2.5), {}), ((w, True), {}), ((w, 2), {"replacement": 1}),
                     (([[1.0, 2.0]], 2), {})):
        _errors(lambda a=args, k=kw: D.WeightedRandomSampler(*a, **k),
                lambda a=args, k=kw: TD.WeightedRandomSampler(*a, **k))
    _errors(lambda: list(D.WeightedRandomSampler(w, 9, replacement=False)),
            lambda: list(TD.WeightedRandomSampler(w, 9, replacement=False)))


def test_default_convert_and_unbatched_loading():
    Point = collections.namedtuple("Point", "x y")
    samples = [np.arange(3), np.float64(2.5), np.array(["a", "b"]), "text", 3,
               {"a": np.ones(2), "b": [np.zeros(1), "s"]}, (np.ones(1), 2),
               Point(np.ones(1), 1.5), [np.int32(4)]]
    for s in samples:
        assert _plain(D.default_convert(s)) == _plain(TD.default_convert(s)), s
    loader = D.DataLoader([np.arange(2), np.arange(2, 4)], batch_size=None)
    tloader = TD.DataLoader([np.arange(2), np.arange(2, 4)], batch_size=None)
    assert _plain(list(loader)) == _plain(list(tloader))


def test_default_collate_matches_torch():
    Point = collections.namedtuple("Point", "x y")
    batches = [
        [(np.ones(2), 1), (np.zeros(2), 0)],
        [{"x": 1.5, "y": [True, 2]}, {"x": 2.5, "y": [False, 3]}],
        [Point(np.float32(1), 2), Point(np.float32(3), 4)],
        [jitgrad.ones(2), jitgrad.zeros(2)],
        [["a", 1], ["b", 2]],
    ]
    for b in batches:
        tb = [[torch.ones(2), torch.zeros(2)][i] for i in range(2)] \
            if isinstance(b[0], jitgrad.Tensor) else b
        assert _plain(D.default_collate(b)) == _plain(TD.default_collate(tb))
    _errors(lambda: D.default_collate([[1, 2], [1]]), lambda: TD.default_collate([[1, 2], [1]]))


def test_random_split_and_subset():
    ds = list(range(10))
    for lengths in ([0.3, 0.3, 0.4], [0.5, 0.5], [3, 7], [0.25, 0.25, 0.25, 0.25]):
        parts = D.random_split(ds, lengths, generator=jitgrad.Generator().manual_seed(0))
        tparts = TD.random_split(ds, lengths, generator=torch.Generator().manual_seed(0))
        assert [len(p) for p in parts] == [len(p) for p in tparts]
        assert sorted(i for p in parts for i in p.indices) == ds
    for M in (D, TD):
        with pytest.warns(UserWarning) as rec:
            M.random_split(list(range(2)), [0.9, 0.05, 0.05])
        assert [str(w.message) for w in rec] == [
            f"Length of split at index {i} is 0. This might result in an empty dataset."
            for i in (1, 2)]
    _errors(lambda: D.random_split(ds, [1.2, -0.2]), lambda: TD.random_split(ds, [1.2, -0.2]))
    _errors(lambda: D.random_split(ds, [3, 3]), lambda: TD.random_split(ds, [3, 3]))
    sub = D.Subset(list("abcdef"), [5, 0, 2])
    tsub = TD.Subset(list("abcdef"), [5, 0, 2])
    assert len(sub) == len(tsub) and [sub[i] for i in range(3)] == [tsub[i] for i in range(3)]
    assert sub.__getitems__([0, 2]) == tsub.__getitems__([0, 2])
    assert math.isclose(sum(len(p) for p in D.random_split(ds, [0.5, 0.5])), 10)
