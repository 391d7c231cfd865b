"""The examples run as a user runs them (a fresh interpreter) and print what they promise."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import EXAMPLES, import_example


def _run(script: str, *args: str, timeout: int = 300) -> str:
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


def test_compile_inspect_shows_graphs_plan_and_source():
    out = _run("compile_inspect.py")
    for what in ("-- traced graph --", "-- backward graph", "fused loop over [1000]",
                 "def kernel(", "write model.0.weight <-",
                 "opt.state[model.0.weight].momentum_buffer", "generated kernel(s)"):
        assert what in out, what


def test_hooks_and_custom_function_examples_run():
    assert _run("hooks.py").strip()
    assert _run("custom_function.py").strip()


def test_train_digits_smoke():
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    out = _run("train_digits.py", "--epochs", "1", "--plot", "")
    for line in ("MLP  eager", "MLP  compiled", "CNN  eager", "CNN  compiled",
                 "compiled speed-up"):
        assert line in out, line


@pytest.mark.slow
def test_train_digits_reaches_the_promised_accuracy():
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    results = import_example("train_digits").main(["--plot", ""])
    for mode in ("eager", "compiled"):
        assert results[("mlp", mode)]["accuracy"] >= 0.95
        assert results[("cnn", mode)]["accuracy"] >= 0.97
