"""A digest of the kernels' Python sources (no Numba import: the native objects' loader,
``jitgrad/compiler/native.py``, checks it in processes that never import Numba)."""

from __future__ import annotations

import hashlib
import os

__all__ = ["kernel_sources_digest"]

_DIGEST: list = []


def kernel_sources_digest() -> str:
    """SHA-256 of the ``.py`` files of this package (``jitgrad.kernels``, subpackages
    included: names and contents), computed once per process: the sources any compiled
    kernel -- these and the compiler's generated ones -- can inline. Part of every cache
    entry's stamp (``cached.py``) and native object's sidecar."""
    if not _DIGEST:
        root = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256()
        for d, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(d, name)
                    h.update(os.path.relpath(path, root).encode())
                    with open(path, "rb") as f:
                        h.update(hashlib.sha256(f.read()).digest())
        _DIGEST.append(h.hexdigest())
    return _DIGEST[0]
