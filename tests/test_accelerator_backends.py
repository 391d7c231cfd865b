"""``jitgrad.accelerator`` (consistent with ``jitgrad.cuda``: the simulator counts as an
accelerator), ``jitgrad.backends`` flags and availability, ``set_float32_matmul_precision``,
and ``jitgrad.bfloat16``'s error. Without CUDA (a subprocess) jitgrad answers exactly as
PyTorch's CPU build does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import jitgrad
import jitgrad.backends.cudnn as cudnn


def test_accelerator_is_cuda_when_cuda_is_available():
    acc = jitgrad.accelerator.current_accelerator()
    assert jitgrad.accelerator.is_available() == jitgrad.cuda.is_available() is True
    assert acc == jitgrad.device("cuda") and acc.index is None
    assert repr(acc) == "device(type='cuda')"
    assert jitgrad.accelerator.current_accelerator(check_available=True) == acc
    assert jitgrad.accelerator.device_count() == jitgrad.cuda.device_count() == 1
    assert jitgrad.accelerator.current_device_index() == 0
    jitgrad.accelerator.synchronize()
    jitgrad.accelerator.synchronize(0)
    jitgrad.accelerator.synchronize("cuda:0")
    jitgrad.accelerator.set_device_index(0)
    jitgrad.accelerator.set_device_index(jitgrad.device("cuda:0"))
    jitgrad.accelerator.set_device_index(-1)  # negative: no-op, as PyTorch's
    with jitgrad.accelerator.device_index(0):
        assert jitgrad.accelerator.current_device_index() == 0
    with jitgrad.accelerator.device_index(None):
        pass
    jitgrad.accelerator.empty_cache()


def test_the_accelerator_device_places_tensors_and_modules():
    device = jitgrad.accelerator.current_accelerator()
    model = jitgrad.nn.Linear(3, 2).to(device)
    x = jitgrad.rand(4, 3, device=device)
    assert model(x).device == "cuda:0"
    assert jitgrad.ones(2).to(device.type).device == "cuda:0"  # the .type form of scripts


@pytest.mark.parametrize("call,err,msg", [
    (lambda a: a.set_device_index("cuda"), ValueError,
     "Expected a torch.device with a specified index or an integer, but got:cuda"),
    (lambda a: a.synchronize("cpu"), ValueError, "cpu doesn't match the current accelerator "
     "cuda."),
    (lambda a: a.set_device_index(1), RuntimeError, "invalid device ordinal"),
])
def test_accelerator_errors_as_pytorch(call, err, msg):
    with pytest.raises(err, match=msg):
        call(jitgrad.accelerator)


def test_deprecated_names_warn_as_pytorch():
    with pytest.warns(FutureWarning, match="Use `current_device_index` instead."):
        assert jitgrad.accelerator.current_device_idx() == 0
    with pytest.warns(FutureWarning, match="Use `set_device_index` instead."):
        jitgrad.accelerator.set_device_idx(0)


#: a script run by jitgrad and by PyTorch with no CUDA device: the outputs must be equal
_NO_CUDA_SCRIPT = textwrap.dedent("""
    import torch
    a = torch.accelerator
    print(a.is_available(), a.current_accelerator(), a.device_count())
    device = a.current_accelerator() if a.is_available() else torch.device("cpu")
    print(device, torch.ones(2).to(device).device)
    for call in (a.current_device_index, a.synchronize, lambda: a.set_device_index(0),
                 lambda: a.synchronize("cuda")):
        try:
            call()
        except Exception as e:
            print(type(e).__name__, e)
    print(torch.backends.mps.is_available(), torch.backends.mps.is_built(),
          torch.backends.cudnn.is_available(), torch.backends.cudnn.version())
    print(torch.cuda.is_bf16_supported())
""")


def _run(script: str, as_torch: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # a GPU machine too: no device visible
    code = script if as_torch == "torch" else script.replace("import torch",
                                                             "import jitgrad as torch")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_without_cuda_jitgrad_answers_as_pytorchs_cpu_build():
    ours = _run(_NO_CUDA_SCRIPT, "jitgrad")
    assert ours.splitlines()[0] == "False None 0"
    assert "RuntimeError Cannot access accelerator device when none is available." in ours
    assert "RuntimeError Accelerator expected" in ours
    pytest.importorskip("torch")
    assert ours == _run(_NO_CUDA_SCRIPT, "torch")


def test_backends_availability_as_pytorchs_cpu_build():
    torch = pytest.importorskip("torch")
    assert jitgrad.backends.mps.is_available() is torch.backends.mps.is_available() is False
    assert jitgrad.backends.mps.is_built() is torch.backends.mps.is_built()
    assert jitgrad.backends.cudnn.version() is None
    # jitgrad uses neither oneDNN nor OpenMP (PyTorch's CPU build does)
    assert not jitgrad.backends.mkldnn.is_available()
    assert not jitgrad.backends.openmp.is_available()


def test_cuda_is_built_when_its_packages_are_installed():
    # numba-cuda is a dev dependency: the simulator runs these tests with it
    assert jitgrad.backends.cuda.is_built() is True


def test_flags_have_pytorchs_defaults_are_stored_and_change_nothing(rng):
    torch = pytest.importorskip("torch")
    matmul = jitgrad.backends.cuda.matmul
    assert matmul.allow_tf32 is torch.backends.cuda.matmul.allow_tf32 is False
    for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(cudnn, name) is getattr(torch.backends.cudnn, name), name
    a = jitgrad.tensor(rng.standard_normal((8, 8)).astype("float32"))
    before = (a @ a).numpy()
    saved = matmul.allow_tf32, cudnn.benchmark, cudnn.deterministic
    try:
        jitgrad.backends.cuda.matmul.allow_tf32 = True  # as nanoGPT's train.py sets them
        jitgrad.backends.cudnn.allow_tf32 = True
        cudnn.benchmark, cudnn.deterministic = True, True
        assert jitgrad.backends.cuda.matmul.allow_tf32 and jitgrad.backends.cudnn.benchmark
        assert ((a @ a).numpy() == before).all()  # float32 stays float32
    finally:
        matmul.allow_tf32, cudnn.benchmark, cudnn.deterministic = saved


def test_cudnn_flags_context_sets_and_restores():
    with cudnn.flags(enabled=False, deterministic=True):
        assert cudnn.enabled is False and cudnn.deterministic is True
        assert cudnn.benchmark is False and cudnn.allow_tf32 is True
    assert cudnn.enabled is True and cudnn.deterministic is False
    with pytest.raises(KeyError):
        with cudnn.flags(benchmark=True):
            raise KeyError("inside")
    assert cudnn.benchmark is False


def test_float32_matmul_precision_is_stored_and_checked_as_pytorch():
    assert jitgrad.get_float32_matmul_precision() == "highest"
    try:
        jitgrad.set_float32_matmul_precision("high")
        assert jitgrad.get_float32_matmul_precision() == "high"
        with pytest.warns(UserWarning, match="x is not one of 'highest', 'high', or 'medium'"):
            jitgrad.set_float32_matmul_precision("x")
        assert jitgrad.get_float32_matmul_precision() == "high"
    finally:
        jitgrad.set_float32_matmul_precision("highest")


def test_bfloat16_can_be_named_but_not_used():
    # a dtype table naming it (nanoGPT's train.py) works; using it says what is missing
    table = {"float32": jitgrad.float32, "bfloat16": jitgrad.bfloat16}
    assert repr(table["bfloat16"]) == "jitgrad.bfloat16" and jitgrad.bfloat16.itemsize == 2
    assert jitgrad.bfloat16 != jitgrad.float16 and jitgrad.ones(1).dtype != jitgrad.bfloat16
    x = jitgrad.ones(2, requires_grad=True)
    model = jitgrad.nn.Linear(2, 2)
    w_before = model.weight.detach().numpy().copy()
    uses = [lambda: jitgrad.zeros(2, dtype=jitgrad.bfloat16), lambda: x.to(jitgrad.bfloat16),
            lambda: x.bfloat16(), lambda: model.bfloat16(), lambda: model.to(jitgrad.bfloat16),
            lambda: jitgrad.tensor([1.0], dtype="torch.bfloat16")]
    for use in uses:
        with pytest.raises(TypeError, match="jitgrad.bfloat16 is not supported: NumPy has no "
                                            "bfloat16 type"):
            use()
    assert model.weight.dtype == jitgrad.float32
    assert (model.weight.detach().numpy() == w_before).all()
    assert x.grad is None and x.grad_fn is None
    assert jitgrad.cuda.is_bf16_supported() is False


def test_importing_jitgrad_does_not_import_cuda():
    code = ("import sys, jitgrad\n"
            "jitgrad.backends.cuda.is_built(); jitgrad.backends.mps.is_available()\n"
            "print(any(m.startswith(('numba.cuda', 'cupy', 'torch')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "False", out.stderr



@pytest.mark.parametrize("module", ["jitgrad.accelerator", "jitgrad.backends",
                                    "jitgrad.backends.cudnn", "jitgrad.devices"])
def test_docstring_examples(module):
    import doctest
    import importlib

    assert doctest.testmod(importlib.import_module(module)).failed == 0
