"""Compiled-mode workloads (``jitgrad.compile``), separating what users feel:

* ``time_call_*``: a compiled call, traced and compiled in ``setup``;
* ``time_compile_*``: tracing + compiling a fresh function (``number = 1``; the kernel disk
  cache is warm after the first sample, so this is the per-signature cost users pay on a new
  function or a retrace);
* ``timeraw_*``: a fresh process: import + first compiled call, cold (empty cache
  directory) and warm (filled);
* ``peakmem_*``: eager vs compiled memory of a step;
* ``track_*``: fused kernels per graph, traces, cache hits.

Workloads: W1 the seed scalar graph (compiled ``value_and_grad``, and compiled ``f`` with
``f(x).backward()`` outside), W2 the element-wise chain
(backward inside the compiled function, and compiled forward + ``CompiledFunctionBackward``),
and a matmul chain. ``quick_params`` is what ``tests/test_benchmarks_quick.py`` runs.
"""

import os
import shutil
import sys
import tempfile

import numpy as np

import jitgrad

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chain_workloads import compiled_chain_step, compiled_chain_step_source  # noqa: E402


def _w1(x):
    return jitgrad.log(x ** 3) + jitgrad.sqrt(x ** 2)


def _chain(x, w, b):
    return (jitgrad.tanh(x * w + b) ** 2 * jitgrad.sigmoid(x)).sum()


def _inputs(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = jitgrad.float32 if dtype == "float32" else jitgrad.float64
    return [jitgrad.tensor(rng.standard_normal(n), dtype=dt, requires_grad=True)
            for _ in range(3)]


class SeedGraphCompiled:
    """W1: ``jitgrad.compile(jitgrad.value_and_grad(f))`` on a scalar, one call."""

    quick_params = None

    def setup(self):
        self.vg = jitgrad.compile(jitgrad.value_and_grad(_w1))
        self.x = jitgrad.tensor(5.0)
        for _ in range(2):
            v, g = self.vg(self.x)
        assert abs(g.item() - 1.6) < 1e-6

    def time_call(self):
        self.vg(self.x)


def _annealed(x, beta):
    return (x ** 2).mean() + beta * x.abs().sum()


class FloatArgumentCompiled:
    """A float argument that changes at every call (a KL weight the loop anneals): the
    compiled function with ``beta`` a Python float (read afresh at every call: automatic
    dynamic, ``trace/numbers.py``), the same with ``beta`` a 0-d tensor (PyTorch users'
    workaround), and eager mode; ``f(x, beta).backward()`` on 64x32 float32."""

    params = [["float", "tensor", "eager"]]
    param_names = ["beta"]
    quick_params = [["float", "tensor", "eager"]]

    def setup(self, kind):
        self.x = jitgrad.randn(64, 32, requires_grad=True)
        self.f = _annealed if kind == "eager" else jitgrad.compile(_annealed)
        self.kind = kind
        self.k = 0
        for _ in range(3):
            self.time_call(kind)
        if kind == "float":
            assert self.f.stats["traces"] == 2  # a constant, then dynamic

    def time_call(self, kind):
        self.k += 1
        beta = 0.001 * (self.k % 1000)
        if kind == "tensor":
            beta = jitgrad.tensor(beta, dtype=jitgrad.float64)
        self.x.grad = None
        self.f(self.x, beta).backward()


class SeedGraphNode:
    """W1 through the node path: ``f = jitgrad.compile(w1)``, then ``f(x).backward()`` and
    ``x.grad`` read outside it (a compiled function inside eager autograd)."""

    quick_params = None

    def setup(self):
        self.f = jitgrad.compile(_w1)
        self.x = jitgrad.tensor(5.0, requires_grad=True)
        for _ in range(2):
            self.time_call()
        assert abs(self.x.grad.item() - 1.6) < 1e-6

    def time_call(self):
        self.x.grad = None
        self.f(self.x).backward()
        return self.x.grad.item()


class ChainCompiled:
    """W2 ``sum(tanh(x*w + b)**2 * sigmoid(x))``: ``joint`` compiles forward, backward and the
    gradient writes as one plan; ``outside`` compiles the forward and runs the compiled
    backward through ``.backward()``."""

    params = [[100_000, 1_000_000, 10_000_000], ["float32", "float64"], ["joint", "outside"]]
    param_names = ["n", "dtype", "mode"]
    quick_params = [[1_000], ["float32"], ["joint", "outside"]]

    def setup(self, n, dtype, mode):
        if dtype == "float64" and n != 1_000_000:
            raise NotImplementedError("float64 only at 1e6 (as the peers)")
        self.x, self.w, self.b = _inputs(n, dtype)
        if mode == "joint":
            step = compiled_chain_step(jitgrad)
            self.fn = lambda: step(self.x, self.w, self.b)
        else:
            f = jitgrad.compile(_chain)

            def run():
                for t in (self.x, self.w, self.b):
                    t.grad = None
                f(self.x, self.w, self.b).backward()
            self.fn = run
            self.compiled = f
        self.fn()
        self.fn()

    def time_call(self, n, dtype, mode):
        self.fn()

    def peakmem_call(self, n, dtype, mode):
        self.fn()

    def track_grad_max_rel_err(self, n, dtype, mode):
        self.fn()
        x, w, b = (t.detach().numpy().astype(np.float64) for t in (self.x, self.w, self.b))
        t = np.tanh(x * w + b)
        s = 1 / (1 + np.exp(-x))
        gx = 2 * t * (1 - t * t) * w * s + t * t * s * (1 - s)
        return float(np.max(np.abs(self.x.grad.numpy() - gx)) / np.max(np.abs(gx)))


class ChainEagerMemory:
    """Eager peak memory of the W2 step, to compare with ``ChainCompiled.peakmem_call``."""

    params = [[1_000_000], ["float32"]]
    param_names = ["n", "dtype"]
    quick_params = [[1_000], ["float32"]]

    def setup(self, n, dtype):
        self.x, self.w, self.b = _inputs(n, dtype)

    def peakmem_step(self, n, dtype):
        for t in (self.x, self.w, self.b):
            t.grad = None
        _chain(self.x, self.w, self.b).backward()


class MatmulChainCompiled:
    """``((x @ w1).tanh() @ w2).sum()`` forward + backward inside one compiled function."""

    params = [[(128, 784, 256, 10)]]
    param_names = ["shape"]
    quick_params = [[(8, 16, 8, 4)]]

    def setup(self, shape):
        bsz, d_in, d_hid, d_out = shape
        rng = np.random.default_rng(0)
        self.x = jitgrad.tensor(rng.standard_normal((bsz, d_in)), dtype=jitgrad.float32)
        self.w1 = jitgrad.tensor(rng.standard_normal((d_in, d_hid)) / d_in ** 0.5,
                                 dtype=jitgrad.float32, requires_grad=True)
        self.w2 = jitgrad.tensor(rng.standard_normal((d_hid, d_out)) / d_hid ** 0.5,
                                 dtype=jitgrad.float32, requires_grad=True)
        w1, w2 = self.w1, self.w2

        @jitgrad.compile
        def step(x):
            w1.grad = None
            w2.grad = None
            loss = ((x @ w1).tanh() @ w2).sum()
            loss.backward()
            return loss
        self.step = step
        step(self.x)
        step(self.x)

    def time_call(self, shape):
        self.step(self.x)

    def track_fused_kernels(self, shape):
        return self.step.lower(self.x).entry.plan.n_kernels


class CompileLatency:
    """Tracing + compiling a fresh W2 function (disk cache warm after the first sample)."""

    number = 1
    repeat = 5
    quick_params = None

    def setup(self):
        self.args = _inputs(10_000, "float32")

    def time_compile_chain(self):
        step = compiled_chain_step(jitgrad)
        step(*self.args)   # trace
        step(*self.args)   # build + first run of the plan

    def track_traces_per_new_batch_size(self):
        f = jitgrad.compile(_chain)
        for n in (100, 200, 300, 100, 200):
            f(*_inputs(n, "float32"))
        return f.stats["traces"]

    def track_cache_hits_of_10_calls(self):
        f = jitgrad.compile(_chain)
        args = _inputs(100, "float32")
        for _ in range(10):
            f(*args)
        return f.stats["cache_hits"]


def _token_model_step(compiled: bool):
    """A text classifier's training step on ``(16, L)`` token batches -- Embedding(100, 64),
    Linear + tanh, mean over the sequence, Linear head, cross-entropy, Adam -- eager or under
    ``jitgrad.compile``; batches of another length retrace (the plan is per shape)."""
    import jitgrad.nn as nn

    jitgrad.manual_seed(0)
    emb, hidden, head = nn.Embedding(100, 64), nn.Linear(64, 64), nn.Linear(64, 5)
    params = [*emb.parameters(), *hidden.parameters(), *head.parameters()]
    opt = jitgrad.optim.Adam(params, 1e-3)

    def step(tokens, labels):
        opt.zero_grad()
        h = jitgrad.tanh(hidden(emb(tokens))).mean(1)
        loss = nn.functional.cross_entropy(head(h), labels)
        loss.backward()
        opt.step()
        return loss

    return jitgrad.compile(step) if compiled else step


def _token_batch(length: int, seed: int):
    rng = np.random.default_rng(seed)
    return (jitgrad.tensor(rng.integers(0, 100, (16, length))),
            jitgrad.tensor(rng.integers(0, 5, 16)))


class NewShapeRetrace:
    """One call of the compiled token-model step with a sequence length it has not seen,
    traced at once (``config.shape_tiering`` off): trace, plan build and run (every kernel
    is already compiled: the shape-generic kernels of the lengths before)."""

    number = 1
    repeat = 20
    quick_params = None

    def setup(self):
        import warnings

        warnings.simplefilter("ignore")  # (the retrace warning)
        self.tiering = getattr(jitgrad.config, "shape_tiering", None)  # (older versions: none)
        jitgrad.config.shape_tiering = False
        self.step = _token_model_step(True)
        for length in (8, 9, 10):
            self.step(*_token_batch(length, length))
        self.length = 10

    def teardown(self):
        jitgrad.config.shape_tiering = self.tiering

    def time_retrace_new_length(self):
        self.length += 1
        self.step(*_token_batch(self.length, self.length))


class VariableLengthTraining:
    """120 steps of the token model on batches of 30 lengths (8..37, each 4 times, in a fixed
    shuffled order), from a fresh step function: eager; compiled (``config.shape_tiering``:
    a new length runs eagerly until it has cost a retrace); compiled tracing each new length
    at once (30 traces)."""

    params = ["eager", "compiled", "compiled_trace_each_length"]
    param_names = ["mode"]
    number = 1
    repeat = 3
    quick_params = ["compiled"]

    def setup(self, mode):
        import warnings

        warnings.simplefilter("ignore")
        order = np.random.default_rng(1).permutation(np.repeat(np.arange(8, 38), 4))
        self.batches = [_token_batch(int(n), k) for k, n in enumerate(order)]

    def time_120_steps(self, mode):
        tiering = getattr(jitgrad.config, "shape_tiering", None)
        jitgrad.config.shape_tiering = mode == "compiled"
        try:
            step = _token_model_step(mode != "eager")
            for tokens, labels in self.batches:
                step(tokens, labels)
        finally:
            jitgrad.config.shape_tiering = tiering


_FIRST_CALL = """
import numpy as np
import jitgrad as jg
rng = np.random.default_rng(0)
x, w, b = (jg.tensor(rng.standard_normal(1_000_000), dtype=jg.float32, requires_grad=True)
           for _ in range(3))
""" + compiled_chain_step_source() + """
step = compiled_chain_step(jg)
step(x, w, b)
step(x, w, b)
"""


class FirstCompiledCall:
    """A new process: ``import jitgrad`` + the first two calls of the compiled W2 step
    (trace, then compile + run), with an empty (cold) or filled (warm) kernel cache."""

    quick_params = None
    timeout = 300

    def setup(self):
        import subprocess
        import sys

        self.tmp = tempfile.mkdtemp(prefix="jitgrad-asv-")
        self.warm = os.path.join(self.tmp, "warm")
        subprocess.run([sys.executable, "-c", _FIRST_CALL], check=True,
                       env=dict(os.environ, JITGRAD_CACHE_DIR=self.warm))

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def timeraw_first_call_warm(self):
        return (f"import os; os.environ['JITGRAD_CACHE_DIR'] = {self.warm!r}\n"
                + _FIRST_CALL)

    def timeraw_first_call_cold(self):
        return (f"import os, tempfile; os.environ['JITGRAD_CACHE_DIR'] = "
                f"tempfile.mkdtemp(dir={self.tmp!r})\n" + _FIRST_CALL)
