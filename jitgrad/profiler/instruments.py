"""Where a profiling window records, put in place while it records and taken away after.

While a :class:`~jitgrad.profiler.profile` records, the public op functions (``jitgrad.mm``,
``jitgrad.nn.functional.linear``, ``jitgrad.linalg.*``, ``jitgrad.special.*``) and
``Tensor``'s op methods and operators are replaced by timed wrappers that record an
``aten::<name>`` event per call, as do ``Module.__call__`` (``nn.Module: <class>``), the
optimizers' ``step`` / ``zero_grad`` (``Optimizer.step#<class>.step``), compiled
functions (``Compiled Region: <name>``) and each batch a ``DataLoader`` iterator gives
(``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``); the backward engine records one
``autograd::engine::evaluate_function: <Node>`` event per node it runs (it reads
``jitgrad._profiling.ACTIVE``). Outside a window nothing is wrapped: eager mode's fast paths
pay nothing for the profiler. The events are the calls a user's code makes: jitgrad's own
calls inside an op (a module's ``F.linear``, an op's internal helpers) are events only where
they go through the public names.
"""

from __future__ import annotations

import functools
import sys
import threading
import types

from .._profiling import ACTIVE, now_ns

__all__ = ["install", "uninstall", "event_name"]

_LOCK = threading.Lock()
_PATCHES: list = []  # (owner, attribute, original) to put back

#: Tensor methods that read metadata (not ops: PyTorch's profiler shows none of them)
_NOT_OPS = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "stride", "storage_offset", "data_ptr",
    "element_size", "is_contiguous", "is_floating_point", "is_complex", "is_signed",
    "get_device", "untyped_storage", "storage", "dim_order", "is_pinned", "is_shared",
    "is_set_to", "has_names", "is_inference", "is_conj", "is_neg", "is_nonzero",
    "is_same_size", "tolist", "numpy", "item", "__len__", "__iter__", "__bool__", "__index__",
    "__int__", "__float__", "__complex__", "__format__", "__repr__", "__str__", "__array__",
    "__array_wrap__", "__dlpack__", "__dlpack_device__", "__reduce_ex__", "__deepcopy__",
    "__getstate__", "__setstate__", "__hash__", "__contains__", "__reversed__", "__dir__",
    "requires_grad_", "retain_grad", "register_hook", "register_post_accumulate_grad_hook",
    "backward", "type", "__init__", "__new__", "__del__", "__sizeof__", "__array_function__",
    "__array_ufunc__", "__torch_function__", "share_memory_", "pin_memory", "is_leaf",
})
_DUNDER_OPS = {"__getitem__": "index", "__setitem__": "index_put_", "__invert__": "bitwise_not",
               "__and__": "bitwise_and", "__or__": "bitwise_or", "__xor__": "bitwise_xor",
               "__lshift__": "bitwise_left_shift", "__rshift__": "bitwise_right_shift",
               "__truediv__": "div", "__rtruediv__": "div", "__floordiv__": "floor_divide",
               "__rfloordiv__": "floor_divide", "__mod__": "remainder", "__rmod__": "remainder",
               "__matmul__": "matmul", "__rmatmul__": "matmul", "__pos__": "positive",
               "__rsub__": "rsub", "__rpow__": "pow", "__abs__": "abs"}
#: the jitgrad namespace's functions that are ops (not settings, queries or factories of
#: other objects): defined in these modules
_OP_MODULES = ("jitgrad.ops", "jitgrad.creation", "jitgrad.lowrank", "jitgrad.nn",
               "jitgrad.linalg", "jitgrad.special")
_NOT_OP_PREFIXES = ("is_", "get_", "set_", "can_", "promote_", "result_", "broadcast_sh",
                    "has_")


def event_name(attribute: str) -> str:
    """``aten::<op>`` for a method or function name (``__add__`` -> ``aten::add``,
    ``__iadd__`` -> ``aten::add_``, ``__getitem__`` -> ``aten::index``)."""
    name = _DUNDER_OPS.get(attribute)
    if name is None:
        if attribute.startswith("__i") and attribute.endswith("__") and len(attribute) > 5:
            name = attribute[3:-2] + "_"   # __iadd__ -> add_
        elif attribute.startswith("__r") and attribute.endswith("__") and len(attribute) > 5:
            name = attribute[3:-2]         # __radd__ -> add
        else:
            name = attribute.strip("_")
    return f"aten::{name}"


def _timed(fn, name: str):
    """``fn`` recording one ``name`` event per call while a window records."""
    def profiled(*args, **kwargs):
        rec = ACTIVE[0]
        if rec is None:
            return fn(*args, **kwargs)
        start = now_ns()
        out = None
        try:
            out = fn(*args, **kwargs)
            return out
        finally:
            rec.add(name, start, now_ns(), "cpu_op", args, out)
    functools.update_wrapper(profiled, fn)
    return profiled


def _named_by_self(fn, label):
    """``fn`` (a method) recording ``label(self)`` per call while a window records."""
    def profiled(self, *args, **kwargs):
        rec = ACTIVE[0]
        if rec is None:
            return fn(self, *args, **kwargs)
        start = now_ns()
        try:
            return fn(self, *args, **kwargs)
        finally:
            rec.add(label(self), start, now_ns(), "python_function")
    functools.update_wrapper(profiled, fn)
    return profiled


def _patch(owner, attribute: str, wrapper) -> None:
    _PATCHES.append((owner, attribute, owner.__dict__[attribute]
                     if isinstance(owner, type) else getattr(owner, attribute)))
    setattr(owner, attribute, wrapper)


def _is_op_function(name: str, value) -> bool:
    if name.startswith("_") or isinstance(value, (type, types.ModuleType)) or \
            not callable(value) or name.startswith(_NOT_OP_PREFIXES):
        return False
    module = getattr(value, "__module__", None) or ""
    return module.startswith(_OP_MODULES)


def _patch_namespace(module) -> None:
    seen: dict = {}
    for name, value in list(vars(module).items()):
        if _is_op_function(name, value):
            wrapper = seen.get(id(value))  # aliases (absolute / abs) share one wrapper
            if wrapper is None:
                wrapper = seen[id(value)] = _timed(value, event_name(name))
            _patch(module, name, wrapper)


def _patch_tensor() -> None:
    from ..ops.methods import all_methods
    from ..tensor import Tensor

    names = set(all_methods()) | {"new_zeros", "new_ones", "new_empty", "new_full",
                                  "new_tensor", "__eq__", "__ne__", "multinomial"}
    for name in sorted(names - _NOT_OPS):
        value = Tensor.__dict__.get(name)
        if value is None or isinstance(value, (property, staticmethod, classmethod)):
            continue
        _patch(Tensor, name, _timed(value, event_name(name)))


def _subclasses(cls) -> list:
    out, todo = [], [cls]
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


def _patch_optimizers() -> None:
    from ..optim.optimizer import Optimizer

    for cls in _subclasses(Optimizer):
        for method in ("step", "zero_grad"):
            fn = cls.__dict__.get(method)
            if isinstance(fn, types.FunctionType):
                _patch(cls, method, _most_derived(fn, method))


def _most_derived(fn, method: str):
    """An optimizer method's event, recorded once per call: by the class whose method the
    object's type resolves to (``super().step()`` inside a subclass's step adds none)."""
    def profiled(self, *args, **kwargs):
        rec = ACTIVE[0]
        if rec is None or getattr(type(self), method) is not profiled:
            return fn(self, *args, **kwargs)
        start = now_ns()
        try:
            return fn(self, *args, **kwargs)
        finally:
            cls = type(self).__name__
            rec.add(f"Optimizer.{method}#{cls}.{method}", start, now_ns(), "python_function")
    functools.update_wrapper(profiled, fn)
    return profiled


class _TimedBatches:
    """A data loader's iterator whose every batch is an event (PyTorch's
    ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``) while a window
    records."""

    def __init__(self, it, name: str) -> None:
        self._it = it
        self._name = name

    def __iter__(self):
        return self

    def __next__(self):
        rec = ACTIVE[0]
        if rec is None:
            return next(self._it)
        start = now_ns()
        try:
            return next(self._it)
        finally:
            rec.add(self._name, start, now_ns(), "user_annotation")

    def __getattr__(self, name: str):  # (the loader's own iterator's attributes)
        return getattr(self._it, name)


def _patch_data_loader() -> None:
    from ..utils.data.dataloader import DataLoader

    iterate = DataLoader.__dict__["__iter__"]

    def profiled_iter(self):
        it = iterate(self)
        kind = "_MultiProcessingDataLoaderIter" if self.num_workers > 0 else \
            "_SingleProcessDataLoaderIter"
        return _TimedBatches(it, f"enumerate(DataLoader)#{kind}.__next__")
    functools.update_wrapper(profiled_iter, iterate)
    _patch(DataLoader, "__iter__", profiled_iter)


def install() -> None:
    """Put the timed wrappers in place (once; :func:`uninstall` takes them away)."""
    with _LOCK:
        if _PATCHES:
            return
        import jitgrad

        from ..jit.function import CompiledFunction
        from ..nn import functional
        from ..nn.module import Module

        try:
            _patch_namespace(jitgrad)
            _patch_namespace(functional)
            for sub in ("linalg", "special"):
                _patch_namespace(sys.modules[f"jitgrad.{sub}"])
            _patch_tensor()
            _patch(Module, "__call__", _named_by_self(
                Module.__dict__["__call__"], lambda m: f"nn.Module: {type(m).__name__}"))
            _patch(CompiledFunction, "__call__", _named_by_self(
                CompiledFunction.__dict__["__call__"],
                lambda f: f"Compiled Region: {getattr(f, '__name__', type(f).__name__)}"))
            _patch_optimizers()
            _patch_data_loader()
        except BaseException:
            _restore()
            raise


def uninstall() -> None:
    """Put every original back."""
    with _LOCK:
        _restore()


def _restore() -> None:
    while _PATCHES:
        owner, attribute, original = _PATCHES.pop()
        setattr(owner, attribute, original)
