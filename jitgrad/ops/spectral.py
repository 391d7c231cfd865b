"""PyTorch's short-time Fourier transforms, ``stft`` and ``istft``, written with existing ops
(so both differentiate, through ``unfold`` / ``unfold_backward``, the window product and
:mod:`jitgrad.fft`'s transforms).

``stft``: the signal padded by ``n_fft // 2`` on each side (``center``, ``pad_mode``), cut
into frames of ``n_fft`` every ``hop_length`` (``unfold``), each multiplied by the window
(zero-padded to ``n_fft``, centred), and transformed (``rfft`` for a real signal and window
when ``onesided``, else ``fft``); the result is ``(..., freq, frames)``.

``istft``: the inverse: the frames back (``irfft`` / ``ifft``), windowed, overlap-added
(``unfold_backward``, the adjoint of ``unfold``), divided by the overlap-added squared
window (PyTorch's error where that envelope is ~0), the centre padding removed and the
result cut or zero-padded to ``length``.
"""

from __future__ import annotations

from ..tensor import Tensor

__all__ = ["stft", "istft"]


def _window(window, win_length: int, n_fft: int, like: Tensor, name: str) -> Tensor:
    """The window as ``n_fft`` values: ones by default, zero-padded on both sides (centred)
    when ``win_length < n_fft``."""
    from ..creation import ones

    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"{name}: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win_length}")
    if window is None:
        window = ones(win_length, dtype=like.dtype.to_real() if like.is_complex()
                      else like.dtype)
    elif window.dim() != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"{name}: expected a 1D window tensor of size equal to "
                           f"win_length={win_length}, but got window with size "
                           f"{list(window.shape)}")
    if win_length < n_fft:
        from .padding import pad

        left = (n_fft - win_length) // 2
        window = pad(window, [left, n_fft - win_length - left])
    return window


def stft(input: Tensor, n_fft: int, hop_length: int | None = None,
         win_length: int | None = None, window: Tensor | None = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None) -> Tensor:
    """The short-time Fourier transform of a 1-D signal or a batch of them (``(L,)`` or
    ``(B, L)``): complex ``(..., n_fft // 2 + 1 or n_fft, frames)``; with
    ``return_complex=False`` its real and imaginary parts in a last dim of 2 (deprecated in
    PyTorch). PyTorch requires ``return_complex`` for real inputs, and so does this."""
    from .. import fft
    from .complex_functions import view_as_real

    if return_complex is None:
        if not (input.is_complex() or (window is not None and window.is_complex())):
            raise RuntimeError("stft requires the return_complex parameter be given for real "
                               "inputs, and will further require that return_complex=True "
                               "in a future PyTorch release.")
        return_complex = True
    if input.dim() not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got a {input.dim()}D "
                           "tensor")
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win_length = n_fft if win_length is None else int(win_length)
    if hop <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop}")
    x = input
    if center:
        from .padding import pad

        x3 = x.reshape(1, 1, -1) if x.dim() == 1 else x.unsqueeze(1)
        x3 = pad(x3, [n_fft // 2, n_fft // 2], mode=pad_mode)
        x = x3.reshape(-1) if input.dim() == 1 else x3.squeeze(1)
    length = x.shape[-1]
    if not 0 < n_fft <= length:
        raise RuntimeError(f"stft: expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    w = _window(window, win_length, n_fft, x, "stft")
    frames = x.unfold(-1, n_fft, hop) * w  # (..., frames, n_fft)
    two_sided = x.is_complex() or w.is_complex() or onesided is False
    if onesided and (x.is_complex() or w.is_complex()):
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spec = fft.fft(frames, dim=-1, norm=norm) if two_sided else \
        fft.rfft(frames, dim=-1, norm=norm)
    spec = spec.transpose(-1, -2)
    return spec if return_complex else view_as_real(spec)


def istft(input: Tensor, n_fft: int, hop_length: int | None = None,
          win_length: int | None = None, window: Tensor | None = None, center: bool = True,
          normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Tensor:
    """The inverse of :func:`stft`: the signal (``(L,)`` or ``(B, L)``) whose STFT is the
    complex ``input`` (``(..., freq, frames)``), by windowed overlap-add."""
    from .. import fft
    from .unfold_view import unfold_backward

    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex "
                           f"dtype, but got {input.dim()}")
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win_length = n_fft if win_length is None else int(win_length)
    n_frames = input.shape[-1]
    onesided = input.shape[-2] != n_fft if onesided is None else onesided
    if onesided and input.shape[-2] != n_fft // 2 + 1:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of "
                           f"the input tensor to match n_fft / 2 + 1 when onesided=True, "
                           f"but got {input.shape[-2]}")
    norm = "ortho" if normalized else "backward"
    spec = input.transpose(-1, -2)  # (..., frames, freq)
    if onesided:
        frames = fft.irfft(spec, n=n_fft, dim=-1, norm=norm)
    else:
        frames = fft.ifft(spec, n=n_fft, dim=-1, norm=norm)
        if not return_complex:
            frames = frames.real
    w = _window(window, win_length, n_fft, frames, "istft")
    frames = frames * w
    total = n_fft + hop * (n_frames - 1)
    lead = frames.shape[:-2]
    y = unfold_backward(frames, (*lead, total), frames.dim() - 2, n_fft, hop)
    ones_frames = (w * w.conj() if w.is_complex() else w * w).expand(n_frames, n_fft)
    envelope = unfold_backward(ones_frames.contiguous(), (total,), 0, n_fft, hop)
    start = n_fft // 2 if center else 0
    end = total - n_fft // 2 if center else total
    if length is not None:
        end = min(start + int(length), total)
    env = envelope[start:end]
    if bool((env.abs() < 1e-11).any()):
        raise RuntimeError("istft: window overlap add min: 1e-11 is not satisfied "
                           "(the window is zero where frames overlap)")
    y = y[..., start:end] / env
    if length is not None and y.shape[-1] < length:
        from .padding import pad

        y = pad(y, [0, int(length) - y.shape[-1]])
    return y


#: the ``Tensor`` members this module adds (:mod:`jitgrad.ops.methods` installs them)
TENSOR_METHODS = {"stft": stft, "istft": istft}
