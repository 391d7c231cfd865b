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
