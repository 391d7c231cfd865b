"""jitgrad.profiler (torch.profiler) and jitgrad.autograd.profiler: what a window records, how
events nest, the reports, schedules and exports, and that the wrappers go away after."""

from __future__ import annotations

import gzip
import json
import threading
import warnings

import numpy as np
import pytest
from helpers import python_prints

import jitgrad as torch
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)


def _keys(prof) -> dict:
    return {e.key: e for e in prof.key_averages()}


def _namespace_state() -> tuple:
    return (dict(vars(torch.Tensor)), dict(vars(torch)), dict(vars(F)),
            dict(vars(nn.Module)), dict(vars(torch.optim.SGD)))


def _same_objects(a: tuple, b: tuple) -> bool:
    return all(x.keys() == y.keys() and all(x[k] is y[k] for k in x) for x, y in zip(a, b))


def test_ops_nest_under_record_function_and_self_times_add_up():
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("block"):
            c = torch.mm(a, b)
            d = (c + 1).relu()
        e = d.sum()
    keys = _keys(prof)
    for name in ("block", "aten::mm", "aten::add", "aten::relu", "aten::sum"):
        assert keys[name].count == 1, name
    events = prof.events()
    block = next(ev for ev in events if ev.name == "block")
    assert {c.name for c in block.cpu_children} == {"aten::mm", "aten::add", "aten::relu"}
    assert all(c.cpu_parent is block for c in block.cpu_children)
    assert block.is_user_annotation and not block.cpu_children[0].is_user_annotation
    assert block.self_cpu_time_total == pytest.approx(
        block.cpu_time_total - sum(c.cpu_time_total for c in block.cpu_children))
    top = [ev for ev in events if ev.cpu_parent is None]
    assert {ev.name for ev in top} == {"block", "aten::sum"}
    assert events.self_cpu_time_total == pytest.approx(sum(ev.cpu_time_total for ev in top))
    # (a float32 sum adds in float64 and rounds once: NumPy's float32 pairwise sum may
    # differ in the last bit, depending on the values the generator's state gives)
    want = ((a.numpy() @ b.numpy()) + 1).clip(0).astype(np.float64).sum().astype(np.float32)
    np.testing.assert_array_equal(e.numpy(), want)


def test_shapes_memory_and_flops():
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    with profile(record_shapes=True, profile_memory=True, with_flops=True) as prof:
        torch.mm(a, b)
        torch.mm(b.t(), a.t())
        a.t()
    mm = [ev for ev in prof.events() if ev.name == "aten::mm"]
    assert [ev.input_shapes for ev in mm] == [[[2, 3], [3, 4]], [[4, 3], [3, 2]]]
    assert [ev.cpu_memory_usage for ev in mm] == [2 * 4 * 4, 4 * 2 * 4]
    assert [ev.flops for ev in mm] == [2 * 2 * 3 * 4, 2 * 4 * 3 * 2]
    t = [ev for ev in prof.events() if ev.name == "aten::t"]
    assert len(t) == 3 and all(ev.cpu_memory_usage == 0 for ev in t)  # views allocate nothing
    grouped = prof.key_averages(group_by_input_shape=True)
    assert sorted(str(ev.input_shapes) for ev in grouped if ev.key == "aten::mm") == \
        ["[[2, 3], [3, 4]]", "[[4, 3], [3, 2]]"]
    table = grouped.table(sort_by="cpu_memory_usage")
    assert "Input Shapes" in table and "CPU Mem" in table and "Total FLOPs" in table
    with profile() as plain:
        torch.mm(a, b)
    with pytest.raises(AssertionError, match="record_shapes=True"):
        plain.key_averages(group_by_input_shape=True)


def test_with_stack_names_the_callers_line(tmp_path):
    x = torch.randn(3)
    with profile(with_stack=True) as prof:
        x.exp()  # this line
    ev = next(ev for ev in prof.events() if ev.name == "aten::exp")
    assert ev.stack and __file__ in ev.stack[0] and "test_with_stack" in ev.stack[0]
    path = tmp_path / "stacks.txt"
    prof.export_stacks(str(path))
    assert any(";aten::exp " in line for line in path.read_text().splitlines())


def test_modules_backward_nodes_and_optimizer_steps():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(5, 4), torch.tensor([0, 1, 1, 0, 1])
    loss = F.cross_entropy(model(x), y)  # (warm: the first call compiles kernels)
    loss.backward()
    with profile() as prof:
        for _ in range(2):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    keys = _keys(prof)
    assert keys["nn.Module: Sequential"].count == 2
    assert keys["nn.Module: Linear"].count == 4
    assert keys["aten::linear"].count == 4
    assert keys["Optimizer.step#SGD.step"].count == 2
    assert keys["Optimizer.zero_grad#SGD.zero_grad"].count == 2
    backward = {k for k in keys if k.startswith("autograd::engine::evaluate_function: ")}
    assert any("AddmmBackward0" in k for k in backward), backward
    linear = next(ev for ev in prof.events() if ev.name == "nn.Module: Linear")
    assert [c.name for c in linear.cpu_children] == ["aten::linear"]


def test_data_loader_batches_are_events():
    from jitgrad.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.arange(10.0)), batch_size=4)
    with profile() as prof:
        batches = [b[0].tolist() for b in loader]
    assert batches == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]
    name = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert _keys(prof)[name].count == 4  # (the last one raises StopIteration)
    assert [b[0].tolist() for b in loader] == batches  # outside a window: the plain iterator


def test_a_subclass_step_calling_super_is_one_event():
    class Clipped(torch.optim.SGD):
        def step(self, closure=None):
            return super().step(closure)

    p = torch.zeros(2, requires_grad=True)
    p.grad = torch.ones(2)
    opt = Clipped([p], lr=0.5)
    with profile() as prof:
        opt.step()
    assert [ev.name for ev in prof.events() if ev.name.startswith("Optimizer")] == \
        ["Optimizer.step#Clipped.step"]
    np.testing.assert_array_equal(p.detach().numpy(), [-0.5, -0.5])


def test_results_and_wrappers_unchanged_by_profiling():
    before = _namespace_state()
    x = torch.randn(6, 5, requires_grad=True)
    w = torch.randn(5, 3, requires_grad=True)

    def run():
        x.grad = w.grad = None
        (torch.tanh(x @ w) * 3 - x.sum(1, keepdim=True)).pow(2).mean().backward()
        return x.grad.numpy().copy(), w.grad.numpy().copy()

    plain = run()
    with profile(record_shapes=True, profile_memory=True, with_stack=True, with_flops=True):
        assert not _same_objects(before, _namespace_state())  # wrapped while recording
        profiled = run()
    for p, q in zip(plain, profiled):
        np.testing.assert_array_equal(p, q)
    assert _same_objects(before, _namespace_state())
    with pytest.raises(ZeroDivisionError):  # an error inside: the wrappers still go away
        with profile():
            torch.ones(2) + 1
            raise ZeroDivisionError
    assert _same_objects(before, _namespace_state())


def test_one_window_at_a_time():
    with profile() as outer:
        with pytest.raises(RuntimeError, match="already enabled"):
            with profile():
                pass
        torch.ones(3).exp()
    assert "aten::exp" in _keys(outer)
    with pytest.raises(RuntimeError, match="already started"):
        p = profile()
        p.start()
        try:
            p.start()
        finally:
            p.stop()


def test_record_function_outside_a_window_and_as_decorator():
    with record_function("nothing"):
        torch.ones(2).exp()

    @record_function("labelled")
    def f(t):
        return t * 2

    with profile() as prof:
        f(torch.ones(2))
        f(torch.ones(2))
    labelled = [ev for ev in prof.events() if ev.name == "labelled"]
    assert len(labelled) == 2 and all(ev.cpu_children[0].name == "aten::mul" for ev in labelled)
    assert "nothing" not in _keys(prof)


def test_schedule_matches_pytorch_formula():
    s = schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=2)
    A = ProfilerAction
    assert [s(i) for i in range(11)] == [
        A.NONE, A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE,
        A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE, A.NONE]
    with pytest.raises(ValueError):
        schedule(wait=0, warmup=0, active=0)


def test_scheduled_windows_hand_over_their_steps():
    ready = []

    def on_ready(p):
        ready.append(sorted(ev.name for ev in p.events() if ev.name.startswith("ProfilerStep")))

    x = torch.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (no warmup)
        sched = schedule(wait=1, warmup=0, active=2, repeat=2)
    with profile(schedule=sched, on_trace_ready=on_ready) as prof:
        for _ in range(8):
            x.exp()
            prof.step()
    assert ready == [["ProfilerStep#1", "ProfilerStep#2"], ["ProfilerStep#4", "ProfilerStep#5"]]
    assert _keys(prof)["aten::exp"].count == 2  # the last window's
    step = next(ev for ev in prof.events() if ev.name == "ProfilerStep#4")
    assert [c.name for c in step.cpu_children] == ["aten::exp"]


def test_chrome_trace_and_tensorboard_handler(tmp_path):
    with profile(record_shapes=True) as prof:
        with record_function("label"):
            torch.ones(2, 2).sum()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    names = {e["name"]: e for e in trace["traceEvents"]}
    assert names["label"]["cat"] == "user_annotation" and names["aten::sum"]["cat"] == "cpu_op"
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in trace["traceEvents"])
    assert names["aten::sum"]["args"]["Input Dims"] == [[2, 2]]
    assert names["label"]["ts"] <= names["aten::sum"]["ts"]
    with profile(on_trace_ready=tensorboard_trace_handler(str(tmp_path / "tb"), "w0",
                                                          use_gzip=True)):
        torch.ones(2).exp()
    (written,) = (tmp_path / "tb").iterdir()
    assert written.name.startswith("w0.") and written.name.endswith(".pt.trace.json.gz")
    with gzip.open(written, "rt") as f:
        assert any(e["name"] == "aten::exp" for e in json.load(f)["traceEvents"])


def test_table_format_and_sorting():
    x = torch.ones(4)
    with profile() as prof:
        for _ in range(3):
            x.exp()
        x.sin()
    table = prof.key_averages().table(sort_by="count", row_limit=1)
    lines = table.splitlines()
    assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%",
                                "CPU", "total", "CPU", "time", "avg", "#", "of", "Calls"]
    assert "aten::exp" in lines[3] and lines[3].split()[-1] == "3"
    assert "aten::sin" not in table and lines[-1].startswith("Self CPU time total: ")
    with pytest.raises(AttributeError):
        prof.key_averages().table(sort_by="no_such_column")
    total = prof.key_averages().total_average()
    assert total.key == "Total" and total.count == 4


def test_compiled_calls_are_one_event_and_do_not_retrace():
    w = torch.randn(3, 3, requires_grad=True)

    @torch.compile
    def step(x):
        return torch.tanh(x @ w).sum()

    x = torch.randn(2, 3)
    first = step(x).item()
    with profile() as prof:
        inside = step(x).item()
    assert inside == first
    assert _keys(prof)["Compiled Region: step"].count == 1
    assert step.stats["traces"] == 1


def test_compiled_plans_record_their_steps():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    x = torch.randn(4, 6)

    @torch.compile
    def step(x):
        return model(x).pow(2).sum()

    compiled_model = torch.compile(model)
    plain = step(x).item()
    compiled_model(x).sum().backward()
    with profile() as prof:
        inside = step(x).item()
        compiled_model(x).sum().backward()
    assert inside == plain
    region = next(ev for ev in prof.events() if ev.name == "Compiled Region: step")
    kids = [c.name for c in region.cpu_children]
    assert any(k.startswith("jitgrad::kernel(") and "tanh" in k for k in kids), kids
    assert any(k in ("jitgrad::matmul", "jitgrad::addmm") for k in kids), kids
    backward = next(ev for ev in prof.events() if ev.name.startswith(
        "autograd::engine::evaluate_function: CompiledFunction"))
    assert backward.cpu_children and all(c.name.startswith("jitgrad::")
                                         for c in backward.cpu_children)


def test_threads_record_their_own_events():
    x = torch.ones(3)
    with profile() as prof:
        t = threading.Thread(target=lambda: x.exp())
        t.start()
        t.join()
        x.sin()
    by_name = {ev.name: ev for ev in prof.events()}
    assert by_name["aten::exp"].thread != by_name["aten::sin"].thread


def test_device_activity_warns_host_time_only():
    with pytest.warns(UserWarning, match="host time only"):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            pass


def test_legacy_autograd_profiler():
    x = torch.randn(3, requires_grad=True)
    with torch.autograd.profiler.profile(record_shapes=True) as prof:
        with torch.autograd.profiler.record_function("fwd"):
            y = (x * 2).sum()
        y.backward()
    names = {ev.key for ev in prof.key_averages()}
    assert {"fwd", "aten::mul", "aten::sum"} <= names
    assert any(n.startswith("autograd::engine::evaluate_function: ") for n in names)
    assert "Self CPU time total" in str(prof) and prof.self_cpu_time_total > 0
    with torch.autograd.profiler.profile(enabled=False) as off:
        x.exp()
    with pytest.raises(RuntimeError, match="didn't finish"):
        off.key_averages()


def test_import_jitgrad_does_not_load_the_profiler():
    out = python_prints("import sys, jitgrad; print('jitgrad.profiler' in sys.modules); "
                        "import jitgrad.profiler; print(jitgrad.profiler.profile.__name__)")
    assert out == ["False", "profile"]


def _profiled_names(lib) -> set:
    a = lib.ones(2, 3)
    b = lib.ones(3, 4, requires_grad=True)
    with lib.profiler.profile() as prof:
        with lib.profiler.record_function("label"):
            c = lib.mm(a, b)
            d = (c + 1).relu()
        d.sum().backward()
    return {e.key for e in prof.key_averages()}


def test_names_match_pytorch_profiler():
    real = pytest.importorskip("torch")
    ours, theirs = _profiled_names(torch), _profiled_names(real)
    shared = {"label", "aten::mm", "aten::add", "aten::relu", "aten::sum",
              "autograd::engine::evaluate_function: MmBackward0",
              "autograd::engine::evaluate_function: ReluBackward0"}
    assert shared <= theirs, theirs
    assert shared <= ours, ours
