"""Recurrent layers with PyTorch's parameters, initialisation and results: ``RNN``, ``LSTM``
(gates i, f, g, o), ``GRU`` (gates r, z, n) -- any number of layers, ``batch_first``,
``bidirectional``, dropout between layers, unbatched inputs -- and the cells ``RNNCell``,
``LSTMCell``, ``GRUCell``. Each step is jitgrad ops (the input projections of a whole
sequence are one matrix product), so they differentiate, run on every device, and a
compiled function traces the unrolled steps."""

from __future__ import annotations

import math

from .. import creation, dtypes
from ..ops.concat import cat, stack
from ..ops.elementwise import relu, sigmoid, tanh
from ..tensor import Tensor
from . import functional as F
from . import init
from .layers import place
from .module import Module
from .parameter import Parameter

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _step(mode: str, xw: Tensor, h: Tensor, c: Tensor | None, w_hh: Tensor,
          b_hh: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """One time step from the input's projection ``xw`` (``x @ W_ih.T + b_ih``)."""
    hw = F.linear(h, w_hh, b_hh)
    if mode == "LSTM":
        i, f, g, o = (xw + hw).chunk(4, -1)
        c = sigmoid(f) * c + sigmoid(i) * tanh(g)
        return sigmoid(o) * tanh(c), c
    if mode == "GRU":
        xr, xz, xn = xw.chunk(3, -1)
        hr, hz, hn = hw.chunk(3, -1)
        r, z = sigmoid(xr + hr), sigmoid(xz + hz)
        n = tanh(xn + r * hn)
        return (1.0 - z) * n + z * h, None
    pre = xw + hw
    return (tanh(pre) if mode == "RNN_TANH" else relu(pre)), None


class _RNNBase(Module):
    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        dt = None if dtype is None else dtypes.to_dtype(dtype)
        gates = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                width = input_size if layer == 0 else hidden_size * dirs
                self.register_parameter("weight_ih" + sfx, Parameter(
                    creation.empty(gates, width, dtype=dt, device="cpu")))
                self.register_parameter("weight_hh" + sfx, Parameter(
                    creation.empty(gates, hidden_size, dtype=dt, device="cpu")))
                if bias:
                    self.register_parameter("bias_ih" + sfx, Parameter(
                        creation.empty(gates, dtype=dt, device="cpu")))
                    self.register_parameter("bias_hh" + sfx, Parameter(
                        creation.empty(gates, dtype=dt, device="cpu")))
        self.reset_parameters()
        place(self, device)

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in ``[-1/sqrt(hidden_size), 1/sqrt(hidden_size)]``."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _weights(self, layer: int, d: int) -> tuple:
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        return (getattr(self, "weight_ih" + sfx), getattr(self, "weight_hh" + sfx),
                getattr(self, "bias_ih" + sfx, None), getattr(self, "bias_hh" + sfx, None))

    def forward(self, input: Tensor, hx=None):
        lstm = self.mode == "LSTM"
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.ndim}D instead")
        unbatched = input.ndim == 2
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first
                                                  else input)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")
        steps, n = x.shape[0], x.shape[1]
        if steps == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        dirs = 2 if self.bidirectional else 1
        h0, c0 = self._initial(hx, n, dirs, unbatched, x)
        h_n, c_n = [], []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, d)
                k = layer * dirs + d
                h, c = h0[k], (c0[k] if lstm else None)
                xw = F.linear(layer_in, w_ih, b_ih)  # every step's input projection
                seq = []
                order = range(steps - 1, -1, -1) if d else range(steps)
                for t in order:
                    h, c = _step(self.mode, xw[t], h, c, w_hh, b_hh)
                    seq.append(h)
                if d:
                    seq.reverse()
                outs.append(stack(seq, 0))
                h_n.append(h)
                if lstm:
                    c_n.append(c)
            layer_in = outs[0] if dirs == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        out = layer_in
        hn = stack(h_n, 0)
        cn = stack(c_n, 0) if lstm else None
        if unbatched:
            out, hn = out.squeeze(1), hn.squeeze(1)
            cn = cn.squeeze(1) if lstm else None
        elif self.batch_first:
            out = out.transpose(0, 1)
        return (out, (hn, cn)) if lstm else (out, hn)

    def _initial(self, hx, n: int, dirs: int, unbatched: bool, x: Tensor):
        layers = self.num_layers * dirs
        lstm = self.mode == "LSTM"
        if hx is None:
            z = creation.zeros(layers, n, self.hidden_size, dtype=x.dtype, device=x.device)
            return z, (z if lstm else None)
        h, c = hx if lstm else (hx, None)
        if unbatched:
            h = h.unsqueeze(1)
            c = c.unsqueeze(1) if lstm else None
        want = (layers, n, self.hidden_size)
        for name, t in (("h0", h), ("c0", c)) if lstm else (("hx", h),):
            if tuple(t.shape) != want:
                raise RuntimeError(f"Expected hidden size {want}, got {tuple(t.shape)}"
                                   if name != "c0" else
                                   f"Expected hidden[1] size {want}, got {tuple(t.shape)}")
        return h, c

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    """Elman RNN: ``h' = tanh(x W_ih.T + b_ih + h W_hh.T + b_hh)`` (``nonlinearity="relu"``:
    ReLU)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    """Long short-term memory: returns ``output, (h_n, c_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        if proj_size:
            raise NotImplementedError("LSTM: proj_size is not supported by jitgrad")
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device, dtype)
        self.proj_size = 0


class GRU(_RNNBase):
    """Gated recurrent unit: returns ``output, h_n``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device, dtype)


class _CellBase(Module):
    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool,
                 device, dtype) -> None:
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.bias = (mode, input_size,
                                                                   hidden_size, bias)
        dt = None if dtype is None else dtypes.to_dtype(dtype)
        gates = _GATES[mode] * hidden_size
        self.weight_ih = Parameter(creation.empty(gates, input_size, dtype=dt, device="cpu"))
        self.weight_hh = Parameter(creation.empty(gates, hidden_size, dtype=dt, device="cpu"))
        if bias:
            self.bias_ih = Parameter(creation.empty(gates, dtype=dt, device="cpu"))
            self.bias_hh = Parameter(creation.empty(gates, dtype=dt, device="cpu"))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        _RNNBase.reset_parameters(self)
        place(self, device)

    def reset_parameters(self) -> None:
        _RNNBase.reset_parameters(self)

    def _run(self, input: Tensor, hx):
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.ndim}D instead")
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        lstm = self.mode == "LSTM"
        if hx is None:
            z = creation.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
            h, c = z, (z if lstm else None)
        else:
            h, c = hx if lstm else (hx, None)
            if unbatched:
                h = h.unsqueeze(0)
                c = c.unsqueeze(0) if lstm else None
        xw = F.linear(x, self.weight_ih, self.bias_ih)
        h, c = _step(self.mode, xw, h, c, self.weight_hh, self.bias_hh)
        if unbatched:
            h = h.squeeze(0)
            c = c.squeeze(0) if lstm else None
        return (h, c) if lstm else h

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity=relu"
        return s


class RNNCell(_CellBase):
    """One step of :class:`RNN`."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._run(input, hx)


class LSTMCell(_CellBase):
    """One step of :class:`LSTM`: returns ``(h', c')``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)

    def forward(self, input: Tensor, hx=None) -> tuple[Tensor, Tensor]:
        return self._run(input, hx)


class GRUCell(_CellBase):
    """One step of :class:`GRU`."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._run(input, hx)
