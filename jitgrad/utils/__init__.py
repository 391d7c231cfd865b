"""Utilities: ``jitgrad.utils.data`` (datasets and the data loader)."""

from . import data

__all__ = ["data"]
