"""The IR keeps its users and checks itself (Graph.check): tracing and every compiler pass
leave a well-formed graph (the suite runs with JITGRAD_CHECK_IR=1), and a broken one is
refused with a message naming the equation."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.compiler.passes import optimize
from jitgrad.trace.ir import Eqn, IRError, Lit, Var


def _traced(fn, *args):
    f = jg.compile(fn)
    f(*args)
    (entry,) = (e for es in f._entries.values() for e in es)
    return entry


def _graph(rng):
    from jitgrad.trace.state import STATE
    from jitgrad.trace.tracer import Tracer

    x = jg.tensor(rng.standard_normal((3, 4)), dtype=jg.float32)
    tr = Tracer("g")
    tr.add_input(x, 0)
    STATE.tracer = tr
    try:
        y = jg.tanh(x * 2.0) + x
        z = (y * y).sum(1)
    finally:
        STATE.tracer = None
    return tr.finish([z])


def test_users_follow_the_equations(rng):
    g = _graph(rng)
    g.check()
    x = g.inputs[0]
    assert [e.name for e in x.users] == ["mul", "add"]
    mul = g.eqns[0]
    mul.ins = (Lit(1.0), Lit(2.0))  # the input is no longer read by mul
    assert [e.name for e in x.users] == ["add"]
    g.eqns = g.eqns[1:]  # dropping an equation drops it from its inputs' users
    assert all(e is not mul for v in g.all_vars() for e in v.users)


def test_passes_keep_users_exact(rng):
    def fn(x, w):
        a = (x * w).sum(0)            # CSE: computed twice
        b = (x * w).sum(0)
        t = (x @ w.T).T               # transpose_matmuls rewrites it
        return a + b, t.exp()
    x = jg.tensor(rng.standard_normal((5, 3)), dtype=jg.float32)
    w = jg.tensor(rng.standard_normal((5, 3)), dtype=jg.float32)
    entry = _traced(fn, x, w)
    g = entry.graph     # optimised in place when the plan was built
    g.check()
    optimize(g)         # again: idempotent and still well formed
    g.check()


@pytest.mark.parametrize("break_it", ["undefined", "stale_user", "broadcast", "redefined",
                                      "operand"])
def test_check_names_what_is_wrong(break_it, rng):
    g = _graph(rng)
    e = g.eqns[2]  # add(tanh, x)
    if break_it == "undefined":
        e.ins = (Var(99, e.out.shape, e.out.dtype), e.ins[1])
        match = "reads %99 before any definition"
    elif break_it == "stale_user":
        g.inputs[0].users[Eqn(e.op, (), Var(98, (), np.float32))] = None
        match = "lists a user that does not read it"
    elif break_it == "broadcast":
        e.ins = (Var(97, (7,), np.dtype(np.float32), kind="const"),)
        match = "do not broadcast"
    elif break_it == "redefined":
        g.eqns.append(Eqn(e.op, e.ins, e.out, e.params, e.cdt))
        match = "redefines"
    else:
        e._ins = (object(),)
        match = "neither a Var nor a Lit"
    with pytest.raises(IRError, match=match):
        g.check()


def test_contiguous_before_view_is_kept():
    """``y.transpose(1, 2).contiguous().view(...)`` of an internal value (attention's heads
    side by side again): the clone cannot be dropped for the transposed view, which ``view``
    cannot reshape."""
    def f(q, v):
        y = (q @ q.transpose(-2, -1)) @ v
        b, h, t, d = y.shape
        return y.transpose(1, 2).contiguous().view(b, t, h * d)

    q, v = jg.randn(2, 3, 4, 5), jg.randn(2, 3, 4, 5)
    cf = jg.compile(f)
    for _ in range(2):
        np.testing.assert_array_equal(cf(q, v).numpy(), f(q, v).numpy())
