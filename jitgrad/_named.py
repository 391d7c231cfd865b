"""``Named``: the base of PyTorch's named singletons (``torch.layout``,
``torch.memory_format``): a name, ``jitgrad.<name>`` as its repr, pickled as the module
attribute of that name."""

from __future__ import annotations

__all__ = ["Named"]


class Named:
    """A named constant of ``jitgrad`` (each subclass's instances are module attributes)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"jitgrad.{self.name}"

    def __reduce__(self):
        return self.name  # pickled as the module attribute (one instance per name)
