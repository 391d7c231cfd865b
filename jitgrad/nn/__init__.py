"""Neural-network building blocks (functional API for now)."""

from . import functional

__all__ = ["functional"]
