"""``torch.nn.utils.parametrizations``: ``weight_norm`` and ``spectral_norm`` as
parametrizations (``jitgrad.nn.utils.parametrize``), with PyTorch's ``state_dict`` keys
(``parametrizations.weight.original0`` / ``original1`` for weight norm;
``parametrizations.weight.original`` and the power iteration's ``0._u`` / ``0._v`` buffers
for spectral norm)."""

from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ...tensor import Tensor
from ..module import Module
from . import parametrize
from .weight_norm_hook import norm_except_dim, weight_norm_interface

__all__ = ["weight_norm", "spectral_norm"]


class _WeightNorm(Module):
    """``weight = g * v / ||v||`` from ``(g, v)``; its right inverse splits a weight into its
    norm over every dim but ``dim`` and itself."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_norm_interface(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        """``(norm_except_dim(weight, 2, dim), weight)``."""
        return norm_except_dim(weight, 2, self.dim), weight

    def _upgrade_state_dict_of(self, state_dict: dict, prefix: str, name: str) -> None:
        """Checkpoints of the hook API (``<name>_g`` / ``<name>_v``) load as PyTorch's do."""
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Parametrize ``module.<name>`` as ``g * v / ||v||`` (the norm over every dim but
    ``dim``; ``None``: the whole tensor), ``g`` and ``v`` the parameters
    ``parametrizations.<name>.original0`` / ``original1``."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


def _as_matrix(weight: Tensor, dim: int) -> Tensor:
    """``weight`` with dim ``dim`` first, flattened to a matrix."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.flatten(1)


class _SpectralNorm(Module):
    """``weight / sigma``, ``sigma`` the largest singular value of the weight as a matrix
    (dim ``dim`` its rows), estimated by power iteration on the buffers ``_u`` / ``_v``
    (``n_power_iterations`` per forward in training mode; 1-D weights are normalised)."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        from .. import functional as F

        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                mat = _as_matrix(weight, self.dim)
                h, w = mat.shape
                u = mat.new_empty(h).normal_(0, 1)
                v = mat.new_empty(w).normal_(0, 1)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(mat, 15)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        from .. import functional as F

        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(weight_mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(weight_mat.T.mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        from .. import functional as F

        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        mat = _as_matrix(weight, self.dim)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = u.dot(mat.mv(v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        """The weight itself (its scale is not recovered, as in PyTorch)."""
        return value


def _transposed(module: Module) -> bool:
    names = ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")
    return any(c.__name__ in names and c.__module__.startswith("jitgrad.nn")
               for c in type(module).__mro__)


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Parametrize ``module.<name>`` as itself divided by its spectral norm (estimated by
    power iteration; ``dim`` defaults to 1 for transposed convolutions, else 0)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if _transposed(module) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
