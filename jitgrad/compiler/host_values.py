"""The values of a CUDA plan that live on the host.

A CUDA graph may compute on CPU tensors too, as PyTorch allows: a 0-d CPU tensor meets
CUDA tensors as a number (an optimizer's step counter, Adam's bias corrections built from
it, a learning rate read afresh at every call). Those values stay on the host: fused groups
made only of them run as CPU kernels (the CPU renderer of the same description), and a
CUDA kernel takes each such value by value. Passed to a CUDA kernel as an array, a host
value would be copied to the device and back at every launch, the host waiting for the GPU
each time.
"""

from __future__ import annotations

from ..devices import is_cpu_array
from ..trace.ir import Graph, Var

__all__ = ["host_values"]


def _held_on_host(v: Var) -> bool:
    """Whether external ``v`` is read from host memory at every call: a number read afresh
    (Source ``scalar``) or a captured CPU tensor (or its ``.grad``)."""
    src = v.source
    if src is None:
        return False
    if src.kind == "scalar":
        return True
    if src.kind == "tensor":
        return is_cpu_array(src.obj._data)
    if src.kind == "grad":
        if src.index >= 0:  # an argument's: on the call's device (guarded with it)
            return False
        g = src.obj._grad
        return g is not None and is_cpu_array(g._data)
    return False  # an argument: its device is the call's (guarded with it)


def host_values(graph: Graph) -> frozenset:
    """Ids of the Vars of CUDA graph ``graph`` held or computed on the host: captured host
    values (:func:`_held_on_host`) and the results of equations whose array inputs are all
    host values (constants aside), except a move to CUDA; a move to the CPU is a host
    value. Empty for a CPU graph."""
    if graph.device != "cuda":
        return frozenset()
    host = {id(v) for v in graph.externals if v.kind == "ext" and _held_on_host(v)}
    for e in graph.eqns:
        if getattr(e.op, "name", e.op) == "to_device":
            if str(e.params.get("device")) == "cpu":
                host.add(id(e.out))
            continue
        ins = [i for i in e.ins if isinstance(i, Var) and i.kind != "const"]
        if ins and all(id(i) in host for i in ins):
            host.add(id(e.out))
    return frozenset(host)
