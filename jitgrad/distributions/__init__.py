"""``jitgrad.distributions``: probability distributions with PyTorch's
``torch.distributions`` API -- batch and event shapes, ``sample``/``rsample``
(reparameterized where PyTorch's is), ``log_prob``, ``entropy``, moments, ``cdf``/``icdf``,
``expand``, argument validation and ``kl_divergence`` with its ``register_kl`` registry.

Everything is computed with jitgrad's tensor ops, so it is differentiable and traces under
``jitgrad.compile``; random numbers come from jitgrad's generator (``jitgrad.manual_seed``
makes them reproducible; the streams differ from PyTorch's). Normal, Uniform, Exponential,
Laplace, Bernoulli, Categorical, OneHotCategorical, MultivariateNormal, Cauchy, Geometric,
ContinuousBernoulli, LowRankMultivariateNormal, Multinomial, GeneralizedPareto and the
distributions built on :class:`TransformedDistribution` over those (Kumaraswamy too) draw
their noise with ``rand``/``randn`` and sample inside compiled functions (those that build
inner distributions with the default validation, as PyTorch's do -- OneHotCategorical,
Multinomial, the relaxed ones -- need :meth:`Distribution.set_default_validate_args` off to
compile whole); Gamma, Chi2, Beta, Dirichlet, Poisson, Binomial, StudentT, NegativeBinomial,
InverseGamma, FisherSnedecor, VonMises, LKJCholesky and Wishart draw on the host from the
parameters' values (a graph break: the call runs eagerly). ``transforms``, ``biject_to`` and
``transform_to`` map between unconstrained space and the ``constraints``. Argument validation
(on by default, :meth:`Distribution.set_default_validate_args`) reads the parameters' values
too: a compiled function that builds a distribution with validation on runs eagerly; pass
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

# _kl_extra registers the KL pairs of the families added after kl.py's
from . import _kl_extra, constraints, transforms  # noqa: F401
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .constraint_registry import biject_to, transform_to
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .fishersnedecor import FisherSnedecor
from .gamma import Chi2, Gamma
from .generalized_pareto import GeneralizedPareto
from .geometric import Geometric
from .gumbel import Gumbel
from .half_cauchy import HalfCauchy
from .half_normal import HalfNormal
from .independent import Independent
from .inverse_gamma import InverseGamma
from .kl import kl_divergence, register_kl
from .kumaraswamy import Kumaraswamy
from .laplace import Laplace
from .lkj_cholesky import LKJCholesky
from .log_normal import LogNormal
from .logistic_normal import LogisticNormal
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture_same_family import MixtureSameFamily
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal
from .negative_binomial import NegativeBinomial
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .pareto import Pareto
from .poisson import Poisson
from .relaxed_bernoulli import RelaxedBernoulli
from .relaxed_categorical import RelaxedOneHotCategorical
from .studentT import StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import *  # noqa: F403
from .uniform import Uniform
from .von_mises import VonMises
from .weibull import Weibull
from .wishart import Wishart

__all__ = [
    "Bernoulli", "Beta", "Binomial", "Categorical", "Chi2", "Dirichlet", "Distribution",
    "ExponentialFamily", "Exponential", "Gamma", "Independent", "Laplace",
    "MultivariateNormal", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough",
    "Poisson", "Uniform", "constraints", "kl_divergence", "register_kl",
    "Cauchy", "Gumbel", "HalfCauchy", "HalfNormal", "LogNormal", "LogisticNormal",
    "Pareto", "RelaxedBernoulli",
    "RelaxedOneHotCategorical", "TransformedDistribution", "Weibull",
    "biject_to", "transform_to", "transforms", "ContinuousBernoulli", "Geometric",
    "LowRankMultivariateNormal", "MixtureSameFamily", "Multinomial", "NegativeBinomial",
    "StudentT", "FisherSnedecor", "GeneralizedPareto", "InverseGamma", "Kumaraswamy",
    "VonMises", "LKJCholesky", "Wishart",
]
__all__.extend(transforms.__all__)
