"""``functional_call`` (a module called with other parameters and buffers) and
``stack_module_state`` (the parameters of several identical modules stacked, for
``vmap`` over an ensemble)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..nn.module import Module
from ..tensor import Tensor

__all__ = ["functional_call", "stack_module_state"]

_MISSING = object()


def _untie(module: Module, given: dict) -> dict:
    """``given`` with each value also under the other names of a tensor the module holds
    under several names (tied weights); PyTorch's error when tied names get different
    values."""
    named: dict[str, Tensor] = {}
    named.update(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    names_of: dict[int, set] = {}
    for name, t in named.items():
        names_of.setdefault(id(t), set()).add(name)
    tied: dict[str, set] = {}
    for names in names_of.values():
        if len(names) > 1:
            for n in names:
                tied[n] = names
    given_tied = {n for n in given if n in tied}
    for n in given_tied:
        names = tied[n]
        if (len(names & given_tied) > 1
                and len({id(given[m]) for m in names if m in given}) != 1):
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, "
                             "which are tied. Consider using tie_weights=False")
    out = dict(given)
    for n in given_tied:
        for m in tied[n]:
            out[m] = given[n]
    return out


def _swap(module: Module, name: str, value: Any) -> Any:
    """Put ``value`` at dotted path ``name`` (a parameter, buffer or plain attribute;
    ``_MISSING`` removes it) and return what was there (``_MISSING`` if nothing)."""
    prefix, _, attr = name.rpartition(".")
    mod = module.get_submodule(prefix)
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of torch.Tensor")
    for store in (mod._parameters, mod._buffers):
        if attr in store:
            orig = store[attr]
            if value is _MISSING:
                del store[attr]
            else:
                store[attr] = value
            return orig
    orig = getattr(mod, attr) if hasattr(mod, attr) else _MISSING
    if orig is not _MISSING and orig is not None and not isinstance(orig, Tensor):
        raise TypeError(f"attribute `{attr}`: {orig} is not an instance of torch.Tensor")
    if value is not _MISSING:
        setattr(mod, attr, value)
    elif hasattr(mod, attr):
        delattr(mod, attr)
    return orig


@contextlib.contextmanager
def _reparametrize(module: Module, tensors: dict, tie_weights: bool,
                   strict: bool) -> Iterator[None]:
    untied = _untie(module, tensors) if tie_weights else tensors
    if strict:
        valid = {n for n, _ in module.named_parameters(remove_duplicate=False)}
        valid |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing, unexpected = sorted(valid - set(untied)), sorted(set(untied) - valid)
        msgs = []
        if unexpected:
            msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if msgs:
            raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(
                module._get_name(), "\n\t".join(msgs)))
    originals: dict = {}
    try:
        for name, value in untied.items():
            originals[name] = _swap(module, name, value)
        yield
    finally:
        current = {name: _swap(module, name, orig) for name, orig in originals.items()}
        # a module that reassigned a buffer during the call (running statistics): the new
        # value goes back to the caller's dict, as PyTorch's
        tensors.update({k: current[k] for k in tensors if k in current})


def functional_call(module: Module,
                    parameter_and_buffer_dicts: Mapping[str, Tensor]
                    | Sequence[Mapping[str, Tensor]],
                    args: Any = None, kwargs: dict[str, Any] | None = None, *,
                    tie_weights: bool = True, strict: bool = False) -> Any:
    """Call ``module(*args, **kwargs)`` with its parameters and buffers replaced by the
    tensors of ``parameter_and_buffer_dicts`` (dotted names as in ``named_parameters``; one
    dict or a sequence of dicts with distinct keys), then put the originals back
    (``torch.func.functional_call``). Names not given keep the module's own tensors.

    ``tie_weights``: a tensor the module holds under several names takes the given value
    under all of them. ``strict``: every parameter and buffer must be given, and nothing
    else. ``args`` that is not a tuple is the one positional argument.

    >>> import jitgrad
    >>> from jitgrad.func import functional_call
    >>> lin = jitgrad.nn.Linear(2, 1)
    >>> params = {"weight": jitgrad.ones(1, 2), "bias": jitgrad.zeros(1)}
    >>> functional_call(lin, params, (jitgrad.tensor([[1.0, 2.0]]),))
    tensor([[3.]])
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        tensors = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                             "dictionaries")
        counts: dict[str, int] = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                             "functional call is ambiguous")
        tensors = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple "
                         f"of dicts, but got {type(parameter_and_buffer_dicts)}")
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize(module, tensors, tie_weights, strict):
        return module(*args, **kwargs)


def stack_module_state(models: Sequence[Module]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """``(params, buffers)``: each parameter and buffer of the modules ``models`` (all of
    one class, all in training or all in eval mode) stacked along a new first dimension,
    keyed by name -- for ``vmap(functional_call-of-one-model)`` over an ensemble. Stacked
    parameters are new leaves that require grad when the models' do.

    >>> import jitgrad
    >>> from jitgrad.func import stack_module_state
    >>> params, buffers = stack_module_state([jitgrad.nn.Linear(3, 2) for _ in range(4)])
    >>> params["weight"].shape
    jitgrad.Size([4, 2, 3])
    """
    from ..ops.concat import stack

    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    cls = type(models[0])
    if not all(type(m) is cls for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(tensors: list, name: str) -> Tensor:
        req = [t.requires_grad for t in tensors]
        if any(req) and not all(req):
            raise RuntimeError(f"Expected {name} from each model to have the same "
                               ".requires_grad")
        out = stack(tensors)
        return out.detach().requires_grad_() if all(req) else out

    all_params = [dict(m.named_parameters()) for m in models]
    params = {k: stacked([p[k] for p in all_params], k) for k in all_params[0]}
    all_buffers = [dict(m.named_buffers()) for m in models]
    buffers = {k: stacked([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers
