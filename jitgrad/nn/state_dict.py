"""``Module.state_dict`` / ``load_state_dict`` with PyTorch's key layout, metadata, hooks,
strictness rules and error messages.

As in PyTorch, ``state_dict`` runs each module's state-dict pre-hooks, saves its own
tensors (``Module._save_to_state_dict``), recurses into its children, then runs its
post-hooks; ``load_state_dict`` calls ``Module._load_from_state_dict`` (which runs the
load pre-hooks first) on each module, recurses into its children, then runs the module's
load post-hooks, which may edit ``incompatible_keys`` in place before ``strict`` is
checked."""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor

__all__ = ["IncompatibleKeys", "state_dict", "load_state_dict", "save_to_state_dict",
           "load_from_state_dict"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` could not match (PyTorch's ``_IncompatibleKeys``).

    >>> _IncompatibleKeys([], [])
    <All keys matched successfully>
    >>> _IncompatibleKeys(["w"], [])
    _IncompatibleKeys(missing_keys=['w'], unexpected_keys=[])
    """

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


IncompatibleKeys = _IncompatibleKeys  # the name jitgrad used before


def _local_state(module) -> dict:
    """The module's own parameters and persistent buffers (not its children's)."""
    bufs = {k: v for k, v in module._buffers.items()
            if k not in module._non_persistent_buffers_set}
    return {k: v for k, v in (*module._parameters.items(), *bufs.items()) if v is not None}


def save_to_state_dict(module, destination: dict, prefix: str, keep_vars: bool) -> None:
    """``Module._save_to_state_dict``: the module's own parameters and persistent buffers
    into ``destination`` (detached unless ``keep_vars``)."""
    for name, t in _local_state(module).items():
        destination[prefix + name] = t if keep_vars else t.detach()


def state_dict(module, destination=None, prefix: str = "", keep_vars: bool = False) -> dict:
    """Parameters and persistent buffers of ``module`` and its children, by dotted name
    (PyTorch's ``Module.state_dict``, hooks and ``_metadata`` included)."""
    if destination is None:
        destination = OrderedDict()
        destination._metadata = OrderedDict()
    local_metadata = dict(version=module._version)
    if hasattr(destination, "_metadata"):
        destination._metadata[prefix[:-1]] = local_metadata
    for hook in module._state_dict_pre_hooks.values():
        hook(module, prefix, keep_vars)
    module._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in module._modules.items():
        if child is not None:
            child.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
    for hook in module._state_dict_hooks.values():
        result = hook(module, destination, prefix, local_metadata)
        if not getattr(hook, "_from_public_api", False):
            if result is not None:  # the private API: a replacement state dict
                destination = result
        elif result is not None:
            raise RuntimeError("state_dict post-hook must return None")
    return destination


def load_from_state_dict(module, sd: dict, prefix: str, local_metadata: dict, strict: bool,
                         missing: list, unexpected: list, errors: list) -> None:
    """``Module._load_from_state_dict``: the load pre-hooks, then the module's own
    parameters and buffers from ``sd`` (not its children's)."""
    upgrade = getattr(module, "_upgrade_state_dict", None)
    if upgrade is not None:  # e.g. BatchNorm: checkpoints from before num_batches_tracked
        upgrade(sd, prefix)
    for hook in module._load_state_dict_pre_hooks.values():
        hook(sd, prefix, local_metadata, strict, missing, unexpected, errors)
    assign = local_metadata.get("assign_to_params_buffers", False)
    local = _local_state(module)
    for name, param in local.items():
        key = prefix + name
        if key not in sd:
            if strict:
                missing.append(key)
            continue
        value = sd[key]
        if not isinstance(value, Tensor):
            errors.append(f'While copying the parameter named "{key}", expected torch.Tensor '
                          f"or Tensor-like object from checkpoint but received {type(value)}")
            continue
        if param.ndim == 0 and value.ndim == 1 and value.shape[0] == 1:
            value = value[0]
        if value.shape != param.shape:
            errors.append(f"size mismatch for {key}: copying a param with shape {value.shape} "
                          f"from checkpoint, the shape in current model is {param.shape}.")
            continue
        try:
            with no_grad():
                if assign:
                    _assign(module, name, param, value)
                else:
                    param.copy_(value)
        except Exception as ex:  # noqa: BLE001 - reported as PyTorch reports it
            errors.append(f'While copying the parameter named "{key}", whose dimensions in the '
                          f"model are {param.shape} and whose dimensions in the checkpoint are "
                          f"{value.shape}, an exception occurred : {ex.args}.")
    if strict:
        for key in sd:
            if not key.startswith(prefix):
                continue
            head = key[len(prefix):].split(".", 1)
            if (len(head) > 1 and head[0] not in module._modules) or (
                    len(head) == 1 and head[0] not in local):
                unexpected.append(key)


def _assign(module, name: str, param: Tensor, value: Tensor) -> None:
    """``load_state_dict(assign=True)``: the checkpoint tensor replaces the module's."""
    from .parameter import Parameter

    if name in module._parameters:
        module._parameters[name] = Parameter(value, requires_grad=param.requires_grad)
    else:
        module._buffers[name] = value


def load_state_dict(module, sd: Mapping, strict: bool = True,
                    assign: bool = False) -> _IncompatibleKeys:
    """Copy ``sd`` into ``module``'s parameters and buffers (see ``Module.load_state_dict``)."""
    if not isinstance(sd, Mapping):
        raise TypeError(f"Expected state_dict to be dict-like, got {type(sd)}.")
    missing: list[str] = []
    unexpected: list[str] = []
    errors: list[str] = []
    metadata = getattr(sd, "_metadata", None)
    sd = OrderedDict(sd)  # a copy: the hooks and _load_from_state_dict may edit it
    if metadata is not None:
        sd._metadata = metadata

    def load(mod, local_sd, prefix=""):
        local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
        if assign:
            local_metadata["assign_to_params_buffers"] = assign
        # PyTorch passes strict=True here whatever load_state_dict's strict is
        mod._load_from_state_dict(local_sd, prefix, local_metadata, True, missing,
                                  unexpected, errors)
        for name, child in mod._modules.items():
            if child is not None:
                child_prefix = prefix + name + "."
                load(child, {k: v for k, v in local_sd.items() if k.startswith(child_prefix)},
                     child_prefix)
        incompatible = _IncompatibleKeys(missing, unexpected)  # hooks edit it in place
        for hook in mod._load_state_dict_post_hooks.values():
            if hook(mod, incompatible) is not None:
                raise AssertionError(
                    "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                    "expected to return new values, if incompatible_keys need to be modified, "
                    "it should be done inplace.")

    load(module, sd)
    if strict:
        if unexpected:
            errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                ", ".join(f'"{k}"' for k in unexpected)))
        if missing:
            errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                ", ".join(f'"{k}"' for k in missing)))
    if errors:
        raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
            type(module).__name__, "\n\t".join(errors)))
    return _IncompatibleKeys(missing, unexpected)
