"""``set_default_device`` / ``get_default_device`` and ``with jitgrad.device(...)``: which
factories follow the default device (PyTorch's list, checked against PyTorch itself on its
``meta`` device), nn layers' parameters, the per-thread scope, and the internal tensors
(dropout masks, causal masks, scalars of bitwise ops) that follow their input instead."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F

CUDA = jitgrad.device("cuda", 0)


@pytest.fixture(autouse=True)
def _reset_default_device():
    yield
    jitgrad.set_default_device(None)


#: factory calls, each as ``f(M)`` for M = jitgrad or torch; True: PyTorch puts the result
#: on the default device (its ``torch.utils._device._device_constructors``)
FACTORIES = {
    "zeros": (lambda M: M.zeros(2, 3), True),
    "ones": (lambda M: M.ones(2), True),
    "empty": (lambda M: M.empty(2), True),
    "full": (lambda M: M.full((2,), 1.5), True),
    "eye": (lambda M: M.eye(2), True),
    "arange": (lambda M: M.arange(4), True),
    "linspace": (lambda M: M.linspace(0, 1, 5), True),
    "logspace": (lambda M: M.logspace(0, 1, 5), True),
    "rand": (lambda M: M.rand(2), True),
    "randn": (lambda M: M.randn(2), True),
    "randint": (lambda M: M.randint(0, 5, (3,)), True),
    "randperm": (lambda M: M.randperm(4), True),
    "tensor": (lambda M: M.tensor([1.0, 2.0]), True),
    "as_tensor-list": (lambda M: M.as_tensor([1.0, 2.0]), True),
    "as_tensor-array": (lambda M: M.as_tensor(np.ones(2, np.float32)), True),
    "scalar_tensor": (lambda M: M.scalar_tensor(3.0), True),
    "normal": (lambda M: M.normal(0.0, 1.0, (2,)), False),
    "from_numpy": (lambda M: M.from_numpy(np.ones(2)), False),
    "zeros_like": (lambda M: M.zeros_like(M.ones(2, device="cpu")), False),
    "rand_like": (lambda M: M.rand_like(M.ones(2, device="cpu")), False),
    "randint_like": (lambda M: M.randint_like(M.ones(2, device="cpu"), 3), False),
    "new_zeros": (lambda M: M.ones(2, device="cpu").new_zeros(3), False),
    "explicit-cpu": (lambda M: M.zeros(2, device="cpu"), False),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_follow_the_default_device_as_pytorchs(name):
    make, on_default = FACTORIES[name]
    jitgrad.set_default_device("cuda")
    assert make(jitgrad).device == (CUDA if on_default else "cpu")
    torch = pytest.importorskip("torch")
    with torch.device("meta"):  # PyTorch's own answer, on a device every build has
        assert (make(torch).device.type == "meta") == on_default


def test_get_default_device_returns_pytorchs_devices():
    assert jitgrad.get_default_device() == jitgrad.device("cpu")
    assert repr(jitgrad.get_default_device()) == "device(type='cpu')"
    jitgrad.set_default_device("cuda")
    assert repr(jitgrad.get_default_device()) == "device(type='cuda', index=0)"
    jitgrad.set_default_device(jitgrad.device("cpu"))
    assert jitgrad.zeros(1).device == "cpu"
    jitgrad.set_default_device("cuda:0")
    jitgrad.set_default_device(None)
    assert jitgrad.get_default_device() == "cpu" and jitgrad.zeros(1).device == "cpu"


def test_a_device_jitgrad_has_no_backend_for_is_refused_at_once():
    with pytest.raises(RuntimeError, match="jitgrad has no mps backend"):
        jitgrad.set_default_device("mps")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        jitgrad.set_default_device("tpu")
    assert jitgrad.get_default_device() == "cpu"  # unchanged


def test_layers_are_created_on_the_default_device_with_the_same_weights():
    def build():
        jitgrad.manual_seed(3)
        return nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 3), nn.LayerNorm(3))

    on_cpu = build()
    jitgrad.set_default_device("cuda")
    on_cuda = build()
    bn = nn.BatchNorm1d(3)
    conv = nn.Conv2d(1, 2, 3)
    for (name, a), b in zip(on_cpu.named_parameters(), on_cuda.parameters()):
        assert b.device == CUDA and b.is_leaf and b.requires_grad, name
        np.testing.assert_array_equal(b.cpu().detach().numpy(), a.detach().numpy())
    assert all(t.device == CUDA for t in (*bn.parameters(), *bn.buffers(), *conv.parameters()))
    out = on_cuda(jitgrad.tensor([[0, 4]]))  # the index tensor is on the default device too
    out.sum().backward()
    assert out.device == CUDA and on_cuda[1].weight.grad.device == CUDA
    # an explicit device= still wins
    assert nn.Linear(2, 2, device="cpu").weight.device == "cpu"
    assert nn.LayerNorm(2, device="cpu").weight.device == "cpu"


def test_normalization_layers_take_device():
    assert nn.LayerNorm(3, device="cuda").weight.device == CUDA
    bn = nn.BatchNorm1d(2, device="cuda")
    assert bn.running_var.device == CUDA and bn.num_batches_tracked.device == CUDA


def test_legacy_typed_constructors_stay_on_the_cpu():
    jitgrad.set_default_device("cuda")
    assert jitgrad.FloatTensor(2).device == "cpu" and jitgrad.LongTensor([1]).device == "cpu"


def test_device_as_a_context_manager_nests_and_restores():
    dev = jitgrad.device("cuda")
    with dev as entered:
        assert entered is dev and jitgrad.get_default_device() == CUDA
        assert jitgrad.ones(1).device == CUDA
        with jitgrad.device("cpu"):
            assert jitgrad.ones(1).device == "cpu"
        assert jitgrad.ones(1).device == CUDA
    assert jitgrad.ones(1).device == "cpu"
    jitgrad.set_default_device("cuda")
    with jitgrad.device("cpu"):  # a block overrides the global default
        assert jitgrad.zeros(1).device == "cpu"
    assert jitgrad.zeros(1).device == CUDA


def test_a_block_is_left_on_an_exception():
    with pytest.raises(ValueError, match="inside"):
        with jitgrad.device("cuda"):
            raise ValueError("inside")
    assert jitgrad.get_default_device() == "cpu"


def test_the_default_device_is_per_thread_as_pytorchs():
    jitgrad.set_default_device("cuda")
    seen = []
    t = threading.Thread(target=lambda: seen.append(jitgrad.zeros(1).device))
    t.start()
    t.join()
    assert seen == ["cpu"] and jitgrad.zeros(1).device == CUDA


def test_internal_tensors_follow_their_input_not_the_default():
    x = jitgrad.ones(4, 4)
    jitgrad.set_default_device("cuda")
    jitgrad.manual_seed(0)
    assert F.dropout(x, 0.5).device == "cpu"  # its mask is made on the input's device
    q = jitgrad.ones(1, 3, 4, device="cpu")
    assert F.scaled_dot_product_attention(q, q, q, is_causal=True).device == "cpu"
    assert (5 & jitgrad.tensor([3], device="cpu")).device == "cpu"
    jitgrad.set_default_device(None)
    xc = jitgrad.ones(4, 4, device="cuda")
    jitgrad.manual_seed(0)
    dropped = F.dropout(xc, 0.5)
    jitgrad.manual_seed(0)
    assert dropped.device == CUDA
    np.testing.assert_array_equal(dropped.cpu().numpy(), F.dropout(x, 0.5).numpy())
