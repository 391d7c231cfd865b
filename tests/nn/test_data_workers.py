"""DataLoader with worker processes (``num_workers > 0``): the same batches as in the main
process (shuffled, drop_last, custom collation, dicts, TensorDataset's fast path,
batch_sampler, no auto-batching), IterableDataset sharding with ``get_worker_info``, worker
seeding (PyTorch's scheme), ``worker_init_fn``, ``WorkerInfo``, persistent workers,
``in_order=False``, errors raised in workers (PyTorch's message), a worker killed, early
exits leaving no child processes, ``timeout``, ``multiprocessing_context``, the argument
errors; against ``torch.utils.data`` where torch is installed."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import pickle
import random
import signal
import time

import numpy as np
import pytest

import jitgrad
from jitgrad.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
    TensorDataset,
    get_worker_info,
)
from jitgrad.utils.data._worker_loop import _generate_state


def _plain(x):
    """Tensors as (dtype name, nested lists); containers kept."""
    if hasattr(x, "dtype") and hasattr(x, "tolist"):
        return (str(x.dtype).split(".")[-1], x.tolist())
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    return x


def _children() -> set:
    return {p.pid for p in mp.active_children()}


class Squares(Dataset):
    """Dicts of a number, an array and a float per index."""

    def __init__(self, n: int = 10) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        return {"i": i, "x": np.full(2, i * i, dtype=np.float32), "f": i / 2}


class Pairs(Dataset):
    def __len__(self) -> int:
        return 7

    def __getitem__(self, i):
        return np.arange(3, dtype=np.int32) + i, float(i)


class Items(Squares):
    """A dataset with ``__getitems__`` (which the loader uses instead of ``__getitem__``)."""

    def __getitems__(self, indices):
        return [{"i": -i, "x": np.zeros(1), "f": 0.0} for i in indices]


class Shard(IterableDataset):
    """``range(n)``, each worker yielding every ``num_workers``-th number from its id."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))


class Uneven(IterableDataset):
    """Worker 0 yields 3 samples, the others 8: worker 0 is exhausted first."""

    def __iter__(self):
        info = get_worker_info()
        wid = 0 if info is None else info.id
        return iter([np.array([wid, i]) for i in range(3 if wid == 0 else 8)])


def _collate(batch):
    return {"sum": sum(int(s[0].sum()) for s in batch), "n": len(batch)}


def test_map_style_batches_equal_the_main_process_ones():
    cases = [
        dict(dataset=Squares(10), batch_size=3, shuffle=True),
        dict(dataset=Squares(10), batch_size=3, shuffle=True, drop_last=True),
        dict(dataset=Pairs(), batch_size=2, collate_fn=_collate),
        dict(dataset=Pairs(), batch_size=None),
        dict(dataset=Items(5), batch_size=2),
        dict(dataset=TensorDataset(jitgrad.arange(14.0).reshape(7, 2), jitgrad.arange(7)),
             batch_size=3, shuffle=True),
        dict(dataset=Squares(7),
             batch_sampler=BatchSampler(SequentialSampler(range(7)), 3, drop_last=False)),
    ]
    for kwargs in cases:
        epochs = {}
        for workers in (0, 2):
            loader = DataLoader(num_workers=workers, generator=jitgrad.Generator().manual_seed(5),
                                **kwargs)
            assert len(loader) == len(DataLoader(**kwargs))
            epochs[workers] = [[_plain(b) for b in loader] for _ in range(2)]
        assert epochs[0] == epochs[2], kwargs
    # (the shuffled epochs differ: a new permutation each)
    loader = DataLoader(Squares(10), batch_size=3, shuffle=True, num_workers=2,
                        generator=jitgrad.Generator().manual_seed(5))
    assert [b["i"].tolist() for b in loader] != [b["i"].tolist() for b in loader]


def test_iterable_dataset_sharded_by_worker_info_without_duplicates():
    for kwargs in (dict(batch_size=3), dict(batch_size=3, drop_last=True),
                   dict(batch_size=None)):
        got = list(DataLoader(Shard(20), num_workers=2, **kwargs))
        nums = [int(v) for b in got for v in (b.tolist() if hasattr(b, "tolist") else [b])]
        if kwargs.get("drop_last"):  # worker 0: 0 2 .. 18 -> 3 full batches, 1 too
            assert len(nums) == 18 and len(set(nums)) == 18
        else:
            assert sorted(nums) == list(range(20))
    # round-robin: worker 0's batch, then worker 1's, ...
    assert [b.tolist() for b in DataLoader(Shard(8), batch_size=2, num_workers=2)] == \
        [[0, 2], [1, 3], [4, 6], [5, 7]]
    # an exhausted worker is skipped
    got = [b.tolist() for b in DataLoader(Uneven(), batch_size=2, num_workers=2)]
    assert got == [[[0, 0], [0, 1]], [[1, 0], [1, 1]], [[0, 2]], [[1, 2], [1, 3]],
                   [[1, 4], [1, 5]], [[1, 6], [1, 7]]]


class Draws(Dataset):
    """Each sample: the worker's id and a draw of jitgrad's, Python's and NumPy's
    generators."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i):
        info = get_worker_info()
        return (info.id, info.seed, jitgrad.rand(1).item(), random.random(),
                float(np.random.rand()))


def _draws(seed):
    loader = DataLoader(Draws(), batch_size=None, num_workers=2,
                        generator=jitgrad.Generator().manual_seed(seed))
    return [tuple(s) for s in loader]


def test_workers_are_seeded_differently_and_reproducibly():
    a, b = _draws(0), _draws(0)
    assert a == b  # the same generator seed: the same draws
    assert _draws(1) != a
    w0, w1 = a[0], a[1]  # the first samples of workers 0 and 1
    assert (w0[0], w1[0]) == (0, 1)
    assert w1[1] == w0[1] + 1  # seed = base_seed + worker id
    assert all(x != y for x, y in zip(w0[2:], w1[2:]))  # each generator differs
    base = w0[1]
    # PyTorch's scheme: jitgrad's generator and random from base_seed + id, NumPy from
    # _generate_state(base_seed, id)
    for wid, sample in ((0, w0), (1, w1)):
        assert sample[2] == jitgrad.rand(1, generator=jitgrad.Generator().manual_seed(
            base + wid)).item()
        assert sample[3] == random.Random(base + wid).random()
        assert sample[4] == np.random.RandomState(_generate_state(base, wid)).rand()
    # base_seed: the first int64 the loader's generator draws
    g = jitgrad.Generator().manual_seed(0)
    assert base == int(g.np.integers(0, 2**63 - 1, endpoint=True, dtype=np.int64))


class Info(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i):
        info = get_worker_info()
        try:
            info.id = 7
            frozen = False
        except dataclasses.FrozenInstanceError:
            frozen = True
        return (info.id, info.num_workers, info.seed, type(info.dataset).__name__,
                info.dataset is not None, frozen, _INIT_CALLS[:])


_INIT_CALLS: list = []


def _init(worker_id):
    _INIT_CALLS.append(worker_id)
    assert get_worker_info().id == worker_id


def test_worker_info_and_worker_init_fn():
    assert get_worker_info() is None
    got = list(DataLoader(Info(), batch_size=None, num_workers=2, worker_init_fn=_init))
    assert [s[0] for s in got] == [0, 1, 0, 1]
    for s in got:
        wid, n, seed, name, has_ds, frozen, calls = s
        assert n == 2 and name == "Info" and has_ds and frozen
        assert calls == [wid]  # called once per worker, with its id
    assert got[1][2] == got[0][2] + 1
    assert _INIT_CALLS == [] and get_worker_info() is None  # the main process untouched


class Pid(Dataset):
    def __init__(self) -> None:
        self.calls = 0

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i):
        self.calls += 1
        return os.getpid(), self.calls


def test_persistent_workers_are_kept_across_epochs():
    before = _children()
    loader = DataLoader(Pid(), batch_size=2, num_workers=2, persistent_workers=True)
    e1 = [b[0].tolist() for b in loader]
    e2 = [b[0].tolist() for b in loader]
    assert e1 == e2 and len({p for b in e1 for p in b}) == 2 and os.getpid() not in e1[0]
    it = iter(loader)
    next(it)  # an epoch left early, then a full one on the same workers
    e3 = [(b[0].tolist(), b[1].tolist()) for b in loader]
    assert [p for p, _ in e3] == e1
    assert e3[0][1][0] > 2  # the worker's dataset copy kept its state
    # an IterableDataset starts its stream again each epoch
    stream = DataLoader(Shard(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in stream] == [b.tolist() for b in stream] == \
        [[0, 2], [1, 3], [4], [5]]
    del loader, it, stream
    assert _children() <= before
    # without: new workers each epoch
    loader = DataLoader(Pid(), batch_size=2, num_workers=2)
    assert [b[0].tolist() for b in loader] != [b[0].tolist() for b in loader]


class Slow(Dataset):
    def __init__(self, slow: int, seconds: float) -> None:
        self.slow, self.seconds = slow, seconds

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i):
        if i == self.slow:
            time.sleep(self.seconds)
        return i


def test_in_order_false_gives_batches_as_they_come():
    loader = DataLoader(Slow(0, 0.5), batch_size=None, num_workers=2)
    assert list(loader) == list(range(6))
    got = list(DataLoader(Slow(0, 0.5), batch_size=None, num_workers=2, in_order=False))
    assert sorted(got) == list(range(6)) and got[0] != 0


def test_timeout():
    before = _children()
    assert list(DataLoader(Slow(0, 0.0), batch_size=None, num_workers=2, timeout=5)) == \
        list(range(6))
    it = iter(DataLoader(Slow(0, 1.0), batch_size=None, num_workers=2, timeout=0.3))
    with pytest.raises(RuntimeError, match=r"^DataLoader timed out after 0\.3 seconds$"):
        next(it)
    del it
    assert _children() <= before


class Fails(Dataset):
    def __len__(self) -> int:
        return 6

    def __getitem__(self, i):
        if i == 3:
            raise ValueError(f"bad index {i}")
        if i == 4:
            raise KeyError("missing")
        return i


def test_an_exception_in_a_worker_is_raised_again_with_pytorchs_message():
    it = iter(DataLoader(Fails(), batch_size=None, num_workers=2))
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError) as err:
        next(it)
    msg = str(err.value)
    assert msg.startswith("Caught ValueError in DataLoader worker process 1.\n"
                          "Original Traceback (most recent call last):\n")
    assert "in __getitem__" in msg and msg.rstrip().endswith("ValueError: bad index 3")
    with pytest.raises(KeyError) as err:  # the iterator goes on; KeyError's text unquoted
        next(it)
    assert str(err.value).startswith("Caught KeyError in DataLoader worker process 0.\n")
    assert next(it) == 5
    del it, err

    def bad_init(worker_id):
        raise TypeError("init failed")

    with pytest.raises(TypeError, match=r"^Caught TypeError in DataLoader worker process 0\."
                                        r"\nOriginal Traceback"):
        list(DataLoader(Fails(), num_workers=1, worker_init_fn=bad_init))


def test_a_batch_with_a_graph_cannot_cross_processes_tensors_pickle():
    for t in (jitgrad.arange(6).reshape(2, 3).to(jitgrad.float16), jitgrad.tensor([True]),
              jitgrad.arange(4, dtype=jitgrad.int32)[::2]):
        u = pickle.loads(pickle.dumps(t))
        assert u.dtype == t.dtype and u.tolist() == t.tolist()
    x = jitgrad.ones(4, 2, requires_grad=True)  # stacked per sample: a graph
    with pytest.raises(RuntimeError, match=r"(?s)^Caught RuntimeError in DataLoader worker "
                                           r"process 0\..*Cowardly refusing to serialize "
                                           r"non-leaf tensor which requires_grad"):
        list(DataLoader(TensorDataset(x), batch_size=2, num_workers=1))


class Dies(Dataset):
    def __len__(self) -> int:
        return 6

    def __getitem__(self, i):
        if i == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


def test_a_killed_worker_raises_and_early_exits_leave_no_children():
    before = _children()
    it = iter(DataLoader(Dies(), batch_size=None, num_workers=2))
    with pytest.raises(RuntimeError, match=r"^DataLoader worker \(pid\(s\) \d+\) exited "
                                           r"unexpectedly$"):
        list(it)
    del it
    assert _children() <= before
    for stop in (0, 1, 3):  # a loop broken out of early
        for k, _ in enumerate(DataLoader(Squares(20), batch_size=2, num_workers=2)):
            if k == stop:
                break
        assert _children() <= before
    it = iter(DataLoader(Squares(20), batch_size=2, num_workers=2))
    next(it)
    assert len(_children() - before) == 2
    del it
    assert _children() <= before
    list(DataLoader(Squares(6), batch_size=2, num_workers=2))  # the end of the epoch
    assert _children() <= before


def test_multiprocessing_context_and_pin_memory():
    ds = TensorDataset(jitgrad.arange(12.0).reshape(6, 2), jitgrad.arange(6))
    want = [_plain(b) for b in DataLoader(ds, batch_size=4)]
    for ctx in ("spawn", mp.get_context("fork")):
        loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=ctx)
        assert [_plain(b) for b in loader] == want
    assert DataLoader(ds, num_workers=1, multiprocessing_context="fork") \
        .multiprocessing_context is mp.get_context("fork")
    pinned = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)
    if jitgrad.cuda.is_available():  # (the CUDA simulator too)
        got = list(pinned)
        assert all(t.is_pinned() for b in got for t in b)
    else:
        with pytest.warns(UserWarning, match="'pin_memory' argument is set as true"):
            got = list(pinned)
    assert [_plain(b) for b in got] == want


def test_argument_errors():
    ds = Squares(4)
    with pytest.raises(ValueError, match="^num_workers option should be non-negative; use "
                                         "num_workers=0 to disable multiprocessing.$"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="^prefetch_factor option could only be specified"):
        DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="^prefetch_factor option should be non-negative$"):
        DataLoader(ds, num_workers=1, prefetch_factor=-1)
    with pytest.raises(ValueError, match="^persistent_workers option needs num_workers > 0$"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="^timeout option should be non-negative$"):
        DataLoader(ds, timeout=-1)
    with pytest.raises(ValueError, match="^multiprocessing_context can only be used with"):
        DataLoader(ds, multiprocessing_context="fork")
    with pytest.raises(ValueError, match="should specify a valid start method"):
        DataLoader(ds, num_workers=1, multiprocessing_context="nope")
    with pytest.raises(TypeError, match="should be a valid context object"):
        DataLoader(ds, num_workers=1, multiprocessing_context=3)
    assert DataLoader(ds, num_workers=2).prefetch_factor == 2
    assert DataLoader(ds).prefetch_factor is None
    with pytest.warns(UserWarning, match="This DataLoader will create 1000 worker processes"):
        DataLoader(ds, num_workers=1000)


# -- against torch.utils.data ----------------------------------------------------------------

def test_batches_and_errors_match_torch():
    torch = pytest.importorskip("torch")
    from helpers import assert_same_error

    TD = torch.utils.data
    order = np.random.default_rng(0).permutation(11).tolist()  # a fixed shuffled order

    def run(M):
        class Map(M.Dataset):
            def __len__(self):
                return 11

            def __getitem__(self, i):
                return {"i": i, "x": np.full(2, i, dtype=np.float32), "f": i / 4}

        class Stream(M.IterableDataset):
            def __iter__(self):
                info = M.get_worker_info()
                return iter([np.array([info.id, i]) for i in range(3 if info.id == 0 else 7)])

        return ([_plain(b) for b in M.DataLoader(Map(), batch_size=3, sampler=order,
                                                 num_workers=2)],
                [_plain(b) for b in M.DataLoader(Stream(), batch_size=2, num_workers=2)],
                [_plain(b) for b in M.DataLoader(Stream(), batch_size=None, num_workers=2,
                                                 prefetch_factor=1)])

    j, t = run(jitgrad.utils.data), run(TD)
    assert j == t
    assert j[0][0]["i"] == ("int64", order[:3])

    def failing(M):
        class F(M.Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                if i == 1:
                    raise ValueError("bad index 1")
                return i

        it = iter(M.DataLoader(F(), num_workers=2))
        with pytest.raises(ValueError) as err:
            list(it)
        lines = str(err.value).splitlines()
        it._shutdown_workers()  # (torch's takes 5 s per worker when the collector does it)
        return lines[:2], lines[-1]

    assert failing(jitgrad.utils.data) == failing(TD)
    ds = [1, 2, 3]
    for kwargs in (dict(num_workers=-1), dict(prefetch_factor=2), dict(timeout=-1),
                   dict(persistent_workers=True), dict(num_workers=1, prefetch_factor=-1),
                   dict(multiprocessing_context="fork"),
                   dict(num_workers=1, multiprocessing_context="nope"),
                   dict(num_workers=1, multiprocessing_context=3)):
        assert_same_error(lambda kw=kwargs: DataLoader(ds, **kw),
                          lambda kw=kwargs: TD.DataLoader(ds, **kw))
    # numpy in a worker: PyTorch's seeding scheme
    assert all(_generate_state(b, w) == TD._utils.worker._generate_state(b, w)
               for b in (0, 1, 2**40 + 7, 2**63 - 1) for w in range(3))
