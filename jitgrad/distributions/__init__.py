"""``jitgrad.distributions``: probability distributions with PyTorch's
``torch.distributions`` API -- batch and event shapes, ``sample``/``rsample``
(reparameterized where PyTorch's is), ``log_prob``, ``entropy``, moments, ``cdf``/``icdf``,
``expand``, argument validation and ``kl_divergence`` with its ``register_kl`` registry.

Everything is computed with jitgrad's tensor ops, so it is differentiable and traces under
``jitgrad.compile``; random numbers come from jitgrad's generator (``jitgrad.manual_seed``
makes them reproducible; the streams differ from PyTorch's). Normal, Uniform, Exponential,
Laplace, Bernoulli, Categorical, OneHotCategorical and MultivariateNormal draw their noise
with ``rand``/``randn`` and sample inside compiled functions; Gamma, Chi2, Beta, Dirichlet,
Poisson and Binomial draw on the host from the parameters' values (a graph break: the call
runs eagerly). Argument validation (on by default,
:meth:`Distribution.set_default_validate_args`) reads the parameters' values too: a compiled
function that builds a distribution with validation on runs eagerly; pass
``validate_args=False`` to compile it whole.

>>> import jitgrad
>>> from jitgrad.distributions import Normal
>>> m = Normal(jitgrad.tensor([0.0, 1.0]), jitgrad.tensor([1.0, 2.0]))
>>> m.sample((5,)).shape
jitgrad.Size([5, 2])

Loaded on first use: ``import jitgrad`` does not import it. The package follows the
structure of PyTorch's ``torch/distributions`` (BSD 3-Clause; see THIRD_PARTY_NOTICES.md).
"""

from __future__ import annotations

from . import constraints
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Chi2, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .poisson import Poisson
from .uniform import Uniform

__all__ = [
    "Bernoulli", "Beta", "Binomial", "Categorical", "Chi2", "Dirichlet", "Distribution",
    "ExponentialFamily", "Exponential", "Gamma", "Independent", "Laplace",
    "MultivariateNormal", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough",
    "Poisson", "Uniform", "constraints", "kl_divergence", "register_kl",
]
