"""``torch.signal`` for jitgrad: the window functions of ``torch.signal.windows``
(:mod:`jitgrad.signal.windows`; ``from jitgrad.signal.windows import hann`` works as
PyTorch's).

Loaded on first use (``jitgrad.signal``: ``jitgrad``'s module ``__getattr__``).

>>> import jitgrad
>>> jitgrad.signal.windows.hann(4)
tensor([0.0000, 0.7500, 0.7500, 0.0000])
"""

from . import windows

__all__ = ["windows"]
