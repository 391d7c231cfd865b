"""``DistributedDataParallel``: one model replica per rank of ``jitgrad.distributed``'s
default group, gradients averaged across ranks during each backward pass.

At construction rank 0's parameters and buffers are broadcast to every rank, and the
parameters that require grad are cut into buckets (reverse parameter order -- the order
backward produces their gradients -- at most ``bucket_cap_mb`` each, one dtype per bucket),
each one flat buffer. Gradients are views into their bucket's buffer
(``gradient_as_bucket_view``): a backward pass accumulates into the buffer itself, the
allreduce runs on it in place and the average is left there, so nothing is copied in or out
(a ``.grad`` that is not the view yet -- the first backward after ``zero_grad()`` set it to
None -- is copied into the view once and replaced by it, as PyTorch does).
``gradient_as_bucket_view=False`` (PyTorch's default; jitgrad's is True) keeps gradients
tensors of their own: copied into the bucket before the allreduce and back after it.

Overlap: each parameter has a post-accumulate-grad hook, which the engine runs during the
pass as soon as that gradient is complete. When a bucket's last gradient is in, its
non-blocking allreduce (``Iallreduce``) starts while the rest of the backward runs; every
hook polls the buckets in flight (MPI progresses inside MPI calls); an end-of-backward
callback (``autograd.engine.queue_callback``) waits for them in order and divides by the
world size, so ``.grad`` holds the average when ``backward()`` returns. A wait longer than
the group's timeout raises, naming the bucket. DDP's collectives run on a communicator of
their own (``MPI_Comm_dup``), so one a rank skips never pairs with another collective.

Inside ``jitgrad.compile`` (a training step: forward, backward, optimizer step) the same
hooks record the collectives as effect ops of the plan (``distributed.plan_ops``):
``allreduce_start`` where a bucket's last gradient is computed, ``allreduce_wait`` at the
end of the backward, before the optimizer reads the gradients. There too nothing is copied:
the plan computes each gradient straight into its bucket view (the BLAS call or fused
kernel that produces it writes there: ``compiler/placement.py``), the allreduce and the
average run on the buffer in place, and each ``.grad`` is the bucket's view tensor again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ... import distributed as dist
from ...autograd import grad_mode
from ...autograd.engine import queue_callback
from ...distributed.c10d import all_reduce_array, default_group
from ...distributed.plan_ops import (
    PendingAllreduce,
    allreduce_start,
    allreduce_wait,
    broadcast_into,
)
from ...tensor import Tensor, wrap
from ...trace.effects import run_effect
from ...trace.state import STATE as _TRACE
from ..module import Module

__all__ = ["DistributedDataParallel"]

_UNFINISHED = (
    "Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing "
    "loss. You can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by "
    "making sure all `forward` function outputs participate in calculating loss.")


class _PassState:
    """What one backward pass has done so far: whether it synchronises (decided by the
    forward), the parameters whose gradients are in, the buckets in flight. Kept out of the
    module's plain attributes: compiled functions guard it by identity, not by value."""

    _jitgrad_guard_by_identity = True

    def __init__(self) -> None:
        self.expect_sync = False
        self.fired: set[int] = set()
        self.in_flight: list[_Bucket] = []


_NOTHING = np.empty(0)


class _Bucket:
    """Parameters whose gradients are reduced together: one flat buffer, a view of it per
    parameter (and a tensor over each view: that parameter's ``.grad``)."""

    #: compiled functions guard a bucket by identity (its state changes during a pass)
    _jitgrad_guard_by_identity = True

    def __init__(self, index: int, count: int, params: list[Tensor], group: Any) -> None:
        self.index = index
        self.params = params
        dtype = params[0]._data.dtype
        self.numel = sum(p._data.size for p in params)
        self.flat = np.zeros(self.numel, dtype)
        self.views: list[np.ndarray] = []
        start = 0
        for p in params:
            n = p._data.size
            self.views.append(self.flat[start:start + n].reshape(p._data.shape))
            start += n
        self.grads = [wrap(v) for v in self.views]
        grads = f"{len(params)} gradient{'s' if len(params) > 1 else ''}"
        self.what = (f"DistributedDataParallel bucket {index} of {count} ({grads}, "
                     f"{self.numel} elements, {dtype})")
        self.site = PendingAllreduce(group, self.what, True, self.flat, self.views)
        self.ready = 0
        self.work: dist.Work | None = None  # eager: the allreduce in flight
        self.traced: Tensor | None = None   # traced: allreduce_start's buffer


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
                 gradient_as_bucket_view: bool = True, **kwargs: Any) -> None:
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
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self._group = default_group().dup()
        self._params = [p for p in module.parameters() if p.requires_grad]
        self._buckets = self._make_buckets()
        self._bucket_of = {id(p): (b, k) for b in self._buckets for k, p in enumerate(b.params)}
        self._pass = _PassState()
        with grad_mode.no_grad():
            for t in self._state_tensors():
                broadcast_into(t, 0, self._group, "DistributedDataParallel's initial state")
        for b in self._buckets if self.gradient_as_bucket_view else ():
            for p, view, g in zip(b.params, b.views, b.grads):  # existing gradients move in
                if p._grad is not None:
                    np.copyto(view, p._grad._data)
                    p._grad = g
        self._handles = [p.register_post_accumulate_grad_hook(self._on_grad)
                         for p in self._params]

    def _state_tensors(self) -> Iterator[Tensor]:
        yield from self.module.parameters()
        yield from self.module.buffers()

    def _make_buckets(self) -> list[_Bucket]:
        """Parameters in reverse order (the order backward produces their gradients), cut
        into buckets of at most ``bucket_cap_mb`` (a larger parameter is a bucket alone) and
        one dtype."""
        cap = self.bucket_cap_mb * 2**20
        groups: list[list[Tensor]] = []
        size = 0.0
        for p in reversed(self._params):
            nbytes = p._data.nbytes
            if (not groups or size + nbytes > cap
                    or groups[-1][0]._data.dtype != p._data.dtype):
                groups.append([])
                size = 0.0
            groups[-1].append(p)
            size += nbytes
        return [_Bucket(k, len(groups), ps, self._group) for k, ps in enumerate(groups)]

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """Run the wrapped module; a backward pass of its output (under grad mode, outside
        :meth:`no_sync`) averages the gradients across ranks."""
        expect = grad_mode.is_grad_enabled() and self.require_backward_grad_sync
        if _TRACE.tracer is not None:  # a compiled call does this at every call
            run_effect("ddp_prepare", lambda: self._prepare(expect), [],
                       "DistributedDataParallel's forward")
        else:
            self._prepare(expect)
        if self.broadcast_buffers and self.world_size > 1:
            with grad_mode.no_grad():
                for b in self.module.buffers():
                    broadcast_into(b, 0, self._group, "DistributedDataParallel's buffers")
        return self.module(*inputs, **kwargs)

    def _prepare(self, expect_sync: bool) -> np.ndarray:
        """Start of a forward: whether its backward synchronises (PyTorch's error when the
        previous one left a reduction unfinished)."""
        if self._pass.fired:
            raise RuntimeError(_UNFINISHED)
        self._pass.expect_sync = expect_sync
        return _NOTHING

    def _end_pass(self) -> np.ndarray:
        """End of a synchronised backward pass."""
        state = self._pass
        state.fired.clear()
        state.expect_sync = False
        state.in_flight = []
        for b in self._buckets:
            b.ready = 0
        return _NOTHING

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
        """A parameter's gradient is accumulated (during the pass): move it into its bucket
        view; start the bucket's allreduce when it was the bucket's last; poll the others."""
        state = self._pass
        if not state.expect_sync:
            return
        bucket, k = self._bucket_of[id(param)]
        if not state.fired:
            queue_callback(self._finish_pass)
        state.fired.add(id(param))
        traced = _TRACE.tracer is not None
        as_view = self.gradient_as_bucket_view
        if not traced and param._grad is not bucket.grads[k] and (
                as_view or self.world_size > 1):
            np.copyto(bucket.views[k], param._grad._data)  # as a view: after zero_grad()
            if as_view:
                param._grad = bucket.grads[k]
        bucket.ready += 1
        if bucket.ready == len(bucket.params) and self.world_size > 1:
            if traced:
                bucket.traced = allreduce_start(bucket.site, [p._grad for p in bucket.params],
                                                place=as_view)
            else:
                bucket.work = all_reduce_array(bucket.flat, group=self._group,
                                               what=bucket.what)
            state.in_flight.append(bucket)
        for b in state.in_flight:
            if b.work is not None:
                b.work.is_completed()  # MPI progresses inside MPI calls

    def _finish_pass(self) -> None:
        """End of the backward pass (the engine's callback): wait for every bucket's
        allreduce in order and average. A pass in which some parameter got no gradient
        leaves the reduction unfinished (the next forward raises)."""
        if len(self._pass.fired) != len(self._params):
            return
        in_flight = self._pass.in_flight
        if _TRACE.tracer is not None:  # a compiled call resets the state at every call
            run_effect("ddp_end_pass", self._end_pass, [], "DistributedDataParallel's backward")
        else:
            self._end_pass()
        with grad_mode.no_grad():
            for b in in_flight:
                if b.traced is not None:
                    self._finish_traced(b)
                else:
                    work, b.work = b.work, None
                    work.wait()
                    np.divide(b.flat, self.world_size, out=b.flat)
                    self._copy_out(b)

    def _copy_out(self, b: _Bucket) -> None:
        """A bucket's averages, eagerly: in its views, the gradients (``.grad`` is the view,
        or gets the average copied into it)."""
        for p, g, view in zip(b.params, b.grads, b.views):
            if p._grad is not g:
                np.copyto(p._grad._data, view)
            p._grad._vc[0] += 1

    def _finish_traced(self, b: _Bucket) -> None:
        """The traced end of a bucket: the wait (the average, in the bucket's buffer), then
        each ``.grad`` the bucket's view tensor again, as in eager mode. The traced write of
        the view is no copy: the averaged slice is the view's own memory (the plan's
        write-back finds it there)."""
        flat, b.traced = b.traced, None
        if _TRACE.tracer is None:  # a graph break since the start: the wait runs now
            b.site.wait(flat._data)
            if self.gradient_as_bucket_view:
                for p, g in zip(b.params, b.grads):
                    p._grad = g
            self._copy_out(b)
            return
        avg = allreduce_wait(b.site, flat)
        start = 0
        for p, g in zip(b.params, b.grads):
            n = p._data.size
            if self.gradient_as_bucket_view:
                g.copy_(avg[start:start + n].view(p.shape))
                p.grad = g
            else:  # copied out
                p._grad.copy_(avg[start:start + n].view(p.shape))
            start += n
