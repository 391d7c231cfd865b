"""OpenBLAS's kernel set chosen for the CPU at ``import jitgrad`` (kernels/blas_core.py): the
rule (AMD Zen 4 -> Haswell's AVX2 kernels), the switch itself (products stay right, a
compiled training step still equals eager mode bit for bit), and a user's choice kept
(``JITGRAD_OPENBLAS_CORE=keep``, ``OPENBLAS_CORETYPE``, a set the CPU cannot run)."""

from __future__ import annotations

import ctypes
import os

import pytest
from helpers import python_prints, run_python
from jitgrad.kernels import blas_core

_FLAGS = blas_core.cpu_info().get("flags", set())


def _has_set(core: str) -> bool:
    lib = blas_core._numpy_openblas()
    if lib is None or not blas_core.REQUIRED_FLAGS[core] <= _FLAGS:
        return False
    try:
        ctypes.c_char.in_dll(lib, "gotoblas_" + core.upper())
        ctypes.c_void_p.in_dll(lib, "gotoblas")
    except ValueError:
        return False
    return hasattr(lib, "gotoblas_dynamic_init")


def _zen4(**extra) -> dict:
    return {"vendor": "AuthenticAMD", "family": 25,
            "flags": {"avx", "avx2", "fma", "avx512f", "avx512bw"} | extra.pop("more", set()),
            **extra}


def test_the_rule_asks_for_haswell_on_zen4_only():
    assert blas_core.preferred_core(_zen4()) == "Haswell"
    assert blas_core.preferred_core(_zen4(family=26)) is None  # Zen 5: full-width AVX-512
    no512 = _zen4()
    no512["flags"] = {"avx", "avx2", "fma"}  # Zen 3: OpenBLAS picks AVX2 kernels itself
    assert blas_core.preferred_core(no512) is None
    assert blas_core.preferred_core(_zen4(vendor="GenuineIntel")) is None
    assert blas_core.preferred_core({}) is None


def test_cpu_info_reads_the_first_processor(tmp_path):
    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
            "flags\t\t: fpu avx2 fma avx512f\n\nprocessor\t: 1\nvendor_id\t: Other\n")
    (tmp_path / "cpuinfo").write_text(text)
    info = blas_core.cpu_info(str(tmp_path / "cpuinfo"))
    assert info == {"vendor": "AuthenticAMD", "family": 25,
                    "flags": {"fpu", "avx2", "fma", "avx512f"}}
    assert blas_core.cpu_info(str(tmp_path / "missing")) == {}


def test_this_process_runs_the_set_it_reports():
    core, why = blas_core.blas_core()
    lib = blas_core._numpy_openblas()
    if lib is None:
        assert core is None
        return
    assert core == blas_core._corename(lib) and why
    if blas_core._state["switched"]:
        assert why.startswith(("jitgrad's choice", "JITGRAD_OPENBLAS_CORE"))


_CHECK = f"""
import sys
import numpy as np, jitgrad as jg
TESTS = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r}
from jitgrad.kernels.blas_core import blas_core
core, why = blas_core()
rng = np.random.default_rng(0)
for dt, tol in ((np.float32, 1e-4), (np.float64, 1e-12)):
    for m, k, n in ((1024, 784, 256), (3, 5, 7), (128, 256, 10)):
        a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        assert np.abs(a @ b - ref).max() <= tol * np.abs(ref).max(), (dt, m, k, n)
# a compiled training step (head, GEMMs, update) equals eager mode bit for bit
jg.manual_seed(0)
models = [jg.nn.Sequential(jg.nn.Linear(64, 128), jg.nn.ReLU(), jg.nn.Linear(128, 10))
          for _ in range(2)]
models[1].load_state_dict(models[0].state_dict())
sys.path.insert(0, TESTS)
from helpers import cross_entropy_step
eager, compiled = (cross_entropy_step(m, jg.optim.SGD(m.parameters(), lr=0.1)) for m in models)
compiled = jg.compile(compiled)
x, y = jg.randn(300, 64), jg.randint(0, 10, (300,))
for _ in range(3):
    assert eager(x, y)._data.tobytes() == compiled(x, y)._data.tobytes()
for p, q in zip(models[0].parameters(), models[1].parameters()):
    assert p._data.tobytes() == q._data.tobytes()
print(core, why.split()[0])
"""


@pytest.mark.parametrize("core", ["Haswell", "SkylakeX"])
def test_an_asked_set_runs_and_products_stay_right(core):
    if not _has_set(core):
        pytest.skip(f"this CPU or NumPy's OpenBLAS has no {core} set to select")
    out = python_prints(_CHECK, JITGRAD_OPENBLAS_CORE=core)
    assert out[0].lower() == core.lower()
    assert out[1] in ("JITGRAD_OPENBLAS_CORE", "OpenBLAS's")  # switched, or its own pick


def test_keep_and_a_users_coretype_leave_openblas_alone():
    if blas_core._numpy_openblas() is None:
        pytest.skip("NumPy's BLAS is no OpenBLAS")
    lib = blas_core._numpy_openblas()._name
    plain = python_prints(  # NumPy alone: OpenBLAS's own pick
        "import ctypes, numpy\n"
        f"lib = ctypes.CDLL({lib!r})\n"
        "names = ('scipy_openblas_get_corename64_', 'scipy_openblas_get_corename',"
        " 'openblas_get_corename64_', 'openblas_get_corename')\n"
        "f = next(getattr(lib, n) for n in names if hasattr(lib, n))\n"
        "f.restype = ctypes.c_char_p\nprint(f().decode())")[0]
    code = ("import jitgrad\nfrom jitgrad.kernels.blas_core import blas_core\n"
            "print(blas_core()[0])")
    assert python_prints(code, JITGRAD_OPENBLAS_CORE="keep") == [plain]
    if _has_set("Haswell"):  # the user's OPENBLAS_CORETYPE wins over jitgrad's choice
        assert python_prints(code, OPENBLAS_CORETYPE="SandyBridge",
                             JITGRAD_OPENBLAS_CORE="Haswell") == ["Sandybridge"]


def test_a_set_the_cpu_cannot_run_warns_and_keeps_openblas_choice():
    code = ("import warnings\nwarnings.simplefilter('error')\nimport jitgrad")
    r = run_python(code, JITGRAD_OPENBLAS_CORE="Pentium4")
    assert r.returncode != 0 and "JITGRAD_OPENBLAS_CORE='Pentium4'" in r.stderr
    r = run_python("import jitgrad\nfrom jitgrad.kernels.blas_core import blas_core\n"
                   "print(blas_core()[1])", JITGRAD_OPENBLAS_CORE="Pentium4")
    assert r.returncode == 0 and "not usable" in r.stdout and "RuntimeWarning" in r.stderr


def test_select_core_switches_both_ways_and_back():
    if not (_has_set("Haswell") and _has_set("SkylakeX")):
        pytest.skip("needs both kernel sets (an AVX-512 CPU, NumPy's scipy-openblas)")
    import numpy as np

    lib = blas_core._numpy_openblas()
    before = blas_core._corename(lib)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((300, 200)), rng.standard_normal((200, 100))
    ref = a @ b
    try:
        for core in ("SkylakeX", "Haswell", "SkylakeX"):
            assert blas_core.select_core(core)
            assert blas_core._corename(lib) == core
            np.testing.assert_allclose(a.astype(np.float32) @ b.astype(np.float32), ref,
                                       rtol=1e-4, atol=1e-3)
        assert not blas_core.select_core("Pentium4")
        assert blas_core._corename(lib) == "SkylakeX"  # unchanged by a set it cannot select
    finally:
        assert blas_core.select_core(before)
    assert blas_core._corename(lib) == before
