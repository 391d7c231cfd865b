"""PyTorch's ``torch.nn.modules.rnn`` path: The recurrent layers and cells. The classes are
jitgrad.nn's own (re-exported here)."""

from __future__ import annotations

from ..recurrent import (  # noqa: F401 - re-exported
    GRU,
    LSTM,
    RNN,
    GRUCell,
    LSTMCell,
    RNNBase,
    RNNCell,
    RNNCellBase,
)

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell",
           "RNNCellBase"]
