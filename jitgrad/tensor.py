"""The Tensor: a NumPy array plus autograd state. No maths here — operators are attached by
:mod:`jitgrad.ops.methods`, which delegates every one of them to the op registry."""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from . import devices, dtypes
from ._tensor_str import dtype_suffix_needed, format_tensor
from ._thread_modes import GRAD_OFF, TRACING
from .trace.state import STATE as _TRACE

__all__ = ["Tensor", "Size", "wrap", "alias", "RemovableHandle"]


_CUDA_NUMPY = ("can't convert {} device type tensor to numpy. Use Tensor.cpu() to copy the "
               "tensor to host memory first.")


class Size(tuple):
    """A tensor shape; a tuple that prints like PyTorch's ``torch.Size``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"jitgrad.Size({list(self)})"

    __str__ = __repr__

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    # slices, concatenations and repeats of a Size are Sizes (``x.shape[1:]``, as PyTorch)
    def __getitem__(self, index):
        out = tuple.__getitem__(self, index)
        return Size(out) if type(index) is slice else out

    def __add__(self, other):
        out = tuple.__add__(self, other)
        return out if out is NotImplemented else Size(out)

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(other) + tuple(self))

    def __mul__(self, n):
        out = tuple.__mul__(self, n)
        return out if out is NotImplemented else Size(out)

    __rmul__ = __mul__


class RemovableHandle:
    """Handle returned by ``register_*hook``; ``remove()`` unregisters the hook."""

    __slots__ = ("_container", "_key")
    _next_id = 0

    def __init__(self, container: dict) -> None:
        RemovableHandle._next_id += 1
        self._container = weakref.ref(container) if _weakrefable(container) else lambda: container
        self._key = RemovableHandle._next_id

    @property
    def id(self) -> int:
        return self._key

    def remove(self) -> None:
        c = self._container()
        if c is not None:
            c.pop(self._key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _weakrefable(obj) -> bool:
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


#: bumped whenever a leaf's hooks change (a compiled plan bakes in the hooks of the
#: leaves it captures: its guard reads their hooks again only after a change)
HOOK_EPOCH = [0]


class _HookDict(dict):
    """A dict that can be weakly referenced (hook handles must not keep it alive); adding
    or removing a hook bumps :data:`HOOK_EPOCH`."""

    __slots__ = ("__weakref__",)

    def __setitem__(self, key, value) -> None:
        HOOK_EPOCH[0] += 1
        super().__setitem__(key, value)

    def pop(self, *args):
        HOOK_EPOCH[0] += 1
        return super().pop(*args)

    def __delitem__(self, key) -> None:
        HOOK_EPOCH[0] += 1
        super().__delitem__(key)


def hooks_key(t: Tensor) -> tuple:
    """Which hooks leaf ``t`` has (tensor and post-accumulate-grad hooks, by handle)."""
    return (tuple(t._hooks) if t._hooks else (),
            tuple(t._post_acc_hooks) if t._post_acc_hooks else ())


_NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
    "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See "
    "github.com/pytorch/pytorch/pull/30531 for more information."
)


class Tensor:
    """An n-dimensional array with PyTorch's autograd semantics.

    Hot state lives in slots; rarely-set state (hooks, view base, retain_grad) lives in the
    instance ``__dict__`` with class-level defaults, so creating a tensor stays cheap.

    >>> import jitgrad
    >>> x = jitgrad.tensor(5.0, requires_grad=True)
    >>> y = x ** 3
    >>> y
    tensor(125., grad_fn=<PowBackward0>)
    >>> y.backward()
    >>> x.grad
    tensor(75.)
    """

    __slots__ = ("_data", "_requires_grad", "_grad_fn", "_grad", "_vc", "__dict__",
                 "__weakref__")

    # rarely-set state (instance __dict__ overrides these class defaults)
    _base = None            # the tensor this one is a view of (always the root base)
    _views = None           # a base's views made in grad mode: weak references
    #                         (autograd/view_history.py re-derives them after in-place ops)
    _views_prune_at = 32    # the length of _views at which dead references are dropped
    _view_kind = None       # "grad" / "no_grad": a view made by a view op in that grad
    #                         mode (detach() and .data make none: their writes keep histories)
    _multi_view = None      # an output of unbind/split/chunk made in grad mode (or a view
    #                         of one): ("Unbind", output index), or True for a view of one;
    #                         PyTorch forbids in-place ops on them under autograd
    _output_nr = 0          # which output of grad_fn this tensor is
    _retains_grad = False
    _hooks = None           # leaf tensor hooks: _HookDict id -> fn
    _post_acc_hooks = None  # leaf post-accumulate-grad hooks
    _accumulator = None     # weakref to this leaf's AccumulateGrad node
    _acc_lock = None        # lock of .grad's accumulation (autograd/accumulate.py)
    _is_param = False
    _ones_seed = False      # the implicit gradient backward() made: ones, known without
    #                         reading device memory (autograd/engine._seed)

    __array_priority__ = 1000  # so ndarray (op) Tensor defers to Tensor's reflected ops

    def __init__(self, *args, dtype=None, requires_grad: bool = False, device=None) -> None:
        """PyTorch's legacy constructor (internal code uses ``wrap()``): ``Tensor(2, 3)``
        or ``Tensor(Size)`` an uninitialised tensor of those sizes, ``Tensor(data)`` the data
        converted to the default dtype (``Tensor([1, 2])`` is float32, as PyTorch's), a
        tensor's memory (its dtype kept), ``Tensor()`` an empty one."""
        from .creation import empty, tensor

        sizes = args[0] if len(args) == 1 and isinstance(args[0], Size) else args
        if sizes and all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                         for a in sizes):
            made = empty(*sizes, dtype=dtype, device=device)
        elif len(args) > 1:
            raise TypeError(f"Tensor(): expected sizes (ints) or one sequence of data, got "
                            f"{len(args)} arguments")
        elif args and isinstance(args[0], Tensor) and dtype is None and device is None:
            made = args[0].detach()  # PyTorch: the same memory
        else:
            made = tensor(args[0] if args else [], device=device,
                          dtype=dtypes.get_default_dtype() if dtype is None else dtype)
        self._data = made._data
        self._requires_grad = False
        self._grad_fn = None
        self._grad = None
        self._vc = [0]
        if requires_grad:
            self.requires_grad_(True)

    # ----------------------------------------------------------------------- basic info
    @property
    def data(self) -> Tensor:
        """A tensor sharing storage with this one, detached, with its own version counter."""
        t = alias(self._data)
        if TRACING and _TRACE.tracer is not None:
            _TRACE.tracer.on_detach(t, self)
        return t

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        if TRACING and _TRACE.tracer is not None:  # rebinding an array: nothing a plan can replay
            _TRACE.tracer.graph_break("assigning .data")
        self._data = value._data

    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        """The shape, or the size of one dimension."""
        if dim is None:
            return Size(self._data.shape)
        from .shapes import wrap_dim

        return self._data.shape[wrap_dim(dim, self._data.ndim)]

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    @property
    def dtype(self) -> dtypes.DType:
        return dtypes.from_numpy_dtype(self._data.dtype)

    @property
    def device(self) -> devices.device:
        """The device the tensor's memory is on (``device(type='cpu')`` or ``cuda:0``)."""
        return devices.device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        return not devices.is_cpu_array(self._data)

    @property
    def is_cpu(self) -> bool:
        return devices.is_cpu_array(self._data)

    def get_device(self) -> int:
        """The CUDA device index, or -1 for a CPU tensor (PyTorch's convention)."""
        return -1 if devices.is_cpu_array(self._data) else 0

    def is_floating_point(self) -> bool:
        return self._data.dtype.kind == "f"

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def _version(self) -> int:
        if TRACING and _TRACE.tracer is not None:
            _TRACE.tracer.argument_state(self, "reading ._version")
        return self._vc[0]

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the memory is dense in row-major order, or in ``memory_format``'s
        (``jitgrad.channels_last``: NHWC)."""
        if memory_format is None:
            return self._data.flags.c_contiguous
        from .memory_format import has_layout

        return has_layout(self._data, memory_format)

    def stride(self, dim: int | None = None):
        if TRACING and _TRACE.tracer is not None:
            _TRACE.tracer.reads_strides("reading stride()")
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[dim]

    def __dlpack__(self, *args, **kwargs):
        """DLPack export of the tensor's memory (no copy; detached as PyTorch requires)."""
        if self._requires_grad:
            raise RuntimeError("Can't export tensors that require gradient, use "
                               "tensor.detach()")
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple:
        return self._data.__dlpack_device__()

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA array interface of a CUDA tensor on a GPU (AttributeError otherwise, as
        PyTorch raises for CPU tensors)."""
        d = self._data
        if devices.is_cpu_array(d) or not hasattr(type(d), "__cuda_array_interface__"):
            raise AttributeError(f"Can't get __cuda_array_interface__ on non-CUDA tensor type: "
                                 f"jitgrad.{self.dtype.tensor_type}" if devices.is_cpu_array(d) else
                                 "__cuda_array_interface__: the CUDA simulator has no device "
                                 "memory")
        if self._requires_grad:
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires "
                               "grad. If gradients aren't required, use var.detach() to get "
                               "Variable that doesn't require grad.")
        return d.__cuda_array_interface__

    def data_ptr(self) -> int:
        if TRACING and _TRACE.tracer is not None:  # each call's arrays are its own
            _TRACE.tracer.graph_break("data_ptr() is read (a memory address)")
        d = self._data
        return d.ctypes.data if devices.is_cpu_array(d) else d.data.ptr

    # ------------------------------------------------------------------------ autograd
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self._grad_fn is not None:
            if value:
                raise RuntimeError("you can only change requires_grad flags of leaf variables.")
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        value = bool(value)
        if value and self._data.dtype.kind not in "fc":
            raise RuntimeError("only Tensors of floating point and complex dtype can require "
                               "gradients")
        if TRACING and _TRACE.tracer is not None and value != self._requires_grad:
            _TRACE.tracer.on_requires_grad(self)
        self._requires_grad = value

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place and return self (on a tensor with history, only
        ``True``: nothing to change, as PyTorch's)."""
        if requires_grad and self._grad_fn is not None:
            return self
        if requires_grad and self._data.dtype.kind not in "fc":  # (the setter's text differs)
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.requires_grad = requires_grad
        return self

    def is_inference(self) -> bool:
        """Whether this is an inference tensor: always False. jitgrad's ``inference_mode``
        is ``no_grad`` (tensors made under it are normal tensors: flagging each one would
        cost every op a check), so PyTorch's restrictions on inference tensors do not
        apply either."""
        return False

    @property
    def is_leaf(self) -> bool:
        if TRACING and _TRACE.tracer is not None:
            _TRACE.tracer.argument_state(self, "reading .is_leaf")
        return self._grad_fn is None

    @property
    def grad_fn(self):
        if TRACING and _TRACE.tracer is not None:
            _TRACE.tracer.argument_state(self, "reading .grad_fn")
        return self._grad_fn

    @property
    def grad(self) -> Tensor | None:
        if self._grad_fn is not None and not self._retains_grad and self._grad is None:
            warnings.warn(_NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        tr = _TRACE.tracer
        if tr is not None:
            tr.on_read_grad(self, self._grad)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type "
                    f"{type(value).__name__}"
                )
            if value._data.shape != self._data.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value._data.shape)}' to a "
                    f"tensor of size '{list(self._data.shape)}'. Please ensure that the gradient "
                    "and the tensor are the same size"
                )
            if value._data.dtype != self._data.dtype:
                mine = self.dtype.tensor_type[:-len("Tensor")]  # ("Float": c10's name)
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{value.dtype.cpp_name}' to a "
                    f"tensor with grad_dtype '{mine}'. The gradient must match the tensor's "
                    "grad_dtype (defaults to the tensor's dtype)."
                )
        tr = _TRACE.tracer
        if tr is not None:
            tr.on_set_grad(self, value)
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self.grad = None

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def retain_grad(self) -> None:
        """Populate ``.grad`` for this non-leaf tensor during backward."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if _TRACE.tracer is not None:
            _TRACE.tracer.graph_break("retain_grad() (the .grad of an intermediate tensor)")
        if self._grad_fn is None:
            return
        if not self._retains_grad:
            self._retains_grad = True
            self._grad_fn._add_retain(self._output_nr, self)

    def register_hook(self, hook) -> RemovableHandle:
        """Register ``hook(grad) -> Tensor | None``, run before the gradient is used."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if _TRACE.tracer is not None:
            _TRACE.tracer.graph_break("register_hook() (a tensor hook runs at every backward)")
        if self._grad_fn is not None:
            return self._grad_fn._add_tensor_hook(self._output_nr, hook)
        if self._hooks is None:
            self._hooks = _HookDict()
        handle = RemovableHandle(self._hooks)
        self._hooks[handle.id] = hook
        return handle

    def register_post_accumulate_grad_hook(self, hook) -> RemovableHandle:
        """Register ``hook(tensor)``, run on a leaf after its ``.grad`` was accumulated."""
        if not self._requires_grad:
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient"
            )
        if self._grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        if self._post_acc_hooks is None:
            self._post_acc_hooks = _HookDict()
        handle = RemovableHandle(self._post_acc_hooks)
        self._post_acc_hooks[handle.id] = hook
        return handle

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False,
                 inputs=None) -> None:
        """Accumulate the gradient of this tensor into the ``.grad`` of graph leaves."""
        run = _ENGINE_BACKWARD[0] if _ENGINE_BACKWARD else _engine_backward()
        run(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self) -> Tensor:
        """A tensor sharing storage (and version counter) that is cut from the graph."""
        t = alias(self._data)
        t._vc = self._vc
        if self._base is not None or self._data.base is not None:
            t._base = self._base if self._base is not None else self
        if TRACING and _TRACE.tracer is not None:
            _TRACE.tracer.on_detach(t, self)
        return t

    def detach_(self) -> Tensor:
        """Cut this tensor from the graph in place."""
        if self._base is not None and self._requires_grad and self._grad_fn is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using "
                "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is "
                "set as True, gradients are views of DDP buckets, and hence detach_() cannot "
                "be called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution."
            )
        self._grad_fn = None
        self._requires_grad = False
        return self

    # --------------------------------------------------------------- conversions / Python
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The underlying NumPy array (shared memory; ``force=True``: a CUDA tensor's
        values copied to the host)."""
        if _TRACE.tracer is not None:
            _TRACE.tracer.escape(".numpy()")
        if self._requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        if not devices.is_cpu_array(self._data):
            if force:
                return devices.to_host(self._data)
            raise TypeError(_CUDA_NUMPY.format(self.device))
        return self._data

    def __array__(self, dtype=None, copy=None):
        if _TRACE.tracer is not None:
            _TRACE.tracer.escape("converting a tensor to a NumPy array")
        if self._requires_grad:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        a = self._data
        if not devices.is_cpu_array(a):
            raise TypeError(_CUDA_NUMPY.format(self.device))
        if dtype is not None and a.dtype != dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if _TRACE.tracer is not None:
            _TRACE.tracer.escape(".item()")
        d = self._data
        if d.size != 1:
            raise RuntimeError(f"a Tensor with {d.size} elements cannot be converted to Scalar")
        return d.reshape(()).item() if d.ndim else d.item()

    def tolist(self):
        """The data as (nested) Python lists."""
        if _TRACE.tracer is not None:
            _TRACE.tracer.escape(".tolist()")
        return self._data.tolist()

    def __float__(self) -> float:
        if _TRACE.tracer is not None:
            _TRACE.tracer.escape("float(tensor)")
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(self._data.reshape(()))

    def __int__(self) -> int:
        if _TRACE.tracer is not None:
            _TRACE.tracer.escape("int(tensor)")
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self._data.reshape(()))

    def __index__(self) -> int:
        if _TRACE.tracer is not None:
            _TRACE.tracer.escape("using a tensor as an index")
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._data.reshape(()))

    def __bool__(self) -> bool:
        if _TRACE.tracer is not None:
            _TRACE.tracer.escape("bool(tensor) (an `if` or `while` on a tensor)")
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with "
                               f"{'more than one value' if self._data.size else 'no values'} "
                               f"is ambiguous")
        return bool(self._data.reshape(()))

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        if _TRACE.tracer is not None:
            _TRACE.tracer.escape("printing a tensor")
        suffixes = []
        d = self._data
        if not devices.is_cpu_array(d):
            d = devices.to_host(d)
            suffixes.append(f"device='{self.device}'")
        if dtype_suffix_needed(d.dtype):
            dsuf = f"dtype=jitgrad.{dtypes.from_numpy_dtype(d.dtype).name}"
        else:
            dsuf = None
        if self._grad_fn is not None:
            suffixes.append(f"grad_fn=<{self._grad_fn.name()}>")
        elif self._requires_grad:
            suffixes.append("requires_grad=True")
        return format_tensor(d, suffixes=suffixes, dtype_suffix=dsuf)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if _TRACE.tracer is not None:
            _TRACE.tracer.escape("formatting a tensor")
        if self._data.ndim == 0:  # f"{loss}": its number, as PyTorch's (any spec)
            return format(self.item(), spec)
        if spec:
            raise TypeError("unsupported format string passed to Tensor.__format__")
        return repr(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._data.copy(), self._requires_grad))

    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                "protocol at the moment."
            )
        t = wrap(self._data.copy())
        t._requires_grad = self._requires_grad
        if self._grad is not None:
            t._grad = wrap(self._grad._data.copy())
        memo[id(self)] = t
        return t


def _rebuild(data, requires_grad):
    t = wrap(data)
    t._requires_grad = requires_grad
    return t


_new = object.__new__


def alias(arr: np.ndarray) -> Tensor:
    """A new tensor object over an array that already belongs to a tensor (detach, .data,
    a saved output): not a new value, so the tracer is not told."""
    t = _new(Tensor)
    t._data = arr
    t._requires_grad = False
    t._grad_fn = None
    t._grad = None
    t._vc = [0]
    return t


def mark_view(out: Tensor, of: Tensor) -> Tensor:
    """``out`` views ``of``'s memory: it shares its version counter (an in-place change of
    either is seen by autograd through the other) and its base, as PyTorch's views do. Made
    in grad mode, it is registered on the base (a weak reference), so an in-place change of
    the base or of another view re-derives its history (``autograd/view_history.py``)."""
    out._vc = of._vc
    base = of._base if of._base is not None else of
    out._base = base
    if GRAD_OFF and not (_GRAD_STATE[0] or _grad_state()).enabled:
        out._view_kind = "no_grad"
        return out
    out._view_kind = "grad"
    if of._multi_view is not None:  # (a view of a multi-output view is one too)
        out._multi_view = True
    views = base._views
    if views is None:
        base._views = [_weakref(out)]
    else:
        views.append(_weakref(out))
        if len(views) >= base._views_prune_at:  # dead references dropped: amortised O(1)
            live = base._views = [r for r in views if r() is not None]
            base._views_prune_at = max(32, 2 * len(live))
    return out


_weakref = weakref.ref
_GRAD_STATE: list = [None]  # autograd.grad_mode.STATE, once imported (it imports this module)


def _grad_state():
    from .autograd.grad_mode import STATE

    _GRAD_STATE[0] = STATE
    return STATE


_ENGINE_BACKWARD: list = []


def _engine_backward():
    """``autograd.engine.backward``, imported once (the engine imports this module)."""
    from .autograd.engine import backward

    _ENGINE_BACKWARD.append(backward)
    return backward


def wrap(arr: np.ndarray, requires_grad: bool = False) -> Tensor:
    """Wrap a NumPy array (no copy) as a tensor with no history."""
    tr = _TRACE.tracer
    if tr is not None:
        tr.on_created(arr)
    t = _new(Tensor)
    t._data = arr
    t._requires_grad = requires_grad
    t._grad_fn = None
    t._grad = None
    t._vc = [0]
    return t
