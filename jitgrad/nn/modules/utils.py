"""PyTorch's ``torch.nn.modules.utils``: the argument normalisers layers use --
``_single`` / ``_pair`` / ``_triple`` / ``_quadruple`` (an int repeated into a tuple, an
iterable made a tuple), ``_ntuple(n)`` making one for any ``n``, ``_reverse_repeat_tuple``
(``F.pad``'s amounts from a padding tuple), ``_list_with_default``, and
``consume_prefix_in_state_dict_if_present`` (a DDP checkpoint's ``module.`` prefix stripped).

>>> from jitgrad.nn.modules.utils import _pair, _triple
>>> _pair(3), _triple((1, 2, 3)), _pair([4, 5])
((3, 3), (1, 2, 3), (4, 5))
"""

from __future__ import annotations

import collections.abc
from collections.abc import Callable
from itertools import repeat
from typing import Any

__all__ = ["_ntuple", "_single", "_pair", "_triple", "_quadruple", "_reverse_repeat_tuple",
           "_list_with_default", "consume_prefix_in_state_dict_if_present"]


def _ntuple(n: int, name: str = "parse") -> Callable[[Any], tuple]:
    """A function turning an iterable into a tuple (as it is) and anything else into a
    tuple of ``n`` copies of it; named ``name``."""
    def parse(x: Any) -> tuple:
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    """``t`` reversed with each element repeated ``n`` times: ``(1, 2)`` with ``n=2`` is
    ``(2, 2, 1, 1)`` (a padding tuple as ``F.pad``'s amounts, last dim first)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size: Any, defaults: list[int]) -> list[int]:
    """``out_size`` (an int, or a sequence whose None entries take the trailing
    ``defaults``' values) as a list, as adaptive pooling reads ``output_size``."""
    if isinstance(out_size, int):
        return [out_size]
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d
            for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict: dict, prefix: str) -> None:
    """Strip ``prefix`` from the keys of ``state_dict`` that start with it, in place (and
    from its ``_metadata`` keys, as PyTorch's): a state dict saved from a
    ``DistributedDataParallel`` model (``module.``) then loads into the bare model."""
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            if key and (key == prefix.replace(".", "") or key.startswith(prefix)):
                metadata[key[len(prefix):]] = metadata.pop(key)
