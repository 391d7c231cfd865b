"""A whole GRU layer (one direction) as one op, as :mod:`.rnn_layer` does for the LSTM:

* ``gru_layer(input, h0, weight_ih, weight_hh, bias_ih, bias_hh, reverse)`` runs every step
  on the arrays: the input projection of the whole sequence as one matrix product, then per
  step the hidden product and PyTorch's cell (gates r, z, n): ``r = sigmoid(x_r + h_r)``,
  ``z = sigmoid(x_z + h_z)``, ``n = tanh(x_n + r * h_n)``, ``h' = (1 - z) * n + z * h``.
  Its output is every step's hidden state (``T, B, H``).
* Its backward is the op ``gru_layer_backward``: the recurrence run backwards on the arrays,
  each step's gates recomputed with the forward's own product, the weights' gradients as
  one matrix product over all steps. Under ``create_graph`` the rule differentiates the same
  steps written as jitgrad ops instead (:func:`_vjp_as_ops`), so second derivatives hold
  (within rounding of the fast form: its sigmoid and tanh are NumPy's).

PyTorch's CPU GRU is a composite of small ops (its graph has ~7 nodes per step); one op per
layer records one node (``GruLayerBackward0``, a name of jitgrad's own). ``jitgrad.nn.GRU``
uses it for padded float32/float64 input; packed batches and float16 run step by step.
"""

from __future__ import annotations

import numpy as np

from ...devices import array_namespace
from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..eager_reduce import sum_float
from ..linalg import _blas_matmul
from ..registry import OPAQUE, defop
from .rnn_layer import _check_layer, _differentiated, _order, _project, _run, _shifted, _split

__all__ = ["gru_layer", "gru_layer_backward"]


def _sigmoid(xp, v):
    return 1.0 / (1.0 + xp.exp(-v))


def _hidden(h, w_hh, b_hh):
    """``h @ w_hh.T + b_hh``, as ``linear`` computes it."""
    hw = _blas_matmul(h, w_hh.T)
    if b_hh is not None:
        hw += b_hh
    return hw


def _gates(xp, xw, hw, hidden: int) -> tuple:
    """``(r, z, n)`` of one step from its input and hidden projections."""
    rz = _sigmoid(xp, xw[:, :2 * hidden] + hw[:, :2 * hidden])
    r, z = rz[:, :hidden], rz[:, hidden:]
    n = xp.tanh(xw[:, 2 * hidden:] + r * hw[:, 2 * hidden:])
    return r, z, n


# ------------------------------------------------------------------------ forward
def _layer_ref(x, h0, w_ih, w_hh, b_ih, b_hh, reverse=False):
    xp = array_namespace(x)
    steps, batch = x.shape[:2]
    hidden = w_hh.shape[1]
    hs = xp.empty((steps, batch, hidden), x.dtype)
    xw = _project(x, w_ih, b_ih)
    h = h0
    with np.errstate(over="ignore"):
        for t in _order(steps, reverse):
            r, z, n = _gates(xp, xw[t], _hidden(h, w_hh, b_hh), hidden)
            xp.add((1.0 - z) * n, z * h, out=hs[t])
            h = hs[t]
    return hs


# ------------------------------------------------------------------------ backward
def _layer_bwd_ref(g, x, h0, w_ih, w_hh, b_ih, b_hh, out, reverse=False):
    """``[dinput | dh0 | dweight_ih | dweight_hh | dbias_ih | dbias_hh]`` (flat) for the
    output gradient ``g`` (``T, B, H``)."""
    xp = array_namespace(x)
    steps, batch, width = x.shape
    hidden = w_hh.shape[1]
    xw = _project(x, w_ih, b_ih)
    dxw = xp.empty((steps, batch, 3 * hidden), x.dtype)
    dhw = xp.empty((steps, batch, 3 * hidden), x.dtype)
    first = steps - 1 if reverse else 0
    dh_next = None
    with np.errstate(over="ignore"):
        for t in _order(steps, not reverse):
            h_prev = h0 if t == first else out[t + 1 if reverse else t - 1]
            hw = _hidden(h_prev, w_hh, b_hh)
            r, z, n = _gates(xp, xw[t], hw, hidden)
            dh = g[t] if dh_next is None else g[t] + dh_next
            dn = dh * (1.0 - z) * (1.0 - n * n)
            dxw[t, :, :hidden] = dn * hw[:, 2 * hidden:] * r * (1.0 - r)
            dxw[t, :, hidden:2 * hidden] = dh * (h_prev - n) * z * (1.0 - z)
            dxw[t, :, 2 * hidden:] = dn
            dhw[t, :, :2 * hidden] = dxw[t, :, :2 * hidden]
            dhw[t, :, 2 * hidden:] = dn * r
            dh_next = dh * z + _blas_matmul(dhw[t], w_hh)
    dx2 = dxw.reshape(steps * batch, 3 * hidden)
    dh2 = dhw.reshape(steps * batch, 3 * hidden)
    h_prev = _shifted(xp, out, h0, reverse).reshape(steps * batch, hidden)
    parts = (_blas_matmul(dx2, w_ih), dh_next, _blas_matmul(dx2.T, x.reshape(-1, width)),
             _blas_matmul(dh2.T, h_prev), sum_float(dx2, (0,), False),
             sum_float(dh2, (0,), False))
    return xp.concatenate([p.reshape(-1) for p in parts])


def _split_grads(flat: Tensor, x: Tensor, w_hh: Tensor) -> list:
    steps, batch, width = x._data.shape
    gates, hidden = w_hh._data.shape
    return _split(flat, [(steps, batch, width), (batch, hidden), (gates, width),
                         (gates, hidden), (gates,), (gates,)])


def _vjp(g, ins, out, p, n):
    from ...autograd.grad_mode import STATE

    if STATE.enabled:  # create_graph: the same steps as differentiable ops
        grads = _vjp_as_ops(g, ins, p["reverse"], n)
    else:
        x, h0, w_ih, w_hh, b_ih, b_hh = ins
        grads = _split_grads(gru_layer_backward(g, x, h0, w_ih, w_hh, b_ih, b_hh, out,
                                                p["reverse"]), x, w_hh)
    return tuple(v if need else None for v, need in zip(grads, n))


def _vjp_as_ops(g: Tensor, ins: tuple, reverse: bool, needs: tuple) -> list:
    """The layer's steps recomputed as jitgrad ops from the inputs, differentiated with
    ``create_graph`` (the gradients differentiate again)."""
    from ...nn.functional import linear
    from ..concat import stack
    from ..elementwise import sigmoid, tanh

    x, h0, w_ih, w_hh, b_ih, b_hh = ins
    steps, hidden = x._data.shape[0], w_hh._data.shape[1]
    xw = linear(x, w_ih, b_ih)
    h, hs = h0, [None] * steps
    for t in _order(steps, reverse):
        hw = linear(h, w_hh, b_hh)
        r = sigmoid(xw[t][:, :hidden] + hw[:, :hidden])
        z = sigmoid(xw[t][:, hidden:2 * hidden] + hw[:, hidden:2 * hidden])
        nn = tanh(xw[t][:, 2 * hidden:] + r * hw[:, 2 * hidden:])
        h = hs[t] = (1.0 - z) * nn + z * h
    return _differentiated(stack(hs, 0), ins, g, needs)


GRU_LAYER = defop(name="gru_layer", kind=OPAQUE, node="GruLayerBackward0",
                  inputs=("input", "h0", "weight_ih", "weight_hh", "bias_ih", "bias_hh"),
                  params=("reverse",), ref=_layer_ref, vjp=_vjp, save=(0, 1, 2, 3, 4, 5),
                  save_out=True, samples=S.gru_layer)
GRU_LAYER_BACKWARD = defop(name="gru_layer_backward", kind=OPAQUE,
                           node="GruLayerBackwardBackward0",
                           inputs=("grad", "input", "h0", "weight_ih", "weight_hh", "bias_ih",
                                   "bias_hh", "output"),
                           params=("reverse",), ref=_layer_bwd_ref,
                           samples=S.gru_layer_backward)


@api(GRU_LAYER)
def gru_layer(input: Tensor, h0: Tensor, weight_ih: Tensor, weight_hh: Tensor,
              bias_ih: Tensor | None, bias_hh: Tensor | None, reverse: bool = False
              ) -> Tensor:
    """One GRU layer and direction over a padded sequence ``input`` (``T, B, I``) from the
    state ``h0`` (``B, H``): every step's hidden state (``T, B, H``; the final state is the
    last step run's, the first in time for ``reverse``)."""
    _check_layer("gru_layer", input, (weight_ih, weight_hh, bias_ih, bias_hh), {"h0": h0}, 3)
    return _run(GRU_LAYER, _layer_ref, (input, h0, weight_ih, weight_hh, bias_ih, bias_hh),
                {"reverse": bool(reverse)})


@api(GRU_LAYER_BACKWARD)
def gru_layer_backward(grad: Tensor, input: Tensor, h0: Tensor, weight_ih: Tensor,
                       weight_hh: Tensor, bias_ih: Tensor | None, bias_hh: Tensor | None,
                       output: Tensor, reverse: bool = False) -> Tensor:
    """:func:`gru_layer`'s gradients for the output gradient ``grad``, flat:
    ``[dinput | dh0 | dweight_ih | dweight_hh | dbias_ih | dbias_hh]``."""
    return _run(GRU_LAYER_BACKWARD, _layer_bwd_ref,
                (grad, input, h0, weight_ih, weight_hh, bias_ih, bias_hh, output),
                {"reverse": bool(reverse)})
