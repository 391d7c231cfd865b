"""Max pooling before ReLU: ``max_pool2d(relu(c))`` computed as ``relu(max_pool2d(c))``.

A CNN block (conv, ReLU, max pooling) traced with its backward reads and writes the
full-size ReLU output twice more than it needs to: ``r = relu(c)`` is pooled, and the
backward sends the pooled gradient back with ``threshold_backward(max_pool2d_backward(gm, r,
i), r)``. When nothing else reads ``r`` (nor the argmax positions ``i``), the graph is
rewritten to pool ``c`` and apply the ReLU, and its backward, on the pooled values (a
quarter of the elements for 2x2 windows)::

    p = max_pool2d(c); i = max_pool2d_indices(c); m = relu(p)
    gc = max_pool2d_backward(threshold_backward(gm, m, 0), c, i)

Every value and gradient keeps eager mode's bits: ReLU is monotone and keeps NaN, so ``m``
is the same and, wherever ``m > 0`` or NaN, so is the window's first maximum; where
``m <= 0`` both forms send 0 (``threshold_backward`` zeroes it, the scatter adds zeros), and
positions reached by several windows sum the same terms in the same order. Only the argmax
positions of windows with ``m <= 0`` differ, which is why a graph that reads ``i`` itself
(``return_indices=True``) is left alone.
"""

from __future__ import annotations

from ..trace.ir import Eqn, Graph, Var

__all__ = ["pool_before_relu"]


def _named(e, name: str) -> bool:
    return not isinstance(e.op, str) and e.op.name == name


def pool_before_relu(graph: Graph, keep=()) -> int:
    """Rewrite every ``relu`` -> ``max_pool2d`` block whose ReLU output and argmax positions
    only the pooling and its backward read (see the module docstring); returns how many."""
    pinned = {id(v) for v in list(graph.outputs) + list(keep)}
    pinned |= {id(v) for _, v in graph.writes}
    pinned |= {id(v) for _, v in graph.grad_sets if v is not None}
    n = max((v.n for v in graph.all_vars()), default=0) + 1
    replaced: dict = {}  # id(eqn) -> the equations that take its place
    rewrites = 0
    for e in graph.eqns:
        if not _named(e, "relu") or id(e.out) in pinned:
            continue
        plan = _match(e, pinned)
        if plan is None:
            continue
        pool, idx, backs = plan
        rewrites += 1
        c, m = e.ins[0], pool.out
        p = Var(n, m.shape, m.dtype)
        n += 1
        pool.out = p
        pool.ins = (c,)
        idx.ins = (c,)
        replaced[id(e)] = []
        replaced[id(pool)] = [pool, Eqn(e.op, (p,), m, dict(e.params), e.cdt)]
        for b, t in backs:
            gm = b.ins[0]
            gmm = Var(n, gm.shape, gm.dtype)
            n += 1
            b.ins = (gmm, c, b.ins[2])
            b.out = t.out  # the scatter now gives the gradient of c
            replaced[id(b)] = [Eqn(t.op, (gm, m), gmm, dict(t.params), t.cdt), b]
            replaced[id(t)] = []
    if replaced:
        graph.eqns = [x for e in graph.eqns for x in replaced.get(id(e), [e])]
    return rewrites


def _match(relu: Eqn, pinned: set):
    """``(pool, indices, [(pool backward, threshold backward)...])`` reading ``relu``'s
    output as the rewrite needs, or None."""
    r = relu.out
    pool = idx = None
    backs, thresholds = [], []
    for u in r.users:
        if _named(u, "max_pool2d") and pool is None:
            pool = u
        elif _named(u, "max_pool2d_indices") and idx is None:
            idx = u
        elif _named(u, "max_pool2d_backward") and u.ins[1] is r:
            backs.append(u)
        elif (_named(u, "threshold_backward") and u.ins[1] is r and u.ins[0] is not r
              and u.params.get("threshold") == 0.0):
            thresholds.append(u)
        else:
            return None
    if pool is None or idx is None or id(idx.out) in pinned:
        return None
    if any(pool.params.get(k) != v for k, v in idx.params.items() if k in pool.params):
        return None
    pairs = []
    for b in backs:
        grad = b.out
        t = next(iter(grad.users), None) if len(grad.users) == 1 else None
        if (b.ins[2] is not idx.out or id(grad) in pinned or t not in thresholds
                or t.ins[0] is not grad):
            return None
        pairs.append((b, t))
    if len(pairs) != len(thresholds) or not pairs:
        return None
    if any(u not in {b for b, _ in pairs} for u in idx.out.users):
        return None
    return pool, idx, pairs
