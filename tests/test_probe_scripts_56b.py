"""What a stop-56 probe of scientific and library-author PyTorch scripts (PINNs, torch.func,
GPs, flows, HMC, optimal transport, Kalman filters, registration, complex physics...) found
apart from torch: ``linspace`` values (PyTorch's kernel: one FMA per value, halves stepped
from each end), complex ``linspace``, ``fft.hfft2`` / ``ihfft2`` / ``hfftn`` / ``ihfftn``,
complex ``linalg.matrix_exp``, ``Generator.manual_seed`` of negative seeds, ``multinomial``
without replacement from rows with few positive weights, and the name of ``LinAlgError``.
Compared live with torch when it is installed."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_raises_like_torch, wirtinger_numerical_grad

import jitgrad as jg


def _torch():
    return pytest.importorskip("torch")


# ------------------------------------------------------------------------------ linspace
_LINSPACE_DTYPES = ["float32", "float64", "float16", "int64", "int32", "uint8", "complex64",
                    "complex128"]
_LINSPACE_ENDS = [(-1, 1), (0, 1), (0.1, 3.7), (5, -2.5), (1e-3, 1e4), (0, 255), (-1, 1j),
                  (1j, 2 - 3j)]


@pytest.mark.parametrize("dtype", _LINSPACE_DTYPES)
def test_linspace_is_pytorchs_bit_for_bit(dtype):
    torch = _torch()
    for steps in (0, 1, 2, 3, 7, 24, 100, 1001):
        for start, end in _LINSPACE_ENDS:
            if isinstance(start, complex) or isinstance(end, complex):
                if not dtype.startswith("complex"):
                    continue
            try:
                want = torch.linspace(start, end, steps, dtype=getattr(torch, dtype)).numpy()
            except RuntimeError as e:  # an end the dtype cannot hold
                with pytest.raises(RuntimeError) as got_e:
                    jg.linspace(start, end, steps, dtype=getattr(jg, dtype))
                assert str(got_e.value) == str(e)
                continue
            got = jg.linspace(start, end, steps, dtype=getattr(jg, dtype)).numpy()
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want, err_msg=f"{start}, {end}, {steps}")


def test_linspace_fixed_values():
    # float32: each value one FMA (start + step * i, end - step * (steps - 1 - i)), not
    # NumPy's float64 rounded once (0.13043478...)
    assert jg.linspace(-1, 1, 24)[13].item() == 0.1304347664117813
    assert jg.linspace(0, 1, 24, dtype=jg.float64)[5].item() == 0.21739130434782608
    assert jg.linspace(0, 1, 7, dtype=jg.float16).tolist() == [
        0.0, 0.1666259765625, 0.333251953125, 0.5, 0.6669921875, 0.83349609375, 1.0]
    assert jg.linspace(0, 10, 7, dtype=jg.int64).tolist() == [0, 1, 3, 5, 6, 8, 10]
    assert jg.linspace(-3, 2.5, 5, dtype=jg.int32).tolist() == [-3, -1, 0, 0, 2]
    assert jg.linspace(2.0, 3.0, 1).tolist() == [2.0]
    assert jg.linspace(2.0, 3.0, 0).shape == (0,)
    c = jg.linspace(0, 1j, 3)
    assert c.dtype is jg.complex64 and c.tolist() == [0j, 0.5j, 1j]
    jg.set_default_dtype(jg.float64)
    try:
        assert jg.linspace(0, 1j, 2).dtype is jg.complex128
    finally:
        jg.set_default_dtype(jg.float32)
    t = jg.linspace(jg.tensor(0.0), jg.tensor(1.0), 3)
    assert t.tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(RuntimeError, match="\"linspace_cpu\" not implemented for 'Bool'"):
        jg.linspace(0, 1, 3, dtype=jg.bool)
    assert jg.linspace(-1, 1, 3, dtype=jg.uint8).tolist() == [255, 128, 1]  # -1 wraps


@pytest.mark.parametrize("start,end,dtype", [
    (0, 300, "uint8"), (-2.5, 3, "uint8"), (-129, 0, "int8"), (127.5, 0, "int8"),
    (-256, 0, "uint8"), (0, 1e20, "int16"), (0, 1e20, "int32"), (0, 1e20, "int64"),
    (0, 1e20, "float16"), (0, 1e39, "float32"),
])
def test_linspace_ends_the_dtype_cannot_hold(start, end, dtype):
    assert_raises_like_torch(lambda M: M.linspace(start, end, 3, dtype=getattr(M, dtype)),
                             RuntimeError)


# --------------------------------------------------------------------- hfftn / ihfftn
def _spectrum(shape, seed=0):
    rs = np.random.RandomState(seed)
    return rs.randn(*shape) + 1j * rs.randn(*shape)


_HFFT_CASES = {
    "default": {},
    "s": {"s": (3, 6)},
    "one_dim": {"dim": (0,)},
    "s_dims_reversed": {"s": (5, 7), "dim": (1, 0)},
}
_IHFFT_CASES = {
    "default": {},
    "s": {"s": (3, 5)},
    "dims": {"dim": (0, 2)},
    "s_dims_reversed": {"s": (2, 7), "dim": (2, 1)},
}


def _hfftn_numpy(x, s=None, dim=None, norm=None):
    """``hfftn`` by its definition: the n-D FFT of the Hermitian signal whose half is ``x``
    (NumPy's ``irfftn`` of the conjugate, scaled back)."""
    dims = list(range(x.ndim)) if dim is None else [d % x.ndim for d in dim]
    if s is None:
        s = [x.shape[d] for d in dims[:-1]] + [2 * (x.shape[dims[-1]] - 1)]
    n = float(np.prod(s))
    scale = {None: n, "backward": n, "forward": 1.0, "ortho": np.sqrt(n)}[norm]
    return np.fft.irfftn(np.conj(x), s=s, axes=dims) * scale


def _ihfftn_numpy(x, s=None, dim=None, norm=None):
    if dim is None:
        dims = list(range(x.ndim - (len(s) if s is not None else x.ndim), x.ndim))
    else:
        dims = [d % x.ndim for d in dim]
    if s is None:
        s = [x.shape[d] for d in dims]
    n = float(np.prod(s))
    scale = {None: 1 / n, "backward": 1 / n, "forward": 1.0, "ortho": 1 / np.sqrt(n)}[norm]
    return np.conj(np.fft.rfftn(x, s=s, axes=dims)) * scale


@pytest.mark.parametrize("norm", [None, "forward", "ortho"])
@pytest.mark.parametrize("case", sorted(_HFFT_CASES))
def test_hfftn(case, norm):
    x = _spectrum((4, 5))
    kw = _HFFT_CASES[case]
    got = jg.fft.hfftn(jg.tensor(x), norm=norm, **kw)
    want = _hfftn_numpy(x, norm=norm, **kw)
    assert got.dtype is jg.float64 and tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)
    torch = _torch()
    t = torch.fft.hfftn(torch.tensor(x), norm=norm, **kw)
    np.testing.assert_allclose(got.numpy(), t.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("norm", [None, "forward", "ortho"])
@pytest.mark.parametrize("case", sorted(_IHFFT_CASES))
def test_ihfftn(case, norm):
    x = np.random.RandomState(1).randn(3, 4, 6)
    kw = _IHFFT_CASES[case]
    got = jg.fft.ihfftn(jg.tensor(x), norm=norm, **kw)
    want = _ihfftn_numpy(x, norm=norm, **kw)
    assert got.dtype is jg.complex128 and tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    torch = _torch()
    t = torch.fft.ihfftn(torch.tensor(x), norm=norm, **kw)
    np.testing.assert_allclose(got.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)


def test_hfft2_ihfft2_round_trip_and_dtypes():
    x = jg.tensor(np.random.RandomState(2).randn(4, 6))
    back = jg.fft.hfft2(jg.fft.ihfft2(x), s=(4, 6))
    np.testing.assert_allclose(back.numpy(), x.numpy(), atol=1e-12)
    assert jg.fft.hfft2(jg.tensor(_spectrum((4, 5))).to(jg.complex64)).dtype is jg.float32
    assert jg.fft.ihfft2(x.float()).dtype is jg.complex64
    assert jg.fft.hfftn(jg.ones(4, 3)).dtype is jg.float32  # real input: read as complex
    assert tuple(jg.fft.hfft2(jg.ones(4, 5, dtype=jg.complex64)).shape) == (4, 8)


def test_hfftn_ihfftn_gradients():
    a = jg.tensor(_spectrum((3, 4)), requires_grad=True)
    w = jg.tensor(np.random.RandomState(3).randn(3, 6))
    (jg.fft.hfft2(a, s=(3, 6)) * w).sum().backward()
    want = wirtinger_numerical_grad(lambda t: (jg.fft.hfft2(t, s=(3, 6)) * w).sum(),
                                    _spectrum((3, 4)))
    np.testing.assert_allclose(a.grad.numpy(), want, atol=1e-6)
    x = jg.tensor(np.random.RandomState(4).randn(2, 4, 4), requires_grad=True)
    assert jg.autograd.gradcheck(lambda t: jg.view_as_real(jg.fft.ihfftn(t, dim=(1, 2))),
                                 (x,))
    assert jg.autograd.gradcheck(lambda t: jg.fft.hfftn(t, dim=(0, 1)), (x,))
    torch = _torch()
    ta = torch.tensor(_spectrum((3, 4)), requires_grad=True)
    (torch.fft.hfft2(ta, s=(3, 6)) * torch.tensor(w.numpy())).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize("call", [
    lambda M: M.fft.ihfftn(M.ones(2, 3, dtype=M.complex64)),
    lambda M: M.fft.ihfft2(M.ones(2, 3, dtype=M.complex64)),
    lambda M: M.fft.ihfft(M.ones(3, dtype=M.complex64)),
])
def test_ihfft_of_complex_input_raises_pytorchs_error(call):
    assert_raises_like_torch(call, RuntimeError)


# ----------------------------------------------------------------- complex matrix_exp
def test_matrix_exp_of_complex_matrices():
    rs = np.random.RandomState(0)
    h = rs.randn(4, 4) + 1j * rs.randn(4, 4)
    h = h + h.conj().T  # Hermitian: exp(-iH) = U diag(exp(-ie)) U^H
    e, u = np.linalg.eigh(h)
    want = u @ np.diag(np.exp(-1j * e)) @ u.conj().T
    got = jg.linalg.matrix_exp(jg.tensor(-1j * h))
    assert got.dtype is jg.complex128
    np.testing.assert_allclose(got.numpy(), want, atol=1e-12)
    assert jg.linalg.matrix_exp(jg.tensor(-1j * h).to(jg.complex64)).dtype is jg.complex64
    torch = _torch()
    a = rs.randn(2, 4, 4) + 1j * rs.randn(2, 4, 4)
    np.testing.assert_allclose(jg.linalg.matrix_exp(jg.tensor(a)).numpy(),
                               torch.linalg.matrix_exp(torch.tensor(a)).numpy(), atol=1e-12)


def test_matrix_exp_complex_gradient():
    rs = np.random.RandomState(1)
    a = 0.5 * (rs.randn(3, 3) + 1j * rs.randn(3, 3))
    w = jg.tensor(rs.randn(3, 3) + 1j * rs.randn(3, 3))

    def loss(t):
        return (jg.linalg.matrix_exp(t) * w).real.sum() + jg.linalg.matrix_exp(t).abs().sum()

    x = jg.tensor(a, requires_grad=True)
    loss(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), wirtinger_numerical_grad(loss, a), atol=1e-6)
    r = jg.tensor(rs.randn(3, 3), requires_grad=True)  # a real input, a complex matrix
    assert jg.autograd.gradcheck(
        lambda t: jg.view_as_real(jg.linalg.matrix_exp(t * (0.5 + 1j))), (r,))
    torch = _torch()
    tx = torch.tensor(a, requires_grad=True)
    tw = torch.tensor(w.numpy())
    ((torch.linalg.matrix_exp(tx) * tw).real.sum()
     + torch.linalg.matrix_exp(tx).abs().sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-10)


# -------------------------------------------------------------------------- seeds
@pytest.mark.parametrize("seed", [-1, -5, -2**63, 2**64 - 1, 2**63, 0, 123])
def test_manual_seed_takes_pytorchs_range(seed):
    g = jg.Generator().manual_seed(seed)
    assert g.initial_seed() == seed % 2**64
    a = jg.rand(3, generator=g)
    assert jg.equal(a, jg.rand(3, generator=jg.Generator().manual_seed(seed % 2**64)))
    state = g.get_state()
    b = jg.rand(2, generator=g)
    g.set_state(state)
    assert jg.equal(b, jg.rand(2, generator=g)) and g.initial_seed() == seed % 2**64
    torch = _torch()
    assert torch.Generator().manual_seed(seed).initial_seed() == g.initial_seed()


def test_module_manual_seed_of_negative_and_float_seeds():
    state = jg.get_rng_state()
    try:
        assert jg.manual_seed(-5).initial_seed() == 2**64 - 5
        assert jg.initial_seed() == 2**64 - 5
        assert jg.manual_seed(1.5).initial_seed() == 1  # int(seed), as torch.manual_seed
    finally:
        jg.set_rng_state(state)


@pytest.mark.parametrize("seed,exc", [(2**64, ValueError), (-2**63 - 1, ValueError),
                                      (1.5, RuntimeError), (True, RuntimeError)])
def test_generator_manual_seed_errors(seed, exc):
    assert_raises_like_torch(lambda M: M.Generator().manual_seed(seed), exc)


# ---------------------------------------------------------------------- multinomial
def test_multinomial_without_replacement_takes_zero_weight_categories_last():
    for _ in range(20):
        r = jg.multinomial(jg.tensor([[0.0, 1.0, 0.0, 2.0], [1.0, 0.0, 0.0, 0.0]]), 4)
        first, second = r.tolist()
        assert set(first[:2]) == {1, 3} and set(first[2:]) == {0, 2}
        assert second[0] == 0 and sorted(second) == [0, 1, 2, 3]
    assert jg.multinomial(jg.tensor([1.0, 0.0]), 2).tolist() == [0, 1]
    torch = _torch()
    t = torch.multinomial(torch.tensor([[0.0, 1.0, 0.0, 2.0]]), 4).tolist()[0]
    assert set(t[:2]) == {1, 3} and set(t[2:]) == {0, 2}  # (no error in PyTorch either)


# ------------------------------------------------------------------------ LinAlgError
def test_linalg_error_is_named_as_pytorchs():
    with pytest.raises(jg.linalg.LinAlgError) as e:
        jg.linalg.cholesky(jg.tensor([[1.0, 2.0], [2.0, 1.0]]))
    assert type(e.value).__name__ == "_LinAlgError"
    assert isinstance(e.value, RuntimeError)
    torch = _torch()
    with pytest.raises(torch.linalg.LinAlgError) as t:
        torch.linalg.cholesky(torch.tensor([[1.0, 2.0], [2.0, 1.0]]))
    assert type(t.value).__name__ == type(e.value).__name__
    assert str(t.value) == str(e.value)


# ------------------------------------------------------- forward AD through a Function
def _my_sin(M):
    class MySin(M.autograd.Function):
        @staticmethod
        def forward(x):
            return M.sin(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            return g * M.cos(ctx.saved_tensors[0])

        @staticmethod
        def jvp(ctx, t):
            return t * M.cos(ctx.saved_tensors[0])

    return MySin


def _fw_tangent(M):
    fw = M.autograd.forward_ad
    x = M.tensor([0.1, 0.7, 2.0], dtype=M.float64)
    with fw.dual_level():
        d = fw.make_dual(x, M.full((3,), 2.0, dtype=M.float64))
        out = _my_sin(M).apply(d * 1.5) * 3
        return fw.unpack_dual(out).tangent.tolist()


def test_forward_ad_through_a_custom_function():
    """The Function's forward runs with grad mode off: its ops must not count as ops that
    lost a tangent (unpack_dual raised), since the Function's node carries it."""
    got = _fw_tangent(jg)
    want = [2.0 * 1.5 * 3 * np.cos(1.5 * v) for v in (0.1, 0.7, 2.0)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    x = jg.tensor([0.1, 0.7, 2.0], dtype=jg.float64, requires_grad=True)
    assert jg.autograd.gradcheck(_my_sin(jg).apply, (x,), check_forward_ad=True)
    torch = _torch()
    np.testing.assert_allclose(got, _fw_tangent(torch), rtol=1e-12)


@pytest.mark.parametrize("op", [
    lambda d: d.exp(), lambda d: d * 2, lambda d: d + d, lambda d: d - 1, lambda d: d / 2,
    lambda d: d * d, lambda d: d.sum(), lambda d: d.mean(), lambda d: d @ d,
])
def test_forward_ad_op_under_no_grad_is_noted(op):
    """An op run under no_grad on a dual loses its tangent here: unpack_dual raises rather
    than return a tangent without it (the binary operators' and the full sum's fast paths
    did not note it: ``d * 2`` then ``y + d`` gave the tangent of ``d`` alone)."""
    fw = jg.autograd.forward_ad
    with fw.dual_level():
        d = fw.make_dual(jg.ones(2), jg.ones(2))
        with jg.no_grad():
            y = op(d)
        with pytest.raises(RuntimeError, match="an op ran without grad mode"):
            fw.unpack_dual(y + d)
