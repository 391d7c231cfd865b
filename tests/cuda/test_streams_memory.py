"""What GPU scripts call around their maths: events and streams (timing, waiting, ``with
torch.cuda.stream(s)``), memory statistics, device properties, pinned host memory and the
legacy ``torch.cuda.FloatTensor`` types -- PyTorch's names, semantics and errors."""

from __future__ import annotations

import gc
import threading
import time
import warnings

import numpy as np
import pytest

import jitgrad as torch
from jitgrad.utils.data import DataLoader, TensorDataset

# -- events --------------------------------------------------------------------------------

def test_events_time_the_work_between_them():
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    assert start.query() and not start._recorded  # not recorded: complete, as PyTorch's
    start.synchronize()  # nothing to wait for
    x = torch.ones(64, device="cuda")
    start.record()
    y = (x * 3.0).sum()
    time.sleep(0.02)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert 15.0 <= ms < 10_000.0 and isinstance(ms, float)
    assert y.item() == 192.0 and end.query()
    assert end.elapsed_time(start) <= 0.0  # from end back to start


def test_event_errors_are_pytorchs():
    timed, untimed = torch.cuda.Event(enable_timing=True), torch.cuda.Event()
    other = torch.cuda.Event(enable_timing=True)
    with pytest.raises(ValueError, match=r"^Both events must be recorded before calculating "
                                         r"elapsed time\.$"):
        timed.elapsed_time(other)
    timed.record()
    untimed.record()
    with pytest.raises(ValueError, match=r"^Both events must be created with argument "
                                         r"'enable_timing=True'\.$"):
        timed.elapsed_time(untimed)
    with pytest.raises(TypeError, match="must be torch.cuda.Event"):
        timed.elapsed_time(1.0)
    with pytest.raises(TypeError, match="must be torch.cuda.Stream"):
        timed.record(stream="s")


# -- streams -------------------------------------------------------------------------------

def test_the_current_stream_follows_stream_blocks_per_thread():
    default = torch.cuda.default_stream()
    assert torch.cuda.current_stream() == default == torch.cuda.default_stream(0)
    assert default.cuda_stream == (0 if torch.cuda.is_simulated() else default.cuda_stream)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    assert s1 != s2 and s1 != default and len({s1, s2, default}) == 3
    assert s1.device == "cuda:0" and "cuda_stream=" in repr(s1)
    seen = []
    with torch.cuda.stream(s1) as entered:
        assert entered is s1 and torch.cuda.current_stream() == s1
        with torch.cuda.stream(s2):
            assert torch.cuda.current_stream() == s2
            t = threading.Thread(target=lambda: seen.append(torch.cuda.current_stream()))
            t.start()
            t.join()
        assert torch.cuda.current_stream() == s1
        with torch.cuda.stream(None):  # PyTorch: a no-op
            assert torch.cuda.current_stream() == s1
        with s2:  # a stream is its own context
            assert torch.cuda.current_stream() == s2
        assert torch.cuda.current_stream() == s1
    assert torch.cuda.current_stream() == default
    assert seen == [default]  # another thread keeps its own current stream
    torch.cuda.set_stream(s2)
    try:
        assert torch.cuda.current_stream() == s2
    finally:
        torch.cuda.set_stream(default)
    assert torch.cuda.current_stream() == default
    with pytest.raises(TypeError, match="expected a torch.cuda.Stream"):
        torch.cuda.stream("s1")
    with pytest.raises(ValueError, match="Expected a cuda device"):
        torch.cuda.Stream(device="cpu")


def test_work_on_a_stream_gives_the_default_streams_results_in_order():
    x = torch.linspace(-2.0, 2.0, 37, device="cuda", requires_grad=True)
    ref = torch.tanh(x * 1.5).sum()
    ref.backward()
    g_ref = x.grad.cpu().numpy().copy()
    x.grad = None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = torch.tanh(x * 1.5).sum()
        y.backward()
        done = s.record_event()
    torch.cuda.current_stream().wait_stream(s)
    done.wait()  # the current stream waits for the event (already in order here)
    s.synchronize()
    assert s.query() and done.query()
    assert y.item() == ref.item()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), g_ref)
    ev = torch.cuda.Event()
    assert s.record_event(ev) is ev
    s.wait_event(ev)
    with pytest.raises(TypeError, match="must be torch.cuda.Event"):
        s.wait_event(s)
    with pytest.raises(TypeError, match="must be torch.cuda.Stream"):
        s.wait_stream(ev)


# -- memory statistics ---------------------------------------------------------------------

def test_memory_allocated_counts_live_device_buffers_once():
    gc.collect()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    assert torch.cuda.max_memory_allocated() == base
    x = torch.zeros(1000, device="cuda")
    grown = torch.cuda.memory_allocated() - base
    assert 4000 <= grown <= 4096  # a GPU's pool rounds a block up to 512 bytes
    views = [x[1:], x.view(10, 100), x.t() if x.dim() == 2 else x[::2]]
    assert torch.cuda.memory_allocated() - base == grown  # views allocate nothing
    tmp = torch.ones(2000, device="cuda")
    peak = torch.cuda.max_memory_allocated()
    assert peak - base >= grown + 8000
    del tmp, views
    gc.collect()
    assert torch.cuda.memory_allocated() - base == grown
    assert torch.cuda.max_memory_allocated() == peak  # a peak stays until it is reset
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()
    del x
    gc.collect()
    assert torch.cuda.memory_allocated() == base
    assert torch.cuda.memory_reserved() >= torch.cuda.memory_allocated()
    assert torch.cuda.max_memory_reserved() >= torch.cuda.memory_reserved()
    torch.cuda.reset_max_memory_allocated()
    stats = torch.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.cuda.memory_allocated()
    assert stats["allocated_bytes.all.peak"] >= stats["allocated_bytes.all.current"]
    assert set(stats) == {"allocated_bytes.all.current", "allocated_bytes.all.peak",
                          "reserved_bytes.all.current", "reserved_bytes.all.peak"}


def test_a_training_step_peak_covers_its_temporaries():
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).cuda()
    x = torch.randn(8, 16, device="cuda")
    gc.collect()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    model(x).square().mean().backward()
    gc.collect()
    after = torch.cuda.memory_allocated()
    grads = sum(p.grad.numel() * 4 for p in model.parameters())
    assert after - before >= grads  # the gradients stay
    assert torch.cuda.max_memory_allocated() >= after + 8 * 32 * 4  # activations came and went


def test_device_properties_and_free_memory():
    p = torch.cuda.get_device_properties(0)
    assert p.name == torch.cuda.get_device_name()
    assert (p.major, p.minor) == torch.cuda.get_device_capability()
    assert p.total_memory > 0 and p.multi_processor_count >= 1 and p.warp_size == 32
    assert "_CudaDeviceProperties(name=" in repr(p)
    assert torch.cuda.get_device_properties("cuda:0").name == p.name
    free, total = torch.cuda.mem_get_info()
    assert 0 < free <= total and total == p.total_memory
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.cuda.get_device_properties(1)
    with torch.cuda.device(0) as d:
        assert d.idx == 0 and torch.cuda.current_device() == 0
    with torch.cuda.device(-1):
        pass
    torch.cuda.set_device(0)


# -- pinned host memory ----------------------------------------------------------------------

def test_pin_memory_copies_into_pinned_memory_and_stays_differentiable():
    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p[1].is_pinned() and p.t().is_pinned() and not x.is_pinned()
    assert p.device == "cpu" and p.dtype == x.dtype and p.grad_fn.name() == "PinMemoryBackward0"
    np.testing.assert_array_equal(p.detach().numpy(), x.detach().numpy())
    q = p.detach()
    assert q.pin_memory() is q  # already pinned
    y = p.to("cuda", non_blocking=True)
    (y * torch.tensor([1.0, 2.0, 3.0], device="cuda")).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 2.0, 3.0]] * 2)
    assert not torch.ones(2, device="cuda").is_pinned()


def test_pinning_a_cuda_tensor_raises_and_changes_nothing():
    c = torch.ones(3, device="cuda")
    with pytest.raises(RuntimeError, match="^cannot pin 'jitgrad.cuda.FloatTensor' only "
                                           "dense CPU tensors can be pinned$"):
        c.pin_memory()
    with pytest.raises(RuntimeError, match="^Only dense CPU tensors can be pinned$"):
        torch.zeros(2, device="cuda", pin_memory=True)
    assert c.tolist() == [1.0, 1.0, 1.0]


def test_factories_and_the_dataloader_pin_on_request():
    for t in (torch.empty(2, 3, pin_memory=True), torch.zeros(2, pin_memory=True),
              torch.ones(2, pin_memory=True), torch.full((2,), 7.0, pin_memory=True),
              torch.tensor([1.0, 2.0], pin_memory=True)):
        assert t.is_pinned() and t.device == "cpu"
    assert torch.full((2,), 7.0, pin_memory=True).tolist() == [7.0, 7.0]
    assert not torch.zeros(2).is_pinned()
    data = TensorDataset(torch.arange(10.0).reshape(5, 2), torch.arange(5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batches = list(DataLoader(data, batch_size=2, pin_memory=True))
    assert all(x.is_pinned() and y.is_pinned() for x, y in batches)
    plain = list(DataLoader(data, batch_size=2))
    assert not plain[0][0].is_pinned()
    for (a, b), (c, d) in zip(batches, plain):
        assert a.tolist() == c.tolist() and b.tolist() == d.tolist()
    dicts = DataLoader([{"x": np.ones(2, np.float32), "n": 1}] * 3, batch_size=2,
                       pin_memory=True)
    first = next(iter(dicts))
    assert first["x"].is_pinned() and first["n"].is_pinned()


# -- legacy CUDA types -----------------------------------------------------------------------

def test_legacy_cuda_types_make_test_and_convert():
    t = torch.cuda.FloatTensor(2, 3)
    assert t.device == "cuda:0" and t.dtype == torch.float32 and t.shape == (2, 3)
    n = torch.cuda.LongTensor([1, 2])
    assert n.device == "cuda:0" and n.dtype == torch.int64 and n.tolist() == [1, 2]
    assert isinstance(t, torch.cuda.FloatTensor) and not isinstance(t, torch.FloatTensor)
    assert isinstance(t.cpu(), torch.FloatTensor) and not isinstance(t.cpu(),
                                                                     torch.cuda.FloatTensor)
    assert repr(torch.cuda.FloatTensor) == "<class 'jitgrad.cuda.FloatTensor'>"
    assert t.type() == "jitgrad.cuda.FloatTensor" and t.cpu().type() == "jitgrad.FloatTensor"
    d = torch.ones(2).type(torch.cuda.DoubleTensor)
    assert d.device == "cuda:0" and d.dtype == torch.float64
    h = d.type("torch.LongTensor")  # a CPU type moves the tensor to the CPU, as PyTorch's
    assert h.device == "cpu" and h.dtype == torch.int64
    assert d.type("torch.cuda.FloatTensor").device == "cuda:0"
    assert torch.ones(2).type_as(d).device == "cuda:0"
    assert torch.ones(2).type_as(d).dtype == torch.float64
    with pytest.raises(TypeError, match="expected cuda device but got cpu"):
        torch.cuda.FloatTensor(torch.ones(2))
    with pytest.raises(AttributeError, match="no attribute 'NotAType'"):
        torch.cuda.NotAType  # noqa: B018


@pytest.mark.parametrize("first", ["jitgrad.cuda.memory_allocated()",
                                   "jitgrad.cuda.max_memory_allocated()",
                                   "jitgrad.cuda.Stream()", "jitgrad.cuda.Event()",
                                   "jitgrad.ones(2).pin_memory().is_pinned()"])
def test_each_new_function_works_as_a_processs_first_cuda_call(first):
    # the modules import one another lazily: the first one loaded must not find another
    # half-initialised (memory.py was, when it was the first)
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", f"import jitgrad; print({first})"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def test_memory_counting_survives_garbage_collection_at_any_point():
    # the weakref callbacks that uncount freed buffers run inside garbage collection, which
    # may start while a new buffer is being counted, the statistics' lock held (it once
    # deadlocked there): force a collection exactly there, with a freed device array
    # waiting in a reference cycle; a subprocess, so a deadlock fails instead of hanging
    import subprocess
    import sys

    code = (
        "import gc, types, weakref, jitgrad as torch\n"
        "from jitgrad.cuda import memory\n"
        "x = torch.ones(8, device='cuda')\n"
        "base = torch.cuda.memory_allocated()\n"
        "def collecting_ref(*args):\n"
        "    gc.collect()\n"
        "    return weakref.ref(*args)\n"
        "memory.weakref = types.SimpleNamespace(ref=collecting_ref)\n"
        "for i in range(20):\n"
        "    cycle = [torch.ones(5, device='cuda') * i]\n"
        "    cycle.append(cycle)\n"
        "    del cycle\n"
        "    y = x + i\n"
        "memory.weakref = weakref\n"
        "del y\n"
        "gc.collect()\n"
        "print(torch.cuda.memory_allocated() - base)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "0"
