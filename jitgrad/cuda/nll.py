"""Negative log-likelihood and the cross-entropy chain on CUDA arrays, without the host.

The NumPy formulation (``ops/nnops/nll.py``) run on CuPy arrays checks the targets with
masks and reads the answer on the host, gathers, scatters and reads the output gradient as a
Python float: about fifteen launches and four waits for the device per training step. Here
the common case -- a batch ``(N, C)`` of float log-probabilities (or logits, for the
chain), int64 class indices, no class weights, a ``mean`` or ``sum`` -- runs the row
kernels of ``cuda/rowwise.py``:

* :func:`nll_forward`: one block checks and counts the targets and adds the picked
  ``-y[i, t_i]`` in float64 lanes combined in a fixed order (one launch); the host then
  reads the first out-of-range row (one wait: a bad target raises PyTorch's ``IndexError``
  before anything uses the loss);
* :func:`nll_backward`: one block counts the targets (into device memory), then the gradient
  is written in one pass (two launches, no wait);
* :func:`cross_entropy_chain` (what a compiled step runs for ``log_softmax -> nll_loss ->
  nll_loss_backward -> log_softmax_backward``, ``compiler/chains.py``): the count, a block
  per row computing the row's log-softmax, its pick and its input gradient, and the ordered
  sum of the picks (three launches, one wait for the target check).

The arithmetic is the four eager kernels' (the same device functions, products without FMA
contraction), so a compiled step has eager CUDA's bits; against the CPU the sums' order
differs (NumPy adds the picks pairwise), a rounding of the float64 total; the order does
not depend on the block size.
"""

from __future__ import annotations

import numpy as np

from . import launch, runtime
from .rowwise import kernels, row_grid

__all__ = ["applies", "nll_forward", "nll_backward", "cross_entropy_chain"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def applies(shape: tuple, dtype, t, w, reduction: str) -> bool:
    """Whether these kernels take the case: an input of ``shape`` (N, C) and float
    ``dtype``, targets ``t`` an (N,) int64 device array, no class weights, a ``mean`` or
    ``sum`` over a non-empty batch."""
    return (w is None and reduction in ("mean", "sum") and len(shape) == 2
            and np.dtype(dtype) in _FLOATS and runtime.is_device_array(t)
            and t.dtype == np.int64 and t.shape == (shape[0],) and shape[0] * shape[1] > 0)


def _launch(fn, blocks: int, args: tuple, read_only: tuple) -> None:
    launch.run(fn, blocks, row_grid(1)[1], (), read_only, args)


def _contiguous(a):
    return a if a.flags.c_contiguous else runtime.xp().ascontiguousarray(a)


def _check(stats, t) -> None:
    """PyTorch's error for the first out-of-range target (reads the row on the host)."""
    bad = int(runtime.to_host(stats[1:2])[0])
    if bad < t.shape[0]:
        raise IndexError(f"Target {int(runtime.to_host(t[bad:bad + 1])[0])} is out of bounds.")


def _grad_scalar(g, dtype):
    """The output gradient as a one-element device array (read by the kernel)."""
    g = runtime.to_device(np.asarray(g)) if not runtime.is_device_array(g) else g
    return g.reshape(1) if g.dtype == dtype else g.reshape(1).astype(dtype)


def nll_forward(y, t, reduction: str, ignore_index: int):
    """``nll_loss(y, t)`` of log-probabilities ``y`` (a 0-d device array of y's dtype)."""
    y = _contiguous(y)
    k = kernels(y.dtype)
    stats = runtime.empty(2, np.int64)
    picked = runtime.empty(y.shape[0], np.float64)
    out = runtime.empty(1, y.dtype)
    _launch(k.nll_forward, 1, (y, t, np.int64(ignore_index), reduction == "mean", stats,
                               picked, out), (True, True, False, False, False, False, False))
    _check(stats, t)
    return out.reshape(())


def nll_backward(g, t, reduction: str, ignore_index: int, shape: tuple, dtype):
    """The input gradient of ``nll_loss`` for output gradient ``g`` (N, C)."""
    k = kernels(dtype)
    stats = runtime.empty(2, np.int64)
    _launch(k.nll_targets, 1, (t, np.int64(ignore_index), np.int64(shape[1]), stats),
            (True, False, False, False))
    out = runtime.empty(shape, dtype)
    blocks = runtime.blocks_for(out.size, row_grid(1)[1])
    _launch(k.nll_backward, blocks, (_grad_scalar(g, dtype), t, np.int64(ignore_index),
                                     reduction == "mean", stats, out),
            (True, True, False, False, True, False))
    return out


def cross_entropy_chain(x, t, g, reduction: str, ignore_index: int) -> tuple:
    """``(loss, gradient of x)`` of ``nll_loss(log_softmax(x, 1), t)`` for output gradient
    ``g``, with the bits of the four eager CUDA kernels."""
    x = _contiguous(x)
    k = kernels(x.dtype)
    R = x.shape[0]
    mean = reduction == "mean"
    stats = runtime.empty(2, np.int64)
    _launch(k.nll_targets, 1, (t, np.int64(ignore_index), np.int64(x.shape[1]), stats),
            (True, False, False, False))
    picked = runtime.empty(R, np.float64)
    gx = runtime.empty(x.shape, x.dtype)
    _launch(k.cross_entropy_rows, row_grid(R)[0],
            (x, t, np.int64(ignore_index), mean, _grad_scalar(g, x.dtype), stats, picked, gx),
            (True, True, False, False, True, True, False, False))
    out = runtime.empty(1, x.dtype)
    _launch(k.nll_sum, 1, (picked, stats, mean, out), (True, True, False, False))
    _check(stats, t)
    return out.reshape(()), gx
