"""Shared helpers of the registry-driven op tests: one adapter per registered op, hand-written
samples for the ops whose OpDef has none, and input builders.

pytest runs with ``--import-mode=importlib``, so the test modules that use this file load it
by path (``helpers.ops_helpers()`` in tests/helpers.py) under the name ``_jitgrad_ops_helpers``;
pytest also loads it as this directory's conftest, for the fixtures at the bottom.

An adapter is ``fn(M, ts, p) -> tensor`` where ``M`` is the module (``jitgrad`` or ``torch``),
``ts`` the op's inputs (tensors, Python numbers or None) and ``p`` the sample's params. It calls
the op through the public API, so the same adapter runs both libraries; the few ops whose
PyTorch spelling differs have a second entry in :data:`TORCH_ADAPTERS`. Params whose name
starts with ``_`` are test metadata: ``_id`` (case id), ``_pre`` (make the tensor inputs
non-contiguous first), ``_nograd`` (the output is not differentiable), ``_torch_nograd``
(input positions PyTorch cannot differentiate).
"""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad
from jitgrad.ops import REGISTRY
from jitgrad.ops import elementwise as E

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def is_torch(M) -> bool:
    return M.__name__ == "torch"


def is_tensor(M, x) -> bool:
    return isinstance(x, M.Tensor)


# --------------------------------------------------------------------------- adapters
def _index(M, index):
    """``index`` with its NumPy arrays turned into tensors of ``M`` (lists stay lists)."""
    def conv(i):
        return M.tensor(i) if isinstance(i, np.ndarray) else i
    return tuple(conv(i) for i in index) if isinstance(index, tuple) else conv(index)


def _num_to_tensor(M, x, like):
    return x if is_tensor(M, x) else M.tensor(x, dtype=like.dtype)


def _unary(method):
    return lambda M, ts, p: getattr(M, method)(ts[0])


def _reduce(fn, full=None):
    """sum/mean/amax...: ``dim=None`` means the no-dim overload (``x.sum()``)."""
    def f(M, ts, p):
        if p["dim"] is None:
            return getattr(M, full or fn)(ts[0])
        return getattr(M, fn)(ts[0], dim=p["dim"], keepdim=p["keepdim"])
    return f


def _moment(fn):
    """var/std: ``dim=None`` means all dims (``x.var(correction=c)``)."""
    def f(M, ts, p):
        if p["dim"] is None:
            return getattr(ts[0], fn)(correction=p["correction"])
        return getattr(M, fn)(ts[0], dim=p["dim"], correction=p["correction"],
                              keepdim=p["keepdim"])
    return f


def _logsumexp(M, ts, p):
    x = ts[0]
    dim = tuple(range(x.ndim)) if p["dim"] is None else p["dim"]
    return M.logsumexp(x, dim=dim, keepdim=p["keepdim"])


def _reshape(M, ts, p):
    x, fn = ts[0], p["fn"]
    if fn == "reshape":
        return x.reshape(p["shape"])
    if fn == "view":
        return x.view(p["shape"])
    if fn == "flatten":
        return M.flatten(x, *p.get("args", ()))
    if fn == "unflatten":
        return x.unflatten(*p["args"])
    if fn == "squeeze":
        return x.squeeze(*p.get("args", ()))
    if fn == "unsqueeze":
        return x.unsqueeze(*p["args"])
    if fn == "view_as":
        return x.view_as(M.zeros(p["shape"], dtype=x.dtype))
    raise AssertionError(fn)


def _permute(M, ts, p):
    x, fn = ts[0], p["fn"]
    if fn == "permute":
        return x.permute(*p["args"])
    if fn == "transpose":
        return x.transpose(*p["args"])
    if fn == "swapaxes":
        return M.swapaxes(x, *p["args"])
    if fn == "movedim":
        return M.movedim(x, *p["args"])
    if fn == "t":
        return x.t()
    if fn == "T":
        return x.T
    if fn == "mT":
        return x.mT
    raise AssertionError(fn)


def _expand(M, ts, p):
    if p.get("as"):
        return ts[0].expand_as(M.zeros(p["shape"], dtype=ts[0].dtype))
    return ts[0].expand(*p["shape"])


def _getitem(M, ts, p):
    x, fn = ts[0], p.get("fn", "index")
    if fn == "index":
        return x[_index(M, p["index"])]
    if fn == "select":
        return x.select(*p["args"])
    if fn == "narrow":
        return x.narrow(*p["args"])
    if fn == "split":
        return x.split(p["args"][0], p["args"][1])[p["k"]]
    if fn == "chunk":
        return x.chunk(p["args"][0], p["args"][1])[p["k"]]
    if fn == "unbind":
        return x.unbind(p["args"][0])[p["k"]]
    raise AssertionError(fn)


def _getitem_backward(M, ts, p):
    """The gradient of ``x[index]`` for the output gradient ``ts[0]``, built with
    ``create_graph`` so it is itself differentiable (in jitgrad: the getitem_backward op)."""
    g = ts[0]
    x = M.zeros(p["shape"], dtype=g.dtype, requires_grad=True)
    (gx,) = M.autograd.grad(x[_index(M, p["index"])], x, g, create_graph=True)
    return gx


def _assemble_slices(M, ts, p):
    """The summed gradients of ``x[index_i]`` for the output gradients ``ts[i]`` (jitgrad:
    the ``assemble_slices`` op a plan runs for a split's gradients; PyTorch: autograd's sum
    of the slices' gradients, built with ``create_graph`` so it is differentiable)."""
    if is_torch(M):
        x = M.zeros(p["shape"], dtype=ts[0].dtype, requires_grad=True)
        (gx,) = M.autograd.grad([x[i] for i in p["indices"]], x, list(ts), create_graph=True)
        return gx
    from jitgrad.ops.indexing import assemble_slices

    return assemble_slices(ts, p["indices"], p["shape"])


def _index_put(M, ts, p):
    y = ts[0].clone()
    y[_index(M, p["index"])] = ts[1]
    return y


def _to_dtype(M, ts, p):
    d = getattr(M, p["dtype"])
    via = p.get("via", "to")
    if via == "to":
        return ts[0].to(d)
    return getattr(ts[0], via)()


def _bce(M, ts, p):
    x, y, w, pw = ts
    return M.nn.functional.binary_cross_entropy_with_logits(
        x, y, weight=w, pos_weight=pw, reduction=p["reduction"])


def _bce_backward(M, ts, p):
    """The create_graph gradient of BCE-with-logits w.r.t. its input for the output gradient
    ``ts[0]`` (in jitgrad: the binary_cross_entropy_with_logits_backward op)."""
    g, x, y, w, pw = ts
    with M.enable_grad():
        xg = x if x.requires_grad else x.detach().requires_grad_()
        (gx,) = M.autograd.grad(_bce(M, [xg, y, w, pw], p), xg, g, create_graph=True)
    return gx


def _max_dim(name):
    def f(M, ts, p):
        return getattr(M, name)(ts[0], dim=p["dim"], keepdim=p["keepdim"])[0]
    return f


def _maximum(name):
    def f(M, ts, p):
        return getattr(M, name)(ts[0], _num_to_tensor(M, ts[1], ts[0]))
    return f


def _diagonals():
    from jitgrad.ops import diagonals

    return diagonals


ADAPTERS = {
    # arithmetic: the operators, as user code writes them
    "add": lambda M, ts, p: ts[0] + ts[1],
    "add_scaled": lambda M, ts, p: M.add(ts[0], ts[1], alpha=p["alpha"]),
    "sub": lambda M, ts, p: ts[0] - ts[1],
    "rsub": lambda M, ts, p: M.rsub(ts[0], ts[1]),
    "mul": lambda M, ts, p: ts[0] * ts[1],
    "div": lambda M, ts, p: ts[0] / ts[1],
    "neg": lambda M, ts, p: -ts[0],
    "sign": _unary("sign"),
    "abs": _unary("abs"),
    "exp": _unary("exp"),
    "expm1": _unary("expm1"),
    "log": _unary("log"),
    "log1p": _unary("log1p"),
    "sqrt": _unary("sqrt"),
    "rsqrt": _unary("rsqrt"),
    "reciprocal": _unary("reciprocal"),
    "sin": _unary("sin"),
    "cos": _unary("cos"),
    "tanh": _unary("tanh"),
    "sigmoid": _unary("sigmoid"),
    "relu": _unary("relu"),
    "erf": _unary("erf"),
    "pow_scalar": lambda M, ts, p: ts[0] ** p["exponent"],
    "pow": lambda M, ts, p: ts[0] ** ts[1],
    "rpow_scalar": lambda M, ts, p: p["base"] ** ts[0],
    "maximum": _maximum("maximum"),
    "minimum": _maximum("minimum"),
    "clamp": lambda M, ts, p: M.clamp(ts[0], min=p["min"], max=p["max"]),
    "where": lambda M, ts, p: M.where(ts[0], ts[1], ts[2]),
    "masked_fill": lambda M, ts, p: ts[0].masked_fill(ts[1], p["value"]),
    "eq": lambda M, ts, p: ts[0] == ts[1],
    "ne": lambda M, ts, p: ts[0] != ts[1],
    "lt": lambda M, ts, p: ts[0] < ts[1],
    "le": lambda M, ts, p: ts[0] <= ts[1],
    "gt": lambda M, ts, p: ts[0] > ts[1],
    "ge": lambda M, ts, p: ts[0] >= ts[1],
    "logical_and": lambda M, ts, p: M.logical_and(ts[0], ts[1]),
    "logical_or": lambda M, ts, p: M.logical_or(ts[0], ts[1]),
    "logical_xor": lambda M, ts, p: M.logical_xor(ts[0], ts[1]),
    "logical_not": lambda M, ts, p: M.logical_not(ts[0]),
    # fused backward ops (PyTorch spells them differently: TORCH_ADAPTERS)
    "tanh_backward": lambda M, ts, p: E.tanh_backward(ts[0], ts[1]),
    "sigmoid_backward": lambda M, ts, p: E.sigmoid_backward(ts[0], ts[1]),
    "threshold_backward": lambda M, ts, p: E.threshold_backward(ts[0], ts[1], p["threshold"]),
    "pow_backward": lambda M, ts, p: E.pow_backward(ts[0], ts[1], p["exponent"]),
    "clamp_backward": lambda M, ts, p: E.clamp_backward(ts[0], ts[1], p["min"], p["max"]),
    # reductions
    "sum": _reduce("sum"),
    "mean": _reduce("mean"),
    "amax": _reduce("amax", full="max"),
    "amin": _reduce("amin", full="min"),
    "max_dim": _max_dim("max"),
    "min_dim": _max_dim("min"),
    "logsumexp": _logsumexp,
    "var": _moment("var"),
    "std": _moment("std"),
    "softmax": lambda M, ts, p: M.softmax(ts[0], dim=p["dim"]),
    "softmax_backward": lambda M, ts, p: jitgrad.ops.reduce.softmax_backward(
        ts[0], ts[1], p["dim"]),
    "log_softmax_backward": lambda M, ts, p: jitgrad.ops.reduce.log_softmax_backward(
        ts[0], ts[1], p["dim"]),
    "log_softmax": lambda M, ts, p: M.log_softmax(ts[0], dim=p["dim"]),
    "binary_cross_entropy_with_logits": _bce,
    "binary_cross_entropy_with_logits_backward": _bce_backward,
    # linear algebra
    "matmul": lambda M, ts, p: (getattr(M, p["fn"])(ts[0], ts[1]) if "fn" in p
                                else ts[0] @ ts[1]),
    # movement
    "reshape": _reshape,
    "permute": _permute,
    "expand": _expand,
    "getitem": _getitem,
    "getitem_backward": _getitem_backward,
    "assemble_slices": _assemble_slices,
    "index_put": _index_put,
    "cat": lambda M, ts, p: M.cat(list(ts), dim=p["dim"]),
    "stack": lambda M, ts, p: M.stack(list(ts), dim=p["dim"]),
    "clone": lambda M, ts, p: ts[0].clone(),
    "to_dtype": _to_dtype,
    "to_device": lambda M, ts, p: ts[0].to("cuda").to("cpu"),  # there and back (CUDA: sim)
    # needs CUDA (the simulator here); a CUDA tensor's CPU copy (CUDA memory is not pinned)
    "pin_memory": lambda M, ts, p: (ts[0].cpu() if ts[0].is_cuda else ts[0]).pin_memory(),
    "flip": lambda M, ts, p: M.flip(ts[0], p["dims"]),
    "roll": lambda M, ts, p: M.roll(ts[0], p["shifts"], p["dims"]),
    "cumsum": lambda M, ts, p: M.cumsum(ts[0], p["dim"]),
    "cumprod": lambda M, ts, p: M.cumprod(ts[0], p["dim"]),
    "logcumsumexp": lambda M, ts, p: M.logcumsumexp(ts[0], p["dim"]),
    "cum_arg": lambda M, ts, p: (M.cummax if p["largest"] else M.cummin)(ts[0], p["dim"])[1],
    "inv": lambda M, ts, p: M.linalg.inv(ts[0]),
    "scatter_reduce": lambda M, ts, p: M.scatter_reduce(ts[0], p["dim"], ts[1], ts[2],
                                                        p["reduce"],
                                                        include_self=p["include_self"]),
    "diagonal": lambda M, ts, p: M.diagonal(ts[0], p["offset"], p["dim1"], p["dim2"]),
    "diagonal_backward": lambda M, ts, p: _diagonals().diagonal_backward(
        ts[0], p["input_shape"], p["offset"], p["dim1"], p["dim2"]),
    "det": lambda M, ts, p: M.linalg.det(ts[0]),
    "logabsdet": lambda M, ts, p: M.linalg.slogdet(ts[0])[1],
    "sign_of_det": lambda M, ts, p: M.linalg.slogdet(ts[0])[0],
    "solve": lambda M, ts, p: M.linalg.solve(ts[0], ts[1]),
    # symmetrised: the factorisation reads one triangle, its gradient is symmetric
    "cholesky": lambda M, ts, p: M.linalg.cholesky((ts[0] + ts[0].mT) * 0.5),
    "prod": lambda M, ts, p: (M.prod(ts[0]) if p["dim"] is None else
                              M.prod(ts[0], p["dim"], keepdim=p.get("keepdim", False))),
    "round": lambda M, ts, p: M.round(ts[0], decimals=p["decimals"]),
    "trunc": lambda M, ts, p: ts[0].trunc(),
    "frac": lambda M, ts, p: M.frac(ts[0]),
    "atan2": lambda M, ts, p: M.atan2(ts[0], ts[1]),
}


def _elu(M, ts, p):
    if getattr(M, "__name__", "") == "torch":
        return M.ops.aten.elu(ts[0], p["alpha"], p["scale"], p["input_scale"])
    from jitgrad.ops.nnops.elu import elu  # jitgrad, or the CUDA tests' stand-in for it

    return elu(ts[0], p["alpha"], p["scale"], p["input_scale"])


ADAPTERS["elu"] = _elu
ADAPTERS["hypot"] = lambda M, ts, p: M.hypot(ts[0], ts[1])
ADAPTERS["remainder"] = lambda M, ts, p: ts[0] % ts[1]
ADAPTERS["fmod"] = lambda M, ts, p: M.fmod(ts[0], ts[1])


def _by_name(name: str):
    """The adapter of a one-tensor function ``M.<name>(x)``."""
    return lambda M, ts, p: getattr(M, name)(ts[0])


ADAPTERS.update({name: _by_name(name)
                 for name in ("log2", "log10", "exp2", "sinh", "cosh", "tan", "asin", "acos",
                              "atan", "asinh", "acosh", "atanh", "floor", "ceil")})


def _t_pow_backward(M, ts, p):
    g, a, e = ts[0], ts[1], p["exponent"]
    return g * 0.0 if e == 0.0 else g * (e * a.pow(e - 1.0))


TORCH_ADAPTERS = {
    "to_device": lambda M, ts, p: ts[0].to("cpu", copy=True),  # torch's CPU wheel: no CUDA
    "pin_memory": lambda M, ts, p: ts[0].clone(),  # a CPU wheel cannot pin
    "tanh_backward": lambda M, ts, p: M.ops.aten.tanh_backward(ts[0], ts[1]),
    "diagonal_backward": lambda M, ts, p: M.ops.aten.diagonal_backward(
        ts[0], p["input_shape"], p["offset"], p["dim1"], p["dim2"]),
    "sigmoid_backward": lambda M, ts, p: M.ops.aten.sigmoid_backward(ts[0], ts[1]),
    "threshold_backward": lambda M, ts, p: M.ops.aten.threshold_backward(
        ts[0], ts[1], p["threshold"]),
    "softmax_backward": lambda M, ts, p: M.ops.aten._softmax_backward_data(
        ts[0], ts[1], p["dim"], ts[0].dtype),
    "log_softmax_backward": lambda M, ts, p: M.ops.aten._log_softmax_backward_data(
        ts[0], ts[1], p["dim"], ts[0].dtype),
    # PyTorch's pow_backward/clamp_backward are C++ helpers, not ops: their formulas
    "pow_backward": _t_pow_backward,
    "clamp_backward": lambda M, ts, p: M.where((ts[1] >= p["min"]) & (ts[1] <= p["max"]),
                                               ts[0], 0.0),
}

_PRE = {
    "T": lambda M, t: t.transpose(-1, -2),
    "step": lambda M, t: t[::2],
}
_PRE_NP = {
    "T": lambda a: np.swapaxes(a, -1, -2),
    "step": lambda a: a[::2],
}


def call(M, name: str, ts, p: dict):
    """Run registered op ``name`` on inputs ``ts`` through the public API of ``M``."""
    fn = TORCH_ADAPTERS.get(name) if is_torch(M) else None
    fn = fn or ADAPTERS[name]
    pre = p.get("_pre")
    if pre:
        ts = [_PRE[pre](M, t) if is_tensor(M, t) and t.ndim >= 1 else t for t in ts]
    return fn(M, ts, p)


def pre_numpy(args, p: dict):
    """The arrays the op itself sees (``_pre`` applied)."""
    args = [np.asarray(a) if isinstance(a, np.generic) else a for a in args]
    pre = p.get("_pre")
    if not pre:
        return list(args)
    return [_PRE_NP[pre](a) if isinstance(a, np.ndarray) and a.ndim >= 1 else a for a in args]


# ---------------------------------------------------------------- hand-written samples
def _r(rng, shape, dt, lo=-2.0, hi=2.0):
    return np.asarray(rng.uniform(lo, hi, size=shape), dtype=dt)


def _distinct(rng, shape, dt):
    n = int(np.prod(shape, dtype=np.int64))
    return (rng.permutation(max(n, 1))[:n].reshape(shape) * 0.37 + 0.1).astype(dt)


def _s_matmul(rng, dt):
    pairs = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
             ((4, 2, 3), (4, 3, 5)), ((2, 1, 2, 3), (3, 3, 2)), ((3,), (2, 3, 4)),
             ((2, 3, 4), (4,)), ((2, 3), (5, 3, 4)), ((5, 2, 3), (3, 4)), ((1, 3), (3, 1))]
    out = [((_r(rng, a, dt), _r(rng, b, dt)), {"_id": f"{a}@{b}"}) for a, b in pairs]
    out.append(((_r(rng, (3, 2), dt), _r(rng, (4, 3), dt)), {"_pre": "T", "_id": "T@T"}))
    # the named functions (torch.mm, ...) go through the same op
    for fn, a, b in (("matmul", (2, 3, 4), (4,)), ("mm", (2, 3), (3, 4)), ("mv", (2, 3), (3,)),
                     ("dot", (3,), (3,)), ("bmm", (4, 2, 3), (4, 3, 5))):
        out.append(((_r(rng, a, dt), _r(rng, b, dt)), {"fn": fn, "_id": fn}))
    return out


def _s_bce(rng, dt):
    def x(s=(2, 3)):
        return _r(rng, s, dt, -3.0, 3.0)

    def y(s=(2, 3)):
        return rng.uniform(0.0, 1.0, size=s).astype(dt)

    def pos(s=(3,)):
        return _r(rng, s, dt, 0.5, 2.0)

    nog = {"_torch_nograd": (2, 3)}
    out = [((x(), y(), None, None), {"reduction": r, "_id": r}) for r in ("mean", "sum", "none")]
    out += [
        ((x(), y(), pos(), None), {"reduction": "mean", "_id": "weight", **nog}),
        ((x(), y(), None, pos()), {"reduction": "sum", "_id": "pos_weight", **nog}),
        ((x(), y(), pos((2, 3)), pos()), {"reduction": "none", "_id": "both", **nog}),
        ((x(()), y(()), None, None), {"reduction": "mean", "_id": "0d"}),
    ]
    return out


def _s_bce_backward(rng, dt):
    out = []
    for (x, y, w, pw), p in _s_bce(rng, dt):
        g = _r(rng, x.shape if p["reduction"] == "none" else (), dt)
        out.append(((g, x, y, w, pw), {**p, "_torch_nograd": (3, 4)}))
    return out


def _s_reshape(rng, dt):
    cases = [
        ((2, 3), {"fn": "reshape", "shape": (3, 2)}),
        ((2, 3), {"fn": "reshape", "shape": (-1,)}),
        ((2, 3, 4), {"fn": "reshape", "shape": (4, -1)}),
        ((), {"fn": "reshape", "shape": (1, 1)}),
        ((6,), {"fn": "reshape", "shape": (2, 1, 3)}),
        ((2, 3), {"fn": "reshape", "shape": (2, 3)}),
        ((3, 2), {"fn": "reshape", "shape": (6,), "_pre": "T", "_id": "T-reshape"}),
        ((2, 3), {"fn": "view", "shape": (6,)}),
        ((2, 3, 4), {"fn": "view", "shape": (2, 12)}),
        ((2, 3), {"fn": "view_as", "shape": (3, 2)}),
        ((2, 3, 4), {"fn": "flatten", "args": (1,)}),
        ((2, 3, 4), {"fn": "flatten"}),
        ((2, 3, 4, 5), {"fn": "flatten", "args": (-3, -2)}),
        ((3, 4), {"fn": "unflatten", "args": (1, (2, 2))}),
        ((3, 4), {"fn": "unflatten", "args": (-2, (3, 1))}),
        ((2, 1, 3, 1), {"fn": "squeeze"}),
        ((2, 1, 3), {"fn": "squeeze", "args": (1,)}),
        ((2, 3, 1), {"fn": "squeeze", "args": (-1,)}),
        ((1, 2, 1, 3), {"fn": "squeeze", "args": ((0, 2),)}),
        ((2, 3), {"fn": "unsqueeze", "args": (0,)}),
        ((2, 3), {"fn": "unsqueeze", "args": (-1,)}),
        ((2, 3), {"fn": "unsqueeze", "args": (1,)}),
        ((), {"fn": "unsqueeze", "args": (0,)}),
    ]
    return [((_r(rng, s, dt),), {"_id": f"{i}-{p['fn']}", **p}) for i, (s, p) in
            enumerate(cases)]


def _s_permute(rng, dt):
    cases = [
        ((2, 3, 4), {"fn": "permute", "args": (2, 0, 1)}),
        ((2, 3, 4), {"fn": "permute", "args": (-1, 0, -2)}),
        ((2, 3), {"fn": "transpose", "args": (0, 1)}),
        ((2, 3, 4), {"fn": "transpose", "args": (-1, -3)}),
        ((2, 3, 4), {"fn": "swapaxes", "args": (0, 2)}),
        ((2, 3, 4), {"fn": "movedim", "args": (0, -1)}),
        ((2, 3), {"fn": "t"}),
        ((3,), {"fn": "t"}),
        ((2, 3), {"fn": "T"}),
        ((2, 3, 4), {"fn": "mT"}),
        ((3, 2), {"fn": "permute", "args": (1, 0), "_pre": "T"}),
    ]
    return [((_r(rng, s, dt),), {"_id": f"{i}-{p['fn']}", **p}) for i, (s, p) in
            enumerate(cases)]


def _s_expand(rng, dt):
    cases = [((3,), (2, 3)), ((2, 1), (2, 4)), ((1, 3), (-1, 3)), ((1, 3), (4, 2, 3)),
             ((), (2, 3)), ((2, 1, 3), (4, 2, 5, 3)), ((2, 3), (2, 3))]
    out = [((_r(rng, s, dt),), {"shape": t, "_id": f"{s}->{t}"}) for s, t in cases]
    out.append(((_r(rng, (3, 1), dt),), {"shape": (2, 3, 4), "as": True, "_id": "expand_as"}))
    return out


_GETITEM = [
    ((4, 5), 1, "int"),
    ((4, 5), -1, "negint"),
    ((4, 5), (slice(None), 2), "col"),
    ((4, 5), slice(1, None), "slice"),
    ((4, 5), (slice(None, None, 2), slice(1, 5, 3)), "steps"),
    ((2, 3, 4), (Ellipsis, 0), "ellipsis-int"),
    ((2, 3, 4), (Ellipsis, slice(1, 3)), "ellipsis-slice"),
    ((4, 5), None, "none"),
    ((4, 5), (None, slice(None), 0), "none-int"),
    ((4, 5), (1, 2), "scalar"),
    ((4, 5), [0, 2], "list"),
    ((4, 5), [0, 0, 3, 0], "repeated"),
    ((4, 5), ([[0, 1], [3, 1]],), "2d-index"),  # (a list: an integer tensor is index_tensor's)
    ((4, 5), (slice(None), [0, 4]), "col-list"),
    ((4, 5), ([0, 1, 1], [1, 2, 2]), "pairs"),
    ((4, 5), (1, [0, 2]), "int-list"),
    ((4, 5), "mask", "mask"),
    ((4, 5), np.array([True, False, True, False]), "row-mask"),
    ((2, 3, 4), (slice(None), np.array([True, False, True]), slice(1, 3)), "mid-mask"),
    ((2, 3, 4), (0, slice(None), [3, 1]), "int-slice-list"),
]


def _mask_for(a):
    return a > 0.0


def _s_getitem(rng, dt):
    out = []
    for shape, idx, name in _GETITEM:
        x = _r(rng, shape, dt)
        if isinstance(idx, str):
            idx = _mask_for(x)
        out.append(((x,), {"index": idx, "_id": name}))
    x = _r(rng, (4, 6), dt)
    out += [
        ((x,), {"fn": "select", "args": (1, -2), "_id": "select"}),
        ((x,), {"fn": "narrow", "args": (0, 1, 2), "_id": "narrow"}),
        ((x,), {"fn": "split", "args": (4, 1), "k": 1, "_id": "split"}),
        ((x,), {"fn": "chunk", "args": (2, 0), "k": 0, "_id": "chunk"}),
        ((x,), {"fn": "unbind", "args": (1,), "k": 3, "_id": "unbind"}),
        ((_r(rng, (5, 4), dt),), {"index": (slice(None), 1), "_pre": "T", "_id": "T-row"}),
    ]
    return out


def _s_getitem_backward(rng, dt):
    out = []
    for shape, idx, name in _GETITEM:
        if isinstance(idx, str):
            idx = _mask_for(_r(rng, shape, dt))
        # PyTorch's indexing rules (an int next to a list is basic indexing), as jitgrad's
        gshape = tuple(jitgrad.zeros(shape)[_index(jitgrad, idx)].shape)
        out.append(((_r(rng, gshape, dt),), {"index": idx, "shape": shape, "_id": name}))
    return out


def _s_index_put(rng, dt):
    cases = [((4, 5), 1, (5,), "row"),
             ((4, 5), (slice(None), 2), (4,), "col"),
             ((4, 5), (slice(1, None), slice(None, None, 2)), (1,), "broadcast"),
             ((4, 5), 0, (), "0d-value"),
             ((4, 5), [0, 2], (2, 5), "list"),
             ((4, 5), "mask", None, "mask"),
             ((2, 3, 4), (Ellipsis, 1), (2, 3), "ellipsis")]
    out = []
    for shape, idx, vshape, name in cases:
        x = _r(rng, shape, dt)
        if isinstance(idx, str):
            idx = _mask_for(x)
            vshape = (int(idx.sum()),)
        out.append(((x, _r(rng, vshape, dt)), {"index": idx, "_id": name}))
    return out


def _s_cat(rng, dt):
    cases = [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1)], -1), ([(2, 3), (1, 3), (3, 3)], 0),
             ([(3,), (2,)], 0), ([(2, 1, 3), (2, 2, 3)], 1), ([(2, 3), (2, 3)], -2),
             # 1-D empty inputs are skipped by the shape rules (but get an empty gradient)
             ([(0,), (2, 3), (0,), (2, 2)], 1), ([(2, 3), (0,)], 0), ([(0,), (0,)], 0)]
    return [(tuple(_r(rng, s, dt) for s in shapes), {"dim": d, "_id": f"{len(shapes)}x{d}"})
            for shapes, d in cases]


def _s_stack(rng, dt):
    cases = [((3,), 2, 0), ((2, 3), 3, -1), ((2, 3), 2, 1), ((), 3, 0), ((2, 3), 2, -3)]
    return [(tuple(_r(rng, s, dt) for _ in range(n)), {"dim": d, "_id": f"{s}x{n}@{d}"})
            for s, n, d in cases]


def _s_clone(rng, dt):
    return [((_r(rng, (), dt),), {"_id": "0d"}), ((_r(rng, (2, 3), dt),), {"_id": "2d"}),
            ((_r(rng, (3, 2), dt),), {"_pre": "T", "_id": "T"})]


def _s_to_device(rng, dt):
    return [((_r(rng, (2, 3), dt),), {"_id": "2d"}), ((_r(rng, (), dt),), {"_id": "0d"})]


def _s_to_dtype(rng, dt):
    # multiples of 1/8: exact in float32 also after gradcheck's +-2**-10 steps
    def x(s):
        return (np.round(rng.uniform(-2.0, 2.0, size=s) * 8.0) / 8.0).astype(dt)

    other = "float32" if dt == F64 else "float64"
    return [((x((2, 3)),), {"dtype": other, "_id": other}),
            ((x(()),), {"dtype": other, "_id": other + "-0d"}),
            ((x((3, 2)),), {"dtype": other, "_pre": "T", "_id": other + "-T"}),
            ((x((2, 3)),), {"dtype": "float64" if dt == F32 else "float32",
                            "via": "double" if dt == F32 else "float", "_id": "method"}),
            ((x((2, 3)),), {"dtype": "int64", "_nograd": True, "_id": "int64"}),
            ((x((2, 3)),), {"dtype": "bool", "_nograd": True, "_id": "bool"})]


def _s_max_dim(rng, dt):
    out = []
    for s in ((5,), (2, 3), (2, 3, 4)):
        for d in range(-len(s), len(s)):
            for k in (False, True):
                out.append(((_distinct(rng, s, dt),), {"dim": d, "keepdim": k,
                                                        "_id": f"{s}-{d}-{k}"}))
    out.append(((_distinct(rng, (), dt),), {"dim": 0, "keepdim": False, "_id": "0d"}))
    return out


def _s_logical(unary):
    def s(rng, dt):
        shapes = [((5,), (5,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3))]
        if unary:
            return [((rng.random(size=a) < 0.5,), {"_nograd": True}) for a, _ in shapes]
        return [((rng.random(size=a) < 0.5, rng.random(size=b) < 0.5), {"_nograd": True})
                for a, b in shapes]
    return s


#: samples of registered ops whose OpDef has none
EXTRA_SAMPLES = {
    "matmul": _s_matmul,
    "binary_cross_entropy_with_logits": _s_bce,
    "binary_cross_entropy_with_logits_backward": _s_bce_backward,
    "reshape": _s_reshape,
    "permute": _s_permute,
    "expand": _s_expand,
    "getitem": _s_getitem,
    "getitem_backward": _s_getitem_backward,
    "index_put": _s_index_put,
    "cat": _s_cat,
    "stack": _s_stack,
    "clone": _s_clone,
    "to_dtype": _s_to_dtype,
    "to_device": _s_to_device,
    "pin_memory": _s_to_device,
    "max_dim": _s_max_dim,
    "min_dim": _s_max_dim,
    "logical_and": _s_logical(False),
    "logical_or": _s_logical(False),
    "logical_xor": _s_logical(False),
    "logical_not": _s_logical(True),
}


def _more_reduce(rng, dt):
    return [((_r(rng, (2, 3, 4), dt),), {"dim": -1, "keepdim": False, "_id": "neg-int"}),
            ((_r(rng, (2, 3, 4), dt),), {"dim": (-3, 1), "keepdim": True, "_id": "neg-tuple"}),
            ((_r(rng, (3, 4), dt),), {"dim": 0, "keepdim": False, "_pre": "T", "_id": "T"})]


def _more_reduce_distinct(rng, dt):
    return [((_distinct(rng, a.shape, dt),), p) for (a,), p in _more_reduce(rng, dt)]


def _more_softmax(rng, dt):
    return [((_r(rng, (2, 3, 4), dt),), {"dim": -1, "_id": "neg"}),
            ((_r(rng, (), dt),), {"dim": 0, "_id": "0d"}),
            ((_r(rng, (4, 3), dt),), {"dim": 1, "_pre": "T", "_id": "T"})]


def _more_binary(rng, dt):
    return [((_r(rng, (3, 4), dt), _r(rng, (3, 4), dt)), {"_pre": "T", "_id": "T"}),
            ((_r(rng, (2, 1, 3, 1), dt), _r(rng, (1, 4, 1, 5), dt)), {"_id": "nd-bcast"})]


def _more_moment(rng, dt):
    return [((_r(rng, (3, 4), dt),), {"dim": None, "keepdim": False, "correction": 1,
                                      "_id": "all"}),
            ((_r(rng, (2, 3, 4), dt),), {"dim": -2, "keepdim": True, "correction": 0,
                                         "_id": "neg"}),
            ((_r(rng, (4, 3), dt),), {"dim": 1, "keepdim": False, "correction": 1,
                                      "_pre": "T", "_id": "T"})]


#: extra samples for ops that have registry samples (negative dims, layouts)
MORE_SAMPLES = {
    "var": _more_moment, "std": _more_moment,
    "sum": _more_reduce, "mean": _more_reduce, "logsumexp": _more_reduce,
    "amax": _more_reduce_distinct, "amin": _more_reduce_distinct,
    "softmax": _more_softmax, "log_softmax": _more_softmax,
    "add": _more_binary, "mul": _more_binary, "sub": _more_binary, "maximum": _more_binary,
}


def _seed(name: str) -> int:
    return sum(ord(c) * (i + 1) for i, c in enumerate(name)) % (2 ** 31)


def samples_for(name: str, dtype) -> list:
    """``[(args, params), ...]`` of op ``name``: the registry's samples (or the hand-written
    ones) plus :data:`MORE_SAMPLES`; params get an ``_id``. Deterministic per (name, dtype)."""
    dtype = np.dtype(dtype)
    op = REGISTRY[name]
    rng = np.random.default_rng(_seed(name) + dtype.itemsize)
    gen = op.samples or EXTRA_SAMPLES.get(name)
    out = []
    for i, (args, p) in enumerate(gen(rng, dtype) if gen else []):
        out.append((args, {"_id": str(i), **p}))
    if name in MORE_SAMPLES:
        for args, p in MORE_SAMPLES[name](rng, dtype):
            out.append((args, {**p, "_id": "more-" + p["_id"]}))
    return out


def case_params(names, dtype, keep=None, xfail=None):
    """pytest params ``(name, index)`` with readable ids (``{name}-{_id}``) over every sample
    of ``names``; ids in ``xfail`` (id -> reason) or :data:`FORWARD_BUGS` (a wrong forward
    fails every test) are strict xfails (known jitgrad bugs)."""
    out = []
    xfail = {**FORWARD_BUGS, **(xfail or {})}
    for name in names:
        for i, (args, p) in enumerate(samples_for(name, dtype)):
            if keep is None or keep(name, args, p):
                cid = f"{name}-{p['_id']}"
                marks = ([pytest.mark.xfail(reason=xfail[cid], strict=True)]
                         if cid in xfail else [])
                out.append(pytest.param(name, i, id=cid, marks=marks))
    return out


#: known jitgrad bugs, by case id (``{op}-{_id}``): strict xfails of the registry-driven tests.
#: Fixed so far (now regression cases): dot backward, max/min(dim) shapes of 1-D/0-d inputs,
#: BCE's second derivative in the target, bmm. Add an entry when a new bug turns up.
FORWARD_BUGS: dict[str, str] = {}  # forward wrong: reference, gradient and oracle tests
BACKWARD_BUGS: dict[str, str] = {}  # first-order gradient wrong: gradcheck and oracle
GRADGRAD_BUGS: dict[str, str] = {}  # second-order gradient wrong: gradgradcheck

_TRIGAMMA = ("PyTorch's trigamma (polygamma(1, x), and so digamma's gradient) stops its "
             "asymptotic series early: ~5e-10 relative error in float64; jitgrad's is within a "
             "few ulp of mpmath (tests/ops/test_special_functions.py)")
_TORCH_BESSEL = ("PyTorch's float64 J0, J1, Y0, Y1 (bessel_j0...) are accurate to ~3e-6 of "
                 "|value| + max |value| only (measured against mpmath on -9..9); jitgrad's are "
                 "within a few ulp of mpmath (tests/ops/test_special_extended.py)")
_TORCH_AIRY = ("PyTorch's float64 airy_ai is accurate to ~2e-5 of |value| + max |value| only "
               "(measured against mpmath on -9..9); jitgrad's is within a few ulp of mpmath")
#: op -> (float64 rtol against PyTorch, why PyTorch's values are less accurate than that)
TORCH_F64_RTOL: dict[str, tuple[float, str]] = {"polygamma": (2e-9, _TRIGAMMA),
                                                "digamma": (2e-9, _TRIGAMMA),
                                                **{f"bessel_{k}": (1e-5, _TORCH_BESSEL)
                                                   for k in ("j0", "j1", "y0", "y1")},
                                                "airy_ai": (1e-4, _TORCH_AIRY)}


def sample(name: str, i: int, dtype):
    return samples_for(name, dtype)[i]


def make_inputs(M, args, requires_grad=True, nograd=()):
    """Tensors of ``M`` for the arrays in ``args`` (float ones require grad unless their
    position is in ``nograd``); numbers and None pass through."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, np.generic):  # the registry's samples give these for shape ()
            a = np.asarray(a)
        if isinstance(a, np.ndarray):
            rg = requires_grad and a.dtype.kind == "f" and i not in nograd
            out.append(M.tensor(a.copy(), requires_grad=rg))
        else:
            out.append(a)
    return out


def to_numpy(t) -> np.ndarray:
    return t.detach().numpy()


def dtype_name(t) -> str:
    return str(t.dtype).split(".")[-1]


def node_name(t) -> str:
    return type(t.grad_fn).__name__


# ------------------------------------------------------------------------- fixtures
@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def jg():
    return jitgrad


# ------------------------------------------------- nn ops (jitgrad.ops.nnops, issue 5)
def _nn_grad_of(M, ts, p, loss_fn, x_index=1):
    """The create_graph gradient w.r.t. input ``ts[x_index]`` of ``loss_fn(x)`` for the
    output gradient ``ts[0]`` (in jitgrad: the op's fused backward op)."""
    g, x = ts[0], ts[x_index]
    with M.enable_grad():
        xg = x if x.requires_grad else x.detach().requires_grad_()
        (gx,) = M.autograd.grad(loss_fn(xg), xg, g, create_graph=True)
    return gx


def _nn_gelu_form(p):
    return "tanh" if p["approx"] else "none"


def _nn_ln_backward(M, ts, p):
    return _nn_grad_of(M, ts, p, lambda x: M.nn.functional.layer_norm(
        x, p["normalized_shape"], ts[2], None, p["eps"]))


def _nn_bn(M, ts, p):
    x, w, b, rm, rv = ts
    return M.nn.functional.batch_norm(x, rm, rv, w, b, training=p["training"], eps=p["eps"])


def _nn_bn_backward(M, ts, p):
    _, _, w, rm, rv = ts
    return _nn_grad_of(M, ts, p, lambda x: M.nn.functional.batch_norm(
        x, rm, rv, w, None, training=p["training"], eps=p["eps"]))


def _nn_nll(M, ts, p):
    return M.nn.functional.nll_loss(ts[0], ts[1], weight=ts[2], ignore_index=p["ignore_index"],
                                    reduction=p["reduction"])


def _nn_nll_backward(M, ts, p):
    g, t, w = ts
    x = M.zeros(p["shape"], dtype=g.dtype, requires_grad=True)
    with M.enable_grad():
        loss = _nn_nll(M, [x, t, w], p)
        (gx,) = M.autograd.grad(loss, x, g, create_graph=True)
    return gx


def _nn_mse(M, ts, p):
    return M.nn.functional.mse_loss(ts[0], ts[1], reduction=p["reduction"])


def _nn_bce(M, ts, p):
    return M.nn.functional.binary_cross_entropy(ts[0], ts[1], weight=ts[2],
                                                reduction=p["reduction"])


ADAPTERS.update({
    "gelu": lambda M, ts, p: M.nn.functional.gelu(ts[0], approximate=_nn_gelu_form(p)),
    "gelu_backward": lambda M, ts, p: jitgrad.ops.nnops.activation.gelu_backward(
        ts[0], ts[1], p["approx"]),
    "addcdiv": lambda M, ts, p: M.addcdiv(ts[0], ts[1], ts[2], value=p["value"]),
    "lerp": lambda M, ts, p: M.lerp(ts[0], ts[1], p["weight"]),
    "lerp_tensor": lambda M, ts, p: M.lerp(ts[0], ts[1], ts[2]),
    "addmm": lambda M, ts, p: M.addmm(ts[0], ts[1], ts[2]),
    "embedding": lambda M, ts, p: M.nn.functional.embedding(ts[1], ts[0],
                                                            padding_idx=p["padding_idx"]),
    "embedding_backward": lambda M, ts, p: jitgrad.ops.nnops.embedding.embedding_backward(
        ts[0], ts[1], p["num_weights"], p["padding_idx"]),
    "layer_norm": lambda M, ts, p: M.nn.functional.layer_norm(
        ts[0], p["normalized_shape"], ts[1], ts[2], p["eps"]),
    "layer_norm_backward": _nn_ln_backward,
    "batch_norm": _nn_bn,
    "batch_norm_backward": _nn_bn_backward,
    "nll_loss": _nn_nll,
    "nll_loss_backward": _nn_nll_backward,
    "mse_loss": _nn_mse,
    "mse_loss_backward": lambda M, ts, p: _nn_grad_of(M, ts, p,
                                                      lambda x: _nn_mse(M, [x, ts[2]], p)),
    "binary_cross_entropy": _nn_bce,
    "binary_cross_entropy_backward": lambda M, ts, p: _nn_grad_of(
        M, ts, p, lambda x: _nn_bce(M, [x, ts[2], ts[3]], p)),
})

TORCH_ADAPTERS.update({
    "gelu_backward": lambda M, ts, p: M.ops.aten.gelu_backward(
        ts[0], ts[1], approximate=_nn_gelu_form(p)),
    "embedding_backward": lambda M, ts, p: M.ops.aten.embedding_dense_backward(
        ts[0], ts[1], p["num_weights"], -1 if p["padding_idx"] is None else p["padding_idx"],
        False),
})


# argmax / argmin (registered ops without gradients)
ADAPTERS.update({
    "argmax": lambda M, ts, p: M.argmax(ts[0], dim=p["dim"], keepdim=p["keepdim"]),
    "argmin": lambda M, ts, p: M.argmin(ts[0], dim=p["dim"], keepdim=p["keepdim"]),
})


# ------------------------------------------- convolution and pooling (jitgrad.ops.conv)
def _cv_fn(M, name):
    """``torch.nn.functional.<name>``; for jitgrad its ``nn.functional`` one when exported
    there, else :mod:`jitgrad.ops.conv`'s."""
    fn = getattr(M.nn.functional, name, None)
    return fn if fn is not None else getattr(jitgrad.ops.conv, name)


_CV_CONV = ("stride", "padding", "dilation", "groups")
_CV_MAX = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
_CV_AVG = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
           "divisor_override")


def _cv_kw(p, names):
    return {k: p[k] for k in names if k in p}


def _cv_grad(M, fn, x, g):
    """The create_graph gradient of ``fn(x)`` w.r.t. ``x`` for the output gradient ``g``."""
    with M.enable_grad():
        x = x if x.requires_grad else x.detach().requires_grad_()
        (gx,) = M.autograd.grad(fn(x), x, g, create_graph=True)
    return gx


def _cv_conv_backward_input(M, ts, p):
    g, w = ts
    x = M.zeros(p["input_shape"], dtype=g.dtype, requires_grad=True)
    return _cv_grad(M, lambda t: _cv_fn(M, "conv2d")(t, w, **_cv_kw(p, _CV_CONV)), x, g)


def _cv_conv_backward_weight(M, ts, p):
    g, x = ts
    w = M.zeros(p["weight_shape"], dtype=g.dtype, requires_grad=True)
    return _cv_grad(M, lambda t: _cv_fn(M, "conv2d")(x, t, **_cv_kw(p, _CV_CONV)), w, g)


def _cv_conv_backward_bias(M, ts, p):
    """The bias gradient of a 1x1 convolution whose output has ``g``'s shape."""
    g = ts[0]
    n, o, h, w = g.shape
    x, k = M.zeros(n, 1, h, w, dtype=g.dtype), M.zeros(o, 1, 1, 1, dtype=g.dtype)
    b = M.zeros(o, dtype=g.dtype, requires_grad=True)
    return _cv_grad(M, lambda t: _cv_fn(M, "conv2d")(x, k, t), b, g)


def _cv_max_pool_backward(M, ts, p):
    return _cv_grad(M, lambda t: _cv_fn(M, "max_pool2d")(t, **_cv_kw(p, _CV_MAX)), ts[1], ts[0])


def _cv_avg_pool_backward(M, ts, p):
    return _cv_grad(M, lambda t: _cv_fn(M, "avg_pool2d")(t, **_cv_kw(p, _CV_AVG)), ts[1], ts[0])


def _cv_conv(M, ts, p):
    import warnings

    with warnings.catch_warnings():  # PyTorch: "padding='same' with even kernel lengths..."
        warnings.simplefilter("ignore", UserWarning)
        return _cv_fn(M, "conv2d")(ts[0], ts[1], ts[2], **_cv_kw(p, _CV_CONV))


ADAPTERS.update({
    "conv2d": _cv_conv,
    "conv2d_backward_input": _cv_conv_backward_input,
    "conv2d_backward_weight": _cv_conv_backward_weight,
    "conv2d_backward_bias": _cv_conv_backward_bias,
    "max_pool2d": lambda M, ts, p: _cv_fn(M, "max_pool2d")(ts[0], **_cv_kw(p, _CV_MAX)),
    "max_pool2d_backward": _cv_max_pool_backward,
    "avg_pool2d": lambda M, ts, p: _cv_fn(M, "avg_pool2d")(ts[0], **_cv_kw(p, _CV_AVG)),
    "avg_pool2d_backward": _cv_avg_pool_backward,
})


# max_pool2d's argmax positions (a traced op of their own, so compiled plans recompute them)
ADAPTERS["max_pool2d_indices"] = lambda M, ts, p: _cv_fn(M, "max_pool2d")(
    ts[0], **_cv_kw(p, _CV_MAX), return_indices=True)[1]


def _cv_pool_gather(M, ts, p):
    """max_pool2d's double backward w.r.t. the output gradient: a gather of ``ts[0]`` at the
    argmax positions of pooling ``ts[1]`` (jitgrad's pool_gather op)."""
    gg, x = ts
    pool = _cv_fn(M, "max_pool2d")
    with M.enable_grad():
        xg = x.detach().requires_grad_()
        y = pool(xg, **_cv_kw(p, _CV_MAX))
        go = M.ones_like(y).requires_grad_()
        (gx,) = M.autograd.grad(y, xg, go, create_graph=True)
        (ggo,) = M.autograd.grad(gx, go, gg, create_graph=True)
    return ggo


ADAPTERS["pool_gather"] = _cv_pool_gather


# ------------------------------------------- norms and triangles (ops/norms.py, triangular.py)
def _vector_norm(M, ts, p):
    return M.linalg.vector_norm(ts[0], ord=p["ord"], dim=p["dim"], keepdim=p["keepdim"])


ADAPTERS.update({
    "vector_norm": _vector_norm,
    "tril": lambda M, ts, p: M.tril(ts[0], p["diagonal"]),
    "triu": lambda M, ts, p: ts[0].triu(diagonal=p["diagonal"]),
})


# adaptive average pooling (ops/pooling.py)
ADAPTERS.update({
    "adaptive_avg_pool2d": lambda M, ts, p: M.nn.functional.adaptive_avg_pool2d(
        ts[0], p["output_size"]),
    "adaptive_avg_pool2d_backward": lambda M, ts, p: _cv_grad(
        M, lambda t: M.nn.functional.adaptive_avg_pool2d(t, p["output_size"]), ts[1], ts[0]),
})


# smooth L1 and Huber losses (ops/nnops/losses.py; Huber's delta is the op's ``beta``)
def _nn_smooth_l1(M, ts, p):
    return M.nn.functional.smooth_l1_loss(ts[0], ts[1], reduction=p["reduction"],
                                          beta=p["beta"])


def _nn_huber(M, ts, p):
    return M.nn.functional.huber_loss(ts[0], ts[1], reduction=p["reduction"], delta=p["beta"])


ADAPTERS.update({
    "smooth_l1_loss": _nn_smooth_l1,
    "smooth_l1_loss_backward": lambda M, ts, p: _nn_grad_of(
        M, ts, p, lambda x: _nn_smooth_l1(M, [x, ts[2]], p)),
    "huber_loss": _nn_huber,
    "huber_loss_backward": lambda M, ts, p: _nn_grad_of(
        M, ts, p, lambda x: _nn_huber(M, [x, ts[2]], p)),
})


# sorting and gather (ops/sorting.py)
def _sort_indices(M, ts, p):
    x, d = ts[0], p["dim"]
    if p["kth"] is not None:
        return M.kthvalue(x, p["kth"], dim=d, keepdim=True).indices
    if p["k"] is not None:
        return M.topk(x, p["k"], dim=d, largest=p["descending"]).indices
    return M.argsort(x, dim=d, descending=p["descending"])


def _gather(M, ts, p):
    x, fn = ts[0], p["fn"]
    if fn == "gather":
        return M.gather(x, p["dim"], ts[1])
    if fn == "topk":
        return x.topk(p["k"], dim=p["dim"], largest=p["largest"]).values
    if fn == "sort":
        return M.sort(x, dim=p["dim"], descending=p.get("descending", False))[0]
    if fn == "kthvalue":
        return M.kthvalue(x, p["k"], p["dim"], p["keepdim"]).values
    if fn == "msort":
        return M.msort(x)
    raise AssertionError(fn)


def _gather_backward(M, ts, p):
    """The create_graph gradient of ``gather`` for the output gradient ``ts[0]``."""
    g, index = ts
    x = M.zeros(p["shape"], dtype=g.dtype, requires_grad=True)
    with M.enable_grad():
        (gx,) = M.autograd.grad(M.gather(x, p["dim"], index), x, g, create_graph=True)
    return gx


def _tensor_index(M, x, index, form):
    """``x[form]`` with ``"t0"``, ``"t1"`` in ``form`` the index tensors (rows of ``index``
    when there are several)."""
    several = sum(isinstance(f, str) for f in form) > 1

    def tensor(f):
        v = index[int(f[1:])] if several else index
        return v if is_tensor(M, v) else M.tensor(v)

    return x[tuple(tensor(f) if isinstance(f, str) else f for f in form)]


def _index_tensor_backward(M, ts, p):
    """The create_graph gradient of ``x[form]`` for the output gradient ``ts[0]``."""
    g, index = ts
    x = M.zeros(p["shape"], dtype=g.dtype, requires_grad=True)
    with M.enable_grad():
        (gx,) = M.autograd.grad(_tensor_index(M, x, index, p["form"]), x, g, create_graph=True)
    return gx


def _index_put_tensor(M, ts, p):
    """``x[form] = value`` on a copy of ``x`` (differentiable w.r.t. both)."""
    x, v, index = ts
    out = x.clone() if is_tensor(M, x) and x.requires_grad else x
    several = sum(isinstance(f, str) for f in p["form"]) > 1

    def tensor(f):
        i = index[int(f[1:])] if several else index
        return i if is_tensor(M, i) else M.tensor(i)

    out[tuple(tensor(f) if isinstance(f, str) else f for f in p["form"])] = v
    return out


ADAPTERS.update({
    "index_put_tensor": _index_put_tensor,
    "index_tensor": lambda M, ts, p: _tensor_index(M, ts[0], ts[1], p["form"]),
    "index_tensor_backward": _index_tensor_backward,
    "sort_indices": _sort_indices,
    "gather": _gather,
    "index_copy": lambda M, ts, p: M.index_copy(ts[0], p["dim"], ts[1], ts[2]),
    "gather_backward": _gather_backward,
})


# F.pad's constant mode (ops/padding.py)
ADAPTERS["constant_pad_nd"] = lambda M, ts, p: M.nn.functional.pad(ts[0], p["pad"],
                                                                   value=p["value"])


# matrix decompositions (ops/decompositions.py). Singular vectors and eigenvectors are
# defined up to sign, and PyTorch's LAPACK (MKL) picks other signs than NumPy's (jitgrad's)
# now and then: PyTorch's factors get NumPy's signs, flipped in place on their data, which
# its node saved too (so its gradients are those of the flipped factors, and the node
# names stay PyTorch's).
def _decompositions():
    from jitgrad.ops import decompositions

    return decompositions


def _flip_signs(M, t, ref: np.ndarray, axis: int) -> None:
    """``t``'s columns (``axis=-2``) or rows (``axis=-1``) times the signs making them
    point as NumPy's factor ``ref`` does."""
    d = np.sign((ref * t.detach().numpy()).sum(axis))
    d[d == 0] = 1
    t.data.mul_(M.tensor(d, dtype=t.dtype).unsqueeze(axis))


def _torch_svd(M, x, full: bool):
    U, S, Vh = M.linalg.svd(x, full_matrices=full)
    u, _, vh = np.linalg.svd(x.detach().numpy(), full_matrices=full)
    _flip_signs(M, U, u, -2)
    _flip_signs(M, Vh, vh, -1)
    return U, S, Vh


def _torch_eigh(M, x, uplo: str):
    L, V = M.linalg.eigh(x, UPLO=uplo)
    _flip_signs(M, V, np.linalg.eigh(x.detach().numpy(), UPLO=uplo)[1], -2)
    return L, V


def _packed(M, x, *parts):
    """PyTorch's factors packed as jitgrad's ``*_factors`` ops pack them."""
    lead = tuple(x.shape[:-2])
    return M.cat([t.reshape(*lead, -1) for t in parts], -1)


def _svd_factors(M, ts, p):
    x, full, uv = ts[0], p["full_matrices"], p["compute_uv"]
    if not is_torch(M):
        return _decompositions().svd_factors(x, full, uv)
    with M.no_grad():
        return _packed(M, x, *_torch_svd(M, x, full)) if uv else M.linalg.svdvals(x)


def _svd_part(field: str):
    def f(M, ts, p):
        x, fn = ts[0], p["fn"]
        if fn == "svdvals":
            return M.linalg.svdvals(x)
        if fn == "svd":
            return M.svd(x).S
        if fn == "svd-no-uv":
            return M.svd(x, compute_uv=False).S
        full = p["full_matrices"]
        U, S, Vh = _torch_svd(M, x, full) if is_torch(M) else M.linalg.svd(x, full)
        return {"U": U, "S": S, "Vh": Vh}[field]
    return f


def _qr_factors(M, ts, p):
    if not is_torch(M):
        return _decompositions().qr_factors(ts[0], p["mode"])
    with M.no_grad():
        Q, R = M.linalg.qr(ts[0], mode=p["mode"])
        return _packed(M, ts[0], R) if p["mode"] == "r" else _packed(M, ts[0], Q, R)


def _qr_part(field: str):
    def f(M, ts, p):
        if p["fn"] == "qr":
            import warnings

            with warnings.catch_warnings():  # PyTorch's torch.qr is deprecated
                warnings.simplefilter("ignore")
                return getattr(M.qr(ts[0]), field)
        return getattr(M.linalg.qr(ts[0], mode=p["mode"]), field)
    return f


def _eigh_factors(M, ts, p):
    x, uplo, v = ts[0], p["UPLO"], p["compute_v"]
    if not is_torch(M):
        return _decompositions().eigh_factors(x, uplo, v)
    with M.no_grad():
        return _packed(M, x, *_torch_eigh(M, x, uplo)) if v else M.linalg.eigvalsh(x, uplo)


def _eigh_part(field: str):
    """The symmetrised input: one triangle is read, the gradient is symmetric."""
    def f(M, ts, p):
        x = (ts[0] + ts[0].mT) * 0.5
        if p["fn"] == "eigvalsh":
            return M.linalg.eigvalsh(x, UPLO=p["UPLO"])
        L, V = _torch_eigh(M, x, p["UPLO"]) if is_torch(M) else M.linalg.eigh(x, p["UPLO"])
        return L if field == "eigenvalues" else V
    return f


def _pinv(M, ts, p):
    x, atol, rtol = ts
    if p["hermitian"]:  # (symmetrised: its gradient is symmetric, one triangle is read)
        x = (x + x.mT) * 0.5
    kw = {k: v for k, v in (("atol", atol), ("rtol", rtol)) if v is not None}
    return M.linalg.pinv(x, hermitian=p["hermitian"], **kw)


ADAPTERS.update({
    "svd_factors": _svd_factors, "svd_u": _svd_part("U"), "svd_s": _svd_part("S"),
    "svd_vh": _svd_part("Vh"), "qr_factors": _qr_factors, "qr_q": _qr_part("Q"),
    "qr_r": _qr_part("R"), "eigh_factors": _eigh_factors,
    "eigh_values": _eigh_part("eigenvalues"), "eigh_vectors": _eigh_part("eigenvectors"),
    "pinv": _pinv,
    "solve_triangular": lambda M, ts, p: M.linalg.solve_triangular(
        ts[0], ts[1], upper=p["upper"], left=p["left"], unitriangular=p["unitriangular"]),
    "matrix_exp": lambda M, ts, p: M.linalg.matrix_exp(ts[0]),
    "cholesky_ex_factors": lambda M, ts, p: _packed(
        M, ts[0], *M.linalg.cholesky_ex(ts[0], upper=p["upper"])),
    # symmetrised, as cholesky's: the factorisation reads one triangle
    "cholesky_ex_l": lambda M, ts, p: M.linalg.cholesky_ex((ts[0] + ts[0].mT) * 0.5,
                                                           upper=p["upper"]).L,
    "cholesky_ex_info": lambda M, ts, p: M.linalg.cholesky_ex(ts[0], upper=p["upper"]).info,
    "inv_ex_factors": lambda M, ts, p: _packed(M, ts[0], *M.linalg.inv_ex(ts[0])),
    "inv_ex_inverse": lambda M, ts, p: M.linalg.inv_ex(ts[0]).inverse,
    "inv_ex_info": lambda M, ts, p: M.linalg.inv_ex(ts[0]).info,
})


# special functions (ops/special_functions.py): torch.<name> or torch.special.<name>
def _special(name: str):
    def f(M, ts, p):
        fn = getattr(M, name, None) or getattr(M.special, name)
        return fn(ts[0])
    return f


ADAPTERS.update({name: _special(name) for name in (
    "lgamma", "digamma", "erfc", "erfinv", "erfcx", "i0", "i0e", "i1", "i1e", "ndtri",
    "log_ndtr", "entr")})
ADAPTERS["xlogy"] = lambda M, ts, p: M.xlogy(ts[0], ts[1])
ADAPTERS["xlog1py"] = lambda M, ts, p: M.special.xlog1py(ts[0], ts[1])
ADAPTERS["polygamma"] = lambda M, ts, p: M.polygamma(p["n"], ts[0])
# zeta, igamma / igammac (two operands), the Bessel and Airy functions (torch.special only)
# and the orthogonal polynomials (special.<name>(x, n)): ops/bessel_polynomials.py
ADAPTERS["zeta"] = lambda M, ts, p: M.special.zeta(ts[0], ts[1])
ADAPTERS["igamma"] = lambda M, ts, p: M.igamma(ts[0], ts[1])
ADAPTERS["igammac"] = lambda M, ts, p: M.special.gammaincc(ts[0], ts[1])
ADAPTERS.update({name: _special(name) for name in (
    "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
    "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
    "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
    "airy_ai")})


def _special_two(name: str):
    return lambda M, ts, p: getattr(M.special, name)(ts[0], ts[1])


ADAPTERS.update({name: _special_two(name) for name in (
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p")})


# CTC (ops/nnops/ctc.py): through log_softmax, so a numeric gradient of the input is the
# derivative PyTorch's CTC gradient gives (see kernels/ctc.py)
def _ctc(M, ts, p, lp=None):
    lp = ts[0].log_softmax(-1) if lp is None else lp
    return M.nn.functional.ctc_loss(lp, ts[1], ts[2], ts[3], blank=p["blank"],
                                    reduction="none", zero_infinity=p["zero_infinity"])


def _ctc_backward(M, ts, p):
    """CTC's gradient (without create_graph: it is not differentiable again, in either
    library -- see DERIVATIVE_NOT_IMPLEMENTED)."""
    g, lp = ts[0], ts[1]
    x = lp.detach().requires_grad_()
    with M.enable_grad():
        (gx,) = M.autograd.grad(_ctc(M, ts[1:], p, lp=x), x, g)
    return gx


#: ops whose VJP raises PyTorch's "derivative for ... is not implemented" (as PyTorch's do):
#: no differentiable samples to check
DERIVATIVE_NOT_IMPLEMENTED = {"ctc_loss_backward": "PyTorch's CTC gradient is not "
                                                   "differentiable; jitgrad's raises its error",
                              "floor_divide": "PyTorch's floor_divide has no derivative; "
                                              "jitgrad's raises its error"}


ADAPTERS["ctc_loss"] = _ctc
ADAPTERS["ctc_loss_backward"] = _ctc_backward


# bitwise, integer and float-bits ops (ops/bitwise.py, integer_ops.py, float_bits.py) and
# Tensor.unfold (ops/unfold_view.py)
def _two(name: str):
    """The adapter of a two-operand function ``M.<name>(a, b)``."""
    return lambda M, ts, p: getattr(M, name)(ts[0], ts[1])


ADAPTERS.update({name: _two(name) for name in (
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
    "gcd", "lcm", "floor_divide", "nextafter")})
ADAPTERS.update({
    "bitwise_not": lambda M, ts, p: M.bitwise_not(ts[0]),
    "frexp_mantissa": lambda M, ts, p: M.frexp(ts[0])[0],
    "frexp_exponent": lambda M, ts, p: M.frexp(ts[0])[1],
    "unfold": lambda M, ts, p: ts[0].unfold(p["dim"], p["size"], p["step"]),
    "unfold_backward": lambda M, ts, p: jitgrad.ops.unfold_view.unfold_backward(
        ts[0], p["input_shape"], p["dim"], p["size"], p["step"]),
})
TORCH_ADAPTERS["unfold_backward"] = lambda M, ts, p: M.ops.aten.unfold_backward(
    ts[0], list(p["input_shape"]), p["dim"], p["size"], p["step"])


# the LSTM cell's element-wise ops (ops/nnops/rnn_cells.py); PyTorch: the same composite
def _lstm_cell(which: str):
    from jitgrad.ops.nnops import rnn_cells

    fused = getattr(rnn_cells, f"lstm_cell_{which}")

    def adapter(M, ts, p):
        gates, c = ts
        if not is_torch(M):
            return fused(gates, c)
        i, f, g, o = gates.chunk(4, -1)
        if which == "c":
            return M.sigmoid(f) * c + M.sigmoid(i) * M.tanh(g)
        return M.sigmoid(o) * M.tanh(c)
    return adapter


ADAPTERS.update({"lstm_cell_c": _lstm_cell("c"), "lstm_cell_h": _lstm_cell("h")})


def _lstm_cell_backward(which: str):
    """``[dgates, dstate]`` of an LSTM cell op for the output gradient ``ts[0]`` (PyTorch:
    the composite's gradients, with ``create_graph`` so they differentiate again)."""
    from jitgrad.ops.nnops import rnn_cells

    fused = getattr(rnn_cells, f"lstm_cell_{which}_backward")
    forward = _lstm_cell(which)

    def adapter(M, ts, p):
        g, gates, c = ts
        if not is_torch(M):
            return fused(g, gates, c)
        with M.enable_grad():
            at = [t if t.requires_grad else t.detach().requires_grad_() for t in (gates, c)]
            gg, gc = M.autograd.grad(forward(M, at, p), at, g, create_graph=True)
        return M.cat([gg, gc], -1)
    return adapter


ADAPTERS.update({"lstm_cell_c_backward": _lstm_cell_backward("c"),
                 "lstm_cell_h_backward": _lstm_cell_backward("h")})


# a whole LSTM layer as one op (ops/nnops/rnn_layer.py); PyTorch: its steps as a composite,
# the flat [hs | cs | gates] stacked from them
def _torch_lstm_layer(M, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse):
    steps = x.shape[0]
    xw = M.nn.functional.linear(x, w_ih, b_ih)
    h, c = h0, c0
    hs, cs = [None] * steps, [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        i, f, g, o = (xw[t] + M.nn.functional.linear(h, w_hh, b_hh)).chunk(4, -1)
        c = M.sigmoid(f) * c + M.sigmoid(i) * M.tanh(g)
        h = M.sigmoid(o) * M.tanh(c)
        hs[t], cs[t] = h, c
    return M.cat([M.stack(hs).reshape(-1), M.stack(cs).reshape(-1)])


def _lstm_layer(M, ts, p):
    from jitgrad.ops.nnops.rnn_layer import lstm_layer

    if not is_torch(M):
        return lstm_layer(*ts, reverse=p["reverse"])
    return _torch_lstm_layer(M, *ts, p["reverse"])


def _lstm_layer_backward(M, ts, p):
    """The layer's gradients for ``ts[0]``, flat (PyTorch: the composite's; the given
    output, computed from the same inputs, is not read)."""
    from jitgrad.ops.nnops.rnn_layer import lstm_layer_backward

    if not is_torch(M):
        return lstm_layer_backward(*ts, reverse=p["reverse"])
    g, *ins, _ = ts
    with M.enable_grad():
        at = [t.detach().requires_grad_() for t in ins]
        grads = M.autograd.grad(_torch_lstm_layer(M, *at, p["reverse"]), at, g)
    return M.cat([v.reshape(-1) for v in grads[:-1]])


ADAPTERS.update({"lstm_layer": _lstm_layer, "lstm_layer_backward": _lstm_layer_backward})


# a whole GRU layer as one op (ops/nnops/gru_layer.py); PyTorch: its steps as a composite
def _torch_gru_layer(M, x, h0, w_ih, w_hh, b_ih, b_hh, reverse):
    steps, hidden = x.shape[0], w_hh.shape[1]
    xw = M.nn.functional.linear(x, w_ih, b_ih)
    h, hs = h0, [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        hw = M.nn.functional.linear(h, w_hh, b_hh)
        r = M.sigmoid(xw[t][:, :hidden] + hw[:, :hidden])
        z = M.sigmoid(xw[t][:, hidden:2 * hidden] + hw[:, hidden:2 * hidden])
        n = M.tanh(xw[t][:, 2 * hidden:] + r * hw[:, 2 * hidden:])
        h = hs[t] = (1.0 - z) * n + z * h
    return M.stack(hs)


def _gru_layer(M, ts, p):
    from jitgrad.ops.nnops.gru_layer import gru_layer

    if not is_torch(M):
        return gru_layer(*ts, reverse=p["reverse"])
    return _torch_gru_layer(M, *ts, p["reverse"])


def _gru_layer_backward(M, ts, p):
    """The layer's gradients for ``ts[0]``, flat (PyTorch: the composite's)."""
    from jitgrad.ops.nnops.gru_layer import gru_layer_backward

    if not is_torch(M):
        return gru_layer_backward(*ts, reverse=p["reverse"])
    g, *ins, _ = ts
    with M.enable_grad():
        at = [t.detach().requires_grad_() for t in ins]
        grads = M.autograd.grad(_torch_gru_layer(M, *at, p["reverse"]), at, g)
    return M.cat([v.reshape(-1) for v in grads])


ADAPTERS.update({"gru_layer": _gru_layer, "gru_layer_backward": _gru_layer_backward})


# a whole Elman RNN layer as one op (ops/nnops/elman_layer.py); PyTorch: its steps
def _torch_elman_layer(M, x, h0, w_ih, w_hh, b_ih, b_hh, act, reverse):
    steps = x.shape[0]
    xw = M.nn.functional.linear(x, w_ih, b_ih)
    h, hs = h0, [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        h = hs[t] = getattr(M, act)(xw[t] + M.nn.functional.linear(h, w_hh, b_hh))
    return M.stack(hs)


def _elman_layer(M, ts, p):
    from jitgrad.ops.nnops.elman_layer import elman_layer

    if not is_torch(M):
        return elman_layer(*ts, p["nonlinearity"], p["reverse"])
    return _torch_elman_layer(M, *ts, p["nonlinearity"], p["reverse"])


def _elman_layer_backward(M, ts, p):
    """The layer's gradients for ``ts[0]``, flat (PyTorch: the composite's)."""
    from jitgrad.ops.nnops.elman_layer import elman_layer_backward

    if not is_torch(M):
        return elman_layer_backward(*ts, p["nonlinearity"], p["reverse"])
    g, *ins, _ = ts
    with M.enable_grad():
        at = [t.detach().requires_grad_() for t in ins]
        grads = M.autograd.grad(_torch_elman_layer(M, *at, p["nonlinearity"], p["reverse"]),
                                at, g)
    return M.cat([v.reshape(-1) for v in grads[:-1]])


ADAPTERS.update({"elman_layer": _elman_layer, "elman_layer_backward": _elman_layer_backward})
