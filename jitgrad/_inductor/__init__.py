"""``torch._inductor``: the settings of PyTorch's compiler backend, for scripts that tune it.

``config`` holds PyTorch's Inductor settings that scripts set most (with PyTorch 2.13's
defaults) and the ``triton`` / ``cpp`` / ``trace`` sub-settings. jitgrad's compiler is not
Inductor: the values are stored and read back, and change nothing in jitgrad (its own
settings are ``jitgrad.config``). A name PyTorch does not have raises ``AttributeError``, as
PyTorch's config module does.
"""

from __future__ import annotations

__all__ = ["config"]


class _Settings:
    """A fixed set of named values: reading or writing another name is an error."""

    def __init__(self, path: str, defaults: dict) -> None:
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_values", dict(defaults))

    def __getattr__(self, name: str):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"{self._path}.{name} does not exist")

    def __setattr__(self, name: str, value) -> None:
        if name not in self._values or isinstance(self._values[name], _Settings):
            raise AttributeError(f"{self._path}.{name} does not exist")
        self._values[name] = value

    def __dir__(self) -> list:
        return sorted(self._values)


config = _Settings("torch._inductor.config", {
    "coordinate_descent_tuning": False, "coordinate_descent_check_all_directions": False,
    "fx_graph_cache": True, "fx_graph_remote_cache": None, "autotune_local_cache": True,
    "max_autotune": False, "max_autotune_gemm": False, "max_autotune_pointwise": False,
    "freezing": False, "freezing_discard_parameters": False, "epilogue_fusion": True,
    "aggressive_fusion": False, "permute_fusion": False, "split_reductions": True,
    "force_fuse_int_mm_with_mul": False, "use_mixed_mm": True, "debug": False,
    "compile_threads": 2, "shape_padding": True, "benchmark_kernel": False,
    "fallback_random": False, "implicit_fallbacks": True, "layout_optimization": True,
    "keep_output_stride": True, "reorder_for_locality": True,
    "worker_start_method": "subprocess", "emulate_precision_casts": False,
    "cpp_wrapper": False, "size_asserts": True,
    "triton": _Settings("torch._inductor.config.triton", {
        "cudagraphs": False, "cudagraph_trees": True, "unique_kernel_names": True,
        "descriptive_names": "original_aten", "max_tiles": 2, "autotune_pointwise": True}),
    "cpp": _Settings("torch._inductor.config.cpp", {
        "threads": -1, "simdlen": None, "enable_kernel_profile": False,
        "weight_prepack": True}),
    "trace": _Settings("torch._inductor.config.trace", {
        "enabled": False, "debug_log": False, "info_log": False, "graph_diagram": False}),
})
