"""Collective communication between processes, as ``torch.distributed``, on MPI.

Launch one process per rank with MPI (``mpiexec -n 2 python -m mpi4py train.py``; ``-m
mpi4py`` aborts the whole job when a rank raises) and call :func:`init_process_group` in
each; a single process started without ``mpiexec`` is a world of size 1. mpi4py is imported
by :func:`init_process_group` only, so ``import jitgrad`` needs no MPI (install it with
``pip install jitgrad[distributed]``).

>>> import jitgrad
>>> import jitgrad.distributed as dist
>>> dist.is_initialized()
False
"""

from .c10d import (
    ReduceOp,
    Work,
    all_gather,
    all_reduce,
    barrier,
    broadcast,
    destroy_process_group,
    get_backend,
    get_local_rank,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
)

__all__ = [
    "ReduceOp", "Work", "all_gather", "all_reduce", "barrier", "broadcast",
    "destroy_process_group", "get_backend", "get_local_rank", "get_rank", "get_world_size",
    "init_process_group", "is_available", "is_initialized", "is_mpi_available",
]
