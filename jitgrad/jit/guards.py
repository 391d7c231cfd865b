"""What a compiled entry checks before it serves a call, besides its key.

* :func:`external_guards`: captured tensors keep their shape, dtype and requires_grad; leaves
  whose ``.grad`` the trace read keep its state (None, or shape and dtype);
* :class:`ClosureGuard`: what the function refers to that a trace bakes in (identities of
  tensors, modules' parameters and train/eval flags and plain-number attributes, optimizers'
  parameters, hyper-parameters and per-parameter state, plain numbers in the closure and in
  the globals the code names), read at every call and compared with the entry's snapshot.

A failed check is a miss (the generic path retraces or finds another entry): never a stale
result.
"""

from __future__ import annotations

from ..tensor import Tensor

__all__ = ["ClosureGuard", "external_guards", "closure_names", "state_of"]


def external_guards(graph, tracer) -> list:
    """Checks (returning a reason string on failure) for state read from outside the args."""
    checks = []
    for v in graph.externals:
        src = v.source
        if src.kind == "tensor":
            t = src.obj
            shape, dtype, req, name = v.shape, v.dtype, t._requires_grad, src.describe()

            def chk(t=t, shape=shape, dtype=dtype, req=req, name=name):
                if t._data.shape != shape or t._data.dtype != dtype:
                    return (f"captured tensor {name} changed shape/dtype "
                            f"{shape} -> {t._data.shape}")
                if t._requires_grad != req:
                    return f"captured tensor {name}: requires_grad changed"
                return None
            checks.append(chk)
    for leaf, state in tracer.grad_guards.values():
        if state == "any":
            continue

        def chk(leaf=leaf, state=state):
            g = leaf._grad
            now = None if g is None else (g._data.shape, g._data.dtype)
            if now != state:
                return f".grad of a leaf went from {state} to {now}"
            return None
        checks.append(chk)
    return checks


class ClosureGuard:
    """Reads, at every call, the state of what the function refers to that a trace bakes in:
    identities of tensors, of modules' parameters (and their ``training`` flag), of
    optimizers' parameters and their scalar hyper-parameters (``lr``...), and plain numbers
    in the closure and referenced globals. The slots to read are found once."""

    def __init__(self, fn) -> None:
        self.module = fn if _is_module(fn) else None
        target = getattr(type(fn), "forward", fn) if self.module is not None else fn
        code = getattr(target, "__code__", None)
        self.slots: list = []
        if code is None:
            return
        for cell in getattr(target, "__closure__", None) or ():
            if _cell_ok(cell) and _relevant(cell.cell_contents):
                self.slots.append((cell, None))
        g = getattr(target, "__globals__", {})
        for n in code.co_names:
            if n in g and _relevant(g[n]):
                self.slots.append((g, n))

    def current(self) -> tuple:
        out = []
        if self.module is not None:
            out.append(state_of(self.module))
        for holder, name in self.slots:
            if name is None:
                obj = holder.cell_contents if _cell_ok(holder) else None
            else:
                obj = holder.get(name)
            out.append(state_of(obj))
        return tuple(out)

    def fast_checks(self, expected: tuple, ns: dict) -> list:
        """Source lines that ``return MISS`` unless ``current() == expected`` (an entry's
        call path, ``call_path.py``): tensors and plain numbers are compared inline, other
        objects through ``state_of``. Reading an emptied cell raises ValueError."""
        ns["STATE_OF"] = state_of
        lines = []
        reads = []
        if self.module is not None:
            ns["CMOD"] = self.module
            reads.append("CMOD")
        for j, (holder, name) in enumerate(self.slots):
            ns[f"CH{j}"] = holder
            reads.append(f"CH{j}.cell_contents" if name is None else f"CH{j}.get({name!r})")
        for j, (read, exp) in enumerate(zip(reads, expected)):
            ns[f"CE{j}"] = exp
            lines.append(f"o = {read}")
            if type(exp) is int:  # a tensor, by identity
                lines.append(f"if id(o) != CE{j} or not isinstance(o, Tensor):")
            elif (type(exp) is tuple and exp[0] == "n" and type(exp[1]) in (int, float, bool)
                  and exp[1] == exp[1]):
                ns[f"CT{j}"], ns[f"CV{j}"] = type(exp[1]), exp[1]
                lines.append(f"if type(o) is not CT{j} or o != CV{j}:")
            else:
                lines.append(f"if STATE_OF(o) != CE{j}:")
            lines.append("    return MISS")
        return lines


def _is_module(o) -> bool:
    return hasattr(o, "parameters") and callable(getattr(o, "parameters", None)) and \
        not isinstance(o, type) and not isinstance(o, Tensor)


def _relevant(o) -> bool:
    return (isinstance(o, (Tensor, int, float, bool)) or _is_module(o)
            or hasattr(o, "param_groups"))


def state_of(o):
    if isinstance(o, Tensor):
        return id(o)
    if isinstance(o, (int, float, bool)) or o is None:
        return ("n", o)
    if isinstance(getattr(o, "_modules", None), dict) and \
            isinstance(getattr(o, "_parameters", None), dict):
        return ("m", _module_state(o))
    if _is_module(o):
        try:
            return ("m", tuple(id(p) for p in o.parameters()),
                    tuple(getattr(m, "training", None) for m in _modules(o)))
        except TypeError:
            return ("m", id(o))
    if hasattr(o, "param_groups"):
        dynamic = ("params", *getattr(o, "traced_hyperparameters", ()))  # read at every call
        state = getattr(o, "state", {})
        return ("o", tuple(
            (id(grp),  # traced hyper-parameters are read from this very dict at every call
             tuple(id(p) for p in grp["params"]),
             tuple((k, v) for k, v in grp.items()
                   if k not in dynamic and isinstance(v, (int, float, bool, tuple, type(None)))),
             # per-parameter state (momentum buffers, Adam moments) is created by the first
             # step: a trace made before it exists must not serve calls after
             tuple(tuple((k, id(v)) for k, v in state[p].items()) if p in state else ()
                   for p in grp["params"]))
            for grp in o.param_groups))
    return ("x", id(o))


_NUMBERS = (int, float, bool, tuple, type(None))


def _module_state(root) -> tuple:
    """Identity, ``training`` flag and plain-number attributes of every submodule, identities
    of their parameters and buffers: one walk over jitgrad's ``Module`` dicts (this runs at
    every call)."""
    out: list = []
    seen: set = set()
    stack = [root]
    while stack:
        mod = stack.pop()
        if id(mod) in seen:
            continue
        seen.add(id(mod))
        out.append(id(mod))
        out.append(getattr(mod, "training", None))
        # plain numbers a forward reads (Dropout.p, LayerNorm.eps...) are baked into a trace
        out.extend(v for v in mod.__dict__.items() if type(v[1]) in _NUMBERS)
        out.extend(id(p) for p in mod._parameters.values())
        out.extend(id(b) for b in getattr(mod, "_buffers", {}).values())
        stack.extend(c for c in reversed(mod._modules.values()) if c is not None)
    return tuple(out)


def _modules(m):
    mods = getattr(m, "modules", None)
    return list(mods()) if callable(mods) else [m]


def closure_names(fn) -> dict:
    """Readable names of the tensors a function refers to (closure, globals, module params),
    used to print captured tensors in the IR."""
    names: dict = {}
    target = fn
    if hasattr(fn, "named_parameters") and callable(fn.named_parameters):
        for n, p in fn.named_parameters():
            names[id(p)] = n
        target = getattr(type(fn), "forward", fn)
    code = getattr(target, "__code__", None)
    if code is None:
        return names
    pairs = list(zip(code.co_freevars, getattr(target, "__closure__", None) or ()))
    g = getattr(target, "__globals__", {})
    objs = [(n, c.cell_contents) for n, c in pairs if _cell_ok(c)]
    objs += [(n, g[n]) for n in code.co_names if n in g]
    optimizers = []
    for n, o in objs:
        if isinstance(o, Tensor):
            names.setdefault(id(o), n)
        elif hasattr(o, "named_parameters") and callable(getattr(o, "named_parameters", None)) \
                and not isinstance(o, type):
            try:
                for pn, p in o.named_parameters():
                    names.setdefault(id(p), f"{n}.{pn}")
            except TypeError:
                pass
        elif hasattr(o, "param_groups") and isinstance(getattr(o, "state", None), dict):
            optimizers.append((n, o))
    for n, o in optimizers:  # e.g. opt.state[model.0.weight].momentum_buffer
        for p, st in o.state.items():
            pname = names.get(id(p), "param")
            for k, v in st.items():
                if isinstance(v, Tensor):
                    names.setdefault(id(v), f"{n}.state[{pname}].{k}")
    return names


def _cell_ok(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
        return True
    except ValueError:
        return False
