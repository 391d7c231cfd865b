"""``kl_divergence(p, q)`` and the ``register_kl`` registry (``torch.distributions.kl``):
the implementation for a pair of types is the most specific registered match, by the
same subclass ordering PyTorch uses."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from functools import total_ordering

import jitgrad
import jitgrad.nn.functional as F

from ..devices import array_namespace
from ..tensor import Tensor
from ..trace.effects import run_check
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .independent import Independent
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .poisson import Poisson
from .uniform import Uniform
from .utils import _sum_rightmost, solve_tril
from .utils import euler_constant as _euler_gamma

__all__ = ["register_kl", "kl_divergence"]

#: the source of truth: a few (type, type) pairs -> KL functions
_KL_REGISTRY: dict[tuple[type, type], Callable] = {}
#: the dispatch memoized for every pair of concrete types asked
_KL_MEMOIZE: dict[tuple[type, type], Callable] = {}


def register_kl(type_p: type, type_q: type) -> Callable[[Callable], Callable]:
    """Decorator registering a function ``fun(p, q)`` as the KL divergence of
    distributions of types ``type_p`` and ``type_q`` (and their subclasses, unless a more
    specific pair is registered). An ambiguous lookup warns (``RuntimeWarning``):
    register the pair of the most derived types to break the tie.

    >>> from jitgrad.distributions import Normal, kl_divergence, register_kl
    >>> class MyNormal(Normal):
    ...     pass
    >>> @register_kl(MyNormal, MyNormal)
    ... def _kl(p, q):
    ...     return p.loc * 0
    >>> kl_divergence(MyNormal(1.0, 1.0), MyNormal(0.0, 1.0))
    tensor(0.)
    """
    if not isinstance(type_p, type) and issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) and issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun: Callable) -> Callable:
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()  # the lookup order may have changed
        return fun

    return decorator


@total_ordering
class _Match:
    __slots__ = ["types"]

    def __init__(self, *types: type) -> None:
        self.types = types

    def __eq__(self, other: object) -> bool:
        return self.types == other.types  # type: ignore[attr-defined]

    def __le__(self, other: _Match) -> bool:
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p: type, type_q: type) -> Callable:
    """The most specific registered match (assuming single inheritance)."""
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return NotImplemented
    # the left- and right-lexicographic orders must agree
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({left_p.__name__}, {right_q.__name__})",
                      RuntimeWarning, stacklevel=2)
    return left_fun


def _infinite_like(tensor: Tensor) -> Tensor:
    return jitgrad.full_like(tensor, math.inf)


def _set_inf(t: Tensor, mask: Tensor) -> Tensor:
    """``t`` with ``inf`` where ``mask`` (PyTorch: ``t[mask] = inf``; no gradient there)."""
    return jitgrad.where(mask, jitgrad.full_like(t, math.inf), t)


def _set_zero(t: Tensor, mask: Tensor) -> Tensor:
    """``t`` with 0 where ``mask`` (PyTorch: ``t[mask] = 0``; no gradient there)."""
    return jitgrad.where(mask, jitgrad.zeros_like(t), t)


def _x_log_x(tensor: Tensor) -> Tensor:
    """``x log x`` (0 at 0)."""
    return jitgrad.xlogy(tensor, tensor)


def _batch_trace_XXT(bmat: Tensor) -> Tensor:
    """The trace of ``X @ X.mT`` for a batch of matrices ``X``."""
    n = bmat.size(-1)
    m = bmat.size(-2)
    flat_trace = bmat.reshape(-1, m * n).pow(2).sum(-1)
    return flat_trace.reshape(bmat.shape[:-2])


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """The Kullback-Leibler divergence ``KL(p || q) = E_p[log p(x) - log q(x)]``, of
    shape ``batch_shape`` (NotImplementedError for an unregistered pair of types).

    >>> import jitgrad
    >>> from jitgrad.distributions import Normal, kl_divergence
    >>> kl_divergence(Normal(1.0, 1.0), Normal(0.0, 1.0))
    tensor(0.5000)
    """
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fun(p, q)


# -------------------------------------------------------------------- same families

@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _set_zero(_set_inf(t1, q.probs == 0), p.probs == 0)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _set_zero(_set_inf(t2, q.probs == 1), p.probs == 1)
    return t1 + t2


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> Tensor:
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_params_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_params_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * jitgrad.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * jitgrad.digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * jitgrad.digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5


def _any(a) -> bool:
    return bool(array_namespace(a).any(a))


def _binomial_counts_error() -> Exception:
    return NotImplementedError("KL between Binomials where q.total_count > p.total_count is "
                               "not implemented")


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Binomial, q: Binomial) -> Tensor:
    run_check(p.total_count < q.total_count, _any, _binomial_counts_error,
              "KL(Binomial, Binomial)'s total_count check")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    return _set_inf(kl, p.total_count > q.total_count)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = _set_inf(t, (q.probs == 0).expand_as(t))
    t = _set_zero(t, (p.probs == 0).expand_as(t))
    return t.sum(-1)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Dirichlet, q: Dirichlet) -> Tensor:
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = sum_p_concentration.lgamma() - sum_q_concentration.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p_concentration.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Tensor:
    rate_ratio = q.rate / p.rate
    t1 = -rate_ratio.log()
    return t1 + rate_ratio - 1


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p: ExponentialFamily, q: ExponentialFamily) -> Tensor:
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential "
                                  "families cannot be computed using Bregman divergences")
    p_nparams = [np_.detach().requires_grad_() for np_ in p._natural_params]
    q_nparams = q._natural_params
    lg_normal = p._log_normalizer(*p_nparams)
    gradients = jitgrad.autograd.grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        term = (qnp - pnp) * g
        result = result - _sum_rightmost(term, len(q.event_shape))
    return result


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> Tensor:
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = jitgrad.lgamma(q.concentration) - jitgrad.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * jitgrad.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * jitgrad.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p: MultivariateNormal,
                                              q: MultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different "
                         "event shapes cannot be computed")
    half_term1 = (q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - p._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    combined_batch_shape = tuple(jitgrad.broadcast_shapes(
        q._unbroadcasted_scale_tril.shape[:-2], p._unbroadcasted_scale_tril.shape[:-2]))
    n = p.event_shape[0]
    q_scale_tril = q._unbroadcasted_scale_tril.expand(combined_batch_shape + (n, n))
    p_scale_tril = p._unbroadcasted_scale_tril.expand(combined_batch_shape + (n, n))
    term2 = _batch_trace_XXT(solve_tril(q_scale_tril, p_scale_tril))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, (q.loc - p.loc))
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p: OneHotCategorical,
                                            q: OneHotCategorical) -> Tensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Poisson, q: Poisson) -> Tensor:
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _set_inf(result, (q.low > p.low) | (q.high < p.high))


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


# -------------------------------------------------------------- different families

@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p: Bernoulli, q: Poisson) -> Tensor:
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p: Beta, q: Exponential) -> Tensor:
    return (-p.entropy() - q.rate.log()
            + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0)))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p: Beta, q: Gamma) -> Tensor:
    t1 = -p.entropy()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (p.concentration1.digamma()
                                  - (p.concentration1 + p.concentration0).digamma())
    t4 = q.rate * p.concentration1 / (p.concentration1 + p.concentration0)
    return t1 + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p: Beta, q: Normal) -> Tensor:
    E_beta = p.concentration1 / (p.concentration1 + p.concentration0)
    var_normal = q.scale.pow(2)
    t1 = -p.entropy()
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (E_beta * (1 - E_beta) / (p.concentration1 + p.concentration0 + 1)
          + E_beta.pow(2)) * 0.5
    t4 = q.loc * E_beta
    t5 = q.loc.pow(2) * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var_normal


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p: Beta, q: Uniform) -> Tensor:
    result = -p.entropy() + (q.high - q.low).log()
    return _set_inf(result, (q.low > p.support.lower_bound)
                    | (q.high < p.support.upper_bound))


@register_kl(Exponential, Beta)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p: Exponential, q: Distribution) -> Tensor:
    return _infinite_like(p.rate)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p: Exponential, q: Gamma) -> Tensor:
    ratio = q.rate / p.rate
    t1 = -q.concentration * jitgrad.log(ratio)
    return (t1 + ratio + q.concentration.lgamma() + q.concentration * _euler_gamma
            - (1 + _euler_gamma))


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p: Exponential, q: Normal) -> Tensor:
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * jitgrad.log(rate_sqr * var_normal * 2 * math.pi)
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal


@register_kl(Gamma, Beta)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p: Gamma, q: Distribution) -> Tensor:
    return _infinite_like(p.concentration)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p: Gamma, q: Exponential) -> Tensor:
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p: Gamma, q: Normal) -> Tensor:
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = (0.5 * jitgrad.log(beta_sqr * var_normal * 2 * math.pi) - p.concentration
          - p.concentration.lgamma())
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return t1 + (p.concentration - 1) * p.concentration.digamma() + (t2 - t3 + t4) / var_normal


@register_kl(Laplace, Beta)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Uniform)
def _kl_laplace_infinity(p: Laplace, q: Distribution) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p: Laplace, q: Normal) -> Tensor:
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * jitgrad.log(2 * scale_sqr_var_ratio / math.pi)
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@register_kl(Normal, Beta)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Uniform)
def _kl_normal_infinity(p: Normal, q: Distribution) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p: Normal, q: Laplace) -> Tensor:
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = jitgrad.log(scale_ratio)
    t2 = math.sqrt(2 / math.pi) * p.scale * jitgrad.exp(-0.5 * loc_diff_scale_ratio.pow(2))
    t3 = loc_diff * jitgrad.erf(math.sqrt(0.5) * loc_diff_scale_ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p: Poisson, q: Distribution) -> Tensor:
    return _infinite_like(p.rate)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p: Uniform, q: Beta) -> Tensor:
    common_term = p.high - p.low
    t1 = jitgrad.log(common_term)
    t2 = ((q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term)
          / common_term)
    t3 = ((q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + common_term)
          / common_term)
    t4 = (q.concentration1.lgamma() + q.concentration0.lgamma()
          - (q.concentration1 + q.concentration0).lgamma())
    result = t3 + t4 - t1 - t2
    return _set_inf(result, (p.high > q.support.upper_bound)
                    | (p.low < q.support.lower_bound))


@register_kl(Uniform, Exponential)
def _kl_uniform_exponetial(p: Uniform, q: Exponential) -> Tensor:
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _set_inf(result, p.low < q.support.lower_bound)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p: Uniform, q: Gamma) -> Tensor:
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = ((1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term)
          / common_term)
    t4 = q.rate * (p.high + p.low) / 2
    result = -t1 + t2 + t3 + t4
    return _set_inf(result, p.low < q.support.lower_bound)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p: Uniform, q: Normal) -> Tensor:
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)
