"""Connectionist temporal classification (CTC) on the CPU: the negative log-likelihood of
each sample's target and its gradient w.r.t. the log-probabilities, by the forward-backward
recursions over the extended target (a blank between and around the labels) in log space,
in float64 whatever the input's dtype.

``log_probs`` is ``(T, N, C)``; the targets of sample ``n`` are
``targets[offsets[n]: offsets[n] + target_lengths[n]]`` (a flat array: the caller flattens a
padded ``(N, S)`` matrix with ``offsets[n] = n * S``).

The gradient is PyTorch's: ``exp(lp[t, c]) - exp(log(sum over s with l'_s = c of
alpha_t(s) beta_t(s)) + nll - lp[t, c])`` for ``t`` below the sample's input length, 0 after
it -- the derivative w.r.t. logits whose ``log_softmax`` is ``log_probs`` (the first term
is what the log-softmax's backward then leaves unchanged), as PyTorch's CTC returns.
"""

from __future__ import annotations

import math

import numpy as np

from .cached import cached_njit

__all__ = ["ctc_nll", "ctc_grad"]

_NEG_INF = -math.inf


@cached_njit(nogil=True, error_model="numpy")
def _lse2(a, b):
    if a < b:
        a, b = b, a
    if a == _NEG_INF:
        return _NEG_INF
    return a + math.log1p(math.exp(b - a))


@cached_njit(nogil=True, error_model="numpy")
def _label(targets, start, s, blank):
    """The ``s``-th label of the extended target (blanks at even ``s``)."""
    return blank if s % 2 == 0 else targets[start + (s - 1) // 2]


@cached_njit(nogil=True, error_model="numpy")
def _alphas(lp, n, length, targets, start, tl, blank):
    """``log alpha[t, s]``, ``(length, 2 * tl + 1)``."""
    s_len = 2 * tl + 1
    la = np.full((max(length, 1), s_len), _NEG_INF)
    if length == 0:
        return la
    la[0, 0] = lp[0, n, blank]
    if tl > 0:
        la[0, 1] = lp[0, n, targets[start]]
    for t in range(1, length):
        for s in range(s_len):
            lab = _label(targets, start, s, blank)
            v = la[t - 1, s]
            if s >= 1:
                v = _lse2(v, la[t - 1, s - 1])
            if s >= 2 and lab != blank and lab != _label(targets, start, s - 2, blank):
                v = _lse2(v, la[t - 1, s - 2])
            la[t, s] = v + lp[t, n, lab] if v != _NEG_INF else _NEG_INF
    return la


@cached_njit(nogil=True, error_model="numpy")
def _nll_of(la, length, tl):
    if length == 0:
        return 0.0 if tl == 0 else math.inf
    last = la[length - 1, 2 * tl]
    if tl > 0:
        last = _lse2(last, la[length - 1, 2 * tl - 1])
    return -last


@cached_njit(nogil=True, error_model="numpy")
def ctc_nll(lp, targets, offsets, input_lengths, target_lengths, blank, out):
    """``out[n]``: the negative log-likelihood of sample ``n``'s target."""
    for n in range(lp.shape[1]):
        length, tl, start = input_lengths[n], target_lengths[n], offsets[n]
        la = _alphas(lp, n, length, targets, start, tl, blank)
        out[n] = _nll_of(la, length, tl)


@cached_njit(nogil=True, error_model="numpy")
def ctc_grad(lp, targets, offsets, input_lengths, target_lengths, blank, grad_out,
             zero_infinity, out):
    """``out`` (``lp``'s shape): the gradient of ``sum(grad_out[n] * nll[n])``."""
    c_num = lp.shape[2]
    out[:] = 0.0
    for n in range(lp.shape[1]):
        length, tl, start = input_lengths[n], target_lengths[n], offsets[n]
        la = _alphas(lp, n, length, targets, start, tl, blank)
        nll = _nll_of(la, length, tl)
        g = grad_out[n]
        if length == 0 or (zero_infinity and nll == math.inf):
            continue
        s_len = 2 * tl + 1
        lb = np.full((length, s_len), _NEG_INF)
        lb[length - 1, s_len - 1] = lp[length - 1, n, blank]
        if tl > 0:
            lb[length - 1, s_len - 2] = lp[length - 1, n, targets[start + tl - 1]]
        for t in range(length - 2, -1, -1):
            for s in range(s_len):
                lab = _label(targets, start, s, blank)
                v = lb[t + 1, s]
                if s + 1 < s_len:
                    v = _lse2(v, lb[t + 1, s + 1])
                if s + 2 < s_len and lab != blank and lab != _label(targets, start, s + 2,
                                                                     blank):
                    v = _lse2(v, lb[t + 1, s + 2])
                lb[t, s] = v + lp[t, n, lab] if v != _NEG_INF else _NEG_INF
        lcab = np.full(c_num, _NEG_INF)
        for t in range(length):
            lcab[:] = _NEG_INF
            for s in range(s_len):
                lab = _label(targets, start, s, blank)
                lcab[lab] = _lse2(lcab[lab], la[t, s] + lb[t, s])
            for c in range(c_num):
                x = lp[t, n, c]
                out[t, n, c] = (math.exp(x) - math.exp(lcab[c] + nll - x)) * g
