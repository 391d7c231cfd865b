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
from ..amp.autocast_mode import is_autocast_enabled
from ..autograd.grad_mode import is_grad_enabled
from ..backends.mha import get_fastpath_enabled
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

__all__ = ["multi_head_attention_forward", "MultiheadAttention", "TransformerEncoderLayer",
           "TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


def _float_mask(mask: Tensor | None, dtype) -> Tensor | None:
    """A boolean mask (True: masked) as 0 / -inf; a float mask as it is."""
    if mask is None or mask.dtype.is_floating_point:
        return mask
    if mask.dtype is not dtypes.bool_:
        raise AssertionError(f"only bool and floating types of masks are supported, got "
                             f"{mask.dtype}")
    zeros = creation.zeros(tuple(mask.shape), dtype=dtype, device=mask.device)
    return masked_fill(zeros, mask, float("-inf"))


def _needs_grad(*tensors) -> bool:
    """Grad mode on and one of ``tensors`` requiring grad (what stops PyTorch's fused
    inference paths)."""
    return is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


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
        """Attention of ``query`` over ``key``/``value``: ``(output, weights)``, through
        ``F.multi_head_attention_forward`` (batch-first inputs transposed around it)."""
        if is_causal and attn_mask is None and query.ndim in (2, 3):
            length = query.shape[1 if self.batch_first and query.ndim == 3 else 0]
            attn_mask = creation.ones(length, length, dtype=dtypes.bool_,
                                      device=query.device).triu(1)
        explicit = self._fast_path_taken(query, key, value, attn_mask, key_padding_mask)
        return self._attend(query, key, value, key_padding_mask, need_weights, attn_mask,
                            average_attn_weights, is_causal, explicit)

    def _attend(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask,
                need_weights: bool, attn_mask, average_attn_weights: bool, is_causal: bool,
                explicit: bool):
        """``F.multi_head_attention_forward`` with this module's weights; ``explicit``: the
        scores through the explicit softmax whether or not the weights are wanted (the
        results of PyTorch's fused inference path: NaN for a fully masked query row)."""
        batched = query.ndim == 3
        if self.batch_first and batched:
            query, key, value = (t.transpose(1, 0) for t in (query, key, value))
        separate = not self._qkv_same_embed_dim
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights or explicit,
            attn_mask=attn_mask, use_separate_proj_weight=separate,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal)
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        return out, (weights if need_weights else None)

    def _fast_path_taken(self, query: Tensor, key: Tensor, value: Tensor, attn_mask,
                         key_padding_mask) -> bool:
        """Whether PyTorch's ``MultiheadAttention.forward`` would run its fused inference
        kernel (``torch._native_multi_head_attention``): its conditions, in its order."""
        if (attn_mask is not None and attn_mask.dtype.is_floating_point) or (
                key_padding_mask is not None and key_padding_mask.dtype.is_floating_point):
            return False
        w, b = self.in_proj_weight, self.in_proj_bias
        if not (get_fastpath_enabled() and query.ndim == 3 and query is key
                and key is value and w is not None and b is not None
                and query.dtype == w.dtype == b.dtype and not self.training
                and self.num_heads % 2 == 0 and self.batch_first and self.bias_k is None
                and self.bias_v is None and not self.add_zero_attn
                and self._qkv_same_embed_dim and not is_autocast_enabled()):
            return False
        return not _needs_grad(query, w, b, self.out_proj.weight, self.out_proj.bias)


def _mha_shape_check(query: Tensor, key: Tensor, value: Tensor,
                     key_padding_mask: Tensor | None, attn_mask: Tensor | None,
                     num_heads: int) -> bool:
    """PyTorch's checks of the ranks of the inputs and masks; whether the query is
    batched."""
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise AssertionError("For batched (3-D) `query`, expected `key` and `value` to be "
                                 f"3-D but found {key.ndim}-D and {value.ndim}-D tensors "
                                 "respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise AssertionError("For batched (3-D) `query`, expected `key_padding_mask` to be "
                                 f"`None` or 2-D but found {key_padding_mask.ndim}-D tensor "
                                 "instead")
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise AssertionError("For batched (3-D) `query`, expected `attn_mask` to be `None`, "
                                 f"2-D or 3-D but found {attn_mask.ndim}-D tensor instead")
        return True
    if query.ndim == 2:
        if key.ndim != 2 or value.ndim != 2:
            raise AssertionError("For unbatched (2-D) `query`, expected `key` and `value` to be "
                                 f"2-D but found {key.ndim}-D and {value.ndim}-D tensors "
                                 "respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise AssertionError("For unbatched (2-D) `query`, expected `key_padding_mask` to "
                                 f"be `None` or 1-D but found {key_padding_mask.ndim}-D "
                                 "tensor instead")
        if attn_mask is not None:
            if attn_mask.ndim not in (2, 3):
                raise AssertionError("For unbatched (2-D) `query`, expected `attn_mask` to be "
                                     f"`None`, 2-D or 3-D but found {attn_mask.ndim}-D tensor "
                                     "instead")
            if attn_mask.ndim == 3:
                expected = (num_heads, query.shape[0], key.shape[0])
                if tuple(attn_mask.shape) != expected:
                    raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                         f"{attn_mask.shape}")
        return False
    raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                         f"{query.ndim}-D query tensor")


def _canonical_mask(mask: Tensor | None, mask_name: str, other_type, other_name: str,
                    target_type, check_other: bool = True) -> Tensor | None:
    """PyTorch's ``F._canonical_mask``: a boolean mask as 0 / -inf of ``target_type``."""
    if mask is None:
        return None
    if mask.dtype is not dtypes.bool_ and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        import warnings

        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
                      "Use same type for both instead.", stacklevel=3)
    return _float_mask(mask, target_type)


def _none_or_dtype(input: Tensor | None):
    """PyTorch's ``F._none_or_dtype``: None, or the tensor's dtype."""
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _static_kv(static: Tensor, name: str, rows: int, head_dim: int) -> Tensor:
    if static.shape[0] != rows:
        raise AssertionError(f"expecting {name}.size(0) of {rows}, but got {static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got "
                             f"{static.shape[2]}")
    return static


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True,
        key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
        static_v: Tensor | None = None, average_attn_weights: bool = True,
        is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """PyTorch's ``F.multi_head_attention_forward``: multi-head attention of ``(L, N, E)``
    queries over ``(S, N, E)`` keys and values (unbatched: ``(L, E)``, ``(S, E)``) with the
    given projection weights. Returns ``(output, weights)``: the output ``(L, N, E)``; the
    weights ``(N, L, S)`` averaged over heads (``average_attn_weights``; else
    ``(N, num_heads, L, S)``), or None without ``need_weights``.

    The masks (boolean: True is masked; float: added to the scores) are merged as PyTorch
    does; ``bias_k``/``bias_v`` add one learned key/value, ``add_zero_attn`` one of zeros,
    ``static_k``/``static_v`` (``(N*num_heads, S, E/num_heads)``) replace the projected keys
    and values. With ``need_weights`` the scores are computed explicitly (a fully masked row
    gives NaN, as PyTorch's); without, through ``scaled_dot_product_attention`` (a fully
    masked row gives zeros, as PyTorch's). ``dropout_p`` applies only when ``training``.
    """
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       None if attn_mask is None else attn_mask.dtype,
                                       "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, "
                             f"but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                                 f"value's {value.shape[:2]}")
        for w, name in ((q_proj_weight, "q"), (k_proj_weight, "k"), (v_proj_weight, "v")):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight "
                                     "is None")
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape "
                                 f"{value.shape}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is "
                                 "None")
        w_q, w_k, w_v = in_proj_weight.chunk(3)
    b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
    q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = cat([k, bias_k.repeat(1, bsz, 1)])
        v = cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(key_padding_mask)
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")
    rows = bsz * num_heads
    q = q.reshape(tgt_len, rows, head_dim).transpose(0, 1)
    k = (k.reshape(k.shape[0], rows, head_dim).transpose(0, 1) if static_k is None
         else _static_kv(static_k, "static_k", rows, head_dim))
    v = (v.reshape(v.shape[0], rows, head_dim).transpose(0, 1) if static_v is None
         else _static_kv(static_v, "static_v", rows, head_dim))
    if add_zero_attn:
        zero = creation.zeros(rows, 1, head_dim, dtype=k.dtype, device=k.device)
        k, v = cat([k, zero], 1), cat([v, zero], 1)
        attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(key_padding_mask)
    src_len = k.shape[1]
    if key_padding_mask is not None:
        for i, want in enumerate((bsz, src_len)):  # PyTorch's _check_key_padding_mask
            if key_padding_mask.shape[i] != want:
                raise AssertionError(f"Expected key_padded_mask.shape[{i}] to be {want}, but "
                                     f"got {key_padding_mask.shape[i]}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len) \
            .reshape(rows, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        if is_causal and attn_mask is None:
            raise AssertionError("FIXME: is_causal not implemented for need_weights")
        scores = (q * math.sqrt(1.0 / float(head_dim))) @ k.transpose(-2, -1)
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = F.softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        out = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = F.linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        attn_mask = (attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 and attn_mask.ndim == 3
                     else attn_mask.reshape(bsz, num_heads, -1, src_len))
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = F.linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    return (out.squeeze(1) if not batched else out), None


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

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal,
                  explicit: bool = False) -> Tensor:
        if explicit:  # (no hooks anywhere: PyTorch's fused layer calls none)
            x = self.self_attn._attend(x, x, x, key_padding_mask, False, attn_mask, True,
                                       is_causal, True)[0]
        else:
            x = self.self_attn(x, x, x, attn_mask=attn_mask,
                               key_padding_mask=key_padding_mask, need_weights=False,
                               is_causal=is_causal)[0]
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
        from .activation import GELU, ReLU

        act = self.activation  # PyTorch's flag of its fused kernel's activations
        self.activation_relu_or_gelu = (1 if act is F.relu or isinstance(act, ReLU) else
                                        2 if act is F.gelu or isinstance(act, GELU) else 0)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        """The layer's output, of ``src``'s shape. In inference where PyTorch runs its fused
        kernel (``_fast_path_taken``), attention is computed explicitly, as that kernel does
        (a fully masked query row gives NaN)."""
        explicit = self._fast_path_taken(src, src_mask, src_key_padding_mask)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal,
                                   explicit)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal,
                                          explicit))
        return self.norm2(x + self._ff_block(x))

    def _fast_path_taken(self, src: Tensor, src_mask, src_key_padding_mask) -> bool:
        """Whether PyTorch's ``TransformerEncoderLayer.forward`` would run
        ``torch._transformer_encoder_layer_fwd``: its conditions, in its order."""
        for m in (src_mask, src_key_padding_mask):  # (_canonical_mask's check)
            if m is not None and m.dtype is not dtypes.bool_ and not m.dtype.is_floating_point:
                return False
        attn = self.self_attn
        if not (get_fastpath_enabled() and src.ndim == 3 and not self.training
                and attn.batch_first and attn.in_proj_bias is not None
                and attn._qkv_same_embed_dim and self.activation_relu_or_gelu
                and self.norm1.eps == self.norm2.eps and attn.num_heads % 2 == 0
                and not is_autocast_enabled()):
            return False
        if any(m._forward_hooks or m._forward_pre_hooks for m in self.modules()):
            return False
        return not _needs_grad(src, attn.in_proj_weight, attn.in_proj_bias,
                               attn.out_proj.weight, attn.out_proj.bias, self.norm1.weight,
                               self.norm1.bias, self.norm2.weight, self.norm2.bias,
                               self.linear1.weight, self.linear1.bias, self.linear2.weight,
                               self.linear2.bias)


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` applied in turn, then ``norm`` if given.

    ``enable_nested_tensor`` (PyTorch's "sparsity fast path"): in inference with a
    ``src_key_padding_mask`` and no ``mask``, PyTorch packs the unpadded positions into a
    nested tensor, runs the layers on it and pads the result with zeros; under the same
    conditions (``_sparsity_fast_path``) this encoder gives the same results: every row
    keeps its first ``n`` positions (``n`` its unmasked count), the rest are 0 before
    ``norm``. The conditions on the layer are checked here (``use_nested_tensor``, with
    PyTorch's warning when one fails)."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why_not = _why_not_nested(encoder_layer, "encoder_layer")
        if enable_nested_tensor and why_not:
            import warnings

            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why_not}", stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        """The stack's output, of ``src``'s shape."""
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               _none_or_dtype(mask), "mask", src.dtype)
        mask = _canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        padding = src_key_padding_mask
        nested = self._sparsity_fast_path(src, mask, src_key_padding_mask)
        if nested:  # the nested tensor's rows: the first n positions, n = unmasked count
            count = src_key_padding_mask.logical_not().sum(1, keepdim=True)
            padding = creation.arange(src.shape[1], device=src.device) >= count
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=padding,
                      is_causal=bool(is_causal))
        if nested:  # the nested tensor padded with zeros
            x = masked_fill(x, padding.unsqueeze(-1), 0.0)
        return self.norm(x) if self.norm is not None else x

    def _sparsity_fast_path(self, src: Tensor, mask, src_key_padding_mask) -> bool:
        """Whether PyTorch's ``TransformerEncoder.forward`` would convert ``src`` to a
        nested tensor: its conditions, in its order (the alignment of the mask is a value
        read, and as PyTorch's, not done while compiling)."""
        first = self.layers[0]
        if not (get_fastpath_enabled() and getattr(self, "use_nested_tensor", False)
                and not first.training and src.ndim == 3
                and src_key_padding_mask is not None):
            return False
        if getattr(self, "mask_check", True):
            from ..jit.compiler_api import is_compiling

            if is_compiling() or not _left_aligned(src_key_padding_mask):
                return False
        if mask is not None or is_autocast_enabled():
            return False
        attn = first.self_attn
        return not _needs_grad(src, attn.in_proj_weight, attn.in_proj_bias,
                               attn.out_proj.weight, attn.out_proj.bias, first.norm1.weight,
                               first.norm1.bias, first.norm2.weight, first.norm2.bias,
                               first.linear1.weight, first.linear1.bias,
                               first.linear2.weight, first.linear2.bias)


def _left_aligned(padding_mask: Tensor) -> bool:
    """Whether every row of a (canonical, float) padding mask is unmasked then masked."""
    keep = padding_mask.logical_not()
    count = keep.sum(1, keepdim=True)
    positions = creation.arange(padding_mask.shape[1], device=padding_mask.device)
    return bool((keep == (positions < count)).all())


def _why_not_nested(layer, name: str) -> str:
    """Why PyTorch's ``TransformerEncoder.__init__`` turns ``use_nested_tensor`` off for
    ``layer`` ("" if it does not)."""
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not layer.self_attn.batch_first:
        return (f"{name}.self_attn.batch_first was not True(use batch_first for better "
                "inference performance)")
    if not layer.self_attn._qkv_same_embed_dim:
        return f"{name}.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


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
