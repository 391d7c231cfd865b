"""Random number generation: a seeded default generator and ``Generator`` objects.

Streams come from NumPy's PCG64, so they are reproducible for a seed but differ from
PyTorch's (which uses a Mersenne twister with its own transforms).
"""

from __future__ import annotations

import contextlib
import operator
import weakref
from collections.abc import Iterator

import numpy as np

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "fork_rng"]

_DEFAULT_SEED = 67280421310721  # PyTorch's default CPU seed
#: every live Generator: jitgrad.compile restores their states after tracing a call (the
#: compiled plan then draws the call's random numbers, as eager would, once)
LIVE: weakref.WeakSet = weakref.WeakSet()


class Generator:
    """A random stream; pass it as ``generator=`` to random factories and ``nn.init``.

    >>> import jitgrad
    >>> g = jitgrad.Generator().manual_seed(0)
    >>> a = jitgrad.rand(2, generator=g)
    >>> b = jitgrad.rand(2, generator=jitgrad.Generator().manual_seed(0))
    >>> bool((a == b).all())
    True
    """

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self._seed = _DEFAULT_SEED
        self.np = np.random.Generator(np.random.PCG64(self._seed))
        LIVE.add(self)

    def manual_seed(self, seed: int) -> Generator:
        """Reset the stream to ``seed``; returns self."""
        from .trace.state import STATE

        if STATE.tracer is not None:  # (a compiled plan would draw on from the traced state)
            STATE.tracer.graph_break("seeding a random generator")
        self._seed = _seed_value(seed)
        self.np = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self) -> int:
        """Reseed from OS entropy; returns the new seed."""
        s = int(np.random.SeedSequence().entropy % (2**63))
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        """The state as a ``uint8`` tensor (:mod:`jitgrad.rng_state`); ``set_state`` of it
        makes the generator draw the same numbers again."""
        from .rng_state import get_state

        return get_state(self)

    def set_state(self, new_state) -> Generator:
        """Restore a state :meth:`get_state` returned; returns self."""
        from .rng_state import set_state

        set_state(self, new_state)
        return self

    def _state(self) -> dict:
        """NumPy's state of the stream (a dict: cheap, comparable; jitgrad's own snapshots)."""
        return self.np.bit_generator.state

    def _restore(self, state: dict) -> None:
        """Put back a :meth:`_state` snapshot."""
        self.np.bit_generator.state = state


default_generator = Generator()


def _seed_value(seed) -> int:
    """A seed as PyTorch's ``Generator.manual_seed`` takes it: an integer in
    ``[-2**63, 2**64)``, a negative one wrapped to its unsigned 64-bit value (``-1`` seeds
    ``2**64 - 1``, which ``initial_seed`` returns); a float or bool raises its error."""
    if isinstance(seed, (bool, float)):
        raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
    seed = operator.index(seed)
    if not -2**63 <= seed < 2**64:
        raise ValueError("Overflow when unpacking long long")
    return seed % 2**64


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (as ``torch.manual_seed``, which takes ``int(seed)``, so a
    float seed is truncated)."""
    return default_generator.manual_seed(int(seed))


def seed() -> int:
    """Seed the default generator from OS entropy."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state():
    """State of the default generator, a ``uint8`` tensor (restore with
    :func:`set_rng_state`)."""
    from .rng_state import get_rng_state as get

    return get()


def set_rng_state(new_state) -> None:
    """Restore the default generator's state."""
    from .rng_state import set_rng_state as set_

    set_(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: str | None = None) -> Iterator[None]:
    """PyTorch's ``torch.random.fork_rng``: the default generator's state (seed included) is
    saved on entry and restored on exit, so the random numbers drawn inside do not change
    the stream outside. ``enabled=False`` (or ``device_type="meta"``) forks nothing.

    jitgrad draws CUDA tensors' random numbers from this same host generator (see
    ``jitgrad.cuda.manual_seed``), so forking it forks theirs too: ``devices`` (device
    indices) are accepted and need no state of their own.

    >>> import jitgrad
    >>> _ = jitgrad.manual_seed(0)
    >>> with jitgrad.random.fork_rng():
    ...     _ = jitgrad.rand(3)
    >>> a = jitgrad.rand(3)
    >>> _ = jitgrad.manual_seed(0)
    >>> bool((jitgrad.rand(3) == a).all())
    True
    """
    if device_type == "meta" or not enabled:
        yield
        return
    if devices is not None:
        list(devices)  # (PyTorch traverses it: a generator argument is consumed here too)
    gen = default_generator
    state, seed_ = gen._state(), gen._seed
    try:
        yield
    finally:
        gen._restore(state)
        gen._seed = seed_


def rng(generator: Generator | None) -> np.random.Generator:
    """The NumPy generator behind ``generator`` (the default one when None)."""
    return (generator or default_generator).np
