"""Which functions autocast changes, and how: PyTorch's op lists, per device type.

One table, read by :func:`jitgrad.amp.autocast_mode.autocast_op` (the wrapper a listed
public function is defined with) -- nothing else keeps a list of autocast names. The
policies (PyTorch's ``CastPolicy``):

* ``"lower"``: floating tensors (not float64) on the autocast's device are cast to the
  autocast dtype (float16) -- the ops that are fast and safe in half precision (matrix
  products, convolutions, ``linear``).
* ``"fp32"``: float16 tensors on the device are cast to float32 -- ops whose range or
  accuracy needs it (``exp``, ``log``, ``pow``, ``softmax``, sums, norms, losses); PyTorch's
  ``fp32_set_opt_dtype`` and ``fp32_append_dtype`` give the same dtypes and values here.
* ``"promote"``: floating tensors on the device are cast to the widest floating dtype among
  them (ops without type promotion of their own).
* ``"banned"``: raises (``binary_cross_entropy`` under CUDA autocast).
* ``"keep"``: no cast, and autocast excluded inside: a function PyTorch runs as one unlisted
  op that jitgrad builds from listed ones (on the CPU ``mv`` is one op in float32, while
  jitgrad's calls ``matmul``, which the CPU list casts to float16).

Every other function runs in the dtypes of its inputs. The CUDA lists are PyTorch's
``AutocastCUDA`` registrations, the CPU lists its ``AutocastCPU`` ones (different: on the CPU
``softmax``, ``exp`` and ``sum`` are not float32 ops, ``mv`` is not a lower-precision one);
only the names jitgrad has are listed, and ``tests/test_amp.py`` checks the CPU table against
PyTorch's own autocast, function by function.
"""

from __future__ import annotations

__all__ = ["POLICIES", "BANNED_MESSAGES", "policy_of"]

_MARGIN_LOSSES = (  # float32 on both devices
    "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "cosine_embedding_loss",
    "triplet_margin_loss", "multi_margin_loss", "multilabel_margin_loss", "poisson_nll_loss",
)
_CUDA_LOWER = (
    "matmul", "mm", "mv", "bmm", "addmm", "addmv", "baddbmm", "linear", "conv1d", "conv2d",
    "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
    "scaled_dot_product_attention",
)
_CUDA_FP32 = (
    "pow", "reciprocal", "rsqrt", "exp", "expm1", "log", "log2", "log10", "log1p", "sinh",
    "cosh", "tan", "acos", "asin", "softplus", "layer_norm", "group_norm", "norm", "normalize",
    "cosine_similarity", "nll_loss", "cross_entropy", "kl_div", "l1_loss", "smooth_l1_loss",
    "huber_loss", "mse_loss", "binary_cross_entropy_with_logits", "cdist", "logsumexp",
    "prod", "softmax", "log_softmax", "softmin", "cumsum", "cumprod", "sum",
    *_MARGIN_LOSSES,
)
_CUDA_PROMOTE = ("addcdiv", "addcmul", "atan2", "dot", "tensordot", "scatter_add")

_CPU_LOWER = (
    "matmul", "mm", "bmm", "addmm", "baddbmm", "linear", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
    "scaled_dot_product_attention",
)
_CPU_FP32 = (
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "prod", "cdist", "trace",
    "mse_loss", "nll_loss", "cross_entropy", "smooth_l1_loss", "l1_loss", "huber_loss",
    "kl_div", *_MARGIN_LOSSES,
)
_CPU_PROMOTE = ("cat", "stack")
_CPU_KEEP = ("mv", "addmv", "dot")


def _table(**lists) -> dict[str, str]:
    out: dict[str, str] = {}
    for policy, names in lists.items():
        for name in names:
            if name in out:
                raise ValueError(f"autocast policy of {name!r} given twice")
            out[name] = policy
    return out


#: device type -> function name -> policy
POLICIES: dict[str, dict[str, str]] = {
    "cuda": _table(lower=_CUDA_LOWER, fp32=_CUDA_FP32, promote=_CUDA_PROMOTE,
                   banned=("binary_cross_entropy",)),
    "cpu": _table(lower=_CPU_LOWER, fp32=_CPU_FP32, promote=_CPU_PROMOTE, keep=_CPU_KEEP),
}

#: the error a banned function raises under autocast (PyTorch's words)
BANNED_MESSAGES = {
    "binary_cross_entropy": (
        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
        "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
        "layer.\nIn this case, combine the two layers using "
        "torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss.  "
        "binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast."),
}


def policy_of(device_type: str, name: str) -> str | None:
    """The policy of function ``name`` under autocast on ``device_type`` (None: unlisted)."""
    return POLICIES.get(device_type, {}).get(name)


def listed(name: str) -> bool:
    """Whether any device type's autocast lists ``name``."""
    return any(name in table for table in POLICIES.values())
