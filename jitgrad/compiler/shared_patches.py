"""A convolution's patch matrices lowered once in a plan for its forward and weight gradient.

A training step's ``conv2d(x, w, b)`` lowers ``x`` into patch matrices ("im2col") for its
GEMM, and the step's ``conv2d_backward_weight(g, x)`` lowers the same ``x`` again (the digits
CNN's second layer: ~97 us of its ~1.95 ms step each time). An op declares the pairing as
``extra["shares_patches"] = (partner op name, produce, consume, size)``:

* ``produce(*op args, **params) -> (output, patches)`` computes the op and keeps what its
  partner would rebuild;
* ``consume(patches, *partner args, **partner params) -> output`` computes the partner from
  them;
* ``size(x shape, w shape, params) -> elements`` is what keeping them holds.

Where the partner reads the same input value (the same :class:`Var`) with the same
geometry, later in the plan, the op's runner stores the patches in the plan's environment
under a key of its own and the partner's runner takes them out (so they live from the
forward to the weight gradient and no longer). The partner gets the very arrays it would have
made, so the results keep their bits (eager mode lowers twice and gives the same values). A
plan keeps at most ``SHARED_PATCHES_MAX`` elements this way (the first convolutions in step
order get it); CUDA plans and outputs placed into an existing buffer keep their own path.
"""

from __future__ import annotations

import numpy as np

from ..trace.ir import Var

__all__ = ["shared_patch_runners"]


def shared_patch_runners(steps, placed: dict, args, slots) -> dict:
    """``id(eqn) -> runner`` for the pairs of call steps that share patch matrices (see the
    module docstring); ``placed``: step index -> placement (those steps are left alone);
    ``args``/``slots``: the plan's argument resolution (``executable._args``/``_slots``)."""
    from ..ops.conv import SHARED_PATCHES_MAX

    calls = [(k, s.eqn) for k, s in enumerate(steps)
             if s.kind != "group" and s.eqn is not None and not isinstance(s.eqn.op, str)]
    budget = SHARED_PATCHES_MAX
    taken: set = set()
    out: dict = {}
    for k, e in calls:
        share = e.op.extra.get("shares_patches")
        if (share is None or placed.get(k) is not None or not isinstance(e.ins[0], Var)
                or not isinstance(e.ins[1], Var)):
            continue
        partner_name, produce, consume, size = share
        x, w = e.ins[0], e.ins[1]
        partner = next((f for j, f in calls if j > k and id(f) not in taken
                        and f.op.name == partner_name and len(f.ins) > 1 and f.ins[1] is x
                        and placed.get(j) is None and _same_geometry(e, f, w)), None)
        if partner is None:
            continue
        need = size(x.shape, w.shape, e.params)
        if need > budget:
            continue
        budget -= need
        taken.add(id(partner))
        key = ("patches", id(e))
        out[id(e)] = _producer(e, produce, key, args, slots)
        out[id(partner)] = _consumer(partner, consume, key, args, slots)
    return out


def _same_geometry(e, f, w) -> bool:
    """The partner's params agree with the op's, and its kernel size is the weight's."""
    return (all(f.params.get(name) == v for name, v in e.params.items())
            and tuple(f.params.get("kernel_size", ())) == tuple(w.shape[2:]))


def _producer(e, produce, key, args, slots):
    slot, params, own, dtype = slots(e), e.params, id(e.out), np.dtype(e.out.dtype)

    def run(env):
        value, patches = produce(*args(slot, env), **params)
        env[own] = value if value.dtype == dtype else value.astype(dtype)
        env[key] = patches
    return run


def _consumer(f, consume, key, args, slots):
    slot, params, own, dtype = slots(f), f.params, id(f.out), np.dtype(f.out.dtype)

    def run(env):
        value = consume(env.pop(key), *args(slot, env), **params)
        env[own] = value if value.dtype == dtype else value.astype(dtype)
    return run
