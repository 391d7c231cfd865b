"""What a ``DataLoader`` worker process runs, as ``torch.utils.data._utils.worker``: the
fetchers (a batch from a map-style dataset's indices, or the next batch of an
``IterableDataset``'s stream; the main process uses them too), the seeding of a worker
(PyTorch's: ``base_seed + id`` for jitgrad's default generator and ``random``,
``_generate_state`` for NumPy's global generator), and the loop that answers the main
process's requests.

Protocol (the main side is ``dataloader._MultiProcessingIter``): the main process puts
``(task_idx, index)`` on a worker's index queue (``index`` the batch's indices, a sample's
index, or None for an ``IterableDataset``), a :class:`ResumeIteration` to start a new
epoch of persistent workers, or None to stop; the worker puts ``(task_idx, payload)`` on
the shared result queue, ``payload`` the pickled batch, a pickled :class:`ExceptionWrapper`
or :class:`IterableStop` (its stream is exhausted; it answers no more requests this
epoch). A batch is pickled in the worker itself, so that an object that cannot cross
processes (a tensor with a graph) raises there and is reported like any other error.
"""

from __future__ import annotations

import io
import os
import pickle
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...tensor import Tensor
from . import worker as _worker

__all__ = ["ExceptionWrapper", "IterableStop", "ResumeIteration", "MapFetcher",
           "IterableFetcher", "worker_loop", "dumps", "MP_STATUS_CHECK_INTERVAL"]

#: seconds between an idle worker's checks that the main process is alive and has not
#: shut it down (its None can be lost when the iterator is freed by the cycle collector,
#: which may finalize the index queue first)
MP_STATUS_CHECK_INTERVAL = 0.25


class KeyErrorMessage(str):
    """A ``str`` that ``repr`` leaves as it is: a ``KeyError`` shows its argument's repr,
    which would print a traceback's newlines as ``\\n``."""

    def __repr__(self) -> str:
        return self


class ExceptionWrapper:
    """An exception raised in a worker (its type and formatted traceback), to raise again
    in the main process."""

    def __init__(self, exc_info=None, where: str = "in background") -> None:
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self) -> None:
        """Raise ``exc_type`` with PyTorch's message: ``Caught ValueError in DataLoader
        worker process 0.\\nOriginal Traceback (most recent call last): ...`` (a
        RuntimeError where the type cannot be built from one string)."""
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        elif getattr(self.exc_type, "message", None):
            raise self.exc_type(message=msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        try:
            raise exception
        finally:  # no cycle through this frame: the iterator is freed with the traceback
            del exception


@dataclass(frozen=True)
class IterableStop:
    """A worker's ``IterableDataset`` copy is exhausted for this epoch."""

    worker_id: int


@dataclass(frozen=True)
class ResumeIteration:
    """Start a new epoch (persistent workers): a fresh fetcher; acknowledged with
    ``(ResumeIteration(), None)``."""

    seed: int | None = None


class MapFetcher:
    """Batches of a map-style dataset: ``fetch(indices)`` is
    ``collate_fn([dataset[i] for i in indices])`` (``dataset.__getitems__(indices)`` when
    the dataset defines it; a :class:`TensorDataset` with the default collation indexed at
    once when ``fast``), or ``collate_fn(dataset[index])`` without auto-collation."""

    def __init__(self, dataset, collate_fn, auto_collation: bool, fast: bool) -> None:
        self.dataset, self.collate_fn = dataset, collate_fn
        self.auto_collation, self.fast = auto_collation, fast

    def fetch(self, index) -> Any:
        """The batch (or converted sample) at ``index``."""
        if not self.auto_collation:
            return self.collate_fn(self.dataset[int(index)])
        rows = self.dataset.batch(index) if self.fast else None
        if rows is not None:
            return list(rows)
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return self.collate_fn(getitems([int(i) for i in index]))
        return self.collate_fn([self.dataset[int(i)] for i in index])


class IterableFetcher:
    """The batches of an ``IterableDataset``'s stream: ``fetch()`` collates the next
    ``batch_size`` samples (the last batch shorter, or dropped with ``drop_last``) or, with
    ``batch_size=None``, converts the next sample; StopIteration once the stream is over."""

    def __init__(self, dataset, collate_fn, batch_size: int | None, drop_last: bool) -> None:
        self.it = iter(dataset)
        self.collate_fn, self.batch_size, self.drop_last = collate_fn, batch_size, drop_last
        self.ended = False

    def fetch(self, index=None) -> Any:
        """The next batch (``index`` is ignored: a stream has none)."""
        if self.ended:
            raise StopIteration
        if self.batch_size is None:
            try:
                sample = next(self.it)
            except StopIteration:
                self.ended = True
                raise
            return self.collate_fn(sample)
        batch = []
        for sample in self.it:
            batch.append(sample)
            if len(batch) == self.batch_size:
                break
        else:
            self.ended = True
        if not batch or (self.drop_last and len(batch) < self.batch_size):
            raise StopIteration
        return self.collate_fn(batch)


class _BatchPickler(pickle.Pickler):
    """A pickler that refuses tensors with a graph, as PyTorch's queues do."""

    def reducer_override(self, obj):
        if isinstance(obj, Tensor) and obj.requires_grad and not obj.is_leaf:
            raise RuntimeError(
                "Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
                "autograd does not support crossing process boundaries.  If you just want to "
                "transfer the data, call detach() on the tensor before serializing (e.g., "
                "putting it on the queue).")
        return NotImplemented


def dumps(obj: Any) -> bytes:
    """``obj`` pickled for the trip from a worker to the main process."""
    buf = io.BytesIO()
    _BatchPickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def _dumps_error(wrapper: ExceptionWrapper) -> bytes:
    try:
        return dumps(wrapper)
    except Exception:  # an exception class the main process cannot import
        wrapper.exc_msg = f"{wrapper.exc_type!r} (unpicklable, raised as RuntimeError): " \
                          f"{wrapper.exc_msg}"
        wrapper.exc_type = RuntimeError
        return dumps(wrapper)


def _generate_state(base_seed: int, worker_id: int) -> list[int]:
    """Four uint32 words seeding NumPy's global generator in worker ``worker_id``: PyTorch's
    ``torch.utils.data._utils.worker._generate_state`` (adapted from NumPy's
    ``SeedSequence``; MIT licence, (c) 2015 Melissa E. O'Neill, (c) 2019 NumPy
    Developers), so that ``np.random`` draws the same numbers in jitgrad's workers as in
    PyTorch's for the same base seed, and not ``random``'s stream."""
    init_a, mult_a, init_b, mult_b = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
    mix_mult_l, mix_mult_r, xshift, mask32 = 0xCA01F9DD, 0x4973F715, 16, 0xFFFFFFFF
    entropy = [worker_id, base_seed & mask32, base_seed >> 32, 0]
    hash_a = init_a

    def hash_(value: int) -> int:
        nonlocal hash_a
        value = (value ^ hash_a) & mask32
        hash_a = (hash_a * mult_a) & mask32
        value = (value * hash_a) & mask32
        return (value ^ (value >> xshift)) & mask32

    def mix(x: int, y: int) -> int:
        result = ((mix_mult_l * x) & mask32) - ((mix_mult_r * y) & mask32)
        result &= mask32
        return (result ^ (result >> xshift)) & mask32

    pool = [hash_(e) for e in entropy]
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hash_(pool[i_src]))
    hash_b, state = init_b, []
    for value in pool:
        value = (value ^ hash_b) & mask32
        hash_b = (hash_b * mult_b) & mask32
        value = (value * hash_b) & mask32
        state.append((value ^ (value >> xshift)) & mask32)
    return state


def seed_worker(base_seed: int, worker_id: int) -> int:
    """Seed this worker's generators as PyTorch's workers are: jitgrad's default generator
    and Python's ``random`` with ``base_seed + worker_id``, NumPy's global generator with
    :func:`_generate_state`. Returns the seed."""
    from ... import random as jrandom

    seed = base_seed + worker_id
    random.seed(seed)
    jrandom.manual_seed(seed)
    np.random.seed(_generate_state(base_seed, worker_id))
    return seed


def worker_loop(iterable: bool, dataset, index_queue, data_queue, done_event,
                fetcher_args: tuple, base_seed: int, init_fn, worker_id: int,
                num_workers: int) -> None:
    """The body of worker process ``worker_id``: seed it, set its :class:`WorkerInfo`, run
    ``init_fn(worker_id)``, then answer requests until told to stop (None), until the main
    process is gone, or at shutdown (``done_event``)."""
    try:
        from ... import threads

        threads.set_num_threads(1)  # as PyTorch's workers: no oversubscribed cores
        seed = seed_worker(base_seed, worker_id)
        _worker._worker_info = _worker.WorkerInfo(id=worker_id, num_workers=num_workers,
                                                  seed=seed, dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"

        def make_fetcher():
            cls = IterableFetcher if iterable else MapFetcher
            return cls(dataset, *fetcher_args)

        init_error = fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher()
        except Exception:
            init_error = ExceptionWrapper(where=where)
        iteration_end = False
        manager_pid = os.getppid()
        while os.getppid() == manager_pid:
            try:
                r = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
            except queue.Empty:
                if done_event.is_set():
                    break
                continue
            if isinstance(r, ResumeIteration):
                data_queue.put((r, None))
                iteration_end = False
                try:
                    fetcher = make_fetcher()
                except Exception:
                    init_error = ExceptionWrapper(where=where)
                continue
            if r is None:
                break
            if done_event.is_set() or iteration_end:
                continue  # shutting down, or exhausted: wait for None
            idx, index = r
            if init_error is not None:
                blob, init_error = _dumps_error(init_error), None
            else:
                try:
                    blob = dumps(fetcher.fetch(index))
                except StopIteration:
                    if not iterable:
                        blob = _dumps_error(ExceptionWrapper(where=where))
                    else:
                        blob = dumps(IterableStop(worker_id))
                        iteration_end = True
                except Exception:
                    blob = _dumps_error(ExceptionWrapper(where=where))
            data_queue.put((idx, blob))
            del blob, idx, index, r
    except KeyboardInterrupt:  # the main process raises it
        pass
    if done_event.is_set():  # the main process reads no more: do not wait to flush
        data_queue.cancel_join_thread()
        data_queue.close()
