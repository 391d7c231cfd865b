"""``finfo`` / ``iinfo``, ``promote_types`` / ``can_cast`` (jitgrad/type_info.py), the
generator state as a uint8 tensor (``get_rng_state`` / ``set_rng_state``,
``Generator.get_state`` / ``set_state``: jitgrad/rng_state.py) and the deterministic
algorithms flag (jitgrad/determinism.py), against PyTorch 2.13."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import jitgrad

FLOATS = ["float16", "float32", "float64", "bfloat16"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
ALL = FLOATS + INTS + ["bool"]


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


# --------------------------------------------------------------------- finfo / iinfo
@pytest.mark.parametrize("name", FLOATS)
def test_finfo_matches_pytorch(torch, name):
    got, want = jitgrad.finfo(getattr(jitgrad, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution",
                  "dtype"):
        assert getattr(got, field) == getattr(want, field), field
    assert repr(got) == repr(want) and str(got) == str(want)
    assert got == jitgrad.finfo(getattr(jitgrad, name)) and hash(got) == hash(
        jitgrad.finfo(getattr(jitgrad, name)))


def test_finfo_default_dtype(torch):
    assert jitgrad.finfo() == jitgrad.finfo(jitgrad.float32)
    assert repr(jitgrad.finfo()) == repr(torch.finfo())
    jitgrad.set_default_dtype(jitgrad.float64)
    try:
        assert jitgrad.finfo().dtype == "float64"
    finally:
        jitgrad.set_default_dtype(jitgrad.float32)
    assert jitgrad.finfo(jitgrad.half).max == 65504.0


@pytest.mark.parametrize("name", INTS)
def test_iinfo_matches_pytorch(torch, name):
    got, want = jitgrad.iinfo(getattr(jitgrad, name)), torch.iinfo(getattr(torch, name))
    assert (got.bits, got.min, got.max, got.dtype) == (want.bits, want.min, want.max,
                                                       want.dtype)
    assert type(got.max) is int and repr(got) == repr(want)


@pytest.mark.parametrize("call", [
    lambda M: M.finfo(M.int32), lambda M: M.finfo(M.bool), lambda M: M.iinfo(M.float32),
    lambda M: M.iinfo(M.bool), lambda M: M.finfo("float32"), lambda M: M.iinfo(3),
    lambda M: M.promote_types(1, M.int8), lambda M: M.promote_types(M.int8, "x"),
    lambda M: M.can_cast(1, M.int8), lambda M: M.can_cast(M.int8, None)])
def test_errors_match_pytorch(torch, call):
    with pytest.raises(TypeError) as want:
        call(torch)
    with pytest.raises(TypeError) as got:
        call(jitgrad)
    assert str(got.value) == str(want.value)


# ------------------------------------------------------------ promote_types / can_cast
def test_promote_types_matches_pytorch(torch):
    for a, b in itertools.product(ALL, ALL):
        got = jitgrad.promote_types(getattr(jitgrad, a), getattr(jitgrad, b))
        want = torch.promote_types(getattr(torch, a), getattr(torch, b))
        assert got.name == str(want).replace("torch.", ""), (a, b)
    assert jitgrad.promote_types(jitgrad.uint8, jitgrad.int8) is jitgrad.int16


def test_can_cast_matches_pytorch(torch):
    for a, b in itertools.product(ALL, ALL):
        got = jitgrad.can_cast(getattr(jitgrad, a), getattr(jitgrad, b))
        assert got is torch.can_cast(getattr(torch, a), getattr(torch, b)), (a, b)


def test_promote_types_agrees_with_arithmetic():
    names = ["float16", "float32", "float64"] + INTS + ["bool"]
    for a, b in itertools.product(names, names):
        x = jitgrad.ones(2, dtype=getattr(jitgrad, a))
        y = jitgrad.ones(2, dtype=getattr(jitgrad, b))
        assert jitgrad.result_type(x, y) is jitgrad.promote_types(x.dtype, y.dtype), (a, b)


# ------------------------------------------------------------------------ rng state
def _draws(generator=None):
    kw = {} if generator is None else {"generator": generator}
    return [jitgrad.rand(4, **kw), jitgrad.randn(3, **kw), jitgrad.randint(0, 100, (5,), **kw),
            jitgrad.randperm(6, **kw), jitgrad.empty(3).normal_(**kw),
            jitgrad.empty(3).exponential_(**kw), jitgrad.empty(4).random_(0, 9, **kw)]


def _same(a: list, b: list) -> bool:
    return all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a, b))


def test_get_set_rng_state_round_trips():
    jitgrad.manual_seed(123)
    state = jitgrad.get_rng_state()
    assert state.dtype is jitgrad.uint8 and state.dim() == 1 and not state.requires_grad
    first = _draws()
    assert not _same(first, _draws())  # the stream moved on
    jitgrad.set_rng_state(state)
    assert _same(first, _draws())
    jitgrad.set_rng_state(state)  # the state given is not consumed
    assert _same(first, _draws())
    assert jitgrad.random.get_rng_state().tolist() != state.tolist()
    jitgrad.random.set_rng_state(state)
    assert _same(first, _draws())


def test_state_is_a_copy_and_keeps_the_seed():
    jitgrad.manual_seed(77)
    s = jitgrad.get_rng_state()
    a = jitgrad.rand(3)
    s2 = jitgrad.get_rng_state()
    s2.zero_()  # changing a returned state changes no generator
    assert jitgrad.initial_seed() == 77
    jitgrad.manual_seed(5)
    jitgrad.set_rng_state(s)
    assert jitgrad.initial_seed() == 77
    assert jitgrad.rand(3).tolist() == a.tolist()


def test_generator_get_set_state():
    g = jitgrad.Generator().manual_seed(9)
    jitgrad.rand(2, generator=g)
    st = g.get_state()
    assert st.dtype is jitgrad.uint8 and st.shape == jitgrad.get_rng_state().shape
    first = _draws(g)
    h = jitgrad.Generator()
    assert h.set_state(st) is h
    assert _same(first, _draws(h))  # another generator takes the state
    assert g.set_state(st) is g and _same(first, _draws(g))
    assert h.initial_seed() == 9


def test_state_survives_a_half_drawn_word():
    """PCG64 keeps a cached 32-bit half word after an odd number of 32-bit draws; the state
    carries it."""
    g = jitgrad.Generator().manual_seed(1)
    g.np.integers(0, 2 ** 31, 1, dtype=np.int32)  # one 32-bit draw: half a word cached
    st = g.get_state()
    want = g.np.integers(0, 2 ** 31, 5, dtype=np.int32)
    g.set_state(st)
    assert np.array_equal(g.np.integers(0, 2 ** 31, 5, dtype=np.int32), want)


def test_rng_state_errors(torch):
    good = jitgrad.get_rng_state()
    for M, state in ((torch, torch.get_rng_state()), (jitgrad, good)):
        with pytest.raises(TypeError, match="RNG state must be a torch.ByteTensor"):
            M.set_rng_state(state.float())
        with pytest.raises(TypeError, match="expected a torch.ByteTensor, but got list"):
            M.set_rng_state([1, 2])
        with pytest.raises(RuntimeError, match="Expected a CPUGeneratorImplState of size .* but "
                                               "found the input RNG state size to be 10"):
            M.set_rng_state(state[:10])
        with pytest.raises(TypeError, match="RNG state must be a torch.ByteTensor"):
            M.Generator().set_state(state.float())
    bad = good.clone()
    bad[0] = 0
    with pytest.raises(RuntimeError, match="RNG state is corrupt"):
        jitgrad.set_rng_state(bad)


def test_compiled_function_restores_generators_after_tracing():
    """jitgrad.compile snapshots and restores the generators around a trace (the tracer
    uses the generators' raw states, not the tensors)."""
    jitgrad.manual_seed(3)
    f = jitgrad.compile(lambda x: x + jitgrad.rand(3))
    x = jitgrad.zeros(3)
    a = f(x)
    jitgrad.manual_seed(3)
    assert a.tolist() == jitgrad.rand(3).tolist()


# ------------------------------------------------------------- deterministic algorithms
@pytest.fixture
def restore_flags():
    yield
    jitgrad.use_deterministic_algorithms(False)


def test_deterministic_flags(torch, restore_flags):
    assert jitgrad.are_deterministic_algorithms_enabled() is False
    for mode, warn in ((True, False), (True, True), (False, False)):
        jitgrad.use_deterministic_algorithms(mode, warn_only=warn)
        assert jitgrad.are_deterministic_algorithms_enabled() is mode
        assert jitgrad.is_deterministic_algorithms_warn_only_enabled() is warn
    for level, name in ((1, "warn"), (2, "error"), (0, "default")):
        for M in (jitgrad, torch):
            M.set_deterministic_debug_mode(name)
        assert jitgrad.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode()
        assert jitgrad.are_deterministic_algorithms_enabled() == \
            torch.are_deterministic_algorithms_enabled()
        jitgrad.set_deterministic_debug_mode(level)
        assert jitgrad.get_deterministic_debug_mode() == level
    jitgrad.use_deterministic_algorithms(True)
    a = jitgrad.zeros(5).index_add(0, jitgrad.tensor([0, 0, 3]), jitgrad.ones(3))
    assert a.tolist() == [2.0, 0.0, 0.0, 1.0, 0.0]  # runs, deterministic as always


@pytest.mark.parametrize("call", [
    lambda M: M.use_deterministic_algorithms(1),
    lambda M: M.use_deterministic_algorithms("x"),
    lambda M: M.use_deterministic_algorithms(True, warn_only=1),
    lambda M: M.set_deterministic_debug_mode(3),
    lambda M: M.set_deterministic_debug_mode("x")])
def test_deterministic_errors_match_pytorch(torch, call, restore_flags):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(Exception) as got:
        call(jitgrad)
    torch.use_deterministic_algorithms(False)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
