"""A loop calling any vmath function compiles to packed SIMD code with no calls (no libm),
on this machine and for an AVX2-only target; importing vmath compiles nothing.

Deterministic checks on the generated assembly, not timings (those are in
asv_benchmarks/vmath_report.py and bench_vmath.py).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from jitgrad.kernels.vmath import FUNCTIONS, KERNEL_FASTMATH
from jitgrad.kernels.vmath import testing as T
from numba import njit

DTYPES = [np.float32, np.float64]


def run_python(script, tmp_path, **env):
    """Run ``script`` in a fresh interpreter that imports what this one imports (same
    sys.path), from a neutral directory so the repository root cannot shadow packages."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **env)
    run = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_loop_is_packed_simd_without_calls(name, dtype):
    assert T.vectorisation_problems(T.array_kernel(name), dtype) == []


def test_libm_loop_is_caught():
    """The check fails where it should: NumPy's tanh lowers to a libm call per element."""
    @njit(fastmath=KERNEL_FASTMATH)
    def libm_tanh(x, out):
        for i in range(x.size):
            out[i] = np.tanh(x[i])

    problems = T.vectorisation_problems(libm_tanh, np.float32)
    assert any("calls" in p for p in problems)
    assert any("packed" in p for p in problems)


_AVX2_SCRIPT = """
import json, numpy as np
from jitgrad.kernels.vmath import FUNCTIONS, testing as T
out = {}
for name in FUNCTIONS:
    for dtype in (np.float32, np.float64):
        kernel = T.array_kernel(name)
        asm = T.loop_asm(kernel, dtype)
        out[name + "/" + np.dtype(dtype).name] = {
            "problems": T.vectorisation_problems(kernel, dtype),
            "zmm": "zmm" in asm, "ymm": "ymm" in asm}
print(json.dumps(out))
"""


def test_loops_vectorise_for_avx2_target(tmp_path):
    """Zen 3 / Haswell class CPUs (AVX2 + FMA, no AVX-512): same result with ymm registers."""
    report = run_python(_AVX2_SCRIPT, tmp_path, NUMBA_CPU_NAME="znver3", NUMBA_CPU_FEATURES="")
    assert len(report) == 2 * len(FUNCTIONS)
    for key, result in report.items():
        assert result["problems"] == [], key
        assert result["ymm"] and not result["zmm"], key


_LAZY_SCRIPT = """
import json
import jitgrad.kernels.vmath as vm
from jitgrad.kernels.vmath import f32, f64
compiled = [name for mod in (f32, f64) for name, obj in vars(mod).items()
            if hasattr(obj, "signatures") and obj.signatures]
print(json.dumps(compiled))
"""


def test_import_compiles_nothing(tmp_path):
    assert run_python(_LAZY_SCRIPT, tmp_path) == []
