"""``jitgrad.fft``: values against NumPy, gradients (PyTorch's convention: for a real loss,
``z.grad = dL/dx + i dL/dy``) against central differences in float64 / complex128, and
values, dtypes and gradients against PyTorch when it is installed."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import wirtinger_numerical_grad

import jitgrad

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 8))
X7 = RNG.standard_normal((3, 7))
Z = RNG.standard_normal((3, 8)) + 1j * RNG.standard_normal((3, 8))
IMG = RNG.standard_normal((2, 6, 8))

#: name -> (function of the library, input)
CASES = {
    "fft_real": (lambda L, a: L.fft.fft(a), X),
    "fft_complex": (lambda L, a: L.fft.fft(a), Z),
    "fft_pad": (lambda L, a: L.fft.fft(a, n=12), X),
    "fft_crop_dim0": (lambda L, a: L.fft.fft(a, n=2, dim=0), Z),
    "ifft": (lambda L, a: L.fft.ifft(a), Z),
    "ifft_ortho": (lambda L, a: L.fft.ifft(a, norm="ortho"), Z),
    "ifft_forward": (lambda L, a: L.fft.ifft(a, norm="forward"), Z),
    "rfft": (lambda L, a: L.fft.rfft(a), X),
    "rfft_odd": (lambda L, a: L.fft.rfft(a), X7),
    "rfft_pad_ortho": (lambda L, a: L.fft.rfft(a, n=10, norm="ortho"), X),
    "irfft": (lambda L, a: L.fft.irfft(a), Z[:, :5]),
    "irfft_odd": (lambda L, a: L.fft.irfft(a, n=9), Z[:, :5]),
    "irfft_crop_forward": (lambda L, a: L.fft.irfft(a, n=6, norm="forward"), Z[:, :5]),
    "fft2": (lambda L, a: L.fft.fft2(a), IMG),
    "ifftn_dims": (lambda L, a: L.fft.ifftn(a, dim=(0, 2)), IMG),
    "rfft2": (lambda L, a: L.fft.rfft2(a), IMG),
    "rfftn_s": (lambda L, a: L.fft.rfftn(a, s=(4, 10)), IMG),
    "irfft2_roundtrip": (lambda L, a: L.fft.irfft2(L.fft.rfft2(a), s=(6, 8)), IMG),
    "hfft": (lambda L, a: L.fft.hfft(a), Z[:, :5]),
    "ihfft": (lambda L, a: L.fft.ihfft(a), X),
    "fftshift": (lambda L, a: L.fft.fftshift(L.fft.fft(a), dim=-1), X),
    "spectral_conv": (lambda L, a: L.fft.irfft2(L.fft.rfft2(a)[..., :3, :3] * (1 + 2j),
                                                s=(6, 8)), IMG),
}

NUMPY = {
    "fft_real": lambda a: np.fft.fft(a), "fft_complex": lambda a: np.fft.fft(a),
    "fft_pad": lambda a: np.fft.fft(a, 12), "fft_crop_dim0": lambda a: np.fft.fft(a, 2, 0),
    "ifft": np.fft.ifft, "ifft_ortho": lambda a: np.fft.ifft(a, norm="ortho"),
    "rfft": np.fft.rfft, "rfft_odd": np.fft.rfft, "irfft": np.fft.irfft,
    "irfft_odd": lambda a: np.fft.irfft(a, 9), "fft2": np.fft.fft2,
    "rfft2": np.fft.rfft2, "rfftn_s": lambda a: np.fft.rfftn(a, (4, 10), axes=(1, 2)),
    "hfft": np.fft.hfft, "ihfft": np.fft.ihfft,
}


def _loss(f):
    """A real loss reading both parts of ``f``'s output, with fixed weights."""
    weights = {}

    def loss(t):
        out = f(jitgrad, t)
        parts = jitgrad.view_as_real(out) if out.is_complex() else out
        w = weights.get(parts.shape)
        if w is None:
            w = weights[parts.shape] = jitgrad.tensor(
                np.random.default_rng(1).standard_normal(parts.shape))
        return (parts * w).sum()
    return loss


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_values_equal_numpy(name):
    f, a = CASES[name]
    np.testing.assert_allclose(f(jitgrad, jitgrad.tensor(a)).numpy(), NUMPY[name](a),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_against_central_differences(name):
    f, a = CASES[name]
    loss = _loss(f)
    t = jitgrad.tensor(a, requires_grad=True)
    loss(t).backward()
    assert t.grad.dtype is t.dtype
    np.testing.assert_allclose(t.grad.numpy(), wirtinger_numerical_grad(loss, a), rtol=1e-6,
                               atol=1e-7)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch_in_float32(name):
    torch = pytest.importorskip("torch")
    f, a = CASES[name]
    a = a.astype(np.complex64 if a.dtype.kind == "c" else np.float32)
    w = None
    results = []
    for lib in (jitgrad, torch):
        t = lib.tensor(a, requires_grad=True)
        out = f(lib, t)
        out = out.resolve_conj() if lib is torch else out
        parts = lib.view_as_real(out) if out.is_complex() else out
        if w is None:
            w = np.random.default_rng(2).standard_normal(tuple(parts.shape)).astype(np.float32)
        (parts * lib.tensor(w)).sum().backward()
        results.append((str(out.dtype).split(".")[-1], tuple(out.shape),
                        out.detach().numpy(), t.grad.resolve_conj().numpy()
                        if lib is torch else t.grad.numpy()))
    (d1, s1, y1, g1), (d2, s2, y2, g2) = results
    assert (d1, s1) == (d2, s2)
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g1, g2, rtol=1e-4, atol=1e-4)


def test_frequencies_and_shifts():
    np.testing.assert_allclose(jitgrad.fft.fftfreq(5).numpy(), np.fft.fftfreq(5), rtol=1e-6)
    np.testing.assert_allclose(jitgrad.fft.rfftfreq(6, 0.5).numpy(), np.fft.rfftfreq(6, 0.5),
                               rtol=1e-6)
    assert jitgrad.fft.fftfreq(4, dtype=jitgrad.float64).dtype is jitgrad.float64
    a = np.arange(12.0).reshape(3, 4)
    assert jitgrad.fft.fftshift(jitgrad.tensor(a)).tolist() == np.fft.fftshift(a).tolist()
    assert jitgrad.fft.ifftshift(jitgrad.tensor(a), dim=1).tolist() == \
        np.fft.ifftshift(a, axes=1).tolist()


def test_dtypes():
    assert jitgrad.fft.fft(jitgrad.ones(4)).dtype is jitgrad.complex64
    assert jitgrad.fft.rfft(jitgrad.ones(4, dtype=jitgrad.float64)).dtype is jitgrad.complex128
    assert jitgrad.fft.fft(jitgrad.arange(4)).dtype is jitgrad.complex64
    assert jitgrad.fft.irfft(jitgrad.ones(3, dtype=jitgrad.cfloat)).dtype is jitgrad.float32


def test_errors():
    with pytest.raises(RuntimeError, match="expects a real input"):
        jitgrad.fft.rfft(jitgrad.ones(4, dtype=jitgrad.cfloat))
    with pytest.raises(ValueError, match="Invalid normalization mode"):
        jitgrad.fft.fft(jitgrad.ones(4), norm="bogus")
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        jitgrad.fft.fft(jitgrad.ones(4), n=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        jitgrad.fft.fft(jitgrad.ones(4), dim=1)


# ----------------------------------------------------------------------- stft / istft
SIG = RNG.standard_normal((2, 200))


def test_stft_istft_roundtrip():
    x = jitgrad.tensor(SIG)
    win = jitgrad.hann_window(32, dtype=jitgrad.float64)
    spec = jitgrad.stft(x, 32, hop_length=8, window=win, return_complex=True)
    assert spec.shape == (2, 17, 26) and spec.dtype is jitgrad.complex128
    # frame 3 of the centred signal, windowed, is column 3 of the spectrum
    padded = np.pad(SIG, ((0, 0), (16, 16)), mode="reflect")
    frame = padded[:, 24:56] * win.numpy()
    np.testing.assert_allclose(spec[:, :, 3].numpy(), np.fft.rfft(frame), atol=1e-12)
    y = jitgrad.istft(spec, 32, hop_length=8, window=win, length=200)
    np.testing.assert_allclose(y.numpy(), SIG, atol=1e-12)
    rect = jitgrad.stft(x[0], 16, hop_length=4, center=False, onesided=False,
                        return_complex=True)
    assert rect.shape == (16, 47)
    np.testing.assert_allclose(jitgrad.istft(rect, 16, hop_length=4, center=False).numpy(),
                               SIG[0], atol=1e-12)


def test_stft_gradient_against_central_differences():
    win = jitgrad.hann_window(16, dtype=jitgrad.float64)

    def loss(t):
        spec = jitgrad.stft(t, 16, hop_length=4, window=win, return_complex=True)
        return spec.abs().pow(2).sum() + jitgrad.istft(spec * 0.5j, 16, hop_length=4,
                                                       window=win).real.sum()
    x = SIG[0, :40].copy()
    t = jitgrad.tensor(x, requires_grad=True)
    loss(t).backward()
    np.testing.assert_allclose(t.grad.numpy(), wirtinger_numerical_grad(loss, x), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("kw", [{}, {"normalized": True}, {"onesided": False},
                                {"center": False, "window": "ones"},
                                {"win_length": 20}, {"pad_mode": "constant"}])
def test_stft_istft_match_pytorch(kw):
    torch = pytest.importorskip("torch")
    sig = SIG.astype(np.float32)
    out = []
    for lib in (jitgrad, torch):
        kw_ = dict(kw)
        wl = kw_.pop("win_length", 32)
        win = lib.ones(wl) if kw_.pop("window", None) == "ones" else lib.hann_window(wl)
        x = lib.tensor(sig, requires_grad=True)
        spec = lib.stft(x, 32, hop_length=8, win_length=wl, window=win, return_complex=True,
                        **kw_)
        kw_.pop("pad_mode", None)
        y = lib.istft(spec, 32, hop_length=8, win_length=wl, window=win, length=190, **kw_)
        (spec.abs().mean() + (y * lib.tensor(sig[:, :190])).sum()).backward()
        out.append((spec.detach().numpy(), y.detach().numpy(), x.grad.numpy()))
    for a, b in zip(*out):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_stft_errors():
    x = jitgrad.tensor(SIG[0])
    with pytest.raises(RuntimeError, match="requires the return_complex parameter"):
        jitgrad.stft(x, 16)
    with pytest.raises(RuntimeError, match="window overlap add min"):
        w = jitgrad.hann_window(16, dtype=jitgrad.float64)
        spec = jitgrad.stft(x, 16, 4, window=w, center=False, return_complex=True)
        jitgrad.istft(spec, 16, 4, window=w, center=False)
    with pytest.raises(RuntimeError, match="requires a complex-valued input"):
        jitgrad.istft(jitgrad.ones(9, 4), 16)
    assert jitgrad.Tensor.stft is jitgrad.stft
