"""CUDA storage: which backend runs, device arrays, transfers, launch sizes.

Two backends, one set of code paths above them:

* ``gpu``: a real GPU through numba-cuda (generated kernels) and CuPy (storage, cuBLAS, the
  NumPy functions jitgrad does not generate: CuPy arrays implement NumPy's
  ``__array_function__``/``__array_ufunc__``, so ``np.matmul(a, b)`` on CuPy arrays runs
  cuBLAS). Installed with ``pip install jitgrad[cuda]``.
* ``sim``: Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` set before ``numba.cuda`` is
  first imported; no GPU, no CuPy). A device array is a :class:`SimArray`, a NumPy array that
  behaves as CuPy's does where jitgrad could tell the difference: NumPy functions and ufuncs
  on it return device arrays (0-d arrays for full reductions, as CuPy returns), and mixing it
  with a host array raises ``TypeError`` as CuPy does; generated kernels run in the
  simulator. CI runs the CUDA test suite this way.

Nothing here is imported by ``import jitgrad``: the first CUDA request loads it.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from .memory import track_sim_buffer

__all__ = ["backend", "unavailable_reason", "CudaUnavailableError", "SimArray",
           "is_device_array", "to_device", "to_host", "empty", "zeros", "kernel_arg",
           "synchronize", "THREADS",
           "max_blocks", "blocks_for", "xp", "require"]

_lock = threading.Lock()
_state: dict = {}


class SimArray(np.ndarray):
    """Device memory under Numba's CUDA simulator: a NumPy array that keeps to CuPy's rules
    (results of NumPy functions stay on the device; host arrays are refused)."""

    def __array_finalize__(self, obj) -> None:
        # a device array whose memory may be new (not a view of a device array): count its
        # buffer for the memory statistics (cuda/memory.py)
        if type(obj) is not SimArray or self.base is None:
            track_sim_buffer(self)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if method == "at":  # CuPy implements no ufunc.at through NumPy's protocol
            return NotImplemented
        args = _unwrap(inputs)
        if out is not None:
            kwargs["out"] = _unwrap(out)
        res = getattr(ufunc, method)(*args, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(res)

    def __array_function__(self, func, types, args, kwargs):
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    @property
    def flags(self) -> CupyFlags:
        """CuPy's flags: ``c_contiguous``, ``f_contiguous``, ``owndata`` and nothing else
        (device memory is never read-only: no ``writeable``; no ``carray``)."""
        f = np.ndarray.flags.__get__(self)
        return CupyFlags(f.c_contiguous, f.f_contiguous, f.owndata)


class CupyFlags:
    """The flags of a CuPy array (``cupy.ndarray.flags``), for :class:`SimArray`."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, c_contiguous: bool, f_contiguous: bool, owndata: bool) -> None:
        self.c_contiguous = c_contiguous
        self.f_contiguous = f_contiguous
        self.owndata = owndata

    def __getitem__(self, name: str) -> bool:
        return getattr(self, {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous",
                              "OWNDATA": "owndata"}[name])


def _unwrap(x):
    t = type(x)
    if t is SimArray:
        return x.view(np.ndarray)
    if t is np.ndarray:
        if x.ndim > 0:
            raise TypeError("Unsupported type <class 'numpy.ndarray'>: a host array cannot "
                            "be mixed with a CUDA array (move it with .cuda() or .to(device))")
        return x
    if t is tuple or t is list:
        return t(_unwrap(v) for v in x)
    if t is dict:
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _wrap(x):
    t = type(x)
    if t is np.ndarray:
        return x.view(SimArray)
    if isinstance(x, np.generic):
        return np.asarray(x).view(SimArray)
    if t is tuple or t is list:
        return t(_wrap(v) for v in x)
    return x


class _SimNamespace:
    """NumPy as CuPy would be under the simulator: the creation and conversion functions
    that take no device array to dispatch on return device arrays; everything else is
    NumPy's (whose functions keep device arrays on the device)."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def _dev(fn):
        def made(*args, **kwargs):
            return _wrap(fn(*_unwrap_any(args), **_unwrap_any(kwargs)))
        made.__name__ = fn.__name__
        return made

    def __init__(self) -> None:
        for name in ("array", "asarray", "ascontiguousarray", "empty", "zeros", "ones", "full",
                     "arange", "eye", "linspace", "frombuffer"):
            setattr(self, name, self._dev(getattr(np, name)))


def _unwrap_any(x):
    """Device arrays as NumPy arrays (host arrays too: creation functions copy them)."""
    t = type(x)
    if t is SimArray:
        return x.view(np.ndarray)
    if t is tuple or t is list:
        return t(_unwrap_any(v) for v in x)
    if t is dict:
        return {k: _unwrap_any(v) for k, v in x.items()}
    return x


SIM_NP = _SimNamespace()


def _numba_cuda_compat() -> None:
    """Settings for numba-cuda, before it first compiles or loads a kernel.

    * numba-cuda 0.30 registers an overload of ``np.row_stack`` when it first loads its
      typing registries (every kernel compile and cache load), and NumPy 2.5 removed that
      name (a deprecated alias of ``np.vstack``): without the alias back, no kernel loads.
    * Launches of fewer than 128 blocks warn of low occupancy (NumbaPerformanceWarning);
      a small tensor's kernel is one block by design, so the warning is turned off.
    * A CuPy array passed to a kernel exports its stream, and numba-cuda synchronises that
      stream for every such argument of every launch (the host waits for the GPU to go
      idle). jitgrad's kernels and CuPy's work all run on the legacy default stream, in
      order, so the synchronisation only costs time and is turned off (work a user puts
      on a non-blocking CuPy stream is not ordered with jitgrad's kernels).
    """
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    try:
        from numba.cuda.core import config
    except ImportError:  # no numba-cuda (_detect says so), or one that keeps its settings
        from numba.core import config  # in numba.core.config
    config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    config.CUDA_ARRAY_INTERFACE_SYNC = 0


def _detect() -> tuple[str | None, str]:
    """(backend, reason it is unavailable)."""
    _numba_cuda_compat()
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        try:
            from numba import cuda
        except ImportError as e:  # pragma: no cover - numba ships a cuda module
            return None, f"numba.cuda cannot be imported: {e}"
        if not _simulated(cuda):
            return None, ("NUMBA_ENABLE_CUDASIM=1 was set after numba.cuda was imported: "
                          "set it before the first CUDA use")
        return "sim", ""
    try:
        from numba import cuda
    except ImportError as e:
        return None, f"numba-cuda is not installed ({e}); pip install jitgrad[cuda]"
    try:
        ok = cuda.is_available()
    except Exception as e:  # a broken driver install
        return None, f"the CUDA driver could not be loaded: {e}"
    if not ok:
        return None, "Found no NVIDIA driver on your system (numba.cuda.is_available() is False)"
    try:
        import cupy  # noqa: F401
    except ImportError as e:
        return None, f"CuPy is not installed ({e}); pip install jitgrad[cuda]"
    return "gpu", ""


def _simulated(cuda) -> bool:
    """Whether ``numba.cuda`` was imported as the simulator."""
    return "simulator" in cuda.jit.__module__


def backend() -> str | None:
    """``"gpu"``, ``"sim"`` or None (no CUDA); decided once per process."""
    st = _state
    if "backend" not in st:
        with _lock:
            if "backend" not in st:
                b, why = _detect()
                st["reason"] = why
                if b == "gpu":
                    import cupy

                    from .memory import install_gpu_peak_tracking

                    try:
                        install_gpu_peak_tracking()
                    except Exception:  # noqa: BLE001 - statistics must never stop CUDA
                        pass  # the peaks are then the values seen at each query
                    st["types"] = (SimArray, cupy.ndarray)
                    st["xp"] = cupy
                else:
                    st["types"] = (SimArray,)
                    st["xp"] = SIM_NP
                st["backend"] = b
    return st["backend"]


def unavailable_reason() -> str:
    """Why CUDA is unavailable ("" when it is available)."""
    backend()
    return _state["reason"]


class CudaUnavailableError(RuntimeError, AssertionError):
    """No CUDA: PyTorch raises ``AssertionError("Torch not compiled with CUDA enabled")``
    there; this is both that and a RuntimeError, so code catching either works."""


def require() -> str:
    """The backend, or PyTorch's error when there is none (:class:`CudaUnavailableError`)."""
    b = backend()
    if b is None:
        raise CudaUnavailableError(f"Torch not compiled with CUDA enabled: jitgrad found no "
                                   f"CUDA device ({_state['reason']})")
    return b


def is_device_array(a) -> bool:
    """Whether ``a`` is CUDA memory."""
    types = _state.get("types")
    return isinstance(a, types) if types is not None else type(a) is SimArray


def xp():
    """The array module of device arrays (CuPy on a GPU; in the simulator, NumPy whose
    creation functions make device arrays)."""
    require()
    return _state["xp"]


def to_device(a) -> object:
    """A device copy of host array ``a`` (a device array is returned as it is)."""
    if is_device_array(a):
        return a
    b = require()
    if b == "gpu":
        import cupy

        return cupy.asarray(a)
    return np.array(a, copy=True, order="K").view(SimArray)


def to_host(a) -> np.ndarray:
    """A host copy of device array ``a`` (waits for the device)."""
    if not is_device_array(a):
        return a
    if type(a) is SimArray:
        return np.array(a.view(np.ndarray), copy=True, order="K")
    return a.get()


def empty(shape, dtype) -> object:
    """An uninitialised device array."""
    if require() == "gpu":
        return _state["xp"].empty(shape, dtype)
    return np.empty(shape, dtype).view(SimArray)


def zeros(shape, dtype) -> object:
    """A device array of zeros."""
    if require() == "gpu":
        return _state["xp"].zeros(shape, dtype)
    return np.zeros(shape, dtype).view(SimArray)


def kernel_arg(a, read_only: bool = False):
    """What a generated kernel is given for device array ``a`` (``read_only``: an input;
    the simulator then copies nothing back into it, which may be a read-only array).

    A host (NumPy) array is refused in the simulator: on a GPU numba-cuda would copy it to
    the device and back at every launch, waiting for the GPU each time -- slow where the
    simulator is silent (a device array that was turned into a host array on the way)."""
    if type(a) is not SimArray:
        if isinstance(a, np.ndarray):
            raise TypeError(f"a host array ({a.dtype}, shape {a.shape}) was passed to a CUDA "
                            "kernel: kernels take device arrays only")
        return a
    if read_only:
        from numba import cuda

        return cuda.In(a.view(np.ndarray))
    return a.view(np.ndarray)


def synchronize() -> None:
    """Wait for every kernel launched so far (nothing to wait for in the simulator)."""
    if backend() == "gpu":
        import cupy

        cupy.cuda.Device().synchronize()


#: threads per block of generated kernels: 256 on a GPU; 16 in the simulator, which runs a
#: Python thread per CUDA thread (32 cost the CUDA suite ~100 s more of its ~6 min). Results
#: never depend on it (grid-stride loops; sums in a fixed order of lanes, whichever thread
#: adds each lane; the kernels' tests run sizes that are not multiples of it).
THREADS = {"gpu": 256, "sim": 16}


def max_blocks() -> int:
    """Blocks of a grid-stride launch: enough to fill a GPU; few in the simulator (one
    block at a time, serially)."""
    return 4 if backend() == "sim" else 8192


def blocks_for(work: int, threads: int) -> int:
    """Blocks of a grid-stride launch of ``threads`` per block over ``work`` items: one
    thread per item, at least one block, at most :func:`max_blocks`."""
    return max(1, min((work + threads - 1) // threads, max_blocks()))
