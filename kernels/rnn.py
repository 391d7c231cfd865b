"""Per-step kernels of the LSTM layer op (``jitgrad/ops/nnops/rnn_layer.py``) on the CPU.

A step's cell is a dozen element-wise operations on ``(B, H)`` blocks; as NumPy calls they
cost ~10 us (forward) and ~25 us (backward) a step on small batches, more than the step's
matrix product. These loops compute them in one vectorised pass in the arrays' dtype, with
jitgrad's kernel math (``vmath``: ``sigmoid``, ``tanh``, within their documented ulp
bounds of NumPy's), so the values differ from the NumPy form in the last bits: the layer op
uses these on the CPU wherever it runs -- eager mode and compiled plans alike -- and the
NumPy form on other devices and under ``create_graph``. Gates are in PyTorch's order
``i, f, g, o``; each row is one contiguous loop over ``H`` (blocks of ``(B, H)`` views).
"""

from __future__ import annotations

from .cached import cached_njit
from .vmath import KERNEL_FASTMATH, sigmoid, tanh

__all__ = ["lstm_cell", "lstm_cell_backward"]


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH)
def lstm_cell(gates, c_prev, c_out, h_out) -> None:
    """``c_out = sigmoid(f) * c_prev + sigmoid(i) * tanh(g)``, ``h_out = sigmoid(o) *
    tanh(c_out)`` for the gate pre-activations ``gates`` (``B, 4H``)."""
    batch, hidden = c_prev.shape
    for b in range(batch):
        gi, gf = gates[b, :hidden], gates[b, hidden:2 * hidden]
        gg, go = gates[b, 2 * hidden:3 * hidden], gates[b, 3 * hidden:]
        cp, co, ho = c_prev[b], c_out[b], h_out[b]
        for j in range(hidden):
            c = sigmoid(gf[j]) * cp[j] + sigmoid(gi[j]) * tanh(gg[j])
            co[j] = c
            ho[j] = sigmoid(go[j]) * tanh(c)


@cached_njit(nogil=True, fastmath=KERNEL_FASTMATH)
def lstm_cell_backward(gh, dh_next, gc, dc_next, gates, c, c_prev, dgates, dc_prev) -> None:
    """One step back: the gate gradients into ``dgates`` (``B, 4H``) and the previous cell
    state's into ``dc_prev``, for the hidden state's gradient ``gh + dh_next`` and the cell
    state's ``gc + dc_next`` (the output's and the next step's)."""
    batch, hidden = c.shape
    one = c.dtype.type(1.0)
    for b in range(batch):
        gi, gf = gates[b, :hidden], gates[b, hidden:2 * hidden]
        gg, go = gates[b, 2 * hidden:3 * hidden], gates[b, 3 * hidden:]
        di, df = dgates[b, :hidden], dgates[b, hidden:2 * hidden]
        dg, do = dgates[b, 2 * hidden:3 * hidden], dgates[b, 3 * hidden:]
        for j in range(hidden):
            i, f, o = sigmoid(gi[j]), sigmoid(gf[j]), sigmoid(go[j])
            g, tc = tanh(gg[j]), tanh(c[b, j])
            dh = gh[b, j] + dh_next[b, j]
            do[j] = dh * tc * o * (one - o)
            dc = dh * o * (one - tc * tc) + (gc[b, j] + dc_next[b, j])
            di[j] = dc * g * i * (one - i)
            df[j] = dc * c_prev[b, j] * f * (one - f)
            dg[j] = dc * i * (one - g * g)
            dc_prev[b, j] = dc * f
