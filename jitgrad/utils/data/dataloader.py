"""``DataLoader``: batches of a map-style dataset, optionally shuffled by a seeded
generator, collated into tensors (or of an ``IterableDataset``'s stream), loaded in the
main process or, with ``num_workers > 0``, in worker processes (``_MultiProcessingIter``
here, the workers' side in :mod:`._worker_loop`)."""

from __future__ import annotations

import atexit
import itertools
import multiprocessing
import multiprocessing.util  # (its exit handler registered before ours, so runs after it)
import numbers
import os
import pickle
import queue
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from ... import creation, dtypes
from ...ops.movement import stack
from ...random import Generator, rng
from ...tensor import Tensor, wrap
from . import _worker_loop as _wl
from .dataset import Dataset, TensorDataset
from .sampler import check_positive_int
from .worker import default_convert, get_worker_info  # noqa: F401 - PyTorch's module has them

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info", "pin_batch"]


def default_collate(batch: list):
    """Stack a list of samples: tensors and NumPy arrays into one tensor (a new leading
    dim), Python floats into float64, ints into int64, bools into bool; tuples, lists and
    dicts field by field.

    >>> import jitgrad
    >>> default_collate([(jitgrad.ones(2), 1), (jitgrad.zeros(2), 0)])
    [tensor([[1., 1.],
            [0., 0.]]), tensor([1, 0])]
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        return wrap(np.stack(batch))
    if isinstance(elem, np.generic):
        return wrap(np.asarray(batch))
    if isinstance(elem, bool):
        return creation.tensor(batch, dtype=dtypes.bool_)
    if isinstance(elem, numbers.Integral):
        return creation.tensor(batch, dtype=dtypes.int64)
    if isinstance(elem, numbers.Real):
        return creation.tensor(batch, dtype=dtypes.float64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(s) for s in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem)}")


def pin_batch(batch):
    """``batch`` with its CPU tensors in pinned memory (tuples, lists, dicts and namedtuples
    field by field; anything else as it is)."""
    if isinstance(batch, Tensor):
        return batch.pin_memory() if not batch.is_cuda else batch
    if isinstance(batch, Mapping):
        return {k: pin_batch(v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(pin_batch(v) for v in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(pin_batch(v) for v in batch)
    return batch


#: seconds between the main process's checks that its workers are alive while it waits
_POLL_S = 0.25
#: seconds a worker is given to exit at shutdown before it is terminated
_JOIN_S = 5.0
_LIVE_ITERS: weakref.WeakSet = weakref.WeakSet()  # worker iterators not yet shut down
_EXITING = False


def _shutdown_at_exit() -> None:
    """At interpreter exit (before multiprocessing terminates its daemonic children): shut
    down the workers of live iterators (persistent workers, iterators still referenced),
    then make later ``__del__`` calls no-ops."""
    global _EXITING
    for it in list(_LIVE_ITERS):
        try:
            it._shutdown_workers()
        except Exception:  # noqa: S110 - best effort at exit
            pass
    _EXITING = True


atexit.register(_shutdown_at_exit)


def _cpu_count() -> int | None:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def _index_batches(dataset, sampler, batch_sampler, shuffle: bool, generator,
                   batch_size: int | None, drop_last: bool) -> Iterator:
    """The indices a map-style loader fetches, batch by batch (or one by one without
    auto-batching); a function of its arguments only, so that an iterator that holds it
    does not keep its loader alive."""
    if batch_sampler is not None:
        for batch in batch_sampler:
            yield np.asarray(batch, dtype=np.int64)
        return
    if sampler is not None:
        order = np.fromiter(iter(sampler), dtype=np.int64)
    else:
        n = len(dataset)
        order = rng(generator).permutation(n) if shuffle else np.arange(n)
    if batch_size is None:
        yield from order
        return
    n, bs = len(order), batch_size
    stop = n - n % bs if drop_last else n
    for start in range(0, stop, bs):
        yield order[start:start + bs]


class _InfiniteConstantSampler:
    """The sampler of a loader over an ``IterableDataset``: None, for ever (PyTorch's)."""

    def __iter__(self) -> Iterator:
        return itertools.repeat(None)


#: what PyTorch forbids setting on a DataLoader once made
_FIXED_AFTER_INIT = frozenset({"batch_size", "batch_sampler", "sampler", "drop_last",
                               "dataset", "persistent_workers"})


class DataLoader:
    """Iterate over ``dataset`` in batches, as ``torch.utils.data.DataLoader``.

    The indices come from ``sampler`` when given (e.g. a :class:`DistributedSampler`;
    exclusive with ``shuffle``), in batches of ``batch_size``, or in the lists of
    ``batch_sampler`` (exclusive with ``batch_size``, ``shuffle``, ``sampler`` and
    ``drop_last``). Otherwise ``shuffle`` draws a new permutation each epoch from
    ``generator`` (or the default generator), so a seeded generator gives the same batches
    run after run; ``drop_last`` drops a final short batch. A :class:`TensorDataset` with the
    default collation is batched by indexing its tensors directly (no per-sample stacking).
    ``pin_memory=True`` puts each batch's CPU tensors in pinned memory when CUDA is available
    (``Tensor.pin_memory``), and warns as PyTorch does when it is not.

    As PyTorch's, each ``iter(loader)`` first draws a ``base_seed`` (a random int64) from
    ``generator`` (or the default generator), whatever ``num_workers`` (with persistent
    workers: once, when they start); so the shuffled orders do not depend on
    ``num_workers``.

    ``num_workers > 0`` loads the batches in that many worker processes (``multiprocessing``
    with its default start method, fork on Linux, or ``multiprocessing_context``: a start
    method's name or a context). Each worker seeds jitgrad's default generator and Python's
    ``random`` with ``base_seed + worker_id`` and NumPy's global generator with PyTorch's
    ``_generate_state(base_seed, worker_id)`` (the same draws as PyTorch's workers for a
    given ``base_seed``), sets :func:`get_worker_info`, calls ``worker_init_fn(worker_id)``, then
    collates the batches it is sent (round-robin; ``prefetch_factor`` batches per worker
    in flight, 2 by default). Batches cross back pickled and come in sampler order
    (``in_order=False``: as they come). With an ``IterableDataset`` each worker iterates
    its own copy (shard it with :func:`get_worker_info`) and the workers' batches alternate,
    an exhausted worker skipped. ``persistent_workers=True`` keeps the workers (and their
    datasets) from one epoch to the next; otherwise they stop at the end of an epoch or
    when the iterator is deleted. ``timeout`` (seconds, > 0) raises a RuntimeError when a
    batch takes longer. An exception in a worker is raised again in the main process (same
    type; the message names the worker and holds the worker's traceback), and a worker that
    dies raises a RuntimeError.
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool = False,
                 sampler=None, batch_sampler=None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context=None, generator: Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True, **kwargs) -> None:
        from .composite import IterableDataset

        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 "
                             "to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        self.pin_memory_device = pin_memory_device

        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:  # a stream: no order to choose
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if batch_size is not None:
            check_positive_int("batch_size", batch_size)
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.generator = generator
        self._sampler = sampler  # as given (None: the loader orders the indices itself)
        self._batch_sampler = batch_sampler
        # a TensorDataset with the default collation is batched by indexing its tensors
        # (decided before collate_fn is filled in with that default)
        self._fast = isinstance(dataset, TensorDataset) and collate_fn is None \
            and batch_size is not None
        if collate_fn is None:  # samples one by one (batch_size=None): converted only
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers
        self._iterator: _MultiProcessingIter | None = None  # persistent workers' iterator
        self._check_worker_number_rationality()
        # the default sampler objects, made when first read (and, being set, what marks
        # the loader initialized: __setattr__)
        self._defaults: dict = {}

    @property
    def sampler(self):
        """The sampler given, else PyTorch's default: a ``RandomSampler`` (with the loader's
        ``generator``) when shuffling, a ``SequentialSampler`` otherwise, an infinite
        constant sampler for an ``IterableDataset`` (``len(loader.sampler)`` is the number
        of samples). Iterating a default sampler draws its own order: the loader's batches
        draw theirs as described above."""
        if self._sampler is not None:
            return self._sampler
        if "sampler" not in self._defaults:
            from .sampler import RandomSampler, SequentialSampler

            if self._iterable:
                made = _InfiniteConstantSampler()
            elif self.shuffle:
                made = RandomSampler(self.dataset, generator=self.generator)
            else:
                made = SequentialSampler(self.dataset)
            self._defaults["sampler"] = made
        return self._defaults["sampler"]

    @property
    def batch_sampler(self):
        """The batch sampler given, else (with a ``batch_size``) PyTorch's default:
        ``BatchSampler(loader.sampler, batch_size, drop_last)``; None without
        auto-batching."""
        if self._batch_sampler is not None:
            return self._batch_sampler
        if self.batch_size is None:
            return None
        if "batch_sampler" not in self._defaults:
            from .sampler import BatchSampler

            self._defaults["batch_sampler"] = BatchSampler(self.sampler, self.batch_size,
                                                           self.drop_last)
        return self._defaults["batch_sampler"]

    def __setattr__(self, name: str, value) -> None:
        if name in _FIXED_AFTER_INIT and "_defaults" in self.__dict__:
            raise ValueError(f"{name} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        object.__setattr__(self, name, value)

    @property
    def _auto_collation(self) -> bool:
        """Whether samples are collated into batches (``batch_size`` or ``batch_sampler``)."""
        return self.batch_size is not None or self._batch_sampler is not None

    @property
    def multiprocessing_context(self):
        """The ``multiprocessing`` context the workers start from (None: the default start
        method). Set it to a start method's name or to a context, with ``num_workers >
        0``."""
        return self._mp_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context) -> None:
        if context is not None:
            if self.num_workers <= 0:
                raise ValueError("multiprocessing_context can only be used with multi-process "
                                 "loading (num_workers > 0), but got "
                                 f"num_workers={self.num_workers}")
            if isinstance(context, str):
                methods = multiprocessing.get_all_start_methods()
                if context not in methods:
                    raise ValueError("multiprocessing_context option should specify a valid "
                                     f"start method in {methods!r}, but got "
                                     f"multiprocessing_context={context!r}")
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError("multiprocessing_context option should be a valid context "
                                "object or a string specifying the start method, but got "
                                f"multiprocessing_context={context}")
        self._mp_context = context

    def _check_worker_number_rationality(self) -> None:
        """PyTorch's warning when there are more workers than usable CPUs."""
        if not self.num_workers:
            return
        suggest = _cpu_count()
        if suggest is not None and self.num_workers <= suggest:
            return
        if suggest is not None:
            cpuset = "" if hasattr(os, "sched_getaffinity") else \
                " (`cpuset` is not taken into account)"
            hint = (f"Our suggested max number of worker in current system is {suggest}{cpuset}, "
                    "which is smaller than what this DataLoader is going to create.")
        else:
            hint = ("DataLoader is not able to compute a suggested max number of worker in "
                    "current system.")
        warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in "
                      f"total. {hint} Please be aware that excessive worker creation might get "
                      "DataLoader running slow or even freeze, lower the worker number to "
                      "avoid potential slowness/freeze if necessary.", stacklevel=3)

    def _base_seed(self) -> int:
        """A random int64 from ``generator`` (or the default generator): PyTorch's
        per-iterator ``base_seed``."""
        return int(rng(self.generator).integers(0, 2**63 - 1, endpoint=True, dtype=np.int64))

    def _batches(self) -> Iterator:
        """The indices to fetch: arrays of a batch's indices, or single indices without
        auto-batching (an ``IterableDataset``: None, forever)."""
        if self._iterable:
            return itertools.repeat(None)
        return _index_batches(self.dataset, self._sampler, self._batch_sampler, self.shuffle,
                              self.generator, self.batch_size, self.drop_last)

    def _fetcher_args(self) -> tuple:
        """What a fetcher of this loader is built from (after the dataset)."""
        if self._iterable:
            return (self.collate_fn, self.batch_size, self.drop_last)
        return (self.collate_fn, self._auto_collation, self._fast)

    def _pins(self) -> bool:
        if not self.pin_memory:
            return False
        from ... import cuda

        if not cuda.is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=3)
            return False
        return True

    def __iter__(self) -> Iterator:
        if self.num_workers > 0:
            if self.persistent_workers and self._iterator is not None:
                self._iterator._reset(self)
                return self._iterator
            self._check_worker_number_rationality()
            it = _MultiProcessingIter(self)
            if self.persistent_workers:
                self._iterator = it
            return it
        self._base_seed()  # drawn as PyTorch's single-process iterator does (unused)
        batches = self._unpinned()
        return (pin_batch(b) for b in batches) if self._pins() else batches

    def _unpinned(self) -> Iterator:
        if self._iterable:
            yield from self._stream()
            return
        fetcher = _wl.MapFetcher(self.dataset, *self._fetcher_args())
        for idx in self._batches():
            yield fetcher.fetch(idx)

    def _stream(self) -> Iterator:
        """An ``IterableDataset``: its samples in batches of ``batch_size`` (the last one
        dropped when short and ``drop_last``), or one by one."""
        fetcher = _wl.IterableFetcher(self.dataset, *self._fetcher_args())
        while True:
            try:
                batch = fetcher.fetch()
            except StopIteration:
                return
            yield batch

    def __len__(self) -> int:
        if self._iterable:  # the dataset's own length (a TypeError when it has none)
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self._batch_sampler is not None:
            return len(self._batch_sampler)
        n = len(self.dataset) if self._sampler is None else len(self._sampler)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class _MultiProcessingIter:
    """An epoch of a ``DataLoader`` over worker processes (PyTorch's
    ``_MultiProcessingDataLoaderIter``): task ``i`` (a batch's indices) goes to the next
    active worker in turn, ``prefetch_factor * num_workers`` tasks are in flight, and the
    results are returned in task order (``in_order``) or as they come. With persistent
    workers the loader keeps it and :meth:`_reset` starts the next epoch."""

    def __init__(self, loader: DataLoader) -> None:
        self._shutdown = True  # (nothing to shut down until the workers exist)
        self._owner_pid = os.getpid()  # (a forked copy of this object must not shut down)
        self._workers: list = []
        self._index_queues: list = []
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        if self._prefetch_factor <= 0:
            raise AssertionError("prefetch_factor must be greater than 0 for "
                                 "MultiProcessingDataLoaderIter")
        self._in_order = loader.in_order
        self._iterable = loader._iterable
        self._persistent = loader.persistent_workers
        self._timeout = loader.timeout
        self._base_seed = loader._base_seed()
        ctx = loader.multiprocessing_context or multiprocessing.get_context()
        self._result_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._shutdown = False
        _LIVE_ITERS.add(self)
        for i in range(self._num_workers):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()
            w = ctx.Process(target=_wl.worker_loop,
                            args=(self._iterable, loader.dataset, index_queue,
                                  self._result_queue, self._done_event,
                                  loader._fetcher_args(), self._base_seed,
                                  loader.worker_init_fn, i, self._num_workers),
                            daemon=True)
            w.start()  # listed once started: only started processes are joined
            self._index_queues.append(index_queue)
            self._workers.append(w)
        self._reset(loader, first_iter=True)

    def _reset(self, loader: DataLoader, first_iter: bool = False) -> None:
        """Start an epoch: a new index iterator, every worker active, the prefetch primed
        (persistent workers told to resume first, and their acknowledgements awaited)."""
        self._pin = loader._pins()
        self._len = None
        try:
            self._len = len(loader)
        except TypeError:
            pass
        self._index_iter = loader._batches()
        self._send_idx = 0  # the next task to send
        self._rcvd_idx = 0  # the next task to return
        # task -> (worker,) while outstanding, (worker, payload) once received out of order
        self._task_info: dict = {}
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._workers_num_tasks = [0] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            for q in self._index_queues:
                q.put(_wl.ResumeIteration())
            acks = self._num_workers
            while acks > 0:  # (results of an unfinished epoch before them are dropped)
                idx, _ = self._get_data()
                if isinstance(idx, _wl.ResumeIteration):
                    acks -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def __iter__(self) -> _MultiProcessingIter:
        return self

    def __len__(self) -> int:
        if self._len is None:
            raise TypeError("this DataLoader's dataset has no len()")
        return self._len

    def __next__(self):
        data = self._next_data()
        return pin_batch(data) if self._pin else data

    def _try_put_index(self) -> None:
        try:
            index = next(self._index_iter)
        except StopIteration:
            return
        max_tasks = self._prefetch_factor * self._num_workers
        for _ in range(self._num_workers):  # the next active worker (with room), if any
            wid = next(self._worker_cycle)
            if self._workers_status[wid]:
                if self._in_order or \
                        self._workers_num_tasks[wid] < max_tasks // sum(self._workers_status):
                    break
        else:
            return
        self._index_queues[wid].put((self._send_idx, index))
        self._task_info[self._send_idx] = (wid,)
        self._workers_num_tasks[wid] += 1
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _get_data(self) -> tuple:
        """The next ``(task, payload)`` from the workers: waits, checking every
        ``_POLL_S`` that the active workers are alive (a RuntimeError naming those that
        are not), up to ``timeout`` seconds when one is set."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _POLL_S if deadline is None else \
                max(0.0, min(_POLL_S, deadline - time.monotonic()))
            try:
                return self._result_queue.get(timeout=wait)
            except queue.Empty:
                pass
            failed = [(i, w) for i, w in enumerate(self._workers)
                      if self._workers_status[i] and not w.is_alive()]
            if failed:
                for i, _ in failed:
                    self._mark_worker_as_unavailable(i)
                pids = ", ".join(str(w.pid) for _, w in failed)
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly")
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _next_data(self):
        while True:
            # skip the tasks of workers that ended (exhausted their IterableDataset copy)
            # without an answer
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info:
                    if len(info) == 2 or self._workers_status[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:  # received earlier
                wid, payload = self._task_info.pop(self._rcvd_idx)
                self._rcvd_idx += 1
                return self._process_data(payload, wid)
            if self._shutdown:
                raise RuntimeError("DataLoader iterator used after its workers were shut "
                                   "down")
            idx, blob = self._get_data()
            if isinstance(idx, _wl.ResumeIteration) or idx not in self._task_info:
                continue  # a stale acknowledgement or answer
            self._tasks_outstanding -= 1
            payload = pickle.loads(blob)
            if isinstance(payload, _wl.IterableStop):
                wid = payload.worker_id
                if self._persistent:
                    self._workers_status[wid] = False
                else:
                    self._mark_worker_as_unavailable(wid)
                del self._task_info[idx]
                self._workers_num_tasks[wid] -= 1
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                if not self._in_order:
                    return self._process_data(payload, self._task_info.pop(idx)[0])
                self._task_info[idx] += (payload,)
            else:
                wid = self._task_info.pop(idx)[0]
                self._rcvd_idx += 1
                return self._process_data(payload, wid)

    def _process_data(self, payload, wid: int):
        self._workers_num_tasks[wid] -= 1
        self._try_put_index()
        if isinstance(payload, _wl.ExceptionWrapper):
            payload.reraise()
        return payload

    def _mark_worker_as_unavailable(self, wid: int) -> None:
        """Worker ``wid`` gets no more tasks this epoch and is told to exit (joined at
        shutdown)."""
        try:
            self._index_queues[wid].put(None)
        except (ValueError, OSError):  # queue closed
            pass
        self._workers_status[wid] = False

    def _shutdown_workers(self) -> None:
        """Stop the workers: tell them (``done_event`` and None), join them for up to
        ``_JOIN_S`` seconds, terminate any still alive; close the queues."""
        if self._shutdown or _EXITING or os.getpid() != self._owner_pid:
            return
        self._shutdown = True
        _LIVE_ITERS.discard(self)
        try:
            self._done_event.set()
            for q in self._index_queues:
                try:
                    q.put(None)
                except (ValueError, OSError):
                    pass
            deadline = time.monotonic() + _JOIN_S
            for w in self._workers:
                w.join(timeout=max(0.0, deadline - time.monotonic()))
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
        finally:
            for w in self._workers:
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=_JOIN_S)
            self._result_queue.cancel_join_thread()
            self._result_queue.close()

    def __del__(self) -> None:
        try:
            self._shutdown_workers()
        except Exception:  # noqa: S110 - nothing to raise to from a finalizer
            pass

    def __getstate__(self):
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")
