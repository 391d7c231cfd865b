"""``x[i]``, ``x[:, i]``, ``x[rows, cols]``: indexing with integer tensors, whose index arrays
are the op's *input* (``index_tensor``), not a param.

``getitem`` records an index as a param: NumPy arrays and lists are constants of the
function, but an integer tensor computed by the function or passed to it (labels, a
permutation, ``argmax`` picks, a relative-position table's lookup) would have its values
frozen into a compiled plan. Here the index tensors are an input of the op (one tensor, or
several broadcast and stacked into one) and the index's structure (slices, ints, None,
Ellipsis, constant arrays) is a template with holes, so a compiled plan reads each call's
index. Values and gradients are ``getitem``'s: the same gather (``_take``) and the same
``add_at`` accumulation in the backward, so eager mode's bits. Boolean masks (an output shape
that depends on the values) stay ``getitem``'s (a graph break under ``compile``).
"""

from __future__ import annotations

import numpy as np

from ..devices import array_namespace, first_outside, to_host
from ..tensor import Tensor, wrap
from . import indexing as _ix  # (imports this module first: its names are read at call time)
from .api import api
from .dispatch import call, record
from .registry import OPAQUE, defop

__all__ = ["index_with_tensors", "put_with_tensors"]  # (and has_index_tensors)


class Hole:
    """Where index tensor ``k`` sits in an index template; ``size``: the length of the dim it
    indexes (its values are checked against it where the op runs)."""

    __slots__ = ("k", "size")

    def __init__(self, k: int, size: int) -> None:
        self.k, self.size = k, size

    def __repr__(self) -> str:
        return f"<index tensor {self.k} of a dim of {self.size}>"


def _map(index, fn):
    """``index`` (a normalised one: an item, a tuple, a ``_TwoStep``) with ``fn`` applied to
    each item."""
    if type(index) is _ix._TwoStep:
        return _ix._TwoStep(tuple(_map(part, fn) for part in index))
    if type(index) is tuple:
        return tuple(fn(it) for it in index)
    return fn(index)


def fill(template, arrays):
    """The index ``template`` with each hole replaced by its array."""
    t = type(template)
    if t is Hole:  # (the common cases without a closure: x[i], x[:, i])
        return arrays[template.k]
    if t is tuple:
        return tuple(arrays[it.k] if type(it) is Hole else it for it in template)
    return _map(template, lambda it: arrays[it.k] if type(it) is Hole else it)


def _arrays(index, stacked: bool) -> list:
    return list(index) if stacked else [index]


def _check_bounds(template, arrays) -> None:
    """PyTorch's error for an index outside its dim (CuPy would wrap it around)."""
    holes: list = []
    _map(template, lambda it: holes.append(it) if type(it) is Hole else None)
    for h in holes:
        v = first_outside(arrays[h.k], -h.size, h.size)
        if v is not None:
            raise IndexError(f"index {v} is out of bounds for dimension {h.k} with size "
                             f"{h.size}")


def _index_ref(a, index, template, shape, node, stacked):
    arrays = _arrays(index, stacked)
    _check_bounds(template, arrays)
    res = _ix._take(a, fill(template, arrays))
    return res if res.flags.c_contiguous else array_namespace(res).ascontiguousarray(res)


def _index_backward_ref(g, index, template, shape, stacked):
    return _ix._getitem_bwd_ref(g, fill(template, _arrays(index, stacked)), shape, True)


def _index_vjp(g, ins, out, p, n):
    return (call(INDEX_TENSOR_BACKWARD, (g, ins[1]), {
        "template": p["template"], "shape": p["shape"], "stacked": p["stacked"]}), None)


def _index_backward_vjp(gg, ins, out, p, n):
    return (call(INDEX_TENSOR, (gg, ins[1]), {
        "template": p["template"], "shape": p["shape"], "node": "IndexBackward0",
        "stacked": p["stacked"]}), None)


def _samples(rng, dtype):
    """``form``: the index, with ``"t0"``, ``"t1"`` standing for the index tensors (rows of
    the sample's index array when there are two)."""
    x = rng.standard_normal((4, 5, 3)).astype(dtype)
    return [
        ((x, np.array([0, 2, 2, 3])), {"form": ("t0",)}),
        ((x, np.array([4, 0, -1])), {"form": (slice(None), "t0")}),
        ((x, np.array([[1, 0], [2, 2]])), {"form": (Ellipsis, "t0")}),
        ((x, np.array([[0, 3, 3], [1, 4, 4]])), {"form": ("t0", "t1")}),
        ((x, np.array([2, 0, 2])), {"form": (1, slice(1, 3), "t0")}),
        ((x, np.array([1, 1])), {"form": (None, "t0", slice(None, None, 2))}),
    ]


def _backward_samples(rng, dtype):
    g = rng.standard_normal((4, 5, 3)).astype(dtype)
    return [((g, np.array([0, 2, 2, 3])), {"form": ("t0",), "shape": (4, 5, 3)}),
            ((g[:, :3], np.array([4, 0, 4])), {"form": (slice(None), "t0"), "shape": (4, 5, 3)})]


INDEX_TENSOR = defop(
    name="index_tensor", kind=OPAQUE, node=lambda p: p["node"], inputs=("a", "index"),
    params=("template", "shape", "node", "stacked"), ref=_index_ref, vjp=_index_vjp,
    save=(1,), samples=_samples,
    complex="holomorphic")
INDEX_TENSOR_BACKWARD = defop(
    name="index_tensor_backward", kind=OPAQUE, node="IndexPutImplBackward0",
    inputs=("g", "index"), params=("template", "shape", "stacked"), ref=_index_backward_ref,
    vjp=_index_backward_vjp, save=(1,), samples=_backward_samples,
    complex="holomorphic")


def has_index_tensors(index) -> bool:
    """Whether ``index`` holds an integer tensor of one or more dims and no boolean mask
    (a tensor's, an array's, a list's or a Python bool): the indexes :func:`index_with_tensors`
    takes."""
    items = index if type(index) is tuple else (index,)
    found = False
    for it in items:
        if isinstance(it, Tensor):
            kind = it._data.dtype.kind
            if kind == "b":
                return False
            if kind in "iu" and it._data.ndim:
                found = True
        elif isinstance(it, bool) or (isinstance(it, np.ndarray) and it.dtype == np.bool_) \
                or (isinstance(it, list) and any(isinstance(v, bool) for v in it)):
            return False
    return found


def _prepared(input: Tensor, index) -> tuple:
    """``(template, index tensor, stacked)`` for an index holding integer tensors, checked
    with PyTorch's messages (bounds, shapes that do not broadcast) on the host."""
    items = index if type(index) is tuple else (index,)
    tensors: list = []
    hosts: dict = {}
    staged = []
    for it in items:
        if isinstance(it, Tensor) and it._data.dtype.kind in "iu" and it._data.ndim:
            h = to_host(it._data)
            hosts[id(h)] = len(tensors)
            tensors.append(it)
            staged.append(h)
        else:
            staged.append(it)
    shape = input._data.shape
    norm, _ = _ix._normalise_index(tuple(staged) if type(index) is tuple else staged[0], shape)
    template = _template(norm, shape, hosts)
    stacked = len(tensors) > 1
    if stacked:
        from .arrangements import broadcast_tensors
        from .concat import stack

        idx = stack([t.long() for t in broadcast_tensors(*tensors)])
    else:
        idx = tensors[0]
    return template, idx, stacked


@api(INDEX_TENSOR, INDEX_TENSOR_BACKWARD)
def index_with_tensors(input: Tensor, index, node: str | None) -> Tensor:
    """``input[index]`` for an index holding integer tensors (:func:`has_index_tensors`)."""
    template, idx, stacked = _prepared(input, index)
    a = input._data
    res = _ix._take(a, fill(template, _arrays(idx._data, stacked)))
    if not res.flags.c_contiguous:  # a copy: row-major, as PyTorch's
        res = array_namespace(res).ascontiguousarray(res)
    return record(INDEX_TENSOR, wrap(res), (input, idx), {
        "template": template, "shape": a.shape, "node": node or "IndexBackward0",
        "stacked": stacked})


# ------------------------------------------------------------- x[index] = value
def _put(a, v, arrays, template):
    out = array_namespace(a).array(a, copy=True)
    _ix.put_at(out, fill(template, arrays),
               v.astype(a.dtype, copy=False) if hasattr(v, "astype") else v)
    return out


def _put_ref(a, v, index, template, stacked, vshape):
    arrays = _arrays(index, stacked)
    _check_bounds(template, arrays)
    return _put(a, v, arrays, template)


def _put_vjp(g, ins, out, p, n):
    from ..creation import zeros

    index = ins[2]
    ga = gv = None
    if n[0]:  # zero where the value was written (PyTorch's: grad.index_put(indices, 0))
        ga = call(INDEX_PUT_TENSOR, (g, zeros((), dtype=g.dtype, device=g.device), index),
                  {"template": p["template"], "stacked": p["stacked"], "vshape": ()})
    if n[1]:
        gv = call(INDEX_TENSOR, (g, index), {
            "template": p["template"], "shape": g._data.shape, "node": "IndexBackward0",
            "stacked": p["stacked"]})
        if gv._data.shape != p["vshape"]:
            from .sums import sum_to

            gv = sum_to(gv, p["vshape"])
    return ga, gv, None


def _put_samples(rng, dtype):
    x = rng.standard_normal((4, 5)).astype(dtype)
    return [
        ((x, rng.standard_normal((3, 5)).astype(dtype), np.array([0, 2, 3])),
         {"form": ("t0",)}),
        ((x, rng.standard_normal(()).astype(dtype), np.array([4, 0])),
         {"form": (slice(None), "t0")}),
        ((x, rng.standard_normal((3,)).astype(dtype), np.array([[0, 1, 3], [4, 4, 0]])),
         {"form": ("t0", "t1")}),
    ]


INDEX_PUT_TENSOR = defop(
    name="index_put_tensor", kind=OPAQUE, node="IndexPutBackward0",
    inputs=("a", "value", "index"), params=("template", "stacked", "vshape"), ref=_put_ref,
    vjp=_put_vjp, save=(2,), cast_grads=True, samples=_put_samples,
    complex="holomorphic")


@api(INDEX_PUT_TENSOR)
def put_with_tensors(input: Tensor, index, value) -> Tensor:
    """A copy of ``input`` with ``value`` written at ``input[index]`` for an index holding
    integer tensors (``x[i] = v`` while a node or a trace needs the index: the caller writes
    it back in place)."""
    template, idx, stacked = _prepared(input, index)
    a = input._data
    v = value._data if isinstance(value, Tensor) else value
    vshape = v.shape if isinstance(value, Tensor) else ()
    try:  # (the bounds were checked on the host by _prepared)
        res = _put(a, v, _arrays(idx._data, stacked), template)
    except ValueError as e:
        from .inplace import _value_error

        raise _value_error(input, fill(template, _arrays(to_host(idx._data), stacked)), v,
                           True, e) from None
    return record(INDEX_PUT_TENSOR, wrap(res), (input, value, idx),
                  {"template": template, "stacked": stacked, "vshape": vshape})


def _template(norm, shape, hosts: dict):
    """The normalised index ``norm`` with each index tensor's host array (``hosts``: id ->
    k) replaced by ``Hole(k, the length of the dim it indexes)``; a ``_TwoStep``'s arrays
    index what its integer selects leave."""
    if type(norm) is np.ndarray:  # x[i]
        return Hole(hosts[id(norm)], shape[0]) if id(norm) in hosts else norm
    if type(norm) is _ix._TwoStep:
        basic, rest = norm
        left = np.broadcast_to(np.empty((), np.int8), shape)[basic].shape
        return _ix._TwoStep((basic, _template(rest, left, hosts)))
    return tuple(Hole(hosts[id(it)], shape[dim])
                 if type(it) is np.ndarray and id(it) in hosts else it
                 for it, dim in _ix.index_dims(norm, shape))
