"""``DistributedDataParallel``: one model replica per rank of ``jitgrad.distributed``'s
default group, gradients averaged across ranks after each backward pass.

At construction rank 0's parameters and buffers are broadcast to every rank. Each parameter
that requires grad gets a post-accumulate-grad hook; when the last of them has fired in a
backward pass that follows a forward of this wrapper, the gradients are averaged in buckets
(parameters in reverse order, at most ``bucket_cap_mb`` each, one dtype per bucket): each
bucket's gradients are copied into one buffer, all the buckets' allreduces are started
(non-blocking), then waited, divided by the world size and copied back into ``.grad``. So
``.grad`` holds the average when ``backward()`` returns, and an optimizer step gives the same
parameters on every rank. Eager backward passes only: inside ``jitgrad.compile`` the
collectives are not part of the plan.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ... import distributed as dist
from ...autograd import grad_mode
from ...distributed.c10d import all_reduce_array
from ...tensor import Tensor
from ..module import Module

__all__ = ["DistributedDataParallel"]

_UNFINISHED = (
    "Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing "
    "loss. You can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by "
    "making sure all `forward` function outputs participate in calculating loss.")


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training on the default process group.

    Every rank runs the same script on its shard of the data (see
    ``jitgrad.utils.data.DistributedSampler``); ``loss.backward()`` leaves on every rank the
    gradients averaged over the ranks. Inside :meth:`no_sync` gradients accumulate locally;
    the first backward after leaving it averages the accumulated gradients. Every parameter
    that requires grad must receive a gradient in each synchronised backward pass
    (``find_unused_parameters`` is not supported). ``.module`` is the wrapped module.

    >>> import jitgrad, jitgrad.distributed as dist
    >>> from jitgrad.nn.parallel import DistributedDataParallel as DDP
    >>> dist.init_process_group("mpi")
    >>> model = DDP(jitgrad.nn.Linear(3, 1))
    >>> model(jitgrad.ones(2, 3)).sum().backward()
    >>> model.module.bias.grad
    tensor([2.])
    >>> dist.destroy_process_group()
    """

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, process_group: Any = None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 **kwargs: Any) -> None:
        super().__init__()
        if process_group is not None:
            raise ValueError("DistributedDataParallel: jitgrad.distributed has one process "
                             "group, the default one: pass process_group=None")
        if find_unused_parameters:
            raise ValueError("DistributedDataParallel: find_unused_parameters=True is not "
                             "supported by jitgrad; every parameter that requires grad must "
                             "take part in the loss")
        if device_ids not in (None, []) or output_device is not None:
            raise ValueError("DistributedDataParallel: device_ids and output_device are for "
                             "GPU modules; jitgrad runs on the CPU (leave them None)")
        if not any(p.requires_grad for p in module.parameters()):
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.bucket_cap_mb = 25.0 if bucket_cap_mb is None else float(bucket_cap_mb)
        self.world_size = dist.get_world_size()
        self.require_backward_grad_sync = True
        self._params = [p for p in module.parameters() if p.requires_grad]
        self._buckets = self._plan_buckets()
        self._fired: set[int] = set()
        self._expect_sync = False
        with grad_mode.no_grad():
            for t in self._state_tensors():
                dist.broadcast(t, 0)
        self._handles = [p.register_post_accumulate_grad_hook(self._on_grad)
                         for p in self._params]

    def _state_tensors(self) -> Iterator[Tensor]:
        yield from self.module.parameters()
        yield from self.module.buffers()

    def _plan_buckets(self) -> list[list[Tensor]]:
        """Parameters in reverse order (the order backward produces their gradients), cut
        into buckets of at most ``bucket_cap_mb`` (a larger parameter is a bucket alone) and
        one dtype."""
        cap = self.bucket_cap_mb * 2**20
        buckets: list[list[Tensor]] = []
        size = 0.0
        for p in reversed(self._params):
            nbytes = p._data.nbytes
            if (not buckets or size + nbytes > cap
                    or buckets[-1][0]._data.dtype != p._data.dtype):
                buckets.append([])
                size = 0.0
            buckets[-1].append(p)
            size += nbytes
        return buckets

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """Run the wrapped module; a backward pass of its output (under grad mode, outside
        :meth:`no_sync`) averages the gradients across ranks."""
        if self._fired:
            raise RuntimeError(_UNFINISHED)
        self._expect_sync = grad_mode.is_grad_enabled() and self.require_backward_grad_sync
        if self.broadcast_buffers and self.world_size > 1:
            with grad_mode.no_grad():
                for b in self.module.buffers():
                    dist.broadcast(b, 0)
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Within this context, backward passes of forwards run inside it accumulate
        gradients locally without averaging them."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def _on_grad(self, param: Tensor) -> None:
        if not self._expect_sync:
            return
        self._fired.add(id(param))
        if len(self._fired) == len(self._params):
            self._fired.clear()
            self._expect_sync = False
            self._average_gradients()

    def _average_gradients(self) -> None:
        """Allreduce every bucket (all started, then waited) and divide by the world size."""
        if self.world_size == 1:
            return
        pending = []
        for bucket in self._buckets:
            flat = np.concatenate([p._grad._data.reshape(-1) for p in bucket])
            pending.append((bucket, flat, all_reduce_array(flat)))
        for bucket, flat, work in pending:
            work.wait()
            flat /= self.world_size
            start = 0
            for p in bucket:
                g = p._grad
                n = g._data.size
                g._data[...] = flat[start:start + n].reshape(g._data.shape)
                g._vc[0] += 1
                start += n
