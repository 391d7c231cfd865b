"""``jitgrad.testing.assert_close`` (``torch.testing``'s): PyTorch's default tolerances per
dtype, checks of shape / dtype / device, containers entry by entry, and its messages."""

from __future__ import annotations

import pytest

import jitgrad


def _message(M, actual, expected, **kw):
    try:
        M.testing.assert_close(actual(M), expected(M), **kw)
    except AssertionError as e:
        return str(e)
    return None


CASES = {
    "close": (lambda M: M.tensor([1.0, 2.0]), lambda M: M.tensor([1.0, 2.0 + 1e-6]), {}),
    "not close": (lambda M: M.tensor([1.0, 2.0]), lambda M: M.tensor([1.0, 2.1]), {}),
    "dtype": (lambda M: M.tensor([1.0]), lambda M: M.tensor([1.0], dtype=M.float64), {}),
    "dtype unchecked": (lambda M: M.tensor([1.0]), lambda M: M.tensor([1.0], dtype=M.float64),
                        {"check_dtype": False}),
    "shape": (lambda M: M.ones(2), lambda M: M.ones(3), {}),
    "integers": (lambda M: M.tensor([1, 2]), lambda M: M.tensor([1, 3]), {}),
    "nan": (lambda M: M.tensor([[1.0, float("nan")]]), lambda M: M.tensor([[1.0, float("nan")]]),
            {}),
    "nan equal": (lambda M: M.tensor([float("nan")]), lambda M: M.tensor([float("nan")]),
                  {"equal_nan": True}),
    "given tolerances": (lambda M: M.tensor([1.0]), lambda M: M.tensor([1.05]),
                         {"rtol": 0.1, "atol": 0.0}),
    "dict": (lambda M: {"a": M.ones(2)}, lambda M: {"a": M.ones(2)}, {}),
    "list": (lambda M: [M.ones(2), M.zeros(1)], lambda M: [M.ones(2), M.ones(1)], {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_assert_close(name):
    actual, expected, kw = CASES[name]
    got = _message(jitgrad, actual, expected, **kw)
    assert (got is None) == (name in ("close", "dtype unchecked", "nan equal",
                                       "given tolerances", "dict"))
    torch = pytest.importorskip("torch")
    want = _message(torch, actual, expected, **kw)
    assert (got is None) == (want is None)
    if got is not None:
        assert got.replace("jitgrad.", "torch.").splitlines()[0] == want.splitlines()[0]


def test_messages_against_pytorch():
    torch = pytest.importorskip("torch")
    for name in ("not close", "integers", "dtype", "shape"):
        actual, expected, kw = CASES[name]
        got = _message(jitgrad, actual, expected, **kw).replace("jitgrad.", "torch.")
        assert got == _message(torch, actual, expected, **kw), name
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        jitgrad.testing.assert_close(jitgrad.ones(1), jitgrad.ones(1), rtol=0.1)
