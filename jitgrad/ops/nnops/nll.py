"""Negative log-likelihood (``NllLossBackward0``, ``NllLoss2DBackward0`` for spatial inputs)
and cross-entropy, built as PyTorch builds it: ``log_softmax`` then ``nll_loss`` (plus the
label-smoothing term), so the graph and its node names match and every step is stable for
large logits.

Inputs are ``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)`` with integer targets ``()``, ``(N,)``
or ``(N, d1, ...)``; ``weight`` rescales classes and ``ignore_index`` targets contribute
nothing (``mean`` divides by the summed weight of the other targets).
"""

from __future__ import annotations

import numpy as np

from ...amp.autocast_mode import autocast_op
from ...creation import full
from ...devices import array_namespace, is_cpu_array
from ...shapes import fmt_shape
from ...tensor import Tensor, wrap
from .. import samples as S
from ..api import api
from ..dispatch import as_tensor_arg, record
from ..eager_kernels import PARALLEL_MIN_SIZE, use_kernels
from ..losses import _call_optional
from ..reduce import LOG_SOFTMAX, log_softmax
from ..registry import REDUCE, defop
from ..rowwise import _softmax_kernels
from ..softmax_ops import LOG_SOFTMAX_BACKWARD, _log_softmax_bwd_eager, _log_softmax_eager
from .reduction import reduction_arg

__all__ = ["nll_loss", "cross_entropy", "nll_loss_backward"]


def _targets(t, ignore_index, w, dtype):
    """(class index with ignored targets at 0, weight of each target as float64)."""
    xp = array_namespace(t)
    valid = t != ignore_index
    tc = xp.where(valid, t, 0)
    wt = xp.where(valid, w[tc] if w is not None else 1.0, 0.0).astype(np.float64)
    return tc, wt


def _plain(x_ndim: int, t, w, ignore_index) -> bool:
    """The common case, computed without the general path's masks: a batch of class
    indices, no class weights, no target ignored (the same bits: the masks' weights would
    all be 1.0)."""
    return x_ndim == 2 and w is None and t.size > 0 and not (t == ignore_index).any()


def _losses_kernels():
    from ...kernels import losses

    return losses




def _cuda_nll(a, shape, dtype, t, w, reduction):
    """``jitgrad.cuda.nll`` where its kernels take this case (``a``, the input or the
    targets, a device array; ``shape``/``dtype`` the input's), else None."""
    if type(a) is np.ndarray or is_cpu_array(a):
        return None
    from ...cuda import nll as cuda_nll

    return cuda_nll if cuda_nll.applies(shape, dtype, t, w, reduction) else None


def _nll_fwd(x, t, w, reduction, ignore_index, spatial=False):
    """:func:`_nll_ref`'s plain case (a batch of valid class indices, no class weights) on
    a kernel: the same float64 values summed by the same NumPy sum (the same bits), one
    pass instead of a mask, an index array and a gather. On CUDA: ``cuda/nll.py``."""
    if (k := _cuda_nll(x, x.shape, x.dtype, t, w, reduction)) is not None:
        return k.nll_forward(x, t, reduction, ignore_index)
    if (type(x) is np.ndarray and x.ndim == 2 and x.dtype in (_F32, _F64) and w is None
            and reduction != "none" and t.size > 0 and type(t) is np.ndarray
            and t.dtype == np.int64):
        picked = np.empty(t.shape[0], np.float64)
        if _losses_kernels().nll_picked(x, t, ignore_index, picked):
            return np.asarray(picked.sum() / (t.shape[0] if reduction == "mean" else 1.0),
                              dtype=x.dtype)
    return _nll_ref(x, t, w, reduction, ignore_index, spatial)


def _nll_grad_fwd(g, t, w, reduction, ignore_index, shape):
    """:func:`_nll_grad_ref`'s plain case on a kernel (the same values)."""
    if (k := _cuda_nll(t, shape, g.dtype, t, w, reduction)) is not None:
        return k.nll_backward(g, t, reduction, ignore_index, tuple(shape), g.dtype)
    if (type(g) is np.ndarray and len(shape) == 2 and g.dtype in (_F32, _F64) and w is None
            and reduction != "none" and t.size > 0 and type(t) is np.ndarray
            and t.dtype == np.int64):
        out = np.zeros(shape, dtype=g.dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = -float(g) / (t.shape[0] if reduction == "mean" else 1.0)
        if _losses_kernels().nll_grad_plain(t, out.dtype.type(scale), ignore_index, out):
            return out
    return _nll_grad_ref(g, t, w, reduction, ignore_index, shape)


def _cross_entropy_chain(x, t, g, reduction: str, ignore_index: int) -> tuple:
    """``log_softmax(x, 1)`` -> ``nll_loss`` -> ``nll_loss_backward(g)`` ->
    ``log_softmax_backward``, as a plan runs the four (their eager functions), returning
    ``(loss, gradient of x)``: for a plain batch (class indices, no weights) in one kernel
    pass over the rows (``kernels/softmax.cross_entropy``: the same row code, so the same
    bits), else the four functions one after the other. A plan runs it where a compiled
    step's graph holds that chain (``compiler/chains.py``). On CUDA: ``cuda/nll.py``."""
    if (k := _cuda_nll(x, x.shape, x.dtype, t, None, reduction)) is not None:
        return k.cross_entropy_chain(x, t, g, reduction, ignore_index)
    n = x.shape[0] if x.ndim == 2 else 0
    if (type(x) is np.ndarray and x.ndim == 2 and x.dtype in (_F32, _F64)
            and 0 < x.size < PARALLEL_MIN_SIZE and use_kernels() and reduction != "none"
            and type(t) is np.ndarray and t.dtype == np.int64 and t.shape == (n,)
            and type(g) is np.ndarray and g.dtype == x.dtype and g.ndim == 0):
        xc = x if x.flags.c_contiguous else np.ascontiguousarray(x)
        # (Python floats: no NumPy error state to silence; n > 0)
        scale = xc.dtype.type(-float(g) / (n if reduction == "mean" else 1.0))
        k = _softmax_kernels()
        y, gy, gx = np.empty_like(xc), np.zeros_like(xc), np.empty_like(xc)
        picked = np.empty(n, np.float64)
        # narrow rows (a classifier's logits) take log_softmax's blocked code
        kernel = k.cross_entropy_small if x.shape[1] <= k.SMALL_C else k.cross_entropy
        if kernel(xc, t, ignore_index, scale, y, gy, gx, picked):
            return np.asarray(picked.sum() / (n if reduction == "mean" else 1.0),
                              dtype=x.dtype), gx
    y = _log_softmax_eager(x, 1)
    loss = _nll_fwd(y, t, None, reduction, ignore_index)
    gy = _nll_grad_fwd(g, t, None, reduction, ignore_index, x.shape)
    return loss, _log_softmax_bwd_eager(gy, y, 1)


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _plain_cross_entropy(input: Tensor, target: Tensor, reduction: str,
                         ignore_index: int) -> Tensor | None:
    """Eager ``cross_entropy`` of a batch of valid class indices without class weights or
    smoothing (a training step's loss): ``log_softmax`` and the NLL's picks in one kernel
    call (``kernels/softmax.log_softmax_nll``: log_softmax's own row code, so the bits of
    the two ops), then the two ops' nodes recorded as :func:`log_softmax` and
    :func:`_nll` record them (``NllLossBackward0`` over ``LogSoftmaxBackward0``, as
    PyTorch's graph). None where that does not apply (the general path then runs, and
    reports a bad target): other shapes, dtypes or devices, ``reduction="none"``, an
    ignored or out-of-range target, arrays big enough for the row kernels' threads."""
    x, t = input._data, target._data
    n = x.shape[0] if x.ndim == 2 else 0
    if not (type(x) is np.ndarray and x.ndim == 2 and (x.dtype == _F32 or x.dtype == _F64)
            and x.flags.c_contiguous and 0 < x.size < PARALLEL_MIN_SIZE
            and reduction != "none" and type(t) is np.ndarray and t.dtype == np.int64
            and t.shape == (n,) and use_kernels()):
        return None
    y = np.empty_like(x)
    picked = np.empty(n, np.float64)
    if not _softmax_kernels().log_softmax_nll(x, t, ignore_index, y, picked):
        return None
    logp = record(LOG_SOFTMAX, wrap(y), (input,), {"dim": 1})
    # _nll_fwd's value: the same float64 picks summed by the same NumPy sum
    loss = np.asarray(picked.sum() / (n if reduction == "mean" else 1.0), dtype=x.dtype)
    return record(NLL_LOSS, wrap(loss), (logp, target, None),
                  {"reduction": reduction, "ignore_index": ignore_index, "spatial": False})


def _check_target_values(t, classes: int, ignore_index: int) -> None:
    """PyTorch's error for a target outside ``[0, classes)`` that is not ``ignore_index``.
    The functions check at the call; a plan's calls check their values here (a compiled
    step given a bad target raises what eager mode does)."""
    bad = (t != ignore_index) & ((t < 0) | (t >= classes))
    if bad.any():
        raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds.")


def _nll_ref(x, t, w, reduction, ignore_index, spatial=False):
    xp = array_namespace(x)
    _check_target_values(t, x.shape[1] if x.ndim >= 2 else x.shape[0], ignore_index)
    if _plain(x.ndim, t, w, ignore_index):
        loss = -x[xp.arange(t.shape[0]), t].astype(np.float64)
        if reduction == "none":
            return xp.asarray(loss, dtype=x.dtype)
        return xp.asarray(loss.sum() / (t.shape[0] if reduction == "mean" else 1.0),
                          dtype=x.dtype)
    one = x.ndim == 1
    if one:
        x, t = x[None], t[None]
    tc, wt = _targets(t, ignore_index, w, x.dtype)
    picked = xp.take_along_axis(x, xp.expand_dims(tc, 1), axis=1)[:, 0]
    loss = -picked.astype(np.float64) * wt
    if reduction == "none":
        return xp.asarray(loss[0] if one else loss, dtype=x.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = loss.sum() / (wt.sum() if reduction == "mean" else 1.0)
    return xp.asarray(r, dtype=x.dtype)


def _nll_grad_ref(g, t, w, reduction, ignore_index, shape):
    xp = array_namespace(g)
    if reduction != "none" and _plain(len(shape), t, w, ignore_index):
        out = xp.zeros(shape, dtype=g.dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = -float(g) / (t.shape[0] if reduction == "mean" else 1.0)
        out[xp.arange(t.shape[0]), t] = scale
        return out
    one = len(shape) == 1
    t2 = t[None] if one else t
    tc, wt = _targets(t2, ignore_index, w, g.dtype)
    if reduction == "none":
        scale = -(g[None] if one else g) * wt
    else:
        total = wt.sum() if reduction == "mean" else 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = -float(g) * wt / total
    out = xp.zeros((1,) + tuple(shape) if one else shape, dtype=g.dtype)
    xp.put_along_axis(out, xp.expand_dims(tc, 1), xp.expand_dims(scale, 1).astype(g.dtype),
                      axis=1)
    return out[0] if one else out


def _weight_grad(x: Tensor, t: Tensor, w, g: Tensor, loss: Tensor, red: str, ign: int):
    """d/dweight of ``g * nll_loss(x, t, weight, red)`` (``loss`` its value): each target's
    ``g * -x[i, t_i]`` (minus the mean's share) summed into its class."""
    picked = _nll(x, t, None, "none", ign)  # -x[i, t_i], 0 where ignored
    if red == "mean":
        minus_one = full(x._data.shape, -1.0, dtype=x.dtype, device=x.device)  # traced
        total = _nll(minus_one, t, w, "sum", ign)  # the summed weights of the targets
        h = g * (picked - loss) / total
    else:
        h = g * picked
    shape = x._data.shape
    gw = -nll_loss_backward(h, t, None, "none", ign, shape)
    return gw.sum((0,) + tuple(range(2, len(shape)))) if len(shape) > 1 else gw


def _nll_grad_vjp(gg, ins, out, p, n):
    # nll_loss_backward is linear in grad, and its adjoint is nll_loss itself:
    # <gg, nll_loss_backward(g, t, w)> = g * nll_loss(gg, t, w) (elementwise for "none")
    g, t, w = ins
    red, ign = p["reduction"], p["ignore_index"]
    loss = _nll(gg, t, w, red, ign) if (n[0] or n[2]) else None
    gw = _weight_grad(gg, t, w, g, loss, red, ign) if n[2] else None
    return (loss if n[0] else None, None, gw)


NLL_LOSS_BACKWARD = defop(
    name="nll_loss_backward", kind=REDUCE,
    node=lambda p: "NllLoss2DBackwardBackward0" if len(p["shape"]) > 2
    else "NllLossBackwardBackward0",
    inputs=("grad", "target", "weight"), params=("reduction", "ignore_index", "shape"),
    ref=_nll_grad_ref, fwd=_nll_grad_fwd, vjp=_nll_grad_vjp, save=(0, 1, 2), cast_grads=True,
    samples=S.nll_loss_backward)


@api(NLL_LOSS_BACKWARD)
def nll_loss_backward(grad: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
                      ignore_index: int, shape) -> Tensor:
    """Gradient of :func:`nll_loss` w.r.t. its input (of ``shape``)."""
    return _call_optional(NLL_LOSS_BACKWARD, [grad, target, weight],
                          {"reduction": reduction, "ignore_index": ignore_index,
                           "shape": tuple(shape)})


def _nll_vjp(g, ins, out, p, n):
    x, t, w = ins
    red, ign = p["reduction"], p["ignore_index"]
    gx = nll_loss_backward(g, t, w, red, ign, x._data.shape) if n[0] else None
    gw = _weight_grad(x, t, w, g, out, red, ign) if n[2] else None
    return gx, None, gw


NLL_LOSS = defop(
    name="nll_loss", kind=REDUCE,
    node=lambda p: "NllLoss2DBackward0" if p["spatial"] else "NllLossBackward0",
    inputs=("input", "target", "weight"), params=("reduction", "ignore_index", "spatial"),
    ref=_nll_ref, fwd=_nll_fwd, vjp=_nll_vjp, save=(0, 1, 2), save_out=True, cast_grads=True,
    # a plan runs log_softmax -> this -> its backward -> log_softmax's backward as one call
    extra={"chain": {"input": LOG_SOFTMAX, "grad": NLL_LOSS_BACKWARD,
                     "input_grad": LOG_SOFTMAX_BACKWARD, "run": _cross_entropy_chain,
                     "params": ("reduction", "ignore_index")}},
    samples=S.nll_loss)


def _nll(x: Tensor, t: Tensor, w, reduction: str, ignore_index: int) -> Tensor:
    shape = x._data.shape
    if x.ndim == 1 and t.ndim == 1:
        t = t.reshape(())
    if x.ndim == 3 or x.ndim > 4:  # PyTorch runs these as (N, C, 1, L) 2-D losses
        out = _nll(x.reshape(shape[0], shape[1], 1, -1), t.reshape(shape[0], 1, -1), w,
                   reduction, ignore_index)
        return out.view(shape[:1] + shape[2:]) if reduction == "none" else out
    return _call_optional(NLL_LOSS, [x, t, w], {"reduction": reduction,
                                               "ignore_index": ignore_index,
                                               "spatial": x._data.ndim > 2})


def _check_nll(x: Tensor, t: Tensor, w, ignore_index: int) -> None:
    xs, ts = x._data.shape, t._data.shape
    if x.ndim == 0:
        raise ValueError("nll_loss: expected an input with a class dim, got a 0-d tensor")
    if x.ndim <= 2 and t.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if t._data.dtype not in (np.int64, np.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got "
                           f"{t.dtype.tensor_type[:-6]}")
    if x.ndim >= 2 and (t.ndim == 0 or xs[0] != ts[0]):
        raise ValueError(f"Expected input batch_size ({xs[0]}) to match target batch_size "
                         f"({ts[0] if t.ndim else 1}).")
    if x.ndim == 1 and t.ndim == 1 and ts[0] != 1:
        raise ValueError(f"Expected input batch_size (1) to match target batch_size "
                         f"({ts[0]}).")
    if x.ndim > 2:
        if t.ndim != x.ndim - 1:
            raise RuntimeError(f"only batches of spatial targets supported ({x.ndim - 1}D "
                               f"tensors) but got targets of dimension: {t.ndim}")
        if ts[1:] != xs[2:]:
            raise RuntimeError(f"Expected target size {list(xs[:1] + xs[2:])}, got {list(ts)}")
    c = xs[1] if x.ndim >= 2 else xs[0]
    if w is not None and w._data.shape != (c,):
        raise RuntimeError(f"weight tensor should be defined either for all {c} classes or no "
                           f"classes but got weight tensor of shape: {list(w._data.shape)}")
    if is_cpu_array(x._data) or x.ndim != 2 or w is not None:  # (CUDA's kernels check)
        _check_target_values(t._data, c, ignore_index)


@api(NLL_LOSS)
@autocast_op
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of the class ``target`` under log-probabilities ``input``.

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.nll_loss(jitgrad.tensor([[-0.5, -1.0], [-2.0, -0.25]]), jitgrad.tensor([0, 1]))
    tensor(0.3750)
    """
    reduction = reduction_arg(size_average, reduce, reduction)
    input = as_tensor_arg(input, "input")
    target = as_tensor_arg(target, "target")
    _check_nll(input, target, weight, ignore_index)
    if weight is not None:
        weight = weight.to(input.dtype)
    return _nll(input, target, weight, reduction, ignore_index)


def _class_weight(weight: Tensor, ndim: int) -> Tensor:
    """(C,) weight shaped to broadcast along the class dim 1 of an ``ndim`` input."""
    return weight.reshape((-1,) + (1,) * (ndim - 2)) if ndim >= 2 else weight


def _soft_cross_entropy(logp: Tensor, target: Tensor, weight, reduction, ls, cdim) -> Tensor:
    if logp._data.shape != target._data.shape:
        raise RuntimeError(f"cross_entropy: probability targets of shape "
                           f"{fmt_shape(target._data.shape)} do not match the input "
                           f"{fmt_shape(logp._data.shape)}")
    c = logp._data.shape[cdim]
    if ls > 0.0:
        target = target * (1.0 - ls) + ls / c
    prod = logp * target
    if weight is not None:
        prod = prod * _class_weight(weight, logp.ndim)
    if reduction == "none":
        return -prod.sum(cdim)
    if reduction == "sum":
        return -prod.sum()
    return -prod.sum() / float(logp.numel() // c if c else 0)


def _smoothing_term(logp, target, weight, reduction, ignore_index, cdim) -> Tensor:
    """PyTorch's label-smoothing term: ``-sum(logp * weight)`` over classes, zero where the
    target is ignored, reduced like the NLL term."""
    prod = logp if weight is None else logp * _class_weight(weight, logp.ndim)
    smooth = (-prod.sum(cdim)).masked_fill(target == ignore_index, 0.0)
    if reduction == "none":
        return smooth
    if reduction == "sum":
        return smooth.sum()
    # the mean's divisor: the summed weights of the targets kept (their count without
    # weights), computed with ops -- a number read from the targets here would be frozen
    # into a compiled plan, which then divided by the first batch's count at every call
    minus_one = full(logp._data.shape, -1.0, dtype=logp.dtype, device=logp.device)
    return smooth.sum() / _nll(minus_one, target, weight, "sum", ignore_index)


@api(LOG_SOFTMAX, NLL_LOSS)
@autocast_op
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of logits ``input`` (``(N, C, ...)`` or ``(C,)``) against class indices
    or class probabilities (a float ``target`` of the input's shape).

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.cross_entropy(jitgrad.tensor([[2.0, 0.0], [0.0, 1000.0]]), jitgrad.tensor([0, 1]))
    tensor(0.0635)
    """
    reduction = reduction_arg(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    input = as_tensor_arg(input, "input")
    target = as_tensor_arg(target, "target")
    cdim = 1 if input.ndim >= 2 else 0
    if weight is not None:
        weight = weight.to(input.dtype)
    if input._data.shape == target._data.shape and target._data.dtype.kind in "iu" \
            and input.ndim >= 1:
        raise RuntimeError(f"Expected floating point type for target with class probabilities, "
                           f"got {target.dtype.tensor_type[:-6]}")
    if target._data.dtype.kind == "f" and input._data.shape == target._data.shape:
        logp = log_softmax(input, cdim)
        return _soft_cross_entropy(logp, target.to(input.dtype), weight, reduction,
                                   label_smoothing, cdim)
    if weight is None and label_smoothing == 0.0:
        loss = _plain_cross_entropy(input, target, reduction, ignore_index)
        if loss is not None:
            return loss
    _check_nll(input, target, weight, ignore_index)
    logp = log_softmax(input, cdim)
    nll = _nll(logp, target, weight, reduction, ignore_index)
    if label_smoothing == 0.0:
        return nll
    c = input._data.shape[cdim]
    term = _smoothing_term(logp, target, weight, reduction, ignore_index, cdim)
    return (1.0 - label_smoothing) * nll + term * (label_smoothing / c)
