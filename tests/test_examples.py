"""The examples run as a user runs them (a fresh interpreter) and print what they promise."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
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


def test_train_digits_smoke_logs_a_line_per_epoch_and_writes_the_plot(tmp_path):
    """``make demo > log 2>&1``: no progress bar in a file (tqdm's carriage-return redraws
    made a line per step), a line per epoch instead; the loss-curve PNG is written."""
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    pytest.importorskip("matplotlib")
    log, png = tmp_path / "log", tmp_path / "loss.png"
    with open(log, "w") as f:
        proc = subprocess.run([sys.executable, str(EXAMPLES / "train_digits.py"), "--epochs",
                               "1", "--plot", str(png)], stdout=f, stderr=subprocess.STDOUT,
                              timeout=300)
    out = log.read_text()
    assert proc.returncode == 0, out[-3000:]
    for line in ("MLP  eager", "MLP  compiled", "CNN  eager", "CNN  compiled",
                 "compiled speed-up", "epoch  1/1: mean loss", f"loss curve written to {png}"):
        assert line in out, line
    assert "\r" not in out and "it/s" not in out, out[-2000:]
    # a line per epoch of each run, the results, the speed-ups, the plot
    assert len(out.splitlines()) == 4 + 4 + 2 + 1, out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_train_digits_reaches_the_promised_accuracy():
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    results = import_example("train_digits").main(["--plot", ""])
    for mode in ("eager", "compiled"):
        assert results[("mlp", mode)]["accuracy"] >= 0.95
        assert results[("cnn", mode)]["accuracy"] >= 0.97


def test_train_gpt_loss_decreases_eager_and_compiled_alike():
    """The GPT example's tiny config trains eagerly and with the step compiled: the loss
    falls, and the two runs agree. Not bit for bit: a compiled AdamW step takes PyTorch's
    capturable update (the bias corrections as tensor ops on the step count, so the count is
    not baked into the plan), which rounds differently from eager's Python-float update by an
    ulp or so per step (docs/architecture.md, "Eager == compiled"); the forward and backward
    are eager's bits, so the first loss (no update yet) is identical."""
    gpt = import_example("train_gpt")
    args = gpt.parse_args(["--max-iters", "40", "--eval-interval", "0", "--batch-size", "8",
                           "--block-size", "16", "--n-layer", "1", "--n-embd", "32",
                           "--n-head", "2", "--sample-tokens", "0", "--plot", ""])
    eager, compiled = gpt.train(args, compiled=False), gpt.train(args, compiled=True)
    le, lc = np.array(eager["losses"]), np.array(compiled["losses"])
    assert le[0] == lc[0]
    np.testing.assert_allclose(lc, le, rtol=1e-5, atol=0)
    for losses in (le, lc):
        assert losses[-5:].mean() < losses[:5].mean() - 0.5, losses
    assert compiled["step"].stats["traces"] == 2  # the first step, then with AdamW's state


def test_train_gpt_text_without_python_license_and_its_main(tmp_path, capsys):
    """Where a distribution ships no LICENSE.txt the text is the standard library's
    docstrings; ``main`` trains, prints the agreement of the two runs, samples, plots."""
    gpt = import_example("train_gpt")
    text = gpt.load_text(str(tmp_path / "missing.txt"))
    assert len(text) > 10_000 and len(set(text)) > 60
    png = tmp_path / "gpt.png"
    results = gpt.main(["--max-iters", "6", "--eval-interval", "3", "--eval-iters", "1",
                        "--batch-size", "4", "--block-size", "8", "--n-layer", "1",
                        "--n-embd", "16", "--n-head", "2", "--sample-tokens", "20",
                        "--plot", str(png)])
    out = capsys.readouterr().out
    assert "eager vs compiled: losses" in out and "sample:\n" in out
    assert "compiled step     3: train loss" in out
    sample = out.split("sample:\n", 1)[1]
    for end in ("\nloss curve written", "\n(matplotlib not installed"):  # CI: no examples extra
        sample = sample.split(end, 1)[0]
    assert len(sample) == 21 and set(sample) <= set(results["eager"]["data"].stoi)
    if importlib.util.find_spec("matplotlib"):
        assert png.read_bytes()[:4] == b"\x89PNG"
