"""``embedding_bag`` / ``EmbeddingBag``: the sum, mean or max of each bag of embeddings,
without the ``(bags, length, dim)`` intermediate a Python loop over bags would need, written
with ops (``index_select``, ``index_add``; for ``max`` a padded gather and ``argmax``, so the
gradient goes to one row per bag and feature, as PyTorch's).

Bags are the rows of a 2-D ``input``, or the segments ``offsets[i]:offsets[i + 1]`` of a 1-D
one (the last to the end, unless ``include_last_offset``). ``per_sample_weights`` scale the
rows (``sum`` only); rows equal to ``padding_idx`` are left out (and do not count in a
mean); an empty bag is zeros. The bag of each row comes from ``offsets``' values, read on the
host: a compiled function calling this with ``offsets`` runs it eagerly.
"""

from __future__ import annotations

import numpy as np

from .. import creation
from ..ops.dispatch import as_tensor_arg
from ..shapes import fmt_shape
from ..tensor import Tensor
from .layers import _Table, place

__all__ = ["embedding_bag", "EmbeddingBag"]


def _bags(input: Tensor, offsets, include_last_offset: bool) -> tuple[Tensor, np.ndarray, int]:
    """The flat indices, each one's bag and the number of bags."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found "
                             f"offsets of type {type(offsets).__name__}")
        b, n = input.shape
        return input.reshape(-1), np.repeat(np.arange(b), n), b
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    offs = np.asarray(as_tensor_arg(offsets, "offsets").detach().cpu().numpy(), dtype=np.int64)
    if offs.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    n = input.shape[0]
    if offs.size and (offs[0] != 0 or (np.diff(offs) < 0).any() or offs[-1] > n):
        raise RuntimeError(f"offsets must be non-decreasing, start at 0 and not exceed the "
                           f"input's length {n}; got {offs.tolist()}")
    if include_last_offset and offs.size and offs[-1] != n:
        raise RuntimeError(f"embedding_bag: with include_last_offset=True the last offset "
                           f"must be the input's length {n} (CSR format), got {offs[-1]}")
    nbags = offs.size - 1 if include_last_offset else offs.size
    bag = np.searchsorted(offs[:nbags], np.arange(n), side="right") - 1
    return input, bag, nbags


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm=None, norm_type: float = 2, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """``(bags, dim)``: the ``mode`` ("sum", "mean" or "max") of each bag of rows of
    ``weight`` that ``input`` indexes (see the module doc)."""
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: scale_grad_by_freq and sparse are not "
                                  "supported by jitgrad")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                      f"per_sample_weights is only supported for mode='sum' "
                                      f"(got mode='{mode}'). Please open a feature request "
                                      f"on GitHub.")
        if per_sample_weights.shape != input.shape:
            shape = fmt_shape(per_sample_weights.shape)
            raise ValueError(f"embedding_bag: If per_sample_weights ({shape}) is not None, "
                             f"then it must have the same shape as the input "
                             f"({fmt_shape(input.shape)})")
    input = as_tensor_arg(input, "input")
    if max_norm is not None:
        from ..ops.nnops.embedding import embedding_renorm_

        embedding_renorm_(weight, input, max_norm, norm_type)
    flat, bag, nbags = _bags(input, offsets, include_last_offset)
    idx = flat.detach().cpu().numpy().astype(np.int64)
    keep = bag >= 0
    if padding_idx is not None:
        pad = padding_idx if padding_idx >= 0 else weight.shape[0] + padding_idx
        keep &= idx != pad
    rows_at = np.nonzero(keep)[0]
    dim = weight.shape[1]
    dev = weight.device
    rows = weight.index_select(0, creation.tensor(idx[rows_at], device=dev))  # (R, D)
    bags_of = bag[rows_at]
    if mode == "max":
        if rows_at.size == 0:
            return creation.zeros(nbags, dim, dtype=weight.dtype, device=dev)
        counts = np.bincount(bags_of, minlength=nbags)
        width = int(counts.max())
        slot = np.arange(bags_of.size) - np.concatenate([[0], np.cumsum(counts)[:-1]])[bags_of]
        grid = np.full((nbags, width), rows_at.size, dtype=np.int64)  # -> the -inf row
        grid[bags_of, slot] = np.arange(bags_of.size)
        from ..ops.concat import cat

        padded = cat([rows, creation.full((1, dim), float("-inf"), dtype=weight.dtype,
                                          device=dev)], 0)
        g = creation.tensor(grid.reshape(-1), device=dev)
        cand = padded.index_select(0, g).reshape(nbags, width, dim)
        pick = cand.argmax(1, keepdim=True)
        out = cand.gather(1, pick).squeeze(1)
        empty = creation.tensor((counts == 0)[:, None], device=dev)
        return out.masked_fill(empty, 0.0)
    if per_sample_weights is not None:
        w = per_sample_weights.reshape(-1).index_select(
            0, creation.tensor(rows_at, device=per_sample_weights.device))
        rows = rows * w.unsqueeze(1)
    out = creation.zeros(nbags, dim, dtype=weight.dtype, device=dev).index_add(
        0, creation.tensor(bags_of, device=dev), rows)
    if mode == "mean":
        counts = np.bincount(bags_of, minlength=nbags).astype(np.float64)
        out = out / creation.tensor(np.maximum(counts, 1.0)[:, None].astype(weight.dtype.np),
                                    device=dev)
    return out


class EmbeddingBag(_Table):
    """A table of ``num_embeddings`` vectors (N(0, 1)) reduced per bag: see
    :func:`embedding_bag`."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Tensor | None = None,
                 include_last_offset: bool = False, padding_idx: int | None = None,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.mode, self.include_last_offset = mode, include_last_offset
        self._setup_table("EmbeddingBag", num_embeddings, embedding_dim, padding_idx,
                          max_norm, norm_type, scale_grad_by_freq, sparse, _weight, False,
                          dtype)
        place(self, device)

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             mode=self.mode,
                             per_sample_weights=per_sample_weights,
                             include_last_offset=self.include_last_offset,
                             padding_idx=self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}, mode='{self.mode}'"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        mode: str = "mean", sparse: bool = False,
                        include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """An ``EmbeddingBag`` holding ``embeddings`` (2-D), frozen unless ``freeze`` is
        False."""
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  embeddings, include_last_offset, padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

