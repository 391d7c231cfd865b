"""Batching rules: how one registered op runs on a whole batch at once.

``vmap`` traces its function once on one batch element (:mod:`jitgrad.func._batch_trace`)
and replays the traced equations on the batched arrays. Each value of the replay is a
*physical* tensor: the logical (per-element) value when it does not depend on the mapped
inputs, else the logical value with the batch as a new leading dim 0. A rule turns one
equation on logical shapes into ops on physical tensors -- JAX's ``primitive_batchers``,
with the batch dim always in front.

Every rule runs jitgrad ops (:func:`run_op` for the registered op itself, or the public
functions), so autograd records the replay as it records eager code: gradients flow
through ``vmap``'s outputs to its inputs and captured tensors. An op without a rule of its
own runs once per batch element (:func:`loop_rule`: ``select``, the op, ``stack``) -- always
correct, as fast as the loop ``vmap`` used to be for that one op.

Rules are found by op name (:data:`RULES`), then by kind: every element-wise op batches by
broadcasting (:func:`elementwise_rule`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..devices import as_array
from ..ops.registry import ELEMENTWISE, OpDef
from ..tensor import Tensor, mark_view, wrap

__all__ = ["Batched", "RULES", "rule_for", "run_op", "loop_rule", "move_batch_to_front"]


class Batched:
    """A replay value: ``t`` the physical tensor, ``batched`` whether dim 0 is the batch,
    ``shape`` the logical (per-element) shape."""

    __slots__ = ("t", "batched", "shape")

    def __init__(self, t, batched: bool, shape: tuple) -> None:
        self.t = t
        self.batched = batched
        self.shape = tuple(shape)


def run_op(op: OpDef, operands: list, params: dict, cdt, out_dtype) -> Tensor:
    """``op(*operands, **params)`` on tensors (and Python values), as eager mode runs it --
    the op's eager kernel or forward -- with its autograd node recorded."""
    from ..ops.dispatch import record

    params = params or {}
    if op.kind == ELEMENTWISE:
        res = _elementwise(op, operands, params, cdt, out_dtype)
        return record(op, wrap(res), tuple(operands), params or None, res.dtype
                      if cdt is None else np.dtype(cdt))
    fwd = op.fwd or op.ref
    arrays = [x._data if type(x) is Tensor else x for x in operands]
    with np.errstate(all="ignore"):
        res = as_array(fwd(*arrays, **params))
    if out_dtype is not None and res.dtype != np.dtype(out_dtype):
        res = res.astype(out_dtype)
    out = wrap(res)
    if op.view and type(operands[0]) is Tensor and getattr(res, "base", None) is not None:
        mark_view(out, operands[0])
    return record(op, out, tuple(operands), params or None)


def _elementwise(op: OpDef, operands: list, params: dict, cdt, out_dtype):
    from ..ops import eager_kernels

    cdt = np.dtype(cdt if cdt is not None else out_dtype)
    no_promote = op.extra.get("no_promote", ())
    arrays = []
    for k, x in enumerate(operands):
        if type(x) is Tensor:
            a = x._data
            arrays.append(a if k in no_promote or a.dtype == cdt else a.astype(cdt))
        else:
            arrays.append(np.bool_(x) if k in no_promote else cdt.type(x))
    with np.errstate(all="ignore"):
        if op.fwd is not None:
            res = op.fwd(*arrays, **{k: params[k] for k in op.params})
        else:
            res = eager_kernels.run(op, tuple(arrays), params or None, cdt,
                                    np.dtype(out_dtype))
    res = as_array(res)
    return res if res.dtype == np.dtype(out_dtype) else res.astype(out_dtype)


# ----------------------------------------------------------------------------- helpers
def move_batch_to_front(t: Tensor, dim: int) -> Tensor:
    """``t`` with its mapped dim ``dim`` moved to the front (a view)."""
    return t if dim == 0 else t.movedim(dim, 0)


def _padded(v: Batched, rank: int) -> Tensor:
    """A batched value's tensor with size-1 dims after the batch dim, so its logical shape
    has ``rank`` dims: it then broadcasts against unbatched operands right-aligned."""
    extra = rank - len(v.shape)
    if extra <= 0:
        return v.t
    return v.t.reshape((v.t.shape[0],) + (1,) * extra + v.shape)


def _expanded(v: Batched, size: int) -> Tensor:
    """A value as a batched tensor: unbatched ones expanded along a new dim 0."""
    if v.batched:
        return v.t
    return v.t.unsqueeze(0).expand((size,) + v.shape)


def _count(shape) -> int:
    """The number of elements of ``shape`` (``-1`` cannot stand for it when a dim is 0)."""
    n = 1
    for s in shape:
        n *= s
    return n


def _shift(d: int, rank: int) -> int:
    """Logical dim ``d`` (possibly negative) as a physical dim."""
    return (d % rank if rank else 0) + 1


def _shift_dims(dims, rank: int):
    if dims is None:
        return tuple(range(1, rank + 1))
    if isinstance(dims, int):
        return _shift(dims, rank)
    return tuple(_shift(d, rank) for d in dims)


class NoRule(Exception):
    """The rule does not cover this case: the op runs per element."""


# ------------------------------------------------------------------------------ rules
Rule = Callable[..., Tensor]
RULES: dict[str, Rule] = {}


def rule(*names: str):
    """Register the decorated function as the batching rule of the ops ``names``."""
    def deco(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return deco


def rule_for(op: OpDef) -> Rule | None:
    """The batching rule of ``op``: its own, or the element-wise rule; None for the others
    (they run per element: :func:`loop_rule`)."""
    r = RULES.get(op.name)
    if r is not None:
        return r
    return elementwise_rule if op.kind == ELEMENTWISE else None


def loop_rule(op: OpDef, ins: list, params: dict, eq, size: int) -> Tensor:
    """The op once per batch element on the element's slices, the results stacked: correct
    for every op, one op call per element."""
    from ..ops.concat import stack

    outs = []
    for i in range(size):
        operands = [(v.t.select(0, i) if v.batched else v.t) if isinstance(v, Batched) else v
                    for v in ins]
        p = {k: (x.t.select(0, i) if x.batched else x.t) if isinstance(x, Batched) else x
             for k, x in params.items()}
        outs.append(run_op(op, operands, p, eq.cdt, eq.out.dtype))
    return stack(outs, 0)


def elementwise_rule(op: OpDef, ins: list, params: dict, eq, size: int) -> Tensor:
    """Broadcasting does it: batched operands get size-1 dims up to the output's rank."""
    if any(isinstance(x, Batched) for x in params.values()):
        raise NoRule
    rank = len(eq.out.shape)
    operands = [(_padded(v, rank) if v.batched else v.t) if isinstance(v, Batched) else v
                for v in ins]
    return run_op(op, operands, params, eq.cdt, eq.out.dtype)


def _only_first_batched(ins: list) -> Batched:
    v = ins[0]
    if any(isinstance(x, Batched) and x.batched for x in ins[1:]):
        raise NoRule
    return v


@rule("sum", "mean", "amax", "amin", "logsumexp", "std", "var", "vector_norm")
def _reduce_dims(op, ins, params, eq, size):
    v = _only_first_batched(ins)
    rank = len(v.shape)
    p = dict(params)
    p["dims"] = _shift_dims(params["dims"], rank)
    p["shape"] = (size,) + tuple(params["shape"])
    if "full" in p:
        p["full"] = False
    return run_op(op, [v.t, *[x.t if isinstance(x, Batched) else x for x in ins[1:]]], p,
                  eq.cdt, eq.out.dtype)


@rule("argmax", "argmin", "softmax", "log_softmax", "cumsum", "cumprod", "logcumsumexp",
      "prod", "max_dim", "min_dim", "softmax_backward", "log_softmax_backward", "flip",
      "sort_indices", "cum_arg")
def _along_dim(op, ins, params, eq, size):
    rank = len(ins[0].shape)
    p = dict(params)
    key = "dims" if "dims" in p else "dim"
    if p.get(key) is None and rank:  # a whole-tensor reduction (argmax, flattened)
        raise NoRule
    if rank == 0:  # a 0-d element: the op along a size-1 dim of a (batch, 1) array
        if "indices" in p or "shape" in p:
            raise NoRule
        p[key] = (1,) if key == "dims" else 1
        operands = [_expanded(v, size).reshape((size, 1)) for v in ins]
        return run_op(op, operands, p, eq.cdt, eq.out.dtype).reshape((size,))
    p[key] = _shift_dims(p[key], rank)
    if "shape" in p:
        p["shape"] = (size,) + tuple(p["shape"])
    if "indices" in p:
        idx = p["indices"]
        p["indices"] = _expanded(idx, size) if isinstance(idx, Batched) else \
            _expanded(Batched(idx, False, tuple(idx.shape)), size)
    operands = [_expanded(v, size) for v in ins]
    return run_op(op, operands, p, eq.cdt, eq.out.dtype)


@rule("roll")
def _roll(op, ins, params, eq, size):
    dims = params["dims"]
    if not dims or not ins[0].shape:  # (a roll of the flattened tensor)
        raise NoRule
    p = dict(params, dims=_shift_dims(tuple(dims), len(ins[0].shape)))
    return run_op(op, [ins[0].t], p, eq.cdt, eq.out.dtype)


@rule("diagonal", "diagonal_backward", "unfold", "unfold_backward")
def _dims_and_shape(op, ins, params, eq, size):
    """Ops naming dims of a logical shape they also carry (``input_shape``)."""
    shape = tuple(params["input_shape"])
    if not shape:
        raise NoRule
    p = dict(params, input_shape=(size,) + shape)
    for key in ("dim", "dim1", "dim2"):
        if key in p:
            p[key] = _shift(params[key], len(shape))
    return run_op(op, [ins[0].t], p, eq.cdt, eq.out.dtype)


@rule("reshape")
def _reshape(op, ins, params, eq, size):
    (v,) = ins
    p = dict(params)
    p["shape"] = (size,) + tuple(params["shape"])
    p["in_shape"] = (size,) + tuple(params["in_shape"])
    p["strict"] = False  # the batched array may need a copy where one element's did not
    return run_op(op, [v.t], p, eq.cdt, eq.out.dtype)


@rule("expand")
def _expand(op, ins, params, eq, size):
    (v,) = ins
    shape = tuple(params["shape"])
    t = _padded(v, len(shape))
    p = {"shape": (size,) + shape, "in_shape": tuple(t.shape)}
    return run_op(op, [t], p, eq.cdt, eq.out.dtype)


@rule("permute")
def _permute(op, ins, params, eq, size):
    p = dict(params)
    p["dims"] = (0,) + tuple(d + 1 for d in params["dims"])
    return run_op(op, [ins[0].t], p, eq.cdt, eq.out.dtype)


@rule("clone", "to_dtype", "to_device", "pin_memory", "tril", "triu", "constant_pad_nd")
def _same_params(op, ins, params, eq, size):
    """Ops acting on each element's last dims, or on every element alike."""
    return run_op(op, [ins[0].t], params, eq.cdt, eq.out.dtype)


#: matrix functions over the last two dims, leading dims a batch (NumPy's linalg stacks)
_MATRIX_OPS = ("inv", "det", "logabsdet", "sign_of_det", "matrix_exp", "cholesky",
               "cholesky_ex_factors", "cholesky_ex_l", "cholesky_ex_info", "inv_ex_factors",
               "inv_ex_inverse", "inv_ex_info", "eigh_factors", "eigh_values",
               "eigh_vectors", "svd_factors", "svd_u", "svd_s", "svd_vh", "qr_factors",
               "qr_q", "qr_r")


@rule("solve", "solve_triangular")
def _solve(op, ins, params, eq, size):
    """Systems whose right-hand sides are matrices of the same stack rank: one more stack
    dim for both (a vector right-hand side runs per element: NumPy reads a stacked vector
    as a matrix)."""
    a, b = ins
    if len(a.shape) < 2 or len(b.shape) != len(a.shape):
        raise NoRule
    return run_op(op, [_expanded(a, size), _expanded(b, size)], params, eq.cdt, eq.out.dtype)


@rule("pinv")
def _pinv(op, ins, params, eq, size):
    a, atol, rtol = ins
    if len(a.shape) < 2 or any(isinstance(v, Batched) and v.batched for v in (atol, rtol)):
        raise NoRule
    return run_op(op, [_expanded(a, size), _plain(atol), _plain(rtol)], params, eq.cdt,
                  eq.out.dtype)


@rule(*_MATRIX_OPS)
def _matrix_op(op, ins, params, eq, size):
    """Each element's matrices are one more batch of the stack (every input batched). (An
    output a mode leaves empty -- Q of ``mode='r'``, U of ``compute_uv=False`` -- has no
    batch dim: those run per element.)"""
    if len(ins[0].shape) < 2 or params.get("mode") == "r" or \
            params.get("compute_uv") is False or params.get("compute_v") is False:
        raise NoRule
    return run_op(op, [_expanded(v, size) if isinstance(v, Batched) else v for v in ins],
                  params, eq.cdt, eq.out.dtype)


def _basic_index(index) -> tuple:
    """``index`` as a tuple with a leading full slice for the batch dim; NoRule where NumPy
    would move advanced-index dims to the front (advanced indices not adjacent)."""
    from ..ops.indexing import _TwoStep

    if type(index) is _TwoStep:  # basic indices, then the advanced ones on the result
        return _TwoStep(((slice(None),) + tuple(index[0]), _basic_index(index[1])))
    items = index if type(index) is tuple else (index,)
    adv = [k for k, it in enumerate(items)
           if isinstance(it, (np.ndarray, int, np.integer)) and not isinstance(it, bool)]
    arrays = any(isinstance(it, np.ndarray) for it in items)
    if arrays and adv and adv[-1] - adv[0] + 1 != len(adv):
        raise NoRule
    return (slice(None),) + tuple(items)


@rule("getitem", "getitem_backward")
def _getitem(op, ins, params, eq, size):
    (v,) = ins
    p = dict(params)
    p["index"] = _basic_index(params["index"])
    p["shape"] = (size,) + tuple(params["shape"])
    return run_op(op, [v.t], p, eq.cdt, eq.out.dtype)


@rule("cat", "stack")
def _cat(op, ins, params, eq, size):
    p = dict(params)
    p["dim"] = _shift(params["dim"], len(eq.out.shape))
    sizes = params.get("sizes") or (0,) * len(ins)
    # (cat skips a legacy empty 1-D operand, size None: it stays one element's empty value)
    operands = [_expanded(v, size) if s is not None else (v.t.select(0, 0) if v.batched
                                                          else v.t)
                for v, s in zip(ins, sizes)]
    return run_op(op, operands, p, eq.cdt, eq.out.dtype)


@rule("matmul")
def _matmul(op, ins, params, eq, size):
    from ..ops.linalg import matmul

    a, b = ins
    la, lb = len(a.shape), len(b.shape)
    ta = a.t.unsqueeze(-2) if la == 1 else a.t
    tb = b.t.unsqueeze(-1) if lb == 1 else b.t
    if a.batched and not b.batched and lb <= 2:
        # one matrix for the whole batch: one GEMM over the batch's rows
        rows = ta.reshape((_count(ta.shape[:-1]), ta.shape[-1]))
        out = matmul(rows, tb).reshape(tuple(ta.shape[:-1]) + (tb.shape[-1],))
    else:
        rank = max(la, lb, 2)
        if a.batched:
            ta = _padded(Batched(ta, True, tuple(ta.shape[1:])), rank)
        if b.batched:
            tb = _padded(Batched(tb, True, tuple(tb.shape[1:])), rank)
        out = matmul(ta, tb)
    if la == 1:
        out = out.squeeze(-2) if lb != 1 else out.squeeze(-1)
    if lb == 1:
        out = out.squeeze(-1)
    return out


@rule("addmm")
def _addmm(op, ins, params, eq, size):
    bias, a, b = ins
    if a.batched and not b.batched and not bias.batched and len(bias.shape) <= 1:
        rows = a.t.reshape((size * _count(a.shape[:-1]), a.shape[-1]))  # one GEMM
        out = run_op(op, [bias.t, rows, b.t], params, eq.cdt, eq.out.dtype)
        return out.reshape((size,) + tuple(eq.out.shape))
    prod = _matmul(None, [a, b], {}, eq, size)
    return prod + _padded(bias, len(eq.out.shape)) if bias.batched else prod + bias.t


@rule("nll_loss")
def _nll_loss(op, ins, params, eq, size):
    x, t, w = ins
    if len(x.shape) > 2 or (isinstance(w, Batched) and w.batched) or not x.batched:
        raise NoRule
    wt = w.t if isinstance(w, Batched) else None
    n = 1 if len(x.shape) == 1 else x.shape[0]
    xs = x.t.reshape((size * n, x.shape[-1]))
    ts = _expanded(t, size).reshape((size * n,))
    p = dict(params, reduction="none")
    per = run_op(op, [xs, ts, wt], p, eq.cdt, eq.out.dtype).reshape((size, n))
    red = params["reduction"]
    if red == "none":
        return per.reshape((size,) + tuple(eq.out.shape))
    total = per.sum(1)
    if red == "sum":
        return total
    return total / _nll_weights(op, ts, wt, params, xs, size, n)


def _nll_weights(op, ts, wt, params, like: Tensor, size: int, n: int):
    """Each element's summed target weights (the mean's divisor; 0 for ignored targets):
    ``nll_loss`` of a constant -1 input with no reduction."""
    from ..creation import full

    minus_one = full((size * n, like.shape[-1]), -1.0, dtype=like.dtype, device=like.device)
    p = {"reduction": "none", "ignore_index": params["ignore_index"], "spatial": False}
    return run_op(op, [minus_one, ts, wt], p, None, like._data.dtype).reshape((size, n)).sum(1)


@rule("nll_loss_backward")
def _nll_loss_backward(op, ins, params, eq, size):
    from ..ops.registry import REGISTRY

    g, t, w = ins
    shape = tuple(params["shape"])
    if len(shape) > 2 or (isinstance(w, Batched) and w.batched):
        raise NoRule
    wt = w.t if isinstance(w, Batched) else None
    n = 1 if len(shape) == 1 else shape[0]
    ts = _expanded(t, size).reshape((size * n,))
    red = params["reduction"]
    gb = _expanded(g, size)
    if red == "none":
        ge = gb.reshape((size * n,))
    else:
        ge = gb.reshape((size, 1)).expand((size, n))
        if red == "mean":
            like = gb.new_empty((1, shape[-1]))
            den = _nll_weights(REGISTRY["nll_loss"], ts, wt, params, like, size, n)
            ge = ge / den.reshape((size, 1))
        ge = ge.reshape((size * n,))
    p = dict(params, reduction="none", shape=(size * n, shape[-1]))
    out = run_op(op, [ge, ts, wt], p, eq.cdt, eq.out.dtype)
    return out.reshape((size,) + shape)


def _fold(v: Batched) -> Tensor:
    """A batched (N, ...) value with the batch folded into N."""
    return v.t.reshape((-1,) + v.shape[1:])


def _folded_shape(shape, size: int) -> tuple:
    return (size * shape[0],) + tuple(shape[1:])


def _to_channels(v: Batched, size: int) -> Tensor:
    """A (B, N, C, ...) value as (N, B*C, ...): each element's channels a group of their own."""
    t = _expanded(v, size)
    n, c = v.shape[0], v.shape[1]
    return t.movedim(0, 1).reshape((n, size * c) + tuple(v.shape[2:]))


def _from_channels(t: Tensor, size: int) -> Tensor:
    """(N, B*C, ...) back to (B, N, C, ...)."""
    n, bc = t.shape[0], t.shape[1]
    return t.reshape((n, size, bc // size) + tuple(t.shape[2:])).movedim(1, 0)


def _stacked_weight(v: Batched, size: int) -> Tensor:
    """A per-element weight (B, O, I/g, kh, kw) as (B*O, I/g, kh, kw)."""
    return _expanded(v, size).reshape((size * v.shape[0],) + tuple(v.shape[1:]))


@rule("conv2d", "conv2d_backward_input", "conv2d_backward_weight")
def _conv(op, ins, params, eq, size):
    """Convolutions whose weight (or, for the weight's gradient, whose result) differs per
    element -- per-sample gradients, ensembles: the batch becomes ``size`` times the groups,
    each element's channels a group (functorch's and Opacus's rule). With one weight for the
    whole batch, the batch folds into N instead."""
    first = ins[0]
    if len(first.shape) != 4:
        raise NoRule
    if op.name != "conv2d_backward_weight" and not any(
            isinstance(v, Batched) and v.batched for v in ins[1:]):
        return _fold_batch(op, ins, params, eq, size)
    p = dict(params, groups=params["groups"] * size)
    if op.name == "conv2d":
        x, w, b = ins
        bias = None if not isinstance(b, Batched) else (
            _expanded(b, size).reshape((size * b.shape[0],)))
        out = run_op(op, [_to_channels(x, size), _stacked_weight(w, size), bias], p,
                     eq.cdt, eq.out.dtype)
        return _from_channels(out, size)
    if op.name == "conv2d_backward_input":
        g, w = ins
        out = run_op(op, [_to_channels(g, size), _stacked_weight(w, size)], p, eq.cdt,
                     eq.out.dtype)
        return _from_channels(out, size)
    g, x = ins  # the weight's gradient: (B*O, I/g, kh, kw), each element's block in order
    out = run_op(op, [_to_channels(g, size), _to_channels(x, size)], p, eq.cdt,
                 eq.out.dtype)
    return out.reshape((size,) + tuple(eq.out.shape))


@rule("conv2d_backward_bias")
def _conv_bias_grad(op, ins, params, eq, size):
    """The bias gradient, the output gradient summed over samples and pixels: per element,
    over all but the batch and channel dims."""
    (g,) = ins
    if len(g.shape) != 4:
        raise NoRule
    return g.t.sum((1, 3, 4))


@rule("max_pool2d", "max_pool2d_indices",
      "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward", "adaptive_avg_pool2d",
      "adaptive_avg_pool2d_backward")
def _fold_batch(op, ins, params, eq, size):
    """Ops over a leading sample dim N: the batch folds into N (a conv's weight is the same
    for every element here: :func:`_conv`). An element that is one unbatched image (C, H,
    W) makes the batch the sample dim itself."""
    rank = len(ins[0].shape)
    if rank not in (3, 4):
        raise NoRule

    def batch(v: Batched) -> Tensor:
        t = _expanded(v, size)
        return _fold(Batched(t, True, v.shape)) if rank == 4 else t

    operands = []
    for k, v in enumerate(ins):
        if not isinstance(v, Batched):
            operands.append(v)
        elif op.name in ("conv2d", "conv2d_backward_input") and k > 0:
            operands.append(v.t)
        else:
            operands.append(batch(v))
    p = dict(params)
    if "input_shape" in p:  # (a conv's input_size is the spatial size alone)
        shape = tuple(p["input_shape"])
        p["input_shape"] = _folded_shape(shape, size) if rank == 4 else (size,) + shape
    if "indices" in p:
        idx = p["indices"]
        p["indices"] = batch(idx if isinstance(idx, Batched) else
                             Batched(idx, False, tuple(idx.shape)))
    out = run_op(op, operands, p, eq.cdt, eq.out.dtype)
    return out.reshape((size,) + tuple(eq.out.shape))


@rule("layer_norm", "layer_norm_backward")
def _layer_norm(op, ins, params, eq, size):
    """Normalised over the last dims: the batch dim is one more leading dim. A weight or bias
    that differs per element (an ensemble's) is applied after an unscaled normalisation
    (forward: ``x_hat * w + b``; backward: the normalisation's backward of ``g * w``)."""
    rank = len(eq.out.shape)
    if op.name == "layer_norm":
        x, w, b = ins
        own = [v for v in (w, b) if isinstance(v, Batched) and v.batched]
        if not own:
            return run_op(op, [x.t, _plain(w), _plain(b)], params, eq.cdt, eq.out.dtype)
        y = run_op(op, [_expanded(x, size), None, None], params, eq.cdt, eq.out.dtype)
        if isinstance(w, Batched):
            y = y * (_padded(w, rank) if w.batched else w.t)
        if isinstance(b, Batched):
            y = y + (_padded(b, rank) if b.batched else b.t)
        return y
    g, x, w = ins
    g = _expanded(g, size)
    if isinstance(w, Batched) and w.batched:
        g, w = g * _padded(w, rank), None
    return run_op(op, [g, _expanded(x, size), _plain(w)], params, eq.cdt, eq.out.dtype)


def _plain(v):
    """An operand that is the same for every element (or None), as the op takes it."""
    return v.t if isinstance(v, Batched) else v


@rule("embedding")
def _embedding(op, ins, params, eq, size):
    weight, idx = ins
    if weight.batched:
        raise NoRule
    return run_op(op, [weight.t, idx.t], params, eq.cdt, eq.out.dtype)


# ------------------------------------------------------------------ pointwise losses
_POINTWISE_LOSSES = ("mse_loss", "huber_loss", "smooth_l1_loss", "binary_cross_entropy",
                     "binary_cross_entropy_with_logits")


def _full(v, size: int, shape: tuple):
    """An operand (or None) as a batched tensor of the loss's full shape (a view)."""
    if not isinstance(v, Batched):
        return v
    t = _padded(Batched(_expanded(v, size), True, v.shape), len(shape))
    return t.expand((size,) + shape)


def _loss_shape(ins: list, params: dict, first: int) -> tuple:
    return tuple(params["shape"]) if "shape" in params else ins[first].shape


@rule(*_POINTWISE_LOSSES)
def _pointwise_loss(op, ins, params, eq, size):
    """Element-wise losses: each element's unreduced loss at once, then each element's
    mean or sum over its own values."""
    shape = _loss_shape(ins, params, 0)
    p = dict(params, reduction="none")
    if "shape" in p:
        p["shape"] = (size,) + shape
    per = run_op(op, [_full(v, size, shape) for v in ins], p, eq.cdt, eq.out.dtype)
    red = params["reduction"]
    if red == "none" or not shape:
        return per
    dims = tuple(range(1, len(shape) + 1))
    return per.sum(dims) if red == "sum" else per.mean(dims)


@rule(*(n + "_backward" for n in _POINTWISE_LOSSES))
def _pointwise_loss_backward(op, ins, params, eq, size):
    """Their input gradients: the unreduced form, given each element's output gradient
    spread over its values (divided by their number for a mean)."""
    shape = _loss_shape(ins, params, 1)
    g = ins[0]
    red = params["reduction"]
    if red == "none":
        gb = _full(g, size, shape)
    else:
        gb = _expanded(g, size).reshape((size,) + (1,) * len(shape))
        n = int(np.prod(shape)) if shape else 1
        if red == "mean" and n > 1:
            gb = gb / float(n)
        gb = gb.expand((size,) + shape)
    p = dict(params, reduction="none")
    if "shape" in p:
        p["shape"] = (size,) + shape
    operands = [gb] + [_full(v, size, shape) for v in ins[1:]]
    return run_op(op, operands, p, eq.cdt, eq.out.dtype)


# ------------------------------------------------------------------ gather, embeddings
@rule("gather", "gather_backward")
def _gather(op, ins, params, eq, size):
    a, index = ins
    if not a.shape or not index.shape:
        raise NoRule
    p = dict(params)
    p["dim"] = _shift(params["dim"], len(a.shape))
    p["shape"] = (size,) + tuple(params["shape"])
    return run_op(op, [_expanded(a, size), _expanded(index, size)], p, eq.cdt, eq.out.dtype)


@rule("embedding_backward")
def _embedding_backward(op, ins, params, eq, size):
    """Each element's rows of the weight's gradient: its indices offset by its position
    times the table's size, one scatter-add into a table ``size`` times as long."""
    from ..creation import arange

    g, idx = ins
    num = params["num_weights"]
    pad = params["padding_idx"]
    gb = _expanded(g, size)
    ib = _expanded(idx, size)
    if pad is not None and pad >= 0:  # each element's padding row gets nothing
        gb = gb * (ib != pad).unsqueeze(-1).to(gb.dtype)
    offsets = arange(size, device=ib.device).reshape((size,) + (1,) * len(idx.shape)) * num
    flat_i = (ib + offsets).reshape((-1,))
    flat_g = gb.reshape((flat_i.shape[0],) + tuple(g.shape[len(idx.shape):]))
    p = dict(params, num_weights=size * num, padding_idx=None)
    out = run_op(op, [flat_g, flat_i], p, eq.cdt, eq.out.dtype)
    return out.reshape((size,) + tuple(eq.out.shape))


# ------------------------------------------------------------------ batch norm
def _per_channel(v, size: int):
    """A per-channel operand (weight, bias, running stats; or None) for the channels
    layout of :func:`_to_channels`: each element's C values in turn."""
    if not isinstance(v, Batched):
        return v
    if v.batched:
        return v.t.reshape((size * v.shape[0],))
    return v.t.repeat(size)


@rule("batch_norm", "batch_norm_backward")
def _batch_norm(op, ins, params, eq, size):
    """Each element's channels are channels of their own (N, B*C, ...): statistics over its
    own samples and pixels in training, its own running statistics or affine weights when
    they differ per element (an ensemble's)."""
    lead = 2 if op.name == "batch_norm_backward" else 1
    if len(ins[0].shape) < 2 or len(ins[lead - 1].shape) < 2:
        raise NoRule
    xs = [_to_channels(v, size) for v in ins[:lead]]
    per = [_per_channel(v, size) for v in ins[lead:]]
    out = run_op(op, xs + per, params, eq.cdt, eq.out.dtype)
    return _from_channels(out, size)
