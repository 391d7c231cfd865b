"""``jitgrad.save`` / ``jitgrad.load`` in PyTorch's file format, so checkpoints move both
ways: a file ``torch.save`` wrote loads here (``state_dict``s, optimizer states, nested
containers of tensors), and a file written here loads in PyTorch (``weights_only=True``
included: it names only PyTorch's allowed globals).

The format (``torch.save`` since PyTorch 1.6) is an uncompressed zip archive: ``data.pkl``,
a pickle of the object in which each tensor is a call of ``torch._utils._rebuild_tensor_v2``
on a storage given by persistent id ``("storage", torch.<Type>Storage, key, location,
numel)``; the storage's bytes are the record ``data/<key>`` (little-endian, aligned to 64
bytes so they can be memory-mapped); ``byteorder``, ``version`` and format records beside.
Views of one array share a storage (its offset and strides are the view's), as in PyTorch.

Writing names PyTorch's globals without importing PyTorch: the pickler is the Python one
with ``save_global`` taught a stand-in for each name (:class:`TorchGlobal`). Reading maps
those names back to jitgrad (:data:`_TORCH_NAMES`); ``weights_only=True`` (PyTorch's default
since 2.6) refuses every other global with PyTorch's error, unless allowed with
:func:`add_safe_globals` / :class:`safe_globals`. bfloat16 storages (common in pretrained
weights) load as float32, with a warning: jitgrad has no bfloat16 storage.
"""

from __future__ import annotations

import collections
import io
import os
import pathlib
import pickle
import struct
import sys
import warnings
import zipfile

import numpy as np

__all__ = ["save", "load", "add_safe_globals", "get_safe_globals", "clear_safe_globals",
           "safe_globals", "TorchGlobal"]


class TorchGlobal:
    """Stands for the PyTorch global ``module.name`` in a pickle jitgrad writes."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __repr__(self) -> str:
        return f"TorchGlobal({self.module}.{self.name})"


_REBUILD_TENSOR = TorchGlobal("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = TorchGlobal("torch._utils", "_rebuild_parameter")
_SIZE = TorchGlobal("torch", "Size")
_DEVICE = TorchGlobal("torch", "device")
_ORDERED_DICT = TorchGlobal("collections", "OrderedDict")

#: NumPy dtype name -> PyTorch's storage class name
_STORAGE_NAMES = {"float32": "FloatStorage", "float64": "DoubleStorage",
                  "float16": "HalfStorage", "int64": "LongStorage", "int32": "IntStorage",
                  "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage",
                  "bool": "BoolStorage", "complex64": "ComplexFloatStorage",
                  "complex128": "ComplexDoubleStorage"}
_STORAGE_GLOBALS = {k: TorchGlobal("torch", v) for k, v in _STORAGE_NAMES.items()}
_BFLOAT16 = "BFloat16Storage"


# --------------------------------------------------------------------------------- save
def _owner(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


class _Storages:
    """The storages written: one per memory block, keyed in order of first use."""

    def __init__(self) -> None:
        self.records: list[tuple[str, np.ndarray]] = []
        self._keys: dict[int, tuple[str, np.ndarray]] = {}
        self._owners: list[np.ndarray] = []  # alive while pickling: their ids stay unique

    def reference(self, a: np.ndarray) -> tuple[str, np.ndarray, int, tuple] | None:
        """(key, flat storage, element offset, element strides) of host array ``a``: its
        owner's block when ``a`` views it with the same dtype and non-negative strides, else
        a contiguous copy of its own."""
        owner = _owner(a)
        item = a.dtype.itemsize
        flat = None
        if (owner.dtype == a.dtype and owner.size and (owner.flags.c_contiguous
                                                        or owner.flags.f_contiguous)
                and all(s >= 0 and s % item == 0 for s in a.strides)):
            flat = owner.reshape(-1, order="A")
            offset_bytes = (a.__array_interface__["data"][0]
                            - owner.__array_interface__["data"][0])
            if offset_bytes % item == 0:
                entry = self._keys.get(id(owner))
                if entry is None:
                    entry = (str(len(self.records)), flat)
                    self._keys[id(owner)] = entry
                    self.records.append(entry)
                    self._owners.append(owner)
                return entry[0], entry[1], offset_bytes // item, tuple(
                    s // item for s in a.strides)
        copy = np.ascontiguousarray(a).reshape(-1)
        key = str(len(self.records))
        self.records.append((key, copy))
        strides = tuple(s // item for s in np.ascontiguousarray(a).strides) if a.ndim else ()
        return key, copy, 0, strides


class _Pickler(pickle._Pickler):  # the Python pickler: its save_global can be taught
    def __init__(self, file, protocol: int, storages: _Storages) -> None:
        super().__init__(file, protocol)
        self._storages = storages
        self._keep_alive: list = []  # objects memoized under a stand-in's entry

    def save_global(self, obj, name=None):
        if isinstance(obj, TorchGlobal):
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
            self.memoize(obj)
            return
        super().save_global(obj, name)

    def save(self, obj, save_persistent_id=True):
        from .devices import device
        from .dtypes import DType
        from .nn.parameter import Parameter
        from .tensor import Size, Tensor

        x = self.memo.get(id(obj))
        if x is not None:
            self.write(self.get(x[0]))
            return
        if isinstance(obj, TorchGlobal):
            self.save_global(obj)
        elif isinstance(obj, _PlainTensor):
            self._save_plain(obj.tensor, requires_grad=False, obj=None)
        elif isinstance(obj, Parameter):
            self._save_reduce_global(_REBUILD_PARAMETER, (
                _PlainTensor(obj), bool(obj.requires_grad), collections.OrderedDict()), obj)
        elif isinstance(obj, Tensor):
            self._save_plain(obj, bool(obj.requires_grad), obj)
        elif type(obj) is Size:
            self._save_reduce_global(_SIZE, (tuple(obj),), obj)
        elif isinstance(obj, DType):
            self.save_global(TorchGlobal("torch", obj.name))
        elif isinstance(obj, device):
            args = (obj.type,) if obj.index is None else (obj.type, obj.index)
            self._save_reduce_global(_DEVICE, args, obj)
        elif isinstance(obj, (dict, list)) and type(obj).__module__.startswith("jitgrad."):
            # jitgrad's own containers (an optimizer's state tracks changes): plain ones in
            # the file, as PyTorch's state_dicts hold
            plain = dict(obj) if isinstance(obj, dict) else list(obj)
            super().save(plain, save_persistent_id)
            self.memo[id(obj)] = self.memo[id(plain)]
            self._keep_alive.append(obj)
        else:
            super().save(obj, save_persistent_id)

    def _save_plain(self, t, requires_grad: bool, obj) -> None:
        """``t`` as PyTorch's ``_rebuild_tensor_v2(storage, offset, size, stride,
        requires_grad, hooks)``."""
        from .devices import to_host

        host = np.asarray(to_host(t._data))
        if host.dtype.name not in _STORAGE_GLOBALS:
            raise TypeError(f"jitgrad.save: no PyTorch storage for dtype {host.dtype}")
        key, flat, offset, strides = self._storages.reference(host)
        location = "cpu" if t.device.type == "cpu" else str(t.device)
        pid = ("storage", _STORAGE_GLOBALS[host.dtype.name], key, location, flat.size)
        args = (_PersistentRef(pid), offset, tuple(host.shape), strides, requires_grad,
                collections.OrderedDict())
        self._save_reduce_global(_REBUILD_TENSOR, args, obj)

    def _save_reduce_global(self, func: TorchGlobal, args: tuple, obj) -> None:
        self.save(func)
        self.save(args)
        self.write(pickle.REDUCE)
        if obj is not None:
            self.memoize(obj)

    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, _PersistentRef) else None


class _PlainTensor:
    """A parameter's data, pickled as a plain tensor (the argument of _rebuild_parameter)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor) -> None:
        self.tensor = tensor


class _PersistentRef:
    __slots__ = ("pid",)

    def __init__(self, pid: tuple) -> None:
        self.pid = pid


def _aligned_info(zf: zipfile.ZipFile, name: str, alignment: int = 64) -> zipfile.ZipInfo:
    """A stored record whose data starts at a multiple of ``alignment`` in the file (an
    extra field of padding after its name)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    start = zf.fp.tell() if zf.fp is not None else 0
    header = 30 + len(name.encode("utf-8"))
    pad = (-(start + header + 4)) % alignment
    info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad  # id "FB", PyTorch's
    return info


def _archive_name(f) -> str:
    if isinstance(f, (str, os.PathLike)):
        stem = pathlib.Path(f).stem
        return stem if stem and stem.isidentifier() else "archive"
    return "archive"


def save(obj, f, pickle_module=pickle, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False
         ) -> None:
    """Save ``obj`` (tensors, ``state_dict``s, optimizer states, containers, any picklable
    object) to ``f`` (a path or a writable binary file) in PyTorch's zip format: PyTorch's
    ``torch.load`` reads what this writes, and :func:`load` reads what ``torch.save``
    writes."""
    if not _use_new_zipfile_serialization:
        raise NotImplementedError("jitgrad.save writes PyTorch's zip format only "
                                  "(_use_new_zipfile_serialization=True)")
    if pickle_module is not pickle:
        raise NotImplementedError("jitgrad.save pickles with the standard pickle module")
    storages = _Storages()
    buf = io.BytesIO()
    _Pickler(buf, pickle_protocol, storages).dump(obj)
    prefix = _archive_name(f)
    opened = isinstance(f, (str, os.PathLike))
    fh = open(f, "wb") if opened else f
    try:
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr(_aligned_info(zf, f"{prefix}/data.pkl"), buf.getvalue())
            zf.writestr(_aligned_info(zf, f"{prefix}/.format_version"), b"1")
            zf.writestr(_aligned_info(zf, f"{prefix}/.storage_alignment"), b"64")
            if not _disable_byteorder_record:
                zf.writestr(_aligned_info(zf, f"{prefix}/byteorder"), sys.byteorder.encode())
            for key, flat in storages.records:
                data = flat.astype(flat.dtype.newbyteorder("<"), copy=False).tobytes()
                zf.writestr(_aligned_info(zf, f"{prefix}/data/{key}"), data)
            zf.writestr(_aligned_info(zf, f"{prefix}/version"), b"3\n")
    finally:
        if opened:
            fh.close()


# --------------------------------------------------------------------------------- load
_SAFE_GLOBALS: list = []


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes and functions in ``load(..., weights_only=True)``."""
    _SAFE_GLOBALS.extend(safe_globals)


def get_safe_globals() -> list:
    """The globals :func:`add_safe_globals` allowed."""
    return list(_SAFE_GLOBALS)


def clear_safe_globals() -> None:
    """Forget every global :func:`add_safe_globals` allowed."""
    _SAFE_GLOBALS.clear()


class safe_globals:  # noqa: N801 - PyTorch's name
    """Context manager: these globals are allowed with ``weights_only=True`` inside it."""

    def __init__(self, safe_globals: list) -> None:
        self.safe_globals = list(safe_globals)

    def __enter__(self):
        _SAFE_GLOBALS.extend(self.safe_globals)
        return self

    def __exit__(self, *exc) -> None:
        for g in self.safe_globals:
            _SAFE_GLOBALS.remove(g)


class _StorageType:
    """A PyTorch storage class named in a file (``torch.FloatStorage``): its dtype."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: np.dtype | None) -> None:
        self.name, self.dtype = name, dtype


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    """PyTorch's tensor record: ``storage`` (a flat array) viewed at ``storage_offset``
    with ``size`` and ``stride`` (elements)."""
    from .creation import from_numpy

    array, device = storage
    item = array.dtype.itemsize
    if len(size) and 0 in size:
        view = np.empty(tuple(size), dtype=array.dtype)
    else:
        view = np.lib.stride_tricks.as_strided(
            array[storage_offset:], shape=tuple(size), strides=tuple(s * item for s in stride))
    t = from_numpy(view)
    if device is not None and device.type != "cpu":
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks=None):
    from .nn.parameter import Parameter

    return Parameter(data, requires_grad=requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    p = _rebuild_parameter(data, requires_grad, backward_hooks)
    for k, v in (state or {}).items():
        setattr(p, k, v)
    return p


def _torch_names() -> dict:
    """(module, name) in a PyTorch file -> the jitgrad object it stands for."""
    from . import dtypes
    from .devices import device
    from .tensor import Size

    names = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
             ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
             ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
             ("torch", "Size"): Size, ("torch", "device"): device,
             ("collections", "OrderedDict"): collections.OrderedDict}
    for np_name, storage in _STORAGE_NAMES.items():
        names[("torch", storage)] = _StorageType(storage, np.dtype(np_name))
    names[("torch", _BFLOAT16)] = _StorageType(_BFLOAT16, None)
    for name in ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8",
                 "bool", "float", "double", "half", "long", "int", "short"):
        names[("torch", name)] = dtypes.to_dtype(name)
    return names


_TORCH_NAMES: dict | None = None
#: what weights_only=True allows besides PyTorch's tensor records (as PyTorch's loader)
_SAFE_BUILTINS = {("builtins", n) for n in ("set", "frozenset", "bytearray", "slice",
                                            "complex", "range")}


def _weights_only_error(module: str, name: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(
        "Weights only load failed. This file can still be loaded, to do so you have two "
        "options, do those steps only if you trust the source of the checkpoint. \n"
        "\t(1) In PyTorch 2.6, we changed the default value of the `weights_only` argument in "
        "`torch.load` from `False` to `True`. Re-running `torch.load` with `weights_only` set "
        "to `False` will likely succeed, but it can result in arbitrary code execution. Do it "
        "only if you got the file from a trusted source.\n"
        "\t(2) Alternatively, to load with `weights_only=True` please check the recommended "
        "steps in the following error message.\n"
        f"\tWeightsUnpickler error: Unsupported global: GLOBAL {module}.{name} was not an "
        f"allowed global by default. Please use `torch.serialization.add_safe_globals"
        f"([{module}.{name}])` or the `torch.serialization.safe_globals([{module}.{name}])` "
        f"context manager to allowlist this global if you trust this class/function.")


def _map_device(location: str, map_location):
    """The device a storage saved at ``location`` loads to (None: the CPU)."""
    from .devices import device

    if map_location is None:
        target = location
    elif isinstance(map_location, dict):
        target = map_location.get(location, location)
    elif callable(map_location) and not isinstance(map_location, (str, device)):
        return map_location  # applied to the rebuilt tensor (see _Unpickler)
    else:
        target = map_location
    dev = device(str(target)) if not isinstance(target, device) else target
    if dev.type == "cuda":
        from . import cuda

        if not cuda.is_available():
            raise RuntimeError(
                "Attempting to deserialize object on a CUDA device but "
                "torch.cuda.is_available() is False. If you are running on a CPU-only "
                "machine, please use torch.load with map_location=torch.device('cpu') to map "
                "your storages to the CPU.")
    return None if dev.type == "cpu" else dev


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive: _Archive, map_location, weights_only: bool) -> None:
        super().__init__(file)
        self._archive = archive
        self._map_location = map_location
        self._weights_only = weights_only
        self._loaded: dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str):
        global _TORCH_NAMES
        if _TORCH_NAMES is None:
            _TORCH_NAMES = _torch_names()
        found = _TORCH_NAMES.get((module, name))
        if found is not None:
            return found
        if self._weights_only:
            for g in _SAFE_GLOBALS:
                if getattr(g, "__module__", None) == module and \
                        getattr(g, "__qualname__", None) == name:
                    return g
            if (module, name) in _SAFE_BUILTINS:
                return super().find_class(module, name)
            raise _weights_only_error(module, name)
        if module.startswith("torch"):
            raise pickle.UnpicklingError(
                f"jitgrad.load: the file names {module}.{name}, a PyTorch object jitgrad "
                f"cannot rebuild (tensors, parameters, state_dicts and containers load; "
                f"pickled PyTorch modules and other objects do not)")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"jitgrad.load: unknown persistent id {pid!r}")
        _, stype, key, location, numel = pid
        array = self._loaded.get(key)
        if array is None:
            array = self._archive.storage(key, stype, numel)
            self._loaded[key] = array
        target = _map_device(str(location), self._map_location)
        if callable(target) and not hasattr(target, "type"):
            target = None  # a map_location function: applied after (see load)
        return array, target


class _Archive:
    """The records of a PyTorch zip checkpoint."""

    def __init__(self, zf: zipfile.ZipFile) -> None:
        self.zf = zf
        names = zf.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
        if not pkl:
            raise RuntimeError("jitgrad.load: the archive has no data.pkl record (not a "
                               "checkpoint torch.save or jitgrad.save wrote)")
        self.prefix = pkl[0][: -len("data.pkl")]
        order = self.prefix + "byteorder"
        self.byteorder = zf.read(order).decode() if order in names else "little"

    def read(self, name: str) -> bytes:
        return self.zf.read(self.prefix + name)

    def storage(self, key: str, stype: _StorageType, numel: int) -> np.ndarray:
        raw = self.read(f"data/{key}")
        end = "<" if self.byteorder == "little" else ">"
        if stype.dtype is None:  # bfloat16: the high half of a float32
            warnings.warn("jitgrad.load: a bfloat16 tensor loads as float32 (jitgrad has no "
                          "bfloat16 storage)", UserWarning, stacklevel=4)
            halves = np.frombuffer(raw, dtype=end + "u2", count=numel)
            return (halves.astype(np.uint32) << 16).view(np.float32)
        dt = stype.dtype.newbyteorder(end) if stype.dtype.itemsize > 1 else stype.dtype
        return np.frombuffer(raw, dtype=dt, count=numel).astype(stype.dtype)


class NotACheckpointError(pickle.UnpicklingError, RuntimeError):
    """A file :func:`load` cannot read: an ``UnpicklingError`` as PyTorch raises for it (and
    a RuntimeError, as jitgrad raised before)."""


def load(f, map_location=None, pickle_module=None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args):
    """Load an object :func:`save` or ``torch.save`` wrote (PyTorch's zip format) from ``f``
    (a path or a readable binary file). ``map_location``: where tensors go (a device or its
    name, a dict from saved to wanted locations, or a function of each tensor);
    ``weights_only`` (default True, as PyTorch's since 2.6): only tensors, containers,
    numbers and the globals :func:`add_safe_globals` allowed."""
    if weights_only is None:
        weights_only = True
    if pickle_module is not None and pickle_module is not pickle:
        raise NotImplementedError("jitgrad.load unpickles with the standard pickle module")
    opened = isinstance(f, (str, os.PathLike))
    fh = open(f, "rb") if opened else f
    try:
        if not zipfile.is_zipfile(fh):
            raise NotACheckpointError(
                "jitgrad.load reads PyTorch's zip checkpoint format (torch.save since PyTorch "
                "1.6); this file is not one (the legacy format, or not a checkpoint)")
        fh.seek(0) if hasattr(fh, "seek") else None
        with zipfile.ZipFile(fh) as zf:
            archive = _Archive(zf)
            unpickler = _Unpickler(io.BytesIO(archive.read("data.pkl")), archive,
                                   map_location, weights_only)
            obj = unpickler.load()
    finally:
        if opened:
            fh.close()
    if callable(map_location) and not isinstance(map_location, (str, dict)) and \
            not hasattr(map_location, "type"):
        obj = _apply_to_tensors(obj, map_location)
    return obj


def _apply_to_tensors(obj, fn):
    """``obj`` with ``fn(tensor, "cpu")`` applied to each tensor in its containers."""
    from .tensor import Tensor

    if isinstance(obj, Tensor):
        return fn(obj, "cpu")
    if isinstance(obj, dict):
        out = type(obj)() if isinstance(obj, collections.OrderedDict) else {}
        for k, v in obj.items():
            out[k] = _apply_to_tensors(v, fn)
        if hasattr(obj, "_metadata"):
            out._metadata = obj._metadata
        return out
    if isinstance(obj, (list, tuple)):
        items = [_apply_to_tensors(v, fn) for v in obj]
        return type(obj)(items) if isinstance(obj, list) or type(obj) is tuple else obj
    return obj
