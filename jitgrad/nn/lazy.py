"""Lazy modules, as PyTorch's: ``LazyLinear``, ``LazyConv1d`` / ``2d`` / ``3d``,
``LazyConvTranspose1d`` / ``2d`` / ``3d``, ``LazyBatchNorm1d`` / ``2d`` / ``3d`` and
``LazyInstanceNorm1d`` / ``2d`` / ``3d`` hold ``UninitializedParameter`` s (and
``UninitializedBuffer`` s) until their first forward, which reads the input's feature (or
channel) count, materialises and initialises them, and turns the module into its plain
class (``Linear``, ``Conv2d``, ``BatchNorm1d``...). Loading a ``state_dict`` into a lazy module
materialises its parameters with the checkpoint's shapes first.

>>> import jitgrad
>>> import jitgrad.nn as nn
>>> fc = nn.LazyLinear(3)
>>> fc
LazyLinear(in_features=0, out_features=3, bias=True)
>>> fc(jitgrad.ones(2, 5)).shape, fc
(jitgrad.Size([2, 3]), Linear(in_features=5, out_features=3, bias=True))
"""

from __future__ import annotations

from typing import Any

from .. import creation, dtypes
from ..tensor import Tensor
from .layers import Conv2d, Linear
from .mutation import bump
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _NormBase,
)

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyModuleMixin", "LazyLinear",
           "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d",
           "is_lazy"]


class UninitializedTensorMixin:
    """What uninitialised parameters and buffers share: no shape until
    :meth:`materialize`, which gives them storage and their plain class."""

    __slots__ = ()
    cls_to_become: type = Tensor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # all done by __new__

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the tensor storage of ``shape`` (uninitialised values), on its device and in
        its dtype unless given; it becomes a plain parameter (or tensor)."""
        from .. import creation

        shape = tuple(shape)
        device = self.device if device is None else device
        dtype = self.dtype if dtype is None else dtype
        self.data = creation.empty(*shape, device=device, dtype=dtype)
        self.__class__ = Tensor

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error "
            "usually happens in `load_state_dict` when trying to load an uninitialized "
            "parameter into an initialized one. Call `forward` to initialize the parameters "
            "before accessing their attributes.")

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call "
                           "`forward` to initialize the parameters before calling "
                           "`module.share_memory()`.")

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def _uninitialized(cls: type, requires_grad: bool, device, dtype, param: bool) -> Tensor:
    from .. import creation, dtypes

    t = creation.empty(0, device=device,
                       dtype=None if dtype is None else dtypes.to_dtype(dtype))
    t.__class__ = cls
    if param:
        t._is_param = True
    t.requires_grad_(requires_grad)
    return t


class UninitializedParameter(UninitializedTensorMixin, Tensor):
    """A parameter without storage yet (a lazy module's until its first forward)."""

    __slots__ = ()

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None) -> Tensor:
        return _uninitialized(cls, requires_grad, device, dtype, True)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer without storage yet."""

    __slots__ = ()

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None,
                persistent: bool = True) -> Tensor:
        t = _uninitialized(cls, requires_grad, device, dtype, False)
        t.persistent = persistent
        t._is_buffer = True
        return t


def is_lazy(param: Any) -> bool:
    """Whether ``param`` is an uninitialised parameter or buffer."""
    return isinstance(param, UninitializedTensorMixin)


class LazyModuleMixin:
    """Mixed in before a module class: a forward pre-hook runs ``initialize_parameters``
    (defined by the lazy class) on the first input, then the module becomes
    ``cls_to_become``."""

    cls_to_become: type | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def _upgrade_state_dict(self, state_dict: dict, prefix: str) -> None:
        """Before loading: uninitialised parameters and buffers found in ``state_dict``
        take its shapes (PyTorch's ``_lazy_load_hook``)."""
        for name, t in (*self._parameters.items(), *self._buffers.items()):
            key = prefix + name
            if t is not None and key in state_dict and is_lazy(t) \
                    and not is_lazy(state_dict[key]):
                t.materialize(tuple(state_dict[key]._data.shape))
        base = getattr(super(), "_upgrade_state_dict", None)
        if base is not None:
            base(state_dict, prefix)

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        """Materialise the parameters from the first input (defined by each lazy class)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{self.__class__.__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer is still uninitialised."""
        return any(is_lazy(t) for t in (*self._parameters.values(), *self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None) -> None:
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        delattr(module, "_initialize_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become
            bump()

    def _replicate_for_data_parallel(self):
        raise RuntimeError("Modules with uninitialized parameters can't be used with "
                           "`DataParallel`. Run a dummy forward pass to correctly initialize "
                           "the modules")


class LazyLinear(LazyModuleMixin, Linear):
    """A :class:`Linear` whose ``in_features`` is the last dim of its first input."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(0, 0, False, device=device, dtype=dtype)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """Linear's initialisation, once the parameters exist."""
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        """``in_features = input.shape[-1]``; materialise and initialise."""
        from ..autograd.grad_mode import no_grad

        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


class _LazyConv(LazyModuleMixin):
    """The lazy convolutions: ``in_channels`` from the first input's channel dim."""

    spatial = 2

    def _lazy_setup(self, out_channels: int, bias: bool, device, dtype) -> None:
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """The convolution's initialisation, once the parameters exist."""
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input: Tensor) -> int:
        unbatched = self.spatial + 1
        if input.ndim not in (unbatched, unbatched + 1):
            raise RuntimeError(f"Expected {unbatched}D (unbatched) or {unbatched + 1}D "
                               f"(batched) input to {type(self).__name__}, but got input of "
                               f"size: {input.shape}")
        return input.shape[1] if input.ndim == unbatched + 1 else input.shape[0]

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:
        """``in_channels`` from ``input``; materialise and initialise."""
        from ..autograd.grad_mode import no_grad

        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            with no_grad():
                if getattr(self, "transposed", False):  # (C_in, C_out / groups, *kernel)
                    shape = (self.in_channels, self.out_channels // self.groups)
                else:  # (C_out, C_in / groups, *kernel)
                    shape = (self.out_channels, self.in_channels // self.groups)
                self.weight.materialize((*shape, *self.kernel_size))
                if self.bias is not None:
                    self.bias.materialize((self.out_channels,))
                self.reset_parameters()


class LazyConv2d(_LazyConv, Conv2d):
    """A :class:`Conv2d` whose ``in_channels`` is the channel count of its first input."""

    cls_to_become = Conv2d
    spatial = 2

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode, device=device, dtype=dtype)
        self._lazy_setup(out_channels, bias, device, dtype)


def _lazy_conv_type(name: str, base: type, base_name: str, spatial: int, init) -> type:
    """The lazy class ``name`` over convolution ``base`` with constructor ``init``."""
    return type(name, (_LazyConv, base), {
        "__init__": init, "cls_to_become": base, "spatial": spatial,
        "__module__": __name__,
        "__doc__": f"A :class:`{base_name}` whose ``in_channels`` is the channel count of "
                   "its first input."})


def _lazy_conv_class(name: str, base_module: str, base_name: str, spatial: int) -> type:
    """``LazyConv1d`` / ``LazyConv3d`` over the lazily loaded ``Conv1d`` / ``Conv3d``."""
    import importlib

    base = getattr(importlib.import_module(f"{__package__}.{base_module}"), base_name)

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super(cls, self).__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                                  padding_mode, device=device, dtype=dtype)
        self._lazy_setup(out_channels, bias, device, dtype)

    cls = _lazy_conv_type(name, base, base_name, spatial, __init__)
    return cls


LazyConv1d = _lazy_conv_class("LazyConv1d", "one_dimensional", "Conv1d", 1)
LazyConv3d = _lazy_conv_class("LazyConv3d", "three_dimensional", "Conv3d", 3)


def _lazy_conv_transpose_class(name: str, base_module: str, base_name: str,
                               spatial: int) -> type:
    """``LazyConvTranspose1d`` / ``2d`` / ``3d`` over the lazily loaded transposed
    convolutions: ``in_channels`` from the first input, the weight ``(C_in, C_out / groups,
    *kernel)``."""
    import importlib

    base = getattr(importlib.import_module(f"{__package__}.{base_module}"), base_name)

    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super(cls, self).__init__(0, 0, kernel_size, stride, padding, output_padding, groups,
                                  False, dilation, padding_mode, device=device, dtype=dtype)
        self._lazy_setup(out_channels, bias, device, dtype)

    cls = _lazy_conv_type(name, base, base_name, spatial, __init__)
    return cls


LazyConvTranspose1d = _lazy_conv_transpose_class("LazyConvTranspose1d", "conv_transpose",
                                                 "ConvTranspose1d", 1)
LazyConvTranspose2d = _lazy_conv_transpose_class("LazyConvTranspose2d", "conv_transpose",
                                                 "ConvTranspose2d", 2)
LazyConvTranspose3d = _lazy_conv_transpose_class("LazyConvTranspose3d", "three_dimensional",
                                                 "ConvTranspose3d", 3)


class _LazyNormBase(LazyModuleMixin, _NormBase):
    """The lazy batch and instance norms: ``num_features`` from the first input's dim 1
    (as PyTorch's); the affine parameters and running statistics wait until then."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *,
                 bias: bool = True) -> None:
        # no affine parameters or statistics yet: they are made on the first input
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = creation.tensor(0, dtype=dtypes.int64, device=device)

    def reset_parameters(self) -> None:
        """The norm's reset (statistics 0 and 1, weight ones, bias zeros), once the
        parameters exist."""
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        """``num_features = input.shape[1]``; materialise and reset."""
        from ..autograd.grad_mode import no_grad

        if self.has_uninitialized_params():
            self.num_features = input.shape[1]
            with no_grad():
                for name in ("weight", "bias", "running_mean", "running_var"):
                    t = getattr(self, name)
                    if t is not None and is_lazy(t):
                        t.materialize((self.num_features,))
                self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    """A :class:`BatchNorm1d` whose ``num_features`` is its first input's ``shape[1]``."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    """A :class:`BatchNorm2d` whose ``num_features`` is its first input's ``shape[1]``."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    """A :class:`BatchNorm3d` whose ``num_features`` is its first input's ``shape[1]``."""

    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyNormBase, InstanceNorm1d):
    """An :class:`InstanceNorm1d` whose ``num_features`` is its first input's ``shape[1]``
    (``affine`` and ``track_running_stats`` default to True here, as in PyTorch's lazy
    instance norms, unlike ``InstanceNorm1d``)."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyNormBase, InstanceNorm2d):
    """An :class:`InstanceNorm2d` whose ``num_features`` is its first input's ``shape[1]``."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyNormBase, InstanceNorm3d):
    """An :class:`InstanceNorm3d` whose ``num_features`` is its first input's ``shape[1]``."""

    cls_to_become = InstanceNorm3d
