"""Eager-mode workloads, as measured for the peers in ``shared/peers-bench`` (W1, W2, W4).

* :class:`PerOpOverhead`   W4: ``c = a * b + a`` on 16 float32 elements; one call = one line =
  2 ops, so per-op overhead = time / 2 (``compare.py`` prints it per op).
* :class:`OperatorPath`    one ``a * b`` through each layer of the eager path (the specialised
  operator, the general dispatch, the kernel's entry point vs its Numba dispatcher).
* :class:`BroadcastGradient` ``g * w`` with ``g`` a broadcast number (a sum's gradient), 1e6.
* :class:`SeedGraph`       W1: ``z = log(x**3) + sqrt(x**2)`` forward + backward + read grad.
* :class:`ElementwiseChain` W2: ``sum(tanh(x*w + b)**2 * sigmoid(x))`` forward + backward.
* :class:`MatmulChain`     ``((x @ w1).tanh() @ w2).sum()`` forward + backward, 128x784x256x10.
* :class:`ImportTime`, :class:`FirstOp`: ``import jitgrad``; import + first op + backward,
  each in a fresh process.
* :class:`Jacobians`       ``jacrev`` / ``hessian`` through batched ``vmap`` vs its loop.

Side-by-side figures against NumPy, Numba, PyTorch and JAX: ``asv_benchmarks/compare.py``.
``quick_params`` (not an asv attribute) is what ``tests/test_benchmarks_quick.py`` runs.
"""

import os
import resource
import subprocess
import sys

import numpy as np

import jitgrad

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chain_workloads import chain_reference, matmul_arrays  # noqa: E402


def _leaf(arr, requires_grad=True):
    return jitgrad.from_numpy(arr).requires_grad_(requires_grad)


def _rel_err(a, ref):
    a = np.asarray(a, dtype=np.float64)
    return float(np.max(np.abs(a - ref)) / (np.max(np.abs(ref)) + 1e-30))


# --------------------------------------------------------------------------- W4
class PerOpOverhead:
    """``c = a * b + a`` (2 ops), 16 float32 elements, ``a`` requires grad (as W4).

    ``grad``: graph recording on; ``no_grad``: grad mode off for the whole timing
    (``set_grad_enabled(False)`` in setup, so the context-manager cost is not timed).
    """

    params = [["grad", "no_grad"]]
    param_names = ["mode"]
    quick_params = params

    def setup(self, mode):
        self.a = _leaf(np.linspace(-1, 1, 16, dtype=np.float32))
        self.b = _leaf(np.linspace(0.5, 2, 16, dtype=np.float32), requires_grad=False)
        self._prev = jitgrad.is_grad_enabled()
        jitgrad.set_grad_enabled(mode == "grad")
        c = self.a * self.b + self.a            # warm: kernels loaded before timing
        assert c.requires_grad == (mode == "grad")

    def teardown(self, mode):
        jitgrad.set_grad_enabled(self._prev)

    def time_line(self, mode):
        a, b = self.a, self.b
        c = a * b + a  # noqa: F841 - the line under test

    def track_nodes_per_line(self, mode):
        """Backward nodes one line records (2 with grad, 0 under no_grad)."""
        c = self.a * self.b + self.a
        n, fn = 0, c.grad_fn
        while fn is not None:
            n += 1
            nxt = [e[0] for e in fn.next_functions if e[0] is not None
                   and type(e[0]).__name__ != "AccumulateGrad"]
            fn = nxt[0] if nxt else None
        return n

    track_nodes_per_line.unit = "nodes"


class OperatorPath:
    """One ``a * b`` (16 float32 elements, ``a`` requires grad) through each layer of the
    eager path: ``operator`` (``Tensor.__mul__``, the specialised function of
    ``ops/eager_fast.py``), ``general`` (``dispatch.binary``: the generic hot path with the
    Numba dispatcher), ``number`` (``a * 1.5`` through the operator), and the kernel alone:
    ``entry`` (its compiled entry point, as the operator calls it) vs ``dispatcher``."""

    params = [["operator", "general", "number", "entry", "dispatcher"]]
    param_names = ["path"]
    quick_params = params

    def setup(self, path):
        from jitgrad.ops import eager_kernels
        from jitgrad.ops.arithmetic import MUL
        from jitgrad.ops.dispatch import binary

        a = _leaf(np.linspace(-1, 1, 16, dtype=np.float32))
        b = _leaf(np.linspace(0.5, 2, 16, dtype=np.float32), requires_grad=False)
        ad, bd = a.detach().numpy(), b.numpy()
        out = np.empty_like(ad)
        f32 = np.dtype(np.float32)
        entry = eager_kernels.flat_entry(MUL, f32)
        dispatcher = eager_kernels.fast_kernels(MUL, f32)[0]
        self.run = {
            "operator": lambda: a * b,
            "general": lambda: binary(MUL, a, b),
            "number": lambda: a * 1.5,
            "entry": lambda: entry(0, 1, 16, ad, bd, out),
            "dispatcher": lambda: dispatcher(0, 1, 16, ad, bd, out),
        }[path]
        self.run()

    def time_mul(self, path):
        self.run()


class BroadcastGradient:
    """``g * w`` at 1e6 float32 where ``g`` is one number broadcast (every stride 0: the
    gradient of a full sum, as W2's backward multiplies it): ``broadcast`` passes it to the
    kernel by value, ``full`` is the same values as a contiguous array (same bits)."""

    params = [["broadcast", "full"], [1_000_000]]
    param_names = ["g", "n"]
    quick_params = [["broadcast", "full"], [10_000]]

    def setup(self, g, n):
        self.w = _leaf(np.random.default_rng(0).standard_normal(n, dtype=np.float32), False)
        self.g = jitgrad.tensor(0.25).expand(n) if g == "broadcast" else \
            jitgrad.full((n,), 0.25)
        self.time_mul(g, n)

    def time_mul(self, g, n):
        return self.g * self.w


# --------------------------------------------------------------------------- W1
class SeedGraph:
    """``z = log(x**3) + sqrt(x**2)``; ``z.backward()``; ``x.grad.item()`` (== 1.6).

    ``new``: a fresh leaf every iteration; ``reuse``: one leaf, ``x.grad.zero_()`` first.
    """

    params = [["new", "reuse"]]
    param_names = ["leaf"]
    quick_params = params

    def setup(self, leaf):
        self.x = jitgrad.tensor(5.0, requires_grad=True)
        self.x.grad = jitgrad.zeros_like(self.x)
        g = self.time_fwd_bwd(leaf)
        assert abs(g - 1.6) < 1e-5, g

    def time_fwd_bwd(self, leaf):
        if leaf == "new":
            x = jitgrad.tensor(5.0, requires_grad=True)
        else:
            x = self.x
            x.grad.zero_()
        z = jitgrad.log(x ** 3) + jitgrad.sqrt(x ** 2)
        z.backward()
        return x.grad.item()


# --------------------------------------------------------------------------- W2
class ElementwiseChain:
    """``sum(tanh(x*w + b)**2 * sigmoid(x))`` forward + backward; x, w, b require grad.

    Configurations as W2: 1e5, 1e6, 1e7 float32 and 1e6 float64 (the other float64 sizes
    are skipped). Effective bandwidth = 6 arrays * n * itemsize / time.
    """

    params = [[100_000, 1_000_000, 10_000_000], ["float32", "float64"]]
    param_names = ["n", "dtype"]
    quick_params = [[1_000], ["float32", "float64"]]
    timeout = 300
    repeat = (3, 10, 30.0)

    def setup(self, n, dtype):
        if dtype == "float64" and n != 1_000_000 and n in self.params[0]:
            raise NotImplementedError("float64 only at n=1e6")
        rng = np.random.default_rng(0)
        self.arrays = [rng.standard_normal(n, dtype=np.dtype(dtype).type) for _ in range(3)]
        self.x, self.w, self.b = (_leaf(a.copy()) for a in self.arrays)
        self.step()

    def step(self):
        x, w, b = self.x, self.w, self.b
        x.grad = w.grad = b.grad = None
        loss = (jitgrad.tanh(x * w + b) ** 2 * jitgrad.sigmoid(x)).sum()
        loss.backward()
        return loss

    def time_fwd_bwd(self, n, dtype):
        self.step()

    def peakmem_fwd_bwd(self, n, dtype):
        self.step()

    def track_grad_max_rel_err(self, n, dtype):
        """max |g - ref| / max |ref| over the three gradients, against float64 NumPy."""
        self.step()
        _, ref = chain_reference(*self.arrays)
        return max(_rel_err(t.grad.numpy(), r) for t, r in zip((self.x, self.w, self.b), ref))

    track_grad_max_rel_err.unit = "relative error"

    def track_loss_rel_err(self, n, dtype):
        loss = float(self.step().item())
        ref, _ = chain_reference(*self.arrays)
        return abs(loss - ref) / abs(ref)

    track_loss_rel_err.unit = "relative error"

    def track_minor_faults_per_step(self, n, dtype):
        """Page faults per step: fresh large buffers fault in every page (RESULTS.md obs. 2)."""
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(3):
            self.step()
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 3

    track_minor_faults_per_step.unit = "faults"


# --------------------------------------------------------------------------- matmul
class MatmulChain:
    """``((x @ w1).tanh() @ w2).sum()`` forward + backward; w1, w2 require grad, x does not.

    Shapes (batch, in, hidden, out) = 128x784x256x10 float32 (W3's first and last layers).
    """

    params = [[(128, 784, 256, 10)]]
    param_names = ["shape"]
    quick_params = [[(8, 16, 8, 4)]]

    def setup(self, shape):
        x, w1, w2 = matmul_arrays(shape)
        self.x = _leaf(x, requires_grad=False)
        self.w1, self.w2 = _leaf(w1), _leaf(w2)
        self.step()

    def step(self):
        self.w1.grad = self.w2.grad = None
        loss = ((self.x @ self.w1).tanh() @ self.w2).sum()
        loss.backward()
        return loss

    def time_fwd_bwd(self, shape):
        self.step()

    def peakmem_fwd_bwd(self, shape):
        self.step()


class AttentionProducts:
    """Attention's batched products forward + backward, ``((q @ k.T) @ v).sum()`` over
    (batch, heads, tokens, head size) float32, eager: the batch split across the pool (one
    single-threaded GEMM per matrix, ``kernels/blas_batch.py``) vs NumPy's loop over the
    matrices on one core."""

    params = [[(32, 4, 64, 32)], ["pool", "loop"]]
    param_names = ["shape", "products"]
    quick_params = [[(4, 4, 32, 16)], ["pool", "loop"]]

    def setup(self, shape, products):
        from jitgrad.kernels import blas_batch

        blas_batch.set_batched_gemm(products == "pool")
        rng = np.random.default_rng(3)
        self.qkv = [_leaf(rng.standard_normal(shape, dtype=np.float32)) for _ in range(3)]
        self.step()

    def step(self):
        q, k, v = self.qkv
        q.grad = k.grad = v.grad = None
        loss = ((q @ k.transpose(-2, -1)) @ v).sum()
        loss.backward()
        return loss

    def time_fwd_bwd(self, shape, products):
        self.step()

    def teardown(self, shape, products):
        from jitgrad.kernels import blas_batch

        blas_batch.set_batched_gemm(True)


# --------------------------------------------------------------------------- cold start
FIRST_OP = """
import jitgrad
a = jitgrad.linspace(-1, 1, 16, requires_grad=True)
b = jitgrad.linspace(0.5, 2, 16)
c = a * b + a
c.sum().backward()
assert a.grad.shape == (16,)
"""


class ImportTime:
    """``import jitgrad`` in a fresh process (each sample a new interpreter, start not timed)."""

    repeat = (3, 7, 60.0)
    timeout = 300
    quick_params = None

    def timeraw_import_jitgrad(self):
        return "import jitgrad"


class FirstOp:
    """Import + first element-wise op + backward in a fresh process, warm Numba disk cache.

    setup runs the same code once in a subprocess so the disk cache is written.
    """

    repeat = (3, 7, 60.0)
    timeout = 300
    quick_params = None

    def setup(self):
        proc = subprocess.run([sys.executable, "-c", FIRST_OP], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"first-op warm-up failed:\n{proc.stderr[-2000:]}")

    def timeraw_first_op(self):
        return FIRST_OP


class ParallelThreshold:
    """The eager kernel of ``mul`` and ``tanh`` around ``HOT_MIN_SIZE`` and
    ``PARALLEL_MIN_SIZE``, on the calling thread and on the thread pool (back to back, so
    the C pool's workers are spinning: ~1 us a launch; the Python pool's hand-over cost
    ~60 us on the 2-core project machine): the measurement behind the thresholds."""

    params = [["mul", "tanh"], [1 << 15, 1 << 16, 1 << 17, 1 << 19, 1 << 20], ["seq", "par"]]
    param_names = ["op", "n", "variant"]
    quick_params = [["mul", "tanh"], [1 << 10], ["seq", "par"]]

    def setup(self, op, n, variant):
        from jitgrad.kernels import parallel

        from jitgrad.ops import eager_kernels
        from jitgrad.ops.registry import REGISTRY

        parallel._blas_at[0] = float("-inf")
        kernels = eager_kernels.fast_kernels(REGISTRY[op], np.dtype(np.float32))
        rng = np.random.default_rng(0)
        a = rng.random(n, dtype=np.float32)
        out = np.empty_like(a)
        args = (a, a, out) if op == "mul" else (a, out)
        if hasattr(eager_kernels, "run_kernel"):  # one kernel(lo, hi, ...) on the pool
            from jitgrad.kernels.pool import run_parts

            kernel = kernels[0]
            parts = (n + (1 << 14) - 1) >> 14
            self.run = ((lambda: run_parts(kernel, parts, (n, *args))) if variant == "par"
                        else (lambda: kernel(0, parts, n, *args)))
        else:  # before the one kernel pipeline: a prange twin of each kernel
            kernel = kernels[1] if variant == "par" else kernels[0]
            self.run = lambda: kernel(*args)
        self.run()

    def time_kernel(self, op, n, variant):
        self.run()


class PoolLaunch:
    """An empty two-part launch on the thread pool (the ``mul`` kernel over no elements):
    the C pool (the kernel's native function called from spinning C threads) against the
    Python pool (a lock hand-over and the Numba dispatcher under the GIL)."""

    params = [["native", "python"]]
    param_names = ["pool"]

    def setup(self, pool):
        from jitgrad.kernels import native_launch, parallel
        from jitgrad.kernels.pool import pool_threads, run_parts

        from jitgrad.ops import eager_kernels
        from jitgrad.ops.registry import REGISTRY

        if pool_threads() < 2:
            raise NotImplementedError("one thread: no pool")
        if pool == "native" and not native_launch.native_pool_enabled():
            raise NotImplementedError("the C pool is not built here")
        self._saved = native_launch._enabled
        native_launch._enabled = pool == "native"
        native_launch._specs.clear()
        parallel._blas_at[0] = float("-inf")
        kernel = eager_kernels.fast_kernels(REGISTRY["mul"], np.dtype(np.float32))[0]
        a = np.zeros(1, np.float32)
        self.run = lambda: run_parts(kernel, 2, (0, a, a, a))
        self.run()
        self.run()

    def teardown(self, pool):
        from jitgrad.kernels import native_launch

        native_launch._enabled = self._saved

    def time_launch(self, pool):
        self.run()


class Jacobians:
    """``jacrev`` and ``hessian`` of ``tanh(W @ x) * x.sum()`` (n inputs, n outputs, float64):
    ``vmap`` over the vector-Jacobian products (one traced backward, replayed on all n
    seeds) against vmap's per-row loop (``JITGRAD_VMAP=loop``)."""

    params = [[64, 256], ["vmap", "loop"]]
    param_names = ["n", "mode"]
    quick_params = [[8], ["vmap", "loop"]]

    def setup(self, n, mode):
        from jitgrad.func import hessian, jacrev

        rng = np.random.default_rng(0)
        w = jitgrad.from_numpy(rng.standard_normal((n, n)))
        self.x = jitgrad.from_numpy(rng.standard_normal(n))
        self.jac = jacrev(lambda a: jitgrad.tanh(w @ a) * a.sum())
        self.hess = hessian(lambda a: (jitgrad.tanh(w @ a) ** 2).sum())
        self.mode = mode
        self.time_jacrev(n, mode)

    def _run(self, fn):
        if self.mode == "loop":
            os.environ["JITGRAD_VMAP"] = "loop"
        try:
            return fn(self.x)
        finally:
            os.environ.pop("JITGRAD_VMAP", None)

    def time_jacrev(self, n, mode):
        self._run(self.jac)

    def time_hessian(self, n, mode):
        self._run(self.hess)


class ProfilerWindow:
    """An eager MLP training step (64-128-10, batch 32, cross-entropy, SGD) outside and
    inside a ``jitgrad.profiler.profile`` window: what recording costs a step (the window
    opens in ``setup`` and closes in ``teardown``; outside one the profiler wraps nothing)."""

    params = [["off", "window"]]
    param_names = ["profiler"]
    quick_params = params

    def setup(self, profiler):
        from jitgrad.profiler import profile

        jitgrad.manual_seed(0)
        nn = jitgrad.nn
        self.model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        self.opt = jitgrad.optim.SGD(self.model.parameters(), lr=0.1)
        rng = np.random.default_rng(0)
        self.x = jitgrad.tensor(rng.standard_normal((32, 64)).astype(np.float32))
        self.y = jitgrad.tensor(rng.integers(0, 10, 32))
        for _ in range(3):  # (kernels loaded)
            self.time_step(profiler)
        self.window = profile() if profiler == "window" else None
        if self.window is not None:
            self.window.start()

    def teardown(self, profiler):
        if self.window is not None:
            self.window.stop()

    def time_step(self, profiler):
        self.opt.zero_grad()
        jitgrad.nn.functional.cross_entropy(self.model(self.x), self.y).backward()
        self.opt.step()
