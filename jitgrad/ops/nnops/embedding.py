"""Embedding lookup (a row gather) and its backward (a scatter-add of rows into a zero table,
on a Numba kernel: NumPy's ``add.at`` is an order of magnitude slower)."""

from __future__ import annotations

import numpy as np

from ...devices import add_at, array_namespace, first_outside
from ...tensor import Tensor
from .. import samples as S
from ..api import api
from ..dispatch import as_tensor_arg, call
from ..eager_kernels import use_kernels
from ..registry import OPAQUE, defop

__all__ = ["embedding", "embedding_backward"]


def _embedding_ref(weight, indices, padding_idx=None):
    _check_range(indices, weight.shape[0])
    return np.take(weight, indices, axis=0)


def _check_range(a, num: int) -> None:
    """PyTorch's error for an index outside ``[0, num)``, checked where the op runs (eager
    calls and compiled plans alike: :func:`jitgrad.devices.first_outside`)."""
    if first_outside(a, 0, num) is not None:
        raise IndexError("index out of range in self")


def _embedding_backward_ref(g, indices, num_weights, padding_idx=None):
    out = array_namespace(g).zeros((num_weights,) + g.shape[indices.ndim:], dtype=g.dtype)
    flat = indices.reshape(-1)
    rows = g.reshape((flat.size,) + out.shape[1:])
    keep = flat != padding_idx if padding_idx is not None else slice(None)
    add_at(out, flat[keep], rows[keep])
    return out


def _embedding_backward_eager(g, indices, num_weights, padding_idx=None):
    if type(g) is not np.ndarray or g.dtype not in (np.float32, np.float64) or \
            g.ndim != indices.ndim + 1 or not use_kernels():  # CUDA arrays: NumPy's form
        return _embedding_backward_ref(g, indices, num_weights, padding_idx)
    from ...kernels import nn as K

    d = g.shape[-1]
    out = np.zeros((num_weights, d), dtype=g.dtype)
    K.embedding_backward(np.ascontiguousarray(g).reshape(-1, d),
                         np.ascontiguousarray(indices, dtype=np.int64).reshape(-1),
                         -1 if padding_idx is None else padding_idx, out)
    return out


def _embedding_backward_vjp(gg, ins, out, p, n):
    if not n[0]:
        return None, None
    indices = ins[1]
    r = embedding(indices, gg)
    pad = p["padding_idx"]
    if pad is not None:  # rows of the padding index got no gradient: they pass none back
        r = r * (indices != pad).unsqueeze(-1).to(r.dtype)
    return r, None


EMBEDDING_BACKWARD = defop(
    name="embedding_backward", kind=OPAQUE, node="EmbeddingDenseBackwardBackward0",
    inputs=("grad", "indices"), params=("num_weights", "padding_idx"),
    ref=_embedding_backward_ref, fwd=_embedding_backward_eager, vjp=_embedding_backward_vjp,
    save=(1,), cast_grads=True, samples=S.embedding_backward)


def _embedding_vjp(g, ins, out, p, n):
    weight, indices = ins
    if not n[0]:
        return None, None
    return embedding_backward(g, indices, p["num_weights"], p["padding_idx"]), None


EMBEDDING = defop(name="embedding", kind=OPAQUE, node="EmbeddingBackward0",
                  inputs=("weight", "indices"), params=("padding_idx", "num_weights"),
                  ref=lambda w, i, padding_idx=None, num_weights=None: _embedding_ref(w, i),
                  vjp=_embedding_vjp, save=(1,), cast_grads=True, samples=S.embedding)


@api(EMBEDDING_BACKWARD)
def embedding_backward(grad: Tensor, indices: Tensor, num_weights: int,
                       padding_idx: int | None = None) -> Tensor:
    """The gradient of the embedding table: rows of ``grad`` summed at ``indices``."""
    return call(EMBEDDING_BACKWARD, (grad, indices),
                {"num_weights": num_weights, "padding_idx": padding_idx})


def _check_index_dtype(indices: Tensor) -> None:
    """PyTorch's error for indices that are not int64/int32 (their range is checked by the
    op itself: :func:`_check_range`)."""
    if indices._data.dtype not in (np.int64, np.int32):
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got jitgrad.{indices.dtype.tensor_type} instead (while "
            "checking arguments for embedding)")


def embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float,
                      norm_type: float = 2.0) -> Tensor:
    """PyTorch's ``embedding_renorm_``: each row of ``weight`` that ``input`` indexes whose
    ``norm_type``-norm exceeds ``max_norm`` is scaled, in place and outside autograd, to
    ``max_norm / (norm + 1e-7)`` times itself (what ``embedding`` with ``max_norm`` does
    before the lookup). A graph break under ``jitgrad.compile`` (the rows it writes depend
    on the indices' values)."""
    from ...trace.state import STATE

    tr = STATE.tracer
    if tr is not None:
        tr.graph_break("embedding with max_norm renormalises the rows its indices pick, in "
                       "place (a write that depends on the indices' values)")
    _check_index_dtype(input)
    w = weight._data
    xp = array_namespace(w)
    rows = xp.unique(input._data.reshape(-1))
    _check_range(rows, w.shape[0])
    picked = w[rows]
    a = xp.abs(picked.astype(np.float64))
    p = float(norm_type)
    if p == 2.0:
        norms = xp.sqrt((a * a).sum(axis=1))
    elif p == float("inf"):
        norms = a.max(axis=1) if a.shape[1] else xp.zeros(a.shape[0])
    elif p == 0.0:
        norms = (a != 0).sum(axis=1).astype(np.float64)
    else:
        norms = (a ** p).sum(axis=1) ** (1.0 / p)
    over = norms > max_norm
    if bool(over.any()):
        from ..inplace import check_writeable

        check_writeable(weight)
        scale = (max_norm / (norms[over] + 1e-7)).astype(w.dtype)
        w[rows[over]] = picked[over] * scale[:, None]
        weight._vc[0] += 1
    return weight


@api(EMBEDDING)
def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` at the integer ``input`` indices (``padding_idx`` rows get no
    gradient).

    >>> import jitgrad
    >>> import jitgrad.nn.functional as F
    >>> F.embedding(jitgrad.tensor([2, 0]), jitgrad.arange(6.0).reshape(3, 2))
    tensor([[4., 5.],
            [0., 1.]])
    """
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported by jitgrad")
    input = as_tensor_arg(input, "input")
    if max_norm is not None:
        embedding_renorm_(weight, input, max_norm, norm_type)
    if scale_grad_by_freq:
        return _scaled_by_frequency(_embedding(input, weight, padding_idx), input,
                                    weight._data.shape[0])
    return _embedding(input, weight, padding_idx)


def _scaled_by_frequency(out: Tensor, input: Tensor, num: int) -> Tensor:
    """``out`` (the rows looked up), whose gradient at each lookup is divided by how many
    times the batch looks its row up (``scale_grad_by_freq``, PyTorch's): the same values,
    as ``out_d + (out - out_d) * s`` is ``out`` exactly (``out_d`` detached)."""
    from ...creation import ones, zeros

    flat = input.reshape(-1)
    counts = zeros(num, dtype=out.dtype, device=out.device).index_add(
        0, flat, ones(flat.shape[0], dtype=out.dtype, device=out.device))
    s = (1.0 / counts[flat]).reshape(tuple(input.shape) + (1,))
    d = out.detach()
    from ..selection import where

    # (an infinite row would make out - out_d NaN: it keeps its value, gradient unscaled)
    return where(d.isfinite(), d + (out - d) * s, out)


def _embedding(input: Tensor, weight: Tensor, padding_idx) -> Tensor:
    num = weight._data.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx % num
    _check_index_dtype(input)
    return call(EMBEDDING, (weight, input), {"padding_idx": padding_idx, "num_weights": num})
