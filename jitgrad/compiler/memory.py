"""Liveness: which values a plan can drop after each step.

The environment of a running plan would otherwise hold every intermediate until the end of
the call — a joint forward+backward graph's whole activation set at once, more than eager
mode, which frees a saved activation as soon as its backward node has run. Dropping each
value after its last reader keeps the plan's peak memory at or below eager's.
"""

from __future__ import annotations

from ..trace.ir import Var

__all__ = ["last_uses"]


def last_uses(steps: list, keep_ids: set) -> list:
    """For each step, the ids of values whose last reader it is (never those in
    ``keep_ids``: outputs, residuals, effects)."""
    last: dict = {}
    for k, s in enumerate(steps):
        if s.kind == "group":
            reads = s.group.operands()
        else:
            reads = [i for i in s.eqn.ins if isinstance(i, Var)]
        for v in reads:
            if v.kind != "const":
                last[id(v)] = k
    drops: list = [[] for _ in steps]
    for vid, k in last.items():
        if vid not in keep_ids:
            drops[k].append(vid)
    return drops
