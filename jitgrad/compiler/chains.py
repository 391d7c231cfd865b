"""Chains of calls a plan runs as one function.

A training step's loss and its gradient are four calls in the graph, e.g. cross-entropy:
``y = log_softmax(x)``, ``loss = nll_loss(y, t)``, ``gy = nll_loss_backward(g, t)``,
``gx = log_softmax_backward(gy, y)``. The middle op declares the chain
(``extra["chain"]``: the ops of the other three roles, by identity, the names of its
``params`` that ``run`` takes, and ``run(x, t, g, **params) -> (loss, gx)``, which computes
what the four calls would, bit for bit -- one kernel pass for the common case). Where a
plan's calls hold that chain and nothing else reads its intermediates (``y``, ``gy``), the
first call's step runs ``run`` and sets both results; the other three do nothing.
"""

from __future__ import annotations

import numpy as np

from ..trace.ir import Lit, Var

__all__ = ["fused_chains", "is_2d_transpose", "nothing", "step_readers_and_positions"]


def _is_none(x) -> bool:
    return x is None or (isinstance(x, Lit) and x.value is None)


def is_2d_transpose(e) -> bool:
    """Whether equation ``e`` is a view transposing a 2-D value (``permute(x, (1, 0))``)."""
    return (e is not None and not isinstance(e.op, str) and e.op.view and e.op.permutes
            and tuple(e.params.get("dims", ())) == (1, 0) and isinstance(e.ins[0], Var))


def step_readers_and_positions(steps: list) -> tuple[dict, dict]:
    """``(readers, position)``: id(value) -> the indices of the steps reading it, and ->
    the index of the step computing it (inputs and constants have none)."""
    readers: dict = {}
    position: dict = {}
    for k, s in enumerate(steps):
        ins = s.group.operands() if s.kind == "group" else (s.eqn.ins if s.eqn else ())
        for i in ins:
            if isinstance(i, Var):
                readers.setdefault(id(i), []).append(k)
        if s.eqn is not None:
            position[id(s.eqn.out)] = k
        elif s.group is not None:
            for e in s.group.eqns + s.group.reductions:
                position[id(e.out)] = k
    return readers, position


def fused_chains(steps: list, ends: set) -> tuple[dict, dict, list]:
    """``(runners, reads, found)``: id(eqn) -> the runner of its step, and -> what that
    step reads now (for liveness), for each chain found among ``steps``' calls (``ends``:
    ids of values the plan must keep: its intermediates must not be among them); ``found``:
    each chain's calls ``(input, middle, grad, input_grad)``."""
    calls = [(k, s.eqn) for k, s in enumerate(steps)
             if s.kind == "call" and s.eqn is not None and not isinstance(s.eqn.op, str)]
    readers, position = step_readers_and_positions(steps)
    runners: dict = {}
    reads: dict = {}
    found_all: list = []
    for k_mid, mid in calls:
        chain = mid.op.extra.get("chain")
        if chain is None or id(mid) in runners:
            continue
        found = _match(chain, mid, k_mid, calls, readers, position, ends)
        if found is None:
            continue
        (k_in, e_in), e_g, e_ig = found
        x, t, g = e_in.ins[0], mid.ins[1], e_g.ins[0]
        params = {p: mid.params[p] for p in chain["params"]}
        runners[id(e_in)] = _chain_runner(chain["run"], (x, t, g), params, id(mid.out),
                                          id(e_ig.out))
        reads[id(e_in)] = (x, t, g)
        for e in (mid, e_g, e_ig):
            runners[id(e)] = nothing
            reads[id(e)] = ()
        found_all.append((e_in, mid, e_g, e_ig))
    return runners, reads, found_all


def _match(chain, mid, k_mid, calls, readers, position, ends):
    """The chain's other three calls around ``mid``, or None where it does not hold."""
    y, t, w = mid.ins
    if not isinstance(y, Var) or not isinstance(t, Var) or not _is_none(w):
        return None
    e_in = next(((k, e) for k, e in calls if e.out is y and e.op is chain["input"]), None)
    if e_in is None:
        return None
    k_in, lsm = e_in
    x = lsm.ins[0]
    if not isinstance(x, Var) or len(x.shape) != 2 or lsm.params.get("dim") not in (1, -1):
        return None
    e_g = next((e for _, e in calls if e.op is chain["grad"] and e.ins[1] is t
                and _is_none(e.ins[2]) and all(e.params.get(p) == v
                                                for p, v in mid.params.items()
                                                if p in e.params)), None)
    if e_g is None:
        return None
    e_ig = next((e for _, e in calls if e.op is chain["input_grad"]
                 and e.ins[0] is e_g.out and e.ins[1] is y
                 and e.params.get("dim") == lsm.params.get("dim")), None)
    if e_ig is None:
        return None
    dtypes = {np.dtype(v.dtype) for v in (x, y, mid.out, e_g.out, e_ig.out)}
    g = e_g.ins[0]
    if len(dtypes) != 1 or not isinstance(g, Var) or np.dtype(g.dtype) not in dtypes:
        return None
    step_of = {id(e): k for k, e in calls}
    if len(readers.get(id(y), ())) != 2 or len(readers.get(id(e_g.out), ())) != 1 or \
            id(y) in ends or id(e_g.out) in ends:
        return None
    if set(readers[id(y)]) != {k_mid, step_of[id(e_ig)]}:
        return None
    made = position.get(id(g))  # the gradient seed must exist where the chain now runs
    if made is not None and made >= k_in:
        return None
    return e_in, e_g, e_ig


def _chain_runner(run, ins: tuple, params: dict, out_a: int, out_b: int):
    slots = tuple((True, id(i)) if isinstance(i, Var) else (False, i.value) for i in ins)

    def both(env):
        env[out_a], env[out_b] = run(*[env[x] if v else x for v, x in slots], **params)
    return both


def nothing(env) -> None:
    """The runner of a call whose value another step set (a chain's later calls, the
    second call of a shared-kernel pair)."""
