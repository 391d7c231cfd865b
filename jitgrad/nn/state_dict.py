"""``Module.state_dict`` / ``load_state_dict`` with PyTorch's key layout, strictness rules and
error messages."""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor

__all__ = ["IncompatibleKeys", "state_dict", "load_state_dict"]


class IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` could not match (PyTorch's ``_IncompatibleKeys``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _local_state(module) -> dict:
    """The module's own parameters and persistent buffers (not its children's)."""
    bufs = {k: v for k, v in module._buffers.items()
            if k not in module._non_persistent_buffers_set}
    return {k: v for k, v in (*module._parameters.items(), *bufs.items()) if v is not None}


def state_dict(module, destination=None, prefix: str = "", keep_vars: bool = False) -> dict:
    """Parameters and persistent buffers of ``module`` and its children, by dotted name."""
    if destination is None:
        destination = OrderedDict()
    for name, t in _local_state(module).items():
        destination[prefix + name] = t if keep_vars else t.detach()
    for name, child in module._modules.items():
        if child is not None:
            state_dict(child, destination, prefix + name + ".", keep_vars)
    return destination


def _load_local(module, sd: dict, prefix: str, missing: list, unexpected: list,
                errors: list, assign: bool) -> None:
    upgrade = getattr(module, "_upgrade_state_dict", None)
    if upgrade is not None:  # e.g. BatchNorm: checkpoints from before num_batches_tracked
        upgrade(sd, prefix)
    local = _local_state(module)
    for name, param in local.items():
        key = prefix + name
        if key not in sd:
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


def load_state_dict(module, sd: Mapping, strict: bool = True, assign: bool = False):
    """Copy ``sd`` into ``module``'s parameters and buffers (see ``Module.load_state_dict``)."""
    if not isinstance(sd, Mapping):
        raise TypeError(f"Expected state_dict to be dict-like, got {type(sd)}.")
    missing: list = []
    unexpected: list = []
    errors: list = []

    def load(mod, local_sd, prefix=""):
        _load_local(mod, local_sd, prefix, missing, unexpected, errors, assign)
        for name, child in mod._modules.items():
            if child is not None:
                child_prefix = prefix + name + "."
                load(child, {k: v for k, v in local_sd.items() if k.startswith(child_prefix)},
                     child_prefix)

    load(module, OrderedDict(sd))
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
    return IncompatibleKeys(missing, unexpected)
