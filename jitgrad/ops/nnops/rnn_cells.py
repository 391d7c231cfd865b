"""The LSTM cell's element-wise part as two ops, so a time step records four nodes (the
hidden projection, ``gates = xw + hw``, these two) instead of fifteen (a ``chunk`` into four
views, three sigmoids, two tanhs, three products, a sum):

* ``lstm_cell_c(gates, c) = sigmoid(f) * c + sigmoid(i) * tanh(g)``, the new cell state;
* ``lstm_cell_h(gates, c') = sigmoid(o) * tanh(c')``, the new hidden state;

``gates`` is ``(..., 4H)`` in PyTorch's order ``i, f, g, o``. Their nodes bear the names
PyTorch's CPU LSTM shows at those two points (``AddBackward0`` for ``c'``, ``MulBackward0``
for ``h'``). Each backward rule is one op too (``lstm_cell_c_backward``,
``lstm_cell_h_backward``: the gradients of the gates and of the state side by side,
``(..., 5H)``, which the rule hands on as two views), computed on the arrays by NumPy: the
same function whether eager mode runs it or a compiled plan does (the same bits), a few
NumPy calls per step. Their own backward rules (second derivatives, ``create_graph``) are
written out with jitgrad ops, so they differentiate again to any order. An eager char-RNN
step (2-layer LSTM, T=20, B=8, H=32) spent most of its time dispatching and
differentiating the small ops.
"""

from __future__ import annotations

import numpy as np

from ...devices import array_namespace
from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..dispatch import call
from ..registry import OPAQUE, defop

__all__ = ["lstm_cell_c", "lstm_cell_h"]


def _quarters(gates):
    h = gates.shape[-1] // 4
    return gates[..., :h], gates[..., h:2 * h], gates[..., 2 * h:3 * h], gates[..., 3 * h:]


def _sigmoid(xp, x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + xp.exp(-x))


# ------------------------------------------------------------------------ forward refs
def _c_ref(gates, c):
    xp = array_namespace(gates)
    i, f, g, _ = _quarters(gates)
    return (_sigmoid(xp, f) * c + _sigmoid(xp, i) * xp.tanh(g)).astype(gates.dtype, copy=False)


def _h_ref(gates, c):
    xp = array_namespace(gates)
    o = _quarters(gates)[3]
    return (_sigmoid(xp, o) * xp.tanh(c)).astype(gates.dtype, copy=False)


# -------------------------------------------------------- backward refs: [dgates, dstate]
def _c_bwd_ref(g, gates, c):
    xp = array_namespace(gates)
    i, f, gg = (_sigmoid(xp, q) if k != 2 else xp.tanh(q)
                for k, q in enumerate(_quarters(gates)[:3]))
    out = xp.zeros(gates.shape[:-1] + (gates.shape[-1] * 5 // 4,), gates.dtype)
    di, df, dg, _ = _quarters(out[..., :gates.shape[-1]])
    di[...] = g * gg * i * (1.0 - i)
    df[...] = g * c * f * (1.0 - f)
    dg[...] = g * i * (1.0 - gg * gg)
    out[..., gates.shape[-1]:] = g * f
    return out


def _h_bwd_ref(g, gates, c):
    xp = array_namespace(gates)
    o = _sigmoid(xp, _quarters(gates)[3])
    t = xp.tanh(c)
    out = xp.zeros(gates.shape[:-1] + (gates.shape[-1] * 5 // 4,), gates.dtype)
    _quarters(out[..., :gates.shape[-1]])[3][...] = g * t * o * (1.0 - o)
    out[..., gates.shape[-1]:] = g * o * (1.0 - t * t)
    return out


def _split(r: Tensor, n: tuple):
    """``[dgates, dstate]`` handed on as the two inputs' gradients (views)."""
    w = r._data.shape[-1] * 4 // 5
    return r[..., :w] if n[0] else None, r[..., w:] if n[1] else None


def _c_vjp(g, ins, out, p, n):
    return _split(lstm_cell_c_backward(g, *ins), n)


def _h_vjp(g, ins, out, p, n):
    return _split(lstm_cell_h_backward(g, *ins), n)


# ---------------------------------- second derivatives (create_graph), as jitgrad ops
def _five(t: Tensor):
    """``[dgates, dstate]``'s five quarters (``i, f, g, o, state``)."""
    return t.chunk(5, -1)


def _c_bwd_vjp(gg, ins, out, p, n):
    """The VJP of ``[g t i(1-i), g c f(1-f), g i (1-t^2), 0, g f]`` (``i, f`` sigmoids and
    ``t`` the tanh of the gates' quarters) w.r.t. ``g``, ``gates`` and ``c``."""
    from ...creation import zeros_like
    from ...ops.concat import cat
    from ...ops.elementwise import sigmoid, tanh

    g, gates, c = ins
    qi, qf, qg, qo = gates.chunk(4, -1)
    i, f, t = sigmoid(qi), sigmoid(qf), tanh(qg)
    di, df, dt = i * (1.0 - i), f * (1.0 - f), 1.0 - t * t  # the activations' slopes
    wi, wf, wg, _, wc = _five(gg)
    d_g = wi * t * di + wf * c * df + wg * i * dt + wc * f
    d_gates = cat([wi * g * t * di * (1.0 - 2.0 * i) + wg * g * dt * di,
                   wf * g * c * df * (1.0 - 2.0 * f) + wc * g * df,
                   wi * g * di * dt - wg * g * i * 2.0 * t * dt,
                   zeros_like(qo)], -1)
    d_c = wf * g * df
    return (d_g if n[0] else None, d_gates if n[1] else None, d_c if n[2] else None)


def _h_bwd_vjp(gg, ins, out, p, n):
    """The VJP of ``[0, 0, 0, g t o(1-o), g o (1-t^2)]`` (``o`` the output gate's sigmoid,
    ``t = tanh(c)``) w.r.t. ``g``, ``gates`` and ``c``."""
    from ...creation import zeros_like
    from ...ops.concat import cat
    from ...ops.elementwise import sigmoid, tanh

    g, gates, c = ins
    qi, qf, qg, qo = gates.chunk(4, -1)
    o, t = sigmoid(qo), tanh(c)
    do, dt = o * (1.0 - o), 1.0 - t * t
    _, _, _, wo, wc = _five(gg)
    d_g = wo * t * do + wc * o * dt
    z = zeros_like(qi)
    d_gates = cat([z, z, z, wo * g * t * do * (1.0 - 2.0 * o) + wc * g * dt * do], -1)
    d_c = wo * g * do * dt - wc * g * o * 2.0 * t * dt
    return (d_g if n[0] else None, d_gates if n[1] else None, d_c if n[2] else None)


LSTM_CELL_C = defop(name="lstm_cell_c", kind=OPAQUE, inputs=("gates", "c"), params=(),
                    node="AddBackward0", ref=_c_ref, vjp=_c_vjp, save=(0, 1),
                    cast_grads=True, samples=S.lstm_cell)
LSTM_CELL_H = defop(name="lstm_cell_h", kind=OPAQUE, inputs=("gates", "c"), params=(),
                    node="MulBackward0", ref=_h_ref, vjp=_h_vjp, save=(0, 1),
                    cast_grads=True, samples=S.lstm_cell)
LSTM_CELL_C_BACKWARD = defop(name="lstm_cell_c_backward", kind=OPAQUE,
                             inputs=("g", "gates", "c"), params=(),
                             node="LstmCellCBackwardBackward0", ref=_c_bwd_ref,
                             vjp=_c_bwd_vjp, save=(0, 1, 2), cast_grads=True,
                             samples=S.lstm_cell_backward)
LSTM_CELL_H_BACKWARD = defop(name="lstm_cell_h_backward", kind=OPAQUE,
                             inputs=("g", "gates", "c"), params=(),
                             node="LstmCellHBackwardBackward0", ref=_h_bwd_ref,
                             vjp=_h_bwd_vjp, save=(0, 1, 2), cast_grads=True,
                             samples=S.lstm_cell_backward)


def _check(gates: Tensor, c: Tensor, name: str) -> None:
    gs, cs = tuple(gates._data.shape), tuple(c._data.shape)
    if not gs or gs[-1] % 4 or gs[:-1] + (gs[-1] // 4,) != cs:
        raise RuntimeError(f"{name}: gates of shape {list(gs)} need a last dim of 4 * H and "
                           f"a state of shape [..., H]; got a state of shape {list(cs)}")
    if gates._data.dtype != c._data.dtype:
        raise RuntimeError(f"{name}: expected gates and state of one dtype, got "
                           f"{gates.dtype} and {c.dtype}")


@api(LSTM_CELL_C)
def lstm_cell_c(gates: Tensor, c: Tensor) -> Tensor:
    """An LSTM's new cell state from its gate pre-activations ``gates`` (``..., 4H``: input,
    forget, cell, output) and cell state ``c``: ``sigmoid(f) * c + sigmoid(i) * tanh(g)``."""
    _check(gates, c, "lstm_cell_c")
    return call(LSTM_CELL_C, (gates, c), None)


@api(LSTM_CELL_H)
def lstm_cell_h(gates: Tensor, c: Tensor) -> Tensor:
    """An LSTM's new hidden state from its gate pre-activations and its *new* cell state:
    ``sigmoid(o) * tanh(c)``."""
    _check(gates, c, "lstm_cell_h")
    return call(LSTM_CELL_H, (gates, c), None)


@api(LSTM_CELL_C_BACKWARD)
def lstm_cell_c_backward(g: Tensor, gates: Tensor, c: Tensor) -> Tensor:
    """``[dgates, dc]`` (``..., 5H``) of :func:`lstm_cell_c` for the output gradient ``g``."""
    return call(LSTM_CELL_C_BACKWARD, (g, gates, c), None)


@api(LSTM_CELL_H_BACKWARD)
def lstm_cell_h_backward(g: Tensor, gates: Tensor, c: Tensor) -> Tensor:
    """``[dgates, dc]`` (``..., 5H``) of :func:`lstm_cell_h` for the output gradient ``g``."""
    return call(LSTM_CELL_H_BACKWARD, (g, gates, c), None)
