"""``torch.utils._pytree``: nested Python containers ("pytrees") flattened to their leaves and
rebuilt, as PyTorch's module does.

Nodes: tuples, lists, dicts (keys in insertion order), ``OrderedDict``, ``defaultdict``,
``deque``, namedtuples and any type given to :func:`register_pytree_node`; everything else,
``None`` included (as in PyTorch 2.13), is a leaf (``is_leaf`` may stop the descent
earlier). Specs are :class:`jitgrad.func._pytree.TreeSpec` and print as
PyTorch's.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable
from typing import Any

from ..func._pytree import LEAF, TreeSpec, treespec_pprint

__all__ = ["TreeSpec", "LeafSpec", "register_pytree_node", "tree_flatten", "tree_unflatten",
           "tree_leaves", "tree_structure", "tree_iter", "tree_map", "tree_map_",
           "tree_map_only", "tree_all", "tree_any", "tree_all_only", "tree_any_only",
           "treespec_pprint", "SUPPORTED_NODES"]

#: node type -> (flatten: node -> (children, context), unflatten: (children, context) -> node)
SUPPORTED_NODES: dict[type, tuple[Callable, Callable]] = {
    tuple: (lambda t: (list(t), None), lambda c, ctx: tuple(c)),
    list: (lambda t: (list(t), None), lambda c, ctx: list(c)),
    dict: (lambda d: (list(d.values()), list(d)), lambda c, ctx: dict(zip(ctx, c))),
    OrderedDict: (lambda d: (list(d.values()), list(d)),
                  lambda c, ctx: OrderedDict(zip(ctx, c))),
    defaultdict: (lambda d: (list(d.values()), [d.default_factory, list(d)]),
                  lambda c, ctx: defaultdict(ctx[0], zip(ctx[1], c))),
    deque: (lambda d: (list(d), d.maxlen), lambda c, ctx: deque(c, maxlen=ctx)),
}


def LeafSpec() -> TreeSpec:  # noqa: N802 - PyTorch's name
    """The spec of a leaf."""
    return LEAF


def register_pytree_node(cls: type, flatten_fn: Callable, unflatten_fn: Callable, *,
                         serialized_type_name: str | None = None,
                         to_dumpable_context=None, from_dumpable_context=None,
                         flatten_with_keys_fn=None) -> None:
    """Make ``cls`` a node: ``flatten_fn(x) -> (children, context)`` and
    ``unflatten_fn(children, context) -> x``. (The serialization arguments are accepted;
    specs are not serialized here.)"""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = (flatten_fn, unflatten_fn)


def _node_type(x: Any) -> type | None:
    t = type(x)
    if t in SUPPORTED_NODES:
        return t
    if isinstance(x, tuple) and hasattr(t, "_fields"):  # a namedtuple
        return t
    return None


def _is_leaf(x: Any, is_leaf) -> bool:
    return (is_leaf is not None and is_leaf(x)) or _node_type(x) is None


def _children(x: Any, t: type) -> tuple[list, Any]:
    if t in SUPPORTED_NODES:
        return SUPPORTED_NODES[t][0](x)
    return list(x), t  # a namedtuple: its class is the context


def _flatten(tree: Any, leaves: list, is_leaf) -> TreeSpec:
    if _is_leaf(tree, is_leaf):
        leaves.append(tree)
        return LEAF
    t = _node_type(tree)
    children, context = _children(tree, t)
    return TreeSpec(t, context, [_flatten(c, leaves, is_leaf) for c in children])


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                 ) -> tuple[list, TreeSpec]:
    """``(leaves in order, spec)``."""
    leaves: list = []
    return leaves, _flatten(tree, leaves, is_leaf)


def _unflatten(it, spec: TreeSpec) -> Any:
    t = spec.type
    if t is None:
        return next(it)
    children = [_unflatten(it, c) for c in spec.children]
    if t in SUPPORTED_NODES:
        return SUPPORTED_NODES[t][1](children, spec.context)
    return t(*children)  # a namedtuple


def tree_unflatten(leaves, treespec: TreeSpec) -> Any:
    """The pytree of ``treespec`` holding ``leaves`` (PyTorch's error for a wrong count)."""
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but "
                         f"the spec refers to a pytree that holds {treespec.num_leaves} items "
                         f"({treespec}).")
    return _unflatten(iter(leaves), treespec)


def tree_leaves(tree: Any, is_leaf=None) -> list:
    """The leaves of ``tree``, in order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree: Any, is_leaf=None):
    """An iterator over the leaves of ``tree``."""
    return iter(tree_leaves(tree, is_leaf))


def tree_structure(tree: Any, is_leaf=None) -> TreeSpec:
    """The spec of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def _flatten_up_to(spec: TreeSpec, tree: Any) -> list:
    """The subtrees of ``tree`` at the leaves of ``spec`` (``tree`` has ``spec``'s structure
    down to them), or PyTorch's ValueError."""
    if spec.type is None:
        return [tree]
    t = _node_type(tree)
    if t is not spec.type:
        raise ValueError(f"Node type mismatch; expected {spec.type}, but got {type(tree)}.")
    children, context = _children(tree, t)
    if len(children) != len(spec.children) or (t in (dict, OrderedDict) and
                                               set(context) != set(spec.context)):
        raise ValueError(f"Node arity or keys mismatch; expected {spec}, but got a "
                         f"{t.__name__} of {len(children)} children.")
    if t in (dict, OrderedDict):
        children = [tree[k] for k in spec.context]
    out = []
    for c, s in zip(children, spec.children):
        out.extend(_flatten_up_to(s, c))
    return out


def tree_map(func: Callable, tree: Any, *rests: Any, is_leaf=None) -> Any:
    """``tree`` with each leaf ``x`` replaced by ``func(x, *(the same leaf of each of
    rests))`` (``rests`` have ``tree``'s structure, down to its leaves at least)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r) for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_(func: Callable, tree: Any, *rests: Any, is_leaf=None) -> Any:
    """Call ``func`` on the leaves (as :func:`tree_map`) for its effects; returns ``tree``."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def _predicate(type_or_types_or_pred) -> Callable[[Any], bool]:
    if isinstance(type_or_types_or_pred, (type, tuple)):
        return lambda x: isinstance(x, type_or_types_or_pred)
    if callable(type_or_types_or_pred):
        return type_or_types_or_pred
    raise TypeError("Argument must be a type, a tuple of types, or a callable.")


def tree_map_only(type_or_types_or_pred, func: Callable, tree: Any, is_leaf=None) -> Any:
    """``tree`` with ``func`` applied to the leaves that are instances of the type(s) (or
    satisfy the predicate); other leaves kept."""
    pred = _predicate(type_or_types_or_pred)
    return tree_map(lambda x: func(x) if pred(x) else x, tree, is_leaf=is_leaf)


def tree_all(pred: Callable[[Any], bool], tree: Any, is_leaf=None) -> bool:
    """Whether ``pred`` holds for every leaf."""
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred: Callable[[Any], bool], tree: Any, is_leaf=None) -> bool:
    """Whether ``pred`` holds for some leaf."""
    return any(map(pred, tree_leaves(tree, is_leaf)))


def tree_all_only(type_or_types, pred: Callable[[Any], bool], tree: Any,
                  is_leaf=None) -> bool:
    """``pred`` holds for every leaf of the type(s)."""
    keep = _predicate(type_or_types)
    return all(pred(x) for x in tree_leaves(tree, is_leaf) if keep(x))


def tree_any_only(type_or_types, pred: Callable[[Any], bool], tree: Any,
                  is_leaf=None) -> bool:
    """``pred`` holds for some leaf of the type(s)."""
    keep = _predicate(type_or_types)
    return any(pred(x) for x in tree_leaves(tree, is_leaf) if keep(x))
