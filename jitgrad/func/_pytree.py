"""Nested Python containers of tensors ("pytrees"), as ``torch.utils._pytree`` sees them:
tuples, lists, dicts, ``OrderedDict``s and namedtuples are nodes, anything else (``None``
included) is a leaf. Specs print as PyTorch's (``TreeSpec(tuple, None, [*, ...])``), so
error messages that show a structure read the same."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["TreeSpec", "LEAF", "tree_flatten", "tree_unflatten", "tree_map",
           "broadcast_to_and_flatten", "treespec_pprint"]


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class TreeSpec:
    """The structure of a pytree: the node's type, its context (keys of a dict, the class of
    a namedtuple, None for tuples and lists) and the children's specs."""

    __slots__ = ("type", "context", "children", "num_leaves")

    def __init__(self, typ: type | None, context: Any, children: list[TreeSpec]) -> None:
        self.type = typ
        self.context = context
        self.children = children
        self.num_leaves = 1 if typ is None else sum(c.num_leaves for c in children)

    def is_leaf(self) -> bool:
        return self.type is None

    def _type_name(self) -> str:
        return "namedtuple" if self.type is not tuple and issubclass(self.type, tuple) \
            else self.type.__name__

    def __repr__(self, indent: int = 0) -> str:
        if self.type is None:
            return "*"
        text = f"TreeSpec({self._type_name()}, {self.context}, ["
        if self.children:
            indent += 2
            parts = [self.children[0].__repr__(indent)]
            parts += ["\n" + " " * indent + c.__repr__(indent) for c in self.children[1:]]
            text += ",".join(parts)
        return text + "])"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (self.type is other.type and self.context == other.context
                and self.children == other.children)

    def __hash__(self) -> int:  # pragma: no cover - specs are compared, not hashed
        return id(self)


LEAF = TreeSpec(None, None, [])


def tree_flatten(tree: Any) -> tuple[list, TreeSpec]:
    """``(leaves in order, spec)``."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree: Any, leaves: list) -> TreeSpec:
    t = type(tree)
    if t is tuple or t is list:
        return TreeSpec(t, None, [_flatten(c, leaves) for c in tree])
    if t is dict or t is OrderedDict:
        keys = list(tree)
        return TreeSpec(t, keys, [_flatten(tree[k], leaves) for k in keys])
    if _is_namedtuple(tree):
        return TreeSpec(t, t, [_flatten(c, leaves) for c in tree])
    leaves.append(tree)
    return LEAF


def tree_unflatten(leaves: list, spec: TreeSpec) -> Any:
    """The pytree of ``spec`` holding ``leaves``."""
    it = iter(leaves)
    out = _unflatten(it, spec)
    return out


def _unflatten(it, spec: TreeSpec) -> Any:
    t = spec.type
    if t is None:
        return next(it)
    children = [_unflatten(it, c) for c in spec.children]
    if t is tuple or t is list:
        return t(children)
    if t is dict or t is OrderedDict:
        return t(zip(spec.context, children))
    return t(*children)  # namedtuple


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` with ``fn`` applied to each leaf."""
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def broadcast_to_and_flatten(prefix: Any, spec: TreeSpec) -> list | None:
    """The leaves of ``prefix`` (a tree that is a prefix of ``spec``'s: each of its leaves
    stands for a whole subtree), one per leaf of ``spec``; None when it is not a prefix."""
    out: list = []
    return out if _broadcast(prefix, spec, out) else None


def _broadcast(prefix: Any, spec: TreeSpec, out: list) -> bool:
    t = type(prefix)
    is_node = t in (tuple, list, dict, OrderedDict) or _is_namedtuple(prefix)
    if not is_node:
        out.extend([prefix] * spec.num_leaves)
        return True
    if spec.type is not t:
        return False
    if t is dict or t is OrderedDict:
        if set(prefix) != set(spec.context):
            return False
        return all(_broadcast(prefix[k], c, out) for k, c in zip(spec.context, spec.children))
    if len(prefix) != len(spec.children):
        return False
    return all(_broadcast(p, c, out) for p, c in zip(prefix, spec.children))


class _Star:
    def __repr__(self) -> str:
        return "*"


def treespec_pprint(spec: TreeSpec) -> str:
    """The structure as a Python value with ``*`` for each leaf: ``(*, *)``, ``{'a': *}``."""
    return repr(tree_unflatten([_Star()] * spec.num_leaves, spec))
