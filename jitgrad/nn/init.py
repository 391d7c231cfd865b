"""Parameter initialisation, as ``torch.nn.init``: every function fills its tensor in place
(under ``no_grad``) and returns it; random ones take a seeded ``generator``.

>>> import jitgrad
>>> w = jitgrad.empty(3, 4)
>>> g = jitgrad.Generator().manual_seed(0)
>>> _ = jitgrad.nn.init.kaiming_uniform_(w, a=5 ** 0.5, generator=g)
>>> bool((w.abs() <= 0.5).all())   # bound = 1 / sqrt(fan_in)
True
"""

from __future__ import annotations

import math

from ..autograd.grad_mode import no_grad
from ..random import Generator
from ..tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "trunc_normal_", "orthogonal_", "eye_", "dirac_", "sparse_"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table)."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight: its input (dim 1) and output (dim 0) sizes times
    the receptive field (PyTorch's private helper, which layers' ``reset_parameters``
    copied into user code call)."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    field = math.prod(tensor.shape[2:])
    return tensor.shape[1] * field, tensor.shape[0] * field


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    """The fan ``mode`` ("fan_in" / "fan_out") names, as PyTorch's helper."""
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: Generator | None = None) -> Tensor:
    """Fill with U(a, b)."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: Generator | None = None) -> Tensor:
    """Fill with N(mean, std²)."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: Generator | None = None) -> Tensor:
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: Generator | None = None) -> Tensor:
    """Glorot normal: N(0, std²) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:
    """He uniform: U(-b, b) with ``b = gain * sqrt(3 / fan)``."""
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:
    """He normal: N(0, std²) with ``std = gain / sqrt(fan)``."""
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Generator | None = None) -> Tensor:
    """Fill with N(mean, std²) truncated to ``[a, b]`` (absolute bounds, as PyTorch's):
    values drawn outside are drawn again, so the distribution is exactly the truncated
    normal."""
    if not a < b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")
    with no_grad():
        from ..creation import empty

        draw = empty(tensor.shape, dtype=tensor.dtype)
        draw.normal_(mean, std, generator=generator)
        bad = (draw < a) | (draw > b)
        while bool(bad.any()):  # each round keeps P(inside) of what is left (>= 95% at 2 std)
            fresh = empty(tensor.shape, dtype=tensor.dtype).normal_(mean, std,
                                                                     generator=generator)
            draw = draw.where(~bad, fresh)
            bad = (draw < a) | (draw > b)
        return tensor.copy_(draw)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None
                ) -> Tensor:
    """Fill with a (semi-)orthogonal matrix (trailing dims flattened), times ``gain``: the Q
    of a Gaussian matrix's QR decomposition, signs fixed by R's diagonal (uniform over the
    orthogonal group, as PyTorch's)."""
    import numpy as np

    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        from ..creation import empty
        from ..creation import tensor as make

        flat = empty(rows, cols, dtype=tensor.dtype).normal_(0, 1, generator=generator)
        m = flat.numpy().astype(np.float64)
        if rows < cols:
            m = m.T
        q, r = np.linalg.qr(m)
        q *= np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        return tensor.copy_(make(q * gain, dtype=tensor.dtype).reshape(tensor.shape))


def eye_(tensor: Tensor) -> Tensor:
    """Fill the 2-D ``tensor`` with the identity matrix (ones on the diagonal)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        from ..creation import eye

        return tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill the 3-, 4- or 5-D convolution weight ``tensor`` with the Dirac delta: each of
    the first ``min(out, in)`` channels of each group passes its input channel through."""
    import numpy as np

    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per = tensor.shape[0] // groups
    n = min(out_per, tensor.shape[1])
    w = np.zeros(tuple(tensor.shape), dtype=tensor.dtype.np)
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(n):
            w[(g * out_per + d, d) + centre] = 1
    with no_grad():
        from ..creation import tensor as make

        return tensor.copy_(make(w))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01,
            generator: Generator | None = None) -> Tensor:
    """Fill the 2-D ``tensor`` from N(0, std²), then zero ``ceil(sparsity * rows)`` random
    rows of each column (PyTorch's sparse initialisation, Martens 2010)."""
    from ..creation import randperm

    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            tensor[randperm(rows)[:num_zeros], col] = 0
    return tensor
