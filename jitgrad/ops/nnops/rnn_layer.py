"""A whole LSTM layer (one direction) as one op, as PyTorch's CPU LSTM records one
``MkldnnRnnLayerBackward0`` node per layer and direction:

* ``lstm_layer(input, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, reverse)`` runs every
  time step on the arrays -- the input projection of the whole sequence as one matrix
  product, then per step the hidden projection and the cell: on the CPU one compiled pass
  (``kernels/rnn.py``, jitgrad's kernel math), elsewhere NumPy's form of :mod:`.rnn_cells`'
  formulas (:class:`jitgrad.nn.LSTMCell` stepped by hand agrees to rounding). Its output is
  one flat array holding, in time order, every hidden state and every cell state (``[hs |
  cs]``, ``T*B*2H`` values); the layer's output and final states are views of it
  (:func:`lstm_layer_views`).
* Its backward is the op ``lstm_layer_backward``: the recurrence run backwards on the
  arrays, each step's gates recomputed as the forward computed them (one small product per
  step, instead of keeping ``4H`` values per step), then the weights' gradients as one
  matrix product over all steps (on the CPU each step's cell gradient is one compiled pass
  too). Under ``create_graph`` the rule instead runs the same steps with jitgrad ops
  (:func:`_vjp_as_ops`: the cell's backward ops, which differentiate again), so second
  derivatives hold; both forms read the same saved values (equal to rounding).

Eagerly a step costs a handful of NumPy calls instead of a dozen recorded ops and their
backward nodes (an LSTM language-model step, T=20, B=16, H=64: see docs/architecture.md).
``jitgrad.nn.LSTM`` uses it for padded float32/float64 input without ``proj_size``; packed
sequences and projections run step by step with the cell ops.
"""

from __future__ import annotations

import numpy as np

from ...devices import array_namespace, check_same_device
from ...tensor import Tensor, wrap
from .. import samples as S
from ..api import api
from ..dispatch import record
from ..eager_reduce import sum_float
from ..indexing import GETITEM
from ..linalg import _blas_matmul
from ..registry import OPAQUE, defop
from ..views import RESHAPE

__all__ = ["lstm_layer", "lstm_layer_backward", "lstm_layer_views"]


def _order(steps: int, reverse: bool) -> range:
    return range(steps - 1, -1, -1) if reverse else range(steps)


def _parts(flat, steps: int, batch: int, hidden: int) -> tuple:
    """The ``hs`` and ``cs`` (``T, B, H``) views of a layer's flat output (arrays or
    tensors)."""
    n = steps * batch * hidden
    return flat[:n].reshape(steps, batch, hidden), flat[n:].reshape(steps, batch, hidden)


def _project(x, w, b):
    """``x @ w.T + b`` over the flattened steps, as ``linear`` computes it (one GEMM, the
    bias added in place)."""
    steps, batch = x.shape[:2]
    out = _blas_matmul(x.reshape(steps * batch, x.shape[2]), w.T)
    if b is not None:
        out += b
    return out.reshape(steps, batch, w.shape[0])


# ------------------------------------------------------------------------ forward
def _cell(xp, gates, c, c_out, h_out) -> None:
    """One step's new cell and hidden states into ``c_out``, ``h_out`` on a device's
    arrays: the values of :func:`.rnn_cells._c_ref` and :func:`.rnn_cells._h_ref` (the same
    element-wise formulas in the same order), with one sigmoid pass over all four gate
    blocks instead of three."""
    hidden = c.shape[-1]
    s = 1.0 / (1.0 + xp.exp(-gates))
    i, f, o = s[:, :hidden], s[:, hidden:2 * hidden], s[:, 3 * hidden:]
    xp.add(f * c, i * xp.tanh(gates[:, 2 * hidden:3 * hidden]), out=c_out)
    xp.multiply(o, xp.tanh(c_out), out=h_out)


def _layer_ref(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=False):
    xp = array_namespace(x)
    steps, batch = x.shape[:2]
    hidden = w_hh.shape[1]
    flat = xp.empty(steps * batch * 2 * hidden, x.dtype)
    hs, cs = _parts(flat, steps, batch, hidden)
    xw = _project(x, w_ih, b_ih)
    h, c = h0, c0
    cell = _cell if xp is not np else _cell_kernel
    with np.errstate(over="ignore"):
        for t in _order(steps, reverse):
            cell(xp, _gates(xw[t], h, w_hh, b_hh), c, cs[t], hs[t])
            h, c = hs[t], cs[t]
    return flat


def _cell_kernel(xp, gates, c, c_out, h_out) -> None:
    """:func:`_cell` on the CPU: one compiled pass (``kernels/rnn.py``)."""
    from ...kernels.rnn import lstm_cell

    lstm_cell(gates, c, c_out, h_out)


def _gates(xw, h, w_hh, b_hh):
    """A step's gate pre-activations ``xw + (h @ w_hh.T + b_hh)``, as ``linear`` adds its
    bias (in place after the product)."""
    hw = _blas_matmul(h, w_hh.T)
    if b_hh is not None:
        hw += b_hh
    hw += xw  # (xw + hw: the same sum)
    return hw


# ------------------------------------------------------------------------ backward
def _cell_backward(xp, dh, dc_in, gates, c, c_prev, dgates):
    """One step back: the gate gradients into ``dgates`` and the previous cell state's
    gradient, for the hidden state's
    gradient ``dh`` and the cell state's ``dc_in`` (the output's and the next step's):
    :func:`.rnn_cells._h_bwd_ref` then :func:`.rnn_cells._c_bwd_ref`, the same formulas
    in the same order."""
    hidden = c.shape[-1]
    s = 1.0 / (1.0 + xp.exp(-gates))
    i, f, o = s[:, :hidden], s[:, hidden:2 * hidden], s[:, 3 * hidden:]
    tg, tc = xp.tanh(gates[:, 2 * hidden:3 * hidden]), xp.tanh(c)
    dgates[:, 3 * hidden:] = dh * tc * o * (1.0 - o)
    dc = dh * o * (1.0 - tc * tc) + dc_in
    dgates[:, :hidden] = dc * tg * i * (1.0 - i)
    dgates[:, hidden:2 * hidden] = dc * c_prev * f * (1.0 - f)
    dgates[:, 2 * hidden:3 * hidden] = dc * i * (1.0 - tg * tg)
    return dc * f


def _layer_bwd_ref(g, x, h0, c0, w_ih, w_hh, b_ih, b_hh, out, reverse=False):
    """``[dinput | dh0 | dc0 | dweight_ih | dweight_hh | dbias]`` (flat) for the output
    gradient ``g`` (flat, in the output's layout: the gradients of the hidden and cell
    states)."""
    xp = array_namespace(x)
    steps, batch, width = x.shape
    hidden = w_hh.shape[1]
    hs, cs = _parts(out, steps, batch, hidden)
    gh, gc = _parts(g, steps, batch, hidden)
    xw = _project(x, w_ih, b_ih)
    dgates = xp.empty((steps, batch, 4 * hidden), x.dtype)
    dh_next = dc_next = None
    first = steps - 1 if reverse else 0
    if xp is np:  # one compiled pass a step (kernels/rnn.py)
        from ...kernels.rnn import lstm_cell_backward

        dh_next, dc_next = np.zeros_like(h0), np.zeros_like(c0)
        for t in _order(steps, not reverse):
            before = t + 1 if reverse else t - 1
            h_prev, c_prev = (h0, c0) if t == first else (hs[before], cs[before])
            dc_prev = np.empty_like(c0)
            lstm_cell_backward(gh[t], dh_next, gc[t], dc_next,
                               _gates(xw[t], h_prev, w_hh, b_hh), cs[t], c_prev, dgates[t],
                               dc_prev)
            dc_next = dc_prev
            dh_next = _blas_matmul(dgates[t], w_hh)
    else:
        with np.errstate(over="ignore"):
            for t in _order(steps, not reverse):
                before = t + 1 if reverse else t - 1
                dh = gh[t] if dh_next is None else gh[t] + dh_next
                dc_in = gc[t] if dc_next is None else gc[t] + dc_next
                h_prev, c_prev = (h0, c0) if t == first else (hs[before], cs[before])
                dc_next = _cell_backward(xp, dh, dc_in, _gates(xw[t], h_prev, w_hh, b_hh),
                                         cs[t], c_prev, dgates[t])
                dh_next = _blas_matmul(dgates[t], w_hh)
    d2 = dgates.reshape(steps * batch, 4 * hidden)
    h_prev = _shifted(xp, hs, h0, reverse).reshape(steps * batch, hidden)
    parts = (_blas_matmul(d2, w_ih), dh_next, dc_next,
             _blas_matmul(d2.T, x.reshape(steps * batch, width)), _blas_matmul(d2.T, h_prev),
             sum_float(d2, (0,), False))
    return xp.concatenate([p.reshape(-1) for p in parts])


def _shifted(xp, hs, h0, reverse: bool):
    """Each step's previous hidden state, in time order."""
    if reverse:
        return xp.concatenate([hs[1:], h0[None]], 0)
    return xp.concatenate([h0[None], hs[:-1]], 0)


def _split(flat: Tensor, shapes) -> list:
    """Views of the flat gradients ``flat``, one per shape of ``shapes`` in order."""
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(flat[at:at + n].reshape(s))
        at += n
    return out


def _split_grads(flat: Tensor, x: Tensor, w_ih: Tensor, w_hh: Tensor) -> list:
    steps, batch, width = x._data.shape
    gates, hidden = w_hh._data.shape
    return _split(flat, [(steps, batch, width), (batch, hidden), (batch, hidden),
                         (gates, width), (gates, hidden), (gates,)])


def _differentiated(outputs: Tensor, ins: tuple, g: Tensor, needs: tuple) -> list:
    """The gradients of ``outputs`` (steps recomputed as jitgrad ops) for the cotangent
    ``g`` w.r.t. the inputs ``needs`` asks for, with ``create_graph`` (None elsewhere)."""
    from ...autograd import grad

    wrt = [(k, t) for k, t in enumerate(ins) if t is not None and needs[k]]
    got = grad(outputs, [t for _, t in wrt], g, create_graph=True, allow_unused=True)
    grads: list = [None] * len(ins)
    for (k, _), v in zip(wrt, got):
        grads[k] = v
    return grads


def _check_layer(fn: str, x: Tensor, weights: tuple, states: dict, gates_per_unit: int
                 ) -> None:
    """PyTorch-worded shape and dtype checks of a layer op's operands: ``weights`` the
    ``(weight_ih, weight_hh, bias_ih, bias_hh)`` (biases may be None), ``states`` the
    initial states by name (``B, H``)."""
    if x.ndim != 3:
        raise RuntimeError(f"{fn}: expected an input of shape (T, B, I), got {list(x.shape)}")
    w_ih, w_hh, b_ih, b_hh = weights
    steps, batch, width = x.shape
    gates, hidden = w_hh.shape
    want = {"weight_ih": (w_ih, (gates, width)),
            "weight_hh": (w_hh, (gates_per_unit * hidden, hidden)),
            "bias_ih": (b_ih, (gates,)), "bias_hh": (b_hh, (gates,)),
            **{name: (t, (batch, hidden)) for name, t in states.items()}}
    for name, (t, shape) in want.items():
        if t is None:
            continue
        if tuple(t.shape) != shape:
            raise RuntimeError(f"{fn}: expected {name} of shape {list(shape)}, got "
                               f"{list(t.shape)}")
        if t.dtype != x.dtype:
            raise RuntimeError(f"{fn}: expected {name} of dtype {x.dtype}, got {t.dtype}")


def _vjp(g, ins, out, p, n):
    from ...autograd.grad_mode import STATE

    x, h0, c0, w_ih, w_hh, b_ih, b_hh = ins
    if STATE.enabled:  # create_graph: the same steps as differentiable ops
        dx, dh0, dc0, dw_ih, dw_hh, db = _vjp_as_ops(g, ins, out, p["reverse"])
    else:
        dx, dh0, dc0, dw_ih, dw_hh, db = _split_grads(
            lstm_layer_backward(g, x, h0, c0, w_ih, w_hh, b_ih, b_hh, out, p["reverse"]),
            x, w_ih, w_hh)
    return tuple(v if need else None for v, need in
                 zip((dx, dh0, dc0, dw_ih, dw_hh, db, db), n))


def _vjp_as_ops(g: Tensor, ins: tuple, out: Tensor, reverse: bool) -> tuple:
    """:func:`_layer_bwd_ref` written with jitgrad ops, the gates recomputed from the
    inputs as the forward computes them, so the gradients differentiate again."""
    from ...nn.functional import linear
    from ..concat import cat, stack
    from ..linalg import matmul
    from .rnn_cells import lstm_cell_c_backward, lstm_cell_h_backward

    x, h0, c0, w_ih, w_hh, b_ih, b_hh = ins
    steps, batch, width = x._data.shape
    hidden = w_hh._data.shape[1]
    hs, cs = _parts(out, steps, batch, hidden)
    gh, gc = _parts(g, steps, batch, hidden)
    xw = linear(x, w_ih, b_ih)
    first = steps - 1 if reverse else 0
    dgates = [None] * steps
    dh_next = dc_next = None
    for t in _order(steps, not reverse):
        before = t + 1 if reverse else t - 1
        h_prev = h0 if t == first else hs[before]
        c_prev = c0 if t == first else cs[before]
        gates = xw[t] + linear(h_prev, w_hh, b_hh)
        dh = gh[t] if dh_next is None else gh[t] + dh_next
        rh = lstm_cell_h_backward(dh, gates, cs[t])
        dc = rh[:, 4 * hidden:] + (gc[t] if dc_next is None else gc[t] + dc_next)
        rc = lstm_cell_c_backward(dc, gates, c_prev)
        dgates[t] = rc[:, :4 * hidden] + rh[:, :4 * hidden]
        dh_next = matmul(dgates[t], w_hh)
        dc_next = rc[:, 4 * hidden:]
    d2 = stack(dgates, 0).reshape(steps * batch, 4 * hidden)
    h_prev = (cat([hs[1:], h0.unsqueeze(0)], 0) if reverse else
              cat([h0.unsqueeze(0), hs[:-1]], 0)).reshape(steps * batch, hidden)
    return (matmul(d2, w_ih).reshape(steps, batch, width), dh_next, dc_next,
            matmul(d2.t(), x.reshape(steps * batch, width)), matmul(d2.t(), h_prev),
            d2.sum(dim=0))


LSTM_LAYER = defop(name="lstm_layer", kind=OPAQUE, node="MkldnnRnnLayerBackward0",
                   inputs=("input", "h0", "c0", "weight_ih", "weight_hh", "bias_ih",
                           "bias_hh"), params=("reverse",), ref=_layer_ref, vjp=_vjp,
                   save=(0, 1, 2, 3, 4, 5, 6), save_out=True, samples=S.lstm_layer)
LSTM_LAYER_BACKWARD = defop(name="lstm_layer_backward", kind=OPAQUE,
                            node="MkldnnRnnLayerBackwardBackward0",
                            inputs=("grad", "input", "h0", "c0", "weight_ih", "weight_hh",
                                    "bias_ih", "bias_hh", "output"),
                            params=("reverse",), ref=_layer_bwd_ref,
                            samples=S.lstm_layer_backward)


@api(LSTM_LAYER)
def lstm_layer(input: Tensor, h0: Tensor, c0: Tensor, weight_ih: Tensor, weight_hh: Tensor,
               bias_ih: Tensor | None, bias_hh: Tensor | None, reverse: bool = False
               ) -> Tensor:
    """One LSTM layer and direction over a padded sequence ``input`` (``T, B, I``) from the
    states ``h0``, ``c0`` (``B, H``): the flat ``[hs | cs]`` (see the module doc;
    :func:`lstm_layer_views` gives the output and the final states). ``reverse`` runs the
    steps from the last to the first (a bidirectional layer's second direction)."""
    _check_layer("lstm_layer", input, (weight_ih, weight_hh, bias_ih, bias_hh),
                 {"h0": h0, "c0": c0}, 4)
    return _run(LSTM_LAYER, _layer_ref,
                (input, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh), {"reverse": bool(reverse)})


def _run(op, ref, inputs: tuple, params: dict) -> Tensor:
    """``op`` run eagerly on ``inputs`` (the biases may be None) with ``params``, and
    recorded."""
    arrays = [None if t is None else t._data for t in inputs]
    check_same_device([a for a in arrays if a is not None])
    return record(op, wrap(ref(*arrays, **params)), inputs, params)


@api(LSTM_LAYER_BACKWARD)
def lstm_layer_backward(grad: Tensor, input: Tensor, h0: Tensor, c0: Tensor,
                        weight_ih: Tensor, weight_hh: Tensor, bias_ih: Tensor | None,
                        bias_hh: Tensor | None, output: Tensor, reverse: bool = False
                        ) -> Tensor:
    """:func:`lstm_layer`'s gradients for the output gradient ``grad``, flat:
    ``[dinput | dh0 | dc0 | dweight_ih | dweight_hh | dbias]`` (both biases have the
    gradient ``dbias``)."""
    return _run(LSTM_LAYER_BACKWARD, _layer_bwd_ref,
                (grad, input, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, output),
                {"reverse": bool(reverse)})


@api(GETITEM, RESHAPE)
def lstm_layer_views(flat: Tensor, steps: int, batch: int, hidden: int,
                     reverse: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """``(output, h_n, c_n)`` of a :func:`lstm_layer` result: every step's hidden state
    (``T, B, H``) and the states after the last step run (the first in time for
    ``reverse``)."""
    hs, cs = _parts(flat, steps, batch, hidden)
    k = 0 if reverse else steps - 1
    return hs, hs[k], cs[k]
