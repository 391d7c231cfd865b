"""Training steps (the "Training" issue's workloads; models in ``training_workloads.py``):

* ``time_step``: one full step (forward, cross-entropy, backward, update: SGD; AdamW with
  gradient clipping for the GPT), eager,
  compiled whole with ``jitgrad.compile`` (traced and compiled in ``setup``), or ``module``:
  the model compiled and the rest eager, as torch.compile users write it;
* ``peakmem_step``: the process's peak memory over a step, eager vs compiled;
* ``time_compile_*``: tracing + compiling a fresh training step (``number = 1``);
* ``track_*``: fused kernels in the step's plan, traces over epochs with a short last batch.
"""

import os
import sys

import numpy as np

import jitgrad

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import training_workloads as tw  # noqa: E402


class MLPStep:
    """MLP 784-256-256-10, ReLU, softmax cross-entropy, SGD, float32 (peers' W3)."""

    params = [[128, 1024], ["eager", "compiled", "module"]]
    param_names = ["batch", "mode"]
    quick_params = [[16], ["eager", "compiled", "module"]]

    def setup(self, batch, mode):
        if mode == "module":  # compile(model); loss, backward() and opt.step() eager
            self.step = tw.jitgrad_mlp_module_step(jitgrad, batch)
        else:
            self.step, self.fn = tw.jitgrad_mlp_step(jitgrad, batch,
                                                     compiled=mode == "compiled")
        for _ in range(3):  # compiled: trace, build, run
            self.step()

    def time_step(self, batch, mode):
        self.step()

    def peakmem_step(self, batch, mode):
        self.step()

    def track_gflops(self, batch, mode):
        import time

        n = 5
        t0 = time.perf_counter()
        for _ in range(n):
            self.step()
        return tw.mlp_flops(batch) * n / (time.perf_counter() - t0) / 1e9

    track_gflops.unit = "GFLOP/s"


def _interleaved_ratio(a, b, rounds: int = 7, number: int = 20) -> float:
    """min time of ``a`` / min time of ``b``, timed in alternating rounds in this process
    (the machine's load then weighs on both alike)."""
    import time

    best_a = best_b = float("inf")
    for _ in range(rounds):
        for fn, which in ((a, 0), (b, 1)):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            dt = (time.perf_counter() - t0) / number
            if which == 0:
                best_a = min(best_a, dt)
            else:
                best_b = min(best_b, dt)
    return best_a / best_b


class MLPStepVsNumPy:
    """The compiled MLP step's time over the hand-written NumPy step's, side by side in one
    process (issue target: <= 0.95 at batch 128, <= 1.0 at 1024)."""

    params = [128, 1024]
    param_names = ["batch"]
    quick_params = [16]
    number = 1
    repeat = 1

    def setup(self, batch):
        self.step, _ = tw.jitgrad_mlp_step(jitgrad, batch, compiled=True)
        self.numpy_step = tw.numpy_mlp_step(batch)
        for _ in range(3):
            self.step()
            self.numpy_step()

    def track_ratio_to_numpy(self, batch):
        return _interleaved_ratio(self.step, self.numpy_step)

    track_ratio_to_numpy.unit = "ratio"


class MLPStepBlasThreads:
    """The compiled MLP step with OpenBLAS's threaded products on jitgrad's pool (the
    default where OpenBLAS has the threads callback) and on OpenBLAS's own threads, which
    spin after each product (``kernels/blas_threads.py``)."""

    params = [[128, 1024], ["pool", "openblas"]]
    param_names = ["batch", "blas_threads"]
    quick_params = [[16], ["pool", "openblas"]]

    def setup(self, batch, blas_threads):
        from jitgrad.kernels import blas_threads as bt

        self.step, _ = tw.jitgrad_mlp_step(jitgrad, batch, compiled=True)
        if blas_threads == "openblas":
            bt.unroute_blas_threads(stay_off=True)
        elif not bt.route_blas_threads():
            raise NotImplementedError("NumPy's OpenBLAS has no threads callback")
        for _ in range(3):
            self.step()

    def time_step(self, batch, blas_threads):
        self.step()

    def teardown(self, batch, blas_threads):
        from jitgrad.kernels import blas_threads as bt

        if blas_threads == "openblas":  # (one process may run both: the default again)
            bt.unroute_blas_threads()
            bt.route_blas_threads()


class MLPStepOpenBLASCore:
    """The compiled MLP step on OpenBLAS's Haswell (AVX2) and SkylakeX (AVX-512) kernel sets
    (``kernels/blas_core.py``: ``import jitgrad`` picks Haswell on AMD Zen 4); the set is
    selected before the step is built, so its plan probes the kernels it runs."""

    params = [[128, 1024], ["Haswell", "SkylakeX"]]
    param_names = ["batch", "core"]
    quick_params = [[16], ["Haswell", "SkylakeX"]]

    def setup(self, batch, core):
        from jitgrad.kernels import blas_core

        self.before = blas_core.blas_core()[0]
        if not blas_core.select_core(core):
            raise NotImplementedError(f"no {core} kernel set to select on this machine")
        self.step, _ = tw.jitgrad_mlp_step(jitgrad, batch, compiled=True)
        for _ in range(3):
            self.step()

    def time_step(self, batch, core):
        self.step()

    def teardown(self, batch, core):
        from jitgrad.kernels import blas_core

        if self.before:  # (one process may run both: the import's set again)
            blas_core.select_core(self.before)


class MLPStepFusedHead:
    """The compiled MLP step with its classifier head (last linear layer, cross-entropy,
    the product into the layer below) as one step (``compiler/classifier_head.py``, the
    default) and as three (``JITGRAD_FUSED_HEAD=0``, read when the step is compiled)."""

    params = [[128, 1024], ["fused", "separate"]]
    param_names = ["batch", "head"]
    quick_params = [[16], ["fused", "separate"]]

    def setup(self, batch, head):
        import os

        before = os.environ.get("JITGRAD_FUSED_HEAD")
        os.environ["JITGRAD_FUSED_HEAD"] = "1" if head == "fused" else "0"
        try:
            self.step, _ = tw.jitgrad_mlp_step(jitgrad, batch, compiled=True)
            self.step()  # traces and builds the plan
        finally:
            if before is None:
                del os.environ["JITGRAD_FUSED_HEAD"]
            else:
                os.environ["JITGRAD_FUSED_HEAD"] = before
        for _ in range(2):
            self.step()

    def time_step(self, batch, head):
        self.step()


class MLPStepPlan:
    """What the compiled MLP step's plan holds."""

    params = [128]
    param_names = ["batch"]
    quick_params = [16]

    def setup(self, batch):
        step, self.fn = tw.jitgrad_mlp_step(jitgrad, batch, compiled=True)
        for _ in range(3):
            step()
        self.plan = next(iter(self.fn._entries.values()))[0].plan

    def track_fused_kernels(self, batch):
        return self.plan.n_kernels

    def track_steps(self, batch):
        return len(self.plan.steps)


class CNNStep:
    """The demo's CNN on 1x8x8 images, SGD with momentum."""

    params = [[32, 128], ["eager", "compiled"]]
    param_names = ["batch", "mode"]
    quick_params = [[4], ["eager", "compiled"]]

    def setup(self, batch, mode):
        self.step, _ = tw.jitgrad_cnn_step(jitgrad, batch, compiled=mode == "compiled")
        for _ in range(3):
            self.step()

    def time_step(self, batch, mode):
        self.step()

    def peakmem_step(self, batch, mode):
        self.step()


class GPTStep:
    """The character-level GPT of ``examples/train_gpt.py`` (nanoGPT's architecture): one
    step of forward, cross-entropy, backward, ``clip_grad_norm_`` and AdamW, eager or
    compiled whole (``tiny``: the example's default, ``small``: 4 layers of width 128 over
    64 tokens)."""

    params = [["tiny", "small"], ["eager", "compiled"]]
    param_names = ["config", "mode"]
    quick_params = [["nano"], ["eager", "compiled"]]

    def setup(self, config, mode):
        self.step = tw.gpt_step(jitgrad, config, mode)
        for _ in range(3):  # compiled: trace, trace again with AdamW's state, run
            self.step()

    def time_step(self, config, mode):
        self.step()

    def peakmem_step(self, config, mode):
        self.step()


class TrainingStepCompile:
    """Tracing + compiling a fresh MLP training step (the kernel disk cache is warm after the
    first sample: this is what a new process or a retrace pays)."""

    number = 1
    repeat = 5
    quick_params = None

    def time_compile_mlp_step(self):
        step, _ = tw.jitgrad_mlp_step(jitgrad, 32, compiled=True)
        step()  # trace
        step()  # build the plan, run it


class TrainingRetraces:
    """Epochs over a DataLoader whose last batch is short (drop_last=False): traces in the
    first epoch (optimizer state created, steady state, short batch) and in later ones."""

    quick_params = None

    def setup(self):
        import jitgrad.nn as nn
        from jitgrad.utils.data import DataLoader, TensorDataset

        rng = np.random.default_rng(0)
        x = jitgrad.tensor(rng.standard_normal((100, 20)).astype(np.float32))
        y = jitgrad.tensor(rng.integers(0, 5, 100))
        model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
        opt = jitgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = jitgrad.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
        self.step, self.sched = jitgrad.compile(tw.make_step(model, opt)), sched
        self.loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True,
                                 generator=jitgrad.Generator().manual_seed(0))

    def _epoch(self) -> int:
        before = self.step.stats["traces"]
        for xb, yb in self.loader:
            self.step(xb, yb)
        self.sched.step()  # a new learning rate: read at every call, no retrace
        return self.step.stats["traces"] - before

    def track_traces_first_epoch(self):
        return self._epoch()

    def track_traces_later_epochs(self):
        self._epoch()
        return sum(self._epoch() for _ in range(3))


def _warmed(fn, *args):
    """``fn`` after three calls on ``args`` (traced, compiled, kernels loaded)."""
    for _ in range(3):
        fn(*args)
    return fn


class CompiledUpdateInPlace:
    """A compiled SGD update ``w.sub_(g * lr)`` of a (256, 784) float32 weight: one fused
    kernel storing into the parameter it reads (``KernelDesc.aliases``: a loop the compiler
    vectorises). The call 71 -> 25 us when the kernel stopped getting two arrays over the
    same memory (the scalar loop LLVM's overlap check falls back to)."""

    params = [[256 * 784]]
    param_names = ["n"]
    quick_params = [[4096]]

    def setup(self, n):
        rng = np.random.default_rng(0)
        self.w = w = jitgrad.from_numpy(rng.standard_normal(n, dtype=np.float32))
        self.g = jitgrad.from_numpy(rng.standard_normal(n, dtype=np.float32))

        @jitgrad.compile
        def update(g):
            w.sub_(g * 0.01)
        self.update = _warmed(update, self.g)

    def time_update(self, n):
        self.update(self.g)


class OptimizerGuard:
    """A compiled call whose function refers to an AdamW over ``n`` parameters: its guard
    reads the optimizer's groups and state, cached by the optimizer mutation count
    (``jit/guards._optimizer_state_cached``). The call 12 -> 3.1 us at n=8, 51 -> 3.0 us at
    n=64 when the state stopped being read at every call."""

    params = [[8, 64]]
    param_names = ["n"]
    quick_params = [[8]]

    def setup(self, n):
        ps = [jitgrad.zeros(4, requires_grad=True) for _ in range(n)]
        opt = jitgrad.optim.AdamW(ps, lr=1e-3)
        for p in ps:  # the state a first step makes
            opt.state[p].update(step=jitgrad.zeros(()), exp_avg=jitgrad.zeros(4),
                                exp_avg_sq=jitgrad.zeros(4))
        self.x = jitgrad.ones(4)

        @jitgrad.compile
        def call(x):
            return x * opt.defaults["lr"]
        self.call = _warmed(call, self.x)

    def time_call(self, n):
        self.call(self.x)


class CrossEntropyNarrow:
    """Cross-entropy of a classifier's logits (128 x ``c`` float32): ``chain``, the kernel a
    compiled step runs for log_softmax -> nll -> their backwards (``kernels/softmax``);
    ``eager``, ``F.cross_entropy`` forward and backward. Rows of at most 16 classes run in
    blocks of 8 rows vectorised across the rows: the chain at c=10 15.0 -> 11.8 us (its
    kernel 10.6 -> 6.8-7.3), eager ``log_softmax`` 6.3 -> 3.8-4.1 us; c=17 keeps the row
    code."""

    params = [[10, 17], ["chain", "eager"]]
    param_names = ["c", "path"]
    quick_params = [[10], ["chain", "eager"]]

    def setup(self, c, path):
        from jitgrad.ops.nnops.nll import _cross_entropy_chain

        rng = np.random.default_rng(0)
        x = rng.standard_normal((128, c)).astype(np.float32)
        t = rng.integers(0, c, 128).astype(np.int64)
        if path == "chain":
            g = np.asarray(1.0, np.float32)
            self.run = lambda: _cross_entropy_chain(x, t, g, "mean", -100)
        else:
            xt = jitgrad.from_numpy(x).requires_grad_()
            tt = jitgrad.from_numpy(t)
            ce = jitgrad.nn.functional.cross_entropy
            self.run = lambda: ce(xt, tt).backward()
        _warmed(self.run)

    def time_cross_entropy(self, c, path):
        self.run()


class OptimizerStep:
    """``opt.step()`` alone over the MLP's parameters (535k float32, fixed gradients):
    AdamW and SGD with momentum, the eager per-parameter ops vs ``fused=True`` (one compiled
    plan, each parameter's update one pass)."""

    params = [["AdamW", "SGD-momentum"], ["eager", "fused"]]
    param_names = ["optimizer", "mode"]

    def setup(self, optimizer, mode):
        name, options = {"AdamW": ("AdamW", {"lr": 1e-3}),
                         "SGD-momentum": ("SGD", {"lr": 0.01, "momentum": 0.9})}[optimizer]
        self.step = tw.optimizer_step(jitgrad, name, fused=mode == "fused", **options)
        for _ in range(3):  # fused: traced by the first two calls
            self.step()

    def time_step(self, optimizer, mode):
        self.step()


class PerSampleGrads:
    """Per-sample gradients of the MLP, ``vmap(grad(loss), in_dims=(None, 0, 0))`` (torch.func's
    recipe): batched by tracing, the same compiled, and vmap's per-element loop."""

    params = [[64, 256], ["vmap", "compiled", "loop"]]
    param_names = ["batch", "mode"]
    quick_params = [[8], ["vmap", "compiled", "loop"]]

    def setup(self, batch, mode):
        self.run = tw.per_sample_grads(jitgrad, batch, mode)
        self.run()  # compiled: trace and build

    def time_per_sample_grads(self, batch, mode):
        self.run()


class DataLoaderEpoch:
    """One shuffled epoch of ``DataLoader(TensorDataset(x, y), batch_size=32)`` over the
    digits' shape (1437 x 1 x 8 x 8 float32, int64 labels): what ``make demo`` iterates
    between steps. ``track_ratio_to_indexing`` is the epoch's time over indexing the two
    arrays with the same batches directly (near 1 when the loader batches by indexing; a
    regression that indexed sample by sample and stacked made it ~60x and halved the demo's
    compiled steps/s)."""

    def setup(self):
        from jitgrad.utils.data import DataLoader, TensorDataset

        rng = np.random.default_rng(0)
        self.x = rng.random((1437, 1, 8, 8), dtype=np.float32)
        self.y = rng.integers(0, 10, 1437)
        self.loader = DataLoader(TensorDataset(jitgrad.tensor(self.x), jitgrad.tensor(self.y)),
                                 batch_size=32, shuffle=True,
                                 generator=jitgrad.Generator().manual_seed(0))

    def time_epoch(self):
        for _ in self.loader:
            pass

    def _index_directly(self):
        order = np.random.default_rng(0).permutation(len(self.x))
        for s in range(0, len(order), 32):
            idx = order[s:s + 32]
            jitgrad.tensor(self.x[idx]), jitgrad.tensor(self.y[idx])

    def track_ratio_to_indexing(self):
        return _interleaved_ratio(self.time_epoch, self._index_directly, number=3)

    track_ratio_to_indexing.unit = "x"


class LSTMStep:
    """A char-RNN training step as tutorials write it, eager: ``Embedding(30, 16)``, a
    2-layer ``LSTM(16, 32, batch_first=True)`` (or ``GRU``), ``Linear(32, 30)``,
    cross-entropy over B=8 x T=20 tokens, Adam (the probe's script). Side by side on the
    development machine: LSTM 17.0 ms when each step was ops, 4.5 ms with one op per layer,
    2.6-2.7 ms with its cell one compiled pass (PyTorch 1.8-2.3 ms); GRU 16.4 -> 3.2 ms
    (PyTorch ~4.0 ms); RNN 7.3-8.6 -> 1.9 ms (PyTorch 3.9-4.5 ms)."""

    params = ["LSTM", "GRU", "RNN"]
    param_names = ["layer"]

    def setup(self, layer):
        rng = np.random.default_rng(0)
        jitgrad.manual_seed(0)
        nn, F = jitgrad.nn, jitgrad.nn.functional
        emb, rnn, fc = nn.Embedding(30, 16), getattr(nn, layer)(16, 32, 2, batch_first=True), \
            nn.Linear(32, 30)
        opt = jitgrad.optim.Adam([*emb.parameters(), *rnn.parameters(), *fc.parameters()],
                                 lr=1e-3)
        x = jitgrad.tensor(rng.integers(0, 30, (8, 20)))
        y = jitgrad.tensor(rng.integers(0, 30, (8, 20)))

        def step():
            opt.zero_grad()
            out = fc(rnn(emb(x))[0])
            F.cross_entropy(out.reshape(-1, 30), y.reshape(-1)).backward()
            opt.step()
        self.step = step
        for _ in range(3):
            step()

    def time_step(self, layer):
        self.step()


class CompiledCallPatterns:
    """Ways ``torch.compile`` users call a compiled training step that retraced at every
    call (a compile probe, stop 47): a OneCycleLR schedule (momentum cycled: it traced per
    step, then ran eagerly, 0.94x eager), a fresh dict batch per step (``batch["x"]``
    guarded by identity: eager after the recompile limit, 1.0x), a Python step counter
    argument (a trace per call, 16-24x slower than eager; now eager past the limit).
    ``track_speedup`` is the eager step's time over the compiled one's, side by side;
    ``track_traces`` the traces over 40 steps."""

    params = ["one_cycle", "dict_batch", "int_counter"]
    param_names = ["pattern"]

    def setup(self, pattern):
        import jitgrad.nn as nn

        rng = np.random.default_rng(0)
        self.batches = [(jitgrad.tensor(rng.standard_normal((64, 20)).astype(np.float32)),
                         jitgrad.tensor(rng.integers(0, 5, 64))) for _ in range(8)]
        self.pattern = pattern

        def make():
            jitgrad.manual_seed(0)
            model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 5))
            opt = jitgrad.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
            sched = jitgrad.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10**6)

            def step(batch, counter=0):
                x, y = (batch["x"], batch["y"]) if isinstance(batch, dict) else batch
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                return loss
            return step, sched
        self.eager, self.eager_sched = make()
        step, self.compiled_sched = make()
        self.compiled = jitgrad.compile(step)
        self.i = 0

    def _call(self, fn, sched):
        x, y = self.batches[self.i % len(self.batches)]
        self.i += 1
        if self.pattern == "one_cycle":
            fn((x, y))
            sched.step()
        elif self.pattern == "dict_batch":
            fn({"x": x.clone(), "y": y.clone()})  # a fresh dict of fresh tensors
        else:
            fn((x, y), self.i)

    def time_eager_step(self, pattern):
        self._call(self.eager, self.eager_sched)

    def time_compiled_step(self, pattern):
        self._call(self.compiled, self.compiled_sched)

    def track_speedup(self, pattern):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(12):  # past the traces (and, for the counter, the limit)
                self._call(self.compiled, self.compiled_sched)
            return _interleaved_ratio(lambda: self._call(self.eager, self.eager_sched),
                                      lambda: self._call(self.compiled, self.compiled_sched),
                                      number=10)

    track_speedup.unit = "x"

    def track_traces(self, pattern):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            before = self.compiled.stats["traces"]
            for _ in range(40):
                self._call(self.compiled, self.compiled_sched)
        return self.compiled.stats["traces"] - before

    track_traces.unit = "traces"
