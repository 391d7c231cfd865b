"""One decorator for every disk-cached Numba function of jitgrad: ``cached_njit``.

Numba's ``cache=True`` stores an index (``.nbi``) and the compiled code (``.nbc``) per
function. A truncated or corrupt file (a full disk, a killed process on a filesystem without
atomic renames, a bad copy of a cache directory) makes Numba raise while loading it --
``UnpicklingError``, ``EOFError``, LLVM's "Invalid record" -- in every later process that
calls the function. Functions decorated here use :class:`RecoveringCache` instead:

* every data file carries a SHA-256 digest of its payload, checked before anything of it is
  unpickled or handed to LLVM, so in-place corruption of the same length is caught too;
* any failure while loading an index or data file removes that function's cache files and
  reports a cache miss: Numba compiles the function again and writes fresh files.

So a damaged cache costs one recompilation, never a crash.

Numba stamps an entry with its function's source file (modification time and size) only:
a kernel that inlines functions of *other* files (``classifier_head`` inlines
``softmax._log_softmax_block``) would load its old machine code after only those files
changed (and a generated kernel after ``vmath`` changed). The stamp here also holds a
digest of every ``.py`` file of this package (``sources.kernel_sources_digest``, once
per process, ~2 ms), so a change to any of them recompiles the kernels compiled with the old.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pickle
import warnings

from numba import njit
from numba.core.caching import FunctionCache, IndexDataCacheFile

from .sources import kernel_sources_digest

__all__ = ["cached_njit", "RecoveringCache", "STATS"]

#: how many damaged cache entries this process removed (tests read it)
STATS = {"purged": 0}
_DIGEST = 32  # bytes of SHA-256 in front of every data file's payload


class _ChecksummedFile(IndexDataCacheFile):
    """Numba's index + data files, with a digest in front of each data file's payload."""

    def _save_data(self, name, data) -> None:
        payload = self._dump(data)
        with self._open_for_write(self._data_path(name)) as f:
            f.write(hashlib.sha256(payload).digest() + payload)

    def _load_data(self, name):
        path = self._data_path(name)
        with open(path, "rb") as f:
            raw = f.read()
        digest, payload = raw[:_DIGEST], raw[_DIGEST:]
        if len(raw) <= _DIGEST or hashlib.sha256(payload).digest() != digest:
            raise ValueError(f"cache file {path} is damaged (its digest does not match)")
        return pickle.loads(payload)


class RecoveringCache(FunctionCache):
    """Numba's per-function disk cache; a damaged entry is removed and recompiled, and an
    entry compiled with other sources of the function's directory is not loaded."""

    def __init__(self, py_func) -> None:
        super().__init__(py_func)
        cf = self._cache_file
        stamp = (cf._source_stamp, kernel_sources_digest())
        self._cache_file = _ChecksummedFile(cf._cache_path, cf._index_name[:-4], stamp)

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception as exc:  # noqa: BLE001 - any damage: recompile instead
            self.purge(exc)
            return None

    def purge(self, reason: BaseException | None = None) -> None:
        """Remove this function's index and data files."""
        cf = self._cache_file
        base = cf._index_path[:-4]
        removed = 0
        for path in [cf._index_path, *glob.glob(glob.escape(base) + ".*.nbc")]:
            try:
                os.remove(path)
                removed += 1
            except OSError:
                pass
        STATS["purged"] += 1
        warnings.warn(f"jitgrad: removed a damaged Numba cache entry of {self._name} "
                      f"({type(reason).__name__}: {reason}); recompiling it",
                      RuntimeWarning, stacklevel=2)


def cached_njit(**options):
    """``numba.njit(cache=True, **options)`` with :class:`RecoveringCache` as its cache."""
    def decorate(fn):
        disp = njit(cache=True, **options)(fn)
        disp._cache = RecoveringCache(fn)
        return disp
    return decorate
