"""The Gamma family's numerics: Gamma and Dirichlet samples with implicit
reparameterization gradients (Figurnov et al., "Implicit Reparameterization Gradients",
2018): ``dx/dalpha = -(dF/dalpha) / f`` for the CDF ``F`` and density ``f``, by PyTorch's
approximations (ATen's ``Distributions.h``: ``standard_gamma_grad_one``,
``dirichlet_grad_one``) ported to NumPy in float64; and the regularized lower incomplete
gamma function (``torch.special.gammainc``) for ``Gamma.cdf``.

The draws come from jitgrad's default generator (NumPy's ``standard_gamma``); they depend
on the parameters' values, so under ``jitgrad.compile`` they are a graph break (the call
runs eagerly), as is ``gammainc``.
"""

from __future__ import annotations

import numpy as np

import jitgrad
from jitgrad.autograd import Function, once_differentiable

from ..random import rng
from ..tensor import Tensor


def _host(t: Tensor) -> np.ndarray:
    """``t``'s values as a float64 host array (a graph break while tracing)."""
    return np.asarray(t.detach().cpu().numpy(), dtype=np.float64)


def _like(arr: np.ndarray, t: Tensor) -> Tensor:
    return jitgrad.tensor(np.ascontiguousarray(arr), dtype=t.dtype, device=t.device)


def _digamma(a: np.ndarray) -> np.ndarray:
    return jitgrad.digamma(jitgrad.tensor(a, dtype=jitgrad.float64)).numpy()


def standard_gamma_grad(alpha: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``-(d/dalpha cdf(x; alpha)) / pdf(x; alpha)`` of the standard Gamma(alpha): the
    derivative of a sample ``x`` in its concentration (PyTorch's
    ``_standard_gamma_grad``, element-wise, float64)."""
    alpha, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    with np.errstate(all="ignore"):
        # Taylor series for small x
        numer = np.ones_like(x)
        denom = alpha.copy()
        series1 = numer / denom
        series2 = numer / (denom * denom)
        for i in range(1, 6):
            numer = numer * (-x / i)
            denom = denom + 1
            series1 = series1 + numer / denom
            series2 = series2 + numer / (denom * denom)
        pow_x_alpha = np.power(x, alpha)
        gamma_pdf = np.power(x, alpha - 1) * np.exp(-x)
        gamma_cdf = pow_x_alpha * series1
        gamma_cdf_alpha = (np.log(x) - _digamma(alpha)) * gamma_cdf - pow_x_alpha * series2
        small = -gamma_cdf_alpha / gamma_pdf
        small = np.where(np.isnan(small), 0.0, small)
        # Rice saddle point expansion for large alpha
        numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
        numer_2 = (1440 * (alpha * alpha) + 6 * x * (53 - 120 * x) - 65 * x * x / alpha
                   + alpha * (107 + 3600 * x))
        near_mean = numer_1 * numer_2 / (1244160 * (alpha * alpha) * (alpha * alpha))
        sdenom = np.sqrt(8 * alpha)
        term2 = sdenom / (alpha - x)
        term3 = np.power(x - alpha - alpha * np.log(x / alpha), -1.5)
        term23 = np.where(x < alpha, term2 - term3, term2 + term3)
        term1 = (np.log(x / alpha) * term23
                 - np.sqrt(2 / alpha) * (alpha + x) / ((alpha - x) * (alpha - x)))
        stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
        saddle = -stirling * (x * term1) / sdenom
        large = np.where((0.9 * alpha <= x) & (x <= 1.1 * alpha), near_mean, saddle)
        # bivariate rational approximation
        u = np.log(x / alpha)
        v = np.log(alpha)
        coef_v = [_GAMMA_UV[0][i] + u * (_GAMMA_UV[1][i] + u * _GAMMA_UV[2][i])
                  for i in range(8)]
        p = coef_v[0] + v * (coef_v[1] + v * (coef_v[2] + v * coef_v[3]))
        q = coef_v[4] + v * (coef_v[5] + v * (coef_v[6] + v * coef_v[7]))
        rational = np.exp(p / q)
    return np.where(x < 0.8, small, np.where(alpha > 8.0, large, rational))


_GAMMA_UV = (
    (0.16009398, -0.094634809, 0.025146376, -0.0030648343,
     1, 0.32668115, 0.10406089, 0.0014179084),
    (0.53487893, 0.1298071, 0.065735949, -0.0015649758,
     0.16639465, 0.020070113, -0.0035938915, -0.00058392623),
    (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777,
     0.017050642, -0.0021309326, 0.00085092367, -1.5247877e-07),
)


def _beta_grad_alpha_small(x, alpha, beta):
    """Beta(alpha, beta) sample's derivative in alpha, x near 0 (Taylor expansion)."""
    factor = _digamma(alpha) - _digamma(alpha + beta) - np.log(x)
    numer = np.ones_like(x)
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * ((i - beta) * x / i)
        denom = alpha + i
        series = series + numer / denom * (factor + 1 / denom)
    result = x * np.power(1 - x, -beta) * series
    return np.where(np.isnan(result), 0.0, result)


def _beta_grad_beta_small(x, alpha, beta):
    """Beta(alpha, beta) sample's derivative in beta, x near 0 (Taylor expansion)."""
    factor = _digamma(alpha + beta) - _digamma(beta)
    numer = np.ones_like(x)
    betas = np.ones_like(x)
    dbetas = np.zeros_like(x)
    series = factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas = dbetas * (beta - i) + betas
        betas = betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    result = -np.power(1 - x, 1 - beta) * series
    return np.where(np.isnan(result), 0.0, result)


def _beta_grad_alpha_mid(x, alpha, beta):
    """Beta(alpha, beta) sample's derivative in alpha, both large (Rice saddle point)."""
    total = alpha + beta
    mean = alpha / total
    std = np.sqrt(alpha * beta / (total + 1)) / total
    poly = 47 * x * (beta * beta) * (beta * beta) + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * (beta * beta) * beta + alpha * (
            3 * (59 + 180 * beta - 90 * x) * (beta * beta) + alpha * (
                (453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (
                    8 * (1 - x) * (135 * beta - 11)))))
    prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
    at_mean = prefactor_num / (1 - x) * poly / prefactor_den
    prefactor = -x / np.sqrt(2 * alpha * beta / total)
    stirling = ((1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha))
                * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
                / (1 + 1 / (12 * total) + 1 / (288 * total * total)))
    term1_num = 2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta)
    axbx = alpha * (x - 1) + beta * x
    term1_den = np.sqrt(2 * alpha / beta) * np.power(total, 1.5) * axbx * axbx
    term1 = term1_num / term1_den
    term2 = 0.5 * np.log(alpha / (total * x))
    term3 = np.sqrt(8 * alpha * beta / total) / (beta * x + alpha * (x - 1))
    term4_base = beta * np.log(beta / (total * (1 - x))) + alpha * np.log(alpha / (total * x))
    term4 = np.power(term4_base, -1.5)
    term1234 = term1 + term2 * (term3 + np.where(x < mean, term4, -term4))
    away = stirling * prefactor * term1234
    return np.where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), at_mean, away)


_DIRICHLET_C = np.array([
    [[[1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
      [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
      [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013]],
     [[0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
      [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
      [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05]],
     [[-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
      [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
      [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05]]],
    [[[1, -0.02924021934, -0.04438342661, 0.007285809825],
      [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
      [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149]],
     [[0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
      [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
      [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05]],
     [[0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
      [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
      [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06]]],
])


def dirichlet_grad(x: np.ndarray, alpha: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``-(d/dalpha cdf(x; alpha, total - alpha)) / pdf(x; ...) / (1 - x)`` for a
    Beta(alpha, total - alpha) sample ``x``: PyTorch's ``_dirichlet_grad``, element-wise,
    float64."""
    x, alpha, total = np.broadcast_arrays(*(np.asarray(a, np.float64)
                                            for a in (x, alpha, total)))
    beta = total - alpha
    boundary = total * x * (1 - x)
    with np.errstate(all="ignore"):
        small_alpha = _beta_grad_alpha_small(x, alpha, beta)
        small_beta = -_beta_grad_beta_small(1 - x, beta, alpha)
        mid = _beta_grad_alpha_mid(x, alpha, beta)
        u = np.log(x)
        a = np.log(alpha) - u
        b = np.log(total) - a
        pow_u = (np.ones_like(u), u, u * u)
        pow_a = (np.ones_like(a), a, a * a)
        p = np.zeros_like(x)
        q = np.zeros_like(x)
        c = _DIRICHLET_C
        for i in range(3):
            for j in range(3):
                ua = pow_u[i] * pow_a[j]
                p = p + ua * (c[0, i, j, 0] + b * (c[0, i, j, 1] + b * (
                    c[0, i, j, 2] + b * c[0, i, j, 3])))
                q = q + ua * (c[1, i, j, 0] + b * (c[1, i, j, 1] + b * (
                    c[1, i, j, 2] + b * c[1, i, j, 3])))
        approx = x * (_digamma(total) - _digamma(alpha)) / beta
        rational = p / q * approx
    return np.select([(x <= 0.5) & (boundary < 2.5), (x >= 0.5) & (boundary < 0.75),
                      (alpha > 6) & (beta > 6)], [small_alpha, small_beta, mid], rational)


def _draw_standard_gamma(alpha: np.ndarray, dtype) -> np.ndarray:
    """Standard Gamma(alpha) draws from jitgrad's generator, in ``dtype``, at least the
    dtype's smallest normal number (as PyTorch clamps them)."""
    out = rng(None).standard_gamma(alpha).astype(dtype.np)
    return np.maximum(out, np.finfo(dtype.np).tiny)


class _StandardGamma(Function):
    """Standard Gamma(concentration) samples; backward: the implicit reparameterization
    gradient ``g * standard_gamma_grad(concentration, x)``."""

    @staticmethod
    def forward(ctx, concentration: Tensor) -> Tensor:
        x = _like(_draw_standard_gamma(_host(concentration), concentration.dtype),
                  concentration)
        ctx.save_for_backward(x, concentration)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor) -> Tensor:
        x, concentration = ctx.saved_tensors
        grad = standard_gamma_grad(_host(concentration), _host(x))
        return grad_output * _like(grad, concentration)


def standard_gamma(concentration: Tensor) -> Tensor:
    """Standard Gamma(concentration) samples (``torch._standard_gamma``), differentiable
    in ``concentration`` by implicit reparameterization."""
    return _StandardGamma.apply(concentration)


class _Dirichlet(Function):
    """Dirichlet(concentration) samples; backward: PyTorch's ``_Dirichlet_backward``."""

    @staticmethod
    def forward(ctx, concentration: Tensor) -> Tensor:
        alpha = _host(concentration)
        gamma = _draw_standard_gamma(alpha, concentration.dtype).astype(np.float64)
        x = gamma / gamma.sum(-1, keepdims=True)
        info = np.finfo(concentration.dtype.np)
        x = np.clip(x, info.tiny, 1 - info.eps)
        out = _like(x, concentration)
        ctx.save_for_backward(out, concentration)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor) -> Tensor:
        x, concentration = ctx.saved_tensors
        alpha = _host(concentration)
        total = np.broadcast_to(alpha.sum(-1, keepdims=True), alpha.shape)
        grad = _like(dirichlet_grad(_host(x), alpha, total), concentration)
        return grad * (grad_output - (x * grad_output).sum(-1, True))


def sample_dirichlet(concentration: Tensor) -> Tensor:
    """Dirichlet(concentration) samples over the last dimension, differentiable in
    ``concentration`` by implicit reparameterization."""
    return _Dirichlet.apply(concentration)


def _gammainc_np(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The regularized lower incomplete gamma function ``P(a, x)``, element-wise in
    float64: its power series where ``x < a + 1``, else Lentz's continued fraction for
    ``Q = 1 - P`` (Numerical Recipes' ``gser``/``gcf``), iterated to convergence."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.full(a.shape, np.nan)
    eps, fpmin = np.finfo(np.float64).eps, np.finfo(np.float64).tiny / np.finfo(
        np.float64).eps
    with np.errstate(all="ignore"):
        prefix_log = -x + a * np.log(x) - _lgamma(a)
        ok = (a > 0) & (x >= 0)
        out[ok & (x == 0)] = 0.0
        out[ok & np.isposinf(x)] = 1.0
        finite = ok & (x > 0) & np.isfinite(x)
        series = finite & (x < a + 1)
        if series.any():
            aa, xx = a[series], x[series]
            term = 1.0 / aa
            total = term.copy()
            ap = aa.copy()
            for _ in range(100000):
                ap = ap + 1
                term = term * xx / ap
                total = total + term
                if np.all(np.abs(term) < np.abs(total) * eps):
                    break
            out[series] = total * np.exp(prefix_log[series])
        frac = finite & ~series
        if frac.any():
            aa, xx = a[frac], x[frac]
            b = xx + 1 - aa
            c = np.full_like(xx, 1 / fpmin)
            d = 1 / b
            h = d.copy()
            for i in range(1, 100000):
                an = -i * (i - aa)
                b = b + 2
                d = an * d + b
                d = np.where(np.abs(d) < fpmin, fpmin, d)
                c = b + an / c
                c = np.where(np.abs(c) < fpmin, fpmin, c)
                d = 1 / d
                delta = d * c
                h = h * delta
                if np.all(np.abs(delta - 1) < eps):
                    break
            out[frac] = 1 - np.exp(prefix_log[frac]) * h
    return out


def _lgamma(a: np.ndarray) -> np.ndarray:
    return jitgrad.lgamma(jitgrad.tensor(a, dtype=jitgrad.float64)).numpy()


class _GammaInc(Function):
    """``P(a, x)``; differentiable in ``x`` only (PyTorch has no derivative in ``a``)."""

    @staticmethod
    def forward(ctx, a: Tensor, x: Tensor) -> Tensor:
        ctx.save_for_backward(a, x)
        return _like(_gammainc_np(_host(a), _host(x)), x)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: Tensor) -> tuple:
        a, x = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            raise NotImplementedError("the derivative for 'igamma: input' is not implemented.")
        pdf = jitgrad.exp((a - 1) * jitgrad.log(x) - x - jitgrad.lgamma(a))
        return None, grad_output * pdf


def gammainc(a: Tensor, x: Tensor) -> Tensor:
    """The regularized lower incomplete gamma function ``P(a, x)``
    (``torch.special.gammainc``), differentiable in ``x``."""
    a, x = jitgrad.broadcast_tensors(a, x)
    return _GammaInc.apply(a, x)
