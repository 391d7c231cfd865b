"""``jitgrad.nn.utils``, as ``torch.nn.utils``: gradient clipping (``clip_grad_norm_``,
``clip_grad_value_``...), loaded with ``jitgrad.nn``; and, loaded on first use (the module
``__getattr__`` below): ``rnn`` (packed sequences), ``parameters_to_vector`` /
``vector_to_parameters``, ``weight_norm`` / ``spectral_norm`` (the hook API) and their
``remove_*``, ``parametrize`` / ``parametrizations``, ``prune``, ``fuse_conv_bn_eval`` and the other
fusions, ``skip_init``, ``stateless.functional_call``."""

from .clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights", "parameters_to_vector",
           "parametrizations", "parametrize", "prune", "remove_spectral_norm",
           "remove_weight_norm",
           "rnn", "skip_init", "spectral_norm", "stateless", "vector_to_parameters",
           "weight_norm"]

# name -> the submodule defining it (None: the name is the submodule itself)
_LAZY = {
    **dict.fromkeys(("rnn", "parametrize", "parametrizations", "stateless", "fusion",
                     "convert_parameters", "init", "prune"), None),
    **dict.fromkeys(("parameters_to_vector", "vector_to_parameters"), "convert_parameters"),
    **dict.fromkeys(("weight_norm", "remove_weight_norm"), "weight_norm_hook"),
    **dict.fromkeys(("spectral_norm", "remove_spectral_norm"), "spectral_norm_hook"),
    **dict.fromkeys(("fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
                     "fuse_linear_bn_weights"), "fusion"),
    "skip_init": "init",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f"{__name__}.{_LAZY[name] or name}")
    value = module if _LAZY[name] is None else getattr(module, name)
    globals()[name] = value
    return value
