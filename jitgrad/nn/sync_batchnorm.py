"""``SyncBatchNorm``: batch normalisation whose batch statistics span the processes of a
group. In one process (``jitgrad.distributed`` not initialised, or a world of one) it is
batch normalisation of any ``(N, C, *)`` input, as PyTorch's; ``convert_sync_batchnorm``
swaps the ``BatchNorm*d`` layers of a model for it, keeping their parameters and running
statistics."""

from __future__ import annotations

from ..tensor import Tensor
from .module import Module
from .normalization import _BatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation synchronised across processes (in one process: ``BatchNorm``;
    statistics shared across several processes are not supported by jitgrad)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, process_group=None,
                 device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        if self.training and _world_size(self.process_group) > 1:
            raise NotImplementedError("SyncBatchNorm across several processes is not "
                                      "supported by jitgrad (batch statistics stay local)")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with every ``BatchNorm1d/2d/3d`` in it replaced by a
        ``SyncBatchNorm`` holding the same parameters, running statistics and mode."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


def _world_size(group) -> int:
    from .. import distributed

    if not distributed.is_available() or not distributed.is_initialized():
        return 1
    return distributed.get_world_size(group)
