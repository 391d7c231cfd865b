"""API breadth added in stop 53: torch.jit.save / load / freeze / optimize_for_inference."""

from __future__ import annotations

import io

import pytest

import jitgrad as torch


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))


def test_jit_save_load_round_trip_with_extra_files(tmp_path):
    m = _model()
    path = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(m), str(path), _extra_files={"config.json": '{"a": 1}'})
    extra = {"config.json": ""}
    loaded = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
    x = torch.randn(5, 3)
    assert torch.equal(loaded(x), m(x)) and loaded is not m
    assert extra == {"config.json": b'{"a": 1}'}
    with pytest.raises(RuntimeError, match="extra/missing.txt"):
        torch.jit.load(str(path), _extra_files={"missing.txt": ""})


def test_jit_save_of_a_compiled_or_traced_module_saves_the_module():
    m = _model()
    x = torch.randn(2, 3)
    for wrapped in (torch.compile(m), torch.jit.trace(m, x)):
        buf = io.BytesIO()
        torch.jit.save(wrapped, buf)
        buf.seek(0)
        loaded = torch.jit.load(buf)
        assert type(loaded) is torch.nn.Sequential and torch.equal(loaded(x), m(x))


def test_jit_load_of_anything_else_raises():
    buf = io.BytesIO()
    torch.save(_model().state_dict(), buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="not an archive jitgrad.jit.save wrote"):
        torch.jit.load(buf)


def test_freeze_and_optimize_for_inference():
    m = _model()
    with pytest.raises(RuntimeError, match="only implemented for modules in eval mode"):
        torch.jit.freeze(torch.jit.script(m))
    assert torch.jit.freeze(m.eval()) is m
    m.train()
    assert torch.jit.optimize_for_inference(m) is m and not m.training


# ---------------------------------------------------------------- optimizer hooks
def _opt(cls=None, **kw):
    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.ones(2)
    return p, (cls or torch.optim.SGD)([p], lr=0.5, **kw)


def test_step_hooks_run_in_pytorch_order_and_remove():
    from jitgrad.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    p, opt = _opt()
    log = []
    h = opt.register_step_pre_hook(lambda o, a, k: log.append(("pre", o is opt, a, k)))
    opt.register_step_post_hook(lambda o, a, k: log.append(("post",)))
    g1 = register_optimizer_step_pre_hook(lambda o, a, k: log.append(("global pre",)))
    g2 = register_optimizer_step_post_hook(lambda o, a, k: log.append(("global post",)))
    try:
        opt.step()
    finally:
        g1.remove()
        g2.remove()
    assert log == [("global pre",), ("pre", True, (), {}), ("post",), ("global post",)]
    assert p.detach().tolist() == [0.5, 0.5]
    h.remove()
    log.clear()
    opt.step()
    assert log == [("post",)]


def test_a_pre_hook_may_replace_the_arguments():
    p, opt = _opt()
    calls = []

    def closure():
        calls.append(1)
        return torch.tensor(3.0)

    opt.register_step_pre_hook(lambda o, a, k: ((closure,), {}))
    assert opt.step().item() == 3.0 and calls == [1]
    opt.register_step_pre_hook(lambda o, a, k: "bad")
    with pytest.raises(RuntimeError, match="must return None or a tuple"):
        opt.step()


def test_a_subclass_step_calling_super_runs_the_hooks_once():
    class Custom(torch.optim.Adam):
        def step(self, closure=None):
            return super().step(closure)

    p, opt = _opt(Custom)
    log = []
    opt.register_step_post_hook(lambda o, a, k: log.append(1))
    opt.step()
    assert log == [1]


def test_state_dict_hooks():
    p, opt = _opt(torch.optim.Adam)
    opt.step()
    log = []
    opt.register_state_dict_pre_hook(lambda o: log.append("sd pre"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "note": "x"})
    sd = opt.state_dict()
    assert sd["note"] == "x" and log == ["sd pre"]
    opt.register_load_state_dict_pre_hook(
        lambda o, sd: {k: v for k, v in sd.items() if k != "note"})
    opt.register_load_state_dict_post_hook(lambda o: log.append("load post"))
    opt.register_load_state_dict_post_hook(lambda o: log.append("first"), prepend=True)
    opt.load_state_dict(sd)
    assert log == ["sd pre", "first", "load post"]


def test_a_hook_registered_after_a_compiled_step_traced_runs():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 3)

    @torch.compile
    def step():
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    step()
    step()

    def halve(o, args, kwargs):
        for q in model.parameters():
            q.grad.mul_(0.5)

    opt.register_step_pre_hook(halve)
    before = model.weight.detach().clone()
    twin = torch.nn.Linear(3, 1)
    twin.load_state_dict(model.state_dict())
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    twin_opt.register_step_pre_hook(lambda o, a, k: [q.grad.mul_(0.5)
                                                     for q in twin.parameters()] and None)
    step()
    twin_opt.zero_grad()
    twin(x).pow(2).mean().backward()
    twin_opt.step()
    assert not torch.equal(model.weight, before)
    assert torch.equal(model.weight, twin.weight) and torch.equal(model.bias, twin.bias)


# ------------------------------------------------------------------ assert_close
def _assert_close_outcomes(lib) -> list:
    import numpy as np

    close = lib.testing.assert_close
    t = lib.tensor
    cases = [
        lambda: close(t([1.0, 2.0]), t([1.0, 3.0]), msg=lambda m: "WRAPPED " + m),
        lambda: close(t([1.0, 2.0]), t([1.0, 3.0]), msg="custom"),
        lambda: close(t(1.0), 1.0),
        lambda: close(t(1.0), t(1.0).numpy()),
        lambda: close({"a": lib.ones(1), "c": 1}, {"b": lib.ones(1), "c": 1}),
        lambda: close([lib.ones(1)], [lib.ones(2)]),
        lambda: close(1, 2, msg=lambda m: "W " + m),
        lambda: close([1.0, 2.0], [1.0, 2.5]),
        lambda: close("a", "a"),
        lambda: close({"x": [lib.ones(2), {"y": lib.zeros(1)}]},
                      {"x": [lib.ones(2), {"y": lib.ones(1)}]}),
        lambda: close(np.ones(2), np.ones(2)),
        lambda: close((1, 2), [1, 2]),
        lambda: close(1, 1.0),
    ]
    out = []
    for case in cases:
        try:
            case()
            out.append("ok")
        except Exception as e:  # noqa: BLE001 - the outcome is what is compared
            text = str(e).replace("jitgrad.tensor.Tensor", "torch.Tensor").replace(
                "jitgrad.Size", "torch.Size")
            out.append(f"{type(e).__name__}: {text}")
    return out


def test_assert_close_messages_match_pytorch():
    real = pytest.importorskip("torch")
    import jitgrad.testing  # noqa: F401 - (loaded on first use)

    ours, theirs = _assert_close_outcomes(torch), _assert_close_outcomes(real)
    for a, b in zip(ours, theirs):
        assert a == b


# ------------------------------------------------------------ smaller behaviours
def test_integer_tensor_to_negative_tensor_powers():
    a = torch.tensor([2, 1, -1, -1, 0, 3, -2])
    e = torch.tensor([-1, -1, -1, -2, -1, -2, -3])
    expected = [0, 1, -1, 1, 0, 0, 0]  # PyTorch's: NumPy raises
    assert a.pow(e).tolist() == expected
    assert torch.compile(lambda a, e: a.pow(e))(a, e).tolist() == expected
    assert torch.pow(2, torch.tensor([-1, 2])).tolist() == [0, 4]
    with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
        a ** -1  # a number exponent raises, as PyTorch's


def test_format_of_tensors():
    assert f"loss {torch.tensor(0.5)} acc {torch.tensor(3)}" == "loss 0.5 acc 3"
    assert f"{torch.tensor(0.25, requires_grad=True):.1f}" == "0.2"
    assert f"{torch.tensor(0.1)}" == str(float(torch.tensor(0.1)))  # the float32's digits
    assert f"{torch.tensor([1.0, 2.0])}" == "tensor([1., 2.])"
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor"):
        f"{torch.tensor([1.0, 2.0]):.2f}"


def test_python_float_dtype_is_float64():
    assert torch.zeros(2, dtype=float).dtype == torch.float64
    assert torch.tensor([1], dtype=float).dtype == torch.float64
    assert torch.ones(2).to(float).dtype == torch.float64
    assert torch.zeros(1, dtype=int).dtype == torch.int64


def test_set_grad_enabled_as_a_decorator_leaves_the_mode():
    @torch.set_grad_enabled(False)
    def evaluate(x):
        return torch.is_grad_enabled(), (x * 2).requires_grad

    assert torch.is_grad_enabled()
    x = torch.ones(2, requires_grad=True)
    assert evaluate(x) == (False, False) and torch.is_grad_enabled()
    torch.set_grad_enabled(False)  # a plain call still sets the mode at once
    try:
        assert not torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


def test_data_loader_sampler_attributes():
    from jitgrad.utils.data import (
        BatchSampler,
        DataLoader,
        RandomSampler,
        SequentialSampler,
        Subset,
        TensorDataset,
    )
    from jitgrad.utils.data.dataloader import default_convert  # noqa: F401 - importable

    ds = TensorDataset(torch.arange(10.0))
    dl = DataLoader(ds, batch_size=4, shuffle=True)
    assert isinstance(dl.sampler, RandomSampler) and len(dl.sampler) == 10
    assert isinstance(dl.batch_sampler, BatchSampler) and len(dl.batch_sampler) == len(dl) == 3
    plain = DataLoader(ds, batch_size=4)
    assert isinstance(plain.sampler, SequentialSampler)
    assert [b[0].tolist() for b in plain] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0],
                                              [8.0, 9.0]]
    assert DataLoader(ds, batch_size=None).batch_sampler is None
    mine = SequentialSampler(ds)
    assert DataLoader(ds, sampler=mine).sampler is mine
    with pytest.raises(ValueError, match="should not be set after DataLoader is initialized"):
        dl.batch_size = 2
    idx = torch.tensor([1, 3])
    sub = Subset(ds, idx)
    assert sub.indices is idx and sub[1][0].item() == 3.0


def test_loading_a_file_that_is_no_checkpoint_raises_unpickling_error():
    import pickle

    with pytest.raises(pickle.UnpicklingError, match="zip checkpoint format"):
        torch.load(io.BytesIO(b"garbage"))
    with pytest.raises(RuntimeError):  # (what jitgrad raised before: still caught)
        torch.load(io.BytesIO(b"garbage"))


# ------------------------------------------------------------------- histogramdd
def _histogramdd_cases(lib):
    x = lib.tensor([[0.0, 1.0], [1.0, 0.0], [2.0, 0.0], [2.0, 2.0], [0.5, 3.5]])
    w = lib.tensor([1.0, 2.0, 4.0, 8.0, 16.0])
    runs = [
        lambda: lib.histogramdd(x, bins=[3, 3], weight=w),
        lambda: lib.histogramdd(x, bins=2, range=[0.0, 1.0, 0.0, 1.0], density=True),
        lambda: lib.histogramdd(x, bins=[lib.tensor([0.0, 1.0, 2.0]),
                                         lib.tensor([0.0, 1.0, 2.0, 3.0])]),
        lambda: lib.histogramdd(x.reshape(1, 5, 2), bins=[2, 4]),
        lambda: lib.histogram(x[:, 0], bins=4, range=(0.0, 3.0), density=True),
    ]
    out = []
    for run in runs:
        hist, edges = run()
        edges = edges if isinstance(edges, tuple) else (edges,)
        out.append((hist.tolist(), [e.tolist() for e in edges]))
    return out


def test_histogramdd_matches_pytorch():
    real = pytest.importorskip("torch")
    ours, theirs = _histogramdd_cases(torch), _histogramdd_cases(real)
    import numpy as np

    for (h1, e1), (h2, e2) in zip(ours, theirs):
        np.testing.assert_allclose(h1, h2, rtol=1e-6)
        assert len(e1) == len(e2)
        for a, b in zip(e1, e2):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.histogramdd(torch.tensor([[1, 2]]), bins=2)
    with pytest.raises(RuntimeError, match="should have 4 elements"):
        torch.histogramdd(torch.ones(3, 2), bins=2, range=[0.0, 1.0])


# --------------------------------------------------------------- grid_sample 5-D
def _grid_sample_3d(lib, mode, pad, align):
    import numpy as np

    rng = np.random.default_rng(0)
    inp = lib.tensor(rng.standard_normal((2, 3, 4, 5, 6)), requires_grad=True)
    grid = lib.tensor(rng.uniform(-1.2, 1.2, (2, 3, 2, 4, 3)), requires_grad=True)
    out = lib.nn.functional.grid_sample(inp, grid, mode=mode, padding_mode=pad,
                                        align_corners=align)
    weights = lib.arange(out.numel(), dtype=out.dtype).reshape(out.shape)
    (out * weights).sum().backward()
    return out.detach().numpy(), inp.grad.numpy(), grid.grad.numpy()


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_volumetric_grid_sample_matches_pytorch(mode, pad, align):
    import numpy as np

    real = pytest.importorskip("torch")
    for ours, theirs in zip(_grid_sample_3d(torch, mode, pad, align),
                            _grid_sample_3d(real, mode, pad, align)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


def test_volumetric_grid_sample_gradcheck_and_errors():
    import numpy as np

    rng = np.random.default_rng(3)
    inp = torch.tensor(rng.standard_normal((1, 2, 3, 3, 4)), requires_grad=True)
    grid = torch.tensor(rng.uniform(-0.9, 0.9, (1, 2, 2, 2, 3)), requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda i, g: torch.nn.functional.grid_sample(i, g, align_corners=False), (inp, grid))
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
        torch.nn.functional.grid_sample(torch.ones(1, 1, 2, 2, 2), torch.zeros(1, 1, 1, 1, 3),
                                        mode="bicubic", align_corners=False)


# ------------------------------------------------ integer division, rounding modes
def test_integer_division_by_a_0d_tensor():
    assert (torch.tensor(7) // torch.tensor(2)).item() == 3
    assert (torch.tensor([-7, 7]) // torch.tensor(2)).tolist() == [-4, 3]
    assert (torch.tensor([1, 0, 1]).sum() % torch.tensor(2)).item() == 0
    assert torch.fmod(torch.tensor(-7), torch.tensor(2)).item() == -1
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.tensor(7) // torch.tensor(0)
    f = torch.compile(lambda a, b: a // b + a % b)
    assert f(torch.tensor(9), torch.tensor(4)).item() == 3


def _div_cases(lib):
    big = lib.tensor([-7, 7, 2 ** 60 + 1])
    return [
        lib.div(big, lib.tensor([2, -2, 3]), rounding_mode="trunc"),
        lib.div(big, 3, rounding_mode="floor"),
        lib.div(lib.tensor([-7.0, 7.0, 1.0]), lib.tensor([2.0, -2.0, 0.0]), rounding_mode="floor"),
        lib.div(lib.tensor([-7.0, 7.0, 1.0, -1.0]), lib.tensor([2.0, -2.0, 0.0, 0.0]),
                rounding_mode="trunc"),
        lib.div(7, lib.tensor([2, -2]), rounding_mode="floor"),
        lib.div(7, lib.tensor([2, -2]), rounding_mode="trunc"),
        lib.div(lib.tensor([5], dtype=lib.uint8), 2, rounding_mode="trunc"),
        lib.div(lib.tensor([7]), 2.5, rounding_mode="floor"),
        lib.div(lib.tensor([True]), 2, rounding_mode="trunc"),
    ]


def test_div_rounding_modes_match_pytorch_exactly_and_compile():
    real = pytest.importorskip("torch")
    for ours, theirs in zip(_div_cases(torch), _div_cases(real)):
        assert ours.tolist() == theirs.tolist()
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    f = torch.compile(lambda t: torch.div(t, 4, rounding_mode="floor")
                      + torch.div(t, 4, rounding_mode="trunc"), fullgraph=True)
    for t in (torch.arange(-6, 9), torch.arange(-6.0, 9.0)):
        assert f(t).tolist() == (torch.div(t, 4, rounding_mode="floor")
                                 + torch.div(t, 4, rounding_mode="trunc")).tolist()


def test_one_hot_with_num_classes_compiles_and_checks_every_call():
    import jitgrad.nn.functional as F

    f = torch.compile(lambda x, y: (x * F.one_hot(y, 3)).sum(), fullgraph=True)
    assert f(torch.ones(2, 3), torch.tensor([0, 2])).item() == 2.0
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        f(torch.ones(2, 3), torch.tensor([0, 3]))
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(torch.tensor([-1, 0]), 3)


def test_remainder_keeps_the_sign_of_a_zero_result_and_unique_nans_are_distinct():
    real = pytest.importorskip("torch")
    for lib in (torch, real):
        r = lib.remainder(lib.tensor([-0.0, 0.0, -3.0, -7.5]), lib.tensor([3.0, -3.0, -3.0, 2.0]))
        assert [str(v) for v in r.tolist()] == ["-0.0", "0.0", "-0.0", "0.5"]
        x = lib.tensor([1.0, float("nan"), 1.0, float("nan"), 0.0])
        vals, inv, counts = lib.unique(x, return_inverse=True, return_counts=True)
        assert str(vals.tolist()) == "[0.0, 1.0, nan, nan]"
        assert inv.tolist() == [1, 2, 1, 3, 0] and counts.tolist() == [1, 2, 1, 1]


# ---------------------------------------------------------------- containers
def _container_outcomes(lib):
    nn = lib.nn
    out = []

    def rec(f):
        try:
            r = f()
            out.append([type(m).__name__ for m in r] + [list(r._modules)]
                       if isinstance(r, nn.Module) else r)
        except Exception as e:  # noqa: BLE001 - the outcome is what is compared
            out.append(type(e).__name__)

    m = nn.Sequential(nn.Linear(2, 2))
    m.extend([nn.ReLU()])
    rec(lambda: m)
    rec(lambda: m.insert(0, nn.Tanh()))
    rec(lambda: m.insert(-1, nn.Sigmoid()))
    rec(lambda: m.insert(9, nn.Tanh()))
    rec(lambda: type(m.pop(1)).__name__)
    rec(lambda: m)
    a, b = nn.Sequential(nn.Tanh(), nn.ReLU()), nn.Sequential(nn.Sigmoid())
    rec(lambda: a + b)
    rec(lambda: a * 2)
    rec(lambda: 2 * b)
    rec(lambda: a * 0)
    rec(lambda: a * 1.5)
    rec(lambda: a + [nn.ReLU()])
    c = nn.Sequential(nn.Tanh())
    c += b
    rec(lambda: c)
    c *= 3
    rec(lambda: c)
    ml = nn.ModuleList([nn.Tanh(), nn.ReLU(), nn.Sigmoid()])
    rec(lambda: type(ml.pop(0)).__name__)
    rec(lambda: ml)
    rec(lambda: ml + [nn.Tanh()])
    rec(lambda: m.insert(0, "x"))
    return out


def test_sequential_and_module_list_surgery_matches_pytorch():
    real = pytest.importorskip("torch")
    assert _container_outcomes(torch) == _container_outcomes(real)
    tripled = torch.nn.Sequential(torch.nn.Linear(2, 2)) * 3
    assert len(list(tripled.parameters())) == 2  # the same layer three times
