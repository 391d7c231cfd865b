"""``torch.nn.utils.parametrizations``: ``weight_norm``, ``spectral_norm`` and
``orthogonal`` as parametrizations (``jitgrad.nn.utils.parametrize``), with PyTorch's
``state_dict`` keys (``parametrizations.weight.original0`` / ``original1`` for weight norm;
``parametrizations.weight.original`` and the power iteration's ``0._u`` / ``0._v`` buffers
for spectral norm; ``parametrizations.weight.original`` and the trivialization's ``0.base``
for orthogonal)."""

from __future__ import annotations

from enum import Enum, auto

from ...autograd.grad_mode import no_grad
from ...tensor import Tensor
from ..module import Module
from . import parametrize
from .weight_norm_hook import norm_except_dim, weight_norm_interface

__all__ = ["orthogonal", "weight_norm", "spectral_norm"]


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


def _is_orthogonal(Q: Tensor) -> bool:
    """Whether the columns of ``Q`` (a matrix or batch of them) are orthonormal, to
    ``10 * n * eps``."""
    import jitgrad

    n, k = Q.size(-2), Q.size(-1)
    eye = jitgrad.eye(k, dtype=Q.dtype, device=Q.device)
    eps = 10.0 * n * jitgrad.finfo(Q.dtype).eps
    return jitgrad.allclose(Q.mH @ Q, eye, atol=eps)


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q factor of the QR decomposition of the tall ``A`` whose R has a non-negative
    diagonal."""
    import jitgrad

    X, tau = jitgrad.geqrf(A)
    Q = jitgrad.linalg.householder_product(X, tau)
    # the diagonal of X is that of R: normalise by its signs
    Q *= X.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)
    return Q


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    """An orthogonal matrix (or batch of them; orthonormal columns when tall, rows when
    wide) from an unconstrained one: the matrix exponential or the Cayley map of the
    skew-symmetric matrix its lower triangle makes, or a product of Householder reflectors.
    With the dynamic trivialization the result is multiplied by the buffer ``base``, which
    ``right_inverse`` sets."""

    base: Tensor

    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *,
                 use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex "
                             "tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        import jitgrad

        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        # X is now tall (n >= k)
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()  # n * k - k * (k - 1) / 2 parameters
            if n != k:  # embedded into a square matrix
                X = jitgrad.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)],
                                dim=-1)
            A = X - X.mH  # skew-symmetric
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = jitgrad.matrix_exp(A)
            else:  # the Cayley retraction (I + A/2)(I - A/2)^{-1}
                eye = jitgrad.eye(n, dtype=A.dtype, device=A.device)
                Q = jitgrad.linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = jitgrad.linalg.householder_product(A, tau)
            # the diagonal of X holds the signs (+-1) of the columns, not differentiated
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    @no_grad()
    def right_inverse(self, Q: Tensor) -> Tensor:
        """An unconstrained tensor the forward maps to ``Q`` (orthogonalised by QR first
        when it is not orthogonal). With the trivialization, ``base`` becomes ``Q``
        (completed to a square orthogonal matrix) and the result is ``-I`` (which every map
        sends to the identity); without it, only the Householder map is invertible (the
        reflectors of ``Q``'s QR decomposition)."""
        import jitgrad

        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        Q_init = Q
        n, k = Q.size(-2), Q.size(-1)
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                raise NotImplementedError("It is not possible to assign to the matrix "
                                          "exponential or the Cayley parametrizations when "
                                          "use_trivialization=False.")
            A, tau = jitgrad.geqrf(Q)
            # a QR decomposition with diag(R) > 0: the signs go to A's diagonal
            A.diagonal(dim1=-2, dim2=-1).sign_()
            # LAPACK's tau is exactly zero where it uses no reflection
            A.diagonal(dim1=-2, dim2=-1)[tau == 0.0] *= -1
            return A.mT if transpose else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:  # completed into a full n x n orthogonal matrix
            N = jitgrad.randn(*(Q.size()[:-2] + (n, n - k)), dtype=Q.dtype, device=Q.device)
            Q = _make_orthogonal(jitgrad.cat([Q, N], dim=-1))
        self.base = Q
        # -I: householder(zeros) would not be the identity
        neg_id = jitgrad.zeros_like(Q_init)
        neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_id


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Parametrize the matrix (or batch of matrices, ``(..., m, n)``) ``module.<name>`` as
    an orthogonal one, as ``torch.nn.utils.parametrizations.orthogonal``: ``Q^T Q = I``
    when ``m >= n``, ``Q Q^T = I`` otherwise.

    ``orthogonal_map``: ``"matrix_exp"`` / ``"cayley"`` (the matrix exponential / Cayley
    map of a skew-symmetric matrix) or ``"householder"`` (a product of Householder
    reflectors); default ``"matrix_exp"`` for square matrices, ``"householder"`` otherwise.
    ``use_trivialization`` (default): the dynamic trivialization, an extra buffer
    ``parametrizations.<name>[0].base`` the map's output is multiplied by. The initial
    value is the tensor itself when orthogonal, else its QR orthogonalisation (when
    trivialized or with ``"householder"``)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = ("matrix_exp" if weight.size(-2) == weight.size(-1)
                          or weight.is_complex() else "householder")
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
