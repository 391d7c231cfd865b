"""Variable-length sequences for the recurrent layers, as ``torch.nn.utils.rnn``:
``PackedSequence`` and ``pack_padded_sequence`` / ``pad_packed_sequence`` /
``pad_sequence`` / ``unpad_sequence`` / ``pack_sequence`` / ``unpack_sequence``.

A packed batch keeps the sequences sorted by decreasing length, time step after time step:
step ``t`` holds ``batch_sizes[t]`` rows (the sequences still running at ``t``). Packing and
padding are one ``index_select`` each (row positions computed on the host), so both carry
gradients; ``nn.RNN`` / ``LSTM`` / ``GRU`` take a packed batch and run each step on the
sequences still running (``jitgrad/nn/recurrent.py``).

>>> import jitgrad
>>> from jitgrad.nn.utils.rnn import pack_sequence, pad_packed_sequence
>>> packed = pack_sequence([jitgrad.tensor([1, 2, 3]), jitgrad.tensor([4, 5]),
...                         jitgrad.tensor([6])])
>>> packed
PackedSequence(data=tensor([1, 4, 6, 2, 5, 3]), batch_sizes=tensor([3, 2, 1]), sorted_indices=None, unsorted_indices=None)
>>> pad_packed_sequence(packed, batch_first=True)[0]
tensor([[1, 2, 3],
        [4, 5, 0],
        [6, 0, 0]])
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from ... import creation, dtypes
from ...ops.concat import cat, stack
from ...tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


class PackedSequence_(NamedTuple):  # noqa: N801 - PyTorch's name
    """The fields of :class:`PackedSequence`."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(PackedSequence_):
    """A batch of variable-length sequences packed step by step (made by
    :func:`pack_padded_sequence` / :func:`pack_sequence`, taken and returned by the
    recurrent layers).

    ``data`` holds the rows of every step in turn, ``batch_sizes`` (an int64 CPU tensor) how
    many sequences each step has, ``sorted_indices`` the batch order packing sorted the
    sequences into (None when they came sorted) and ``unsorted_indices`` its inverse.
    """

    def __new__(cls, data: Tensor, batch_sizes: Tensor | None = None,
                sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None) -> PackedSequence:
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif batch_sizes.device.type != "cpu":
            raise ValueError(
                "batch_sizes should always be on CPU. Instances of PackedSequence should never "
                "be created manually. They should be instantiated by functions like "
                "pack_sequence and pack_padded_sequences in nn.utils.rnn. "
                "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data.to(*args, **kwargs)`` (the indices follow it to its device); ``self`` when
        ``data`` is already there in that dtype."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def move(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.to(data.device)

        return type(self)(data, self.batch_sizes, move(self.sorted_indices),
                          move(self.unsorted_indices))

    def cuda(self, device: Any = None, non_blocking: bool = False) -> PackedSequence:
        """``to("cuda")`` (or to the CUDA ``device`` given)."""
        return self.to("cuda" if device is None else device)

    def cpu(self) -> PackedSequence:
        """``to("cpu")``."""
        return self.to("cpu")

    def pin_memory(self) -> PackedSequence:
        """``data`` and the indices in pinned memory."""
        def pin(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.pin_memory()

        return type(self)(self.data.pin_memory(), self.batch_sizes, pin(self.sorted_indices),
                          pin(self.unsorted_indices))

    def double(self) -> PackedSequence:
        """``data`` as float64."""
        return self.to(dtype=dtypes.float64)

    def float(self) -> PackedSequence:
        """``data`` as float32."""
        return self.to(dtype=dtypes.float32)

    def half(self) -> PackedSequence:
        """``data`` as float16."""
        return self.to(dtype=dtypes.float16)

    def long(self) -> PackedSequence:
        """``data`` as int64."""
        return self.to(dtype=dtypes.int64)

    def int(self) -> PackedSequence:
        """``data`` as int32."""
        return self.to(dtype=dtypes.int32)

    @property
    def is_cuda(self) -> bool:
        """Whether ``data`` is on a CUDA device."""
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        """Whether ``data`` is in pinned memory."""
        return self.data.is_pinned()


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of the 1-D index permutation ``permutation`` (None for None)."""
    if permutation is None:
        return None
    p = np.asarray(permutation.detach().cpu().numpy(), dtype=np.int64)
    inv = np.empty_like(p)
    inv[p] = np.arange(p.size, dtype=np.int64)
    return creation.tensor(inv, dtype=dtypes.int64, device=permutation.device)


def _lengths_array(lengths) -> np.ndarray:
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1:
            raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                               f"{lengths.ndim}D {lengths.device.type} "
                               f"{lengths.dtype.tensor_type.replace('Tensor', '')} tensor")
        return np.asarray(lengths.detach().cpu().numpy()).astype(np.int64)
    return np.asarray(list(lengths), dtype=np.int64).reshape(-1)


def _index(t: Tensor, idx: np.ndarray) -> Tensor:
    return creation.tensor(idx, dtype=dtypes.int64, device=t.device)


def pack_padded_sequence(input: Tensor, lengths: Tensor | list[int], batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch ``T x B x *`` (``B x T x *`` with ``batch_first``) of sequences of
    ``lengths``. With ``enforce_sorted`` the lengths must be in decreasing order; otherwise
    the sequences are sorted here (``sorted_indices`` records the order)."""
    lens = _lengths_array(lengths)
    sorted_indices = None
    if not enforce_sorted:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
        sorted_indices = _index(input, order)
    if input.ndim < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[-{max(input.ndim, 1)}, {max(input.ndim, 1) - 1}], but got 1)")
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    if lens.size != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{lens.size} (batch_size={batch})")
    if batch and lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if np.any(lens[1:] > lens[:-1]):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
            "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
            "to sidestep this requirement if you do not need ONNX exportability.")
    if batch and lens[0] > steps:
        raise RuntimeError(f"pack_padded_sequence: a length ({int(lens[0])}) is larger than "
                           f"the padded sequence length ({steps})")
    # batch_sizes[t] = how many sequences are longer than t
    batch_sizes = (lens[None, :] > np.arange(int(lens[0]) if batch else 0)[:, None]).sum(1)
    rows = []  # positions in the input flattened over (time, batch) or (batch, time)
    order = np.arange(batch) if sorted_indices is None else order
    for t, bs in enumerate(batch_sizes):
        b = order[:bs]
        rows.append(b * steps + t if batch_first else t * batch + b)
    flat = input.reshape(-1, *input.shape[2:])
    idx = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    data = flat.index_select(0, _index(input, idx))
    return PackedSequence(data, creation.tensor(batch_sizes.astype(np.int64), device="cpu"),
                          sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None
                        ) -> tuple[Tensor, Tensor]:
    """Undo :func:`pack_padded_sequence`: the padded batch (``T x B x *``, ``B x T x *`` with
    ``batch_first``; ``T`` the longest length, or ``total_length``) in the batch's original
    order, and the lengths."""
    data, batch_sizes, _, unsorted = sequence
    sizes = np.asarray(batch_sizes.numpy(), dtype=np.int64)
    steps = int(sizes.size)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {steps}")
        steps = int(total_length)
    batch = int(sizes[0]) if sizes.size else 0
    lens = (sizes[None, :] > np.arange(batch)[:, None]).sum(1)  # per sorted sequence
    order = np.arange(batch) if unsorted is None else np.asarray(unsorted.cpu().numpy())
    offsets = np.concatenate([[0], np.cumsum(sizes)])[:-1]
    pad_row = int(data.shape[0])  # the row of padding appended to ``data``
    # out[t, j] (time-major) reads the sorted sequence order[j] at step t
    src = np.full((steps, batch), pad_row, dtype=np.int64)
    for j in range(batch):
        s = order[j]
        n = lens[s]
        src[:n, j] = offsets[:n] + s
    if batch_first:
        src = src.T
    filler = creation.full((1, *data.shape[1:]), padding_value, dtype=data.dtype,
                           device=data.device)
    rows = cat([data, filler], 0).index_select(0, _index(data, src.reshape(-1)))
    out = rows.reshape(*src.shape, *data.shape[1:])
    return out, creation.tensor(lens[order].astype(np.int64), device="cpu")


def pad_sequence(sequences: Tensor | list[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack sequences ``L_i x *`` into ``T x B x *`` (``B x T x *`` with ``batch_first``),
    padded with ``padding_value`` on the right (or ``padding_side="left"``) to the longest
    length ``T``."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg "
                           f"of type: {type(sequences)}")
    seqs = list(sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    first = seqs[0]
    trailing = tuple(first.shape[1:])
    steps = max(s.shape[0] for s in seqs)
    rows = []
    for s in seqs:
        shape = tuple(s.shape[1:])
        if shape != trailing:
            if len(shape) == len(trailing):
                d = next(i for i in range(len(shape)) if shape[i] != trailing[i])
                raise RuntimeError(f"The size of tensor a ({trailing[d]}) must match the size "
                                   f"of tensor b ({shape[d]}) at non-singleton dimension "
                                   f"{d + 1}")
            raise RuntimeError(f"pad_sequence: every sequence must have the trailing shape "
                               f"{list(trailing)}, got {list(shape)}")
        if s.dtype != first.dtype:
            s = s.to(first.dtype)
        gap = steps - s.shape[0]
        if gap:
            fill = creation.full((gap, *trailing), padding_value, dtype=first.dtype,
                                 device=first.device)
            s = cat([s, fill] if padding_side == "right" else [fill, s], 0)
        rows.append(s)
    return stack(rows, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor,
                   batch_first: bool = False) -> list[Tensor]:
    """Split a padded batch back into its sequences (the first ``lengths[i]`` steps of each).
    Unlike PyTorch, ``padded_sequences`` is not transposed in place."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    steps = x.shape[1]
    idx = creation.arange(steps, device=x.device)
    lens = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
    if len(lens) != x.shape[0]:
        raise ValueError(f"zip() argument 2 is {'shorter' if len(lens) < x.shape[0] else 'longer'}"
                         " than argument 1")
    return [x[b][idx < int(n)] for b, n in enumerate(lens)]


def pack_sequence(sequences: list[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences ``L_i x *`` (by decreasing length with ``enforce_sorted``):
    ``pad_sequence`` then ``pack_padded_sequence``."""
    lengths = [int(s.shape[0]) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """Undo :func:`pack_sequence`: the list of sequences, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
