"""Backward passes on several threads into one shared leaf lose no update: accumulation into
``.grad`` is atomic (a lock per leaf around the read-modify-write), as PyTorch's is."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd.accumulate import leaf_lock

THREADS, STEPS = 4, 100
SHAPE = (1024, 256)  # large enough for NumPy to release the GIL inside the in-place add


def _hammer(backward_step) -> None:
    start = threading.Barrier(THREADS)

    def work():
        start.wait()
        for _ in range(STEPS):
            backward_step()
    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_concurrent_backward_into_shared_leaf_is_exact():
    w = jg.zeros(*SHAPE, requires_grad=True)
    _hammer(lambda: (w * 1.0).sum().backward())
    g = w.grad.numpy()
    assert g.min() == g.max() == THREADS * STEPS


def test_concurrent_first_accumulation_is_exact():
    """Threads racing to create ``.grad`` (None -> a tensor) keep every contribution."""
    for _ in range(20):
        w = jg.zeros(64, requires_grad=True)
        _hammer(lambda w=w: (w * 1.0).sum().backward())
        assert w.grad.numpy().min() == THREADS * STEPS


def test_concurrent_post_accumulate_hooks_run_once_per_backward():
    w = jg.zeros(*SHAPE, requires_grad=True)
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    _hammer(lambda: (w * 1.0).sum().backward())
    assert len(calls) == THREADS * STEPS
    assert w.grad.numpy().min() == THREADS * STEPS


def test_leaf_lock_is_one_per_leaf():
    a, b = jg.zeros(2, requires_grad=True), jg.zeros(2, requires_grad=True)
    assert leaf_lock(a) is leaf_lock(a) and leaf_lock(a) is not leaf_lock(b)


def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    tw = torch.zeros(*SHAPE, requires_grad=True)
    _hammer(lambda: (tw * 1.0).sum().backward())
    w = jg.zeros(*SHAPE, requires_grad=True)
    _hammer(lambda: (w * 1.0).sum().backward())
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())
