"""The device API: jitgrad.device, Tensor.device / .cuda() / .cpu() / .to(), device= on
factories and layers, Module.to, jitgrad.cuda.*, and PyTorch's errors (nothing changed)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as torch
import jitgrad.nn as nn


def test_device_objects_parse_print_and_compare_like_pytorch():
    assert str(torch.device("cuda")) == "cuda" and str(torch.device("cuda:0")) == "cuda:0"
    assert repr(torch.device("cuda", 0)) == "device(type='cuda', index=0)"
    assert repr(torch.device("cpu")) == "device(type='cpu')"
    assert torch.device("cuda:0") == "cuda:0" and torch.device(0) == torch.device("cuda:0")
    assert torch.device(torch.device("cpu")) == "cpu"
    assert len({torch.device("cuda:0"), torch.device("cuda", 0)}) == 1
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        torch.device("gpu")
    with pytest.raises(RuntimeError, match="Invalid device string"):
        torch.device("cuda:x")


def test_cuda_module_reports_the_device():
    assert torch.cuda.is_available() and torch.cuda.device_count() == 1
    assert torch.cuda.current_device() == 0
    torch.cuda.synchronize()
    assert isinstance(torch.cuda.get_device_name(), str)
    assert torch.cuda.is_simulated() == (os.environ.get("JITGRAD_TEST_GPU") != "1")


def test_tensors_move_between_devices_and_keep_values():
    x = torch.arange(6.0).reshape(2, 3)
    y = x.cuda()
    assert y.device == torch.device("cuda:0") and y.is_cuda and not x.is_cuda
    assert str(y.device) == "cuda:0" and y.get_device() == 0 and x.get_device() == -1
    assert x.to("cuda").device == "cuda:0" and y.to("cpu").device == "cpu"
    assert y.cuda() is y and x.cpu() is x and y.to("cuda:0") is y
    z = y.to("cpu", torch.float64)
    assert z.device == "cpu" and z.dtype == torch.float64
    np.testing.assert_array_equal(y.cpu().numpy(), x.numpy())
    assert "device='cuda:0'" in repr(y)
    assert x.to(y).device == "cuda:0"  # to(other): its device and dtype


def test_factories_take_device_and_like_factories_keep_it():
    for t in (torch.zeros(2, 3, device="cuda"), torch.ones(2, device=torch.device("cuda")),
              torch.full((2,), 3.0, device="cuda"), torch.arange(4, device="cuda"),
              torch.randn(3, device="cuda"), torch.rand(3, device="cuda"),
              torch.eye(2, device="cuda"), torch.tensor([1.0, 2.0], device="cuda"),
              torch.empty(2, device="cuda:0"), torch.linspace(0, 1, 5, device="cuda"),
              torch.randint(0, 5, (3,), device="cuda")):
        assert t.device == "cuda:0", t
    c = torch.ones(2, 2, device="cuda")
    for t in (torch.zeros_like(c), torch.ones_like(c), torch.empty_like(c),
              torch.full_like(c, 2.0), c.new_zeros(3), c.new_ones(2), c.new_tensor([1.0]),
              c.new_full((2,), 1.0)):
        assert t.device == "cuda:0", t
    assert torch.zeros_like(c, device="cpu").device == "cpu"
    torch.manual_seed(3)
    a = torch.randn(5, device="cuda")
    torch.manual_seed(3)
    b = torch.randn(5)
    np.testing.assert_array_equal(a.cpu().numpy(), b.numpy())  # same numbers on every device


def test_mixing_devices_raises_pytorchs_error_and_changes_nothing():
    x = torch.ones(3, requires_grad=True)
    y = torch.ones(3, device="cuda")
    msg = ("Expected all tensors to be on the same device, but found at least two devices, "
           "cuda:0 and cpu!")
    for fn in (lambda: x + y, lambda: y * x, lambda: torch.matmul(y, x),
               lambda: torch.where(y > 0, x, y)):
        with pytest.raises(RuntimeError) as e:
            fn()
        assert str(e.value) == msg
    with pytest.raises(RuntimeError, match="same device"):
        y.add_(torch.ones(3))
    np.testing.assert_array_equal(y.cpu().numpy(), np.ones(3))
    assert x.grad is None and x.grad_fn is None and y._version == 0


def test_a_cpu_scalar_tensor_combines_with_a_cuda_tensor():
    s = torch.tensor(2.0, requires_grad=True)
    y = torch.ones(3, device="cuda", requires_grad=True)
    z = (y * s).sum()
    assert z.device == "cuda:0"
    z.backward()
    assert s.grad.device == "cpu" and s.grad.item() == 3.0
    assert y.grad.device == "cuda:0"


def test_numpy_of_a_cuda_tensor_raises_pytorchs_error():
    y = torch.ones(2, device="cuda")
    msg = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
           "tensor to host memory first.")
    with pytest.raises(TypeError) as e:
        y.numpy()
    assert str(e.value) == msg
    with pytest.raises(TypeError):
        np.asarray(y)
    assert y.tolist() == [1.0, 1.0]  # values reach Python as PyTorch lets them


def test_modules_move_and_layers_take_device():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    params = list(m.parameters())
    assert m.cuda() is m and all(p.device == "cuda:0" for p in m.parameters())
    assert [id(p) for p in m.parameters()] == [id(p) for p in params]  # same Parameters
    m.to("cpu")
    assert all(p.device == "cpu" for p in m.parameters())
    m.to(torch.device("cuda"), torch.float64)
    assert all(p.device == "cuda:0" and p.dtype == torch.float64 for p in m.parameters())
    m.cpu()
    assert nn.Linear(2, 3, device="cuda").weight.device == "cuda:0"
    assert nn.Embedding(5, 2, device="cuda").weight.device == "cuda:0"
    assert nn.Conv2d(1, 2, 3, device="cuda").weight.device == "cuda:0"


def test_state_dict_round_trips_across_devices():
    torch.manual_seed(0)
    src = nn.Linear(3, 2)
    dst = nn.Linear(3, 2).cuda()
    dst.load_state_dict(src.state_dict())  # CPU state into CUDA parameters
    assert dst.weight.device == "cuda:0"
    np.testing.assert_array_equal(dst.weight.detach().cpu().numpy(),
                                  src.weight.detach().numpy())
    sd = dst.state_dict()
    assert all(v.device == "cuda:0" for v in sd.values())


def test_to_device_is_differentiable_both_ways():
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x.cuda()
    assert y.grad_fn.name() == "ToCopyBackward0"
    (y * y).sum().backward()
    assert x.grad.device == "cpu"
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, -4.0, 6.0])
    w = torch.ones(2, device="cuda", requires_grad=True)
    (w.cpu() * 3.0).sum().backward()
    assert w.grad.device == "cuda:0" and w.grad.tolist() == [3.0, 3.0]


def test_without_cuda_the_api_says_so():
    code = ("import jitgrad as t\n"
            "print(t.cuda.is_available(), t.cuda.device_count())\n"
            "try:\n    t.ones(2).cuda()\nexcept RuntimeError as e:\n    print('RAISED', e)\n"
            "try:\n    t.zeros(2, device='cuda')\nexcept RuntimeError as e:\n    print('RAISED')\n"
            "print(t.cuda.memory_allocated(), t.cuda.max_memory_allocated(), "
            "t.cuda.memory_stats())\n"
            "for f in (t.cuda.Event, t.cuda.Stream, t.cuda.reset_peak_memory_stats,\n"
            "          t.cuda.mem_get_info, t.cuda.get_device_properties, t.ones(2).pin_memory,"
            "\n          lambda: t.zeros(2, pin_memory=True)):\n"
            "    try:\n        f()\n    except RuntimeError as e:\n        print('RAISED', e)\n"
            "import warnings\nfrom jitgrad.utils.data import DataLoader\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    b = list(DataLoader([1.0, 2.0], batch_size=2, pin_memory=True))\n"
            "print(b[0].is_pinned(), w[0].message)\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # a GPU machine too: no device visible
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "False 0"
    assert lines[1].startswith("RAISED Torch not compiled with CUDA enabled")
    assert lines[2] == "RAISED"
    assert lines[3] == "0 0 {}"  # PyTorch's statistics before CUDA is initialised
    assert all(line.startswith("RAISED Torch not compiled with CUDA enabled")
               for line in lines[4:9]), lines
    assert lines[9:11] == ["RAISED Cannot access accelerator device when none is available."] * 2
    assert lines[11] == ("False 'pin_memory' argument is set as true but no accelerator is "
                         "found, then device pinned memory won't be used.")
