"""Packaging guardrails: jitgrad.kernels is the installed name of kernels/, import is light,
and the generated kernel math is up to date."""

from __future__ import annotations

import re
import subprocess
import sys

import jitgrad.kernels
from helpers import ROOT


def test_kernels_installed_under_jitgrad():
    assert jitgrad.kernels.__name__ == "jitgrad.kernels"


def test_every_kernels_package_is_listed_in_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    for init in (ROOT / "kernels").rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT / "kernels")
        pkg = ".".join(("jitgrad", "kernels", *rel.parts)) if rel.parts else "jitgrad.kernels"
        assert f'"{pkg}"' in text, f"{pkg} missing from [tool.setuptools] packages"
    for init in (ROOT / "jitgrad").rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT)
        assert f'"{".".join(rel.parts)}"' in text, f"{rel} missing from packages"


def test_kernels_never_import_themselves_as_top_level_kernels():
    bad = re.compile(r"^\s*(import kernels\b|from kernels\b)", re.M)
    for path in list((ROOT / "kernels").rglob("*.py")) + list((ROOT / "jitgrad").rglob("*.py")):
        assert not bad.search(path.read_text()), path


def test_generated_kernel_math_is_up_to_date():
    from jitgrad.kernels.vmath.__main__ import generate_math

    for dt in ("f32", "f64"):
        path = ROOT / "kernels" / "vmath" / f"{dt}.py"
        assert path.read_text() == generate_math(dt), (
            f"{path} is stale: run `python -m jitgrad.kernels.vmath`")


def test_import_is_light():
    code = ("import sys, time; t = time.perf_counter(); import jitgrad; "
            "dt = time.perf_counter() - t; "
            "print(int('numba' in sys.modules), int('jitgrad.compiler.executable' in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    numba_loaded, kernels_loaded = r.stdout.split()
    assert kernels_loaded == "0"  # no code generator (nor compile) at import
    assert numba_loaded == "0"
