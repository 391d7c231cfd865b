"""The default process group on MPI (``MPI.COMM_WORLD``) and its collectives.

Every collective is started non-blocking (``Iallreduce``, ``Ibcast``, ``Iallgather``,
``Ibarrier``) and waited by polling, so a wait longer than the group's ``timeout`` raises
on the rank that waits, naming the operation, instead of hanging. The request stays
pending after a timeout: the job should end (launched with ``python -m mpi4py``, an
uncaught exception aborts every rank), or the ``Work`` of an ``async_op=True`` call can be
waited again. Tensors are written in place and their version counters bumped, as an
in-place op does; tensors that require grad are refused under grad mode with PyTorch's
in-place errors.
"""

from __future__ import annotations

import datetime
import enum
import importlib.util
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..autograd import grad_mode
from ..devices import is_writeable
from ..ops.inplace import check_inplace_allowed
from ..tensor import Tensor

__all__ = [
    "ReduceOp", "Work", "all_gather", "all_reduce", "barrier", "broadcast",
    "destroy_process_group", "get_backend", "get_local_rank", "get_rank", "get_world_size",
    "init_process_group", "is_available", "is_initialized", "is_mpi_available",
]

#: PyTorch's default timeout for non-NCCL process groups.
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)

_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                    "init_process_group.")

# polling a pending request: spin on MPI_Test for this long, as MPI_Wait spins -- MPICH
# progresses only inside MPI calls, and a large allreduce takes many steps (its chunks
# through shared memory), each needing a call on both ranks: sleeping 0.5 ms between tests
# after 10 ms made a 1 MB allreduce take 15-20 ms instead of 0.2. Past it, sleep between
# tests (a rank waiting for one far behind, or for one that never comes: the timeout)
_SPIN_S = 1.0
_SLEEP_S = 0.001


class ReduceOp(enum.Enum):
    """Reductions of :func:`all_reduce` (``AVG``: the sum divided by the world size, floating
    point tensors only)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"


class _Group:
    """The default group: the communicator, its rank and size, the timeout."""

    #: compiled functions guard a group by identity (its sequence number changes per call)
    _jitgrad_guard_by_identity = True

    def __init__(self, mpi: Any, timeout: datetime.timedelta) -> None:
        self.mpi = mpi
        self.comm = mpi.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        local = self.comm.Split_type(mpi.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank = local.Get_rank()
        local.Free()
        self.timeout = timeout
        self.seq = 0

    def dup(self) -> _Group:
        """A group of the same processes on a communicator of its own (``MPI_Comm_dup``, a
        collective call): its collectives never match another group's, so one that a rank
        skips times out instead of pairing with another collective."""
        group = object.__new__(_Group)
        group.__dict__.update(self.__dict__)
        group.comm = self.comm.Dup()
        group.seq = 0
        return group


_GROUP: _Group | None = None


def _group() -> _Group:
    if _GROUP is None:
        raise ValueError(_NOT_INITIALIZED)
    return _GROUP


def is_available() -> bool:
    """True: the package is part of jitgrad (the MPI backend also needs mpi4py, see
    :func:`is_mpi_available`)."""
    return True


def is_mpi_available() -> bool:
    """Whether mpi4py, the MPI backend's binding, can be imported (not importing it)."""
    return importlib.util.find_spec("mpi4py") is not None


def is_initialized() -> bool:
    """Whether :func:`init_process_group` has been called (and not destroyed since)."""
    return _GROUP is not None


def init_process_group(backend: str | None = "mpi", init_method: str | None = None,
                       timeout: datetime.timedelta | None = None, world_size: int = -1,
                       rank: int = -1, **kwargs: Any) -> None:
    """Join the default process group: every process of ``MPI.COMM_WORLD``.

    The rank and world size come from MPI; ``world_size`` and ``rank``, when given, must
    agree with it. ``timeout`` (default 30 minutes) bounds each wait for a collective.
    A process started without ``mpiexec`` is rank 0 of a world of size 1.
    """
    global _GROUP
    if backend is not None and str(backend).lower() != "mpi":
        raise ValueError(f"Invalid backend: '{backend}' (jitgrad.distributed runs on 'mpi')")
    if init_method not in (None, "env://"):
        raise ValueError(f"init_method {init_method!r}: the MPI backend takes its ranks from "
                         "MPI (launch with mpiexec)")
    if _GROUP is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got "
                        f"{type(timeout).__name__}")
    if not is_mpi_available():
        raise RuntimeError("the MPI backend needs mpi4py: pip install 'jitgrad[distributed]' "
                           "(or pip install mpi4py mpich)")
    from mpi4py import MPI

    group = _Group(MPI, timeout)
    for name, given, actual in (("world_size", world_size, group.size),
                                ("rank", rank, group.rank)):
        if given not in (-1, None) and given != actual:
            group.comm.Free()
            raise ValueError(f"init_process_group: {name}={given} but MPI gives {actual}")
    _GROUP = group


def destroy_process_group() -> None:
    """Leave the default process group (MPI itself stays initialised until the process
    exits, so :func:`init_process_group` may be called again)."""
    global _GROUP
    group = _group()
    _GROUP = None
    group.comm.Free()


def get_backend() -> str:
    """The default group's backend: ``"mpi"``."""
    _group()
    return "mpi"


def get_rank() -> int:
    """This process's rank in the default group."""
    return _group().rank


def get_world_size() -> int:
    """The number of processes in the default group."""
    return _group().size


def get_local_rank() -> int:
    """This process's rank among the processes of its node (MPI's shared-memory split)."""
    return _group().local_rank


class Work:
    """A started collective (``async_op=True``): :meth:`wait` finishes it (the tensors are
    written when it returns), :meth:`is_completed` tests it without waiting."""

    def __init__(self, group: _Group, op_name: str, request: Any,
                 finish: Callable[[], None] | None, what: str = "") -> None:
        group.seq += 1
        self._group = group
        self._op_name = f"{op_name} of {what}" if what else op_name
        self._seq = group.seq
        self._request = request
        self._finish = finish
        self._done = False

    def _complete(self) -> None:
        self._done = True
        if self._finish is not None:
            self._finish()
            self._finish = None

    def is_completed(self) -> bool:
        """Whether the collective has finished (finishing it if it just did)."""
        if not self._done and self._request.Test():
            self._complete()
        return self._done

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        """Wait until the collective finishes; raise RuntimeError after ``timeout`` (the
        group's by default). Returns True."""
        if self._done:
            return True
        limit = (timeout if timeout is not None else self._group.timeout).total_seconds()
        start = time.monotonic()
        request = self._request
        while not request.Test():
            waited = time.monotonic() - start
            if waited > limit:
                raise RuntimeError(
                    f"[Rank {self._group.rank}] collective operation timeout: "
                    f"{self._op_name} (SeqNum={self._seq}) ran for {int(waited * 1000)} "
                    f"milliseconds before timing out (timeout {int(limit * 1000)} ms)")
            if waited > _SPIN_S:
                time.sleep(_SLEEP_S)
        self._complete()
        return True


def _run(work: Work, async_op: bool) -> Work | None:
    if async_op:
        return work
    work.wait()
    return None


def _writable(tensor: Tensor, op_name: str) -> np.ndarray:
    """``tensor``'s array, checked as the target of an in-place collective."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op_name}: expected a Tensor, got {type(tensor).__name__}")
    if grad_mode.STATE.enabled and tensor._requires_grad:
        check_inplace_allowed(tensor, True)
        raise RuntimeError(f"{op_name}: the tensor requires grad and has a grad_fn; "
                           "collectives are not recorded by autograd (use .detach())")
    data = tensor._data
    if not is_writeable(data):
        raise RuntimeError(f"{op_name}: the tensor's memory is read-only (an expanded or "
                           "shared tensor); clone() it first")
    return data


def _buffer(data: np.ndarray) -> np.ndarray:
    """A C-contiguous array MPI can read and write: ``data`` itself or a copy."""
    if data.flags.c_contiguous:
        return data if data.ndim else data.reshape(1)
    return np.ascontiguousarray(data)


def _written(tensor: Tensor, data: np.ndarray, buf: np.ndarray) -> None:
    """Copy ``buf`` back into ``data`` if it was a copy; bump the version counter."""
    if not np.shares_memory(buf, data):
        data[...] = buf.reshape(data.shape)
    tensor._vc[0] += 1


def _mpi_op(group: _Group, op: ReduceOp, dtype: np.dtype) -> Any:
    mpi = group.mpi
    if dtype == np.bool_:
        return mpi.LAND if op in (ReduceOp.MIN, ReduceOp.PRODUCT) else mpi.LOR
    return {ReduceOp.SUM: mpi.SUM, ReduceOp.AVG: mpi.SUM, ReduceOp.PRODUCT: mpi.PROD,
            ReduceOp.MIN: mpi.MIN, ReduceOp.MAX: mpi.MAX}[op]


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: None = None,
               async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` across all ranks, in place: every rank ends with the result.

    >>> import jitgrad, jitgrad.distributed as dist
    >>> dist.init_process_group("mpi")
    >>> t = jitgrad.tensor([1.0, 2.0])
    >>> dist.all_reduce(t, op=dist.ReduceOp.AVG)  # a world of one process
    >>> t
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    g = _checked_group(group)
    if not isinstance(op, ReduceOp):
        raise TypeError(f"all_reduce: op must be a ReduceOp, got {op!r}")
    data = _writable(tensor, "all_reduce")
    if op is ReduceOp.AVG and data.dtype.kind not in "fc":
        raise RuntimeError(f"all_reduce: ReduceOp.AVG needs a floating point tensor, got "
                           f"{tensor.dtype}")
    buf = _buffer(data)

    def finish() -> None:
        if op is ReduceOp.AVG:
            np.divide(buf, g.size, out=buf)
        _written(tensor, data, buf)

    return _run(all_reduce_array(buf, op, finish), async_op)


def all_reduce_array(buf: np.ndarray, op: ReduceOp = ReduceOp.SUM,
                     finish: Callable[[], None] | None = None, group: _Group | None = None,
                     what: str = "") -> Work:
    """Start the allreduce of a C-contiguous NumPy array in place (``AVG`` sums: dividing is
    ``finish``'s job); ``finish`` runs when the returned :class:`Work` completes. The
    building block of :func:`all_reduce` and DistributedDataParallel's buckets (``group``: a
    :meth:`_Group.dup` of the default group; ``what``: named by a timeout's error)."""
    g = _group() if group is None else group
    request = g.comm.Iallreduce(g.mpi.IN_PLACE, buf, _mpi_op(g, op, buf.dtype))
    return Work(g, "ALLREDUCE", request, finish, what)


def broadcast_array(buf: np.ndarray, src: int, group: _Group | None = None,
                    what: str = "") -> Work:
    """Start broadcasting rank ``src``'s C-contiguous array ``buf`` into ``buf`` on every
    rank (see :func:`all_reduce_array`)."""
    g = _group() if group is None else group
    return Work(g, "BROADCAST", g.comm.Ibcast(buf, root=src), None, what)


def default_group() -> _Group:
    """The default group (raising PyTorch's error when there is none)."""
    return _group()


def broadcast(tensor: Tensor, src: int, group: None = None,
              async_op: bool = False) -> Work | None:
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank (same shape and dtype
    everywhere)."""
    g = _checked_group(group)
    if not 0 <= src < g.size:
        raise ValueError(f"broadcast: src {src} is not a rank of a world of size {g.size}")
    data = _writable(tensor, "broadcast")
    buf = _buffer(data)
    request = g.comm.Ibcast(buf, root=src)
    return _run(Work(g, "BROADCAST", request, lambda: _written(tensor, data, buf)), async_op)


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: None = None,
               async_op: bool = False) -> Work | None:
    """Fill ``tensor_list[r]`` with rank ``r``'s ``tensor``, on every rank (the list holds
    one tensor per rank, each of ``tensor``'s shape and dtype)."""
    g = _checked_group(group)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"all_gather: expected a Tensor, got {type(tensor).__name__}")
    if len(tensor_list) != g.size:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors; the world "
                         f"size is {g.size}")
    targets = []
    for t in tensor_list:
        out = _writable(t, "all_gather")
        if out.shape != tensor._data.shape or out.dtype != tensor._data.dtype:
            raise ValueError(f"all_gather: the output tensors must match the input tensor "
                             f"(shape {list(tensor.shape)}, {tensor.dtype}); got "
                             f"shape {list(t.shape)}, {t.dtype}")
        targets.append(out)
    send = np.ascontiguousarray(tensor._data)
    recv = np.empty((g.size, *send.shape), send.dtype)
    request = g.comm.Iallgather(send.reshape(-1), recv.reshape(g.size, -1))

    def finish() -> None:
        for t, out, part in zip(tensor_list, targets, recv):
            out[...] = part
            t._vc[0] += 1

    return _run(Work(g, "ALLGATHER", request, finish), async_op)


def barrier(group: None = None, async_op: bool = False) -> Work | None:
    """Wait until every rank has called ``barrier``."""
    g = _checked_group(group)
    return _run(Work(g, "BARRIER", g.comm.Ibarrier(), None), async_op)


def _checked_group(group: None) -> _Group:
    if group is not None:
        raise ValueError("jitgrad.distributed has one process group, the default one: pass "
                         "group=None")
    return _group()
