"""PyTorch's top-level numeric constants: ``pi``, ``e``, ``inf``, ``nan`` (Python floats, as
``torch.pi``...) and ``newaxis`` (None, as ``torch.newaxis`` and ``numpy.newaxis``).

>>> import jitgrad
>>> jitgrad.pi, jitgrad.ones(3)[jitgrad.newaxis].shape
(3.141592653589793, jitgrad.Size([1, 3]))
"""

from __future__ import annotations

import math

__all__ = ["pi", "e", "inf", "nan", "newaxis"]

pi: float = math.pi
e: float = math.e
inf: float = math.inf
nan: float = math.nan
newaxis: None = None
