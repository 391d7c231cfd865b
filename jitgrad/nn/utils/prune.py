"""Pruning, as ``torch.nn.utils.prune``: a pruned parameter ``name`` becomes a parameter
``name + "_orig"``, a buffer ``name + "_mask"`` and a plain attribute ``name`` (their
product), recomputed before every forward by a forward pre-hook (the pruning method itself).
Pruning twice combines the masks (a :class:`PruningContainer`); :func:`remove` makes the
pruned values the parameter again.

Methods: :class:`Identity`, :class:`RandomUnstructured`, :class:`L1Unstructured`,
:class:`RandomStructured`, :class:`LnStructured` (whole slices along ``dim`` by their
``n``-norm), :class:`CustomFromMask`; their functions :func:`identity`,
:func:`random_unstructured`, :func:`l1_unstructured`, :func:`random_structured`,
:func:`ln_structured`, :func:`custom_from_mask`, and :func:`global_unstructured` (one
threshold over several parameters), :func:`remove`, :func:`is_pruned`. ``amount`` is a
fraction in ``[0, 1]`` or a number of parameters (channels, for the structured methods);
among equal scores the entries pruned are ``topk``'s choice, which may differ from
PyTorch's, and random methods draw from jitgrad's generator.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ... import creation
from ...autograd.grad_mode import no_grad
from ...memory_format import contiguous_format
from ...tensor import Tensor

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """A way of computing a parameter's mask; also the forward pre-hook that applies it."""

    _tensor_name: str
    PRUNING_TYPE: str = "unstructured"

    def __call__(self, module, inputs) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask (ones where kept) for ``t``, within ``default_mask`` (the mask so far)."""

    def apply_mask(self, module) -> Tensor:
        """``name + "_orig"`` times ``name + "_mask"``: the pruned tensor."""
        assert self._tensor_name is not None, f"Module {module} has to be pruned"
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name: str, *args, importance_scores=None, **kwargs):
        """Prune ``module``'s parameter ``name`` with a new ``cls(*args, **kwargs)``
        (combined with an earlier pruning of it); the method (or container) is returned."""
        old_method = None
        found = [k for k, hook in module._forward_pre_hooks.items()
                 if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
        if len(found) > 1:
            raise RuntimeError(f"Avoid adding multiple pruning hooks to the same tensor "
                               f"{name} of module {module}. Use a PruningContainer.")
        method = cls(*args, **kwargs)
        method._tensor_name = name
        orig = getattr(module, name)
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(orig.shape):
                raise AssertionError(f"importance_scores should have the same shape as "
                                     f"parameter {name} of {module}")
        else:
            importance_scores = orig
        if found:
            old_method = module._forward_pre_hooks[found[0]]
            if isinstance(old_method, PruningContainer):
                old_method.add_pruning_method(method)
                method = old_method
            else:
                container = PruningContainer(old_method)
                container.add_pruning_method(method)
                method = container
        if old_method is None:  # the parameter becomes name_orig
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = creation.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone(
                memory_format=contiguous_format)
        try:
            with no_grad():
                mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            if found:
                del module._forward_pre_hooks[found[0]]
            module.register_forward_pre_hook(method)
        except Exception:
            if old_method is None:  # as it was: the parameter back under its name
                orig = getattr(module, name + "_orig")
                del module._parameters[name + "_orig"]
                module.register_parameter(name, orig)
            raise
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:
        """``t`` with this method's mask applied (nothing registered on a module)."""
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(t.shape):
            raise AssertionError("importance_scores should have the same shape as tensor t")
        scores = t if importance_scores is None else importance_scores
        default = creation.ones_like(t) if default_mask is None else default_mask
        with no_grad():
            mask = self.compute_mask(scores, default_mask=default)
        return t * mask

    def remove(self, module) -> None:
        """Make the pruned tensor the parameter ``name`` again (mask and original gone)."""
        assert self._tensor_name is not None, f"Module {module} has to be pruned before " \
            f"pruning can be removed"
        name = self._tensor_name
        weight = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        orig.data = weight.data
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """Pruning methods applied one after the other to one parameter: each later method
    prunes only what the ones before kept (unstructured: the kept entries; structured: the
    kept slices; global: everything)."""

    def __init__(self, *args) -> None:
        self._pruning_methods: tuple = ()
        if len(args) == 1 and not isinstance(args[0], Iterable):
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        elif len(args) == 1 and len(args[0]) == 1:
            self._tensor_name = args[0][0]._tensor_name
            self.add_pruning_method(args[0][0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method) -> None:
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer {self}. Found "
                             f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        method = self._pruning_methods[-1]
        new_mask = default_mask.clone(memory_format=contiguous_format).to(dtype=t.dtype)
        if method.PRUNING_TYPE == "unstructured":
            slc = default_mask == 1
        elif method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("Pruning methods of type 'structured' need to have the "
                                     "attribute `dim` defined.")
            n = t.dim()
            dim = method.dim + n if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor of size {t.shape}")
            keep = default_mask.sum(dim=[d for d in range(n) if d != dim]) != 0
            slc = [slice(None)] * n
            slc[dim] = keep
            slc = tuple(slc)
        elif method.PRUNING_TYPE == "global":
            slc = (slice(None),) * t.dim()
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE}")
        partial = method.compute_mask(t[slc], default_mask=default_mask[slc])
        new_mask[slc] = partial.to(dtype=new_mask.dtype)
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing (a mask of ones)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module, name: str):
        return super().apply(module, name)


class _Unstructured(BasePruningMethod):
    """Prunes the ``amount`` entries of smallest :meth:`_scores` (``topk``'s choice among
    ties)."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def _scores(self, t: Tensor) -> Tensor:
        raise NotImplementedError

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        from ...ops.sorting import topk

        size = t.numel()
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        mask = default_mask.clone(memory_format=contiguous_format)
        if k:
            mask.view(-1)[topk(self._scores(t).reshape(-1), k, largest=False).indices] = 0
        return mask


class RandomUnstructured(_Unstructured):
    """Prunes ``amount`` entries drawn at random."""

    def _scores(self, t: Tensor) -> Tensor:
        return -creation.rand_like(t)  # (PyTorch drops the k largest draws)

    @classmethod
    def apply(cls, module, name: str, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Prunes the ``amount`` entries of smallest absolute value."""

    def _scores(self, t: Tensor) -> Tensor:
        return t.abs()

    @classmethod
    def apply(cls, module, name: str, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _Structured(BasePruningMethod):
    """Prunes ``amount`` whole slices along ``dim``: those :meth:`_kept` does not keep."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount, self.dim = amount, dim

    def _kept(self, t: Tensor, size: int, k: int):
        """The slices to keep (a bool mask or positions along ``dim``) when pruning ``k``."""
        raise NotImplementedError

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        if not k:
            return default_mask
        mask = creation.zeros_like(t)
        slc = [slice(None)] * t.dim()
        slc[self.dim] = self._kept(t, size, k)
        mask[tuple(slc)] = 1
        return mask * default_mask.to(dtype=mask.dtype)


class RandomStructured(_Structured):
    """Prunes ``amount`` slices along ``dim`` drawn at random."""

    def _kept(self, t: Tensor, size: int, k: int):
        from ...ops.sorting import kthvalue

        prob = creation.rand(size)
        return prob > kthvalue(prob, k).values

    @classmethod
    def apply(cls, module, name: str, amount, dim: int = -1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Prunes the ``amount`` slices along ``dim`` of smallest ``n``-norm."""

    def __init__(self, amount, n, dim: int = -1) -> None:
        super().__init__(amount, dim)
        self.n = n

    def _kept(self, t: Tensor, size: int, k: int):
        from ...ops.sorting import topk

        dims = list(range(t.dim()))
        dims.remove(dims[self.dim])
        return topk(t.norm(p=self.n, dim=dims), size - k, largest=True).indices

    @classmethod
    def apply(cls, module, name: str, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where a given mask is zero."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise AssertionError(f"the mask's shape {list(self.mask.shape)} is not the "
                                 f"parameter's {list(default_mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name: str, mask):
        return super().apply(module, name, mask=mask)


# ------------------------------------------------------------------------ functions
def identity(module, name: str):
    """Prune nothing of ``module.name`` (the reparametrisation only)."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name: str, amount):
    """Prune ``amount`` entries of ``module.name`` at random."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name: str, amount, importance_scores=None):
    """Prune the ``amount`` entries of ``module.name`` of smallest absolute value (of
    ``importance_scores`` where given)."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name: str, amount, dim: int):
    """Prune ``amount`` slices along ``dim`` of ``module.name`` at random."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name: str, amount, n, dim: int, importance_scores=None):
    """Prune the ``amount`` slices along ``dim`` of ``module.name`` of smallest ``n``-norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs) -> None:
    """Prune the ``(module, name)`` pairs of ``parameters`` together: ``pruning_method``
    (an unstructured method class) over all their entries at once."""
    from .convert_parameters import parameters_to_vector

    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = {} if importance_scores is None else importance_scores
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector([importance_scores.get((m, n), getattr(m, n))
                                   for m, n in parameters])
    default = parameters_to_vector([getattr(m, n + "_mask", None) if hasattr(m, n + "_mask")
                                    else creation.ones_like(getattr(m, n))
                                    for m, n in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the '
                        f'`pruning_method`. Found method {pruning_method} of type '
                        f'{method.PRUNING_TYPE}')
    container.add_pruning_method(method)
    with no_grad():
        final = container.compute_mask(scores.detach(), default.detach())
    at = 0
    for m, n in parameters:
        p = getattr(m, n)
        custom_from_mask(m, n, mask=final[at:at + p.numel()].view_as(p))
        at += p.numel()


def custom_from_mask(module, name: str, mask: Tensor):
    """Prune ``module.name`` where ``mask`` is zero."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name: str):
    """Make ``module.name``'s pruned values its parameter again (the pruning made
    permanent: ``name_orig``, ``name_mask`` and the hook removed)."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     f"can be removed")


def is_pruned(module) -> bool:
    """Whether any submodule of ``module`` has a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for _, sub in module.named_modules()
               for hook in sub._forward_pre_hooks.values())


# ------------------------------------------------------------------------ checks
def _validate_pruning_amount_init(amount) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral)
            and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         f"non-negative integer")


def _validate_pruning_amount(amount, tensor_size: int) -> None:
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to "
                         f"prune={tensor_size}")


def _validate_structured_pruning(t: Tensor) -> None:
    shape = t.shape
    if len(shape) <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional "
                         f"tensors. Found tensor of shape {shape} with {len(shape)} dims")


def _compute_nparams_toprune(amount, tensor_size: int) -> int:
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


def _validate_pruning_dim(t: Tensor, dim: int) -> None:
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")
