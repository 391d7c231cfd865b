"""Scatter-adds on CUDA (``np.add.at``'s job: index, embedding and gather gradients with
repeated indices) have the CPU's bits, and the simulator's device arrays keep CuPy's rules
(no ``ufunc.at``, no ``writeable`` flag) so that code relying on either fails here as it
would on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import jitgrad as torch
from jitgrad.cuda import runtime
from jitgrad.devices import add_at


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_at_has_the_cpus_bits_with_repeated_indices(dtype):
    rng = np.random.default_rng(0)
    out = rng.standard_normal((7, 3)).astype(dtype)
    rows = rng.integers(0, 7, 40)          # every row hit several times, in a mixed order
    vals = (rng.standard_normal((40, 3)) * 10.0 ** rng.integers(-4, 5, (40, 1))).astype(dtype)
    ref = out.copy()
    np.add.at(ref, rows, vals)
    dev = runtime.to_device(out)
    add_at(dev, runtime.to_device(rows), runtime.to_device(vals))
    assert runtime.to_host(dev).tobytes() == ref.tobytes()


def test_add_at_into_a_strided_view_and_with_a_tuple_index():
    base = np.zeros((4, 6))
    ref = base.copy()
    idx = (np.array([0, 1, 0, 3]), np.array([2, 2, 2, 0]))
    np.add.at(ref[:, ::2], idx, np.float64(1.5))
    dev = runtime.to_device(base)
    add_at(dev[:, ::2], tuple(runtime.to_device(i) for i in idx), np.float64(1.5))
    assert np.array_equal(runtime.to_host(dev), ref)
    add_at(dev, (runtime.to_device(np.array([], np.int64)),), np.float64(1.0))  # no values
    assert np.array_equal(runtime.to_host(dev), ref)


def test_embedding_and_index_gradients_with_repeats_equal_the_cpu():
    rng = np.random.default_rng(1)
    W = rng.standard_normal((5, 4)).astype(np.float32)
    ids = np.array([[1, 3, 1], [4, 1, 0]])
    grads = []
    for dev in ("cpu", "cuda"):
        w = torch.tensor(W, device=dev, requires_grad=True)
        i = torch.tensor(ids, device=dev)
        y = torch.nn.functional.embedding(i, w) * 3.0 + w[i[0]].sum()
        y.sum().backward()
        grads.append(w.grad.cpu().numpy())
    assert grads[0].tobytes() == grads[1].tobytes()


@pytest.mark.skipif(not torch.cuda.is_simulated(), reason="checks the simulator's arrays")
def test_simulated_device_arrays_keep_cupys_rules():
    a = torch.zeros(3, device="cuda")._data
    assert not hasattr(a.flags, "writeable") and a.flags.c_contiguous and a.flags["C_CONTIGUOUS"]
    with pytest.raises(TypeError):
        np.add.at(a, runtime.to_device(np.array([0])), 1.0)


@pytest.mark.parametrize("index", [np.array([2, -1, 0, 2, 3]), np.array([[1, 1], [0, -4]])])
def test_add_at_of_rows_picked_by_one_index_array(index):
    rng = np.random.default_rng(2)
    out = rng.standard_normal((4, 3)).astype(np.float32)
    vals = rng.standard_normal(index.shape + (3,)).astype(np.float32)
    ref = out.copy()
    np.add.at(ref, index, vals)
    dev = runtime.to_device(out)
    add_at(dev, runtime.to_device(index), runtime.to_device(vals))
    assert runtime.to_host(dev).tobytes() == ref.tobytes()
    dev = runtime.to_device(out)
    add_at(dev, (runtime.to_device(index),), runtime.to_device(vals))  # as a 1-tuple
    assert runtime.to_host(dev).tobytes() == ref.tobytes()
