"""In-place ops (``add_``, ``x[i] = v``...) with PyTorch's autograd rules.

An in-place op is its out-of-place op plus a write-back: the result is copied into the
tensor's memory, its version counter is bumped (so saved copies of the old value raise when
used), and, when recording, the tensor is rebased onto the result's backward node.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..autograd import grad_mode
from ..autograd.node import HookedSaved, save_input, save_output
from ..autograd.view_history import rebase_on_view_write, refresh_views
from ..devices import array_namespace, is_writeable
from ..tensor import Tensor, wrap
from ..trace.state import STATE as _TRACE
from .api import api
from .dispatch import record
from .registry import MOVEMENT, defop

__all__ = ["apply_inplace", "setitem", "check_inplace_allowed", "write_out"]

_STATE = grad_mode.STATE


def check_inplace_allowed(self: Tensor, result_requires_grad: bool) -> None:
    """PyTorch's errors for in-place ops on leaves (and views of leaves) that require grad,
    and on views made in no_grad mode whose base takes part in autograd."""
    if not _STATE.enabled:
        return
    base = self._base
    if self._requires_grad and self._grad_fn is None:
        if base is not None and base._grad_fn is None and base._requires_grad:
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place "
                "operation."
            )
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )
    if base is None or not (result_requires_grad or base._requires_grad):
        return
    if self._multi_view is not None and self._view_kind == "grad":
        raise multi_view_error(self)
    if base._requires_grad and base._grad_fn is None:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place "
            "operation."
        )
    if self._view_kind == "no_grad":
        raise RuntimeError(
            "A view was created in no_grad mode and is being modified inplace with grad mode "
            "enabled. Given that this use case is ambiguous and error-prone, it is forbidden. "
            "You can clarify your code by moving both the view and the inplace either both "
            "inside the no_grad block (if you don't want the inplace to be tracked) or both "
            "outside (if you want the inplace to be tracked)."
        )


def multi_view_error(self: Tensor, name: str | None = None) -> RuntimeError:
    """PyTorch's error for an in-place op on an output of a function returning several views
    (``unbind``, ``split``, ``chunk``; or a view of one, or ``name``'s view of it)."""
    mv = self._multi_view
    if name is not None:
        head = f"Output 0 of {name} is a view and is being modified inplace."
    elif self._grad_fn is None:  # (its base takes no part in autograd: PyTorch's wording)
        head = ("A view was created in no_grad mode and is being modified inplace with grad "
                "mode enabled.")
    elif type(mv) is tuple:
        head = f"Output {mv[1]} of {mv[0]} is a view and is being modified inplace."
    else:
        node = self._grad_fn.name()
        node = node[:node.rindex("Backward")] if "Backward" in node else node
        head = f"Output {self._output_nr} of {node} is a view and is being modified inplace."
    return RuntimeError(
        head + " This view is the output of a function that returns multiple views. Such "
        "functions do not allow the output views to be modified inplace. You should replace "
        "the inplace operation by an out-of-place one.")


_byte_bounds = np.lib.array_utils.byte_bounds


def overlapping_operands(self: Tensor, operands) -> bool:
    """Whether an in-place op on ``self`` reads memory it writes through an operand laid out
    otherwise (PyTorch's ``assert_no_partial_overlap``): raises PyTorch's error where both
    are dense (``a[1:].add_(a[:-1])``); True where one is not (strided or broadcast views:
    PyTorch computes those, and reversed views, which PyTorch has not: the caller must
    compute the result before writing it);
    False for unrelated memory or the very same elements (``a.add_(a)``)."""
    d = self._data
    if type(d) is not np.ndarray:
        return False
    base = d.base
    root = d if base is None else base
    hazard = False
    for o in operands:
        if isinstance(o, Tensor):
            od = o._data
            base = od.base
            if (od if base is None else base) is root and od is not d and \
                    _same_memory_overlap(d, od):
                hazard = True
    return hazard


def _same_storage(a, b) -> bool:
    """Whether NumPy arrays ``a`` and ``b`` view one owner's memory (cheap: no view made)."""
    return type(b) is np.ndarray and type(a) is np.ndarray and (
        a if a.base is None else a.base) is (b if b.base is None else b.base)


def arrays_overlap(d, od) -> bool:
    """:func:`overlapping_operands` for the array ``d`` written and ``od`` read."""
    if od is d or not _same_storage(d, od):
        return False
    return _same_memory_overlap(d, od)


def _same_memory_overlap(d, od) -> bool:
    if not d.size or not od.size:
        return False
    lo, hi = _byte_bounds(d)
    olo, ohi = _byte_bounds(od)
    if hi <= olo or ohi <= lo or (lo == olo and d.shape == od.shape
                                  and d.strides == od.strides):
        return False
    if hi - lo == d.nbytes and ohi - olo == od.nbytes and all(
            s >= 0 for s in d.strides + od.strides):  # both dense (PyTorch: no negative strides)
        raise RuntimeError(
            "unsupported operation: some elements of the input tensor and the written-to "
            "tensor refer to a single memory location. Please clone() the tensor before "
            "performing the operation.")
    return True


def views_autograd(self: Tensor) -> bool:
    """Whether ``self`` is a view (made by a view op) of a base that requires grad: a write
    into it is autograd's even where ``self`` itself does not require grad (a view made in
    no_grad mode: PyTorch's error)."""
    return self._view_kind is not None and self._base._requires_grad


def check_writeable(self: Tensor) -> None:
    """Raise before an in-place write into memory NumPy marks read-only: an expanded tensor
    (PyTorch's overlap error) or a read-only array the tensor wraps (``from_numpy`` of an
    array with ``writeable=False``), leaving the tensor unchanged."""
    a = self._data
    if is_writeable(a):
        return
    if any(st == 0 and n > 1 for st, n in zip(a.strides, a.shape)):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation."
        )
    raise RuntimeError(
        "unsupported operation: the written-to tensor's memory is a read-only NumPy array "
        "(e.g. jitgrad.from_numpy of an array with writeable=False). Please clone() the tensor, "
        "or make the array writeable, before performing the in-place operation."
    )


def apply_inplace(self: Tensor, result: Tensor, since: int | None = None) -> Tensor:
    """Write ``result`` (computed out of place from ``self``) into ``self``; rebase history.

    ``since``: a node sequence number taken before ``result`` was computed; the nodes made
    after it (a composite's inner nodes: ``logit``'s division, ``addmv``'s ``input * beta``)
    that saved ``self`` get its old value too, as ``result``'s own node does."""
    check_inplace_allowed(self, result._requires_grad)
    dst = self._data
    src = result._data
    if src.shape != dst.shape:
        try:
            np.broadcast_shapes(src.shape, dst.shape)
            if np.broadcast_shapes(src.shape, dst.shape) != dst.shape:
                raise ValueError
        except ValueError:
            raise RuntimeError(
                f"output with shape {list(dst.shape)} doesn't match the broadcast shape "
                f"{list(np.broadcast_shapes(src.shape, dst.shape))}"
            ) from None
    if src.dtype != dst.dtype and not np.can_cast(src.dtype, dst.dtype, "same_kind"):
        from ..dtypes import from_numpy_dtype

        raise RuntimeError(
            f"result type {from_numpy_dtype(src.dtype).tensor_type.replace('Tensor', '')} can't "
            f"be cast to the desired output type "
            f"{from_numpy_dtype(dst.dtype).tensor_type.replace('Tensor', '')}"
        )
    check_writeable(self)
    if _STATE.enabled and self._grad_fn is not None and not result._requires_grad and (
            self._view_kind is None):
        # new values that depend on nothing, written into a tensor with history: it keeps
        # requiring grad (the gradient is zero there), as PyTorch's
        result = _kept_in_graph(self, result)
        src = result._data
    node = result._grad_fn if _STATE.enabled else None
    if node is not None and node.saved:
        node.saved = _snapshot_self(node.saved, self, result)
    if node is not None and since is not None:
        _snapshot_inner(node, since, self, result)
    tr = _TRACE.tracer
    if tr is not None:
        tr.on_write(self, result)
    np.copyto(dst, src, casting="same_kind")
    self._vc[0] += 1
    if node is not None and node.saved and _has_output_entry(node.saved, src):
        node.saved = tuple(
            save_output(self) if (type(e) is tuple and e[0] is None and e[1] is src) else e
            for e in node.saved)
    base = self._base
    if base is not None and self._view_kind == "grad" and _STATE.enabled and (
            node is not None or base._requires_grad):
        # a view written while autograd records: the base's history is rewritten and every
        # view of it re-derived (PyTorch's CopySlices)
        rebase_on_view_write(self, result)
        return self
    had_history = self._grad_fn is not None
    if node is not None:
        self._grad_fn = node
        self._requires_grad = True
        if self._output_nr:
            self._output_nr = 0
    elif _STATE.enabled and had_history:
        # the new value no longer depends on the old history
        self._grad_fn = None
        self._requires_grad = False
    if self._views is not None and _STATE.enabled and (node is not None or had_history):
        refresh_views(self)  # the base's views read its new value
    return self


def _kept_in_graph(self: Tensor, result: Tensor) -> Tensor:
    """``result``'s values in ``self``'s graph with a zero gradient (NaN-safe, unlike
    ``self * 0 + result``)."""
    from ..creation import tensor
    from .selection import where

    never = tensor(False, device=self.device)
    return where(never, self, result).to(self.dtype)


def inplace_view(self: Tensor, result: Tensor, name: str) -> Tensor:
    """An in-place view op (``t_``, ``transpose_``, ``squeeze_``, ``unsqueeze_``...):
    ``self`` takes the shape and strides of ``result`` (``self``'s view, computed out of
    place) and its history, and its version is bumped, as PyTorch's. Not traceable: a
    compiled function doing it runs eagerly."""
    if not isinstance(self, Tensor):
        raise TypeError(f"{name}() requires a Tensor")
    check_inplace_allowed(self, result._requires_grad)
    tr = _TRACE.tracer
    if tr is not None:  # the call finishes eagerly from here (fullgraph=True: an error)
        tr.graph_break(f"{name}() changes a tensor's shape in place (the out-of-place "
                       f"{name.rstrip('_')}() compiles)")
    self._data = result._data
    self._vc[0] += 1
    if result._grad_fn is not None and _STATE.enabled:
        self._grad_fn = result._grad_fn
        self._requires_grad = True
        if self._output_nr:
            self._output_nr = 0
    return self


def write_out(out, result: Tensor, name: str) -> Tensor:
    """The ``out=`` argument of ``name``: ``result`` written into ``out``, which is returned.

    As PyTorch: ``out`` must be a tensor; no argument (``out`` included) may require grad
    while grad mode is on; ``out`` is resized to the result's shape (with PyTorch's warning
    when it had elements); the result must be castable to ``out``'s dtype. ``out``'s version
    is bumped and it holds no history afterwards. Nothing is written when a check fails."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if _STATE.enabled and (result._requires_grad or out._requires_grad):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           f"differentiation, but one of the arguments requires grad.")
    src = result._data
    if src.dtype != out._data.dtype and not np.can_cast(src.dtype, out._data.dtype, "same_kind"):
        apply_inplace(out, result)  # raises PyTorch's "result type ... can't be cast" error
    if src.shape != out._data.shape:
        if out._data.size:
            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(out._data.shape)}, which does not match the required output shape "
                f"{list(src.shape)}. This behavior is deprecated, and in a future PyTorch "
                f"release outputs will not be resized unless they have zero elements. You can "
                f"explicitly reuse an out tensor t by resizing it, inplace, to zero elements "
                f"with t.resize_(0).", UserWarning, stacklevel=3)
        tr = _TRACE.tracer
        if tr is not None:  # a new array for the argument: nothing a plan can replay
            tr.graph_break(f"{name}(out=...) resizes out (its array is replaced)")
        out._data = array_namespace(out._data).empty(src.shape, out._data.dtype)
    return apply_inplace(out, wrap(src))


def _has_output_entry(saved, src) -> bool:
    return any(type(e) is tuple and e[0] is None and e[1] is src for e in saved)


def _snapshot_inner(top, since: int, self: Tensor, result: Tensor) -> None:
    """:func:`_snapshot_self` for the nodes below ``top`` made after sequence number
    ``since`` (the ones computing ``result``; older nodes that saved ``self`` raise at
    backward, as PyTorch's)."""
    stack = [e[0] for e in top.next_edges if type(e) is tuple]
    seen = set()
    while stack:
        n = stack.pop()
        if id(n) in seen or n.seq <= since:
            continue
        seen.add(id(n))
        if n.saved:
            n.saved = _snapshot_self(n.saved, self, result)
        stack.extend(e[0] for e in n.next_edges if type(e) is tuple)


def _snapshot_self(saved: tuple, self: Tensor, result: Tensor) -> tuple:
    """Saved inputs that are ``self`` keep its pre-modification value (a copy; saved again
    through the ``saved_tensors_hooks`` in force when ``self`` was saved through them)."""
    def is_self(e) -> bool:
        return (type(e) is tuple and e[0] is self) or (type(e) is HookedSaved and
                                                         e.src == id(self) and not e.is_output)

    if not any(is_self(e) for e in saved):
        return saved
    from .copies import clone

    with grad_mode.no_grad():
        snap = clone(self.detach())
    snap._requires_grad = self._requires_grad
    snap._grad_fn = self._grad_fn
    if self._output_nr:
        snap._output_nr = self._output_nr
    return tuple(((snap, 0) if type(e) is tuple else save_input(snap)) if is_self(e) else e
                 for e in saved)


# ---------------------------------------------------------------------- x[i] = v
def _index_put_ref(a, v, index):
    from .indexing import put_at

    out = array_namespace(a).array(a, copy=True)
    put_at(out, index, v.astype(a.dtype, copy=False) if isinstance(v, np.ndarray) else v)
    return out


def _index_put_vjp(g, ins, out, p, n):
    index = p["index"]
    ga = gv = None
    if n[0]:
        from ..creation import const_tensor
        from .indexing import put_at

        mask = array_namespace(g._data).ones(g._data.shape, dtype=g._data.dtype)
        put_at(mask, index, 0)
        ga = g * const_tensor(mask)
    if n[1]:
        vshape = p["vshape"]
        from .indexing import take_at

        gv = take_at(g, index)
        if gv._data.shape != vshape:
            from .sums import sum_to

            gv = sum_to(gv, vshape)
    return ga, gv


INDEX_PUT = defop(name="index_put", kind=MOVEMENT, inputs=("a", "value"),
                  params=("index", "vshape"), node="IndexPutBackward0",
                  ref=lambda a, v, index, vshape: _index_put_ref(a, v, index),
                  vjp=_index_put_vjp, cast_grads=True)


@api(INDEX_PUT, method="__setitem__")
def setitem(self: Tensor, index, value) -> None:
    """``self[index] = value`` (value: tensor or number); differentiable w.r.t. both."""
    from .indexing import _normalise_index, index_on, put_at

    idx, advanced = _normalise_index(index, self._data.shape)
    if advanced:
        idx = index_on(idx, self._data)
    v_is_t = isinstance(value, Tensor)
    v = value._data if v_is_t else value
    if v_is_t and not advanced and _same_storage(self._data, v):
        arrays_overlap(self._data[idx], v)  # (PyTorch's error for a partial overlap)
    recording = _STATE.enabled and (self._requires_grad or (v_is_t and value._requires_grad)
                                    or views_autograd(self))
    if not recording and _TRACE.tracer is None:
        check_writeable(self)
        try:
            put_at(self._data, idx, v)
        except ValueError as e:
            raise _value_error(self, idx, v, advanced, e) from None
        self._vc[0] += 1
        return
    if advanced:
        from .tensor_index import has_index_tensors, put_with_tensors

        if has_index_tensors(index):
            # integer tensors: the op's input, not a param (a compiled plan reads them; a
            # backward holds them)
            apply_inplace(self, put_with_tensors(self, index, value))
            return
    if not advanced and self._multi_view is not None and self._view_kind == "grad" and \
            _STATE.enabled:  # PyTorch writes through a view of self (Select, Slice...)
        from .indexing import _index_kind

        kind = _index_kind(idx)
        raise multi_view_error(self, kind[:kind.rindex("Backward")] if kind !=
                               "AliasBackward0" else None)
    if not advanced and _STATE.enabled and self._requires_grad and self._grad_fn is None:
        # PyTorch writes a basic index through a view of the leaf (an advanced one through
        # index_put_, whose message apply_inplace gives)
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    vshape = value._data.shape if v_is_t else ()
    try:
        res = wrap(_index_put_ref(self._data, v, idx))
    except ValueError as e:
        raise _value_error(self, idx, v, advanced, e) from None
    res = record(INDEX_PUT, res, (self, value), {"index": idx, "vshape": vshape})
    apply_inplace(self, res)


def _value_error(self: Tensor, idx, v, advanced: bool, err: ValueError) -> Exception:
    """PyTorch's error for a value that does not broadcast to ``self[idx]`` (NumPy's
    ``err`` for another ValueError)."""
    from .indexing import take_at, value_shape_error

    target, vshape = tuple(np.shape(take_at(self._data, idx))), tuple(np.shape(v))
    try:
        if np.broadcast_shapes(target, vshape) == target:
            return err
    except ValueError:
        pass
    return value_shape_error(target, vshape, advanced)
