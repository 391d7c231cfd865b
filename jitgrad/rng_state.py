"""A generator's state as a ``uint8`` tensor, as PyTorch's ``get_rng_state`` gives it.

jitgrad's generators are NumPy PCG64 streams, so the bytes are not PyTorch's 5056-byte
Mersenne-twister state: they are PCG64's 128-bit state and increment, its cached 32-bit
half-word and the seed (``initial_seed``), behind a 4-byte tag, 49 bytes in all. A state
taken with :func:`get_state` and given back to :func:`set_state` makes the generator draw
the same numbers again; one of another length or tag raises PyTorch's error.
"""

from __future__ import annotations

import numpy as np

__all__ = ["STATE_SIZE", "get_state", "set_state", "get_rng_state", "set_rng_state"]

_TAG = b"JGP1"  # jitgrad, PCG64, layout 1
STATE_SIZE = len(_TAG) + 16 + 16 + 1 + 4 + 8


def _pack(raw: dict, seed: int) -> np.ndarray:
    s = raw["state"]
    data = (_TAG + int(s["state"]).to_bytes(16, "little") + int(s["inc"]).to_bytes(16, "little")
            + bytes([int(raw["has_uint32"]) & 1]) + int(raw["uinteger"]).to_bytes(4, "little")
            + (int(seed) % 2 ** 64).to_bytes(8, "little"))
    return np.frombuffer(data, dtype=np.uint8).copy()


def _unpack(buf: bytes) -> tuple[dict, int]:
    o = len(_TAG)
    state = int.from_bytes(buf[o:o + 16], "little")
    inc = int.from_bytes(buf[o + 16:o + 32], "little")
    has = buf[o + 32]
    uinteger = int.from_bytes(buf[o + 33:o + 37], "little")
    seed = int.from_bytes(buf[o + 37:o + 45], "little")
    raw = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
           "has_uint32": int(has), "uinteger": uinteger}
    return raw, seed


def get_state(generator):
    """``generator``'s state as a new 1-D ``uint8`` CPU tensor."""
    from .tensor import wrap

    return wrap(_pack(generator._state(), generator._seed))


def set_state(generator, new_state) -> None:
    """Put ``generator`` in the state ``new_state`` (a ``uint8`` tensor from
    :func:`get_state`)."""
    from . import dtypes
    from .tensor import Tensor

    if not isinstance(new_state, Tensor) or new_state.dtype is not dtypes.uint8:
        raise TypeError("RNG state must be a torch.ByteTensor")
    buf = np.ascontiguousarray(new_state.detach().cpu().numpy()).reshape(-1).tobytes()
    if len(buf) != STATE_SIZE or new_state.dim() != 1:
        raise RuntimeError(f"Expected a CPUGeneratorImplState of size {STATE_SIZE} but found "
                           f"the input RNG state size to be {len(buf)}")
    if buf[:len(_TAG)] != _TAG:
        raise RuntimeError("RNG state is corrupt: it was not made by jitgrad's get_rng_state")
    raw, seed = _unpack(buf)
    generator._restore(raw)
    generator._seed = seed


def get_rng_state():
    """The default generator's state (a ``uint8`` tensor; see :func:`set_rng_state`).

    >>> import jitgrad
    >>> s = jitgrad.get_rng_state()
    >>> a = jitgrad.rand(3)
    >>> jitgrad.set_rng_state(s)
    >>> bool((jitgrad.rand(3) == a).all())
    True
    """
    from .random import default_generator

    return get_state(default_generator)


def set_rng_state(new_state) -> None:
    """Restore the default generator to a state :func:`get_rng_state` returned."""
    from .tensor import Tensor

    if not isinstance(new_state, Tensor):
        raise TypeError(f"expected a torch.ByteTensor, but got {type(new_state).__name__}")
    from .random import default_generator

    set_state(default_generator, new_state)
