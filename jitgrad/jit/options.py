"""The arguments of ``jitgrad.compile``, checked as ``torch.compile`` checks them.

``backend``: ``"inductor"`` (torch's default), ``"auto"`` and ``"cpu"`` compile (jitgrad has
one compiler, the CPU one); ``"eager"`` and ``"aot_eager"`` run the function uncompiled;
``"cuda"`` is reserved for jitgrad's CUDA backend. ``mode`` and ``options`` are accepted and
change nothing (they tune Inductor and CUDA graphs); ``dynamic`` is accepted: jitgrad traces
once per input signature either way (its kernels are shape-generic, so a new shape retraces
but rarely compiles a new kernel). ``fullgraph=True`` makes every graph break an error;
``fullgraph=False`` (the default) runs a call whose Python needs a tensor's value eagerly.
``fallback`` is the older spelling of ``fullgraph``: ``"error"`` is ``fullgraph=True``,
``"eager"`` is ``fullgraph=False``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CompileOptions", "CompileOptionError", "resolve", "COMPILING_BACKENDS",
           "EAGER_BACKENDS", "MODES"]

#: Backends that trace and compile (jitgrad has one compiler: the CPU one).
COMPILING_BACKENDS = ("inductor", "auto", "cpu")
#: Backends that run the function uncompiled (torch's debugging backends).
EAGER_BACKENDS = ("eager", "aot_eager")
#: torch.compile's modes: accepted, none changes what jitgrad generates.
MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")

_CUDA_MESSAGE = ("backend='cuda' is reserved for jitgrad's CUDA backend, which has not landed "
                 "yet; use backend='cpu' (or 'auto')")


class CompileOptionError(ValueError, RuntimeError):
    """An argument ``torch.compile`` refuses too. A ``ValueError``, and a ``RuntimeError``
    as PyTorch raises for these (``Unrecognized mode=...``, ``InvalidBackend``)."""


@dataclass(frozen=True)
class CompileOptions:
    """The checked arguments of one ``jitgrad.compile`` call."""

    backend: str = "inductor"
    fullgraph: bool = False
    dynamic: bool | None = None
    mode: str | None = None
    options: dict | None = None
    cache_dir: Any = None

    @property
    def eager(self) -> bool:
        """Whether the backend runs the function uncompiled."""
        return self.backend in EAGER_BACKENDS

    @property
    def fallback(self) -> str:
        """The tracer's escape policy: ``"error"`` under ``fullgraph``, else ``"eager"``."""
        return "error" if self.fullgraph else "eager"

    def as_kwargs(self) -> dict:
        """Keyword arguments of ``jitgrad.compile`` that give these options again."""
        return {"backend": self.backend, "fullgraph": self.fullgraph, "dynamic": self.dynamic,
                "mode": self.mode, "options": self.options, "cache_dir": self.cache_dir}


def _backend_name(backend: Callable) -> str:
    return getattr(backend, "__name__", None) or repr(backend)


def resolve(backend: str | Callable | None = "inductor", fallback: str | None = None,
            fullgraph: bool = False, dynamic: bool | None = None, mode: str | None = None,
            options: dict | None = None, cache_dir: Any = None) -> CompileOptions:
    """Check ``jitgrad.compile``'s arguments (see the module docstring) and return them."""
    if backend is None:  # torch.compile's default: inductor
        backend = "inductor"
    if not isinstance(backend, str):
        if callable(backend):
            raise NotImplementedError(
                f"jitgrad.compile: custom backends are not supported (got the callable "
                f"{_backend_name(backend)!r}): jitgrad compiles its own traced graph, it has "
                "no FX GraphModule to hand to a backend; use backend='inductor' (compiled) "
                "or backend='eager'")
        raise TypeError(f"jitgrad.compile: backend must be a string, got "
                        f"{type(backend).__name__}")
    if backend == "cuda":
        raise NotImplementedError(_CUDA_MESSAGE)
    if backend not in COMPILING_BACKENDS + EAGER_BACKENDS:
        valid = ", ".join(repr(b) for b in COMPILING_BACKENDS + EAGER_BACKENDS)
        raise CompileOptionError(f"Invalid backend: {backend!r}; jitgrad.compile supports "
                                 f"{valid} ('cuda' is reserved)")
    if mode is not None and mode not in MODES:
        raise CompileOptionError(f"Unrecognized mode={mode}, should be one of: "
                                 f"{', '.join(MODES)}")
    if mode is not None and options is not None:
        raise CompileOptionError("Either mode or options can be specified, but both can't be "
                                 "specified at the same time.")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"jitgrad.compile: options must be a dict, got "
                        f"{type(options).__name__}")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise CompileOptionError(f"jitgrad.compile: dynamic must be None, True or False, "
                                 f"got {dynamic!r}")
    if fallback is not None:
        if fallback not in ("error", "eager"):
            raise ValueError(f"fallback must be 'error' or 'eager', got {fallback!r}")
        if fullgraph and fallback == "eager":
            raise ValueError("fullgraph=True and fallback='eager' contradict each other: "
                             "fullgraph=True makes a graph break an error (fallback='error'); "
                             "pass only fullgraph")
        fullgraph = fallback == "error"
    return CompileOptions(backend, bool(fullgraph), dynamic, mode, options, cache_dir)
