"""Fixtures of the jitgrad.distributions tests (PyTorch is the oracle): the default
argument validation and the random seeds reset around each test, and ``dh``, the helpers
that build a distribution in both libraries and compare results."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import jitgrad
import jitgrad.distributions as jd

try:  # the oracle; the tests that do not compare with PyTorch run without it
    import torch
except ImportError:
    torch = None

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


@pytest.fixture(autouse=True)
def _fresh_defaults():
    """Each test starts with validation on (PyTorch's default) and fixed seeds."""
    old_j = jd.Distribution._validate_args
    jd.Distribution.set_default_validate_args(True)
    jitgrad.manual_seed(0)
    if torch is not None:
        old_t = torch.distributions.Distribution._validate_args
        torch.distributions.Distribution.set_default_validate_args(True)
        torch.manual_seed(0)
    yield
    jd.Distribution.set_default_validate_args(old_j)
    if torch is not None:
        torch.distributions.Distribution.set_default_validate_args(old_t)


def to_np(t) -> np.ndarray:
    """A jitgrad or torch tensor (or a number) as a NumPy array."""
    if hasattr(t, "detach"):
        t = t.detach()
        return t.numpy() if hasattr(t, "numpy") else np.asarray(t)
    return np.asarray(t)


def assert_close(actual, expected, dtype=np.float64, what: str = "", **tol) -> None:
    """Values (and shapes) equal within the dtype's tolerance; NaNs match NaNs."""
    a, e = to_np(actual), to_np(expected)
    assert a.shape == e.shape, (what, a.shape, e.shape)
    np.testing.assert_allclose(a, e, equal_nan=True, err_msg=what, **{**TOL[dtype], **tol})


def tensors(lib, params: dict, dtype, grad: bool = True) -> dict:
    """``params`` (name -> array or Python number) as tensors of ``lib``: arrays in
    ``dtype`` requiring grad when ``grad`` and floating, numbers as they are."""
    out = {}
    for k, v in params.items():
        if isinstance(v, np.ndarray):
            t = lib.tensor(v.astype(dtype) if v.dtype.kind == "f" else v)
            if grad and v.dtype.kind == "f":
                t.requires_grad_(True)
            out[k] = t
        else:
            out[k] = v
    return out


def make(lib, name: str, params: dict, dtype, grad: bool = True, **kw):
    """``lib.distributions.<name>(**params)`` and the parameter tensors."""
    ts = tensors(lib, params, dtype, grad)
    mod = jd if lib is jitgrad else torch.distributions
    return getattr(mod, name)(**ts, **kw), ts


def grads_of(out, ts: dict, weights: np.ndarray) -> dict:
    """The gradients of ``sum(out * weights)`` w.r.t. the parameter tensors that require
    grad (None where one does not get a gradient)."""
    lib = jitgrad if isinstance(out, jitgrad.Tensor) else torch
    leaves = [t for t in ts.values() if hasattr(t, "requires_grad") and t.requires_grad]
    w = lib.tensor(weights.astype(to_np(out).dtype))
    gs = lib.autograd.grad((out * w).sum(), leaves, allow_unused=True, retain_graph=True)
    names = [k for k, t in ts.items() if hasattr(t, "requires_grad") and t.requires_grad]
    return dict(zip(names, gs))


@pytest.fixture
def dh():
    """The helpers above, for test modules (which cannot import this conftest); skips the
    test without PyTorch."""
    pytest.importorskip("torch")
    return SimpleNamespace(to_np=to_np, assert_close=assert_close, tensors=tensors,
                           make=make, grads_of=grads_of, torch=torch, TOL=TOL)
