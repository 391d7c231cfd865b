"""``MultiheadAttention``, the Transformer encoder and decoder layers and stacks, and
``Transformer``, with PyTorch's parameters (``in_proj_weight``, ``out_proj``,
``linear1``/``linear2``, ``norm1``/``norm2``/``norm3``), initialisation and results, written
with jitgrad ops (so they differentiate, compile and run on every device).

Attention follows ``F.multi_head_attention_forward``'s explicit path: ``q`` scaled by
``1/sqrt(head_dim)``, scores ``q k^T`` plus the float mask (a boolean ``attn_mask`` or
``key_padding_mask``: True is masked, -inf), softmax, dropout, times ``v``, the output
projection; the weights averaged over heads when asked (``need_weights``, the default).
"""

from __future__ import annotations

import copy
import math

from .. import creation, dtypes
from ..ops.concat import cat
from ..ops.selection import masked_fill
from ..tensor import Tensor
from . import functional as F
from . import init
from .container import ModuleList
from .layers import Linear, place
from .module import Module
from .normalization import LayerNorm
from .parameter import Parameter

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


def _float_mask(mask: Tensor | None, dtype) -> Tensor | None:
    """A boolean mask (True: masked) as 0 / -inf; a float mask as it is."""
    if mask is None or mask.dtype.is_floating_point:
        return mask
    if mask.dtype is not dtypes.bool_:
        raise AssertionError(f"only bool and floating types of masks are supported, got "
                             f"{mask.dtype}")
    zeros = creation.zeros(tuple(mask.shape), dtype=dtype, device=mask.device)
    return masked_fill(zeros, mask, float("-inf"))


def _one_more_key(mask: Tensor | None) -> Tensor | None:
    """A mask over one more (last) key, which it does not mask."""
    return None if mask is None else F.pad(mask, (0, 1))


class NonDynamicallyQuantizableLinear(Linear):
    """``MultiheadAttention.out_proj``: a ``Linear`` (PyTorch's class name, for its repr and
    type checks)."""


class MultiheadAttention(Module):
    """Multi-head attention: ``num_heads`` heads of ``embed_dim // num_heads`` over
    ``(L, N, E)`` inputs (``batch_first``: ``(N, L, E)``; unbatched ``(L, E)``). Returns
    ``(output, weights)``; the weights ``(N, L, S)`` (per head without
    ``average_attn_weights``), or None without ``need_weights``. Keys and values of other
    sizes (``kdim`` / ``vdim``: separate ``q/k/v_proj_weight``), a learned key/value bias
    row (``add_bias_kv``) and a zero key/value row (``add_zero_attn``), as PyTorch's."""

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
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        dt = None if dtype is None else dtypes.to_dtype(dtype)

        def param(*shape):
            return Parameter(creation.empty(*shape, dtype=dt, device="cpu"))
        if self._qkv_same_embed_dim:  # (PyTorch's registration order: state_dict keys)
            self.in_proj_weight = param(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = param(embed_dim, embed_dim)
            self.k_proj_weight = param(embed_dim, self.kdim)
            self.v_proj_weight = param(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = param(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype, device="cpu")
        if add_bias_kv:
            self.bias_k, self.bias_v = param(1, 1, embed_dim), param(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()
        place(self, device)

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

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
        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        b_q, b_k, b_v = (self.in_proj_bias.chunk(3) if self.in_proj_bias is not None
                         else (None, None, None))
        q = F.linear(query, w_q, b_q).reshape(tgt, n * h, d).transpose(0, 1)
        k, v = F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
        if self.bias_k is not None:  # one more key and value: the learned bias rows
            k = cat([k, self.bias_k.repeat(1, n, 1)])
            v = cat([v, self.bias_v.repeat(1, n, 1)])
            attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(
                key_padding_mask)
        k = k.reshape(k.shape[0], n * h, d).transpose(0, 1)
        v = v.reshape(v.shape[0], n * h, d).transpose(0, 1)
        if self.add_zero_attn:  # and one more of zeros
            zero = creation.zeros(n * h, 1, d, dtype=k.dtype, device=k.device)
            k, v = cat([k, zero], 1), cat([v, zero], 1)
            attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(
                key_padding_mask)
        src = k.shape[1]
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
        if mask is not None and mask.ndim == 2 and tuple(mask.shape) != (tgt, src):
            raise RuntimeError(f"The shape of the 2D attn_mask is {mask.shape}, but should be "
                               f"{(tgt, src)}.")
        if mask is not None and mask.ndim == 3 and tuple(mask.shape) != (n * self.num_heads,
                                                                         tgt, src):
            raise RuntimeError(f"The shape of the 3D attn_mask is {mask.shape}, but should be "
                               f"{(n * self.num_heads, tgt, src)}.")
        if key_padding_mask is not None:
            for k, want in enumerate((n, src)):  # PyTorch's _check_key_padding_mask
                if key_padding_mask.ndim <= k or key_padding_mask.shape[k] != want:
                    got = key_padding_mask.shape[k] if key_padding_mask.ndim > k else None
                    raise AssertionError(f"Expected key_padded_mask.shape[{k}] to be {want}, "
                                         f"but got {got}")
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


class _TransformerLayer(Module):
    """What the encoder and decoder layers share: their submodules, made in PyTorch's order
    (so parameter names and ``state_dict`` order match), self-attention and feed-forward
    blocks."""

    def _build(self, cross: bool, d_model: int, nhead: int, dim_feedforward: int,
               dropout: float, activation, layer_norm_eps: float, batch_first: bool,
               norm_first: bool, bias: bool, device, dtype) -> None:
        from .activation import Dropout

        kw = {"device": device, "dtype": dtype}

        def attention() -> MultiheadAttention:
            return MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                      batch_first=batch_first, **kw)
        self.self_attn = attention()
        if cross:
            self.multihead_attn = attention()
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        blocks = 3 if cross else 2
        for i in range(1, blocks + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        for i in range(1, blocks + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self._last_dropout = f"dropout{blocks}"
        self.activation = _activation(activation)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x) -> Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, self._last_dropout)(x)


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention and a feed-forward block, each added back to its input and layer-
    normalised (``norm_first``: normalised before), with PyTorch's submodules."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self._build(False, d_model, nhead, dim_feedforward, dropout, activation,
                    layer_norm_eps, batch_first, norm_first, bias, device, dtype)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


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


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention over the target, attention to the encoder's ``memory``, and a
    feed-forward block, each added back to its input and layer-normalised (``norm_first``:
    normalised before)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self._build(True, d_model, nhead, dim_feedforward, dropout, activation,
                    layer_norm_eps, batch_first, norm_first, bias, device, dtype)
    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal) -> Tensor:
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)[0]
        return self.dropout2(x)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` applied in turn, then ``norm`` if given."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """The encoder-decoder Transformer: ``num_encoder_layers`` encoder layers and
    ``num_decoder_layers`` decoder layers, each stack followed by a ``LayerNorm``; every
    matrix initialised ``xavier_uniform_``, as PyTorch's."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                batch_first, norm_first, bias)

        def stack(stack_cls, layer_cls, n):
            return stack_cls(layer_cls(*args, **kw), n,
                             LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self.encoder = custom_encoder if custom_encoder is not None else stack(
            TransformerEncoder, TransformerEncoderLayer, num_encoder_layers)
        self.decoder = custom_decoder if custom_decoder is not None else stack(
            TransformerDecoder, TransformerDecoderLayer, num_decoder_layers)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        batched = src.ndim == 3
        b = 0 if self.batch_first else 1
        if batched and src.shape[b] != tgt.shape[b]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """The causal mask of ``sz`` positions: 0 on and below the diagonal, -inf above."""
        return creation.full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(1)
