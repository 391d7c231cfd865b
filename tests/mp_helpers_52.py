"""Functions the child processes of ``tests/test_api_breadth_52.py`` run: the ``spawn``
start method imports them by name, so they live in an importable module (``tests`` is on
``sys.path``)."""

from __future__ import annotations

import os
import sys


def write_square(i: int, path: str) -> None:
    """Write ``i * i`` (computed with jitgrad) to ``<path>.<i>``."""
    import jitgrad

    value = int((jitgrad.tensor(i) * i).item())
    with open(f"{path}.{i}", "w") as fh:
        fh.write(f"{value} {os.getpid()}")


def raise_in_one(i: int, bad: int) -> None:
    """Raise ``ValueError`` in the process of index ``bad``; the others return."""
    if i == bad:
        raise ValueError(f"boom from process {i}")


def exit_with(i: int, code: int) -> None:
    """Exit with status ``code``, without a Python exception."""
    sys.exit(code)


def put_tensor(i: int, queue) -> None:
    """Put ``(i, jitgrad.tensor([i, 1.0]))`` on ``queue`` (pickled across processes)."""
    import jitgrad

    queue.put((i, jitgrad.tensor([float(i), 1.0])))
