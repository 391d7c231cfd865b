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


def unary_inside_1(rng, dtype):
    """Inside (-1, 1), away from the ends (asin, acos, atanh, and tan's well-behaved range)."""
    return [((_r(rng, s, dtype, -0.9, 0.9),), {}) for s in SHAPES]


def unary_above_1(rng, dtype):
    """Above 1 (acosh)."""
    return [((_r(rng, s, dtype, 1.1, 4.0),), {}) for s in SHAPES]


def unary_away_from_0(rng, dtype):
    return [((_away(rng, s, dtype),), {}) for s in SHAPES]


def unary_gamma(rng, dtype):
    """Positive and negative non-integer arguments, away from Gamma's poles (lgamma,
    digamma)."""
    out = [((_r(rng, s, dtype, 0.3, 5.0),), {}) for s in SHAPES]
    out.append(((np.asarray([-2.6, -1.3, -0.4, 0.7, 12.5], dtype=dtype),), {}))
    return out


def polygamma(rng, dtype):
    """Orders 1 to 3 at positive arguments and one negative non-integer row."""
    out = [((_r(rng, s, dtype, 0.4, 4.0),), {"n": n}) for n, s in zip((1, 2, 3, 1), SHAPES)]
    out.append(((np.asarray([-1.4, -0.6, 2.5], dtype=dtype),), {"n": 2}))
    return out


def unary_probability(rng, dtype):
    """Inside (0, 1), away from the ends (ndtri)."""
    return [((_r(rng, s, dtype, 0.05, 0.95),), {}) for s in SHAPES]


def unary_wide(rng, dtype):
    """From -12 to 6: both tails of the normal CDF (log_ndtr)."""
    return [((_r(rng, s, dtype, -12.0, 6.0),), {}) for s in SHAPES]


_SPECIAL_BROADCASTS = [BROADCASTS[i] for i in (0, 2, 3)]  # same shape, outer, 0-d


def zeta(rng, dtype):
    """Hurwitz zeta(x, q): integer exponents (int64 tensors: PyTorch has no derivative in
    ``x``, so only ``q`` requires grad) and ``q`` in (0.3, 3), broadcast; a Python exponent;
    float exponents (forward only: their gradient raises, as PyTorch's), one with a Python
    ``q``."""
    out = [((rng.integers(2, 6, size=a), _r(rng, b, dtype, 0.3, 3.0)), {})
           for a, b in _SPECIAL_BROADCASTS]
    out.append(((2.5, _r(rng, (2, 3), dtype, 0.4, 3.0)), {}))
    out.append(((_r(rng, (2, 3), dtype, 1.2, 6.0), _r(rng, (3,), dtype, 0.2, 4.0)),
                {"_nograd": True}))
    out.append(((_r(rng, (4,), dtype, 1.5, 5.0), 0.75), {"_nograd": True}))
    return out


def incomplete_gamma(rng, dtype):
    """igamma / igammac(a, x): ``a`` 1 or 2 as int64 tensors (PyTorch has no derivative in
    ``a``; its float32 lgamma of an integer ``a`` is exact there) with ``x`` in (0.2, 6),
    broadcast; float ``a`` from 0.3 to 12 (forward only: their gradient raises)."""
    out = [((rng.integers(1, 3, size=a), _r(rng, b, dtype, 0.2, 6.0)), {})
           for a, b in _SPECIAL_BROADCASTS]
    out.append(((_r(rng, (2, 3), dtype, 0.3, 12.0), _r(rng, (2, 3), dtype, 0.05, 15.0)),
                {"_nograd": True}))
    out.append(((_r(rng, (3, 1), dtype, 0.5, 3.0), _r(rng, (4,), dtype, 0.1, 5.0)),
                {"_nograd": True}))
    return out


def bessel(rng, dtype):
    """From -9 to 9, both signs (J, I, the spherical j0, Ai: defined everywhere)."""
    return [((_r(rng, s, dtype, -9.0, 9.0),), {}) for s in SHAPES]


def bessel_positive(rng, dtype):
    """From 0.1 to 12 (Y, K: defined above 0)."""
    return [((_r(rng, s, dtype, 0.1, 12.0),), {}) for s in SHAPES]


def polynomial(rng, dtype):
    """Orthogonal polynomials p_n(x): x in (-1.2, 1.2), degrees 0 to 12 as int64 tensors
    (both the recurrence and, from 7 or 9, the trigonometric forms), broadcast; a Python
    degree; a Python x (with float degrees: the dtype is theirs); float degrees (truncated)."""
    out = [((_r(rng, a, dtype, -1.2, 1.2), rng.integers(0, 13, size=b)), {})
           for a, b in _SPECIAL_BROADCASTS]
    out.append(((_r(rng, (2, 3), dtype, -1.0, 1.0), 5), {}))
    out.append(((0.375, rng.integers(0, 10, size=(4,)).astype(dtype)), {}))
    out.append(((_r(rng, (3,), dtype, 0.1, 0.9), _r(rng, (2, 1), dtype, 0.0, 11.0)), {}))
    return out


def binary(rng, dtype):
    out = [((_r(rng, a, dtype), _r(rng, b, dtype)), {}) for a, b in BROADCASTS]
    out.append(((_r(rng, (2, 3), dtype), 1.5), {}))
    return out


def binary_tensors(rng, dtype):
    """Two tensors of each broadcast pair (functions that take no Python number)."""
    return [((_r(rng, a, dtype), _r(rng, b, dtype)), {}) for a, b in BROADCASTS]


def binary_scaled(rng, dtype):
    """Two tensors and ``alpha`` (``add(a, b, alpha=...)``)."""
    return [((_r(rng, a, dtype), _r(rng, b, dtype)), {"alpha": alpha})
            for (a, b), alpha in zip(BROADCASTS, (-0.01, 2.0, 0.5, -3.0, 1.5))]


def zero_times_log(rng, dtype):
    """``xlogy`` / ``xlog1py``: any ``x`` (zeros among them), ``y`` in (0.3, 2)."""
    out = []
    for a, b in BROADCASTS:
        x = _r(rng, a, dtype)
        x[x < -1.5] = 0
        out.append(((x, _r(rng, b, dtype, 0.3, 2.0)), {}))
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
    for e in (2, 3, 0.5, -0.5, -1, -2, -1.5, 1, 0):  # every pow_scalar fast path
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


# ------------------------------------------------- nn ops (jitgrad.ops.nnops, jitgrad.nn)
def _gelu_params(approx, dtype):
    from .nnops.activation import CUTS

    return {"approx": approx, "cut": CUTS[np.dtype(dtype)]}


def gelu(rng, dtype):
    return [((_r(rng, s, dtype, -3.0, 3.0),), _gelu_params(a, dtype))
            for s in SHAPES for a in (0.0, 1.0)]


def gelu_backward(rng, dtype):
    return [((_r(rng, s, dtype), _r(rng, s, dtype, -3.0, 3.0)), _gelu_params(a, dtype))
            for s in SHAPES for a in (0.0, 1.0)]


def addcdiv(rng, dtype):
    cases = [((2, 3), (2, 3), (2, 3), 1.0), ((2, 3), (3,), (2, 1), 0.5), ((), (2, 3), (), -2.0)]
    return [((_r(rng, a, dtype), _r(rng, b, dtype), _away(rng, c, dtype, 0.5, 2.0)),
             {"value": v}) for a, b, c, v in cases]


def lerp(rng, dtype):
    return [((_r(rng, a, dtype), _r(rng, b, dtype)), {"weight": w})
            for a, b in (((2, 3), (2, 3)), ((2, 3), (3,)), ((), (2,))) for w in (0.25, 0.75)]


def lerp_tensor(rng, dtype):
    # weights on both sides of PyTorch's |w| < 0.5 switch, away from it (a kink in rounding
    # only: the two forms agree in exact arithmetic, so the gradient is smooth)
    cases = [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)), ((), (2,), ())]
    return [((_r(rng, a, dtype), _r(rng, b, dtype), _r(rng, w, dtype)), {})
            for a, b, w in cases]


def addmm(rng, dtype):
    cases = [((4,), (2, 3), (3, 4)), ((2, 4), (2, 3), (3, 4)), ((1, 4), (2, 3), (3, 4)),
             ((), (3, 2), (2, 1))]
    return [(tuple(_r(rng, s, dtype) for s in c), {}) for c in cases]


_EMB_CASES = [(np.array([0, 2, 4, 2]), None), (np.array([[1, 0], [3, 3]]), None),
              (np.array(3), None), (np.array([1, 2, 1, 0]), 1)]


def embedding(rng, dtype):
    # padding_idx rows get no gradient although the output depends on them: not a derivative
    return [((_r(rng, (5, 3), dtype), idx), {"padding_idx": pad, "_nograd": pad is not None})
            for idx, pad in _EMB_CASES]


def embedding_backward(rng, dtype):
    return [((_r(rng, idx.shape + (3,), dtype), idx), {"num_weights": 5, "padding_idx": pad})
            for idx, pad in _EMB_CASES]


_LN_CASES = [((4, 5), (5,), True, True), ((2, 3, 4), (3, 4), True, True),
             ((3, 4), (4,), False, False), ((2, 3, 4), (4,), True, False),
             ((4,), (4,), False, True)]


def layer_norm(rng, dtype):
    out = []
    for xs, ns, w, b in _LN_CASES:
        args = (_r(rng, xs, dtype), _r(rng, ns, dtype, 0.5, 1.5) if w else None,
                _r(rng, ns, dtype) if b else None)
        out.append((args, {"normalized_shape": ns, "eps": 1e-5}))
    return out


def layer_norm_backward(rng, dtype):
    out = []
    for xs, ns, w, _ in _LN_CASES:
        args = (_r(rng, xs, dtype), _r(rng, xs, dtype),
                _r(rng, ns, dtype, 0.5, 1.5) if w else None)
        out.append((args, {"normalized_shape": ns, "eps": 1e-5}))
    return out


def _bn_args(rng, dtype, xs, w, b, training, grad=False):
    c = xs[1]
    args = [_r(rng, xs, dtype)] if not grad else [_r(rng, xs, dtype), _r(rng, xs, dtype)]
    args += [_r(rng, (c,), dtype, 0.5, 1.5) if w else None]
    if not grad:
        args.append(_r(rng, (c,), dtype) if b else None)
    if training:
        args += [None, None]
    else:
        args += [_r(rng, (c,), dtype, -0.5, 0.5), _r(rng, (c,), dtype, 0.5, 2.0)]
    return tuple(args)


_BN_CASES = [((4, 3), True, True, True), ((4, 3, 5), True, True, True),
             ((4, 3), False, False, True), ((4, 3), True, True, False),
             ((2, 3, 4), True, False, False)]


def batch_norm(rng, dtype):
    return [(_bn_args(rng, dtype, xs, w, b, tr), {"training": tr, "eps": 1e-5,
                                                   "_torch_nograd": (3, 4)})
            for xs, w, b, tr in _BN_CASES]


def batch_norm_backward(rng, dtype):
    return [(_bn_args(rng, dtype, xs, w, b, tr, grad=True),
             {"training": tr, "eps": 1e-5, "_torch_nograd": (3, 4)})
            for xs, w, b, tr in _BN_CASES]


def _logp(rng, shape, dtype):
    return _r(rng, shape, dtype, -3.0, -0.1)


def nll_loss(rng, dtype):
    t = np.array([1, 0, 4, 2])
    w = _r(rng, (5,), dtype, 0.5, 2.0)
    nog = {"_torch_nograd": (2,)}
    out = [((_logp(rng, (4, 5), dtype), t, None), {"reduction": r, "ignore_index": -100})
           for r in ("mean", "sum", "none")]
    out += [
        ((_logp(rng, (4, 5), dtype), np.array([1, -100, 4, 1]), None),
         {"reduction": "mean", "ignore_index": -100, "_id": "ignored"}),
        ((_logp(rng, (4, 5), dtype), np.array([1, 3, 4, 1]), w),
         {"reduction": "mean", "ignore_index": 3, "_id": "weight-mean", **nog}),
        ((_logp(rng, (4, 5), dtype), t, w),
         {"reduction": "none", "ignore_index": -100, "_id": "weight-none", **nog}),
        ((_logp(rng, (4, 5), dtype), t, w),
         {"reduction": "sum", "ignore_index": -100, "_id": "weight-sum", **nog}),
        ((_logp(rng, (5,), dtype), np.array(2), None),
         {"reduction": "mean", "ignore_index": -100, "_id": "1d"}),
        ((_logp(rng, (2, 3, 2, 2), dtype), rng.integers(0, 3, (2, 2, 2)), None),
         {"reduction": "mean", "ignore_index": -100, "_id": "2d-mean"}),
        ((_logp(rng, (2, 3, 2, 2), dtype), rng.integers(0, 3, (2, 2, 2)), w[:3]),
         {"reduction": "none", "ignore_index": -100, "_id": "2d-weight", **nog}),
    ]
    return out


def nll_loss_backward(rng, dtype):
    out = []
    for (x, t, w), p in nll_loss(rng, dtype):
        if x.ndim == 3:
            continue
        gshape = t.shape if p["reduction"] == "none" else ()
        out.append(((_r(rng, gshape, dtype), t, w), {**p, "shape": x.shape}))
    return out


def mse_loss(rng, dtype):
    return [((_r(rng, s, dtype), _r(rng, s, dtype)), {"reduction": r})
            for s in ((), (3,), (2, 3)) for r in ("mean", "sum", "none")]


def mse_loss_backward(rng, dtype):
    return [((_r(rng, x.shape if p["reduction"] == "none" else (), dtype), x, y), p)
            for (x, y), p in mse_loss(rng, dtype)]


def binary_cross_entropy(rng, dtype):
    def prob(s):
        return np.asarray(rng.uniform(0.05, 0.95, size=s), dtype=dtype)

    out = [((prob(s), prob(s), None), {"reduction": r})
           for s in ((), (3,), (2, 3)) for r in ("mean", "sum", "none")]
    out += [((prob((2, 3)), prob((2, 3)), _r(rng, s, dtype, 0.5, 2.0)),
             {"reduction": r, "_torch_nograd": (2,)})
            for s, r in (((2, 3), "mean"), ((3,), "none"))]
    return out


def binary_cross_entropy_backward(rng, dtype):
    out = []
    for (x, y, w), p in binary_cross_entropy(rng, dtype):
        g = _r(rng, x.shape if p["reduction"] == "none" else (), dtype)
        out.append(((g, x, y, w), {**p, "_torch_nograd": (3,)}))
    return out


def arg_reduce(rng, dtype):
    """Samples for argmax/argmin: distinct values, with and without a dim."""
    out = []
    for s in ((5,), (2, 3), (2, 3, 4)):
        vals = (rng.permutation(int(np.prod(s))).reshape(s) * 0.37 + 0.1).astype(dtype)
        out.append(((vals,), {"dim": None, "keepdim": False}))
        out.append(((vals,), {"dim": len(s) - 1, "keepdim": True}))
        out.append(((vals,), {"dim": 0, "keepdim": False}))
    return out


# --------------------------------------------------------- convolution and pooling (ops/conv)
#: (input shape, weight shape, bias?, conv kwargs): stride, padding (incl. 'same' with an even
#: kernel: asymmetric), dilation, groups, depthwise, a 1x1 kernel with padding, and a case with
#: enough channels for the dot-product GEMM and the flipped-kernel input gradient
_CONV_CASES = [
    ((2, 3, 5, 5), (4, 3, 3, 3), True, {}, "basic"),
    ((2, 2, 6, 5), (3, 2, 3, 2), True, {"stride": 2, "padding": 1}, "stride2"),
    ((1, 2, 7, 6), (2, 2, 2, 3), True, {"dilation": 2, "padding": (1, 2)}, "dilation2"),
    ((2, 4, 5, 5), (6, 2, 3, 3), True, {"groups": 2, "stride": (1, 2)}, "groups2"),
    ((2, 3, 5, 4), (6, 1, 3, 3), False, {"groups": 3, "padding": 1}, "depthwise"),
    ((1, 2, 5, 5), (3, 2, 2, 4), False, {"padding": "same"}, "same-even"),
    ((1, 3, 3, 3), (2, 3, 1, 1), True, {"padding": 1}, "1x1-pad"),
    ((2, 4, 4, 4), (3, 4, 3, 3), True, {"padding": 1}, "dot-path"),
    ((1, 8, 4, 4), (4, 4, 3, 3), False, {"groups": 2, "padding": (1, 0)}, "groups-dot"),
]


def _conv_hw(xs, ws, kw):
    """Output (OH, OW) of a conv case (int/pair params; 'same' keeps the size)."""
    if kw.get("padding") == "same":
        return xs[2:]

    def pair(v):
        return (v, v) if isinstance(v, int) else tuple(v)

    s, p, d = pair(kw.get("stride", 1)), pair(kw.get("padding", 0)), pair(kw.get("dilation", 1))
    return tuple((xs[2 + i] + 2 * p[i] - d[i] * (ws[2 + i] - 1) - 1) // s[i] + 1
                 for i in range(2))


def conv2d(rng, dtype):
    return [((_r(rng, xs, dtype), _r(rng, ws, dtype), _r(rng, (ws[0],), dtype) if b else None),
             {**kw, "_id": cid}) for xs, ws, b, kw, cid in _CONV_CASES]


def conv2d_backward_input(rng, dtype):
    """(grad, weight); ``input_shape`` for the adapter (it differentiates conv2d)."""
    return [((_r(rng, (xs[0], ws[0]) + _conv_hw(xs, ws, kw), dtype), _r(rng, ws, dtype)),
             {**kw, "input_shape": xs, "_id": cid})
            for xs, ws, _, kw, cid in _CONV_CASES if kw.get("padding") != "same"]


def conv2d_backward_weight(rng, dtype):
    """(grad, input); ``weight_shape`` for the adapter."""
    return [((_r(rng, (xs[0], ws[0]) + _conv_hw(xs, ws, kw), dtype), _r(rng, xs, dtype)),
             {**kw, "weight_shape": ws, "_id": cid})
            for xs, ws, _, kw, cid in _CONV_CASES if kw.get("padding") != "same"]


def conv2d_backward_bias(rng, dtype):
    """(grad,) of every conv case's output shape."""
    return [((_r(rng, (xs[0], ws[0]) + _conv_hw(xs, ws, kw), dtype),), {"_id": cid})
            for xs, ws, _, kw, cid in _CONV_CASES if kw.get("padding") != "same"]


def _distinct_values(rng, shape, dtype):
    """Distinct values (a unique maximum in every pooling window, also after gradcheck's
    perturbations)."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.37 - 0.1 * n).astype(dtype)


_POOL_CASES = [
    ((2, 3, 6, 6), {"kernel_size": 2}, "k2"),
    ((2, 2, 7, 6), {"kernel_size": 3, "stride": 2, "padding": 1}, "k3s2p1"),
    ((1, 2, 6, 7), {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1),
                    "dilation": (1, 2)}, "dilated"),
    ((1, 2, 7, 7), {"kernel_size": 3, "stride": 2, "ceil_mode": True}, "ceil"),
    ((1, 2, 5, 5), {"kernel_size": 3, "stride": 1}, "overlap"),
    ((3, 5, 4), {"kernel_size": 2, "stride": 1}, "unbatched"),
]


def max_pool2d(rng, dtype):
    return [((_distinct_values(rng, xs, dtype),), {**kw, "_id": cid})
            for xs, kw, cid in _POOL_CASES]


def _pool_out_shape(xs, kw):
    """Pooling output shape (PyTorch's rule, ceil_mode included)."""
    def pair(v, default=None):
        if v is None:
            return default
        return (v, v) if isinstance(v, int) else tuple(v)

    k = pair(kw["kernel_size"])
    s = pair(kw.get("stride"), k)
    p = pair(kw.get("padding", 0))
    d = pair(kw.get("dilation", 1))
    out = []
    for i in range(2):
        n = xs[-2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1
        o = (n + (s[i] - 1 if kw.get("ceil_mode") else 0)) // s[i] + 1
        if kw.get("ceil_mode") and (o - 1) * s[i] >= xs[-2 + i] + p[i]:
            o -= 1
        out.append(o)
    return tuple(xs[:-2]) + tuple(out)


def max_pool2d_backward(rng, dtype):
    """(grad, input): the adapter pools ``input`` and differentiates."""
    return [((_r(rng, _pool_out_shape(xs, kw), dtype), _distinct_values(rng, xs, dtype)),
             {**kw, "_id": cid}) for xs, kw, cid in _POOL_CASES]


_AVG_CASES = [
    ((2, 3, 6, 6), {"kernel_size": 2}, "k2"),
    ((2, 2, 7, 6), {"kernel_size": 3, "stride": 2, "padding": 1}, "k3s2p1"),
    ((1, 2, 7, 6), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                    "count_include_pad": False}, "ceil-nopad"),
    ((1, 2, 5, 5), {"kernel_size": (2, 3), "stride": 1, "divisor_override": 3}, "divisor"),
    ((3, 5, 4), {"kernel_size": 2, "stride": (1, 2)}, "unbatched"),
]


def avg_pool2d(rng, dtype):
    return [((_r(rng, xs, dtype),), {**kw, "_id": cid}) for xs, kw, cid in _AVG_CASES]


def avg_pool2d_backward(rng, dtype):
    """(grad, input): the adapter pools ``input`` and differentiates."""
    return [((_r(rng, _pool_out_shape(xs, kw), dtype), _r(rng, xs, dtype)), {**kw, "_id": cid})
            for xs, kw, cid in _AVG_CASES]


def pool_gather(rng, dtype):
    """(grad of the pooled input's gradient, input): the adapter builds max_pool2d's double
    backward, which gathers at the argmax positions."""
    return [((_r(rng, xs, dtype), _distinct_values(rng, xs, dtype)), {**kw, "_id": cid})
            for xs, kw, cid in _POOL_CASES]


# ------------------------------------------------------- norms and triangles (ops/norms.py...)
def _signed_distinct(rng, shape, dtype):
    """Non-zero values of distinct magnitudes (unique extremes for the inf norms)."""
    n = int(np.prod(shape, dtype=np.int64))
    mag = (rng.permutation(max(n, 1))[:n] + 1.0).reshape(shape) * 0.37
    sgn = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return np.asarray(mag * sgn, dtype=dtype)


_NORM_CASES = [((5,), None, False), ((2, 3), (1,), True), ((2, 3, 4), (0, 2), False),
               ((3, 4), (-2,), False), ((), None, False)]


def vector_norm(rng, dtype):
    """ord 2, 1, inf, -inf and the general formula (p < 1, 1 < p < 2, p > 2)."""
    return [((_signed_distinct(rng, s, dtype),), {"ord": o, "dim": d, "keepdim": k})
            for o in (2.0, 1.0, np.inf, -np.inf, 0.5, 1.5, 3.0) for s, d, k in _NORM_CASES]


def triangle(rng, dtype):
    """tril/triu: square, wide, tall and batched matrices, every sign of ``diagonal``."""
    return [((_r(rng, s, dtype),), {"diagonal": d})
            for s, d in (((3, 3), 0), ((3, 4), 1), ((4, 3), -1), ((2, 3, 3), 0),
                         ((2, 2, 4), -2), ((3, 3), 5), ((3, 3), -5))]


#: (input shape, output_size): smaller, not dividing, equal, larger (overlapping windows),
#: None entries, unbatched
_ADAPTIVE_CASES = [((2, 3, 5, 7), (3, 4), "shrink"), ((1, 2, 6, 6), (2, 3), "divides"),
                   ((1, 2, 4, 5), (6, 7), "grow"), ((2, 2, 5, 4), (2, None), "none"),
                   ((3, 5, 4), 3, "unbatched"), ((1, 1, 4, 4), (1, 3), "row")]


def adaptive_avg_pool2d(rng, dtype):
    return [((_r(rng, xs, dtype),), {"output_size": o, "_id": cid})
            for xs, o, cid in _ADAPTIVE_CASES]


def adaptive_avg_pool2d_backward(rng, dtype):
    """(grad, input): the adapter pools ``input`` and differentiates."""
    out = []
    for xs, o, cid in _ADAPTIVE_CASES:
        o2 = (o, o) if isinstance(o, int) else o
        gs = tuple(xs[:-2]) + tuple(xs[-2 + i] if v is None else v for i, v in enumerate(o2))
        out.append(((_r(rng, gs, dtype), _r(rng, xs, dtype)), {"output_size": o, "_id": cid}))
    return out


def _robust_pair_args(rng, shape, dtype, w):
    """``(input, target)`` whose differences keep away from the kinks at ``+-w``."""
    y = _r(rng, shape, dtype)
    mag = np.where(rng.random(size=shape) < 0.5, rng.uniform(0.1, 0.8, size=shape),
                   rng.uniform(1.25, 3.0, size=shape)) * w
    sgn = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return np.asarray(y + sgn * mag, dtype=dtype), y


def robust_loss(rng, dtype):
    """smooth_l1_loss (beta) and huber_loss (delta: the ``beta`` param)."""
    return [(_robust_pair_args(rng, s, dtype, b), {"reduction": r, "beta": b})
            for s in ((), (3,), (2, 3)) for r in ("mean", "sum", "none") for b in (1.0, 0.5)]


def robust_loss_backward(rng, dtype):
    return [((_r(rng, x.shape if p["reduction"] == "none" else (), dtype), x, y), p)
            for (x, y), p in robust_loss(rng, dtype)]


# ------------------------------------------------------ sorting and gather (ops/sorting.py)
def _distinct_values(rng, shape, dtype):
    n = int(np.prod(shape, dtype=np.int64))
    return (rng.permutation(max(n, 1))[:n].reshape(shape) * 0.37 - 1.1).astype(dtype)


#: (shape, dim, descending, k, kth): whole sorts, top-k both ways, a k-th value, 0-d
_ORDER_CASES = [((5,), 0, False, None, None), ((2, 3, 4), 1, True, None, None),
                ((3, 4), -1, True, 2, None), ((4, 3), 0, False, 3, None),
                ((2, 5), 1, False, None, 2), ((), 0, True, None, None)]


def sort_indices(rng, dtype):
    """sort/argsort/topk/kthvalue orders on distinct values (ties are the op's business)."""
    return [((_distinct_values(rng, s, dtype),),
             {"dim": d if s else 0, "descending": desc, "k": k, "kth": kth})
            for s, d, desc, k, kth in _ORDER_CASES]


def index_copy(rng, dtype):
    """index_copy along each dim, with a repeated index (its last write wins; every
    writer gets its gradient), a 1-D input, a source of one slice."""
    # (a repeated index: PyTorch's gradient is not the derivative -- an overwritten
    # writer's is not zero -- so those samples are not gradchecked, "_nograd")
    return [((_r(rng, (4, 3), dtype), np.array([2, 0, 2]), _r(rng, (3, 3), dtype)),
             {"dim": 0, "_nograd": True}),
            ((_r(rng, (2, 5), dtype), np.array([4, 1]), _r(rng, (2, 2), dtype)), {"dim": 1}),
            ((_r(rng, (5,), dtype), np.array([3]), _r(rng, (1,), dtype)), {"dim": 0}),
            ((_r(rng, (3, 2, 4), dtype), np.array([1, 1, 0, 1]), _r(rng, (3, 2, 4), dtype)),
             {"dim": 2, "_nograd": True}),
            ((_r(rng, (3, 2, 4), dtype), np.array([3, 1, 0]), _r(rng, (3, 2, 3), dtype)),
             {"dim": 2})]


def gather(rng, dtype):
    """gather with repeated and smaller-than-input indices, and the values of sort, topk,
    kthvalue and msort (``fn``: the public function, which finds the positions itself: the
    sample's index is what it must find, on distinct values)."""
    x = _distinct_values(rng, (3, 4), dtype)
    out = [
        ((x, np.array([[0, 2, 2], [1, 0, 3], [3, 3, 3]])), {"fn": "gather", "dim": 1}),
        ((x, np.array([[2, 1], [0, 0], [1, 2], [2, 2]])), {"fn": "gather", "dim": 0}),
        ((_distinct_values(rng, (2, 3, 4), dtype), np.array([[[1], [0]]])),
         {"fn": "gather", "dim": 2}),
        ((_distinct_values(rng, (5,), dtype), np.array([4, 0, 4])), {"fn": "gather", "dim": 0}),
    ]
    for fn, kw in (("topk", {"k": 2, "dim": 1, "largest": True}),
                   ("topk", {"k": 3, "dim": 0, "largest": False}),
                   ("sort", {"dim": 0, "descending": True}), ("sort", {"dim": 1}),
                   ("kthvalue", {"k": 2, "dim": 1, "keepdim": False}),
                   ("kthvalue", {"k": 3, "dim": 0, "keepdim": True}), ("msort", {"dim": 0})):
        x = _distinct_values(rng, (3, 4), dtype)
        d = kw["dim"]
        down = kw.get("largest", kw.get("descending", False))
        order = np.argsort(-x if down else x, axis=d)
        if fn == "topk":
            order = np.take(order, np.arange(kw["k"]), axis=d)
        elif fn == "kthvalue":
            order = np.take(order, [kw["k"] - 1], axis=d)
        out.append(((x, order), {"fn": fn, **kw}))
    return out


def gather_backward(rng, dtype):
    """scatter-add of a gradient into zeros of the input's shape (repeated positions add)."""
    return [
        ((_r(rng, (3, 3), dtype), np.array([[0, 2, 2], [1, 0, 3], [3, 3, 3]])),
         {"dim": 1, "shape": (3, 4), "unique": False}),
        ((_r(rng, (4, 2), dtype), np.array([[2, 1], [0, 0], [1, 2], [2, 2]])),
         {"dim": 0, "shape": (3, 4), "unique": False}),
        ((_r(rng, (3,), dtype), np.array([4, 0, 4])), {"dim": 0, "shape": (5,), "unique": False}),
    ]


def constant_pad(rng, dtype):
    """F.pad constant: one and several dims, negative (cropping) sizes, a value."""
    return [((_r(rng, s, dtype),), {"pad": p, "value": v})
            for s, p, v in (((3,), (1, 2), 0), ((2, 3), (0, 1, 2, 0), 0.5),
                            ((2, 3, 4), (-1, 2, 1, -1), -1.0), ((2, 4), (-1, -1), 0),
                            ((1, 2, 3, 2), (1, 1, 1, 1, 0, 1), 0))]


def flip(rng, dtype):
    """flip: one dim, several, negative ones, none, a 0-d tensor."""
    return [((_r(rng, s, dtype),), {"dims": d, "_id": i})
            for s, d, i in (((5,), (0,), "1d"), ((2, 3, 4), (0, 2), "two"),
                            ((3, 4), (-1,), "neg"), ((2, 3), (), "none"), ((), (0,), "0d"))]


def roll(rng, dtype):
    """roll: flattened (no dims), one dim, two dims with negative and wrapping shifts."""
    return [((_r(rng, s, dtype),), {"shifts": sh, "dims": d, "_id": i})
            for s, sh, d, i in (((2, 3), (2,), None, "flat"), ((5, 2), (-1,), (0,), "dim"),
                                ((3, 4), (5, -2), (1, 0), "two"))]


def cumsum(rng, dtype):
    """cumsum along each dim of a matrix, a vector, a negative dim and a 0-d tensor."""
    return [((_r(rng, s, dtype),), {"dim": d, "_id": i})
            for s, d, i in (((7,), 0, "1d"), ((3, 4), 0, "rows"), ((3, 4), -1, "cols"),
                            ((2, 3, 4), 1, "3d"), ((), 0, "0d"))]


def prod(rng, dtype):
    """prod over everything and along dims (kept and not), with a zero and with two zeros in
    a slice (the gradient's other formula), a 0-d tensor."""
    m = _r(rng, (3, 4), dtype, 0.5, 1.5)
    one_zero = m.copy()
    one_zero[1, 2] = 0
    two_zeros = m.copy()
    two_zeros[0, 1] = two_zeros[0, 3] = 0
    return [((m,), {"dim": None, "_id": "all"}), ((m,), {"dim": 1, "_id": "dim1"}),
            ((m,), {"dim": 0, "keepdim": True, "_id": "keep"}),
            ((one_zero,), {"dim": None, "_id": "zero_all"}),
            ((one_zero,), {"dim": 1, "_id": "zero_dim"}),
            ((two_zeros,), {"dim": 1, "_id": "zeros_dim"}),
            ((two_zeros,), {"dim": None, "_id": "zeros_all"}),
            ((_r(rng, (), dtype),), {"dim": None, "_id": "0d"})]


def cumprod(rng, dtype):
    """cumprod along dims, and along a slice holding zeros (the gradient's other formula)."""
    z = _r(rng, (3, 5), dtype, 0.5, 1.5)
    z[1, 2] = 0
    z[2, 0] = z[2, 3] = 0
    return [((_r(rng, (7,), dtype, 0.5, 1.5),), {"dim": 0, "_id": "1d"}),
            ((_r(rng, (3, 4), dtype, 0.5, 1.5),), {"dim": -1, "_id": "cols"}),
            ((_r(rng, (2, 3, 4), dtype, 0.5, 1.5),), {"dim": 1, "_id": "3d"}),
            ((z,), {"dim": 1, "_id": "zeros"}), ((_r(rng, (), dtype),), {"dim": 0, "_id": "0d"})]


def _square(rng, shape, dtype, shift: float, symmetric: bool = False) -> np.ndarray:
    """Well-conditioned square matrices: ``shift`` added on the diagonal, or (``symmetric``)
    ``m m^T + n I``, positive-definite."""
    m = rng.standard_normal(shape)
    if symmetric:
        m = m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])
    else:
        m = m + shift * np.eye(shape[-1])
    return m.astype(dtype)


def square_matrices(shift: float, symmetric: bool = False):
    """Samples of a matrix function: a matrix, a batch and a 1 x 1 matrix (see
    :func:`_square`)."""
    def samples(rng, dtype):
        return [((_square(rng, (3, 3), dtype, shift, symmetric),), {"_id": "matrix"}),
                ((_square(rng, (2, 4, 4), dtype, shift, symmetric),), {"_id": "batch"}),
                ((_square(rng, (1, 1), dtype, 1.0, symmetric) + 0.5,), {"_id": "1x1"})]
    return samples


def solve(rng, dtype):
    """solve: a matrix and a batch, each with a matrix right-hand side."""
    return [((_square(rng, (3, 3), dtype, 2.0), rng.standard_normal((3, 2)).astype(dtype)),
             {"_id": "matrix"}),
            ((_square(rng, (2, 4, 4), dtype, 2.0),
              rng.standard_normal((2, 4, 3)).astype(dtype)), {"_id": "batch"})]


def diagonal(rng, dtype):
    """diagonal: the main one, one above it, one below in a batch with the dims swapped."""
    return [((rng.standard_normal((3, 4)).astype(dtype),),
             {"offset": 0, "dim1": 0, "dim2": 1, "input_shape": (3, 4), "_id": "main"}),
            ((rng.standard_normal((3, 4)).astype(dtype),),
             {"offset": 2, "dim1": 0, "dim2": 1, "input_shape": (3, 4), "_id": "above"}),
            ((rng.standard_normal((2, 3, 4)).astype(dtype),),
             {"offset": -1, "dim1": 2, "dim2": 1, "input_shape": (2, 3, 4), "_id": "batch"})]


def diagonal_backward(rng, dtype):
    """diagonal's gradient: the main diagonal, and one below in a batch."""
    return [((rng.standard_normal((3,)).astype(dtype),),
             {"input_shape": (3, 4), "offset": 0, "dim1": 0, "dim2": 1, "_id": "main"}),
            ((rng.standard_normal((2, 3)).astype(dtype),),
             {"input_shape": (3, 2, 4), "offset": -1, "dim1": 2, "dim2": 0, "_id": "batch"})]


def cum_arg(rng, dtype):
    """Where running maxima/minima were taken: ties and NaNs, and a random matrix."""
    return [((np.asarray([1.0, 3.0, 2.0, 3.0, np.nan, 0.0, np.nan], dtype=dtype),),
             {"dim": 0, "largest": True, "_id": "ties_nan"}),
            ((rng.standard_normal((3, 4)).astype(dtype),),
             {"dim": 1, "largest": False, "_id": "min"})]


def scatter_reduce(rng, dtype):
    """scatter_reduce: every reduction, with and without the input's values, repeated
    positions (no zeros, no ties: the gradients are smooth there)."""
    base = rng.uniform(0.5, 1.5, (3, 4)).astype(dtype)
    src = rng.uniform(0.5, 1.5, (2, 4)).astype(dtype)
    idx = np.array([[0, 2, 2, 1], [2, 2, 0, 1]])
    return [((base, idx, src), {"dim": 0, "reduce": r, "include_self": inc,
                                "_id": f"{r}{'' if inc else '-noself'}"})
            for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)]


def rounding(rng, dtype):
    """round: ties (x.5), negative values, decimals > 0 and < 0."""
    ties = np.asarray([0.5, 1.5, 2.5, -0.5, -2.5, 3.25], dtype=dtype)
    return [((ties,), {"decimals": 0, "_id": "ties", "_nograd": True}),  # steps: no derivative
            ((_r(rng, (3, 4), dtype, -20.0, 20.0),), {"decimals": 0, "_id": "0"}),
            ((_r(rng, (5,), dtype),), {"decimals": 2, "_id": "2"}),
            ((_r(rng, (5,), dtype, -500.0, 500.0),), {"decimals": -1, "_id": "-1"})]


def elu(rng, dtype):
    """elu(x, alpha, scale, input_scale): ELU, SELU's and CELU's settings."""
    x = np.concatenate([_r(rng, (9,), dtype, -4.0, 4.0), np.asarray([-30.0], dtype)])
    return [((x,), {"alpha": a, "scale": s, "input_scale": i, "_id": cid})
            for a, s, i, cid in ((1.0, 1.0, 1.0, "elu"), (0.5, 1.0, 1.0, "alpha"),
                                 (1.6732632423543772, 1.0507009873554805, 1.0, "selu"),
                                 (2.0, 1.0, 0.5, "celu"))]


# ------------------------------------------------------------- decompositions (svd, qr, eigh)
_SPECTRUM = (2.9, 2.1, 1.4, 0.8)  # well separated, away from 0: smooth factors


def _with_spectrum(rng, shape, dtype, values=_SPECTRUM) -> np.ndarray:
    """Matrices (a batch) with the singular values ``values``: ``U diag(values) V^T`` for
    random orthogonal ``U``, ``V``."""
    lead, (m, n) = tuple(shape[:-2]), shape[-2:]
    k = min(m, n)
    u = np.linalg.qr(rng.standard_normal(lead + (m, m)))[0][..., :k]
    v = np.linalg.qr(rng.standard_normal(lead + (n, n)))[0][..., :k]
    return ((u * np.asarray(values[:k])) @ np.swapaxes(v, -1, -2)).astype(dtype)


def _symmetric(rng, shape, dtype, values=(-1.3, 0.4, 1.5, 2.7)) -> np.ndarray:
    """Symmetric matrices (a batch) with the eigenvalues ``values``: ``Q diag(values) Q^T``,
    exactly symmetric in ``dtype``."""
    q = np.linalg.qr(rng.standard_normal(tuple(shape)))[0]
    a = ((q * np.asarray(values[:shape[-1]])) @ np.swapaxes(q, -1, -2)).astype(dtype)
    return (a + np.swapaxes(a, -1, -2)) * dtype.type(0.5)


#: (shape, full_matrices, id) of the SVD samples
_SVD_CASES = [((3, 3), False, "square"), ((4, 3), False, "tall"), ((2, 3, 4), False, "wide"),
              ((3, 3), True, "square-full"), ((4, 3), True, "tall-full"),
              ((2, 3, 4), True, "wide-full")]


def svd_factors(rng, dtype):
    """svd's packed factors: reduced, full and singular values alone."""
    out = [((_with_spectrum(rng, s, dtype),), {"full_matrices": f, "compute_uv": True,
                                               "_id": cid}) for s, f, cid in _SVD_CASES[:5]]
    out.append(((_with_spectrum(rng, (2, 4, 3), dtype),),
                {"full_matrices": False, "compute_uv": False, "_id": "values"}))
    return out


def svd_part(field: str):
    """Samples of the op of one SVD factor (``(A, None)``: the packed factors are computed
    from ``A``). The gradient ignores the columns of ``U`` (rows of ``Vh``) past
    ``min(m, n)`` (PyTorch's): a full ``U`` of a tall matrix (``Vh`` of a wide one) is
    compared forward only."""
    def samples(rng, dtype):
        out = []
        for shape, full, cid in _SVD_CASES:
            m, n = shape[-2:]
            extra = (field == "U" and m > n) or (field == "Vh" and n > m)
            p = {"full_matrices": full, "compute_uv": True, "fn": "linalg.svd", "_id": cid}
            if full and extra:
                p["_nograd"] = True
            out.append(((_with_spectrum(rng, shape, dtype), None), p))
        if field == "S":
            for fn in ("svdvals", "svd", "svd-no-uv"):
                out.append(((_with_spectrum(rng, (2, 4, 3), dtype), None),
                            {"full_matrices": False, "compute_uv": True, "fn": fn, "_id": fn}))
        return out
    return samples


#: (shape, mode, id) of the QR samples
_QR_CASES = [((3, 3), "reduced", "square"), ((4, 3), "reduced", "tall"),
             ((3, 4), "reduced", "wide"), ((2, 4, 3), "reduced", "batch"),
             ((3, 4), "complete", "wide-complete"), ((4, 3), "complete", "tall-complete"),
             ((4, 3), "r", "r")]


def qr_factors(rng, dtype):
    """qr's packed factors in each mode."""
    return [((_with_spectrum(rng, s, dtype),), {"mode": mode, "_id": cid})
            for s, mode, cid in _QR_CASES]


def qr_part(field: str):
    """Samples of the op of one QR factor (``(A, None)``); mode ``'complete'`` of a tall
    matrix and mode ``'r'`` are not differentiable (PyTorch's error): forward only."""
    def samples(rng, dtype):
        out = []
        for shape, mode, cid in _QR_CASES:
            p = {"mode": mode, "fn": "linalg.qr", "_id": cid}
            if mode == "r" or (mode == "complete" and shape[-2] > shape[-1]):
                p["_nograd"] = True
            out.append(((_with_spectrum(rng, shape, dtype), None), p))
        out.append(((_with_spectrum(rng, (4, 3), dtype), None),
                    {"mode": "reduced", "fn": "qr", "_id": "torch.qr"}))
        return out
    return samples


def eigh_factors(rng, dtype):
    """eigh's packed factors: each triangle, and the eigenvalues alone."""
    return [((_symmetric(rng, (3, 3), dtype),), {"UPLO": "L", "compute_v": True, "_id": "L"}),
            ((_symmetric(rng, (2, 4, 4), dtype),), {"UPLO": "U", "compute_v": True,
                                                    "_id": "U"}),
            ((_symmetric(rng, (2, 3, 3), dtype),), {"UPLO": "L", "compute_v": False,
                                                    "_id": "values"})]


def eigh_part(field: str):
    """Samples of the op of the eigenvalues or eigenvectors (``(A, None)``; the adapters
    symmetrise ``A``: its gradient is symmetric, one triangle is read)."""
    def samples(rng, dtype):
        out = [((_symmetric(rng, (3, 3), dtype), None),
                {"UPLO": "L", "compute_v": True, "fn": "eigh", "_id": "L"}),
               ((_symmetric(rng, (2, 4, 4), dtype), None),
                {"UPLO": "U", "compute_v": True, "fn": "eigh", "_id": "U-batch"}),
               ((_symmetric(rng, (1, 1), dtype), None),
                {"UPLO": "L", "compute_v": True, "fn": "eigh", "_id": "1x1"})]
        if field == "eigenvalues":
            out.append(((_symmetric(rng, (2, 3, 3), dtype), None),
                        {"UPLO": "L", "compute_v": True, "fn": "eigvalsh", "_id": "eigvalsh"}))
        return out
    return samples


def solve_triangular(rng, dtype):
    """solve_triangular: each triangle, from the left and the right, unit diagonal, batch
    dims broadcast."""
    def tri(shape):
        return (rng.standard_normal(shape) * 0.5 + 3.0 * np.eye(shape[-1])).astype(dtype)

    def rhs(shape):
        return rng.standard_normal(shape).astype(dtype)

    return [((tri((3, 3)), rhs((3, 2))), {"upper": True, "left": True, "unitriangular": False,
                                          "_id": "upper"}),
            ((tri((3, 3)), rhs((3, 2))), {"upper": False, "left": True, "unitriangular": False,
                                          "_id": "lower"}),
            ((tri((2, 4, 4)), rhs((4, 3))), {"upper": True, "left": True,
                                             "unitriangular": True, "_id": "unit-batch"}),
            ((tri((3, 3)), rhs((2, 3))), {"upper": False, "left": False,
                                          "unitriangular": False, "_id": "right"}),
            ((tri((2, 1, 3, 3)), rhs((4, 3, 2))), {"upper": True, "left": True,
                                                   "unitriangular": False, "_id": "broadcast"})]


def pinv(rng, dtype):
    """pinv ``(A, atol, rtol)``: square, tall, wide batch, symmetric (``hermitian``), and a
    rank-deficient matrix whose zero singular value ``atol`` cuts (its rank stays put under
    gradcheck's steps)."""
    deficient = _with_spectrum(rng, (3, 3), dtype, (2.5, 1.2, 0.0))
    return [((_with_spectrum(rng, (3, 3), dtype), None, None), {"hermitian": False,
                                                                "_id": "square"}),
            ((_with_spectrum(rng, (4, 3), dtype), None, None), {"hermitian": False,
                                                                "_id": "tall"}),
            ((_with_spectrum(rng, (2, 3, 4), dtype), None, None), {"hermitian": False,
                                                                   "_id": "wide"}),
            ((_symmetric(rng, (3, 3), dtype, (-1.7, 0.6, 2.2)), None, None),
             {"hermitian": True, "_id": "hermitian"}),
            ((deficient, np.asarray(0.1, dtype), None),
             {"hermitian": False, "_torch_nograd": (1,), "_id": "rank-deficient"})]


def matrix_exp(rng, dtype):
    """matrix_exp: small and larger norms (scaled and squared), a batch, 1 x 1."""
    return [((rng.standard_normal((3, 3)).astype(dtype) * dtype.type(0.7),), {"_id": "matrix"}),
            ((rng.standard_normal((2, 4, 4)).astype(dtype) * dtype.type(0.5),), {"_id": "batch"}),
            ((rng.standard_normal((3, 3)).astype(dtype) * dtype.type(2.5),), {"_id": "scaled"}),
            ((rng.standard_normal((1, 1)).astype(dtype),), {"_id": "1x1"})]


def _not_positive_definite(dtype) -> np.ndarray:
    """A batch: positive-definite, then not from the leading minor of order 2."""
    return np.stack([np.eye(3) * 2.0, [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]]
                    ).astype(dtype)


def _singular(dtype) -> np.ndarray:
    """A batch: invertible, then a zero pivot in column 2 of its LU factorisation."""
    return np.stack([np.eye(3) * 2.0, [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 1.0]]]
                    ).astype(dtype)


def cholesky_ex_part(info: bool, packed: bool = False):
    """cholesky_ex's ``L`` (positive-definite matrices: ``L`` is garbage elsewhere) or
    ``info`` (a batch with a matrix that is not); ``packed``: its packed factors."""
    def samples(rng, dtype):
        rest = () if packed else (None,)
        if info:
            return [((_not_positive_definite(dtype), *rest), {"upper": False, "_id": "batch"}),
                    ((_square(rng, (3, 3), dtype, 1.0, True), *rest), {"upper": True,
                                                                      "_id": "ok"})]
        return [((_square(rng, (3, 3), dtype, 1.0, True), *rest), {"upper": False,
                                                                  "_id": "matrix"}),
                ((_square(rng, (2, 4, 4), dtype, 1.0, True), *rest), {"upper": True,
                                                                     "_id": "batch-upper"})]
    return samples


def inv_ex_part(info: bool):
    """inv_ex's inverse (invertible matrices: garbage elsewhere) or ``info`` (a batch with a
    singular matrix)."""
    def samples(rng, dtype):
        if info:
            return [((_singular(dtype), None), {"_id": "batch"}),
                    ((_square(rng, (3, 3), dtype, 2.0), None), {"_id": "ok"})]
        return [((_square(rng, (3, 3), dtype, 2.0), None), {"_id": "matrix"}),
                ((_square(rng, (2, 4, 4), dtype, 2.0), None), {"_id": "batch"})]
    return samples


def _log_softmax_rows(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


_CTC_CASES = [  # (T, N, C), targets, input lengths, target lengths, blank, zero_infinity
    ((5, 2, 4), np.array([[1, 2, 2], [3, 1, 0]]), [5, 4], [3, 2], 0, False),
    ((6, 3, 5), np.array([1, 1, 2, 4, 3, 2]), [6, 5, 6], [2, 1, 3], 0, False),  # concatenated
    ((4, 2, 3), np.array([[0, 1], [1, 1]]), [4, 3], [2, 0], 2, False),  # blank 2, empty target
    ((3, 2, 4), np.array([[1, 1, 1], [2, 3, 1]]), [3, 3], [3, 2], 0, True),  # impossible: 0
]


def ctc_loss(rng, dtype):
    """log-softmax rows (the reference reads them as given), padded and concatenated
    targets, repeated labels, a blank that is not 0, an empty target and (zero_infinity)
    an impossible alignment."""
    out = []
    for shape, tg, il, tl, blank, zinf in _CTC_CASES:
        lp = _log_softmax_rows(rng.standard_normal(shape)).astype(dtype)
        out.append(((lp, tg.astype(np.int64), np.array(il, dtype=np.int64),
                     np.array(tl, dtype=np.int64)), {"blank": blank, "zero_infinity": zinf}))
    return out


def ctc_loss_backward(rng, dtype):
    return [((_r(rng, (a[0].shape[1],), dtype), *a), {**p, "_nograd": True})
            for a, p in ctc_loss(rng, dtype)]


# ------------------------------------------------ integer and float-bits ops (batch 4)
_INT_PAIRS = [((5,), (5,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3))]


def bitwise(rng, dtype):
    """bitwise_and/or/xor: int64, int32, uint8 and bool tensors (broadcast pairs), an int8
    pair, a tensor and a Python int (integers only: no dtype of the float samples)."""
    out = [((rng.integers(-50, 50, a), rng.integers(-50, 50, b)), {}) for a, b in _INT_PAIRS]
    out.append(((rng.integers(-9, 9, (2, 3)).astype(np.int32),
                 rng.integers(-9, 9, (3,)).astype(np.int32)), {}))
    out.append(((rng.integers(0, 255, (4,)).astype(np.uint8),
                 rng.integers(0, 255, (4,)).astype(np.uint8)), {}))
    out.append(((rng.integers(-100, 100, (4,)).astype(np.int8),
                 rng.integers(-100, 100, (4,)).astype(np.int8)), {}))
    out.append(((rng.random(5) < 0.5, rng.random(5) < 0.5), {}))
    out.append(((rng.integers(-50, 50, (2, 3)), 6), {}))
    return out


def bitwise_not(rng, dtype):
    """bitwise_not: signed, unsigned and bool tensors."""
    return [((rng.integers(-50, 50, (2, 3)),), {}),
            ((rng.integers(0, 255, (5,)).astype(np.uint8),), {}),
            ((rng.integers(-9, 9, ()).astype(np.int32),), {}),
            ((rng.random(4) < 0.5,), {})]


def shifts(rng, dtype):
    """Shifts: amounts inside the width, and PyTorch's out-of-range cases (negative, the
    width and beyond) for int64, int8 and uint8."""
    return [((rng.integers(-50, 50, (2, 3)), rng.integers(0, 10, (3,))), {}),
            ((np.array([-8, 8, 5, -1, 3, 7], dtype=np.int64),
              np.array([-1, 64, 70, 63, 0, 2], dtype=np.int64)), {}),
            ((np.array([-8, 8, 100, -128], dtype=np.int8),
              np.array([7, 8, 1, 9], dtype=np.int8)), {}),
            ((np.array([200, 3, 255, 1], dtype=np.uint8),
              np.array([1, 8, 7, 9], dtype=np.uint8)), {}),
            ((rng.integers(-50, 50, (2, 3)), 3), {})]


def integer_pairs(rng, dtype):
    """gcd / lcm / floor_divide: integers of both signs, zeros, broadcast pairs (divisors
    nonzero)."""
    def nonzero(shape):
        v = rng.integers(1, 12, shape)
        return np.where(rng.random(shape) < 0.5, -v, v)
    out = [((rng.integers(-40, 40, a), nonzero(b)), {}) for a, b in _INT_PAIRS]
    out.append(((np.array([0, 12, -18, 7], dtype=np.int32),
                 np.array([5, 8, 12, -7], dtype=np.int32)), {}))
    out.append(((rng.integers(0, 100, (4,)).astype(np.uint8),
                 rng.integers(1, 20, (4,)).astype(np.uint8)), {}))
    return out


def floor_divide(rng, dtype):
    """:func:`integer_pairs`, not differentiated (floor_divide's derivative is not
    implemented, as PyTorch's)."""
    return [(args, {**p, "_nograd": True}) for args, p in integer_pairs(rng, dtype)]


def frexp(rng, dtype):
    """frexp's mantissa and exponent: random values, and zeros, powers of two, tiny and
    huge ones (the exponent's range), infinities and NaN (value samples only)."""
    out = [((_away(rng, s, dtype, 0.05, 40.0),), {}) for s in SHAPES]
    tiny = np.finfo(dtype).tiny
    out.append(((np.asarray([0.0, -0.0, 1.0, -2.0, 0.75, tiny, tiny / 8, 3e30, np.inf, -np.inf,
                             np.nan], dtype=dtype),), {"_nograd": True}))
    return out


def unfold(rng, dtype):
    """Tensor.unfold: windows overlapping (step < size), apart, the whole dim, a 0-d input,
    a middle dim of a 3-D tensor."""
    return [((_r(rng, (7,), dtype),), {"dim": 0, "size": 3, "step": 2, "_id": "overlap"}),
            ((_r(rng, (3, 8), dtype),), {"dim": 1, "size": 2, "step": 3, "_id": "apart"}),
            ((_r(rng, (4, 3), dtype),), {"dim": -2, "size": 4, "step": 1, "_id": "whole"}),
            ((_r(rng, (), dtype),), {"dim": 0, "size": 1, "step": 1, "_id": "0d"}),
            ((_r(rng, (2, 6, 3), dtype),), {"dim": 1, "size": 3, "step": 1, "_id": "3d"})]


def unfold_backward(rng, dtype):
    """unfold's gradient: overlapping windows (summed), windows apart (zeros between)."""
    return [((_r(rng, (3, 3), dtype),), {"input_shape": (7,), "dim": 0, "size": 3,
                                         "step": 2, "_id": "overlap"}),
            ((_r(rng, (3, 3, 2), dtype),), {"input_shape": (3, 8), "dim": 1, "size": 2,
                                            "step": 3, "_id": "apart"}),
            ((_r(rng, (2, 4, 3, 3), dtype),), {"input_shape": (2, 6, 3), "dim": 1, "size": 3,
                                               "step": 1, "_id": "3d"})]


def lstm_cell(rng, dtype):
    """LSTM gate pre-activations ``(..., 4H)`` and a state ``(..., H)``: one step of a batch,
    an unbatched one, a batch of sequences; large gates (saturated sigmoids)."""
    return [((_r(rng, (3, 8), dtype), _r(rng, (3, 2), dtype)), {}),
            ((_r(rng, (12,), dtype), _r(rng, (3,), dtype)), {}),
            ((_r(rng, (2, 3, 4), dtype, -6.0, 6.0), _r(rng, (2, 3, 1), dtype)), {})]


def lstm_layer(rng, dtype):
    """A sequence (``T, B, I``), initial states and an LSTM layer's weights and biases:
    forward and reverse, a one-step sequence of one sample, large weights (saturated
    gates)."""
    def case(steps, batch, width, hidden, reverse, scale=1.0):
        return ((_r(rng, (steps, batch, width), dtype), _r(rng, (batch, hidden), dtype),
                 _r(rng, (batch, hidden), dtype),
                 _r(rng, (4 * hidden, width), dtype, -scale, scale),
                 _r(rng, (4 * hidden, hidden), dtype, -scale, scale),
                 _r(rng, (4 * hidden,), dtype), _r(rng, (4 * hidden,), dtype)),
                {"reverse": reverse})
    return [case(4, 3, 2, 3, False), case(3, 2, 3, 2, True), case(1, 1, 2, 2, False),
            case(3, 2, 2, 2, False, 4.0)]


def gru_layer(rng, dtype):
    """A sequence, an initial state and a GRU layer's weights and biases: forward and
    reverse, a one-step sequence of one sample, large weights (saturated gates)."""
    def case(steps, batch, width, hidden, reverse, scale=1.0):
        return ((_r(rng, (steps, batch, width), dtype), _r(rng, (batch, hidden), dtype),
                 _r(rng, (3 * hidden, width), dtype, -scale, scale),
                 _r(rng, (3 * hidden, hidden), dtype, -scale, scale),
                 _r(rng, (3 * hidden,), dtype), _r(rng, (3 * hidden,), dtype)),
                {"reverse": reverse})
    return [case(4, 3, 2, 3, False), case(3, 2, 3, 2, True), case(1, 1, 2, 2, False),
            case(3, 2, 2, 2, False, 4.0)]


def gru_layer_backward(rng, dtype):
    """An output gradient and :func:`gru_layer`'s samples with their outputs."""
    from .nnops.gru_layer import _layer_ref

    out = []
    for args, p in gru_layer(rng, dtype):
        y = _layer_ref(*args, **p)
        out.append(((_r(rng, y.shape, dtype), *args, y), p))
    return out


def elman_layer(rng, dtype):
    """A sequence, an initial state and an RNN layer's weights and biases: tanh forward
    and reverse, relu, a one-step sequence of one sample."""
    def case(steps, batch, width, hidden, act, reverse):
        return ((_r(rng, (steps, batch, width), dtype), _r(rng, (batch, hidden), dtype),
                 _r(rng, (hidden, width), dtype, -1.0, 1.0),
                 _r(rng, (hidden, hidden), dtype, -1.0, 1.0),
                 _r(rng, (hidden,), dtype), _r(rng, (hidden,), dtype)),
                {"nonlinearity": act, "reverse": reverse})
    return [case(4, 3, 2, 3, "tanh", False), case(3, 2, 3, 2, "tanh", True),
            case(4, 2, 2, 3, "relu", False), case(1, 1, 2, 2, "relu", True)]


def elman_layer_backward(rng, dtype):
    """An output gradient and :func:`elman_layer`'s samples with their outputs."""
    from .nnops.elman_layer import _layer_ref

    out = []
    for args, p in elman_layer(rng, dtype):
        y = _layer_ref(*args, **p)
        out.append(((_r(rng, y.shape, dtype), *args, y), p))
    return out


def lstm_layer_backward(rng, dtype):
    """An output gradient and :func:`lstm_layer`'s samples with their outputs (computed by
    the op's NumPy forward)."""
    from .nnops.rnn_layer import _layer_ref

    out = []
    for args, p in lstm_layer(rng, dtype):
        y = _layer_ref(*args, **p)
        out.append(((_r(rng, y.shape, dtype), *args, y), p))
    return out


def lstm_cell_backward(rng, dtype):
    """The output gradient, the gates and the state of :func:`lstm_cell`'s samples."""
    return [((_r(rng, c.shape, dtype), gates, c), {}) for (gates, c), _ in lstm_cell(rng, dtype)]
