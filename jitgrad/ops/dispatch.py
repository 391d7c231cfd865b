"""Eager execution of registered ops: run the forward, then record a backward node.

The element-wise paths (:func:`unary`, :func:`binary`) are the per-op hot path of eager mode,
so they avoid generic machinery: no kwargs, no per-op dicts unless the op has params, one
output tensor and one node object. Every other op goes through :func:`call`.
"""

from __future__ import annotations

import sys

import numpy as np

from .. import dtypes
from .._thread_modes import GRAD_OFF, TRACING
from ..autograd import grad_mode
from ..autograd.node import edge, make_node, save_input, save_output
from ..devices import check_same_device, is_cpu_array
from ..shapes import broadcast_many, broadcast_shapes
from ..tensor import Tensor, mark_view, wrap
from ..trace.numbers import TracedFloat
from ..trace.numpy_args import base_array
from ..trace.state import STATE as _TRACE
from . import complex_ops, eager_kernels, native
from .registry import BOOL, FLOAT, OpDef

__all__ = ["call", "unary", "binary", "elementwise", "record", "recording", "as_tensor_arg"]

_STATE = grad_mode.STATE
_DUAL = grad_mode.DUAL_LEVEL
note_untracked = grad_mode.note_untracked
_new = object.__new__
_from_np = dtypes.from_numpy_dtype
_SCALARS = (int, float, bool)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)
_modules = sys.modules


def record(op: OpDef, out: Tensor, inputs: tuple, params: dict | None, cdt=None) -> Tensor:
    """Attach a backward node for ``op`` to ``out`` if grad mode is on and an input needs it
    (and tell the tracer, when ``jitgrad.compile`` is tracing, that ``op`` ran)."""
    tr = _TRACE.tracer if TRACING else None
    if tr is not None:
        tr.on_op(op, out, inputs, params, cdt)
    if (GRAD_OFF and not _STATE.enabled) or op.vjp is None:
        if TRACING and _DUAL[0] is not None and not _STATE.enabled:
            note_untracked(inputs)  # (forward AD: a tangent this op would lose)
        return out
    for t in inputs:  # (no input requiring grad, no edge: nothing to record)
        if type(t) is Tensor and t._requires_grad:
            break
    else:
        return out
    if out._data.dtype.kind != "f":
        if out._data.dtype.kind == "c":  # (a view or copy of a complex tensor)
            return complex_ops.attach(op, out, inputs, params)
        return out
    edges = tuple(edge(t) if type(t) is Tensor else None for t in inputs)
    _attach(op, params, out, edges, tuple((t._data.shape, t._data.dtype) if type(t) is Tensor
                                          else None for t in inputs), _saved(op, inputs, out))
    return out


def recording() -> bool:
    """Whether an op run now on this thread may record anything: grad mode on (a node, for
    inputs that require grad) or a tracer active (``jitgrad.compile``). When False, an op's
    result is all it leaves: a gradient rule run by ``backward()`` (grad mode off, no
    ``create_graph``) may then skip steps whose only effect would be recorded."""
    return not GRAD_OFF or _STATE.enabled or (TRACING and _TRACE.tracer is not None)


def _saved(op: OpDef, inputs: tuple, out: Tensor):
    """The entries ``op``'s VJP rule needs saved: inputs with their versions (numbers as
    they are), the output as array + version counter; None when it needs none."""
    if not (op.save or op.save_out):
        return None
    sv = [None] * (len(inputs) + op.save_out)
    skip = {i for i, j in op.save_for
            if type(inputs[j]) is not Tensor or not inputs[j]._requires_grad}
    for i in op.save:
        if i in skip:
            continue
        t = inputs[i]
        sv[i] = save_input(t) if type(t) is Tensor else t
    if op.save_out:
        out._requires_grad = True  # a saved output records that it requires grad
        sv[-1] = save_output(out)
    return tuple(sv)


def _attach(op: OpDef, params, out: Tensor, edges: tuple, in_meta, saved, cls=None) -> None:
    """Make ``op``'s node (of class ``cls``, by default the op's) and make it ``out``'s
    ``grad_fn``."""
    node = make_node(cls or op.node_cls or op.node_class_for(params), edges, saved, in_meta)
    node.op = op
    node.params = params
    out._requires_grad = True
    out._grad_fn = node


def as_tensor_arg(x, name: str = "input") -> Tensor:
    """Accept tensors; convert NumPy arrays and sequences (never scalars) to tensors."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return wrap(x if type(x) is np.ndarray else base_array(x))
    from ..creation import tensor

    try:
        return tensor(x)
    except (TypeError, ValueError, RuntimeError):  # (tensor(None): "Could not infer dtype")
        raise TypeError(f"{name} must be a Tensor, got {type(x).__name__}") from None


def call(op: OpDef, inputs: tuple, params: dict | None = None, view_of: Tensor | None = None
         ) -> Tensor:
    """Run a non-element-wise op eagerly (``op.fwd`` on arrays) and record its node.

    ``view_of``: the output shares memory with this input (movement ops), so it shares its
    version counter and base, as PyTorch views do.
    """
    arrays = [t._data for t in inputs]
    for a in arrays:
        dt = a.dtype
        if dt is not _F32 and dt is not _F64 and dt.kind == "c":
            return complex_ops.call(op, inputs, params, view_of)
    if len(inputs) > 1:
        _same_device(inputs)
    fwd = op.fwd or op.ref
    res = fwd(*arrays, **params) if params else fwd(*arrays)
    out = wrap(res)
    if view_of is not None and res.base is not None:
        mark_view(out, view_of)
    return record(op, out, inputs, params)


def _on_one_device(a: Tensor, b: Tensor) -> tuple:
    """``(a, b)`` on one device, or PyTorch's same-device error. Its exception: a 0-dim CPU
    tensor combines with a CUDA tensor (as a number would), moved there by the
    differentiable ``to_device``. (One GPU: two device arrays share it.)"""
    from .copies import to_device

    ca, cb = is_cpu_array(a._data), is_cpu_array(b._data)
    if ca == cb:
        return a, b
    if ca and a._data.ndim == 0:
        return to_device(a, b.device), b
    if cb and b._data.ndim == 0:
        return a, to_device(b, a.device)
    check_same_device((a._data, b._data))  # raises
    return a, b


def _same_device(tensors) -> None:
    """PyTorch's error when tensors (all of type Tensor) live on two devices."""
    for t in tensors:
        if type(t._data) is not np.ndarray:
            check_same_device([t._data for t in tensors])
            return


# ------------------------------------------------------------------------ element-wise
def _dtype_of(op: OpDef, a, b=None):
    """(compute dtype, output dtype) for an element-wise op on tensors/scalars."""
    if b is None:
        d = a.dtype if type(a) is Tensor else dtypes.scalar_dtype(a)
    elif type(a) is Tensor and type(b) is Tensor:
        da, db = a._data.dtype, b._data.dtype
        if da is db or da == db:
            d = _from_np(da)
        else:
            d = dtypes.promote(_from_np(da), a._data.ndim > 0, _from_np(db), b._data.ndim > 0)
    elif type(a) is Tensor:
        d = dtypes.promote_scalar(_from_np(a._data.dtype), b)
    else:
        d = dtypes.promote_scalar(_from_np(b._data.dtype), a)
    rule = op.dtype_rule
    if rule == FLOAT and d.category < 2:
        d = dtypes.get_default_dtype()
    return d, (dtypes.bool_ if rule == BOOL else d)


def _operand(x, np_dtype, wrap_ints: bool = False):
    """Array (cast when needed) or NumPy scalar of ``np_dtype`` for a kernel argument;
    ``wrap_ints``: an int out of an integer dtype's range wrapped (a binary op's number
    operand, as PyTorch's), else OverflowError."""
    if type(x) is Tensor:
        a = x._data
        return a if a.dtype == np_dtype else a.astype(np_dtype)
    return number_operand(x, np_dtype) if wrap_ints else np_dtype.type(x)


def number_operand(x, np_dtype):
    """A recorded number operand as ``np_dtype`` (an int outside an integer dtype's range
    wrapped, as the eager op that recorded it did)."""
    try:
        return np_dtype.type(x)
    except OverflowError:
        return wrapped_int(x, np_dtype)


def wrapped_int(x: int, np_dtype):
    """A Python int out of an integer dtype's range as the dtype holds it, wrapped modulo
    ``2**bits`` (PyTorch's cast of a number operand: ``int8 + 200`` is ``int8 + -56``)."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype.kind not in "iu" or type(x) is not int:
        raise OverflowError(f"Python integer {x} out of bounds for {np_dtype.name}")
    bits = 8 * np_dtype.itemsize
    v = x % (1 << bits)
    if np_dtype.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return np_dtype.type(v)


def _check_bool_arith(op: OpDef, a, b) -> None:
    flags = [(type(x) is Tensor and x._data.dtype == np.bool_) or type(x) is bool
             for x in (a, b)]
    if all(flags):
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` "
            "or `logical_xor()` operator instead."
        )
    if any(flags):
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )


def _finish(op: OpDef, res, params, a, b, same_meta: bool, cdt) -> Tensor:
    """Wrap an element-wise result and record its node (one or two inputs)."""
    out = _new(Tensor)
    out._data = res
    out._requires_grad = False
    out._grad_fn = None
    out._grad = None
    out._vc = [0]
    tr = _TRACE.tracer if TRACING else None  # (the lists of _thread_modes: one global read)
    if tr is not None:
        tr.on_op(op, out, (a,) if b is _NO_ARG else (a, b), params, cdt)
    if (GRAD_OFF and not _STATE.enabled) or op.vjp is None:
        if TRACING and _DUAL[0] is not None and not _STATE.enabled:
            note_untracked((a,) if b is _NO_ARG else (a, b))
        return out
    ta = type(a) is Tensor
    ea = edge(a) if ta else None
    if b is _NO_ARG:
        if ea is None or res.dtype.kind != "f":
            return out
        edges = (ea,)
        in_meta = None if same_meta else ((a._data.shape, a._data.dtype),)
    else:
        tb = type(b) is Tensor
        eb = edge(b) if tb else None
        if (ea is None and eb is None) or res.dtype.kind != "f":
            return out
        edges = (ea, eb)
        in_meta = None if same_meta else (
            (a._data.shape, a._data.dtype) if ta else None,
            (b._data.shape, b._data.dtype) if tb else None)
    node = make_node(op.node_cls or op.node_class_for(params), edges, _saved(
        op, (a,) if b is _NO_ARG else (a, b), out) if (op.save or op.save_out) else None,
        in_meta)
    node.op = op
    node.params = params
    out._requires_grad = True
    out._grad_fn = node
    return out


_NO_ARG = object()
_PAR_MIN = eager_kernels.HOT_MIN_SIZE  # from here the pool may run the kernel
_PART = (1 << eager_kernels.CHUNK_SHIFT) - 1   # n + _PART >> _SHIFT: a flat kernel's parts
_SHIFT = eager_kernels.CHUNK_SHIFT
_run_kernel = eager_kernels.run_kernel
_broadcast_pair = eager_kernels.broadcast_pair
_empty = np.empty
_ndarray = np.ndarray
_MISSING = object()


def _launch(k, out, first, second, params, op, dt) -> None:
    """A flat kernel call off the fastest path: arrays of any ndim (flattened), the op's
    params as scalar arguments, the pool for large outputs."""
    n = out.size
    args = (first.reshape(-1),) if second is _NO_ARG else (
        first.reshape(-1), second.reshape(-1) if type(second) is _ndarray else second)
    if params:
        args += tuple(dt.type(params[p]) for p in op.params)
    if n < _PAR_MIN:
        k(0, (n + _PART) >> _SHIFT, n, *args, out.reshape(-1))
    else:
        _run_kernel(k, n, (*args, out.reshape(-1)))


def unary(op: OpDef, a: Tensor, params: dict | None = None) -> Tensor:
    """Eager element-wise op with one tensor input (in C where ``jitgrad._fastops`` is
    built: its common case, see :mod:`jitgrad.ops.native`)."""
    if op not in _unary_seen:
        _unary_seen.add(op)
        native.register_unary(op)
    ad = a._data
    dt = ad.dtype
    ks = op.fast_kernels.get(dt, _MISSING) if (not TRACING or _TRACE.tracer is None) and \
        type(ad) is _ndarray else None
    if ks is _MISSING:
        ks = eager_kernels.fast_kernels(op, dt)
    if ks is not None:
        out = _empty(ad.shape, ks[2])
        n = out.size
        if ks[3] is None and n < _PAR_MIN and _native_unary:
            eager_kernels.load_entry(op, dt, ks, 3)  # (the C path calls it for every shape)
        if ad.ndim == 1 and n < _PAR_MIN and not params:  # the common case, unrolled
            if ad.base is None or ad.flags.carray:  # the kernel's entry point (flat_entry)
                (ks[3] or eager_kernels.load_entry(op, dt, ks, 3))(
                    0, (n + _PART) >> _SHIFT, n, ad, out)
            else:
                ks[0](0, (n + _PART) >> _SHIFT, n, ad, out)
        else:
            _launch(ks[0], out, ad, _NO_ARG, params, op, dt)
        return _finish(op, out, params, a, _NO_ARG, True, dt)
    if dt.kind == "f" and type(ad) is not _ndarray:
        res = _device_same_layout(op, (ad,), params)
        if res is not None:
            return _finish(op, res, params, a, _NO_ARG, res.dtype == dt, dt)
    if dt.kind == "c":
        return complex_ops.elementwise(op, (a,), params)
    if op.dtype_rule == FLOAT and dt.kind != "f":
        cdt = dtypes.get_default_dtype().np
        arr = ad.astype(cdt)
    else:
        cdt = dt
        arr = ad
    res = eager_kernels.run(op, (arr,), params, cdt, np.bool_ if op.dtype_rule == BOOL else cdt)
    return _finish(op, res, params, a, _NO_ARG, res.dtype == dt, cdt)


_unary_seen: set = set()
_unary_py = unary
unary = native.unary_function(_unary_py)  # noqa: F811 - the C form, where built
_native_unary = unary is not _unary_py


def binary(op: OpDef, a, b, params: dict | None = None) -> Tensor:
    """Eager element-wise op with two inputs (tensors or Python scalars, one a tensor)."""
    if type(a) is Tensor:
        ad = a._data
        dt = ad.dtype
        tb = type(b)
        if tb is Tensor:
            second = b._data
            same = (dt is second.dtype or dt == second.dtype) and ad.shape == second.shape
            k = 0
        else:  # float tensor (op) Python number: stays in the tensor's dtype
            same = (tb is float or tb is int) and dt.kind == "f"
            second = dt.type(b) if same else None
            k = 1
        if same and type(ad) is _ndarray and (k == 1 or type(second) is _ndarray):
            ks = op.fast_kernels.get(dt, _MISSING) if (
                not TRACING or _TRACE.tracer is None) else None
            if ks is _MISSING:
                ks = eager_kernels.fast_kernels(op, dt)
            n = ad.size
            if ks is not None and (n < _BY_VALUE_MIN or not _broadcast_value(ad, second, k)):
                out = _empty(ad.shape, ks[2])
                if ad.ndim == 1 and n < _PAR_MIN and not params:  # the common case
                    if (ad.base is None or ad.flags.carray) and (k == 1 or (
                            second.base is None or second.flags.carray)):
                        (ks[k + 3] or eager_kernels.load_entry(op, dt, ks, k + 3))(
                            0, (n + _PART) >> _SHIFT, n, ad, second, out)
                    else:
                        ks[k](0, (n + _PART) >> _SHIFT, n, ad, second, out)
                else:
                    _launch(ks[k], out, ad, second, params, op, dt)
                return _finish(op, out, params, a, b, True, dt)
        elif same and type(ad) is not _ndarray and dt.kind == "f":
            res = _device_same_layout(op, (ad, second), params)
            if res is not None:
                return _finish(op, res, params, a, b, True, dt)
    return _binary_general(op, a, b, params)


def _device_same_layout(op: OpDef, operands: tuple, params):
    """A CUDA op's hot path (:func:`jitgrad.cuda.launch.same_layout`), or None when it does
    not apply (no CUDA op has run yet, the op is being traced, a host array)."""
    launch = _modules.get("jitgrad.cuda.launch")
    if launch is None or (TRACING and _TRACE.tracer is not None):
        return None
    return launch.same_layout(op, operands, params)


_BY_VALUE_MIN = 1 << 12  # from this size, a broadcast number goes to the kernel by value


def _broadcast_value(ad, second, k: int) -> bool:
    """Whether an operand of a large op is one number broadcast (every stride 0, as the
    gradient of a full sum): the general path passes it to the kernel by value."""
    return not any(ad.strides) or (k == 0 and not any(second.strides))


def binary_into(op: OpDef, a: Tensor, b, params: dict | None = None) -> bool:
    """``a`` becomes ``op(a, b)`` computed straight into ``a``'s memory
    (:func:`elementwise_into` with one more operand)."""
    return elementwise_into(op, a, (b,), params)


def elementwise_into(op: OpDef, a: Tensor, rest: tuple, params: dict | None = None) -> bool:
    """``a`` becomes ``op(a, *rest)``, computed straight into ``a``'s memory by the op's
    in-place kernel (no result array, no copy back) when nothing needs the general in-place
    path: no tracer, no autograd recording, ``a`` a contiguous writeable float array on the
    CPU, each of ``rest`` a tensor of ``a``'s shape and dtype not overlapping it (or ``a``
    itself) or a Python number, the result of ``a``'s dtype. Bumps ``a``'s version as
    ``apply_inplace`` does; the same bits as the out-of-place op (its kernel reads each
    element before writing it; numbers and params are cast to ``a``'s dtype as there).
    False when the case does not apply: the caller takes the general path."""
    if _TRACE.tracer is not None:
        return False
    ad = a._data
    recording = _STATE.enabled
    if recording and (a._requires_grad or (a._base is not None and a._base._requires_grad)):
        return False  # (a view of a base in autograd: its write is recorded on the base)
    if type(ad) is not _ndarray:  # CUDA memory: its in-place kernel (or a NumPy subclass:
        return _device_into(op, a, rest, params, recording)  # the general path)
    flags = ad.flags
    if not (flags.c_contiguous and flags.writeable):
        return False
    dt = ad.dtype
    args = [ad.reshape(-1)]
    kinds = ["full"]
    for b in rest:
        tb = type(b)
        if tb is Tensor:
            bd = b._data
            if (recording and b._requires_grad) or type(bd) is not _ndarray or \
                    bd.dtype != dt or bd.shape != ad.shape or (
                        bd is not ad and np.may_share_memory(ad, bd)):
                return False
            args.append(bd.reshape(-1))
            kinds.append("full")
        elif (tb is float or tb is int) and dt.kind == "f":
            args.append(dt.type(b))
            kinds.append("arg")
        else:
            return False
    key = (op.name, dt, tuple(kinds))
    fn = _INTO.get(key, _MISSING)
    if fn is _MISSING:
        fn = _INTO[key] = eager_kernels.into_kernel(op, dt, key[2])
    if fn is None:
        return False
    if params:
        args += [dt.type(params[p]) for p in op.params]
    n = ad.size
    if n < _PAR_MIN:
        fn(0, (n + _PART) >> _SHIFT, n, *args)
    else:
        _run_kernel(fn, n, tuple(args))
    a._vc[0] += 1
    return True


_INTO: dict = {}  # (op name, dtype, operand kinds) -> in-place kernel or None


def _device_into(op: OpDef, a: Tensor, rest: tuple, params, recording: bool) -> bool:
    """:func:`elementwise_into` for a CUDA tensor ``a`` (``cuda/launch.elementwise_into``):
    the other tensors on its device, none recording."""
    if is_cpu_array(a._data):
        return False
    data = []
    for b in rest:
        if type(b) is Tensor:
            if (recording and b._requires_grad) or is_cpu_array(b._data):
                return False
            data.append(b._data)
        elif type(b) is float or type(b) is int:
            data.append(b)
        else:
            return False
    from ..cuda.launch import elementwise_into as into

    if not into(op, a._data, tuple(data), params):
        return False
    a._vc[0] += 1
    return True


def _binary_general(op: OpDef, a, b, params) -> Tensor:
    if type(a) is Tensor and type(b) is Tensor and not params and (
            not TRACING or _TRACE.tracer is None):
        ad, bd = a._data, b._data
        if ad.dtype is bd.dtype and type(ad) is _ndarray and type(bd) is _ndarray and \
                ad.dtype.kind == "f":  # broadcasting two float arrays: a cached rows plan
            res = _broadcast_pair(op, ad, bd)
            if res is not None:
                return _finish(op, res, None, a, b, False, ad.dtype)
    if type(b) is TracedFloat or type(a) is TracedFloat:  # a compiled call's dynamic float
        return _binary_traced_float(op, a, b, params)
    ta = type(a) is Tensor
    tb = type(b) is Tensor
    if not ta and type(a) not in _SCALARS and type(a) is not complex:
        a = as_tensor_arg(a, "input")
        ta = True
    if not tb and type(b) not in _SCALARS:
        if isinstance(b, (np.floating, np.integer, np.bool_, np.complexfloating)):
            b = b.item()
        elif type(b) is not complex:
            b = as_tensor_arg(b, "other")
            tb = True
    if (ta and a._data.dtype.kind == "c") or (tb and b._data.dtype.kind == "c") or \
            type(b) is complex or type(a) is complex:
        return complex_ops.elementwise(op, (a, b), params)
    if ta and tb:
        if type(a._data) is not _ndarray or type(b._data) is not _ndarray:
            a, b = _on_one_device(a, b)
        sa, sb = a._data.shape, b._data.shape
        if sa != sb:
            broadcast_shapes(sa, sb, op.name)
    if op.name in ("sub", "rsub"):
        _check_bool_arith(op, a, b)
    cd, od = _dtype_of(op, a, b)
    cdt = cd.np
    res = eager_kernels.run(op, (_operand(a, cdt, True), _operand(b, cdt, True)), params, cdt,
                            od.np)
    same = (not ta or (a._data.shape == res.shape and a._data.dtype == res.dtype)) and (
        not tb or (b._data.shape == res.shape and b._data.dtype == res.dtype))
    return _finish(op, res, params, a, b, same, cdt)


def _binary_traced_float(op: OpDef, a, b, params) -> Tensor:
    """``a (op) b`` with a dynamic float of a traced call (``trace/numbers.py``): ``tensor
    (op) number`` computes with the number's graph value cast to the tensor's dtype where
    that gives the plain number's bits; anything else uses the plain value (specialised)."""
    if type(b) is TracedFloat:
        b = b.operand_for(op, a) if type(a) is Tensor and not params else b.concrete()
    if type(a) is TracedFloat:
        a = a.concrete()
    return binary(op, a, b, params)


def _one_float_layout(op: OpDef, args: tuple):
    """The float dtype of ``args`` when they are all host tensors of one shape, the promoted
    ones of one float32/float64 dtype and the ``no_promote`` ones (where's condition) bool:
    the general path would then compute in that dtype with no broadcast, cast or device
    move. None otherwise."""
    keep = op.extra.get("no_promote", ())
    dt = shape = None
    for i, x in enumerate(args):
        if type(x) is not Tensor:
            return None
        d = x._data
        if type(d) is not _ndarray:
            return None
        if shape is None:
            shape = d.shape
        elif d.shape != shape:
            return None
        if i in keep:
            if d.dtype is not _BOOL:
                return None
        elif dt is None:
            dt = d.dtype
            if dt is not _F32 and dt is not _F64:
                return None
        elif d.dtype is not dt:
            return None
    return dt


def elementwise(op: OpDef, args: tuple, params: dict | None = None) -> Tensor:
    """Eager element-wise op with any number of inputs (tensors or scalars)."""
    dt = _one_float_layout(op, args)
    if dt is not None:  # (what the general path finds for these inputs, without the search)
        res = eager_kernels.run(op, tuple(x._data for x in args), params, dt,
                                _BOOL if op.dtype_rule == BOOL else dt)
        return record(op, wrap(res), args, params, dt)
    tensors = [x for x in args if type(x) is Tensor]
    if not tensors:
        raise TypeError(f"{op.name}: expected at least one Tensor argument")
    for x in args:
        if (type(x) is Tensor and x._data.dtype.kind == "c") or type(x) is complex:
            return complex_ops.elementwise(op, args, params)
    if len(tensors) > 1:
        _same_device(tensors)
        broadcast_many([t._data.shape for t in tensors], op.name)
    keep = op.extra.get("no_promote", ())  # inputs taken as they are (where's condition)
    cd = dtypes.result_type(*[x for i, x in enumerate(args) if i not in keep])
    if op.dtype_rule == FLOAT and cd.category < 2:
        cd = dtypes.get_default_dtype()
    od = dtypes.bool_ if op.dtype_rule == BOOL else cd
    cdt = cd.np
    ops_in = []
    for i, x in enumerate(args):
        if i in keep:
            ops_in.append(x._data if type(x) is Tensor else np.bool_(x))
        else:
            ops_in.append(_operand(x, cdt))
    res = eager_kernels.run(op, tuple(ops_in), params, cdt, od.np)
    return record(op, wrap(res), args, params, cdt)
