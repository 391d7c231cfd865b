"""``jitgrad.special``: PyTorch's ``torch.special`` functions jitgrad has, all
differentiable (the special functions themselves are in :mod:`jitgrad.ops.special_functions`).

>>> import jitgrad
>>> jitgrad.special.gammaln(jitgrad.tensor([0.5, 3.0]))
tensor([0.5724, 0.6931])
"""

from __future__ import annotations

from .ops.math_functions import erf, expm1, log1p
from .ops.math_functions import sigmoid as expit
from .ops.pointwise_composites import sinc
from .ops.rounding import round
from .ops.softmax_ops import log_softmax, logsumexp, softmax
from .ops.special_functions import (
    digamma,
    entr,
    erfc,
    erfcx,
    erfinv,
    i0,
    i0e,
    i1,
    i1e,
    log_ndtr,
    ndtr,
    ndtri,
    polygamma,
    xlog1py,
)
from .ops.special_functions import digamma as psi
from .ops.special_functions import lgamma as gammaln
from .ops.special_functions import mvlgamma as multigammaln
from .ops.transcendental import exp2, logit, xlogy

__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit",
           "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
           "sinc", "softmax", "xlog1py", "xlogy"]
