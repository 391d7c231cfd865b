"""Shared fixtures of the nn/optim/data tests: PyTorch (skipped when missing) and helpers to
build the same model in both libraries."""

from __future__ import annotations

import types

import numpy as np
import pytest

import jitgrad


@pytest.fixture(scope="session")
def torch():
    t = pytest.importorskip("torch")
    t.set_default_dtype(t.float32)
    return t


def to_torch(torch, t, requires_grad=None):
    """A PyTorch tensor with ``t``'s values (and requires_grad)."""
    a = np.array(t.detach().numpy(), copy=True)
    rg = t.requires_grad if requires_grad is None else requires_grad
    return torch.tensor(a, requires_grad=rg)


def copy_params(src, dst, torch) -> None:
    """Copy the state of jitgrad module ``src`` into PyTorch module ``dst`` (same names)."""
    sd = {k: torch.tensor(np.array(v.numpy(), copy=True)) for k, v in src.state_dict().items()}
    dst.load_state_dict(sd)


def assert_close(a, b, rtol=1e-5, atol=1e-6, msg=""):
    """``a`` (jitgrad) and ``b`` (PyTorch or NumPy) are equal to tolerance, same shape."""
    an = a.detach().numpy() if isinstance(a, jitgrad.Tensor) else np.asarray(a)
    bn = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert an.shape == bn.shape, (an.shape, bn.shape, msg)
    np.testing.assert_allclose(an, bn, rtol=rtol, atol=atol, err_msg=msg)


def node_name(t) -> str:
    return type(t.grad_fn).__name__


def has_conv() -> bool:
    try:
        import jitgrad.ops.conv  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture
def H():
    """The helpers above as a namespace (test modules cannot import this conftest)."""
    return types.SimpleNamespace(to_torch=to_torch, copy_params=copy_params,
                                 assert_close=assert_close, node_name=node_name,
                                 has_conv=has_conv)
