"""DLPack / CUDA array interface interop, the benchmark's code path, and the checks only a
real GPU can make (marked ``gpu``: libdevice accuracy, CuPy/PyTorch CUDA interop without a
copy, the kernel cache across processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitgrad as torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_from_dlpack_shares_host_memory_both_ways():
    a = np.arange(4.0)
    x = torch.from_dlpack(a)
    a[0] = 9.0
    assert x.tolist() == [9.0, 1.0, 2.0, 3.0] and x.device == "cpu"
    back = np.from_dlpack(x)
    back[1] = -1.0
    assert x[1].item() == -1.0
    with pytest.raises(RuntimeError, match="require gradient"):
        torch.ones(2, requires_grad=True).__dlpack__()
    assert not hasattr(torch.ones(2), "__cuda_array_interface__")  # AttributeError
    with pytest.raises(TypeError, match="expected an object exporting"):
        torch.from_dlpack([1, 2])


def test_from_dlpack_takes_pytorch_cpu_tensors_without_a_copy():
    pt = pytest.importorskip("torch")
    t = pt.arange(3.0)
    x = torch.from_dlpack(t)
    t[1] = 7.0
    assert x.tolist() == [0.0, 7.0, 2.0]
    y = pt.from_dlpack(torch.ones(2))
    assert y.tolist() == [1.0, 1.0]


def test_the_cuda_benchmark_runs_its_code_path(tmp_path):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "asv_benchmarks", "cuda_bench.py"),
                          "--smoke", "--out", str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads((tmp_path / "cuda_bench.json").read_text())
    assert res["simulated"] and res["w2"][0]["n"] == 64 and res["mlp"][0]["batch"] == 4
    assert res["cnn"][0]["batch"] == 2 and res["cnn"][0]["jitgrad_compiled_s"] > 0
    text = (tmp_path / "cuda_bench.txt").read_text()
    assert "W2" in text and "CNN step b=2" in text and ".sum().backward(): jitgrad" in text
    assert res["per_op"]["jitgrad_backward_us"] > 0
    assert res["tuning"][0]["same_bits"] and "by launch configuration" in text


# ------------------------------------------------------------------- real GPU only
@pytest.mark.gpu
def test_cupy_and_torch_cuda_memory_is_shared_without_a_copy():
    cupy = pytest.importorskip("cupy")
    a = cupy.arange(4, dtype=cupy.float32)
    x = torch.from_dlpack(a)
    assert x.device == "cuda:0" and x.data_ptr() == a.data.ptr
    b = cupy.asarray(x.detach())  # __cuda_array_interface__
    assert b.data.ptr == a.data.ptr
    pt = pytest.importorskip("torch")
    if pt.cuda.is_available():
        t = pt.arange(3.0, device="cuda")
        y = torch.from_dlpack(t)
        assert y.data_ptr() == t.data_ptr()
        assert pt.from_dlpack(y.detach()).data_ptr() == t.data_ptr()


#: libdevice's documented maximum errors (CUDA Math API, single and double precision); the
#: test measures them against float64 / mpmath-free references on a dense sweep
ULP_BOUNDS = {"exp": 2, "log": 1, "tanh": 2, "sigmoid": 3, "sin": 2, "cos": 2, "expm1": 1,
              "log1p": 1, "erf": 2, "sqrt": 0}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(ULP_BOUNDS))
def test_libdevice_float32_accuracy_is_within_its_documented_ulp(name):
    x = np.linspace(-20, 20, 1 << 20).astype(np.float32)
    if name in ("log", "sqrt", "log1p"):
        x = np.abs(x) + np.float32(1e-3)
    ref64 = {"sigmoid": lambda v: 1 / (1 + np.exp(-v))}.get(name) or getattr(np, name, None)
    if name == "erf":
        from math import erf
        ref64 = np.vectorize(erf)
    got = getattr(torch, name)(torch.tensor(x, device="cuda")).cpu().numpy()
    ref = ref64(x.astype(np.float64)).astype(np.float32)
    ulp = np.abs(got.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64))
    assert ulp.max() <= ULP_BOUNDS[name] + 1  # +1: the float64 reference's own rounding


@pytest.mark.gpu
def test_a_warm_process_loads_every_cuda_kernel_from_the_cache(tmp_path):
    code = textwrap.dedent("""
        import time, jitgrad as t
        from jitgrad.cuda import launch
        x = t.randn(1000, device="cuda", requires_grad=True)
        f = t.compile(lambda x: (t.tanh(x) ** 2).sum())
        t0 = time.perf_counter(); f(x).backward(); t.cuda.synchronize()
        ks = list(launch._kernels.values())
        print(len(ks), sum(sum(k._cache_hits.values()) for k in ks),
              sum(sum(k._cache_misses.values()) for k in ks), time.perf_counter() - t0)
    """)
    env = dict(os.environ, JITGRAD_CACHE_DIR=str(tmp_path))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=600)
        assert out.returncode == 0, out.stderr
        n, hits, misses, secs = out.stdout.split()[-4:]
        runs.append((int(n), int(hits), int(misses), float(secs)))
    (n0, _, misses0, cold), (n1, hits1, misses1, warm) = runs
    assert n0 == n1 >= 2 and misses0 == n0, runs  # the cold process compiled each kernel
    assert misses1 == 0 and hits1 == n1, runs     # the warm one loaded each from disk
    assert warm < cold, runs
