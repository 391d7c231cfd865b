"""``MultiheadAttention``, ``TransformerEncoderLayer`` and ``TransformerEncoder`` with
PyTorch's parameters (``in_proj_weight``, ``out_proj``, ``linear1``/``linear2``,
``norm1``/``norm2``), initialisation and results, written with jitgrad ops (so they
differentiate, compile and run on every device).

Attention follows ``F.multi_head_attention_forward``'s explicit path: ``q`` scaled by
``1/sqrt(head_dim)``, scores ``q k^T`` plus the float mask (a boolean ``attn_mask`` or
``key_padding_mask``: True is masked, -inf), softmax, dropout, times ``v``, the output
projection; the weights averaged over heads when asked (``need_weights``, the default).
"""

from __future__ import annotations

import copy
import math

from .. import creation, dtypes
from ..ops.selection import masked_fill
from ..tensor import Tensor
from . import functional as F
from . import init
from .container import ModuleList
from .layers import Linear, place
from .module import Module
from .normalization import LayerNorm
from .parameter import Parameter

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"]


def _float_mask(mask: Tensor | None, dtype) -> Tensor | None:
    """A boolean mask (True: masked) as 0 / -inf; a float mask as it is."""
    if mask is None or mask.dtype.is_floating_point:
        return mask
    if mask.dtype is not dtypes.bool_:
        raise AssertionError(f"only bool and floating types of masks are supported, got "
                             f"{mask.dtype}")
    zeros = creation.zeros(tuple(mask.shape), dtype=dtype, device=mask.device)
    return masked_fill(zeros, mask, float("-inf"))


class NonDynamicallyQuantizableLinear(Linear):
    """``MultiheadAttention.out_proj``: a ``Linear`` (PyTorch's class name, for its repr and
    type checks)."""


class MultiheadAttention(Module):
    """Multi-head attention: ``num_heads`` heads of ``embed_dim // num_heads`` over
    ``(L, N, E)`` inputs (``batch_first``: ``(N, L, E)``; unbatched ``(L, E)``). Returns
    ``(output, weights)``; the weights ``(N, L, S)`` (per head without
    ``average_attn_weights``), or None without ``need_weights``."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0,
                 bias: bool = True, add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv / add_zero_attn are "
                                      "not supported by jitgrad")
        if (kdim not in (None, embed_dim)) or (vdim not in (None, embed_dim)):
            raise NotImplementedError("MultiheadAttention: kdim / vdim other than embed_dim "
                                      "are not supported by jitgrad")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first
        self.kdim = self.vdim = embed_dim
        self._qkv_same_embed_dim = True
        dt = None if dtype is None else dtypes.to_dtype(dtype)
        self.in_proj_weight = Parameter(creation.empty(3 * embed_dim, embed_dim, dtype=dt,
                                                       device="cpu"))
        if bias:
            self.in_proj_bias = Parameter(creation.empty(3 * embed_dim, dtype=dt, device="cpu"))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype, device="cpu")
        self._reset_parameters()
        place(self, device)

    def _reset_parameters(self) -> None:
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False):
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        tgt, n, e = query.shape
        src = key.shape[0]
        if e != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, "
                                 f"but got {e}")
        h, d = self.num_heads, self.head_dim
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = (self.in_proj_bias.chunk(3) if self.in_proj_bias is not None
                         else (None, None, None))
        q = F.linear(query, w_q, b_q).reshape(tgt, n * h, d).transpose(0, 1)
        k = F.linear(key, w_k, b_k).reshape(src, n * h, d).transpose(0, 1)
        v = F.linear(value, w_v, b_v).reshape(src, n * h, d).transpose(0, 1)
        mask = self._merged_mask(attn_mask, key_padding_mask, is_causal, n, tgt, src,
                                 query.dtype, query.device)
        scores = (q * math.sqrt(1.0 / d)) @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores + mask
        weights = F.softmax(scores, dim=-1)
        if self.dropout > 0.0 and self.training:
            weights = F.dropout(weights, self.dropout, True)
        out = (weights @ v).transpose(0, 1).reshape(tgt * n, e)
        out = self.out_proj(out).reshape(tgt, n, e)
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.reshape(n, h, tgt, src)
        if average_attn_weights:
            weights = weights.mean(1)
        return out, (weights.squeeze(0) if unbatched else weights)

    def _merged_mask(self, attn_mask, key_padding_mask, is_causal: bool, n: int, tgt: int,
                     src: int, dtype, device) -> Tensor | None:
        """``attn_mask`` and ``key_padding_mask`` as one float mask of ``(N*H, L, S)`` or a
        broadcastable ``(L, S)``."""
        if is_causal and attn_mask is None:
            causal = creation.ones(tgt, src, dtype=dtypes.bool_, device=device).triu(1)
            attn_mask = causal
        mask = _float_mask(attn_mask, dtype)
        if mask is not None and mask.ndim == 3 and tuple(mask.shape) != (n * self.num_heads,
                                                                         tgt, src):
            raise RuntimeError(f"The shape of the 3D attn_mask is {list(mask.shape)}, but "
                               f"should be {[n * self.num_heads, tgt, src]}.")
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (n, src):
                raise AssertionError(f"expecting key_padding_mask shape of {(n, src)}, but "
                                     f"got {tuple(key_padding_mask.shape)}")
            kpm = _float_mask(key_padding_mask, dtype).reshape(n, 1, 1, src) \
                .expand(n, self.num_heads, 1, src).reshape(n * self.num_heads, 1, src)
            mask = kpm if mask is None else mask + kpm
        return mask



def _activation(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each added back to its input and layer-
    normalised (``norm_first``: normalised before), with PyTorch's submodules."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        from .activation import Dropout

        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` applied in turn, then ``norm`` if given."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x
