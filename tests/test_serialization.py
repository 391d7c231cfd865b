"""``jitgrad.save`` / ``jitgrad.load`` (jitgrad/serialization.py): PyTorch's checkpoint format
both ways -- files jitgrad writes load in PyTorch (``weights_only=True`` and ``mmap=True``
included), files PyTorch writes load here -- with shared storages for views, every dtype,
parameters, ``state_dict``s and optimizer states, ``map_location``, ``weights_only`` and its
allow-list, and the errors."""

from __future__ import annotations

import collections
import io
import pickle
import zipfile

import numpy as np
import pytest

import jitgrad
from jitgrad import serialization

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def _sample(M):
    base = M.arange(12.0)
    return {
        "plain": M.arange(6.0).reshape(2, 3),
        "transposed": M.arange(6.0).reshape(2, 3).t(),
        "slice": base[2:7],
        "strided": base[::3],
        "scalar": M.tensor(3.5),
        "empty": M.zeros(0, 4),
        "grad": M.ones(2, requires_grad=True),
        "dtypes": [M.tensor([1, 0, 1]).to(getattr(M, d)) for d in DTYPES],
        "meta": (M.Size([2, 3]), M.device("cpu"), M.float64, 7, "text", 2.5, None),
    }


def _same(j, t) -> None:
    """jitgrad value ``j`` equals PyTorch value ``t`` (recursively)."""
    if isinstance(t, torch.Tensor):
        assert isinstance(j, jitgrad.Tensor)
        assert tuple(j.shape) == tuple(t.shape)
        assert str(j.dtype).split(".")[1] == str(t.dtype).split(".")[1]
        assert j.requires_grad == t.requires_grad
        np.testing.assert_array_equal(j.detach().numpy(), t.detach().numpy())
    elif isinstance(t, dict):
        assert list(j) == list(t)
        for k in t:
            _same(j[k], t[k])
    elif isinstance(t, (list, tuple)) and not isinstance(t, torch.Size):
        assert len(j) == len(t)
        for a, b in zip(j, t):
            _same(a, b)
    elif isinstance(t, torch.dtype):
        assert str(j).split(".")[1] == str(t).split(".")[1]
    elif isinstance(t, (torch.Size, torch.device)):
        assert str(j).replace("jitgrad", "torch") == str(t) or tuple(j) == tuple(t)
    else:
        assert j == t


def test_a_jitgrad_file_loads_in_torch_with_weights_only(tmp_path):
    path = tmp_path / "j.pt"
    jitgrad.save(_sample(jitgrad), path)
    loaded = torch.load(path)  # weights_only=True: PyTorch's default since 2.6
    _same(_sample(jitgrad), loaded)
    # views of one array are one storage in the file, as PyTorch writes them
    assert loaded["slice"].untyped_storage().data_ptr() == \
        loaded["strided"].untyped_storage().data_ptr()
    assert loaded["slice"].storage_offset() == 2 and loaded["strided"].stride() == (3,)


def test_a_torch_file_loads_here(tmp_path):
    path = tmp_path / "t.pt"
    torch.save(_sample(torch), path)
    loaded = jitgrad.load(path)
    _same(loaded, _sample(torch))
    # the views share memory here too
    loaded["slice"][0] = 100.0
    assert loaded["strided"][1].item() == 3.0 and loaded["slice"][1].item() == 3.0
    loaded["strided"][1] = -1.0
    assert loaded["slice"][1].item() == -1.0


def test_round_trip_through_bytes_and_records_aligned_for_mmap(tmp_path):
    buf = io.BytesIO()
    jitgrad.save({"x": jitgrad.arange(5.0), "y": jitgrad.ones(3, dtype=jitgrad.int64)}, buf)
    buf.seek(0)
    back = jitgrad.load(buf)
    assert back["x"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and back["y"].dtype == jitgrad.int64
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        for info in zf.infolist():
            start = info.header_offset + 30 + len(info.filename) + len(info.extra)
            assert start % 64 == 0, info.filename
    path = tmp_path / "m.pt"
    path.write_bytes(buf.getvalue())
    mapped = torch.load(path, mmap=True)
    assert mapped["x"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_model_state_dicts_move_both_ways():
    torch.manual_seed(0)
    t_net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3),
                                torch.nn.Linear(3, 2))
    j_net = jitgrad.nn.Sequential(jitgrad.nn.Linear(4, 3), jitgrad.nn.BatchNorm1d(3),
                                  jitgrad.nn.Linear(3, 2))
    buf = io.BytesIO()
    torch.save(t_net.state_dict(), buf)
    buf.seek(0)
    j_net.load_state_dict(jitgrad.load(buf))
    t_net.eval()
    j_net.eval()
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(j_net(jitgrad.tensor(x)).detach().numpy(),
                               t_net(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
    # and back: jitgrad's state_dict into a fresh PyTorch model
    with jitgrad.no_grad():
        for p in j_net.parameters():
            p.mul_(2.0)
    buf = io.BytesIO()
    jitgrad.save(j_net.state_dict(), buf)
    buf.seek(0)
    t_net.load_state_dict(torch.load(buf))
    np.testing.assert_allclose(j_net(jitgrad.tensor(x)).detach().numpy(),
                               t_net(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_an_optimizer_checkpoint_round_trips():
    jitgrad.manual_seed(0)
    net = jitgrad.nn.Linear(3, 2)
    opt = jitgrad.optim.Adam(net.parameters(), lr=0.01)
    net(jitgrad.ones(4, 3)).sum().backward()
    opt.step()
    buf = io.BytesIO()
    jitgrad.save({"model": net.state_dict(), "optim": opt.state_dict(), "epoch": 4}, buf)
    buf.seek(0)
    ckpt = jitgrad.load(buf)
    net2 = jitgrad.nn.Linear(3, 2)
    opt2 = jitgrad.optim.Adam(net2.parameters(), lr=0.5)
    net2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optim"])
    assert ckpt["epoch"] == 4 and opt2.param_groups[0]["lr"] == 0.01
    for a, b in zip(opt.state.values(), opt2.state.values()):
        np.testing.assert_array_equal(a["exp_avg"].numpy(), b["exp_avg"].numpy())
    buf.seek(0)
    t_ckpt = torch.load(buf)  # PyTorch reads the same checkpoint
    assert t_ckpt["optim"]["param_groups"][0]["lr"] == 0.01


def test_parameters_and_requires_grad():
    buf = io.BytesIO()
    p = jitgrad.nn.Parameter(jitgrad.ones(2))
    frozen = jitgrad.nn.Parameter(jitgrad.ones(2), requires_grad=False)
    jitgrad.save([p, frozen, p], buf)
    buf.seek(0)
    a, b, c = jitgrad.load(buf)
    assert isinstance(a, jitgrad.nn.Parameter) and a.requires_grad and not b.requires_grad
    assert a is c  # the same object once, as pickle keeps it
    buf.seek(0)
    ta, tb, _ = torch.load(buf)
    assert isinstance(ta, torch.nn.Parameter) and not tb.requires_grad


def test_bfloat16_loads_as_float32_with_a_warning():
    buf = io.BytesIO()
    torch.save(torch.tensor([1.5, -2.0, 3.140625], dtype=torch.bfloat16), buf)
    buf.seek(0)
    with pytest.warns(UserWarning, match="bfloat16"):
        x = jitgrad.load(buf)
    assert x.dtype == jitgrad.float32 and x.tolist() == [1.5, -2.0, 3.140625]


class _Custom:
    def __init__(self, v):
        self.v = v


def test_weights_only_refuses_other_globals_unless_allowed():
    buf = io.BytesIO()
    jitgrad.save({"obj": _Custom(3)}, buf)
    for M in (jitgrad, torch):
        buf.seek(0)
        with pytest.raises(pickle.UnpicklingError) as err:
            M.load(buf)
        assert "Weights only load failed" in str(err.value)
        assert f"Unsupported global: GLOBAL {__name__}._Custom" in str(err.value)
    buf.seek(0)
    assert jitgrad.load(buf, weights_only=False)["obj"].v == 3
    with serialization.safe_globals([_Custom]):
        buf.seek(0)
        assert jitgrad.load(buf)["obj"].v == 3
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError):
        jitgrad.load(buf)
    serialization.add_safe_globals([_Custom])
    try:
        assert _Custom in serialization.get_safe_globals()
        buf.seek(0)
        assert jitgrad.load(buf)["obj"].v == 3
    finally:
        serialization.clear_safe_globals()


def test_a_whole_jitgrad_module_with_weights_only_false():
    net = jitgrad.nn.Sequential(jitgrad.nn.Linear(2, 2), jitgrad.nn.ReLU())
    buf = io.BytesIO()
    jitgrad.save(net, buf)
    buf.seek(0)
    back = jitgrad.load(buf, weights_only=False)
    x = jitgrad.ones(1, 2)
    np.testing.assert_array_equal(back(x).detach().numpy(), net(x).detach().numpy())


def test_map_location_forms():
    buf = io.BytesIO()
    jitgrad.save({"x": jitgrad.arange(3.0)}, buf)
    for loc in ("cpu", jitgrad.device("cpu"), {"cpu": "cpu"}):
        buf.seek(0)
        assert jitgrad.load(buf, map_location=loc)["x"].device.type == "cpu"
    seen = []
    buf.seek(0)
    out = jitgrad.load(buf, map_location=lambda t, loc: seen.append(loc) or t * 2)
    assert out["x"].tolist() == [0.0, 2.0, 4.0] and seen == ["cpu"]


def test_cuda_locations():
    """A checkpoint of CUDA tensors: PyTorch maps it to the CPU; jitgrad loads it on CUDA
    when it has CUDA, and without CUDA gives PyTorch's error unless mapped."""
    raw = io.BytesIO()
    torch.save({"x": torch.arange(3.0)}, raw)
    data = raw.getvalue()
    # rewrite the location the way a CUDA checkpoint records it (same length: 'cpu' ->)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        records = {i.filename: zf.read(i.filename) for i in zf.infolist()}
    name = next(n for n in records if n.endswith("data.pkl"))
    records[name] = records[name].replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for n, b in records.items():
            zf.writestr(n, b)
    if jitgrad.cuda.is_available():
        out.seek(0)
        assert jitgrad.load(out)["x"].device.type == "cuda"
    else:
        out.seek(0)
        with pytest.raises(RuntimeError, match="torch.cuda.is_available\\(\\) is False"):
            jitgrad.load(out)
    out.seek(0)
    assert jitgrad.load(out, map_location="cpu")["x"].tolist() == [0.0, 1.0, 2.0]


def test_files_that_are_not_checkpoints():
    legacy = io.BytesIO()
    torch.save(torch.ones(2), legacy, _use_new_zipfile_serialization=False)
    legacy.seek(0)
    with pytest.raises(RuntimeError, match="zip checkpoint format"):
        jitgrad.load(legacy)
    other = io.BytesIO()
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "hello")
    other.seek(0)
    with pytest.raises(RuntimeError, match="no data.pkl"):
        jitgrad.load(other)
    with pytest.raises(NotImplementedError):
        jitgrad.save(jitgrad.ones(1), io.BytesIO(), _use_new_zipfile_serialization=False)


def test_state_dict_metadata_survives():
    sd = jitgrad.nn.Linear(2, 2).state_dict()
    buf = io.BytesIO()
    jitgrad.save(sd, buf)
    buf.seek(0)
    back = jitgrad.load(buf)
    assert isinstance(back, collections.OrderedDict) and list(back) == list(sd)
    assert getattr(back, "_metadata", None) == getattr(sd, "_metadata", None)
