"""Test samples for registered ops: ``sample(rng, dtype) -> [(args, params), ...]``.

``args`` are NumPy arrays (tensor inputs) or Python numbers; each op's samples cover several
shapes and broadcasts and stay inside the op's smooth domain, so gradcheck is meaningful.
"""

from __future__ import annotations

import numpy as np

SHAPES = [(), (3,), (2, 3), (2, 1, 3)]
BROADCASTS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)),
              ((4, 1, 3), (2, 1))]


def _r(rng, shape, dtype, lo=-2.0, hi=2.0):
    return np.asarray(rng.uniform(lo, hi, size=shape), dtype=dtype)


def _away(rng, shape, dtype, lo=0.3, hi=2.0):
    mag = rng.uniform(lo, hi, size=shape)
    sgn = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return np.asarray(mag * sgn, dtype=dtype)


def unary(rng, dtype):
    return [((_r(rng, s, dtype),), {}) for s in SHAPES]


def unary_positive(rng, dtype):
    return [((_r(rng, s, dtype, 0.5, 3.0),), {}) for s in SHAPES]


def unary_away_from_0(rng, dtype):
    return [((_away(rng, s, dtype),), {}) for s in SHAPES]


def binary(rng, dtype):
    out = [((_r(rng, a, dtype), _r(rng, b, dtype)), {}) for a, b in BROADCASTS]
    out.append(((_r(rng, (2, 3), dtype), 1.5), {}))
    return out


def binary_same(rng, dtype):
    return [((_r(rng, s, dtype), _r(rng, s, dtype)), {}) for s in SHAPES]


def binary_same_away_from_0(rng, dtype):
    out = [((_r(rng, s, dtype), _away(rng, s, dtype)), {}) for s in SHAPES]
    return [(args, {"threshold": 0.0}) for args, _ in out]


def binary_nonzero_b(rng, dtype):
    out = [((_r(rng, a, dtype), _away(rng, b, dtype)), {}) for a, b in BROADCASTS]
    out.append(((_r(rng, (2, 3), dtype), 1.5), {}))
    return out


def pow_scalar(rng, dtype):
    out = []
    for e in (2, 3, 0.5, -1.5, 1, 0):
        for s in ((), (2, 3)):
            out.append(((_r(rng, s, dtype, 0.5, 2.0),), {"exponent": e}))
    return out


def pow_tensor(rng, dtype):
    return [((_r(rng, a, dtype, 0.5, 2.0), _r(rng, b, dtype, -1.5, 2.0)), {})
            for a, b in BROADCASTS]


def rpow_scalar(rng, dtype):
    return [((_r(rng, s, dtype),), {"base": b}) for s in SHAPES for b in (2.0, 0.5)]


def clamp(rng, dtype):
    return [((_away(rng, s, dtype, 0.1, 2.0),), {"min": -1.0, "max": 1.0}) for s in SHAPES
            ] + [((_r(rng, (2, 3), dtype),), {"min": -0.5, "max": float("inf")})]


def clamp_backward(rng, dtype):
    return [((_r(rng, s, dtype), _away(rng, s, dtype, 0.1, 2.0)), {"min": -1.0, "max": 1.0})
            for s in SHAPES]


def pow_backward(rng, dtype):
    return [((_r(rng, s, dtype), _r(rng, s, dtype, 0.5, 2.0)), {"exponent": e})
            for s in ((), (2, 3)) for e in (3.0, 0.5, 2.0)]


def where(rng, dtype):
    out = []
    for a, b in BROADCASTS:
        shape = np.broadcast_shapes(a, b)
        cond = rng.random(size=shape) < 0.5
        out.append(((cond, _r(rng, a, dtype), _r(rng, b, dtype)), {}))
    return out


def reduce(rng, dtype):
    """Samples for sum/mean-like reductions with dim/keepdim variants."""
    out = []
    for s in ((), (5,), (2, 3), (2, 3, 4)):
        out.append(((_r(rng, s, dtype),), {"dim": None, "keepdim": False}))
        if len(s) >= 1:
            out.append(((_r(rng, s, dtype),), {"dim": (0,), "keepdim": False}))
            out.append(((_r(rng, s, dtype),), {"dim": (len(s) - 1,), "keepdim": True}))
        if len(s) >= 2:
            out.append(((_r(rng, s, dtype),), {"dim": (0, len(s) - 1), "keepdim": False}))
    return out


def reduce_distinct(rng, dtype):
    """Like :func:`reduce` but with distinct values (max/min have a unique argmax)."""
    out = []
    for args, p in reduce(rng, dtype):
        x = args[0]
        vals = rng.permutation(max(x.size, 1))[: x.size].reshape(x.shape).astype(dtype)
        out.append(((vals * 0.37 + 0.1,), p))
    return out


def single_dim(rng, dtype):
    """Samples for dim-wise ops (softmax, logsumexp): one dim each."""
    out = []
    for s in ((5,), (2, 3), (2, 3, 4)):
        for d in range(len(s)):
            out.append(((_r(rng, s, dtype),), {"dim": d}))
    return out


def masked_fill(rng, dtype):
    return [((_r(rng, s, dtype), rng.random(size=s) < 0.5), {"value": -0.75})
            for s in SHAPES]


def single_dim_pair(rng, dtype):
    """Samples for (grad, output) ops along one dim (softmax backward family)."""
    out = []
    for s in ((5,), (2, 3), (2, 3, 4)):
        for d in range(len(s)):
            y = rng.uniform(0.05, 1.0, size=s).astype(dtype)
            out.append(((_r(rng, s, dtype), y), {"dim": d}))
    return out


def reduce_var(rng, dtype):
    """Reductions with a Bessel correction (var/std), sized so n > correction."""
    out = []
    for s in ((5,), (3, 4), (2, 3, 4)):
        for dims in ((0,), (len(s) - 1,), tuple(range(len(s)))):
            for keep in (False, True):
                for corr in (0, 1):
                    out.append(((_r(rng, s, dtype),), {"dim": dims, "keepdim": keep,
                                                        "correction": corr}))
    return out
