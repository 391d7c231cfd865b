"""Layers with parameters or shape logic: ``Identity``, ``Linear``, ``Flatten``,
``Embedding``, ``Conv2d``, ``MaxPool2d``, ``AvgPool2d``, ``AdaptiveAvgPool2d``. Initialisation
follows PyTorch's defaults."""

from __future__ import annotations

import math

from .. import creation, devices, dtypes
from ..shapes import fmt_shape
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Identity", "Linear", "Flatten", "Embedding", "Conv2d", "MaxPool2d", "AvgPool2d",
           "AdaptiveAvgPool2d"]


def _empty(*shape, dtype=None) -> Tensor:
    """A parameter's storage, on the CPU: initialised there, then placed (:func:`place`)."""
    return creation.empty(*shape, dtype=dtypes.to_dtype(dtype) if dtype is not None else None,
                          device="cpu")


def _weight_and_bias(module: Module, shape: tuple, bias: bool, dtype) -> None:
    """Give ``module`` a ``weight`` of ``shape`` and, when ``bias``, a ``bias`` of ``shape[0]``
    elements (else a ``None`` bias parameter, as PyTorch registers it), then initialise them
    with its ``reset_parameters()``."""
    module.weight = Parameter(_empty(*shape, dtype=dtype))
    if bias:
        module.bias = Parameter(_empty(shape[0], dtype=dtype))
    else:
        module.register_parameter("bias", None)
    module.reset_parameters()


def place(module: Module, device) -> None:
    """A layer's ``device=`` (None: the default device, ``jitgrad.set_default_device``): its
    parameters and buffers, made and initialised on the CPU, moved there. The same seed
    gives the same initial weights on every device."""
    dev = devices.get_default_device() if device is None else devices.parse(device)
    if dev.type != "cpu":
        module.to(dev)


class Identity(Module):
    """Returns its input (arguments are accepted and ignored)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with PyTorch's default initialisation:
    ``kaiming_uniform_(weight, a=sqrt(5))`` and ``bias ~ U(-1/sqrt(in), 1/sqrt(in))``.

    >>> import jitgrad
    >>> fc = jitgrad.nn.Linear(3, 2)
    >>> fc(jitgrad.ones(4, 3)).shape
    jitgrad.Size([4, 2])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        _weight_and_bias(self, (out_features, in_features), bias, dtype)
        place(self, device)

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Flatten(Module):
    """Flattens dims ``start_dim``..``end_dim`` into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class _Table(Module):
    """A table of ``num_embeddings`` vectors (``Embedding``, ``EmbeddingBag``): the shared
    arguments, PyTorch's checks of them, and the N(0, 1) initialisation with the
    ``padding_idx`` row zeroed."""

    def _setup_table(self, kind: str, num_embeddings: int, embedding_dim: int, padding_idx,
                     max_norm, norm_type: float, scale_grad_by_freq: bool, sparse: bool,
                     _weight: Tensor | None, freeze: bool, dtype) -> None:
        if sparse:
            raise NotImplementedError(f"{kind}: sparse gradients are not supported by jitgrad")
        if scale_grad_by_freq and kind != "Embedding":
            raise NotImplementedError(f"{kind}: scale_grad_by_freq is not supported by jitgrad")
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < num_embeddings, "Padding_idx must be within num_embeddings"
            elif padding_idx < 0:
                assert padding_idx >= -num_embeddings, \
                    "Padding_idx must be within num_embeddings"
                padding_idx = num_embeddings + padding_idx
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(_empty(num_embeddings, embedding_dim, dtype=dtype),
                                    requires_grad=not freeze)
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            from ..autograd.grad_mode import no_grad

            with no_grad():
                self.weight[self.padding_idx].fill_(0)


class Embedding(_Table):
    """A lookup table of ``num_embeddings`` vectors, initialised N(0, 1) (the
    ``padding_idx`` row zeroed and given no gradient)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Tensor | None = None, _freeze: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__()
        self._setup_table("Embedding", num_embeddings, embedding_dim, padding_idx, max_norm,
                          norm_type, scale_grad_by_freq, sparse, _weight, _freeze, dtype)
        place(self, device)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, **kwargs) -> Embedding:
        """An embedding whose table is ``embeddings`` (frozen unless ``freeze=False``)."""
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, _weight=embeddings, _freeze=freeze, **kwargs)


def _pair(v, name: str) -> tuple:
    t = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(t) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {v!r}")
    return t


class _ConvBase(Module):
    """What the convolution layers share: argument checks, PyTorch's initialisation
    (``kaiming_uniform_(a=sqrt(5))``, bias bound ``1/sqrt(fan_in)`` with ``fan_in`` from
    ``weight.shape[1]`` and the kernel) and the repr; PyTorch's ``_ConvNd``."""

    #: whether the layer is a transposed convolution (its weight ``(C_in, C_out/groups, *k)``)
    transposed = False

    def __init__(self, in_channels: int | None = None, out_channels: int | None = None,
                 kernel_size: tuple | None = None, stride: tuple | None = None,
                 padding: tuple | str | None = None, dilation: tuple | None = None,
                 transposed: bool = False, output_padding: tuple | None = None,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        """Without arguments, an empty module (jitgrad's layers then set themselves up);
        with PyTorch's ``_ConvNd`` arguments (tuples as long as the kernel's rank), a user
        subclass's convolution parameters, made and initialised as the built-in layers'."""
        super().__init__()
        if in_channels is None:
            return
        k = tuple(kernel_size)
        if transposed:
            from .conv_transpose import _ConvTransposeBase

            _ConvTransposeBase._setup_transposed(self, in_channels, out_channels, k,
                                                 tuple(stride), tuple(padding),
                                                 tuple(output_padding), groups, bias,
                                                 tuple(dilation), padding_mode, dtype)
        else:
            self._setup(in_channels, out_channels, k, tuple(stride),
                        padding if isinstance(padding, str) else tuple(padding),
                        tuple(dilation), groups, bias, padding_mode, dtype)
            self.output_padding = tuple(output_padding or (0,) * len(k))
        self.transposed = transposed
        place(self, device)

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """The layer's convolution of ``input`` with the given ``weight`` and ``bias``
        (PyTorch's hook for subclasses that transform the weight first)."""
        input, padding = self._padded(input)
        conv = {1: "conv1d", 2: "conv2d", 3: "conv3d"}[len(self.kernel_size)]
        return getattr(F, conv)(input, weight, bias, self.stride, padding, self.dilation,
                                self.groups)

    def _setup(self, in_channels: int, out_channels: int, kernel_size: tuple, stride: tuple,
               padding, dilation: tuple, groups: int, bias: bool, padding_mode: str,
               dtype) -> None:
        """Check and store the arguments of a (non-transposed) convolution; make its
        ``weight`` ``(out, in / groups, *kernel)`` and ``bias`` and initialise them."""
        self._check_groups(in_channels, out_channels, groups)
        modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in modes:
            raise ValueError(f"padding_mode must be one of {modes}, but got "
                             f"padding_mode='{padding_mode}'")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.groups, self.padding_mode = dilation, groups, padding_mode
        # F.pad's amounts (last dim first) for a padding_mode other than zeros, as PyTorch's
        if padding == "valid":
            pads = [0] * (2 * len(kernel_size))
        elif padding == "same":
            pads = []
            for d, k in zip(reversed(dilation), reversed(kernel_size)):
                total = d * (k - 1)
                pads += [total // 2, total - total // 2]
        else:
            pads = [p for p in reversed(padding) for _ in range(2)]
        self._reversed_padding_repeated_twice = pads
        _weight_and_bias(self, (out_channels, in_channels // groups, *kernel_size), bias,
                         dtype)

    def _padded(self, input: Tensor) -> tuple:
        """``(input, padding)`` for the convolution: ``input`` itself and the layer's
        padding, or -- for ``padding_mode`` reflect / replicate / circular -- ``input``
        padded that way and no further padding (PyTorch's ``_conv_forward``)."""
        if self.padding_mode == "zeros":
            return input, self.padding
        return (F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode),
                (0,) * len(self.kernel_size))

    def _check_groups(self, in_channels: int, out_channels: int, groups: int) -> None:
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if isinstance(self.padding, str) or any(self.padding):
            s += f", padding={self.padding}"
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if any(getattr(self, "output_padding", ())):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if getattr(self, "padding_mode", "zeros") != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_ConvBase):
    """2-D convolution over ``(N, C, H, W)``, PyTorch's default initialisation
    (``kaiming_uniform_(a=sqrt(5))``, bias bound ``1/sqrt(fan_in)``)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super().__init__()
        self._setup(in_channels, out_channels, _pair(kernel_size, "kernel_size"),
                    _pair(stride, "stride"),
                    padding if isinstance(padding, str) else _pair(padding, "padding"),
                    _pair(dilation, "dilation"), groups, bias, padding_mode, dtype)
        place(self, device)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise RuntimeError(
                f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of "
                f"size: {list(input.shape)}")
        c = input.shape[-3]
        if c != self.in_channels:
            raise RuntimeError(
                f"Given groups={self.groups}, weight of size {list(self.weight.shape)}, "
                f"expected input{list(input.shape)} to have {self.in_channels} channels, but "
                f"got {c} channels instead")
        input, padding = self._padded(input)
        return F.conv2d(input, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


class MaxPool2d(Module):
    """2-D max pooling (``stride`` defaults to ``kernel_size``)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor):
        if input.ndim not in (3, 4):
            raise RuntimeError(f"max_pool2d: expected a 3-D or 4-D input, got shape "
                               f"{fmt_shape(tuple(input.shape))}")
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """2-D average pooling (``stride`` defaults to ``kernel_size``), as
    ``torch.nn.AvgPool2d``.

    >>> import jitgrad
    >>> jitgrad.nn.AvgPool2d(2)(jitgrad.ones(1, 1, 4, 4)).shape
    jitgrad.Size([1, 1, 2, 2])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """2-D adaptive average pooling to ``output_size`` (an int, or a pair whose None entries
    keep the input's size), as ``torch.nn.AdaptiveAvgPool2d``.

    >>> import jitgrad
    >>> jitgrad.nn.AdaptiveAvgPool2d((1, 1))(jitgrad.ones(2, 3, 5, 5)).shape
    jitgrad.Size([2, 3, 1, 1])
    """

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
