"""``torch.multiprocessing``: the standard :mod:`multiprocessing` API (``Process``,
``Queue``, ``Pool``, ``get_context``, ``set_start_method``...) re-exported unchanged, plus
PyTorch's :func:`spawn` / :func:`start_processes` (``fn(i, *args)`` in ``nprocs``
processes, a child's exception re-raised in the parent as :class:`ProcessRaisedException`
with its traceback) and the sharing-strategy queries.

jitgrad's CPU tensors are NumPy arrays: they travel between processes pickled (copied), and
``Tensor.share_memory_`` does not move them into shared memory, so unlike PyTorch's no
reducer is registered and the strategies below change nothing. :func:`spawn` starts its
processes with the ``"spawn"`` method, as PyTorch's; the re-exported ``Process`` / ``Pool``
use the interpreter's default start method (``fork`` on Linux), as PyTorch's do -- prefer
``get_context("spawn")`` with jitgrad, whose worker threads do not survive ``fork()``.
One module (PyTorch's is a package whose ``spawn`` submodule the function of that name
shadows): loaded on first use (``jitgrad.multiprocessing``)."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from multiprocessing import *  # noqa: F403
from typing import Any

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies",
           "spawn", "start_processes", "ProcessContext", "SpawnContext", "ProcessException",
           "ProcessRaisedException", "ProcessExitedException"]
__all__ += multiprocessing.__all__

if sys.platform in ("darwin", "win32"):
    _sharing_strategy = "file_system"
    _all_sharing_strategies = {"file_system"}
else:
    _sharing_strategy = "file_descriptor"
    _all_sharing_strategies = {"file_descriptor", "file_system"}


def set_sharing_strategy(new_strategy: str) -> None:
    """Select the strategy for sharing CPU tensors, one of
    :func:`get_all_sharing_strategies` (recorded only: jitgrad's tensors are pickled)."""
    global _sharing_strategy
    if new_strategy not in _all_sharing_strategies:
        raise AssertionError(f"invalid sharing strategy {new_strategy!r}, "
                             f"expected one of {_all_sharing_strategies}")
    _sharing_strategy = new_strategy


def get_sharing_strategy() -> str:
    """The current strategy for sharing CPU tensors (``"file_descriptor"`` on Linux)."""
    return _sharing_strategy


def get_all_sharing_strategies() -> set[str]:
    """The sharing strategies this system supports."""
    return _all_sharing_strategies


# ------------------------------------------------------------------ spawn
log = logging.getLogger(__name__)


class ProcessException(Exception):
    """A spawned process failed: ``error_index`` (its index ``i``) and ``error_pid``."""

    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, error_pid: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """Exception raised when a process failed due to an exception raised by the code."""


class ProcessExitedException(ProcessException):
    """Exception raised when a process failed due to signal or exited with a specific code
    (``exit_code``: negative for a signal, ``signal_name`` then its name)."""

    __slots__ = ["exit_code"]

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return (type(self),
                (self.msg, self.error_index, self.error_pid, self.exit_code, self.signal_name))


def _set_parent_death_signal(sig: int) -> None:
    """Linux: deliver ``sig`` to this process when its parent dies (``prctl(2)``
    ``PR_SET_PDEATHSIG``), so non-daemonic children do not outlive a killed parent; a no-op
    elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _wrap(fn: Callable[..., Any], i: int, args: tuple, error_file: str) -> None:
    """The child's entry point: ``fn(i, *args)``; an exception's traceback is pickled to
    ``error_file`` for the parent and the process exits with code 1."""
    _set_parent_death_signal(signal.SIGINT)
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # SIGINT: killed by the parent
    except Exception:
        import traceback

        with open(error_file, "wb") as fh:
            pickle.dump(traceback.format_exc(), fh)
        sys.exit(1)


class ProcessContext:
    """The processes started by :func:`start_processes` (``processes``, ``pids()``) and
    their join."""

    def __init__(self, processes: list, error_files: list[str]) -> None:
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {process.sentinel: index for index, process in enumerate(processes)}

    def pids(self) -> list[int]:
        """The process ids, by index."""
        return [int(process.pid) for process in self.processes]

    def _join_procs_with_timeout(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for process in self.processes:
            process.join(max(0, end - time.monotonic()))

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Wait (up to ``timeout`` seconds; None: until one ends) for the processes. True
        once all have exited successfully, False while some still run. When one exited
        with a non-zero status, the others are terminated (after ``grace_period`` seconds,
        then killed if still alive after another one, 30 s by default) and
        :class:`ProcessRaisedException` (``fn`` raised: the message holds its traceback)
        or :class:`ProcessExitedException` is raised for the first that failed."""
        if len(self.sentinels) == 0:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                error_index = index
                break
        if error_index is None:
            return len(self.sentinels) == 0
        if grace_period is not None:
            self._join_procs_with_timeout(grace_period)
        for process in self.processes:
            if process.is_alive():
                log.warning("Terminating process %s via signal SIGTERM", process.pid)
                process.terminate()
        self._join_procs_with_timeout(30 if grace_period is None else grace_period)
        for process in self.processes:
            if process.is_alive():
                log.warning("Unable to shutdown process %s via SIGTERM , forcefully exiting "
                            "via SIGKILL", process.pid)
                process.kill()
            process.join()

        failed_process = self.processes[error_index]
        error_file = self.error_files[error_index]
        if not os.access(error_file, os.R_OK):
            exitcode = failed_process.exitcode
            if exitcode < 0:
                try:
                    name = signal.Signals(-exitcode).name
                except ValueError:
                    name = f"<Unknown signal {-exitcode}>"
                raise ProcessExitedException(
                    f"process {error_index:d} terminated with signal {name}",
                    error_index=error_index, error_pid=failed_process.pid,
                    exit_code=exitcode, signal_name=name)
            raise ProcessExitedException(
                f"process {error_index:d} terminated with exit code {exitcode:d}",
                error_index=error_index, error_pid=failed_process.pid, exit_code=exitcode)
        with open(error_file, "rb") as fh:
            original_trace = pickle.load(fh)
        try:
            os.unlink(error_file)
        except OSError:
            pass
        msg = f"\n\n-- Process {error_index:d} terminated with the following error:\n"
        msg += original_trace
        raise ProcessRaisedException(msg, error_index, failed_process.pid)


class SpawnContext(ProcessContext):
    """The deprecated name of :class:`ProcessContext`."""

    def __init__(self, processes: list, error_files: list[str]) -> None:
        warnings.warn("SpawnContext is renamed to ProcessContext since 1.4 release.",
                      stacklevel=2)
        super().__init__(processes, error_files)


def start_processes(fn: Callable[..., Any], args: tuple = (), nprocs: int = 1,
                    join: bool = True, daemon: bool = False,
                    start_method: str = "spawn") -> ProcessContext | None:
    """Start ``nprocs`` processes (``multiprocessing.get_context(start_method)``) running
    ``fn(i, *args)``, ``i`` the process index. ``join``: wait for all of them (see
    :meth:`ProcessContext.join`) and return None; otherwise return the
    :class:`ProcessContext`. ``fn`` must be importable by the children (defined at the top
    level of a module) for ``"spawn"`` / ``"forkserver"``."""
    mp = multiprocessing.get_context(start_method)
    error_files: list[str] = []
    processes = []
    for i in range(nprocs):
        # each process gets a file to write its traceback to; the file existing tells an
        # exception from an expected shutdown
        tf = tempfile.NamedTemporaryFile(prefix="jitgrad-errorfile-", suffix=".pickle",
                                         delete=False)
        tf.close()
        os.unlink(tf.name)
        process = mp.Process(target=_wrap, args=(fn, i, args, tf.name), daemon=daemon)
        process.start()
        error_files.append(tf.name)
        processes.append(process)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn: Callable[..., Any], args: tuple = (), nprocs: int = 1, join: bool = True,
          daemon: bool = False, start_method: str = "spawn") -> ProcessContext | None:
    """Spawn ``nprocs`` processes that run ``fn(i, *args)`` (``i`` the process index) with
    the ``"spawn"`` start method; ``fn`` must be defined at the top level of a module. When
    one exits with a non-zero status the others are killed and an exception is raised
    with the cause (a child's exception: :class:`ProcessRaisedException` holding its
    traceback). Returns None when ``join``, else the :class:`ProcessContext`.
    ``start_method`` is deprecated: any other value warns and ``"spawn"`` is used (see
    :func:`start_processes`)."""
    if start_method != "spawn":
        msg = (f"This method only supports start_method=spawn (got: {start_method}).\n"
               "To use a different start_method use:\n\t\t"
               " torch.multiprocessing.start_processes(...)")
        warnings.warn(msg, FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
