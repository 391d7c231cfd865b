"""Registry-driven gradient checks: every differentiable op of ``jitgrad.ops.REGISTRY``, on every
sample (the OpDef's, or the hand-written ones in conftest.py), against central differences in
float64; second derivatives (the VJP rules run under ``create_graph``) with gradgradcheck.

A new op fails :func:`test_every_op_has_an_adapter` / :func:`test_every_differentiable_op_has_
samples` until it is wired in here, so it cannot slip through untested.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ops_helpers

import jitgrad
from jitgrad.autograd import gradcheck, gradgradcheck
from jitgrad.ops import REGISTRY

H = ops_helpers()
F64 = np.float64
DIFFERENTIABLE = sorted(n for n, op in REGISTRY.items() if op.differentiable)

#: per-op gradcheck settings: to_dtype goes through float32, exact only for the samples'
#: multiples of 1/8 perturbed by a power of two
GRADCHECK_KW = {"to_dtype": {"eps": 2.0 ** -10}}


def _differentiable_sample(name, args, p):
    return not p.get("_nograd")


def _fn(name, p):
    def fn(*xs):
        # gradcheck evaluates the numerical Jacobian under no_grad; adapters that take a
        # gradient themselves (getitem_backward) need grad mode
        with jitgrad.enable_grad():
            return H.call(jitgrad, name, list(xs), p)
    return fn


# ------------------------------------------------------------------------ coverage
def test_every_op_has_an_adapter():
    missing = sorted(n for n in REGISTRY if n not in H.ADAPTERS)
    assert not missing, f"registered ops without a test adapter in tests/ops/conftest.py: {missing}"


def test_no_adapter_for_an_unknown_op():
    stale = sorted(n for n in H.ADAPTERS if n not in REGISTRY)
    assert not stale, f"adapters for ops that are not registered: {stale}"


def test_every_differentiable_op_has_samples():
    missing = sorted(n for n in DIFFERENTIABLE if n not in H.DERIVATIVE_NOT_IMPLEMENTED
                     and not any(_differentiable_sample(n, a, p)
                                for a, p in H.samples_for(n, F64)))
    assert not missing, f"differentiable ops without (differentiable) samples: {missing}"


def test_every_op_with_samples_is_tested_in_both_dtypes():
    for name in REGISTRY:
        for dt in (np.float32, np.float64):
            for args, _ in H.samples_for(name, dt):
                for a in args:
                    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
                        assert a.dtype == dt, (name, a.dtype, dt)


# ----------------------------------------------------------------------- gradcheck
GRAD_CASES = H.case_params(DIFFERENTIABLE, F64, keep=_differentiable_sample,
                           xfail=H.BACKWARD_BUGS)


@pytest.mark.parametrize("name,i", GRAD_CASES)
def test_gradcheck(name, i):
    args, p = H.sample(name, i, F64)
    ts = H.make_inputs(jitgrad, args)
    fn = _fn(name, p)
    out = fn(*ts)
    # the adapter must reach the op under test (and record its node)
    assert out.requires_grad
    assert getattr(out.grad_fn, "op", None) is REGISTRY[name], H.node_name(out)
    assert gradcheck(fn, ts, **GRADCHECK_KW.get(name, {}))


#: ops whose second derivative is not a meaningful check
NOT_TWICE = {
    # goes through float32: random grad_outputs are not exact there
    "to_dtype": "float32 round trip",
    # PyTorch's CTC gradient is not differentiable (its double backward raises "derivative
    # for aten::_ctc_loss_backward is not implemented"); jitgrad's raises the same error
    "ctc_loss": "not twice differentiable, as PyTorch's",
}
GRADGRAD_CASES = H.case_params([n for n in DIFFERENTIABLE if n not in NOT_TWICE], F64,
                               keep=_differentiable_sample, xfail=H.GRADGRAD_BUGS)


@pytest.mark.parametrize("name,i", GRADGRAD_CASES)
def test_gradgradcheck(name, i):
    args, p = H.sample(name, i, F64)
    ts = H.make_inputs(jitgrad, args)
    assert gradgradcheck(_fn(name, p), ts)


def test_gradgradcheck_to_dtype_with_exact_grad_outputs():
    # float64 -> float32 -> float64 on values (and grad_outputs) exact in float32
    x = jitgrad.tensor([[0.5, -1.25, 2.0], [0.125, 1.0, -0.75]], dtype=jitgrad.float64,
                       requires_grad=True)
    go = jitgrad.tensor([[1.0, -0.5, 0.25], [2.0, 0.375, -1.5]], dtype=jitgrad.float64,
                        requires_grad=True)
    assert gradgradcheck(lambda t: t.float().double() * 2.0, (x,), (go,), eps=2.0 ** -10)


def test_gradcheck_warns_for_a_float32_input_after_the_first():
    a = jitgrad.tensor([1.0, 2.0], dtype=jitgrad.float64, requires_grad=True)
    b = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Input #1 requires gradient and is not a double"):
        gradcheck(lambda s, t: s * t, (a, b), raise_exception=False)


def test_gradcheck_catches_a_wrong_rule():
    """The harness is not vacuous: a VJP that is off by a factor fails."""
    x = jitgrad.tensor([0.3, 0.7], dtype=jitgrad.float64, requires_grad=True)

    class Twice(jitgrad.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    with pytest.raises(jitgrad.autograd.GradcheckError):
        gradcheck(Twice.apply, (x,))
