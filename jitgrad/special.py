"""``jitgrad.special``: PyTorch's ``torch.special`` functions, differentiable where PyTorch's
are (the special functions themselves are in :mod:`jitgrad.ops.special_functions`, the Bessel
and Airy functions and the orthogonal polynomials in :mod:`jitgrad.ops.bessel_polynomials`).

>>> import jitgrad
>>> jitgrad.special.gammaln(jitgrad.tensor([0.5, 3.0]))
tensor([0.5724, 0.6931])
"""

from __future__ import annotations

from .ops.bessel_polynomials import (
    airy_ai,
    bessel_j0,
    bessel_j1,
    bessel_y0,
    bessel_y1,
    chebyshev_polynomial_t,
    chebyshev_polynomial_u,
    chebyshev_polynomial_v,
    chebyshev_polynomial_w,
    hermite_polynomial_h,
    hermite_polynomial_he,
    laguerre_polynomial_l,
    legendre_polynomial_p,
    modified_bessel_i0,
    modified_bessel_i1,
    modified_bessel_k0,
    modified_bessel_k1,
    scaled_modified_bessel_k0,
    scaled_modified_bessel_k1,
    shifted_chebyshev_polynomial_t,
    shifted_chebyshev_polynomial_u,
    shifted_chebyshev_polynomial_v,
    shifted_chebyshev_polynomial_w,
    spherical_bessel_j0,
)
from .ops.math_functions import erf, expm1, log1p
from .ops.math_functions import sigmoid as expit
from .ops.numpy_names import accept_numpy_names
from .ops.pointwise_composites import sinc
from .ops.rounding import round
from .ops.softmax_ops import log_softmax, logsumexp, softmax
from .ops.special_functions import (
    digamma,
    entr,
    erfc,
    erfcx,
    erfinv,
    gammainc,
    gammaincc,
    i0,
    i0e,
    i1,
    i1e,
    log_ndtr,
    ndtr,
    ndtri,
    polygamma,
    xlog1py,
    zeta,
)
from .ops.special_functions import digamma as psi
from .ops.special_functions import lgamma as gammaln
from .ops.special_functions import mvlgamma as multigammaln
from .ops.transcendental import exp2, logit, xlogy

__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit",
           "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
           "sinc", "softmax", "xlog1py", "xlogy", "zeta", "gammainc", "gammaincc",
           "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
           "airy_ai", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
           "chebyshev_polynomial_v", "chebyshev_polynomial_w",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
           "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w",
           "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
           "legendre_polynomial_p"]

# NumPy's names (axis=, keepdims=), as PyTorch's parser takes them
accept_numpy_names(globals())
