"""jitgrad's eager workloads side by side with NumPy, Numba, PyTorch and JAX, in one process.

    python asv_benchmarks/compare.py [--quick] [--json PATH] [--png PATH] [--only W ...]
                                     [--threads N] [--no-torch] [--no-jax]

Workloads (as ``shared/peers-bench`` and ``benchmarks/bench_eager.py``):

* ``per_op``   ``c = a * b + a`` on 16 float32 elements (``a`` requires grad); a timed call runs
  the line 16 times; reported per op = per line / 2.
* ``seed``     ``z = log(x**3) + sqrt(x**2)``, forward + backward + read ``x.grad``.
* ``chain``    ``sum(tanh(x*w + b)**2 * sigmoid(x))`` forward + backward -> loss, dx, dw, db;
  effective GB/s = 6 * n * itemsize / time (read x, w, b; write the three grads), against a
  STREAM-style triad bandwidth measured here.
* ``matmul``   ``((x @ w1).tanh() @ w2).sum()`` forward + backward (w1, w2), 128x784x256x10.
* ``gpt``      the character-level GPT of ``examples/train_gpt.py`` (nanoGPT's architecture):
  forward, cross-entropy, backward, ``clip_grad_norm_``, AdamW; PyTorch runs the same file.
* ``cold``     fresh processes: import, and import + first op + backward (warm disk caches).
* ``compile``  fresh processes: import + the W2 step (``chain`` at 1e6 float32, loss and the
  three gradients) until compiled code has produced its result, with an empty ("cold") and a
  filled ("warm") on-disk cache: jitgrad.compile (two calls: the first traces), a hand-written
  Numba kernel (``cache=True``), torch.compile (inductor's cache; slow: only without --quick),
  jax.jit (no persistent cache: cold only).

Implementations: ``jitgrad`` is eager; ``jitgrad_compiled`` the whole step under
``jitgrad.compile`` (value_and_grad for ``seed``); ``jitgrad_node`` the function alone compiled
with ``backward()`` outside (``seed``, ``chain``); ``jitgrad_module`` ``compile(model)`` with the
loss, ``backward()`` and ``opt.step()`` eager (``mlp``); ``numba_fused*`` hand-written one-pass
kernels with ``contract``/``reassoc``: ``numba_fused`` a rational tanh approximation (float32,
~1e-6 relative error), ``_libm`` NumPy's libm calls, ``_vmath`` jitgrad's kernel math (the same
tanh and sigmoid as the compiled step).

Every implementation of a workload is timed in this process, interleaved round-robin (one
repeat of each per round) so background load hits all alike; ``number`` per repeat is
calibrated so a repeat lasts ~``target_s``; median and min over the repeats. Ratios: ``x best``
= median / fastest non-jitgrad median of that workload, ``x numpy`` = median / NumPy's.
PyTorch and JAX are used when importable, skipped with a printed line otherwise.
Each result is checked against a float64 NumPy reference (``err`` column).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import numba
import numpy as np
from numba import njit, prange

LINES = 16  # lines per timed call in per_op (amortises the loop and call overhead)


# ------------------------------------------------------------------------------ timing
def blas_on_pool() -> str:
    """Whether NumPy's OpenBLAS ran its threaded products on jitgrad's pool in this run
    (``jitgrad/kernels/blas_threads.py``; every implementation's products, NumPy's too)."""
    mod = sys.modules.get("jitgrad.kernels.blas_threads")
    return "yes" if mod is not None and mod.blas_routed() else "no"


def blas_kernels() -> str:
    """The kernel set NumPy's OpenBLAS ran in this run, and why (``kernels/blas_core.py``:
    jitgrad's import picks it; every implementation's products, NumPy's too)."""
    mod = sys.modules.get("jitgrad.kernels.blas_core")
    if mod is None:
        return "?"
    core, why = mod.blas_core()
    return f"{core or '?'} ({why})"


def calibrate(fn, target_s: float, max_number: int = 1_000_000) -> int:
    """Calls per repeat so that one repeat lasts about ``target_s`` (best of 3 timings)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return int(max(1, min(max_number, target_s / max(best, 1e-9))))


def interleaved_samples(fns: dict, numbers: dict, rounds: int) -> dict:
    """Seconds per call of each callable, ``rounds`` samples each: a round times one repeat
    (``numbers[name]`` calls) of every callable in turn, so background load hits all alike."""
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            n = numbers[name]
            settle_threads()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - t0) / n)
    return samples


def settle_threads(max_s: float = 0.5, probe_s: float = 0.004) -> float:
    """Wait until no thread of this process is using a CPU; the seconds waited.

    Thread pools keep spinning after their last parallel region -- PyTorch's OpenMP workers
    for ~100 ms, OpenBLAS's for a while -- and on a machine with few cores a spinning worker
    of the implementation timed before takes a core from the one timed next (measured:
    NumPy's MLP step at batch 128 took 920 us right after a PyTorch repeat, 550 us alone).
    Every repeat therefore starts once the process's CPU time stops growing during a short
    sleep (bounded by ``max_s``)."""
    t_start = time.perf_counter()
    while True:
        c0, w0 = time.process_time(), time.perf_counter()
        time.sleep(probe_s)
        used, slept = time.process_time() - c0, time.perf_counter() - w0
        waited = time.perf_counter() - t_start
        if used < 0.2 * slept or waited >= max_s:
            return waited


def bench_interleaved(fns: dict, warmup: int, rounds: int, target_s: float) -> dict:
    """Median/min seconds per call of each callable, repeats interleaved round-robin."""
    numbers = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        numbers[name] = calibrate(fn, target_s)
    samples = interleaved_samples(fns, numbers, rounds)
    return {name: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v),
                   "number": numbers[name], "repeats": rounds} for name, v in samples.items()}


def cpu_busy(interval: float = 0.3) -> float:
    """Fraction of all CPUs busy during ``interval`` (Linux /proc/stat; 0 elsewhere)."""
    def sample():
        with open("/proc/stat") as f:
            vals = [int(v) for v in f.readline().split()[1:]]
        return vals[3] + vals[4], sum(vals)
    try:
        i0, t0 = sample()
        time.sleep(interval)
        i1, t1 = sample()
    except OSError:
        return 0.0
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(max_wait_s: float, threshold: float = 0.25) -> float:
    """Wait (bounded) for other processes to leave the CPUs mostly idle; the busy fraction."""
    deadline = time.time() + max_wait_s
    busy = cpu_busy()
    while busy > threshold and time.time() < deadline:
        busy = cpu_busy()
    return busy


def workloads(name: str):
    """``benchmarks/<name>.py``: workloads that asv times too, so both tools run the same code.
    Imported on first use, not with this file, which the numba_hand compile-latency program
    imports (for ``chain_fused_f32``) inside its timing."""
    bench_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks")
    if bench_dir not in sys.path:
        sys.path.insert(0, bench_dir)
    return importlib.import_module(name)


# ------------------------------------------------------------------------------ peers
PEER_MODULES: dict = {}


def optional(name: str):
    """The module ``name`` if importable, else None (with one printed line)."""
    if name not in PEER_MODULES:
        try:
            PEER_MODULES[name] = __import__(name)
            if name == "jax":
                import jax.numpy  # noqa: F401
        except Exception as exc:  # ImportError, or a broken install
            PEER_MODULES[name] = None
            print(f"skipped {name}: not importable ({type(exc).__name__}: {exc})", flush=True)
    return PEER_MODULES[name]


def rel_err(a, ref) -> float:
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(a - ref)) / (np.max(np.abs(ref)) + 1e-30))


def to_np(t):
    """A result of any implementation as a NumPy array."""
    if hasattr(t, "detach"):
        t = t.detach()
    if hasattr(t, "numpy"):
        return np.asarray(t.numpy())
    return np.asarray(t)


# ------------------------------------------------------------------------------ per_op (W4)
def autograd_lines(lib, a, b):
    """The timed calls of per_op for an autograd library (jitgrad, PyTorch): ``LINES`` times
    ``c = a * b + a`` recording the graph, and the same under ``lib.no_grad()``."""
    def grad():
        for _ in range(LINES):
            c = a * b + a
        return c

    def no_grad():
        with lib.no_grad():
            for _ in range(LINES):
                c = a * b + a
        return c
    return grad, no_grad


def per_op_impls(jg):
    an = np.linspace(-1, 1, 16, dtype=np.float32)
    bn = np.linspace(0.5, 2, 16, dtype=np.float32)
    ref = an.astype(np.float64) * bn + an
    impls = {}

    def numpy_line():
        for _ in range(LINES):
            c = an * bn + an
        return c
    impls["numpy"] = numpy_line

    a = jg.from_numpy(an.copy()).requires_grad_()
    b = jg.from_numpy(bn.copy())
    impls["jitgrad_grad"], impls["jitgrad_no_grad"] = autograd_lines(jg, a, b)

    torch = optional("torch")
    if torch:
        ta = torch.from_numpy(an.copy()).requires_grad_()
        tb = torch.from_numpy(bn.copy())
        impls["torch_grad"], impls["torch_no_grad"] = autograd_lines(torch, ta, tb)

    jax = optional("jax")
    if jax:
        ja, jb = jax.numpy.asarray(an), jax.numpy.asarray(bn)

        def jax_unjitted():
            for _ in range(LINES):
                c = ja * jb + ja
            return c.block_until_ready()
        impls["jax_unjitted"] = jax_unjitted

    checks = {name: (lambda f=f: rel_err(to_np(f()), ref)) for name, f in impls.items()}
    return impls, checks


# ------------------------------------------------------------------------------ seed (W1)
def seed_impls(jg):
    impls = {}

    def python_floor():
        x = 5.0
        y = x ** 3
        w = x ** 2
        _ = math.log(y) + math.sqrt(w)
        return (1.0 / y) * 3.0 * x * x + (0.5 / math.sqrt(w)) * 2.0 * x
    impls["python_floor"] = python_floor

    def numpy_hand():
        x = np.float32(5.0)
        y = x ** 3
        w = x ** 2
        _ = np.log(y) + np.sqrt(w)
        return float((1 / y) * 3 * x * x + (np.float32(0.5) / np.sqrt(w)) * 2 * x)
    impls["numpy"] = numpy_hand

    def jitgrad_new_leaf():
        x = jg.tensor(5.0, requires_grad=True)
        z = jg.log(x ** 3) + jg.sqrt(x ** 2)
        z.backward()
        return x.grad.item()

    xr = jg.tensor(5.0, requires_grad=True)
    xr.grad = jg.zeros_like(xr)

    def jitgrad_reuse_leaf():
        xr.grad.zero_()
        z = jg.log(xr ** 3) + jg.sqrt(xr ** 2)
        z.backward()
        return xr.grad.item()
    impls["jitgrad_new_leaf"] = jitgrad_new_leaf
    impls["jitgrad_reuse_leaf"] = jitgrad_reuse_leaf

    vg = jg.compile(jg.value_and_grad(lambda x: jg.log(x ** 3) + jg.sqrt(x ** 2)))
    xc = jg.tensor(5.0)
    vg(xc)

    def jitgrad_compiled():
        return vg(xc)[1].item()
    impls["jitgrad_compiled"] = jitgrad_compiled

    f = jg.compile(lambda x: jg.log(x ** 3) + jg.sqrt(x ** 2))
    xn = jg.tensor(5.0, requires_grad=True)

    def jitgrad_node():  # compiled function, backward() outside it
        xn.grad = None
        f(xn).backward()
        return xn.grad.item()
    jitgrad_node()
    impls["jitgrad_node"] = jitgrad_node

    torch = optional("torch")
    if torch:
        tx = torch.tensor(5.0, requires_grad=True)

        def torch_eager():
            tx.grad = None
            z = torch.log(tx ** 3) + torch.sqrt(tx ** 2)
            z.backward()
            return tx.grad.item()

        def torch_new_leaf():
            x = torch.tensor(5.0, requires_grad=True)
            z = torch.log(x ** 3) + torch.sqrt(x ** 2)
            z.backward()
            return x.grad.item()
        impls["torch_eager"] = torch_eager
        impls["torch_new_leaf"] = torch_new_leaf

    jax = optional("jax")
    if jax:
        jnp = jax.numpy
        g = jax.jit(jax.grad(lambda x: jnp.log(x ** 3) + jnp.sqrt(x ** 2)))
        x32 = np.float32(5.0)
        impls["jax_jit_grad"] = lambda: float(g(x32))

    checks = {name: (lambda f=f: abs(f() - 1.6) / 1.6) for name, f in impls.items()}
    return impls, checks


# ------------------------------------------------------------------------------ chain (W2)
# tanh as the float32 rational approximation used by Eigen and XLA on CPU: on v clamped to
# [-c, c], tanh(v) ~= v * P(v^2) / Q(v^2); sigmoid(v) = (1 + tanh(v / 2)) / 2. Vectorises,
# where numba's np.tanh / np.exp are scalar libm calls (no SVML with PyPI's llvmlite).
_F = np.float32
_P = tuple(_F(c) for c in (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                           5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                           4.89352455891786e-03))
_Q = tuple(_F(c) for c in (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                           4.89352518554385e-03))
P13, P11, P9, P7, P5, P3, P1 = _P
Q6, Q4, Q2, Q0 = _Q
TANH_CLAMP = _F(7.90531110763549805)
ONE32, TWO32, HALF32 = _F(1), _F(2), _F(0.5)
_FM = {"reassoc", "contract"}


@njit(inline="always", fastmath=_FM, cache=True)
def _rtanh32(v):
    v = min(max(v, -TANH_CLAMP), TANH_CLAMP)
    v2 = v * v
    p = v2 * P13 + P11
    p = v2 * p + P9
    p = v2 * p + P7
    p = v2 * p + P5
    p = v2 * p + P3
    p = v2 * p + P1
    q = v2 * Q6 + Q4
    q = v2 * q + Q2
    q = v2 * q + Q0
    return v * p / q


@njit(parallel=True, fastmath=_FM, cache=True)
def chain_fused_f32(x, w, b, gx, gw, gb):
    """One pass: loss and the three gradients; float32 only (the physical reference)."""
    acc = 0.0
    for i in prange(x.shape[0]):
        xi = x[i]
        wi = w[i]
        t = _rtanh32(xi * wi + b[i])
        s = HALF32 + HALF32 * _rtanh32(HALF32 * xi)
        t2 = t * t
        ts = t2 * s
        acc += np.float64(ts)
        du = TWO32 * t * s * (ONE32 - t2)
        gx[i] = du * wi + ts * (ONE32 - s)
        gw[i] = du * xi
        gb[i] = du
    return acc


vm_tanh = vm_sigmoid = None  # jitgrad's kernel math, imported on first use (_load_vmath)


def _load_vmath() -> None:
    """Import what ``chain_fused_math`` calls with ``vmath`` (not at module import: the
    numba_hand compile-latency program imports this file inside its timing)."""
    global vm_tanh, vm_sigmoid
    from jitgrad.kernels.vmath import sigmoid, tanh

    vm_tanh, vm_sigmoid = tanh, sigmoid


@njit(parallel=True, fastmath=_FM, cache=True)
def chain_fused_math(x, w, b, gx, gw, gb, one, two, vmath):
    """One pass with np.tanh / np.exp (libm) or, with ``vmath``, jitgrad's kernel math
    (``jitgrad.kernels.vmath``: the tanh and sigmoid its generated kernels call, <= 3 ulp,
    which keep their own accuracy under the caller's flags): the hand-written kernel a
    compiled step is measured against with the same math (numba_fused uses a faster, less
    accurate tanh). ``contract``/``reassoc`` as numba_fused, so the sum vectorises; ``one``
    and ``two`` typed."""
    acc = 0.0
    for i in prange(x.shape[0]):
        xi = x[i]
        wi = w[i]
        u = xi * wi + b[i]
        if vmath:
            t = vm_tanh(u)
            s = vm_sigmoid(xi)
        else:
            t = np.tanh(u)
            s = one / (one + np.exp(-xi))
        t2 = t * t
        ts = t2 * s
        acc += ts
        du = two * t * s * (one - t2)
        gx[i] = du * wi + ts * (one - s)
        gw[i] = du * xi
        gb[i] = du
    return acc


def eager_chain_step(lib, x, w, b):
    """W2 in an autograd library (jitgrad, PyTorch) on the leaves x, w, b: forward + backward
    into fresh grads; returns the loss and the three gradients."""
    def eager():
        x.grad = w.grad = b.grad = None
        loss = (lib.tanh(x * w + b) ** 2 * lib.sigmoid(x)).sum()
        loss.backward()
        return loss.item(), x.grad, w.grad, b.grad
    return eager


def chain_impls(jg, n: int, dtype: str):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(n, dtype=np.dtype(dtype).type) for _ in range(3))
    impls = {}

    def numpy_hand():
        u = x * w
        u += b
        t = np.tanh(u)
        s = 1 / (1 + np.exp(-x))
        t2 = t * t
        ts = t2 * s
        loss = ts.sum()
        du = 2 * t * s * (1 - t2)
        return loss, du * w + ts * (1 - s), du * x, du
    impls["numpy"] = numpy_hand

    gx, gw, gb = np.empty_like(x), np.empty_like(x), np.empty_like(x)
    if dtype == "float32":
        impls["numba_fused"] = lambda: (chain_fused_f32(x, w, b, gx, gw, gb), gx, gw, gb)
    one, two = x.dtype.type(1), x.dtype.type(2)
    _load_vmath()
    impls["numba_fused_libm"] = lambda: (
        chain_fused_math(x, w, b, gx, gw, gb, one, two, False), gx, gw, gb)
    impls["numba_fused_vmath"] = lambda: (
        chain_fused_math(x, w, b, gx, gw, gb, one, two, True), gx, gw, gb)

    jx, jw, jb = (jg.from_numpy(a.copy()).requires_grad_() for a in (x, w, b))
    impls["jitgrad"] = eager_chain_step(jg, jx, jw, jb)

    step = workloads("chain_workloads").compiled_chain_step(jg)
    cx, cw, cb = (jg.from_numpy(a.copy()).requires_grad_() for a in (x, w, b))
    step(cx, cw, cb)

    def jitgrad_compiled():
        loss = step(cx, cw, cb)
        return loss.item(), cx.grad, cw.grad, cb.grad
    impls["jitgrad_compiled"] = jitgrad_compiled

    loss_fn = workloads("chain_workloads").compiled_chain_loss(jg)
    nx, nw, nb = (jg.from_numpy(a.copy()).requires_grad_() for a in (x, w, b))

    def jitgrad_node():  # the loss compiled, backward() outside it
        nx.grad = nw.grad = nb.grad = None
        loss = loss_fn(nx, nw, nb)
        loss.backward()
        return loss.item(), nx.grad, nw.grad, nb.grad
    jitgrad_node()
    impls["jitgrad_node"] = jitgrad_node

    torch = optional("torch")
    if torch:
        tx, tw, tb = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
        impls["torch_eager"] = eager_chain_step(torch, tx, tw, tb)

    jax = optional("jax")
    if jax:
        if dtype == "float64":
            jax.config.update("jax_enable_x64", True)
        jnp = jax.numpy
        vg = jax.jit(jax.value_and_grad(
            lambda x, w, b: jnp.sum(jnp.tanh(x * w + b) ** 2 * jax.nn.sigmoid(x)),
            argnums=(0, 1, 2)))
        ja = [jnp.asarray(a) for a in (x, w, b)]
        if ja[0].dtype == x.dtype:
            def jax_jit():
                loss, grads = vg(*ja)
                jax.block_until_ready(grads)
                return (loss, *grads)
            impls["jax_jit"] = jax_jit
        else:
            print(f"skipped jax_jit for {dtype}: jax made {ja[0].dtype}", flush=True)

    ref_loss, ref_grads = workloads("chain_workloads").chain_reference(x, w, b)

    def check(f):
        loss, *grads = f()
        lerr = abs(float(loss) - ref_loss) / abs(ref_loss)
        return max(lerr, *(rel_err(to_np(g), r) for g, r in zip(grads, ref_grads)))

    checks = {name: (lambda f=f: check(f)) for name, f in impls.items()}
    return impls, checks, 6 * n * x.itemsize


# ------------------------------------------------------------------------------ matmul
def eager_matmul_step(x, w1, w2):
    """The matmul chain in an autograd library (jitgrad, PyTorch): forward + backward into
    fresh grads of the weights; returns the loss and the two gradients."""
    def eager():
        w1.grad = w2.grad = None
        loss = ((x @ w1).tanh() @ w2).sum()
        loss.backward()
        return loss.item(), w1.grad, w2.grad
    return eager


def matmul_impls(jg, shape=(128, 784, 256, 10)):
    x, w1, w2 = workloads("chain_workloads").matmul_arrays(shape)
    impls = {}

    def numpy_hand(x=x, w1=w1, w2=w2):
        h = np.tanh(x @ w1)
        loss = (h @ w2).sum()
        g = np.ones((x.shape[0], w2.shape[1]), dtype=x.dtype)
        dw2 = h.T @ g
        du = (g @ w2.T) * (1 - h * h)
        return loss, x.T @ du, dw2
    impls["numpy"] = numpy_hand

    jx = jg.from_numpy(x.copy())
    jw1, jw2 = (jg.from_numpy(a.copy()).requires_grad_() for a in (w1, w2))
    impls["jitgrad"] = eager_matmul_step(jx, jw1, jw2)

    cw1, cw2 = (jg.from_numpy(a.copy()).requires_grad_() for a in (w1, w2))

    @jg.compile
    def mm_step(x):
        cw1.grad = cw2.grad = None
        loss = ((x @ cw1).tanh() @ cw2).sum()
        loss.backward()
        return loss
    mm_step(jx)

    def jitgrad_compiled():
        loss = mm_step(jx)
        return loss.item(), cw1.grad, cw2.grad
    impls["jitgrad_compiled"] = jitgrad_compiled

    torch = optional("torch")
    if torch:
        tx = torch.from_numpy(x)
        tw1, tw2 = (torch.from_numpy(a).requires_grad_() for a in (w1, w2))
        impls["torch_eager"] = eager_matmul_step(tx, tw1, tw2)

    jax = optional("jax")
    if jax:
        jnp = jax.numpy
        impls["jax_jit"] = jax_grad_impl(
            jax, lambda w1, w2, x: jnp.sum(jnp.tanh(x @ w1) @ w2), (w1, w2, x), (0, 1))
    ref = numpy_hand(*(a.astype(np.float64) for a in (x, w1, w2)))
    return impls, loss_grad_checks(impls, ref)


def jax_grad_impl(jax, loss, arrays, argnums):
    """``jax.jit`` of ``value_and_grad(loss)`` over ``arrays``: ``() -> (loss, *grads)``."""
    vg = jax.jit(jax.value_and_grad(loss, argnums=argnums))
    ja = [jax.numpy.asarray(a) for a in arrays]

    def jax_jit():
        value, grads = vg(*ja)
        jax.block_until_ready(grads)
        return (value, *grads)
    return jax_jit


def loss_grad_checks(impls, ref):
    """Per impl, the largest relative error of its ``(loss, *grads)`` against ``ref``."""
    def check(f):
        loss, *grads = f()
        lerr = abs(float(loss) - ref[0]) / abs(ref[0])
        return max(lerr, *(rel_err(to_np(g), r) for g, r in zip(grads, ref[1:])))

    return {name: (lambda f=f: check(f)) for name, f in impls.items()}


def attention_impls(jg, shape=(32, 4, 64, 32)):
    """Attention's batched products, forward + backward: ``((q @ k.T) @ v).sum()`` over
    (batch, heads, tokens, head size) float32 (the GPT "small" step's shapes), gradients of
    q, k and v: six products of 128 small matrices each."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
    impls = {}

    def numpy_hand(q=q, k=k, v=v):
        s = q @ k.swapaxes(-1, -2)
        o = s @ v
        g = np.ones_like(o)
        ds = g @ v.swapaxes(-1, -2)
        return o.sum(), ds @ k, ds.swapaxes(-1, -2) @ q, s.swapaxes(-1, -2) @ g
    impls["numpy"] = numpy_hand

    def eager_step(lib, arrays):
        ts = [lib.from_numpy(a.copy()).requires_grad_() for a in arrays]

        def step():
            for t in ts:
                t.grad = None
            loss = ((ts[0] @ ts[1].transpose(-2, -1)) @ ts[2]).sum()
            loss.backward()
            return (loss.item(), *(t.grad for t in ts))
        return step, ts
    impls["jitgrad"] = eager_step(jg, (q, k, v))[0]
    cts = [jg.from_numpy(a.copy()).requires_grad_() for a in (q, k, v)]

    @jg.compile
    def attn_step():
        for t in cts:
            t.grad = None
        loss = ((cts[0] @ cts[1].transpose(-2, -1)) @ cts[2]).sum()
        loss.backward()
        return loss
    attn_step()
    impls["jitgrad_compiled"] = lambda: (attn_step().item(), *(t.grad for t in cts))
    torch = optional("torch")
    if torch:
        impls["torch_eager"] = eager_step(torch, (q, k, v))[0]
    jax = optional("jax")
    if jax:
        jnp = jax.numpy
        impls["jax_jit"] = jax_grad_impl(
            jax, lambda q, k, v: jnp.sum((q @ jnp.swapaxes(k, -1, -2)) @ v), (q, k, v),
            (0, 1, 2))
    ref = numpy_hand(*(a.astype(np.float64) for a in (q, k, v)))
    return impls, loss_grad_checks(impls, ref)


def attention_flops(shape=(32, 4, 64, 32)) -> float:
    """Multiply-adds x 2 of :func:`attention_impls`' six products."""
    b, h, t, d = shape
    return 6 * 2.0 * b * h * t * t * d


# ------------------------------------------------------------------- training steps (W3)
def mlp_impls(jg, batch: int, with_torch_compile: bool):
    tw = workloads("training_workloads")
    makers = {
        "numpy": lambda: tw.numpy_mlp_step(batch),
        "jitgrad": lambda: tw.jitgrad_mlp_step(jg, batch, compiled=False)[0],
        "jitgrad_compiled": lambda: tw.jitgrad_mlp_step(jg, batch, compiled=True)[0],
        "jitgrad_module": lambda: tw.jitgrad_mlp_module_step(jg, batch),
    }
    torch = optional("torch")
    if torch:
        makers["torch_eager"] = lambda: tw.torch_mlp_step(torch, batch)
        if with_torch_compile:
            makers["torch_compile"] = lambda: tw.torch_mlp_step(torch, batch, compiled=True)
    jax = optional("jax")
    if jax:
        makers["jax_jit"] = lambda: tw.jax_mlp_step(jax, batch)
    return _training_impls(makers, "numpy")


def optim_impls(jg, name: str, options: dict):
    """``opt.step()`` alone over the MLP's parameters with fixed gradients: jitgrad eager
    and ``fused=True``, PyTorch's default (the for-loop on CPU) and ``fused=True``. Check:
    the first parameter after three steps against jitgrad eager's."""
    tw = workloads("training_workloads")
    makers = {"jitgrad": lambda: tw.optimizer_step(jg, name, **options),
              "jitgrad_fused": lambda: tw.optimizer_step(jg, name, fused=True, **options)}
    torch = optional("torch")
    if torch:
        makers["torch_eager"] = lambda: tw.optimizer_step(torch, name, **options)
        makers["torch_fused"] = lambda: tw.optimizer_step(torch, name, fused=True, **options)
    impls = {k: make() for k, make in makers.items()}

    def third(make):
        step = make()
        for _ in range(2):
            step()
        return to_np(step()).astype(np.float64)

    ref = third(makers["jitgrad"])
    checks = {k: (lambda m=m: rel_err(third(m), ref)) for k, m in makers.items()}
    return impls, checks


def cnn_impls(jg, batch: int):
    tw = workloads("training_workloads")
    makers = {
        "jitgrad": lambda: tw.jitgrad_cnn_step(jg, batch, compiled=False)[0],
        "jitgrad_compiled": lambda: tw.jitgrad_cnn_step(jg, batch, compiled=True)[0],
    }
    torch = optional("torch")
    if torch:
        state = tw.jitgrad_cnn_initial_state(jg)
        makers["torch_eager"] = lambda: tw.torch_cnn_step(torch, batch, state)
    return _training_impls(makers, "jitgrad")


def per_sample_impls(jg, batch: int):
    """Per-sample gradients of the MLP (``vmap(grad(loss))``): jitgrad's batched vmap, the
    same under ``jitgrad.compile``, its per-element loop and a Python loop of ``grad`` calls;
    torch.func's vmap and loop. Checked on the gradient of the first layer's weight, against
    jitgrad's loop."""
    tw = workloads("training_workloads")
    impls = {"jitgrad_vmap": tw.per_sample_grads(jg, batch, "vmap"),
             "jitgrad_vmap_compiled": tw.per_sample_grads(jg, batch, "compiled"),
             "jitgrad_vmap_loop": tw.per_sample_grads(jg, batch, "loop"),
             "jitgrad_for_grad": tw.per_sample_grads(jg, batch, "for")}
    torch = optional("torch")
    if torch:
        impls["torch_func_vmap"] = tw.per_sample_grads(torch, batch, "vmap")
        impls["torch_for_grad"] = tw.per_sample_grads(torch, batch, "for")
    ref = to_np(impls["jitgrad_vmap_loop"]()[0]).astype(np.float64)
    checks = {k: (lambda f=f: rel_err(to_np(f()[0]).astype(np.float64), ref))
              for k, f in impls.items()}
    return impls, checks


def jacobian_impls(jg, n: int):
    """``jacrev(lambda a: tanh(W @ a) * a.sum())`` at ``n`` inputs and outputs, float64:
    jitgrad's (vmap over the vector-Jacobian products, batched), the same under
    ``jitgrad.compile``, through vmap's per-row loop, and torch.func.jacrev. Checked
    against the loop."""
    rng = np.random.default_rng(0)
    w_np, x_np = rng.standard_normal((n, n)), rng.standard_normal(n)

    def maker(lib, compiled=False):
        w, x = lib.from_numpy(w_np.copy()), lib.from_numpy(x_np.copy())
        jac = lib.func.jacrev(lambda a: lib.tanh(w @ a) * a.sum())
        if compiled:
            jac = lib.compile(jac)
        return lambda: jac(x)

    def looped(fn):
        def run():
            os.environ["JITGRAD_VMAP"] = "loop"
            try:
                return fn()
            finally:
                del os.environ["JITGRAD_VMAP"]
        return run

    impls = {"jitgrad_jacrev": maker(jg), "jitgrad_jacrev_compiled": maker(jg, True),
             "jitgrad_jacrev_loop": looped(maker(jg))}
    torch = optional("torch")
    if torch:
        impls["torch_jacrev"] = maker(torch)
    ref = to_np(impls["jitgrad_jacrev_loop"]())
    checks = {k: (lambda f=f: rel_err(to_np(f()), ref)) for k, f in impls.items()}
    return impls, checks


def gpt_impls(jg, config: str, with_torch_compile: bool):
    """The GPT example's training step: jitgrad eager and compiled, PyTorch eager and
    torch.compile running the same file (``train_gpt.pytorch_twin()``; PyTorch takes its
    ``scaled_dot_product_attention`` path, as nanoGPT does) from the same initial weights."""
    tw = workloads("training_workloads")
    state = tw.gpt_initial_state(config)
    makers = {
        "jitgrad": lambda: tw.gpt_step(jg, config, "eager", state),
        "jitgrad_compiled": lambda: tw.gpt_step(jg, config, "compiled", state),
    }
    torch = optional("torch")
    if torch:
        makers["torch_eager"] = lambda: tw.gpt_step(torch, config, "eager", state)
        if with_torch_compile:
            makers["torch_compile"] = lambda: tw.gpt_step(torch, config, "compiled", state)
    return _training_impls(makers, "jitgrad")


def print_side_by_side(rows: list, workload: str) -> None:
    """One line per config of ``workload``: each jitgrad row's median over each PyTorch
    row's (below 1: jitgrad is faster)."""
    groups: dict = {}
    for r in rows:
        if r["workload"] == workload:
            groups.setdefault(r["config"], {})[r["impl"]] = r["median_s"]
    for config, t in groups.items():
        peers = [p for p in ("torch_eager", "torch_compile") if p in t]
        ours = [j for j in ("jitgrad", "jitgrad_compiled") if j in t]
        cells = [f"{j} / {p} = {t[j] / t[p]:.2f}" for j in ours for p in peers]
        if peers:
            print(f"{workload} {config}: " + ", ".join(cells))


def _training_impls(makers: dict, reference: str):
    """Each implementation's step for timing, and a check: the loss of the third step of a
    fresh instance (past tracing: a compiled plan runs) against ``reference``'s."""
    impls = {}
    for name, make in makers.items():
        try:
            impls[name] = make()
        except Exception as exc:  # e.g. torch.compile without a working compiler
            print(f"skipped {name}: {type(exc).__name__}: {exc}", flush=True)

    def third_loss(make):
        step = make()
        for _ in range(2):
            step()
        return float(to_np(step()))

    ref = third_loss(makers[reference])
    checks = {name: (lambda m=makers[name]: abs(third_loss(m) - ref) / abs(ref))
              for name in impls}
    return impls, checks


# ------------------------------------------------------------------------------ cold start
_COLD_TEMPLATE = """
import json, time
t0 = time.perf_counter()
{imp}
t1 = time.perf_counter()
{op}
t2 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "first_op_s": t2 - t0}}))
"""
COLD = {
    "jitgrad": ("import jitgrad",
                "a = jitgrad.linspace(-1, 1, 16, requires_grad=True)\n"
                "b = jitgrad.linspace(0.5, 2, 16)\n"
                "(a * b + a).sum().backward()\n"
                "assert a.grad.shape == (16,)"),
    "numpy": ("import numpy as np",
              "a = np.linspace(-1, 1, 16, dtype=np.float32)\n"
              "b = np.linspace(0.5, 2, 16, dtype=np.float32)\n"
              "c = a * b + a"),
    "torch": ("import torch",
              "a = torch.linspace(-1, 1, 16, requires_grad=True)\n"
              "b = torch.linspace(0.5, 2, 16)\n"
              "(a * b + a).sum().backward()"),
    "jax": ("import jax, jax.numpy as jnp",
            "a = jnp.linspace(-1, 1, 16)\n"
            "b = jnp.linspace(0.5, 2, 16)\n"
            "jax.grad(lambda a: jnp.sum(a * b + a))(a).block_until_ready()"),
}


# ------------------------------------------------------------------------------ compile
_COMPILE_PRELUDE = """
import json, os, sys, time
t0 = time.perf_counter()
"""
_COMPILE_DATA = """
rng = np.random.default_rng(0)
xn, wn, bn = (rng.standard_normal(1_000_000).astype(np.float32) for _ in range(3))
"""
# peer -> (imports, body, cache directory variable); compile_latency fills in {here} (this
# folder) and {chain_step} (the source of chain_workloads.compiled_chain_step, the step the
# in-process benchmarks compile)
COMPILE = {
    "jitgrad": ("import numpy as np\nimport jitgrad as jg\n", _COMPILE_DATA + """
x, w, b = (jg.tensor(a, requires_grad=True) for a in (xn, wn, bn))
{chain_step}
step = compiled_chain_step(jg)
step(x, w, b)          # traces (returns results computed while tracing)
loss = step(x, w, b)   # compiles (or loads) the kernels and runs them
float(loss), x.grad.shape
""", "JITGRAD_CACHE_DIR"),
    "numba_hand": ("import numpy as np\nsys.path.insert(0, {here!r})\n"
                   "from compare import chain_fused_f32\n", _COMPILE_DATA + """
g = [np.empty_like(xn) for _ in range(3)]
loss = chain_fused_f32(xn, wn, bn, *g)
""", "NUMBA_CACHE_DIR"),
    "torch_compile": ("import numpy as np\nimport torch\n", _COMPILE_DATA + """
x, w, b = (torch.from_numpy(a).requires_grad_() for a in (xn, wn, bn))
@torch.compile
def step(x, w, b):
    loss = (torch.tanh(x * w + b) ** 2 * torch.sigmoid(x)).sum()
    return loss, *torch.autograd.grad(loss, (x, w, b))
out = step(x, w, b)
""", "TORCHINDUCTOR_CACHE_DIR"),
    "jax_jit": ("import numpy as np\nimport jax, jax.numpy as jnp\n", _COMPILE_DATA + """
vg = jax.jit(jax.value_and_grad(
    lambda x, w, b: jnp.sum(jnp.tanh(x * w + b) ** 2 * jax.nn.sigmoid(x)), argnums=(0, 1, 2)))
loss, grads = vg(*(jnp.asarray(a) for a in (xn, wn, bn)))
jax.block_until_ready(grads)
""", None),
}


def compile_latency(rounds: int, peers: list) -> list:
    """First-result latency of the W2 step in fresh processes, cold (empty cache directory)
    and warm (filled by the previous run), interleaved."""
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    chain_step = workloads("chain_workloads").compiled_chain_step_source()
    tmp = tempfile.mkdtemp(prefix="jitgrad-compare-")
    samples: dict = {}

    def run(peer, cache_dir):
        imp, body, env_var = COMPILE[peer]
        code = (_COMPILE_PRELUDE + imp.format(here=here) + "t1 = time.perf_counter()\n"
                + body.format(chain_step=chain_step)
                + "print(json.dumps({'import_s': t1 - t0, 'first_s': time.perf_counter() - t0}))")
        env = dict(os.environ)
        if env_var:
            env[env_var] = cache_dir
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=600, env=env)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        return json.loads(proc.stdout.strip().splitlines()[-1])

    try:
        todo = []
        for p in peers:
            try:
                run(p, os.path.join(tmp, f"{p}-probe"))  # page cache, .pyc files
                todo.append(p)
            except Exception as exc:
                print(f"skipped compile latency {p}: {exc}", flush=True)
        for k in range(rounds):
            for p in todo:
                cold = os.path.join(tmp, f"{p}-{k}")
                for label in ("cold", "warm") if COMPILE[p][2] else ("cold",):
                    r = run(p, cold)  # the cold run fills the directory the warm run reads
                    samples.setdefault((p, label), []).append(r["first_s"])
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return [{"workload": "compile", "config": f"W2 1e6 f32, {label} cache", "impl": p,
             "median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "number": 1,
             "repeats": len(v)} for (p, label), v in sorted(samples.items(),
                                                          key=lambda kv: kv[0][1])]


def cold_start(rounds: int, peers: list) -> list:
    """Fresh-process import and import + first op + backward, interleaved; one warm run first."""
    codes = {p: _COLD_TEMPLATE.format(imp=COLD[p][0], op=COLD[p][1]) for p in peers}
    samples = {p: {"import_s": [], "first_op_s": []} for p in peers}

    def run(code):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        return json.loads(proc.stdout.strip().splitlines()[-1])

    for p in list(peers):
        try:
            run(codes[p])  # warm: Numba / XLA disk caches, page cache
        except Exception as exc:
            print(f"skipped cold start {p}: {exc}", flush=True)
            codes.pop(p)
    for _ in range(rounds):
        for p in codes:
            r = run(codes[p])
            for k in r:
                samples[p][k].append(r[k])
    rows = []
    for k, name in (("import_s", "import"), ("first_op_s", "import+first_op+backward")):
        for p in codes:
            v = samples[p][k]
            rows.append({"workload": "cold", "config": name, "impl": p,
                         "median_s": statistics.median(v), "min_s": min(v), "max_s": max(v),
                         "number": 1, "repeats": len(v)})
    return rows


# ------------------------------------------------------------------------------ bandwidth
@njit(parallel=True, cache=True)
def _triad(a, b, c, s):
    for i in prange(a.shape[0]):
        a[i] = b[i] + s * c[i]


def triad_bandwidth(n: int, repeats: int) -> dict:
    """STREAM triad a = b + s*c, float64, numba parallel; GB/s counting 24 bytes/element."""
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    _triad(a, b, c, 3.0)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _triad(a, b, c, 3.0)
        times.append(time.perf_counter() - t0)
    nbytes = 24 * n
    return {"n": n, "threads": numba.get_num_threads(), "gbs_best": nbytes / min(times) / 1e9,
            "gbs_median": nbytes / statistics.median(times) / 1e9}


def gemm_peak(n: int, repeats: int) -> dict:
    """float32 n^3 GEMM through NumPy's BLAS: the machine's matmul rate (best, median)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    flops = 2.0 * n ** 3
    return {"n": n, "gflops_best": flops / min(times) / 1e9,
            "gflops_median": flops / statistics.median(times) / 1e9}


def matmul_flops(shape=(128, 784, 256, 10)) -> float:
    """FLOPs of the matmul workload: 2 forward GEMMs, 3 backward (x needs no gradient)."""
    b, d_in, d_hid, d_out = shape
    return 2.0 * (b * d_in * d_hid + b * d_hid * d_out       # x@w1, h@w2
                  + d_hid * b * d_out + b * d_out * d_hid    # dW2, dh
                  + d_in * b * d_hid)                        # dW1


# ------------------------------------------------------------------------------ report
def add_ratios(rows: list) -> None:
    """x_best (to the fastest non-jitgrad row) and x_numpy, per (workload, config)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["workload"], r["config"]), []).append(r)
    for grp in groups.values():
        peers = [r for r in grp if not r["impl"].startswith("jitgrad")]
        best = min(peers, key=lambda r: r["median_s"]) if peers else None
        np_row = next((r for r in grp if r["impl"] == "numpy"), None)
        for r in grp:
            r["best_peer"] = best["impl"] if best else None
            r["x_best"] = r["median_s"] / best["median_s"] if best else None
            r["x_numpy"] = r["median_s"] / np_row["median_s"] if np_row else None


def fmt_time(s: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if s >= scale or unit == "ns":
            return f"{s / scale:.3g} {unit}"
    return str(s)


def print_table(rows: list, triad: dict, gemm: dict) -> None:
    cols = ["workload", "config", "impl", "median", "min", "x best", "x numpy", "GB/s",
            "% triad", "GFLOP/s", "% gemm", "err"]
    lines = []
    for r in rows:
        lines.append([
            r["workload"], r["config"], r["impl"], fmt_time(r["median_s"]), fmt_time(r["min_s"]),
            f"{r['x_best']:.2f}" if r.get("x_best") else "",
            f"{r['x_numpy']:.2f}" if r.get("x_numpy") else "",
            f"{r['gbs']:.1f}" if "gbs" in r else "",
            f"{100 * r['gbs'] / triad['gbs_best']:.0f}%" if "gbs" in r else "",
            f"{r['gflops']:.1f}" if "gflops" in r else "",
            f"{100 * r['gflops'] / gemm['gflops_best']:.0f}%" if "gflops" in r else "",
            f"{r['err']:.1e}" if r.get("err") is not None else "",
        ])
    widths = [max(len(c), *(len(x[i]) for x in lines)) for i, c in enumerate(cols)]
    sep = "  "
    print(sep.join(c.ljust(w) for c, w in zip(cols, widths)))
    print(sep.join("-" * w for w in widths))
    prev = None
    for r, x in zip(rows, lines):
        key = (r["workload"], r["config"])
        if prev is not None and key != prev:
            print()
        prev = key
        print(sep.join(v.ljust(w) for v, w in zip(x, widths)))
    print(f"\nper_op times are per op (line / 2); x best = median / fastest non-jitgrad median;"
          f" triad = {triad['gbs_best']:.1f} GB/s best, {triad['gbs_median']:.1f} median "
          f"(float64, n={triad['n']:.0e}, {triad['threads']} threads); gemm = "
          f"{gemm['gflops_best']:.0f} GFLOP/s best float32 {gemm['n']}^3 through NumPy's BLAS.")


def save_png(rows: list, path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        print(f"skipped --png: matplotlib not importable ({exc})")
        return False
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["workload"], r["config"]), []).append(r)
    ncol = 2
    nrow = (len(groups) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(12, 2.2 + 1.9 * nrow), squeeze=False)
    for ax, ((wl, cfg), grp) in zip(axes.flat, groups.items()):
        names = [r["impl"] for r in grp]
        top = max(r["median_s"] for r in grp)
        unit, scale = next((u, k) for u, k in (("s", 1), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
                           if top >= k or u == "ns")
        vals = [r["median_s"] / scale for r in grp]
        colors = ["tab:red" if n.startswith("jitgrad") else "tab:gray" for n in names]
        ax.barh(names, vals, color=colors)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_title(f"{wl}  {cfg}", fontsize=10)
        ax.set_xlabel(f"median {unit}{' per op' if wl == 'per_op' else ''} (log)", fontsize=8)
        ax.tick_params(labelsize=8)
        for y, (v, r) in enumerate(zip(vals, grp)):
            label = f"{fmt_time(v * scale)}"
            if r.get("x_best"):
                label += f"  x{r['x_best']:.2f}"
            ax.text(v, y, " " + label, va="center", fontsize=7)
        ax.margins(x=0.35)
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    fig.suptitle("jitgrad eager (red) vs peers: median time, ratio to fastest peer", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def versions() -> dict:
    out = {"python": platform.python_version(), "numpy": np.__version__,
           "numba": numba.__version__, "cpus": os.cpu_count(), "machine": platform.machine()}
    for name in ("jitgrad", "torch", "jax"):
        mod = sys.modules.get(name) if name != "jitgrad" else PEER_MODULES.get("jitgrad")
        if mod is not None:
            out[name] = getattr(mod, "__version__", "?")
    try:
        out["numba_threading_layer"] = numba.threading_layer()
    except ValueError:  # no parallel kernel ran
        pass
    out["numba_threads"] = numba.get_num_threads()
    out["openblas_kernels"] = blas_kernels()
    if sys.modules.get("torch") is not None:
        out["torch_threads"] = sys.modules["torch"].get_num_threads()
    out["env"] = {k: v for k, v in os.environ.items()
                  if k.startswith(("OMP_", "NUMBA_", "OPENBLAS", "MKL_", "JITGRAD_", "GOMP_"))}
    try:
        with open("/proc/cpuinfo") as f:
            out["cpu_model"] = next(ln.split(":", 1)[1].strip() for ln in f
                                    if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return out


# ------------------------------------------------------------------------------ main
WORKLOADS = ("per_op", "seed", "matmul", "attention", "chain", "mlp", "optim", "cnn",
             "per_sample", "jacobian", "gpt", "cold", "compile")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="few repeats, small sizes only (< 60 s; for CI)")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON")
    ap.add_argument("--png", metavar="PATH", help="write a bar chart (needs matplotlib)")
    ap.add_argument("--only", nargs="+", choices=WORKLOADS, help="run only these workloads")
    ap.add_argument("--no-torch", action="store_true", help="do not use PyTorch")
    ap.add_argument("--no-jax", action="store_true", help="do not use JAX")
    ap.add_argument("--threads", type=int, metavar="N",
                    help="limit every library to N threads (re-executes with OMP/OpenBLAS/MKL/"
                         "Numba/XLA thread variables set; 1 is steadier on a busy machine)")
    args = ap.parse_args(argv)
    if args.threads and os.environ.get("_COMPARE_THREADS") != str(args.threads):
        n = str(args.threads)
        env = dict(os.environ, _COMPARE_THREADS=n, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n,
                   MKL_NUM_THREADS=n, NUMBA_NUM_THREADS=n)
        if args.threads == 1:
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
                                " intra_op_parallelism_threads=1").strip()
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__),
                                   *(sys.argv[1:] if argv is None else argv)], env)
    t_start = time.perf_counter()
    for name, off in (("torch", args.no_torch), ("jax", args.no_jax)):
        if off:
            PEER_MODULES[name] = None
            print(f"skipped {name}: --no-{name}")

    import jitgrad as jg
    PEER_MODULES["jitgrad"] = jg
    q = args.quick
    rounds = 3 if q else 9
    target_s = 0.02 if q else 0.1
    warmup = 3 if q else 10
    chain_configs = ([(100_000, "float32"), (100_000, "float64")] if q else
                     [(100_000, "float32"), (1_000_000, "float32"), (10_000_000, "float32"),
                      (1_000_000, "float64")])
    todo = args.only or WORKLOADS
    rows: list = []
    busy = wait_quiet(0 if q else 10)
    load0 = os.getloadavg()[0]

    def run(workload, config, impls, checks, extra=None):
        res = bench_interleaved(impls, warmup=warmup, rounds=rounds, target_s=target_s)
        for name, r in res.items():
            row = {"workload": workload, "config": config, "impl": name, **r}
            try:
                row["err"] = checks[name]()
            except Exception as exc:
                row["err"] = None
                row["check_error"] = f"{type(exc).__name__}: {exc}"
            if extra:
                extra(row)
            rows.append(row)
        print(f"  {workload} {config}: done ({time.perf_counter() - t_start:.0f} s)", flush=True)

    triad = triad_bandwidth(4_000_000 if q else 20_000_000, 5 if q else 15)
    print(f"  triad: {triad['gbs_best']:.1f} GB/s best ({time.perf_counter() - t_start:.0f} s)",
          flush=True)
    gemm = gemm_peak(512 if q else 1024, 5 if q else 15)
    print(f"  gemm: {gemm['gflops_best']:.0f} GFLOP/s best", flush=True)

    if "per_op" in todo:
        impls, checks = per_op_impls(jg)

        def per_op(row):  # per call = LINES lines of 2 ops
            for k in ("median_s", "min_s", "max_s"):
                row[k] /= LINES * 2
            row["unit"] = "per op"
        run("per_op", "16 f32, c = a*b + a", impls, checks, per_op)
    if "seed" in todo:
        impls, checks = seed_impls(jg)
        run("seed", "scalar fwd+bwd+read", impls, checks)
    if "matmul" in todo:
        impls, checks = matmul_impls(jg)

        def gflops(row):
            row["gflops"] = matmul_flops() / row["median_s"] / 1e9
        run("matmul", "128x784x256x10 f32", impls, checks, gflops)
    if "attention" in todo:
        shape = (4, 4, 32, 16) if q else (32, 4, 64, 32)
        impls, checks = attention_impls(jg, shape)

        def attn_gflops(row, shape=shape):
            row["gflops"] = attention_flops(shape) / row["median_s"] / 1e9
        run("attention", "bmm fwd+bwd " + "x".join(map(str, shape)) + " f32", impls, checks,
            attn_gflops)
        del impls, checks
    if "chain" in todo:
        for n, dtype in chain_configs:  # float64 last: it switches jax to x64
            impls, checks, nbytes = chain_impls(jg, n, dtype)

            def gbs(row, nbytes=nbytes):
                row["gbs"] = nbytes / row["median_s"] / 1e9
                row["bytes"] = nbytes
            run("chain", f"n={n:.0e} {dtype}".replace("e+0", "e"), impls, checks, gbs)
            del impls, checks
    if "mlp" in todo:
        tw = workloads("training_workloads")
        for batch in ((128,) if q else (128, 1024)):
            impls, checks = mlp_impls(jg, batch, with_torch_compile=not q)

            def mlp_gflops(row, batch=batch):
                row["gflops"] = tw.mlp_flops(batch) / row["median_s"] / 1e9
            run("mlp_step", f"784-256-256-10 b{batch} f32 SGD", impls, checks, mlp_gflops)
            del impls, checks
    if "optim" in todo:
        for label, name, options in (("AdamW", "AdamW", {"lr": 1e-3}),
                                     ("SGD momentum", "SGD", {"lr": 0.01, "momentum": 0.9})):
            impls, checks = optim_impls(jg, name, options)
            run("optim_step", f"MLP params 535k f32 {label}", impls, checks)
            del impls, checks
    if "cnn" in todo:
        impls, checks = cnn_impls(jg, 32 if q else 128)
        run("cnn_step", f"digits CNN b{32 if q else 128} f32 SGD-m", impls, checks)
        del impls, checks
    if "per_sample" in todo:
        for batch in ((16,) if q else (64, 256)):
            impls, checks = per_sample_impls(jg, batch)
            run("per_sample", f"MLP 784-256-256-10 b{batch} f32 vmap(grad)", impls, checks)
            del impls, checks
    if "jacobian" in todo:
        for n in ((16,) if q else (64, 256)):
            impls, checks = jacobian_impls(jg, n)
            run("jacobian", f"jacrev tanh(W@x)*sum(x) n={n} f64", impls, checks)
            del impls, checks
    if "gpt" in todo:
        for config in (("nano",) if q else ("tiny", "small")):
            impls, checks = gpt_impls(jg, config, with_torch_compile=not q)
            batch, block, n_layer, _, n_embd = workloads("training_workloads").GPT_CONFIGS[config]
            run("gpt_step", f"{config} {n_layer}x{n_embd} T{block} b{batch} f32 AdamW", impls,
                checks)
            del impls, checks
    if "cold" in todo:
        peers = ["jitgrad", "numpy"] + [p for p in ("torch", "jax")
                                         if not q and PEER_MODULES.get(p) is not None]
        rows.extend(cold_start(2 if q else 5, peers))
        print(f"  cold: done ({time.perf_counter() - t_start:.0f} s)", flush=True)
    if "compile" in todo:
        peers = ["jitgrad", "numba_hand"]
        if not q:
            peers += [p for p, m in (("jax_jit", "jax"), ("torch_compile", "torch"))
                      if PEER_MODULES.get(m) is not None or optional(m) is not None]
        rows.extend(compile_latency(1 if q else 3, peers))
        print(f"  compile: done ({time.perf_counter() - t_start:.0f} s)", flush=True)

    add_ratios(rows)
    print()
    print_table(rows, triad, gemm)
    print()
    for workload in ("mlp_step", "cnn_step", "per_sample", "jacobian", "gpt_step"):
        print_side_by_side(rows, workload)
    for r in rows:
        if r.get("check_error"):
            print(f"check failed: {r['workload']} {r['config']} {r['impl']}: {r['check_error']}")
    elapsed = time.perf_counter() - t_start
    info = versions()
    print(f"\n{'quick' if q else 'full'} run, {elapsed:.0f} s; cpu busy before start: {busy:.2f};"
          f" loadavg {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end; numba "
          f"{info.get('numba_threading_layer', '?')} layer, {info['numba_threads']} threads; "
          f"OpenBLAS on jitgrad's pool: {blas_on_pool()}, kernels {info['openblas_kernels']}; "
          f"env {info['env'] or '{}'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"quick": q, "elapsed_s": elapsed, "cpu_busy_before": busy,
                       "loadavg_1m_start": load0, "loadavg_1m_end": os.getloadavg()[0],
                       "versions": info,
                       "triad": triad, "gemm": gemm, "results": rows}, f, indent=1)
    if args.png:
        save_png(rows, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
