"""``torch.use_deterministic_algorithms`` and its queries.

jitgrad's results do not depend on the run: its kernels add in a fixed order on every
thread count (scatter-adds included), so every algorithm already is what PyTorch calls
deterministic, and no op raises or warns under the flag. The flag and its ``warn_only``
setting are recorded so code that sets and reads them (training scripts, test fixtures)
behaves as with PyTorch. (Matrix products through OpenBLAS may round differently between
thread counts, not between runs: see the README.)
"""

from __future__ import annotations

__all__ = ["use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
           "get_deterministic_debug_mode"]

_FLAGS = {"mode": False, "warn_only": False}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record whether deterministic algorithms are required (``warn_only``: a
    nondeterministic op would warn instead of raising). jitgrad has no nondeterministic op,
    so nothing else changes."""
    if type(mode) is not bool:
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must "
                        f"be bool, not {type(mode).__name__}")
    if type(warn_only) is not bool:
        raise TypeError(f"_set_deterministic_algorithms(): argument 'warn_only' must be bool, "
                        f"not {type(warn_only).__name__}")
    _FLAGS["mode"] = mode
    _FLAGS["warn_only"] = warn_only


def are_deterministic_algorithms_enabled() -> bool:
    """Whether :func:`use_deterministic_algorithms` was last called with ``True``."""
    return _FLAGS["mode"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether deterministic algorithms are on with ``warn_only=True``."""
    return _FLAGS["warn_only"]


_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode: str | int) -> None:
    """The same setting by level: ``"default"``/0 (off), ``"warn"``/1 (on, warn only),
    ``"error"``/2 (on)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, "
                               f"`warn`, `error`, but got {debug_mode}")
        level = _MODES[debug_mode]
    elif isinstance(debug_mode, int) and not isinstance(debug_mode, bool):
        if debug_mode not in (0, 1, 2):
            raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got "
                               f"{debug_mode}")
        level = debug_mode
    else:
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    use_deterministic_algorithms(level > 0, warn_only=level == 1)


def get_deterministic_debug_mode() -> int:
    """0 (off), 1 (on, warn only) or 2 (on)."""
    if not _FLAGS["mode"]:
        return 0
    return 1 if _FLAGS["warn_only"] else 2
