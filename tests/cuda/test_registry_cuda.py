"""Registry-driven CUDA tests: every op of ``jitgrad.ops.REGISTRY`` on every sample (the
OpDef's, or the hand-written ones in tests/ops/conftest.py) runs on CUDA tensors with the
CPU's values and gradients, its results and gradients on the input's device.

Each sample runs twice through the same adapter: on CPU tensors, and on the same data moved
with ``.cuda()``; the forward values are compared, then the gradients of
``(y * w).sum()`` for a fixed random cotangent ``w`` (float64 samples; float32 samples check
the forward only, which keeps the simulator's per-launch cost to about a minute).
Arithmetic, sums, movement and selection have the CPU's bits; ops that go through a
transcendental differ by NumPy's libm (the simulator; libdevice on a GPU) against jitgrad's
vmath, within a few ulp.

A new op is covered as soon as it has samples and an adapter (tests/ops enforces both).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ops_helpers

import jitgrad
from jitgrad.ops import REGISTRY

H = ops_helpers()
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

#: ops whose values (and gradients) hold the CPU's bits exactly; every other op goes through a
#: transcendental (exp, log, tanh, erf, sqrt of a sum, ...) and is compared within a few ulp
EXACT = {
    "abs", "add", "add_scaled", "addcdiv", "amax", "amin", "argmax", "argmin", "cat", "clamp",
    "clamp_backward", "clone", "div", "embedding", "embedding_backward", "eq", "expand", "ge",
    "getitem", "getitem_backward", "gt", "index_put", "le", "lerp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "lt", "masked_fill", "max_dim", "maximum",
    "mean", "min_dim", "minimum", "mse_loss", "mse_loss_backward", "mul", "ne", "neg",
    "permute", "reciprocal", "relu", "reshape", "rsub", "sign", "stack", "sub", "sum",
    "threshold_backward", "to_device", "to_dtype", "tril", "triu", "where", "huber_loss",
    "huber_loss_backward", "smooth_l1_loss", "smooth_l1_loss_backward",
    # pooling and the conv bias gradient: the CPU kernels' order and types, as gathers
    "max_pool2d", "max_pool2d_indices", "max_pool2d_backward", "pool_gather", "avg_pool2d",
    "avg_pool2d_backward", "conv2d_backward_bias",
    # reordering and copies: no arithmetic
    "flip", "roll", "pin_memory",
}
#: relative / absolute tolerance of the other ops (a few ulp, grown by the op's arithmetic)
TOL = {F32: (2e-6, 1e-6), F64: (1e-13, 1e-14)}
#: matrix products add in their library's own order (OpenBLAS on the CPU, cuBLAS with TF32
#: off on a GPU, NumPy's matmul over another layout in the simulator): the rounding error
#: grows with the reduced length (the samples reduce at most ~100 terms of size <= ~10)
GEMM = {"addmm", "matmul", "conv2d", "conv2d_backward_input", "conv2d_backward_weight"}
TOL_GEMM = {F32: (2e-5, 2e-5), F64: (1e-12, 1e-13)}

class _OnCuda:
    """``jitgrad`` whose factories (``tensor``, ``zeros``, ``ones``, ``full``, ``empty``)
    make CUDA tensors, so adapters that build tensors of their own (index tensors, the
    zeros a backward op differentiates) build them on the samples' device."""

    __name__ = "jitgrad"

    def __getattr__(self, name):
        return getattr(jitgrad, name)

    @staticmethod
    def _on_cuda(fn):
        def made(*args, device="cuda", **kwargs):
            return fn(*args, device=device, **kwargs)
        return made

    def __init__(self) -> None:
        for name in ("tensor", "zeros", "ones", "full", "empty"):
            setattr(self, name, self._on_cuda(getattr(jitgrad, name)))


CUDA_M = _OnCuda()


def _inputs(args, device: str, requires_grad: bool) -> list:
    """Tensors for the arrays of ``args`` on ``device`` (CUDA ones moved there with
    ``.cuda()``), float ones requiring grad when ``requires_grad``."""
    out = []
    for a in args:
        if isinstance(a, np.generic):
            a = np.asarray(a)
        if isinstance(a, np.ndarray):
            t = jitgrad.tensor(a.copy())
            if device == "cuda":
                t = t.cuda()
                assert t.device == "cuda:0"
            out.append(t.requires_grad_() if requires_grad and a.dtype.kind == "f" else t)
        else:
            out.append(a)
    return out


def _run(name: str, args, p: dict, device: str, grad: bool):
    """(output array, [input gradient arrays or None]) of op ``name`` on ``device``; asserts
    where the output and the gradients live."""
    ts = _inputs(args, device, grad)
    M = CUDA_M if device == "cuda" else jitgrad
    with jitgrad.enable_grad():
        y = H.call(M, name, ts, p)
    # the to_device adapter goes to CUDA and back, pin_memory's pins a CPU copy of a CUDA
    # tensor: their results are on the CPU
    want = "cpu" if name in ("to_device", "pin_memory") else device
    assert y.device.type == want, (name, y.device)
    grads = None
    if grad and y.requires_grad:
        w = np.random.default_rng(7).uniform(-1.0, 1.0, tuple(y.shape))
        wt = jitgrad.tensor(w, dtype=y.dtype, device=y.device)
        (y * wt).sum().backward()
        grads = []
        for t in ts:
            if isinstance(t, jitgrad.Tensor) and t.grad is not None:
                assert t.grad.device == t.device, (name, t.grad.device, t.device)
                grads.append(t.grad.cpu().numpy())
            else:
                grads.append(None)
    return y.detach().cpu().numpy(), grads


def _compare(name: str, what: str, cpu, cuda, dtype) -> None:
    assert cpu.shape == cuda.shape and cpu.dtype == cuda.dtype, (what, cpu.shape, cuda.shape,
                                                                  cpu.dtype, cuda.dtype)
    if name in EXACT or cpu.dtype.kind != "f":
        np.testing.assert_array_equal(cuda, cpu, err_msg=what)
    else:
        rtol, atol = (TOL_GEMM if name in GEMM else TOL)[np.dtype(dtype)]
        np.testing.assert_allclose(cuda, cpu, rtol=rtol, atol=atol, err_msg=what)


def _cases(dtype):
    """Every sample of every op."""
    return H.case_params(sorted(REGISTRY), dtype)


@pytest.mark.parametrize("name,i", _cases(F64))
def test_float64_values_and_gradients_equal_the_cpu(name, i):
    args, p = H.sample(name, i, F64)
    grad = not p.get("_nograd")
    y_cpu, g_cpu = _run(name, args, p, "cpu", grad)
    y_cuda, g_cuda = _run(name, args, p, "cuda", grad)
    _compare(name, "forward", y_cpu, y_cuda, F64)
    assert (g_cpu is None) == (g_cuda is None)
    for k, (a, b) in enumerate(zip(g_cpu or (), g_cuda or ())):
        assert (a is None) == (b is None), f"gradient of input {k}"
        if a is not None:
            _compare(name, f"gradient of input {k}", a, b, F64)


@pytest.mark.parametrize("name,i", _cases(F32))
def test_float32_values_equal_the_cpu(name, i):
    args, p = H.sample(name, i, F32)
    y_cpu, _ = _run(name, args, p, "cpu", False)
    y_cuda, _ = _run(name, args, p, "cuda", False)
    _compare(name, "forward", y_cpu, y_cuda, F32)


def test_every_op_runs_on_cuda_or_is_listed():
    """Every registered op has samples this module runs (none is silently skipped)."""
    for name in REGISTRY:
        assert H.samples_for(name, F64), f"{name}: no samples, so no CUDA check"
