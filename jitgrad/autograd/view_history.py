"""The history of views after an in-place change, as PyTorch's autograd keeps it.

A view shares memory with its base (``Tensor._base``, always the root). When an in-place op
writes into that memory while autograd records, the values of the base *and of every view*
change, so their histories change too:

* **in place on the base** (``v = b[:2]; b.mul_(3)``): every live view's ``grad_fn`` becomes
  an :class:`AsStridedBackward0` of the base's new history (``v.sum().backward()`` then
  differentiates ``3 * b[:2]``, not the old slice);
* **in place on a view** (``b[:2].mul_(3)``, ``v.copy_(x)``, ``v[0] = y``): the base's
  ``grad_fn`` becomes a :class:`CopySlices` node -- the gradient at the view's elements goes
  to the op's result, the rest to the base's old history -- and every live view (the
  written one included) is then re-derived from the base as above.

Which views are live: :func:`jitgrad.tensor.mark_view` registers each view made while grad
mode is on (a weak reference on the base; PyTorch regenerates a view's ``grad_fn`` on access,
jitgrad when the base changes, as its ``_grad_fn`` is a plain slot read on every op). Where a
view sits inside its base is read from the arrays' memory layout (address, shape, strides)
when its node is made, and turned into flat element positions only if the node runs, so
backward is the same for every kind of view (slices, transposes, ``diagonal``, ``unfold``,
``as_strided``...).
"""

from __future__ import annotations

import numpy as np

from ..devices import is_cpu_array
from .node import Node, edge, make_node

__all__ = ["AsStridedBackward0", "CopySlices", "refresh_views", "rebase_on_view_write"]


def _address(a) -> int:
    return a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr


def _layout(a) -> tuple:
    """(shape, strides in bytes, address) of an array (NumPy or CuPy)."""
    return a.shape, a.strides, _address(a)


def _byte_offsets(shape: tuple, strides: tuple, start: int) -> np.ndarray:
    """The byte offset (from ``start``) of every element of a strided array, in its shape."""
    off = np.full(shape, start, dtype=np.int64) if shape else np.array(start, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        step = np.arange(n, dtype=np.int64) * s
        off = off + step.reshape((n,) + (1,) * (len(shape) - d - 1))
    return off


def flat_positions(base: tuple, view: tuple, itemsize: int) -> np.ndarray:
    """For each element of the view (its shape), the position of the base element it is in
    the base's row-major order; ``base``/``view`` as :func:`_layout` gives them."""
    bshape, bstrides, baddr = base
    vshape, vstrides, vaddr = view
    rel = _byte_offsets(vshape, vstrides, vaddr - baddr)
    c_strides, acc = [], itemsize
    for n in reversed(bshape):
        c_strides.append(acc)
        acc *= n
    if tuple(reversed(c_strides)) == tuple(bstrides) or not bshape:
        return rel // itemsize
    boff = _byte_offsets(bshape, bstrides, 0).ravel()  # a base in another layout
    order = np.argsort(boff, kind="stable")
    ordered = boff[order]
    k = np.clip(np.searchsorted(ordered, rel.ravel()), 0, max(ordered.size - 1, 0))
    if ordered.size == 0 or not np.array_equal(ordered[k], rel.ravel()):
        raise RuntimeError("jitgrad: a view's elements are not elements of its base "
                           "(the base's memory was replaced after the view was taken)")
    return order[k].reshape(vshape)


class _ViewLayoutNode(Node):
    """A node that knows where a view lies in its base; ``positions`` made on first use."""

    __slots__ = ()

    def _setup(self, base, view) -> None:
        d = self.__dict__
        d["_layouts"] = (_layout(base._data), _layout(view._data), view._data.dtype.itemsize)
        d["_positions"] = None

    def positions(self, like):
        """The view's flat positions in the base, as an int64 tensor on ``like``'s device."""
        d = self.__dict__
        pos = d["_positions"]
        if pos is None:
            from ..creation import tensor

            flat = flat_positions(*d["_layouts"]).reshape(-1)
            pos = d["_positions"] = tensor(flat, device=like.device)
        elif not is_cpu_array(like._data) and is_cpu_array(pos._data):
            pos = d["_positions"] = pos.to(like.device)
        return pos

    @property
    def base_shape(self) -> tuple:
        return self.__dict__["_layouts"][0][0]

    @property
    def view_shape(self) -> tuple:
        return self.__dict__["_layouts"][1][0]


class AsStridedBackward0(_ViewLayoutNode):
    """A view re-derived from its base's current history: the gradient of the view's
    elements, added into zeros of the base's shape at their positions (elements a view
    reads twice, as an expanded one does, get both)."""

    __slots__ = ()

    def apply(self, grads: list) -> tuple:
        from ..creation import zeros

        g = grads[0]
        pos = self.positions(g)
        size = int(np.prod(self.base_shape, dtype=np.int64))
        out = zeros(size, dtype=g.dtype, device=g.device).index_add(0, pos, g.reshape(-1))
        return (out.reshape(self.base_shape),)


class CopySlices(_ViewLayoutNode):
    """A base after an in-place op wrote its result into one of its views: inputs (the
    base's old history, the op's result). The base's gradient goes to the old history with
    the view's elements zeroed, and at the view's elements to the result."""

    __slots__ = ()

    def apply(self, grads: list) -> tuple:
        g = grads[0]
        pos = self.positions(g)
        flat = g.reshape(-1)
        need_base, need_result = (e is not None for e in self.next_edges)
        g_base = flat.index_fill(0, pos, 0).reshape(self.base_shape) if need_base else None
        g_result = None
        if need_result:
            g_result = flat.index_select(0, pos).reshape(self.view_shape)
            rshape, rdtype = self.in_meta[1]
            if tuple(g_result.shape) != tuple(rshape):
                from ..ops.registry import _sum_to

                g_result = _sum_to(g_result, rshape)
            if g_result._data.dtype != rdtype:
                from ..dtypes import from_numpy_dtype

                g_result = g_result.to(from_numpy_dtype(rdtype))
        return g_base, g_result


def _meta(t) -> tuple:
    return t._data.shape, t._data.dtype


def refresh_views(base) -> None:
    """Give every live view of ``base`` (registered by ``mark_view``) the history of the
    base's current value: an :class:`AsStridedBackward0` of it while the base requires
    grad, none otherwise. A view's retained gradient and tensor hooks move to its new node.
    Dead references are dropped."""
    refs = base._views
    live = []
    requires = base._requires_grad
    base_edge = edge(base) if requires else None
    for r in refs:
        v = r()
        if v is None:
            continue
        live.append(r)
        old, old_nr = v._grad_fn, v._output_nr
        if not requires:
            v._grad_fn = None
            v._requires_grad = False
            continue
        node = make_node(AsStridedBackward0, (base_edge,), None, (_meta(base),))
        node._setup(base, v)
        v._grad_fn = node
        v._requires_grad = True
        if old_nr:
            v._output_nr = 0
        if old is not None:
            hooks = old._tensor_hooks.get(old_nr) if old._tensor_hooks else None
            if hooks:
                if node._tensor_hooks is None:
                    node._tensor_hooks = {}
                node._tensor_hooks[0] = hooks
        if v._retains_grad:
            node._add_retain(0, v)
    base._views = live


def rebase_on_view_write(view, result) -> None:
    """``result`` (computed from ``view``, with its history) was just written into
    ``view``'s memory: the base's history becomes a :class:`CopySlices` of its old history
    and ``result``, and every live view is re-derived from it."""
    base = view._base
    node = make_node(CopySlices, (edge(base), edge(result)), None, (_meta(base), _meta(result)))
    node._setup(base, view)
    base._grad_fn = node
    base._requires_grad = True
    if base._output_nr:
        base._output_nr = 0
    refresh_views(base)
