"""Graph compilation: passes, fusion, code generation and the executable plan."""

from .executable import Plan, build_plan

__all__ = ["Plan", "build_plan"]
