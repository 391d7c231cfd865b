"""Compiling CUDA kernels without a GPU: the launch log (jitgrad/cuda/launch_log.py) and
tools/cuda_ptx_check.py, which compiles each logged kernel to PTX with NVVM -- the typing
and lowering Numba's simulator never does. ``make test`` runs the check over every kernel
the CUDA suite launches; these tests check the log's records and that the check fails for a
kernel the simulator runs but a GPU cannot compile."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
from helpers import skip_without_nvvm

from jitgrad.cuda import launch_log

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "cuda_ptx_check.py")


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != launch_log.ENV}
    env.update(extra)
    return env


def test_arg_types_are_what_a_gpu_launch_gives():
    from numba import cuda

    a = np.zeros((2, 3), np.float32)
    ro = np.zeros(4)
    ro.flags.writeable = False
    assert launch_log.arg_type(a) == "array(float32, 2d, C)"
    assert launch_log.arg_type(a.T) == "array(float32, 2d, F)"
    assert launch_log.arg_type(cuda.In(ro)) == "array(float64, 1d, C)"  # never read-only
    assert launch_log.arg_type(3) == "int64"
    assert launch_log.arg_type(2.5) == "float64"
    assert launch_log.arg_type(True) == "boolean"
    assert launch_log.arg_type(np.float32(1)) == "float32"
    assert launch_log.arg_type(np.int32(1)) == "int32"


def test_the_log_holds_each_kernel_once_with_its_types_and_generated_source(tmp_path):
    log = tmp_path / "launches.jsonl"
    code = """
import numpy as np, jitgrad as torch
x = torch.ones(5, device="cuda", requires_grad=True)
for _ in range(3):
    y = (x * 2.0 + 1.0).tanh().sum()
y.backward()
f = torch.compile(lambda a: (a * a).sum())
f(torch.ones(7, device="cuda")); f(torch.ones(7, device="cuda"))
"""
    r = _run(code, _env(**{launch_log.ENV: str(log), "NUMBA_ENABLE_CUDASIM": "1"}))
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    keys = [(r["module"], r["name"], tuple(r["args"])) for r in recs]
    assert len(keys) == len(set(keys)), "a kernel and types logged twice"
    names = {(r["module"], r["name"]) for r in recs}
    assert ("jitgrad.cuda.launch", "finish_all") in names  # a sum's finish
    generated = [r for r in recs if r["module"].startswith("jg_")]
    assert generated and all(r["name"] for r in generated)
    with_source = {r["module"] for r in generated if "source" in r}
    assert with_source == {r["module"] for r in generated}  # each module's source once
    assert all("@cuda.jit" in r["source"] for r in generated if "source" in r)
    assert any(a.startswith("array(float32, 1d, C)") for r in recs for a in r["args"])


_GOOD = '''from numba import cuda


@cuda.jit(cache=True)
def scale(a, s, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = a[i] * s
'''

# runs in the simulator (NumPy sorts the array), but a CUDA kernel has no np.sort
_BAD = '''import numpy as np
from numba import cuda


@cuda.jit(cache=True)
def smallest(a, out):
    out[0] = np.sort(a)[0]
'''


def test_the_check_compiles_logged_kernels_and_fails_on_one_a_gpu_cannot_compile(tmp_path):
    skip_without_nvvm()
    # the bad kernel runs in the simulator
    ns: dict = {}
    path = tmp_path / "jg_bad_module.py"
    path.write_text(_BAD)
    exec(compile(_BAD, str(path), "exec"), ns)
    out = np.zeros(1)
    ns["smallest"][1, 1](np.array([3.0, 1.0, 2.0]), out)
    assert out[0] == 1.0
    log = tmp_path / "log.jsonl"
    good = {"module": "jg_good_module", "name": "scale", "source": _GOOD,
            "args": ["array(float32, 1d, C)", "float32", "array(float32, 1d, C)"]}
    log.write_text(json.dumps(good) + "\n")
    env = _env(NUMBA_ENABLE_CUDASIM="0")
    r = subprocess.run([sys.executable, TOOL, str(log), "--cc", "9.0,8.0", "-v"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 of 2 kernel compilations passed" in r.stdout
    bad = {"module": "jg_bad_module", "name": "smallest", "source": _BAD,
           "args": ["array(float64, 1d, C)", "array(float64, 1d, C)"]}
    with log.open("a") as f:
        f.write(json.dumps(bad) + "\n")
    r = subprocess.run([sys.executable, TOOL, str(log)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED jg_bad_module.smallest(array(float64, 1d, C), array(float64, 1d, C))" \
        in r.stdout
    assert "1 of 2 kernel compilations passed" in r.stdout


def test_an_empty_log_is_an_error_not_a_pass(tmp_path):
    log = tmp_path / "empty.jsonl"
    log.write_text("")
    r = subprocess.run([sys.executable, TOOL, str(log)], capture_output=True, text=True,
                       env=_env(NUMBA_ENABLE_CUDASIM="0"), timeout=120)
    assert r.returncode == 1 and "name no kernel" in r.stdout


def test_jitgrads_own_kernels_compile_for_the_gpu(tmp_path):
    """The hand-written kernels (a sum's finish, scatter-add, convolution lowering) by their
    module names, as the suite's log names them."""
    skip_without_nvvm()
    log = tmp_path / "own.jsonl"
    recs = [
        {"module": "jitgrad.cuda.launch", "name": "finish_all",
         "args": ["array(float64, 1d, C)", "float64", "array(float32, 1d, C)"]},
        {"module": "jitgrad.cuda.scatter", "name": "_add_grouped",
         "args": ["array(float32, 1d, C)", "array(int64, 1d, C)", "array(int64, 1d, C)",
                  "array(float32, 1d, C)"]},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    r = subprocess.run([sys.executable, TOOL, str(log)], capture_output=True, text=True,
                       env=_env(NUMBA_ENABLE_CUDASIM="0"), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 of 2 kernel compilations passed" in r.stdout



def test_a_ptxas_older_than_nvvms_ptx_is_a_toolchain_error_not_a_kernel_failure(tmp_path):
    skip_without_nvvm()
    fake = tmp_path / "bin" / "ptxas"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho \"ptxas k.ptx, line 9; fatal   : Unsupported .version 9.5;"
                    " current version is '9.0'\" >&2\nexit 255\n")
    fake.chmod(0o755)
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"module": "jg_good_module", "name": "scale", "source": _GOOD,
                               "args": ["array(float32, 1d, C)", "float32",
                                        "array(float32, 1d, C)"]}) + "\n")
    env = _env(NUMBA_ENABLE_CUDASIM="0", PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run([sys.executable, TOOL, str(log), "--ptxas"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "ptxas cannot read NVVM's PTX" in r.stdout and "FAILED" not in r.stdout
