"""Recurrent layers with PyTorch's parameters, initialisation and results: ``RNN``, ``LSTM``
(gates i, f, g, o), ``GRU`` (gates r, z, n) -- any number of layers, ``batch_first``,
``bidirectional``, dropout between layers, unbatched inputs, packed batches
(``nn.utils.rnn.PackedSequence``: each step runs on the sequences still going, each final
state is its sequence's last step) -- their base ``RNNBase``, and the cells ``RNNCell``,
``LSTMCell``, ``GRUCell`` (base ``RNNCellBase``). A padded float32/float64 LSTM without
``proj_size`` runs each layer and direction as one op (``ops/nnops/rnn_layer.py``, PyTorch's
``MkldnnRnnLayerBackward0``), a GRU and an RNN likewise (``ops/nnops/gru_layer.py``,
``elman_layer.py``); otherwise each step is jitgrad ops (the input projections of a whole
sequence are one matrix product). Either way they differentiate (to any order), run on every
device, and a compiled function traces them."""

from __future__ import annotations

import math
import warnings

from .. import creation, dtypes
from ..ops.concat import cat, stack
from ..ops.elementwise import relu, sigmoid, tanh
from ..ops.nnops.elman_layer import elman_layer
from ..ops.nnops.gru_layer import gru_layer
from ..ops.nnops.rnn_cells import lstm_cell_c, lstm_cell_h
from ..ops.nnops.rnn_layer import lstm_layer, lstm_layer_views
from ..tensor import Tensor
from . import functional as F
from . import init
from .layers import place
from .module import Module
from .parameter import Parameter

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
#: dtypes whose padded layers run as one op each (float16 runs step by step)
_WHOLE_LAYER_DTYPES = (dtypes.float32, dtypes.float64)


def _step(mode: str, xw: Tensor, h: Tensor, c: Tensor | None, w_hh: Tensor,
          b_hh: Tensor | None, w_hr: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """One time step from the input's projection ``xw`` (``x @ W_ih.T + b_ih``); an LSTM
    with ``proj_size`` projects its hidden state by ``w_hr``."""
    hw = F.linear(h, w_hh, b_hh)
    if mode == "LSTM":  # (the cell's element-wise part: two ops, ops/nnops/rnn_cells.py)
        gates = xw + hw
        c = lstm_cell_c(gates, c)
        h = lstm_cell_h(gates, c)
        return (h if w_hr is None else F.linear(h, w_hr)), c
    if mode == "GRU":
        xr, xz, xn = xw.chunk(3, -1)
        hr, hz, hn = hw.chunk(3, -1)
        r, z = sigmoid(xr + hr), sigmoid(xz + hz)
        n = tanh(xn + r * hn)
        return (1.0 - z) * n + z * h, None
    pre = xw + hw
    return (tanh(pre) if mode == "RNN_TANH" else relu(pre)), None


class RNNBase(Module):
    """The base of :class:`RNN`, :class:`LSTM` and :class:`GRU` (``mode``: ``"RNN_TANH"``,
    ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``): their parameters ``weight_ih_l{k}[_reverse]``...
    and the loop over layers, directions and steps, for padded or packed input."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so "
                          f"non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        self.proj_size = proj_size
        out_size = proj_size or hidden_size  # the hidden state's (and output's) features
        dt = None if dtype is None else dtypes.to_dtype(dtype)
        gates = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                width = input_size if layer == 0 else out_size * dirs
                self.register_parameter("weight_ih" + sfx, Parameter(
                    creation.empty(gates, width, dtype=dt, device="cpu")))
                self.register_parameter("weight_hh" + sfx, Parameter(
                    creation.empty(gates, out_size, dtype=dt, device="cpu")))
                if bias:
                    self.register_parameter("bias_ih" + sfx, Parameter(
                        creation.empty(gates, dtype=dt, device="cpu")))
                    self.register_parameter("bias_hh" + sfx, Parameter(
                        creation.empty(gates, dtype=dt, device="cpu")))
                if proj_size:
                    self.register_parameter("weight_hr" + sfx, Parameter(
                        creation.empty(proj_size, hidden_size, dtype=dt, device="cpu")))
        # PyTorch's order, fixed here (pruning re-registers a weight as name_orig)
        self._weight_names = tuple(self._parameters)
        self.reset_parameters()
        place(self, device)

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in ``[-1/sqrt(hidden_size), 1/sqrt(hidden_size)]``."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    @property
    def _flat_weights_names(self) -> list[str]:
        """The parameter names, layer by layer and direction by direction (PyTorch's
        order)."""
        return list(self._weight_names)

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list]:
        """The parameters of each layer and direction: ``[w_ih, w_hh(, b_ih, b_hh)(,
        w_hr)]``."""
        per = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        flat = self._flat_weights
        return [flat[i:i + per] for i in range(0, len(flat), per)]

    def flatten_parameters(self) -> None:
        """Nothing to do: jitgrad keeps no fused weight buffer (PyTorch's cuDNN one)."""

    def _weights(self, layer: int, d: int) -> tuple:
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        return (getattr(self, "weight_ih" + sfx), getattr(self, "weight_hh" + sfx),
                getattr(self, "bias_ih" + sfx, None), getattr(self, "bias_hh" + sfx, None),
                getattr(self, "weight_hr" + sfx, None))

    def forward(self, input, hx=None):
        if isinstance(input, tuple):  # a PackedSequence (nn.utils.rnn)
            return self._forward_packed(input, hx)
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
        w_dt = self.weight_ih_l0.dtype
        if x.dtype != w_dt:
            raise ValueError(f"RNN input dtype ({x.dtype}) does not match weight dtype "
                             f"({w_dt}). Convert input: input.to({w_dt}), or convert model: "
                             f"model.to({x.dtype})")
        dirs = 2 if self.bidirectional else 1
        h0, c0 = self._initial(hx, n, dirs, unbatched, x)
        whole_layers = not self.proj_size and x.dtype in _WHOLE_LAYER_DTYPES
        h_n, c_n = [], []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, d)
                k = layer * dirs + d
                h, c = h0[k], (c0[k] if lstm else None)
                if whole_layers and lstm:  # one op per layer and direction (rnn_layer.py)
                    seq, h, c = lstm_layer_views(
                        lstm_layer(layer_in, h, c, w_ih, w_hh, b_ih, b_hh, bool(d)),
                        steps, n, self.hidden_size, bool(d))
                    outs.append(seq)
                    h_n.append(h)
                    c_n.append(c)
                    continue
                if whole_layers:  # a GRU or an Elman RNN: gru_layer.py, elman_layer.py
                    seq = gru_layer(layer_in, h, w_ih, w_hh, b_ih, b_hh, bool(d)) \
                        if self.mode == "GRU" else elman_layer(
                            layer_in, h, w_ih, w_hh, b_ih, b_hh,
                            "relu" if self.mode == "RNN_RELU" else "tanh", bool(d))
                    outs.append(seq)
                    h_n.append(seq[0 if d else steps - 1])
                    continue
                xw = F.linear(layer_in, w_ih, b_ih)  # every step's input projection
                seq = []
                order = range(steps - 1, -1, -1) if d else range(steps)
                for t in order:
                    h, c = _step(self.mode, xw[t], h, c, w_hh, b_hh, w_hr)
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
        out_size = self.proj_size or self.hidden_size
        if hx is None:
            z = creation.zeros(layers, n, self.hidden_size, dtype=x.dtype, device=x.device)
            hz = z if out_size == self.hidden_size else creation.zeros(
                layers, n, out_size, dtype=x.dtype, device=x.device)
            return hz, (z if lstm else None)
        h, c = hx if lstm else (hx, None)
        rank = 2 if unbatched else 3
        kind = "unbatched 2-D" if unbatched else "batched 3-D"
        if lstm and (h.ndim != rank or c.ndim != rank):
            raise RuntimeError(f"For {kind} input, hx and cx should also be {rank}-D but got "
                               f"({h.ndim}-D, {c.ndim}-D) tensors")
        if not lstm and h.ndim != rank:
            raise RuntimeError(f"For {kind} input, hx should also be {rank}-D but got "
                               f"{h.ndim}-D tensor")
        if unbatched:
            h = h.unsqueeze(1)
            c = c.unsqueeze(1) if lstm else None
        wants = {"hidden[0]": (layers, n, out_size), "hidden[1]": (layers, n, self.hidden_size),
                 "hidden": (layers, n, out_size)}
        for what, t in (("hidden[0]", h), ("hidden[1]", c)) if lstm else (("hidden", h),):
            if tuple(t.shape) != wants[what]:
                raise RuntimeError(f"Expected {what} size {wants[what]}, got {list(t.shape)}")
        return h, c

    def _forward_packed(self, packed, hx):
        """A :class:`~jitgrad.nn.utils.rnn.PackedSequence` input: step ``t`` runs on the
        first ``batch_sizes[t]`` sequences (sorted by decreasing length), so each sequence's
        final state is its state at its own last step (the reverse direction starts there
        from the initial state). Returns a PackedSequence and the final states, in the
        batch's original order."""
        from .utils.rnn import PackedSequence

        data, batch_sizes, sorted_indices, unsorted_indices = packed
        lstm = self.mode == "LSTM"
        if data.ndim != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.ndim}")
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {data.shape[-1]}")
        sizes = [int(b) for b in batch_sizes.tolist()]
        dirs = 2 if self.bidirectional else 1
        if hx is not None and sorted_indices is not None:
            hx = tuple(t.index_select(1, sorted_indices) for t in hx) if lstm \
                else hx.index_select(1, sorted_indices)
        h0, c0 = self._initial(hx, sizes[0], dirs, False, data)
        starts = [0]
        for b in sizes:
            starts.append(starts[-1] + b)
        h_n, c_n = [], []
        layer_in = data
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, d)
                k = layer * dirs + d
                xw = F.linear(layer_in, w_ih, b_ih)  # every step's input projection
                run = _packed_reverse if d else _packed_forward
                out, h, c = run(self.mode, xw, sizes, starts, h0[k],
                                c0[k] if lstm else None, w_hh, b_hh, w_hr)
                outs.append(out)
                h_n.append(h)
                if lstm:
                    c_n.append(c)
            layer_in = outs[0] if dirs == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        hn = stack(h_n, 0)
        cn = stack(c_n, 0) if lstm else None
        if unsorted_indices is not None:
            hn = hn.index_select(1, unsorted_indices)
            cn = cn.index_select(1, unsorted_indices) if lstm else None
        out = PackedSequence(layer_in, batch_sizes, sorted_indices, unsorted_indices)
        return (out, (hn, cn)) if lstm else (out, hn)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
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


def _packed_forward(mode: str, xw: Tensor, sizes: list, starts: list, h0: Tensor,
                    c0: Tensor | None, w_hh: Tensor, b_hh: Tensor | None,
                    w_hr: Tensor | None = None):
    """One direction forward in time over a packed batch: the outputs (packed) and each
    sequence's state after its last step (rows of sequences that ended are set aside as
    the batch shrinks)."""
    h, c = h0, c0
    outs, done_h, done_c = [], [], []
    for t, bs in enumerate(sizes):
        if bs < h.shape[0]:
            done_h.append(h[bs:])
            h = h[:bs]
            if c is not None:
                done_c.append(c[bs:])
                c = c[:bs]
        h, c = _step(mode, xw[starts[t]:starts[t + 1]], h, c, w_hh, b_hh, w_hr)
        outs.append(h)
    if done_h:
        h = cat([h, *reversed(done_h)], 0)
        c = cat([c, *reversed(done_c)], 0) if c is not None else None
    return cat(outs, 0), h, c


def _packed_reverse(mode: str, xw: Tensor, sizes: list, starts: list, h0: Tensor,
                    c0: Tensor | None, w_hh: Tensor, b_hh: Tensor | None,
                    w_hr: Tensor | None = None):
    """One direction backward in time over a packed batch: each sequence starts at its own
    last step from its initial state (rows join as the batch grows)."""
    n = sizes[-1]
    h, c = h0[:n], (c0[:n] if c0 is not None else None)
    outs = []
    for t in range(len(sizes) - 1, -1, -1):
        bs = sizes[t]
        if bs > n:
            h = cat([h, h0[n:bs]], 0)
            c = cat([c, c0[n:bs]], 0) if c is not None else None
            n = bs
        h, c = _step(mode, xw[starts[t]:starts[t + 1]], h, c, w_hh, b_hh, w_hr)
        outs.append(h)
    outs.reverse()
    return cat(outs, 0), h, c


class RNN(RNNBase):
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
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory: returns ``output, (h_n, c_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """Gated recurrent unit: returns ``output, h_n``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


class RNNCellBase(Module):
    """The base of the cells: ``weight_ih`` (``num_chunks * hidden_size`` rows),
    ``weight_hh``, ``bias_ih``, ``bias_hh``, initialised as the layers' (PyTorch's
    signature)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        dt = None if dtype is None else dtypes.to_dtype(dtype)
        gates = num_chunks * hidden_size
        self.weight_ih = Parameter(creation.empty(gates, input_size, dtype=dt, device="cpu"))
        self.weight_hh = Parameter(creation.empty(gates, hidden_size, dtype=dt, device="cpu"))
        if bias:
            self.bias_ih = Parameter(creation.empty(gates, dtype=dt, device="cpu"))
            self.bias_hh = Parameter(creation.empty(gates, dtype=dt, device="cpu"))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()
        place(self, device)

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in ``[-1/sqrt(hidden_size), 1/sqrt(hidden_size)]``."""
        RNNBase.reset_parameters(self)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class _CellBase(RNNCellBase):
    """A cell of ``mode`` (``_GATES``): its step."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool,
                 device, dtype) -> None:
        super().__init__(input_size, hidden_size, bias, _GATES[mode], device, dtype)
        self.mode = mode

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
            for what, t in (("hx[0]", h), ("hx[1]", c)) if lstm else (("hidden", h),):
                if t.ndim not in (1, 2):
                    raise ValueError(f"{type(self).__name__}: Expected {what} to be 1D or 2D, "
                                     f"got {t.ndim}D instead")
            if unbatched:
                h = h.unsqueeze(0)
                c = c.unsqueeze(0) if lstm else None
        self._check_sizes(x, (h, c) if lstm else (h,))
        xw = F.linear(x, self.weight_ih, self.bias_ih)
        h, c = _step(self.mode, xw, h, c, self.weight_hh, self.bias_hh)
        if unbatched:
            h = h.squeeze(0)
            c = c.squeeze(0) if lstm else None
        return (h, c) if lstm else h


    def _check_sizes(self, x: Tensor, states: tuple) -> None:
        """PyTorch's errors for an input or state of the wrong size (``x`` and the states
        batched)."""
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]} expected "
                               f"{self.input_size}")
        for k, t in enumerate(states):
            if t.shape[0] != x.shape[0]:
                raise RuntimeError(f"Input batch size {x.shape[0]} doesn't match hidden{k} "
                                   f"batch size {t.shape[0]}")
            if t.ndim != 2 or t.shape[1] != self.hidden_size:
                got = t.shape[1] if t.ndim > 1 else t.shape[-1]
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {got}, "
                                   f"expected {self.hidden_size}")


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
