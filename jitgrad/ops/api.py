"""How ops show in the public API, declared on the function that runs them.

A public function names, next to its definition, the ops it serves (is the public face of)
and the names it goes by::

    @api(TANH, method="tanh", inplace="tanh_", export="tanh")
    def tanh(input): ...

* ``method``: ``Tensor`` methods and operators that are the function itself
  (``x.tanh()`` is ``tanh(x)``; ``"__neg__"`` makes ``-x``);
* ``inplace``: ``Tensor`` methods that run it in place (``x.tanh_()`` is
  ``apply_inplace(x, tanh(x))``; ``"__iadd__"`` makes ``x += y``);
* ``export``: names in the ``jitgrad`` namespace (``jitgrad.tanh``).

The declaration is an :class:`Api` record appended to each named op's ``OpDef.api``. A
function serving an op family declares it once with all its ops (``pow`` runs pow,
pow_scalar and rpow_scalar); a composite with no op of its own declares with the ops it
runs (``square`` with pow_scalar, ``outer`` with mul); a function only
jitgrad's own code calls (``tanh_backward``) declares with no names. Every registered op has
at least one declaration (tests/ops/test_api_declarations.py checks it).

:func:`method_table` and :func:`export_table` derive the ``Tensor`` methods
(``ops/methods.py`` installs them) and the ``jitgrad`` exports (``jitgrad/__init__.py``)
from ``REGISTRY``; a name declared twice is an error at import. Methods and exports that are
not ops (``fill_``, ``to``, ``prod``, the factories...) stay hand-written there.
"""

from __future__ import annotations

from collections.abc import Callable

from .registry import REGISTRY, OpDef

__all__ = ["Api", "api", "declarations", "method_table", "export_table", "inplace_method"]


class Api:
    """One public function, the ops it serves and the names it goes by (see the module doc).

    A plain class, not a dataclass: one is made per declaration while ``import jitgrad``
    runs, and a dataclass costs a millisecond to build."""

    __slots__ = ("fn", "ops", "methods", "inplace", "exports")

    def __init__(self, fn: Callable, ops: tuple[OpDef, ...], methods: tuple[str, ...] = (),
                 inplace: tuple[str, ...] = (), exports: tuple[str, ...] = ()) -> None:
        self.fn = fn
        self.ops = ops
        self.methods = methods
        self.inplace = inplace
        self.exports = exports

    def __repr__(self) -> str:
        return f"Api({self.fn.__qualname__}, ops={[op.name for op in self.ops]})"


def _names(v) -> tuple[str, ...]:
    return (v,) if isinstance(v, str) else tuple(v)


def api(*ops: OpDef, method=(), inplace=(), export=()):
    """Decorator declaring that the function serves ``ops`` and goes by these names (each a
    name or a tuple of names); returns the function unchanged."""
    if not ops or not all(isinstance(op, OpDef) for op in ops):
        raise TypeError("api() takes the OpDefs the function serves")

    def declare(fn: Callable) -> Callable:
        rec = Api(fn, ops, _names(method), _names(inplace), _names(export))
        for op in ops:
            op.api = (*op.api, rec)
        return fn
    return declare


def declarations() -> list[Api]:
    """Every declaration once (a family's sits on each of its ops), in registry order."""
    seen: set = set()
    out = []
    for op in REGISTRY.values():
        for rec in op.api:
            if id(rec) not in seen:
                seen.add(id(rec))
                out.append(rec)
    return out


def _claim(table: dict, owner: dict, name: str, value, rec: Api) -> None:
    if name in table:
        raise ValueError(f"{name!r} is declared twice: by {_who(owner[name])} and by "
                         f"{_who(rec)}")
    table[name] = value
    owner[name] = rec


def _who(rec: Api) -> str:
    return f"{rec.fn.__module__}.{rec.fn.__qualname__}"


def inplace_method(fn: Callable, name: str) -> Callable:
    """The in-place method ``name`` running ``fn``: ``apply_inplace(self, fn(self, ...))``,
    or, for the methods ``inplace_into.INTO`` lists, the op's kernel straight into
    ``self`` where that applies (the same bits, one pass)."""
    from ..autograd.node import next_seq
    from ..tensor import Tensor
    from .inplace import apply_inplace, overlapping_operands
    from .inplace_into import INTO

    # (next_seq(): the nodes ``fn`` makes come after it; those that saved ``self`` get its
    # old value, see apply_inplace.) An operand sharing self's memory: PyTorch's error, or
    # (not dense) the general path, which computes the result before writing it
    into = INTO.get(name)
    if into is not None and name.startswith("__"):
        def method(self, other):
            if not (isinstance(other, Tensor) and overlapping_operands(self, (other,))) \
                    and into(self, other):
                return self
            since = next_seq()
            return apply_inplace(self, fn(self, other), since)
    elif into is not None:
        def method(self, *args, **kwargs):
            if not overlapping_operands(self, (*args, *kwargs.values())) and \
                    into(self, *args, **kwargs):
                return self
            since = next_seq()
            return apply_inplace(self, fn(self, *args, **kwargs), since)
    elif name.startswith("__"):  # x += y: one operand, no argument packing
        def method(self, other):
            if isinstance(other, Tensor):
                overlapping_operands(self, (other,))
            since = next_seq()
            return apply_inplace(self, fn(self, other), since)
    else:
        def method(self, *args, **kwargs):
            overlapping_operands(self, (*args, *kwargs.values()))
            since = next_seq()
            return apply_inplace(self, fn(self, *args, **kwargs), since)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place :func:`{fn.__name__}`."
    return method


def method_table() -> dict[str, Callable]:
    """``Tensor`` attribute name -> function, for every declared method, operator and
    in-place variant."""
    table: dict = {}
    owner: dict = {}
    for rec in declarations():
        for name in rec.methods:
            _claim(table, owner, name, rec.fn, rec)
        for name in rec.inplace:
            _claim(table, owner, name, inplace_method(rec.fn, name), rec)
    return table


def export_table() -> dict[str, Callable]:
    """``jitgrad`` name -> function, for every declared export."""
    table: dict = {}
    owner: dict = {}
    for rec in declarations():
        for name in rec.exports:
            _claim(table, owner, name, rec.fn, rec)
    return table
