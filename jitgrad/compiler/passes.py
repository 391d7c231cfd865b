"""Graph passes: broadcast-view folding, constant folding, CSE, transposed matmuls, dead-code
elimination, redundant copies.

All passes return a new equation list (the Vars are shared); they never change what the graph
computes. ``keep`` lists values that must survive besides outputs and effects (residuals).
"""

from __future__ import annotations

import math

import numpy as np

from ..config import check_ir
from ..devices import array_namespace, as_array
from ..trace.interpreter import run_eqn
from ..trace.ir import Eqn, Graph, Lit, Var, is_effect
from .pool_relu import pool_before_relu
from .value_checks import may_raise

__all__ = ["optimize", "dce", "cse", "fold_views", "fold_constants", "transpose_matmuls",
           "transposed_product_exact", "cancel_transposes",
           "drop_copies", "split_biased_matmuls"]

#: constants up to this many elements are folded (bigger ones stay equations: a folded
#: constant is an array the plan holds for its lifetime)
FOLD_MAX_ELEMENTS = 64


def _is_elementwise(e: Eqn) -> bool:
    return not isinstance(e.op, str) and e.op.kind == "elementwise"


def _strip_leading_ones(shape) -> tuple:
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def fold_views(graph: Graph) -> None:
    """Element-wise ops broadcast their operands anyway: an operand that is ``expand(x)`` (or
    a reshape that only adds/removes leading size-1 dims) is replaced by ``x``."""
    producer = {id(e.out): e for e in graph.eqns}
    for e in graph.eqns:
        if not _is_elementwise(e):
            continue
        new = []
        for i in e.ins:
            while isinstance(i, Var):
                p = producer.get(id(i))
                if p is None or isinstance(p.op, str):
                    break
                src = p.ins[0]
                if isinstance(src, Var) and len(src.shape) > len(e.out.shape):
                    break  # dropping leading dims is not broadcasting
                if p.op.broadcast and isinstance(src, Var):
                    i = src
                elif p.op.keeps_order and isinstance(src, Var) and \
                        _strip_leading_ones(src.shape) == _strip_leading_ones(p.out.shape):
                    i = src
                else:
                    break
            new.append(i)
        e.ins = tuple(new)


def fold_constants(graph: Graph) -> None:
    """Evaluate small equations whose inputs are all constants (and deterministic fills)."""
    for e in graph.eqns:
        if isinstance(e.op, str):
            if e.op == "fill" and int(np.prod(e.out.shape)) <= FOLD_MAX_ELEMENTS:
                e.out.kind, e.out.source = "const", as_array(e.impl())
            continue
        if int(np.prod(e.out.shape)) > FOLD_MAX_ELEMENTS:
            continue
        if not all(isinstance(i, Lit) or (isinstance(i, Var) and i.kind == "const")
                   for i in e.ins):
            continue
        env = {id(i): i.source for i in e.ins if isinstance(i, Var)}
        # (a value computed on the device stays there: a CUDA plan's kernels take it)
        # (eager mode's kernels, not the NumPy references: a folded exp of constants has the
        # bits eager mode computes, which a libm exp may not)
        e.out.kind, e.out.source = "const", as_array(run_eqn(e, env, reference=False))
    graph.eqns = [e for e in graph.eqns if e.out.kind != "const"]


def _param_key(params: dict):
    items = []
    for k in sorted(params):
        v = params[k]
        if isinstance(v, np.ndarray):
            v = ("array", id(v))
        elif isinstance(v, np.dtype):
            v = v.str
        else:
            try:
                hash(v)
            except TypeError:
                v = ("obj", id(v))
        items.append((k, v))
    return tuple(items)


def _substitute(graph: Graph, drop) -> dict:
    """Walk the equations in order, reading each one's inputs through the replacements made
    so far; ``drop(e)`` returns the Var standing for ``e``'s output (``e`` is then dropped)
    or None (kept). The outputs, writes and grad sets read through the replacements too.
    Returns the replacements (``id(var) -> var``)."""
    replace: dict = {}

    def sub(i):
        return replace.get(id(i), i) if isinstance(i, Var) else i

    out = []
    for e in graph.eqns:
        if replace and any(id(i) in replace for i in e.ins if isinstance(i, Var)):
            e.ins = tuple(sub(i) for i in e.ins)  # (unchanged ins: users left as they are)
        stand_in = drop(e)
        if stand_in is None:
            out.append(e)
        else:
            replace[id(e.out)] = stand_in
    if replace:
        graph.eqns = out
        graph.outputs = [sub(v) for v in graph.outputs]
        graph.writes = [(s, sub(v)) for s, v in graph.writes]
        graph.grad_sets = [(t, sub(v) if v is not None else None) for t, v in graph.grad_sets]
    return replace


def cse(graph: Graph) -> None:
    """Common-subexpression elimination (random draws and effects are never merged)."""
    seen: dict = {}

    def merged(e):
        if isinstance(e.op, str):
            return None
        key = (e.op.name, _param_key(e.params), str(e.cdt),
               tuple(("v", id(i)) if isinstance(i, Var) else ("l", type(i.value).__name__,
                                                            repr(i.value)) for i in e.ins))
        prev = seen.get(key)
        if prev is not None and prev.out.shape == e.out.shape and prev.out.dtype == e.out.dtype:
            return prev.out
        seen[key] = e
        return None

    graph._cse_replace = _substitute(graph, merged)


def cancel_transposes(graph: Graph) -> dict:
    """``x.T.T`` -> ``x`` for 2-D transposes (a linear layer's weight gradient ``(g.T @ x).T``
    transposed back by ``weight.t()``'s backward: ``.grad``, or a backward plan's gradient
    output, is then the product itself, a fresh array, not a view that has to be copied).
    A returned or written-back double transpose of an input or captured tensor stays (the
    caller gets a view of it, as in eager mode). Returns the replacements."""
    producer: dict = {}
    exposed = {id(v) for v in graph.outputs if isinstance(v, Var)}
    exposed |= {id(v) for _, v in graph.writes}

    def cancelled(e):
        producer[id(e.out)] = e
        if not _is_transpose(e):
            return None
        p = producer.get(id(e.ins[0]))
        if p is None or not _is_transpose(p):
            return None
        src = p.ins[0]
        if src.shape != e.out.shape or src.dtype != e.out.dtype or (
                id(e.out) in exposed and id(src) not in producer):
            return None
        return src

    return _substitute(graph, cancelled)


def dce(graph: Graph, keep=()) -> None:
    """Drop equations whose values nothing needs. Effect equations are always needed, and
    so are random draws: each advances its generator, as the eager call's did, whether or
    not its value is read (a dropout in a discarded branch, a draw overwritten by
    ``uniform_``), so later draws -- in the call and after it -- stay eager's. So are
    equations that may raise on their values (``value_checks``): eager mode raises there."""
    live = {id(v) for v in graph.outputs if isinstance(v, Var)}
    live |= {id(v) for v in keep}
    live |= {id(v) for _, v in graph.writes}
    live |= {id(v) for _, v in graph.grad_sets if v is not None}
    out = []
    for e in reversed(graph.eqns):
        if id(e.out) in live or is_effect(e) or e.op == "random" or may_raise(e):
            out.append(e)
            live |= {id(i) for i in e.ins if isinstance(i, Var)}
    graph.eqns = list(reversed(out))


def _is_transpose(e: Eqn) -> bool:
    return (not isinstance(e.op, str) and e.op.permutes
            and tuple(e.params.get("dims", ())) == (1, 0) and isinstance(e.ins[0], Var))


def transpose_matmuls(graph: Graph, keep=()) -> None:
    """``(a @ b).T`` -> ``b.T @ a.T`` for 2-D matmuls read only through their transpose (a
    weight gradient ``(x.T @ g).T``): BLAS takes transposed operands for free, and the
    result comes out contiguous, so the optimizer update that reads it streams memory
    instead of striding across it. The original matmul is left for DCE.

    Only where this BLAS gives both forms the same bits (:func:`transposed_product_exact`):
    eager mode computes ``(a @ b).T``, and a compiled function must equal it. OpenBLAS's
    kernels for the two operand orders add in the same order on some processors and not on
    others (the Haswell kernels on the project's current machine: 952 of 7,680 elements of
    a 64x96 weight gradient differed by an ulp)."""
    uses: dict = {}
    for v in list(graph.outputs) + list(keep) + [v for _, v in graph.writes] + [
            v for _, v in graph.grad_sets if v is not None]:
        uses[id(v)] = uses.get(id(v), 0) + 2  # never rewritten away
    for e in graph.eqns:
        for i in e.ins:
            if isinstance(i, Var):
                uses[id(i)] = uses.get(id(i), 0) + 1
    producer = {id(e.out): e for e in graph.eqns}
    n = max((v.n for v in graph.all_vars()), default=0) + 1
    out = []
    for e in graph.eqns:
        m = producer.get(id(e.ins[0])) if _is_transpose(e) else None
        if (m is not None and not isinstance(m.op, str) and m.op.matmul
                and uses.get(id(m.out)) == 1 and len(m.out.shape) == 2
                and all(isinstance(i, Var) and len(i.shape) == 2 for i in m.ins)
                and transposed_product_exact(m.ins[0].shape, m.ins[1].shape, m.out.dtype,
                                             graph.device)):
            a, b = m.ins
            bt = Var(n, (b.shape[1], b.shape[0]), b.dtype)
            at = Var(n + 1, (a.shape[1], a.shape[0]), a.dtype)
            n += 2
            out.append(Eqn(e.op, (b,), bt, dict(e.params)))
            out.append(Eqn(e.op, (a,), at, dict(e.params)))
            out.append(Eqn(m.op, (bt, at), e.out, dict(m.params), m.cdt))
            continue
        out.append(e)
    graph.eqns = out


_EXACT_TRANSPOSED: dict = {}


def transposed_product_exact(a_shape: tuple, b_shape: tuple, dtype,
                             device: str = "cpu") -> bool:
    """Whether the BLAS of ``device`` (NumPy's on the CPU, cuBLAS through CuPy on CUDA)
    computes ``(a @ b).T`` and ``b.T @ a.T`` with the same bits for operands of these shapes
    and ``dtype``, each contiguous or a transposed view (how plan values arrive): probed once
    per shapes, dtype and device on random operands (the order of a BLAS call's additions
    depends on shapes, layouts and dtype, not on the values)."""
    dt = np.dtype(dtype)
    key = (tuple(a_shape), tuple(b_shape), dt, device)
    exact = _EXACT_TRANSPOSED.get(key)
    if exact is None:
        if dt.kind != "f":
            exact = True  # integer products are exact in any order
        else:
            rng = np.random.default_rng(0)
            a = rng.standard_normal(a_shape).astype(dt)
            b = rng.standard_normal(b_shape).astype(dt)
            if device != "cpu":
                from ..cuda import runtime

                a, b = runtime.to_device(a), runtime.to_device(b)
            xp = array_namespace(a)
            exact = all(
                bool(xp.array_equal(xp.matmul(x, y).T, xp.matmul(y.T, x.T)))
                for x in (a, xp.ascontiguousarray(a.T).T)
                for y in (b, xp.ascontiguousarray(b.T).T))
        _EXACT_TRANSPOSED[key] = exact
    return exact


def split_biased_matmuls(graph: Graph) -> None:
    """A biased matmul (an op declaring ``extra["epilogue"] = (matmul op, add op)``, i.e.
    ``addmm``) whose result only fusable element-wise ops read becomes the matmul and an
    element-wise add of the bias: fusion then adds the bias inside its readers' kernel (the
    bias + ReLU epilogue of a linear layer), one pass over the product instead of an in-place
    add and then the readers' pass. The add is the op's own float add: the same bits.

    A linear layer over more than two dims (``x`` of (B, T, C): ``addmm`` of the (B*T, C)
    rows, then a reshape) is read through that reshape: where every reader is such a view
    keeping the last dim, and only fusable element-wise ops read the views, each view is
    taken of the product instead and the bias added after it (the same element gets the same
    bias), so the GELU or residual add after it adds the bias in its kernel."""
    from ..ops.registry import REGISTRY

    readers: dict = {}
    for e in graph.eqns:
        for i in e.ins:
            if isinstance(i, Var):
                readers.setdefault(id(i), []).append(e)
    n = max((v.n for v in graph.all_vars()), default=0) + 1
    moved: set = set()  # ids of the views re-emitted after their product
    out = []
    for e in graph.eqns:
        if id(e) in moved:
            continue
        split = None if isinstance(e.op, str) else e.op.extra.get("epilogue")
        rs = readers.get(id(e.out), [])
        if (split is None or not rs or not all(isinstance(i, Var) for i in e.ins)
                or np.dtype(e.ins[0].dtype) != np.dtype(e.out.dtype)):
            out.append(e)
            continue
        bias, a, b = e.ins
        views = None if all(_fusable_reader(r) for r in rs) else rs
        if views is not None and not (len(bias.shape) == 1 and all(
                _trailing_view(r, e.out) and readers.get(id(r.out))
                and all(_fusable_reader(x) for x in readers[id(r.out)]) for r in rs)):
            out.append(e)
            continue
        product = Var(n, e.out.shape, e.out.dtype)
        n += 1
        out.append(Eqn(REGISTRY[split[0]], (a, b), product, {"ndims": (2, 2)}))
        add = REGISTRY[split[1]]
        if views is None:
            out.append(Eqn(add, (product, bias), e.out, {}, np.dtype(e.out.dtype)))
            continue
        for r in views:  # view of the product, then the bias: the view's value, as before
            view = Var(n, r.out.shape, r.out.dtype)
            n += 1
            out.append(Eqn(r.op, (product,), view, dict(r.params)))
            out.append(Eqn(add, (view, bias), r.out, {}, np.dtype(r.out.dtype)))
            moved.add(id(r))
    graph.eqns = out


def _trailing_view(e: Eqn, src: Var) -> bool:
    """Whether ``e`` is a reshape of ``src`` (elements in order) keeping its last dim."""
    return (not isinstance(e.op, str) and e.op.keeps_order and len(e.ins) == 1
            and e.ins[0] is src and len(e.out.shape) >= 1 and len(src.shape) >= 1
            and e.out.shape[-1] == src.shape[-1])


def assemble_slice_grads(graph: Graph) -> None:
    """The backward of a split (``q, k, v = qkv.split(C, 2)``) gives each part's gradient
    as a ``getitem_backward`` (a zero-filled array of the whole value with the part in its
    slice) and adds them: a zero fill per part, then passes over the whole value. Where a
    tree of ``add``s sums only such gradients of pairwise disjoint basic slices of one
    shape, each read once, its root becomes one ``assemble_slices``: every part written into
    its slice of one array, plus 0 as the adds of zeros compute it (-0.0 -> +0.0), zeros
    only where no slice reaches: the same bits. The parts' equations are left to ``dce``."""
    from ..ops.arithmetic import ADD
    from ..ops.indexing import ASSEMBLE_SLICES, GETITEM_BACKWARD, boxes_disjoint, slice_box

    parts: dict = {}  # id(var) -> [(gradient, index), ...] that the var is the sum of

    def operand(v, e) -> list | None:
        """``v``'s parts where ``e`` is its one reader (and the tree may take it)."""
        if not isinstance(v, Var) or list(v.users) != [e]:
            return None
        return parts.get(id(v))

    for e in graph.eqns:
        if e.op is GETITEM_BACKWARD and not e.params.get("advanced") and \
                isinstance(e.ins[0], Var) and \
                slice_box(e.params["index"], e.out.shape) is not None:
            parts[id(e.out)] = [(e.ins[0], e.params["index"])]
        elif e.op is ADD and len(e.ins) == 2 and not e.params and all(
                isinstance(i, Var) and tuple(i.shape) == tuple(e.out.shape)
                and np.dtype(i.dtype) == np.dtype(e.out.dtype) for i in e.ins):
            a, b = (operand(i, e) for i in e.ins)
            if a is not None and b is not None:
                parts[id(e.out)] = a + b
    out = []
    for e in graph.eqns:
        found = parts.get(id(e.out)) if e.op is ADD else None
        users = list(e.out.users)
        inner = len(users) == 1 and users[0].op is ADD and id(users[0].out) in parts
        if found is not None and not inner:  # the root of a tree
            boxes = [slice_box(index, e.out.shape) for _, index in found]
            if boxes_disjoint(boxes):
                e = Eqn(ASSEMBLE_SLICES, tuple(g for g, _ in found), e.out,
                        {"indices": tuple(index for _, index in found),
                         "shape": tuple(e.out.shape)})
        out.append(e)
    graph.eqns = out


def _fusable_reader(e: Eqn) -> bool:
    return _is_elementwise(e) and e.op.fusable and e.op.expr is not None


def drop_copies(graph: Graph, keep=()) -> list:
    """A ``clone`` of a value that only it reads, made fresh by an op (not a view, an input,
    an external or a constant), copies for nothing: its readers read the value itself. (A
    traced gradient accumulation records a clone where eager mode copies a view, e.g. a
    weight gradient ``(x.T @ g).T`` that :func:`transpose_matmuls` then makes a fresh
    array.) Returns ``keep`` with the replacements applied."""
    uses: dict = {}
    returned = {id(v) for v in list(graph.outputs) + list(keep)}
    # a leaf's new .grad: row-major in eager mode (autograd/accumulate.py), and what a later
    # optimizer step reads; a view that reorders (a transpose) standing for it would change
    # the layout its reductions see (Adafactor's row and column means round otherwise)
    grads = {id(v) for _, v in graph.grad_sets if v is not None}
    for v in list(graph.outputs) + list(keep) + [v for _, v in graph.writes] + [
            v for _, v in graph.grad_sets if v is not None]:
        uses[id(v)] = uses.get(id(v), 0) + 2  # never the only reader
    for e in graph.eqns:
        for i in e.ins:
            if isinstance(i, Var):
                uses[id(i)] = uses.get(id(i), 0) + 1
    producer = {id(e.out): e for e in graph.eqns}

    def needless(e):
        x = e.ins[0] if e.name == "clone" and e.ins else None
        p = producer.get(id(x)) if isinstance(x, Var) else None
        # a view of an internal value may stand for the copy where no caller gets it (the
        # effects copy what they keep: apply_effects) and no reader needs the copy's strides
        # (``y.transpose(1, 2).contiguous().view(...)``)
        if (p is not None and not isinstance(p.op, str)
                and (not p.op.view or (id(e.out) not in returned
                                       and (id(e.out) not in grads or p.op.keeps_order)
                                       and _internal_view(p, producer)
                                       and not any(map(_needs_strides, e.out.users))))
                and uses.get(id(x)) == 1 and x.shape == e.out.shape
                and np.dtype(x.dtype) == np.dtype(e.out.dtype)):
            return x
        return None

    replace = _substitute(graph, needless)
    return [replace.get(id(v), v) for v in keep]


def _needs_strides(e: Eqn) -> bool:
    """``e`` is a ``view()`` (a reshape that must not copy): it fails on a value whose strides
    do not allow the new shape, where a contiguous copy would have been fine."""
    return e.name == "reshape" and bool(e.params.get("strict"))


def _internal_view(e: Eqn, producer: dict) -> bool:
    """``e`` (a view) views a value an op of the graph made (not an input or external)."""
    while isinstance(e.ins[0], Var):
        p = producer.get(id(e.ins[0]))
        if p is None or isinstance(p.op, str):
            return p is not None
        if not p.op.view:
            return True
        e = p
    return False


def _one_element(v) -> bool:
    return not isinstance(v, Var) or math.prod(v.shape) <= 1


def hoist_scalars(graph: Graph) -> None:
    """Equations computing one number from numbers only (an optimizer's bias corrections
    from its step count: ``1 - beta ** step``, ``sqrt``, a cast of the 0-d step) move up to
    just after the last equation they read, so they are computed before the element-wise
    work that uses them: fusion, which keeps the graph's order, then joins what comes
    before and after such a number into one pass (an Adam update: the moments and the
    parameter update in one loop instead of two, each array read and written once).

    The graph is pure (effects are ``graph.writes`` and ``grad_sets``, applied after the
    steps), so only the order changes: the same operations on the same values, the same
    bits. Effect equations (collectives) are never moved, and nothing moves above one."""
    anchors: list = []           # equations that stay, in order
    after: dict = {}             # anchor index (-1: the top) -> hoisted equations
    where: dict = {}             # id(value) -> anchor index its producer runs at or after
    barrier = -1
    moved = False
    for e in graph.eqns:
        hoist = (not is_effect(e) and not isinstance(e.op, str) and _one_element(e.out)
                 and all(_one_element(i) for i in e.ins)
                 and (e.op.kind in ("elementwise", "movement") or e.op.copies))
        if not hoist:
            if is_effect(e):
                barrier = len(anchors)
            where[id(e.out)] = len(anchors)
            anchors.append(e)
            continue
        k = max([barrier] + [where[id(i)] for i in e.ins
                             if isinstance(i, Var) and id(i) in where])
        moved |= k < len(anchors) - 1
        after.setdefault(k, []).append(e)
        where[id(e.out)] = k
    if not moved:
        return
    out = list(after.get(-1, ()))
    for j, e in enumerate(anchors):
        out.append(e)
        out += after.get(j, ())
    graph.eqns = out


def optimize(graph: Graph, keep=()) -> list:
    """Run the passes in order; returns ``keep`` with CSE replacements applied. With
    ``JITGRAD_CHECK_IR=1`` the graph is checked after each pass (``Graph.check``)."""
    check = graph.check if check_ir() else (lambda: None)
    fold_views(graph)
    check()
    fold_constants(graph)
    check()
    cse(graph)
    check()
    rep = getattr(graph, "_cse_replace", {})
    keep = [rep.get(id(v), v) for v in keep]
    rep = cancel_transposes(graph)
    keep = [rep.get(id(v), v) for v in keep]
    check()
    split_biased_matmuls(graph)
    check()
    assemble_slice_grads(graph)
    check()
    transpose_matmuls(graph, keep)
    check()
    pool_before_relu(graph, keep)
    check()
    hoist_scalars(graph)
    check()
    dce(graph, keep)
    check()
    keep = drop_copies(graph, keep)
    check()
    return keep
