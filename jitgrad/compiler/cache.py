"""Content-addressed modules of generated kernels.

Each kernel's module source is hashed (with the codegen version, jitgrad/numba/llvmlite
versions and a digest of the kernel math it inlines) and written once to
``<cache dir>/jg_<hash>.py`` — to a temporary name first, then ``os.replace``d, so readers never
see half a file. The module is imported from that path and registered in ``sys.modules``
under its hash name (Numba's ``cache=True`` keys its on-disk cache on the module file and
needs the module importable), so a new process that meets a graph it has seen compiles
nothing. A file whose content does not match its hash (corrupt, truncated) is rewritten.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path

from .. import config

__all__ = ["load_module", "module_path", "cache_root", "user_fallback_root", "STATS",
           "CODEGEN_VERSION", "reset_stats", "math_sources_digest"]

CODEGEN_VERSION = "5"
STATS = {"modules_written": 0, "modules_loaded": 0, "modules_rewritten": 0}
_lock = threading.Lock()
_loaded: dict = {}
_fallback_root: str | None = None


def reset_stats() -> None:
    for k in STATS:
        STATS[k] = 0


def math_sources_digest() -> str:
    """Hash of the code generated modules import: the kernel math they inline (CPU and
    CUDA) and the cached-function decorator (Numba keys its disk cache on the generated
    file's timestamp and would not notice a change there)."""
    import jitgrad.kernels as k

    root = Path(k.__file__).parent
    h = hashlib.sha256()
    cuda_math = Path(__file__).parent.parent / "cuda" / "device_math.py"
    for p in sorted([root / "scalar.py", root / "cached.py", root / "mathtable.py",
                     cuda_math, *(root / "vmath").glob("*.py")]):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _versions() -> str:
    # the distributions' versions, not numba.__version__: importing Numba costs 0.2 s, which
    # a process running only native kernel objects (native.py) never pays
    from importlib.metadata import version

    from .. import __version__

    return f"{CODEGEN_VERSION}|{__version__}|{version('numba')}|{version('llvmlite')}|" \
           f"{math_sources_digest()}"


_VERSIONS: str | None = None


def _writable_dir(root: str) -> bool:
    """Create ``root`` if needed and check that this process can write files there."""
    try:
        os.makedirs(root, exist_ok=True)
        probe = os.path.join(root, f".probe{os.getpid()}")
        with open(probe, "w") as f:
            f.write("")
        os.remove(probe)
        return True
    except OSError:
        return False


def user_fallback_root() -> str:
    """The one per-user kernel directory used when the configured cache dir cannot be
    written: ``<tempdir>/jitgrad-<uid>/kernels``, shared by this user's processes (so they
    reuse each other's kernels instead of compiling them again)."""
    uid = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return os.path.join(tempfile.gettempdir(), f"jitgrad-{uid}", "kernels")


def _own_private_dir(path: str) -> bool:
    """Whether ``path`` is a directory of this user that no one else can write (a shared temp
    dir: another user must not be able to plant modules this process would import)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o022:
        return False
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


def _fallback(configured: str) -> str:
    """The per-user fallback directory (created private), or, when even that is unusable
    (owned by someone else, not writable), a temporary directory removed at exit."""
    global _fallback_root
    if _fallback_root is not None:
        return _fallback_root
    root = user_fallback_root()
    parent = os.path.dirname(root)
    try:
        os.makedirs(parent, mode=0o700, exist_ok=True)
    except OSError:
        pass
    if _own_private_dir(parent) and _writable_dir(root):
        _fallback_root = root
    else:
        import atexit
        import shutil

        root = tempfile.mkdtemp(prefix="jitgrad-kernels-")
        atexit.register(shutil.rmtree, root, True)
        _fallback_root = root
    if "cache" in config.log_topics():
        print(f"[jitgrad:cache] {configured} is not writable; kernels are cached in {root}",
              flush=True)
    return _fallback_root


def cache_root(override: str | None = None) -> str:
    """The kernel cache directory (created). When the configured one cannot be written, the
    per-user :func:`user_fallback_root`, one directory reused by every process of the user."""
    root = os.path.join(override or config.cache_dir(), "kernels")
    if _writable_dir(root):
        return root
    return _fallback(root)


def _digest(source: str) -> str:
    global _VERSIONS
    if _VERSIONS is None:
        _VERSIONS = _versions()
    return hashlib.sha256((_VERSIONS + "\n" + source).encode()).hexdigest()[:24]


def module_path(source: str, cache_dir: str | None = None) -> str:
    """Where the module with ``source`` lives in the cache (whether written yet or not)."""
    return os.path.join(cache_root(cache_dir), f"jg_{_digest(source)}.py")


def load_module(source: str, cache_dir: str | None = None):
    """Import the module with ``source`` (writing it to the cache first if needed)."""
    h = _digest(source)
    name = f"jg_{h}"
    with _lock:
        mod = _loaded.get(name)
        if mod is not None:
            return mod
        root = cache_root(cache_dir)
        path = os.path.join(root, name + ".py")
        stamped = f"# jitgrad generated kernel module {h}\n" + source
        if not _is_intact(path, stamped):
            if os.path.exists(path):
                STATS["modules_rewritten"] += 1
            _atomic_write(path, stamped)
            STATS["modules_written"] += 1
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception:
            sys.modules.pop(name, None)
            raise
        STATS["modules_loaded"] += 1
        _loaded[name] = mod
        return mod


def _is_intact(path: str, content: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read() == content
    except (OSError, UnicodeDecodeError):
        return False


def _atomic_write(path: str, content: str) -> None:
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
