"""Helpers shared by test modules (importable as ``helpers``: pytest's pythonpath)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def strip_addresses(text: str) -> str:
    """Replace ``object at 0x...`` addresses so printed grad_fns compare equal."""
    return re.sub(r"object at 0x[0-9A-Fa-f]+", "object at 0x?", text)


def import_example(name: str):
    """``examples/<name>.py`` imported as the module ``name`` (its ``main()`` does not run),
    with the examples folder on sys.path as when an example runs as a script (examples import
    each other by name)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.append(str(EXAMPLES))
    return importlib.import_module(name)


def ops_helpers():
    """``tests/ops/conftest.py`` as a module: the adapters, samples and input builders of the
    registry-driven op tests.

    pytest runs with ``--import-mode=importlib``, so a test module cannot import a conftest:
    the file is loaded by path once, under the name ``_jitgrad_ops_helpers`` (pytest also
    loads it on its own as the conftest of ``tests/ops``, for the fixtures)."""
    name = "_jitgrad_ops_helpers"
    if name not in sys.modules:
        path = ROOT / "tests" / "ops" / "conftest.py"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def run_in_threads(work: Callable[[int], object], n: int) -> list[BaseException]:
    """Run ``work(0)``, ..., ``work(n - 1)`` on ``n`` threads at once and return what they
    raised: an exception (a failed assert included) inside a thread does not fail the test by
    itself, so the caller asserts the list is empty."""
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(work, i) for i in range(n)]
    return [f.exception() for f in futures if f.exception() is not None]


def w2_step(x, w, b):
    """The W2 training-style step: ``sum(tanh(x*w + b)**2 * sigmoid(x))`` and its backward
    into fresh ``.grad``s (as compiled in the benchmarks)."""
    import jitgrad as jg

    x.grad = w.grad = b.grad = None
    loss = (jg.tanh(x * w + b) ** 2 * jg.sigmoid(x)).sum()
    loss.backward()
    return loss


def assert_same_bits(actual, expected, what: str = "") -> None:
    """``actual`` and ``expected`` (arrays or tensors) hold the same bits: same dtype and
    shape, every element identical (-0.0 differs from 0.0; NaN equals NaN)."""
    import numpy as np

    a = np.asarray(actual.detach().numpy() if hasattr(actual, "detach") else actual)
    b = np.asarray(expected.detach().numpy() if hasattr(expected, "detach") else expected)
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.kind == "f":
        nan = np.isnan(a) & np.isnan(b)
        a, b = np.where(nan, 0, a), np.where(nan, 0, b)
        a = a.view(f"u{a.dtype.itemsize}")
        b = b.view(f"u{b.dtype.itemsize}")
    bad = np.flatnonzero(np.asarray(a != b).reshape(-1))
    assert bad.size == 0, f"{what}: {bad.size} of {a.size} elements differ (first at {bad[0]})"


def cube_function():
    """A custom ``autograd.Function`` computing ``x**3`` (backward ``3 x**2 g``, twice
    differentiable: its backward is made of differentiable ops)."""
    from jitgrad.autograd import Function

    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    return Cube


def cross_entropy_step(model, opt, **ce):
    """A training step (zero_grad, cross-entropy of ``model(x)``, backward, ``opt.step()``)
    returning the loss; ``ce``: keyword arguments of ``F.cross_entropy``."""
    import jitgrad.nn.functional as F

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, **ce)
        loss.backward()
        opt.step()
        return loss
    return step


def newest_plan(step):
    """The plan of the most recently used entry of compiled ``step``."""
    from jitgrad.jit.function import compiled_function_of

    _key, entry = next(reversed(compiled_function_of(step)._lru.values()))
    return entry.plan


def run_python(code: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """``code`` run by a fresh interpreter with these environment variables added (text
    output captured): what a process that starts with those settings does."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, **env), timeout=timeout)


def python_prints(code: str, **env: str) -> list[str]:
    """The words ``code`` prints, run as :func:`run_python` runs it (which must succeed)."""
    r = run_python(code, **env)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def real_cuda_env() -> dict:
    """This environment for a child process that compiles for the real CUDA target (not
    Numba's simulator) and logs no kernel launches."""
    env = {k: v for k, v in os.environ.items() if k != "JITGRAD_CUDA_LAUNCH_LOG"}
    env["NUMBA_ENABLE_CUDASIM"] = "0"
    return env


def skip_without_nvvm() -> None:
    """Skip the test where NVVM cannot compile a kernel to PTX (tools/cuda_ptx_check.py's
    probe, in a child process: this one runs the simulator)."""
    import pytest

    r = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, "
                        f"{str(ROOT / 'tools')!r}); import cuda_ptx_check as c; "
                        "print(c._nvvm_reason())"],
                       capture_output=True, text=True, env=real_cuda_env(), cwd=ROOT,
                       timeout=120)
    if r.returncode != 0 or r.stdout.strip():
        pytest.skip(f"NVVM cannot compile here: {r.stdout.strip() or r.stderr[-300:]}")


def assert_compiled_step_matches_eager(step: Callable, params: list, *args,
                                       rtol: float = 0.0, atol: float = 0.0) -> None:
    """``jitgrad.compile(step)(*args)`` traced whole (no graph-break warning) gives eager's
    loss and, after ``backward()``, eager's gradients in ``params``: bit for bit, or within
    ``rtol`` (the loss) and ``rtol``/``atol`` (the gradients) when given."""
    import warnings

    import numpy as np

    import jitgrad

    ref = step(*args)
    ref.backward()
    grads = [p.grad.numpy().copy() for p in params]
    for p in params:
        p.grad = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = jitgrad.compile(step)(*args)
    out.backward()
    if rtol == 0.0 and atol == 0.0:
        assert out.item() == ref.item()
        for p, g in zip(params, grads):
            np.testing.assert_array_equal(p.grad.numpy(), g)
        return
    np.testing.assert_allclose(out.item(), ref.item(), rtol=rtol)
    for p, g in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=rtol, atol=atol)


def case_inputs(lib, arrays: dict, diff, int_keys, dtype=None, device=None):
    """``get(key)``: ``arrays[key]`` as a tensor of ``lib`` (jitgrad or torch), made once
    per key -- in ``dtype`` and on ``device`` when given, requiring grad when ``key`` is in
    ``diff``; the keys in ``int_keys`` as they are -- and ``made`` (key -> tensor)."""
    made: dict = {}

    def get(key):
        if key not in made:
            a = arrays[key]
            if key in int_keys:
                t = lib.tensor(a)
                t = t if device is None else t.to(device)
            else:
                t = lib.tensor(a if dtype is None else a.astype(dtype))
                if device is not None:
                    t = t.to(device)
                t.requires_grad_(key in diff)
            made[key] = t
        return made[key]
    return get, made


def assert_close(a, b, tol: float = 1e-10) -> None:
    """Two tensors (jitgrad's, PyTorch's) or arrays have one shape and equal values within
    ``tol`` (relative and absolute)."""
    import numpy as np

    an = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    bn = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert an.shape == bn.shape, (an.shape, bn.shape)
    np.testing.assert_allclose(an, bn, rtol=tol, atol=tol)


def assert_same_error(jitgrad_call: Callable, torch_call: Callable) -> None:
    """Both calls raise the same exception type with the same message (shapes print as
    ``jitgrad.Size`` in jitgrad's)."""
    import pytest

    with pytest.raises(Exception) as j_err:
        jitgrad_call()
    with pytest.raises(Exception) as t_err:
        torch_call()
    assert type(j_err.value) is type(t_err.value)
    assert str(j_err.value).replace("jitgrad.Size", "torch.Size") == str(t_err.value)


def assert_raises_like_torch(call: Callable, exc: type) -> None:
    """``call(jitgrad)`` raises ``exc``; with torch installed, ``call(torch)`` raises it with
    the same message (``jitgrad.`` read as ``torch.``)."""
    import warnings

    import pytest

    import jitgrad

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (an instantiated Function)
        with pytest.raises(exc) as got:
            call(jitgrad)
        try:
            import torch
        except ImportError:
            return
        with pytest.raises(exc) as want:
            call(torch)
    assert str(got.value).replace("jitgrad.", "torch.") == str(want.value)


def wirtinger_numerical_grad(loss, a, eps: float = 1e-6):
    """PyTorch's gradient of a real ``loss`` (a function of one tensor) at the NumPy array
    ``a``, by central differences: ``dL/dx + i dL/dy`` for a complex ``a = x + iy``, ``dL/da``
    for a real one."""
    import numpy as np

    import jitgrad

    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        for unit in ((1.0, 1j) if a.dtype.kind == "c" else (1.0,)):
            ap, am = a.copy(), a.copy()
            ap[idx] += eps * unit
            am[idx] -= eps * unit
            g[idx] += unit * (loss(jitgrad.tensor(ap)).item()
                              - loss(jitgrad.tensor(am)).item()) / (2 * eps)
    return g
