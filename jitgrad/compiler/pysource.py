"""One builder for the Python source jitgrad generates at run time.

Call paths, straight-line plans, kernel callers and kernel modules are all generated Python.
Every generated *function* is made here, so each gets:

* a unique name (``run_17``) and a unique pseudo file name (``<jitgrad:run_17>``);
* its own globals dict (the values it refers to, given by the caller);
* a :mod:`linecache` entry, so tracebacks and debuggers show the generated line (removed
  again when the function is garbage-collected);
* a dump on stdout under ``JITGRAD_LOGS=code``.

Generated kernel *modules* are real files (Numba's disk cache needs one); they are written by
:mod:`jitgrad.compiler.cache` and dumped by :func:`log_source` likewise (by plans as they are
built, by eager ops when a kernel is first loaded).
"""

from __future__ import annotations

import itertools
import linecache
import weakref
from collections.abc import Callable, Sequence

from .. import config

__all__ = ["build_function", "log_source"]

_ids = itertools.count(1)


def log_source(title: str, source: str) -> None:
    """Print generated source under ``JITGRAD_LOGS=code``."""
    if "code" in config.log_topics():
        print(f"[jitgrad:code] {title}\n{source}", flush=True)


def build_function(name: str, params: Sequence[str], body: Sequence[str],
                   namespace: dict | None = None) -> Callable:
    """``def <name>_<n>(*params): <body>`` compiled in ``namespace`` (a new dict if None).

    ``body`` holds the lines of the function body, unindented (nested blocks indented by four
    spaces relative to it).
    """
    uid = f"{name}_{next(_ids)}"
    filename = f"<jitgrad:{uid}>"
    lines = [f"def {uid}({', '.join(params)}):"]
    lines += ["    " + line for line in body] or ["    pass"]
    source = "\n".join(lines) + "\n"
    ns = {} if namespace is None else namespace
    exec(compile(source, filename, "exec"), ns)  # noqa: S102 - generated here, trusted
    fn = ns[uid]
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    weakref.finalize(fn, linecache.cache.pop, filename, None)
    log_source(filename, source)
    return fn
