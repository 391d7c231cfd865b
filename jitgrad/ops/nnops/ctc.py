"""CTC loss (``torch.nn.functional.ctc_loss``): the per-sample negative log-likelihood
(``ctc_loss``, node ``CtcLossBackward0``) and its gradient w.r.t. the log-probabilities
(``ctc_loss_backward``: PyTorch's form, see :mod:`jitgrad.kernels.ctc`), computed by the
forward-backward recursions in float64 on the host (a CUDA tensor's values are copied
there and back). The reductions are ops on the per-sample losses: ``"mean"`` divides each by
its target length (at least 1) and averages, as PyTorch's.

The targets and both length vectors are op inputs, not parameters, so a compiled function
reads them on every call. PyTorch's CTC gradient is not differentiable again; neither is
this one (its VJP raises PyTorch's error).
"""

from __future__ import annotations

import numpy as np

from ...devices import array_namespace
from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..dispatch import as_tensor_arg, call
from ..registry import OPAQUE, defop
from .reduction import reduction_arg

__all__ = ["ctc_loss", "ctc_loss_backward"]


def _host(*arrays) -> list[np.ndarray]:
    out = []
    for a in arrays:
        xp = array_namespace(a)
        out.append(np.asarray(a.get() if xp is not np and hasattr(a, "get") else a))
    return out


def _flat_targets(targets: np.ndarray, target_lengths: np.ndarray) -> tuple:
    """(flat int64 targets, offsets): a padded ``(N, S)`` matrix row by row, or the
    concatenated 1-D form."""
    t = np.ascontiguousarray(targets, dtype=np.int64)
    n = target_lengths.shape[0]
    if t.ndim == 2:
        return t.reshape(-1), np.arange(n, dtype=np.int64) * t.shape[1]
    offsets = np.zeros(n, dtype=np.int64)
    np.cumsum(target_lengths[:-1], out=offsets[1:])
    return t, offsets


def _like(result: np.ndarray, a):
    """``result`` on ``a``'s device (the CUDA array module's copy for a device array)."""
    xp = array_namespace(a)
    if xp is np:
        return result if type(a) is np.ndarray else result.view(type(a))
    return xp.asarray(result)


def _ctc_ref(log_probs, targets, input_lengths, target_lengths, blank: int = 0,
             zero_infinity: bool = False):
    from ...kernels.ctc import ctc_nll

    lp, tg, il, tl = _host(log_probs, targets, input_lengths, target_lengths)
    il = np.ascontiguousarray(il, dtype=np.int64)
    tl = np.ascontiguousarray(tl, dtype=np.int64)
    # checked here, in the op's forward, so a compiled plan checks every call's lengths
    # (its kernel would read out of bounds)
    _check(lp, tg, il.reshape(-1), tl.reshape(-1), int(blank))
    flat, offsets = _flat_targets(tg, tl)
    out = np.empty(lp.shape[1], dtype=np.float64)
    ctc_nll(np.ascontiguousarray(lp), flat, offsets, il, tl, int(blank), out)
    if zero_infinity:
        out[np.isinf(out)] = 0.0
    return _like(out.astype(lp.dtype), log_probs)


def _ctc_grad_ref(grad, log_probs, targets, input_lengths, target_lengths, blank: int = 0,
                  zero_infinity: bool = False):
    from ...kernels.ctc import ctc_grad

    g, lp, tg, il, tl = _host(grad, log_probs, targets, input_lengths, target_lengths)
    il = np.ascontiguousarray(il, dtype=np.int64)
    tl = np.ascontiguousarray(tl, dtype=np.int64)
    flat, offsets = _flat_targets(tg, tl)
    lp = np.ascontiguousarray(lp)
    out = np.empty_like(lp)
    g = np.ascontiguousarray(np.broadcast_to(g, (lp.shape[1],)), dtype=np.float64)
    ctc_grad(lp, flat, offsets, il, tl, int(blank), g, bool(zero_infinity), out)
    return _like(out, log_probs)


def _ctc_grad_vjp(gg, ins, out, p, n):
    raise RuntimeError("derivative for aten::_ctc_loss_backward is not implemented")


CTC_LOSS_BACKWARD = defop(
    name="ctc_loss_backward", kind=OPAQUE, node="NotImplemented",
    inputs=("grad", "log_probs", "targets", "input_lengths", "target_lengths"),
    params=("blank", "zero_infinity"), ref=_ctc_grad_ref, vjp=_ctc_grad_vjp,
    samples=S.ctc_loss_backward)


@api(CTC_LOSS_BACKWARD)
def ctc_loss_backward(grad: Tensor, log_probs: Tensor, targets: Tensor,
                      input_lengths: Tensor, target_lengths: Tensor, blank: int,
                      zero_infinity: bool) -> Tensor:
    """The gradient of the per-sample CTC losses (weighted by ``grad``) w.r.t.
    ``log_probs`` (PyTorch's form)."""
    return call(CTC_LOSS_BACKWARD, (grad, log_probs, targets, input_lengths, target_lengths),
                {"blank": blank, "zero_infinity": zero_infinity})


def _ctc_vjp(g, ins, out, p, n):
    lp, tg, il, tl = ins
    return (ctc_loss_backward(g, lp, tg, il, tl, p["blank"], p["zero_infinity"]), None, None,
            None)


CTC_LOSS = defop(
    name="ctc_loss", kind=OPAQUE, node="CtcLossBackward0",
    inputs=("log_probs", "targets", "input_lengths", "target_lengths"),
    params=("blank", "zero_infinity"), ref=_ctc_ref, vjp=_ctc_vjp, save=(0, 1, 2, 3),
    samples=S.ctc_loss)


def _lengths(v, like: Tensor) -> Tensor:
    """``input_lengths`` / ``target_lengths`` as an int64 tensor on ``like``'s device."""
    if isinstance(v, Tensor):
        return v.to(like.device) if v.device != like.device else v
    from ... import creation

    return creation.tensor(np.asarray(v, dtype=np.int64).reshape(-1), device=like.device)


def _check(lp, tg, il: np.ndarray, tl: np.ndarray, blank: int) -> None:
    """PyTorch's argument errors, from the arrays' shapes and the lengths' values."""
    where = "(while checking arguments for ctc_loss_allocate_outputs)"
    t_len, n, c = lp.shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")
    if il.size != n:
        raise RuntimeError("input_lengths must be of size batch_size")
    if tl.size != n:
        raise RuntimeError("target_lengths must be of size batch_size")
    for name, v, top in (("input_lengths", il, t_len), ("target_lengths", tl, None)):
        if v.size and v.min() < 0:
            raise RuntimeError(f"Expected {name} to have value at least 0, but got value "
                               f"{int(v.min())} {where}")
        if top is not None and v.size and v.max() > top:
            raise RuntimeError(f"Expected {name} to have value at most {top}, but got value "
                               f"{int(v.max())} {where}")
    if tg.ndim == 1:
        total = int(tl.sum())
        if tg.shape[0] != total:
            raise RuntimeError(f"Expected tensor to have size {total} at dimension 0, but got "
                               f"size {tg.shape[0]} for argument #2 'targets' {where}")
    elif tl.size and tg.shape[1] < tl.max():
        raise RuntimeError(f"Expected tensor to have size at least {int(tl.max())} at "
                           f"dimension 1, but got size {tg.shape[1]} for argument #2 "
                           f"'targets' {where}")


@api(CTC_LOSS)
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """The connectionist temporal classification loss of ``log_probs`` ``(T, N, C)`` (or
    ``(T, C)``; log-softmax outputs) for ``targets`` (``(N, S)`` padded, or the targets
    concatenated), ``input_lengths`` and ``target_lengths`` (tensors or sequences of ints);
    ``zero_infinity`` zeroes impossible alignments' infinite losses and their gradients."""
    reduction = reduction_arg(None, None, reduction)
    lp = as_tensor_arg(log_probs, "log_probs")
    tg = as_tensor_arg(targets, "targets")
    if not lp.dtype.is_floating_point:
        raise NotImplementedError(f'"ctc_loss_cpu" not implemented for '
                                  f"'{lp.dtype.tensor_type.replace('Tensor', '')}'")
    unbatched = lp.ndim != 3
    if unbatched:
        lp = lp.unsqueeze(1)
        if lp.ndim != 3:
            raise RuntimeError(f"Expected 3-dimensional tensor, but got {lp.ndim}-dimensional "
                               f"tensor for argument #1 'log_probs' (while checking arguments "
                               f"for ctc_loss_allocate_outputs)")
        tg = tg.unsqueeze(0)
    il, tl = _lengths(input_lengths, lp), _lengths(target_lengths, lp)
    p = {"blank": int(blank), "zero_infinity": bool(zero_infinity)}
    losses = call(CTC_LOSS, (lp, tg, il.reshape(-1), tl.reshape(-1)), p)
    if reduction == "none":
        return losses.squeeze(0) if unbatched else losses
    if reduction == "sum":
        return losses.sum()
    return (losses / tl.reshape(-1).clamp_min(1).to(losses.dtype)).mean()
