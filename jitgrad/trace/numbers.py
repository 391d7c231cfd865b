"""Python floats passed to a compiled function as values it reads afresh at every call.

A float argument that changes from call to call -- a learning rate or a KL weight computed by
the training loop, a diffusion timestep -- would otherwise be frozen into each trace: one
trace per value, then eager mode past ``config.recompile_limit``. As ``torch.compile``'s
automatic dynamic does, once a call brings a second value for the same argument, jitgrad
traces again with that argument *dynamic* (``compile(dynamic=True)``: from the first call;
``dynamic=False``: never): the plan takes the number as a 0-d float64 input, and the
function gets a :class:`TracedFloat` holding the call's value.

What a plan can compute afresh from it is recorded as graph operations on that 0-d input:

* arithmetic with Python numbers and other dynamic floats (``+ - * /``, negation, ``abs``):
  float64 operations, the bits of Python's own float arithmetic;
* ``tensor + - * / number`` and comparisons (``rand(n) < p``; either side) with a
  float32/float64 tensor on the CPU: the number is cast to the tensor's dtype as eager mode
  casts a Python number there, then the op is the tensor-with-tensor op -- the same bits,
  dtype and shape as with the plain float.

Any other use needs the value itself: a comparison or ``bool`` (control flow), ``float()``,
``int()``, ``math`` functions, ``**``, a NumPy conversion, hashing, formatting, an op
parameter (``clamp(max=lr)``, ``add(y, alpha=lr)``), a dynamic float returned by the function,
a division *by* a dynamic number in Python (which raises at zero, where a plan would give
``inf``). Each gives the plain value and marks the argument *specialised*: the trace is then
dropped (its effects taken back, as every trace's are) and the function is traced again
with that argument as a constant guarded by its value, as before -- a compiled call never
computes with a stale number. An exception raised while tracing with dynamic floats does the
same (the retrace raises it again where it is real).

A :class:`TracedFloat` is not a ``float`` subclass on purpose: C code (``math.cos``, NumPy)
reads a subclass's value without asking it, which would freeze the number unseen. Its
``__class__`` is ``float``, so ``isinstance(lr, float)`` holds as for the plain number; only
``type(lr)`` tells them apart (and C code that requires an exact float, ``json.dumps``,
rejects it: pass ``dynamic=False`` to keep plain floats).
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["TracedFloat", "DynamicNumbers", "EXACT_BINARY_OPS"]

#: ops whose ``tensor (op) number`` result equals ``tensor (op) tensor(number, tensor.dtype)``
EXACT_BINARY_OPS = frozenset({"add", "sub", "rsub", "mul", "div",
                              "lt", "le", "gt", "ge", "eq", "ne"})


class DynamicNumbers:
    """The dynamic float arguments of one traced call: which of them the trace needed as
    plain values (``specialized``: their paths), and whether the trace is still running."""

    def __init__(self) -> None:
        self.specialized: set = set()
        self.open = True
        self.paths: list = []

    def number(self, value: float, tensor, path) -> TracedFloat:
        """The :class:`TracedFloat` of argument ``path`` (``("arg", i)``/``("kw", name)``),
        its 0-d float64 input ``tensor`` holding ``value``."""
        self.paths.append(path)
        return TracedFloat(value, tensor, frozenset((path,)), self)

    def close(self) -> None:
        """The trace is over: a dynamic float kept past it is a constant from now on."""
        self.open = False


def _value_of(x):
    return x.value if type(x) is TracedFloat else x


class TracedFloat:
    """A dynamic float argument (or a number computed from them) while its compiled function
    is traced (see the module): ``value`` is the call's number, ``tensor`` the 0-d float64
    graph value that computes it at every call."""

    __slots__ = ("value", "tensor", "roots", "_numbers", "_as_dtype")

    def __init__(self, value: float, tensor, roots: frozenset, numbers: DynamicNumbers):
        self.value = value
        self.tensor = tensor
        self.roots = roots
        self._numbers = numbers
        self._as_dtype: dict = {}

    @property
    def __class__(self):  # ``isinstance(lr, float)`` holds, as for the plain number (only
        return float      # ``type(lr)`` tells; C code reads no value without asking)

    # ------------------------------------------------------------------ plain values
    def concrete(self) -> float:
        """The plain value, for a use a plan cannot recompute: the arguments it comes from
        are specialised (the trace is redone with them as constants)."""
        if self._numbers.open:
            self._numbers.specialized |= self.roots
        return self.value

    def returned(self) -> float:
        """The plain value of a dynamic float a traced function returns: the arguments it
        comes from are specialised (a plan gives back what the trace saw)."""
        self._numbers.specialized |= self.roots
        return self.value

    def __float__(self) -> float:
        return self.concrete()

    def __int__(self) -> int:
        return int(self.concrete())

    def __bool__(self) -> bool:
        return bool(self.concrete())

    def __complex__(self) -> complex:
        return complex(self.concrete())

    def __round__(self, ndigits=None):
        return round(self.concrete(), ndigits)

    def __trunc__(self) -> int:
        return int(self.concrete())

    def __floor__(self) -> int:
        import math

        return math.floor(self.concrete())

    def __ceil__(self) -> int:
        import math

        return math.ceil(self.concrete())

    def __hash__(self) -> int:
        return hash(self.concrete())

    def __repr__(self) -> str:
        return repr(self.concrete())

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(self.concrete(), spec)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.concrete(), dtype=dtype)

    def is_integer(self) -> bool:
        return self.concrete().is_integer()

    def __getattr__(self, name: str):  # the rest of float's public API, on the plain value
        if name.startswith("_") or not hasattr(float, name):  # (probes: __array_interface__)
            raise AttributeError(f"'TracedFloat' object has no attribute {name!r}")
        return getattr(self.concrete(), name)

    def _compare(self, other, name: str):
        to = type(other)
        if to is not TracedFloat and to is not float and to is not int and to is not bool:
            return NotImplemented  # (a tensor: its reflected comparison records it)
        other = other.concrete() if to is TracedFloat else other
        return getattr(self.concrete(), name)(other)

    def __eq__(self, other):
        return self._compare(other, "__eq__")

    def __ne__(self, other):
        return self._compare(other, "__ne__")

    def __lt__(self, other):
        return self._compare(other, "__lt__")

    def __le__(self, other):
        return self._compare(other, "__le__")

    def __gt__(self, other):
        return self._compare(other, "__gt__")

    def __ge__(self, other):
        return self._compare(other, "__ge__")

    def __pow__(self, other, mod=None):
        return pow(self.concrete(), _plain(other), mod)

    def __rpow__(self, other):
        return _plain(other) ** self.concrete()

    def __floordiv__(self, other):
        return self.concrete() // _plain(other)

    def __rfloordiv__(self, other):
        return _plain(other) // self.concrete()

    def __mod__(self, other):
        return self.concrete() % _plain(other)

    def __rmod__(self, other):
        return _plain(other) % self.concrete()

    def __divmod__(self, other):
        return divmod(self.concrete(), _plain(other))

    def __rdivmod__(self, other):
        return divmod(_plain(other), self.concrete())

    # --------------------------------------------------------- recorded arithmetic
    def _arith(self, other, name: str, reflected: bool = False):
        """``self (op) other`` (``other (op) self`` when ``reflected``) for a Python number
        or dynamic float ``other``: a TracedFloat computed by float64 graph ops, or -- the
        trace over, or ``other`` not a number -- the plain result (NotImplemented for a
        tensor: its reflected operator records ``tensor (op) number``)."""
        to = type(other)
        if to is not TracedFloat and to is not float and to is not int and to is not bool:
            return NotImplemented  # (a tensor: its operator; a NumPy scalar: its rules)
        x, y = (other, self) if reflected else (self, other)
        value = getattr(float(_value_of(x)), f"__{name}__")(_value_of(y))
        if not self._numbers.open or (type(other) is TracedFloat and
                                      other._numbers is not self._numbers):
            return value
        from ..creation import tensor as make

        def t(v):
            return v.tensor if type(v) is TracedFloat else make(float(v), dtype=np.float64)

        out = getattr(t(x), f"__{name}__")(t(y))
        roots = self.roots | (other.roots if type(other) is TracedFloat else frozenset())
        return TracedFloat(value, out, roots, self._numbers)

    def __add__(self, other):
        return self._arith(other, "add")

    def __radd__(self, other):
        return self._arith(other, "add", True)

    def __sub__(self, other):
        return self._arith(other, "sub")

    def __rsub__(self, other):
        return self._arith(other, "sub", True)

    def __mul__(self, other):
        return self._arith(other, "mul")

    def __rmul__(self, other):
        return self._arith(other, "mul", True)

    def __truediv__(self, other):
        if type(other) is TracedFloat:  # Python raises at a zero divisor, a plan would not
            other = other.concrete()
        return self._arith(other, "truediv")

    def __rtruediv__(self, other):
        return _plain(other) / self.concrete()

    def __neg__(self):
        return self._unary(-self.value, lambda t: -t)

    def __pos__(self):
        return self

    def __abs__(self):
        return self._unary(abs(self.value), abs)

    def _unary(self, value: float, fn):
        if not self._numbers.open:
            return value
        return TracedFloat(value, fn(self.tensor), self.roots, self._numbers)

    # ------------------------------------------------------------ with tensors
    def operand_for(self, op, a):
        """What ``a (op) self`` computes with, ``a`` a tensor: the 0-d graph value cast to
        ``a``'s dtype (the same bits as the plain number, see the module), or the plain
        value where that would not hold (the argument specialised)."""
        d = a._data
        if (not self._numbers.open or op.name not in EXACT_BINARY_OPS or
                type(d) is not np.ndarray or d.dtype.kind != "f" or d.dtype.itemsize < 4):
            return self.concrete()
        cast = self._as_dtype.get(d.dtype)
        if cast is None:
            cast = self.tensor if d.dtype == np.float64 else self.tensor.to(d.dtype)
            self._as_dtype[d.dtype] = cast
        return cast


def _plain(x):
    return x.concrete() if type(x) is TracedFloat else x


numbers.Real.register(TracedFloat)  # isinstance(lr, numbers.Real), as for a float
