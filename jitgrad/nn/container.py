"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``,
``ParameterDict``."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator

from .module import Module, _addindent
from .mutation import TrackedDict, bump
from .parameter import Parameter

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _index(idx: int, n: int) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n


class Sequential(Module):
    """Modules applied one after the other (from arguments or an ``OrderedDict``).

    >>> import jitgrad
    >>> import jitgrad.nn as nn
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> net(jitgrad.ones(3, 4)).shape
    jitgrad.Size([3, 2])
    """

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self))]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[_index(idx, len(self))]
        setattr(self, key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        for k in (keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self))]]):
            del self._modules[k]
        # keep the numbering contiguous, as PyTorch does
        self.__dict__["_modules"] = TrackedDict(
            (str(i), m) for i, m in enumerate(self._modules.values()))
        bump()

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        """Add every module of ``sequential`` at the end."""
        for layer in sequential:
            self.append(layer)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert ``module`` before position ``index`` (the later ones renumbered)."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        items = list(self._modules.items())
        items.insert(index, (None, module))
        self.__dict__["_modules"] = TrackedDict()
        bump()
        for i, (key, m) in enumerate(items):  # (named entries keep their names)
            self.add_module(str(i) if key is None or key.isdigit() else key, m)
        return self

    def pop(self, key: int | slice):
        """Remove and return the module (or the ``Sequential`` of a slice) at ``key``."""
        v = self[key]
        del self[key]
        return v

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        return Sequential().extend(self).extend(other)

    def __iadd__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        return self.extend(list(other))

    def _repeat_check(self, other) -> None:
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and "
                            f"{type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")

    def __mul__(self, other: int) -> Sequential:
        """A new ``Sequential`` of these modules (the same objects) ``other`` times over."""
        self._repeat_check(other)
        modules = list(self)
        return Sequential(*(modules * other))

    __rmul__ = __mul__

    def __imul__(self, other: int) -> Sequential:
        self._repeat_check(other)
        return self.extend(list(self) * (other - 1))

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered (so their parameters are found); no ``forward``."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self)))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_index(idx, len(self))), module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        for k in (keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self))]]):
            del self._modules[k]
        self.__dict__["_modules"] = TrackedDict(
            (str(i), m) for i, m in enumerate(self._modules.values()))
        bump()

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Add every module of ``modules`` at the end."""
        for m in modules:
            self.append(m)
        return self

    def pop(self, key: int | slice):
        """Remove and return the module (or the ``ModuleList`` of a slice) at ``key``."""
        v = self[key]
        del self[key]
        return v

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        """A new ``ModuleList`` of these modules and ``other``'s (the same objects)."""
        return ModuleList([*self, *other])

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before ``index``."""
        mods = list(self._modules.values())
        mods.insert(index, module)
        self.__dict__["_modules"] = TrackedDict()
        bump()
        self.extend(mods)

    def __repr__(self) -> str:
        """PyTorch's compact form: runs of equal reprs print once (``(0-1): 2 x ...``)."""
        reprs = [repr(m) for m in self._modules.values()]
        if not reprs:
            return self._get_name() + "()"
        lines, start = [], 0
        for i in range(1, len(reprs) + 1):
            if i == len(reprs) or reprs[i] != reprs[start]:
                body = _addindent(reprs[start], 2)
                if i - start == 1:
                    lines.append(f"({start}): {body}")
                else:
                    lines.append(f"({start}-{i - 1}): {i - start} x {body}")
                start = i
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules, registered under their keys."""

    def __init__(self, modules=None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        """Add every ``(key, module)`` of a mapping or an iterable of pairs."""
        pairs = modules.items() if hasattr(modules, "items") else modules
        for k, m in pairs:
            self[k] = m


def _as_parameter(value):
    """A tensor becomes a ``Parameter`` (as PyTorch's parameter containers make it)."""
    from ..tensor import Tensor

    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _param_line(p, type_name: bool = False) -> str:
    """PyTorch's line for a parameter in a container's repr (``ParameterDict`` names the
    tensor type, ``ParameterList`` the dtype)."""
    if not isinstance(p, Parameter):
        return repr(p)
    dev = "" if p.device.type == "cpu" else f" ({p.device})"
    size = "x".join(str(n) for n in p.shape)
    kind = p.type() if type_name else p.dtype
    return f"Parameter containing: [{kind} of size {size}{dev}]"


class ParameterList(Module):
    """A list of parameters, registered under ``"0"``, ``"1"``... (tensors given are made
    ``Parameter``s)."""

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(idx, len(self))))

    def __setitem__(self, idx: int, param) -> None:
        setattr(self, str(_index(idx, len(self))), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator:
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values: Iterable) -> ParameterList:
        return self.extend(values)

    def append(self, value) -> ParameterList:
        """Add ``value`` at the end."""
        i = len(self)
        self._size += 1
        setattr(self, str(i), _as_parameter(value))
        return self

    def extend(self, values: Iterable) -> ParameterList:
        """Add every value of ``values`` at the end."""
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({i}): {_param_line(p)}" for i, p in enumerate(self))


class ParameterDict(Module):
    """A dict of parameters, registered under their keys (tensors given are made
    ``Parameter``s)."""

    def __init__(self, parameters=None) -> None:
        super().__init__()
        self._keys: dict = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def pop(self, key: str):
        value = self[key]
        del self[key]
        return value

    def update(self, parameters) -> None:
        """Add every ``(key, value)`` of a mapping or an iterable of pairs (a plain dict's in
        sorted key order, an ``OrderedDict``'s or ``ParameterDict``'s in theirs, as
        PyTorch)."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = parameters.items()
        elif isinstance(parameters, dict):
            pairs = sorted(parameters.items())
        else:
            pairs = parameters
        for k, v in pairs:
            self[k] = v

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_param_line(p, True)}" for k, p in self.items())
