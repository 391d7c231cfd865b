"""Calling one fused kernel of a CUDA plan: the CUDA counterpart of
:class:`jitgrad.compiler.group_runner.GroupRunner`.

The plan's fusion, description and binding are the CPU plan's (one pipeline); only the
renderer (``render_cuda``), the memory (device arrays) and the launch differ. Constant
operands are baked once: numbers as kernel arguments, arrays copied to the device.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..compiler.describe import GroupBinding
from ..compiler.group_runner import alias_inplace_stores
from ..compiler.kernel_desc import KernelDesc
from ..compiler.pysource import log_source
from ..compiler.render_cuda import module_source_cuda
from . import launch, runtime

__all__ = ["CudaGroupRunner"]


class CudaGroupRunner:
    """Runs one fused CUDA kernel over a plan's environment (``run(env)``)."""

    native = False  # never a native (CPU) export

    def __init__(self, group, desc: KernelDesc, binding: GroupBinding, cache_dir,
                 host_scalars: frozenset = frozenset(), inplace: dict | None = None) -> None:
        self.group = group
        # a one-value operand the plan computes on the device is read by the kernel from
        # its one-element array ("item"): passing it by value would copy it to the host (a
        # wait for the device) at every call; constants and ``host_scalars`` (ids of values
        # the plan holds on the host: captured hyperparameters) go by value
        desc = replace(desc, operands=tuple(
            replace(op, pattern="item") if op.pattern == "scalar" and v.kind != "const"
            and id(v) not in host_scalars else op
            for v, op in zip(binding.operands, desc.operands)))
        # written values stored straight into their destinations (``inplace_writes.py``:
        # an optimizer's ``p - lr * g`` into ``p``), the copy-back then finds nothing to do
        self.inplace = inplace or {}
        desc = alias_inplace_stores(desc, binding, self.inplace, {})
        self._dst_operand = {j: next(k for k, o in enumerate(binding.operands) if o is dst)
                             for j, v in enumerate(binding.outputs)
                             if (dst := self.inplace.get(id(v))) is not None}
        self._externals = [k for k, (v, op) in enumerate(zip(binding.operands, desc.operands))
                           if op.pattern not in ("scalar", "item") and v.kind in ("in", "ext")]
        self.desc = desc
        self.binding = binding
        self.source = module_source_cuda(desc)
        log_source(f"plan kernel {desc.title} (cuda)", self.source)
        shape = group.shape
        self.n = int(math.prod(shape))
        p = binding.split
        self.R = int(math.prod(shape[:p]))
        self.C = int(math.prod(shape[p:]))
        self.baked: set = set()
        self._fixed: dict = {}
        for j, (v, op) in enumerate(zip(binding.operands, desc.operands)):
            if v.kind == "const":
                a = np.asarray(runtime.to_host(v.source))  # (a folded constant may be
                # a device array: read once here, on the host)
                self._fixed[j] = (np.dtype(v.dtype).type(a.reshape(-1)[0])
                                  if op.pattern == "scalar" else
                                  runtime.to_device(np.ascontiguousarray(a).reshape(-1)))
                self.baked.add(id(v))
        self._scalars = [np.dtype(dt).type(value) for value, dt in binding.scalars]
        # the launch, resolved once: compiled now (or loaded from the cache), not at the
        # first call; grid and sizes from the group's shape
        n_args = (len(desc.operands) + len(self._scalars) + len(binding.outputs)
                  + len(binding.reductions))
        self._launch = launch.resolve(desc, n_args, self.n, self.R, self.C)
        self._empty = (self.n if desc.mode == "flat" else self.R * self.C) == 0 \
            and not desc.reductions
        parts_written = desc.mode != "flat" or self.n > 0
        # what run() does per operand, output and sum, decided once: (constant, env key,
        # type of a host value); (env key, shape, dtype, destination operand, destination
        # key, whether the kernel updates the destination itself); (partials' size, whether
        # every part writes its partial -- an empty flat space has one partial, 0 --, env
        # key of the sum, kind, scale, dtype, shape)
        self._operand_steps = tuple(
            (self._fixed.get(j), id(v),
             np.dtype(v.dtype).type if op.pattern == "scalar" else None)
            for j, (v, op) in enumerate(zip(binding.operands, desc.operands)))
        self._output_steps = tuple(
            (id(v), v.shape, v.dtype, k,
             None if k is None else id(self.inplace[id(v)]), (j, k) in desc.aliases,
             tuple(id(binding.operands[m]) for m in self._externals if m != k))
            for j, v in enumerate(binding.outputs)
            for k in (self._dst_operand.get(j),))
        #: per destination key: the destination array, the other external arrays and
        #: whether one of them shares its memory, as the last call found them
        self._overlaps: dict = {}
        self._sum_steps = tuple(
            (launch.partials_size(desc, kind, self.n, self.R, self.C), parts_written,
             id(e.out), kind, scale, e.out.dtype, e.out.shape)
            for e, kind, scale in binding.reductions)

    def run(self, env: dict) -> None:
        args = []
        for fixed, key, host_type in self._operand_steps:
            if fixed is not None:
                args.append(fixed)
                continue
            a = env[key]
            if host_type is not None:  # a host value
                args.append(host_type(a.reshape(-1)[0].item()))
            elif a.flags.c_contiguous:
                args.append(a if a.ndim == 1 else a.reshape(-1))
            else:
                args.append(runtime.xp().ascontiguousarray(a).reshape(-1))
        args += self._scalars
        for key, shape, dtype, k, dst_key, aliased, other_keys in self._output_steps:
            if k is not None:  # into the destination, unless it cannot take it here
                o = env[dst_key]
                fits = o.flags.c_contiguous and not self._shares_memory(
                    dst_key, o, env, other_keys)
                if aliased:  # the kernel updates operand k: no output argument
                    if not fits:
                        args[k] = args[k].copy()  # (the copy-back then writes o)
                    env[key] = o if fits else args[k].reshape(shape)
                    continue
                if fits:
                    env[key] = o
                    args.append(o.reshape(-1))
                    continue
            o = env[key] = runtime.empty(shape, dtype)
            args.append(o.reshape(-1))
        sums = self._sum_steps
        if sums:
            partials = []
            for size, written, *_ in sums:
                r = runtime.empty(size, np.float64) if written else \
                    runtime.zeros(size, np.float64)
                partials.append(r)
                args.append(r)
        if not self._empty:
            launch.run(*self._launch, args)
        if sums:
            for r, (_, _, key, kind, scale, dtype, shape) in zip(partials, sums):
                env[key] = launch.finish_sum(r, kind, scale, dtype, shape)

    def _shares_memory(self, dst_key: int, o, env: dict, other_keys: tuple) -> bool:
        """Whether destination ``o`` may share memory with another external array of the
        kernel (then the kernel cannot store into it). The arrays of one call are mostly
        those of the last (parameters and optimizer state): the answer is kept for them,
        so a step asks the array module once per destination, not once per call."""
        others = [env[k] for k in other_keys]
        last = self._overlaps.get(dst_key)
        if last is not None and last[0] is o and all(a is b for a, b in zip(last[1], others)):
            return last[2]
        shares = any(runtime.xp().may_share_memory(o, a) for a in others)
        self._overlaps[dst_key] = (o, others, shares)
        return shares
