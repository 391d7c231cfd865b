"""``get_worker_info`` and ``default_convert``, as ``torch.utils.data``. jitgrad's
``DataLoader`` loads in the main process (no worker processes), so there is never worker
information."""

from __future__ import annotations

import collections.abc
import copy
import re
from typing import Any

import numpy as np

from ...tensor import Tensor

__all__ = ["get_worker_info", "default_convert"]

_STR_OR_OBJECT = re.compile(r"[SaUO]")


def get_worker_info() -> None:
    """Information about the data-loading worker process this runs in: None, the main
    process (jitgrad's ``DataLoader`` has no workers)."""
    return None


def default_convert(data: Any) -> Any:
    """NumPy arrays and scalars in ``data`` converted to tensors (arrays of strings or
    objects, and everything else, left as they are); mappings, named tuples and sequences
    converted element by element (a plain tuple becomes a list, as in PyTorch). What a
    ``DataLoader`` with ``batch_size=None`` applies to each sample.

    >>> import numpy as np
    >>> default_convert({"x": np.arange(2), "name": "a"})
    {'x': tensor([0, 1]), 'name': 'a'}
    """
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_,
                                                                           np.bytes_)):
        if isinstance(data, np.ndarray) and _STR_OR_OBJECT.search(data.dtype.str):
            return data
        from ...creation import as_tensor

        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({k: default_convert(data[k]) for k in data})
                return clone
            return type(data)({k: default_convert(data[k]) for k in data})
        except TypeError:
            return {k: default_convert(data[k]) for k in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
