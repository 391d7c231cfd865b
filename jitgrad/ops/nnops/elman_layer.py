"""A whole Elman RNN layer (one direction, ``nn.RNN``) as one op, as :mod:`.rnn_layer` does
for the LSTM and :mod:`.gru_layer` for the GRU:

* ``elman_layer(input, h0, weight_ih, weight_hh, bias_ih, bias_hh, nonlinearity, reverse)``:
  ``h' = act(x W_ih.T + b_ih + h W_hh.T + b_hh)`` per step on the arrays (``act`` tanh or
  relu; the input projection of the whole sequence as one matrix product); its output is
  every step's hidden state (``T, B, H``);
* its backward, the op ``elman_layer_backward``, runs the recurrence backwards from the
  saved states (the activation's slope from its output: ``1 - h'^2``, ``h' > 0``), the
  weights' gradients as one product over all steps; under ``create_graph`` the rule
  differentiates the steps written as jitgrad ops (:func:`_vjp_as_ops`).

PyTorch's CPU RNN is a composite (~3 nodes per step); this records one node,
``RnnLayerBackward0`` (jitgrad's own name).
"""

from __future__ import annotations

from ...devices import array_namespace
from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..eager_reduce import sum_float
from ..linalg import _blas_matmul
from ..registry import OPAQUE, defop
from .rnn_layer import (
    _check_layer,
    _differentiated,
    _order,
    _project,
    _run,
    _shifted,
    _split,
)

__all__ = ["elman_layer", "elman_layer_backward"]


def _step(xp, xw, h, w_hh, b_hh, relu: bool, out) -> None:
    pre = _blas_matmul(h, w_hh.T)
    if b_hh is not None:
        pre += b_hh
    pre += xw  # (xw + hw: the same sum)
    if relu:
        xp.maximum(pre, 0.0, out=out)
    else:
        xp.tanh(pre, out=out)


def _layer_ref(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh", reverse=False):
    xp = array_namespace(x)
    steps, batch = x.shape[:2]
    hs = xp.empty((steps, batch, w_hh.shape[1]), x.dtype)
    xw = _project(x, w_ih, b_ih)
    h = h0
    for t in _order(steps, reverse):
        _step(xp, xw[t], h, w_hh, b_hh, nonlinearity == "relu", hs[t])
        h = hs[t]
    return hs


def _layer_bwd_ref(g, x, h0, w_ih, w_hh, b_ih, b_hh, out, nonlinearity="tanh", reverse=False):
    """``[dinput | dh0 | dweight_ih | dweight_hh | dbias]`` (flat; both biases have the
    gradient ``dbias``) for the output gradient ``g`` (``T, B, H``). The biases are not
    needed (the slopes come from the output); they are inputs so that the op reads what
    the ``create_graph`` rule reads (a compiled double backward keeps only that)."""
    xp = array_namespace(x)
    steps, batch, width = x.shape
    hidden = w_hh.shape[1]
    dpre = xp.empty((steps, batch, hidden), x.dtype)
    dh_next = None
    for t in _order(steps, not reverse):
        dh = g[t] if dh_next is None else g[t] + dh_next
        h = out[t]
        if nonlinearity == "relu":
            xp.multiply(dh, h > 0, out=dpre[t])
        else:
            xp.multiply(dh, 1.0 - h * h, out=dpre[t])
        dh_next = _blas_matmul(dpre[t], w_hh)
    d2 = dpre.reshape(steps * batch, hidden)
    h_prev = _shifted(xp, out, h0, reverse).reshape(steps * batch, hidden)
    parts = (_blas_matmul(d2, w_ih), dh_next, _blas_matmul(d2.T, x.reshape(-1, width)),
             _blas_matmul(d2.T, h_prev), sum_float(d2, (0,), False))
    return xp.concatenate([p.reshape(-1) for p in parts])


def _split_grads(flat: Tensor, x: Tensor, w_hh: Tensor) -> list:
    steps, batch, width = x._data.shape
    hidden = w_hh._data.shape[1]
    return _split(flat, [(steps, batch, width), (batch, hidden), (hidden, width),
                         (hidden, hidden), (hidden,)])


def _vjp(g, ins, out, p, n):
    from ...autograd.grad_mode import STATE

    if STATE.enabled:  # create_graph: the same steps as differentiable ops
        grads = _vjp_as_ops(g, ins, p["nonlinearity"], p["reverse"], n)
    else:
        x, h0, w_ih, w_hh, b_ih, b_hh = ins
        dx, dh0, dw_ih, dw_hh, db = _split_grads(
            elman_layer_backward(g, x, h0, w_ih, w_hh, b_ih, b_hh, out, p["nonlinearity"],
                                 p["reverse"]), x, w_hh)
        grads = [dx, dh0, dw_ih, dw_hh, db, db]
    return tuple(v if need else None for v, need in zip(grads, n))


def _vjp_as_ops(g: Tensor, ins: tuple, nonlinearity: str, reverse: bool, needs: tuple
                ) -> list:
    """The layer's steps recomputed as jitgrad ops from the inputs, differentiated with
    ``create_graph`` (the gradients differentiate again)."""
    from ...nn.functional import linear
    from ..concat import stack
    from ..elementwise import relu, tanh

    x, h0, w_ih, w_hh, b_ih, b_hh = ins
    act = relu if nonlinearity == "relu" else tanh
    xw = linear(x, w_ih, b_ih)
    h, hs = h0, [None] * x._data.shape[0]
    for t in _order(len(hs), reverse):
        h = hs[t] = act(xw[t] + linear(h, w_hh, b_hh))
    return _differentiated(stack(hs, 0), ins, g, needs)


ELMAN_LAYER = defop(name="elman_layer", kind=OPAQUE, node="RnnLayerBackward0",
                    inputs=("input", "h0", "weight_ih", "weight_hh", "bias_ih", "bias_hh"),
                    params=("nonlinearity", "reverse"), ref=_layer_ref, vjp=_vjp,
                    save=(0, 1, 2, 3, 4, 5), save_out=True, samples=S.elman_layer)
ELMAN_LAYER_BACKWARD = defop(name="elman_layer_backward", kind=OPAQUE,
                             node="RnnLayerBackwardBackward0",
                             inputs=("grad", "input", "h0", "weight_ih", "weight_hh",
                                     "bias_ih", "bias_hh", "output"),
                             params=("nonlinearity", "reverse"), ref=_layer_bwd_ref,
                             samples=S.elman_layer_backward)


@api(ELMAN_LAYER)
def elman_layer(input: Tensor, h0: Tensor, weight_ih: Tensor, weight_hh: Tensor,
                bias_ih: Tensor | None, bias_hh: Tensor | None, nonlinearity: str = "tanh",
                reverse: bool = False) -> Tensor:
    """One Elman RNN layer and direction over a padded sequence ``input`` (``T, B, I``) from
    the state ``h0`` (``B, H``): every step's hidden state (``T, B, H``)."""
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                         f"'relu'.")
    _check_layer("elman_layer", input, (weight_ih, weight_hh, bias_ih, bias_hh), {"h0": h0},
                 1)
    return _run(ELMAN_LAYER, _layer_ref, (input, h0, weight_ih, weight_hh, bias_ih, bias_hh),
                {"nonlinearity": nonlinearity, "reverse": bool(reverse)})


@api(ELMAN_LAYER_BACKWARD)
def elman_layer_backward(grad: Tensor, input: Tensor, h0: Tensor, weight_ih: Tensor,
                         weight_hh: Tensor, bias_ih: Tensor | None, bias_hh: Tensor | None,
                         output: Tensor, nonlinearity: str = "tanh", reverse: bool = False
                         ) -> Tensor:
    """:func:`elman_layer`'s gradients for the output gradient ``grad``, flat:
    ``[dinput | dh0 | dweight_ih | dweight_hh | dbias]``."""
    return _run(ELMAN_LAYER_BACKWARD, _layer_bwd_ref,
                (grad, input, h0, weight_ih, weight_hh, bias_ih, bias_hh, output),
                {"nonlinearity": nonlinearity, "reverse": bool(reverse)})
