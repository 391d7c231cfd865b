"""``torch.version``: the version strings of the build. jitgrad is a CPU NumPy library, so
every accelerator toolkit version (``cuda``, ``hip``, ``rocm``, ``xpu``) is None; loaded on
first use (``jitgrad.version``)."""

from __future__ import annotations

from . import __version__

__all__ = ["__version__", "debug", "cuda", "git_version", "hip", "rocm", "xpu"]

#: whether this is a debug build (PyTorch's ``torch.version.debug``)
debug: bool = False
#: the CUDA toolkit jitgrad was built against: none
cuda: str | None = None
#: the source revision of the build; unknown for jitgrad (PyTorch's builds without git
#: information say "Unknown" too)
git_version: str = "Unknown"
#: ROCm / HIP and XPU toolkit versions: none
hip: str | None = None
rocm: str | None = None
xpu: str | None = None
