"""``vmap``: one traced call replayed on the whole batch (:mod:`._batch_trace`), or, where
that cannot capture the function (random ops, in-place updates of the slices, ``.item()``,
data-dependent Python control flow...), a loop: ``func`` once per batch element on the
inputs sliced along their ``in_dims``, the outputs stacked along ``out_dims``. Argument
checking and error messages are PyTorch's (``torch/_functorch/vmap.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..tensor import Tensor
from . import _batch_trace
from ._pytree import broadcast_to_and_flatten, tree_flatten, tree_unflatten

__all__ = ["vmap"]

in_dims_t = int | tuple[Any, ...]
out_dims_t = int | tuple[Any, ...] | None

_RANDOM_ERROR = ("vmap: called random operation while in randomness error mode. Please either "
                 "use the 'same' or 'different' randomness flags on vmap or perform the "
                 "randomness operation out of vmap")


def _get_name(func: Any) -> str:
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_get_name(func.func)}, ...)"
    return repr(func)


def _check_randomness_arg(randomness: str) -> None:
    if randomness not in ("error", "different", "same"):
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")


def _generators() -> list:
    from ..random import LIVE

    return list(LIVE)


class _RandomnessGuard:
    """The states of every live generator, to tell whether a call drew random numbers."""

    def __init__(self) -> None:
        self.states = [(g, g._state()) for g in _generators()]

    def check(self) -> None:
        """Raise vmap's error if any generator moved since the snapshot."""
        for g, s in self.states:
            if g._state() != s:
                raise RuntimeError(_RANDOM_ERROR)

    def restore(self) -> None:
        """Put every generator back in its snapshot state ('same' randomness). Under
        ``jitgrad.compile``, once a call has drawn numbers, the rewinding is a graph break
        (a trace records the draws, not the rewinding: the compiled plan would draw anew)."""
        moved = [(g, s) for g, s in self.states if g._state() != s]
        if not moved:
            return
        from ..trace.state import STATE

        if STATE.tracer is not None:
            STATE.tracer.graph_break("vmap(randomness='same') rewinds the random generators "
                                     "between batch elements")
        for g, s in moved:
            g._restore(s)


def _process_inputs(in_dims: in_dims_t, args: tuple, func) -> tuple[int, list, list, Any]:
    name = _get_name(func)
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
            "(potentially nested) tuple matching the structure of inputs, got: "
            f"{type(in_dims)}.")
    if len(args) == 0:
        raise ValueError(
            f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you "
            "are trying to vmap over a function with no inputs. The latter is unsupported.")
    flat_args, spec = tree_flatten(args)
    flat_in_dims = broadcast_to_and_flatten(in_dims, spec)
    if flat_in_dims is None:
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with "
            f"the structure of `inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but "
            f"inputs has structure {spec}.")
    for i, (arg, d) in enumerate(zip(flat_args, flat_in_dims)):
        if not isinstance(d, int) and d is not None:
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                "but in_dim must be either an integer dimension or None.")
        if isinstance(d, int) and not isinstance(arg, Tensor):
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                f"but the input is of type {type(arg)}. We cannot vmap over non-Tensor "
                "arguments, please use None as the respective in_dim")
        if d is not None and (d < -arg.dim() or d >= arg.dim()):
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some "
                f"input, but that input is a Tensor of dimensionality {arg.dim()} so expected "
                f"in_dim to satisfy -{arg.dim()} <= in_dim < {arg.dim()}.")
        if d is not None and d < 0:
            flat_in_dims[i] = d % arg.dim()
    sizes = [arg.shape[d] for arg, d in zip(flat_args, flat_in_dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0], flat_in_dims, flat_args, spec


def _check_out_dims(out_dims: out_dims_t, func) -> None:
    if isinstance(out_dims, int):
        return
    for d in tree_flatten(out_dims)[0]:
        if d is not None and not isinstance(d, int):
            raise ValueError(
                f"vmap({_get_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an "
                "int, None or a python collection of ints representing where in the outputs "
                "the vmapped dimension should appear.")


def _flat_out_dims(first_out: Any, spec, out_dims: out_dims_t, func) -> list:
    def incompatible():
        raise ValueError(
            f"vmap({_get_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not "
            "compatible with the structure of `outputs`. out_dims has structure "
            f"{tree_flatten(out_dims)[1]} but outputs has structure {spec}.")

    if isinstance(first_out, Tensor):
        if isinstance(out_dims, int) or out_dims is None:
            return [out_dims]
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            return list(out_dims)
        incompatible()
    flat = broadcast_to_and_flatten(out_dims, spec)
    if flat is None:
        incompatible()
    return flat


def _same_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            return False
        x = np.asarray(a.detach().cpu().numpy())
        y = np.asarray(b.detach().cpu().numpy())
        return bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an uncomparable value counts as different
        return False


def vmap(func: Callable[..., Any], in_dims: in_dims_t = 0, out_dims: out_dims_t = 0,
         randomness: str = "error", *, chunk_size: int | None = None) -> Callable[..., Any]:
    """The vectorizing map (``torch.vmap`` / ``torch.func.vmap``): ``vmap(func)(*args)``
    applies ``func`` to each slice of ``args`` along ``in_dims`` and stacks the results
    along ``out_dims``.

    **Batched by tracing**: ``func`` runs once, on the first element, under the tracer
    ``jitgrad.compile`` uses; the ops it recorded -- those of ``grad``/``vjp`` inside it
    included -- then run once on the whole batch, each through its batching rule
    (``jitgrad/func/_batch_rules.py``; an op without one runs per element). As with
    ``torch.vmap``, ``func``'s Python code runs once. A call that cannot be replayed --
    data-dependent Python (``if t > 0``, ``.item()``, indexing by a tensor's values), random
    draws, in-place writes to its inputs or captured tensors, ``.grad`` changes, non-tensor
    outputs -- runs as a loop instead: once per element on ``arg.select(in_dim, i)`` (after
    the traced attempt, its effects undone), correct for any ``func`` at the per-sample
    speed. ``JITGRAD_VMAP=loop`` forces the loop. Batched and looped results agree to
    rounding (a batched sum or product may add in another order). It composes: nested
    ``vmap`` (the inner one is a loop the outer one batches), ``vmap(grad(loss),
    in_dims=(None, 0, 0))`` (per-sample gradients), autograd through the result (each
    replayed op keeps the inputs that carried gradient when it was traced).

    Args:
        in_dims: an int, or a (nested) tuple matching the structure of the positional
            arguments; ``None`` for an argument that is not mapped (passed whole to every
            call). Keyword arguments are never mapped.
        out_dims: where the mapped dimension goes in each output (an int, or a nested tuple
            matching the outputs); ``None`` for an output that must not depend on the
            batch (returned once; an error if its values differ between elements -- a
            comparison of values, so a graph break under ``jitgrad.compile``).
        randomness: ``'error'`` (the default: a call that draws random numbers from any
            jitgrad generator raises PyTorch's error), ``'different'`` (each element draws
            its own numbers: the loop's natural behaviour) or ``'same'`` (every element sees
            the same draws: the generators are rewound before each call).
        chunk_size: PyTorch's memory knob: the batched replay runs on slices of this many
            elements (the loop runs one element at a time anyway).

    An empty batch runs ``func`` once, on zeros shaped as one element, to learn the shapes
    of the (empty) outputs.

    >>> import jitgrad
    >>> from jitgrad.func import vmap
    >>> vmap(jitgrad.dot)(jitgrad.ones(3, 2), jitgrad.ones(3, 2))
    tensor([2., 2., 2.])
    """
    _check_randomness_arg(randomness)
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return _vmap_impl(func, in_dims, out_dims, randomness, args, kwargs, chunk_size)
    return wrapped


def _vmap_impl(func, in_dims, out_dims, randomness: str, args: tuple, kwargs: dict,
               chunk_size: int | None = None) -> Any:
    from ..creation import zeros
    from ..ops.concat import stack

    _check_out_dims(out_dims, func)
    batch, flat_in_dims, flat_args, spec = _process_inputs(in_dims, args, func)
    if batch == 0:  # no element to run: shape the (empty) outputs from a call on zeros
        sample = [a if d is None else
                  zeros(tuple(s for k, s in enumerate(a.shape) if k != d), dtype=a.dtype,
                        device=a.device) for a, d in zip(flat_args, flat_in_dims)]
        out = func(*tree_unflatten(sample, spec), **kwargs)
        flat, out_spec = tree_flatten(out)
        dims = _flat_out_dims(out, out_spec, out_dims, func)
        res = [_finish(func, [o], d, lambda vs, d: vs[0].unsqueeze(d).narrow(d, 0, 0))
               for o, d in zip(flat, dims)]
        return tree_unflatten(res, out_spec)

    if _batch_trace.enabled():
        got = _batch_trace.batched_call(func, flat_args, flat_in_dims, spec, kwargs, batch,
                                        chunk_size)
        if got is not _batch_trace.NOT_BATCHED:
            return _finish_batched(func, got, out_dims, batch)
    guard = _RandomnessGuard() if randomness != "different" else None
    outs = []
    for i in range(batch):
        if randomness == "same":
            guard.restore()
        elem = [a if d is None else a.select(d, i) for a, d in zip(flat_args, flat_in_dims)]
        out = func(*tree_unflatten(elem, spec), **kwargs)
        if randomness == "error":
            guard.check()
        outs.append(out)

    flat0, out_spec = tree_flatten(outs[0])
    flats = [flat0]
    for o in outs[1:]:
        f, s = tree_flatten(o)
        if s != out_spec:
            raise ValueError(
                f"vmap({_get_name(func)}, ...): `{_get_name(func)}` returned outputs of "
                f"different structures for different batch elements: {out_spec} and {s}")
        flats.append(f)
    dims = _flat_out_dims(outs[0], out_spec, out_dims, func)
    res = [_finish(func, [f[k] for f in flats], d, lambda vs, d: stack(vs, d))
           for k, d in enumerate(dims)]
    return tree_unflatten(res, out_spec)


def _finish(func, values: list, out_dim, combine) -> Any:
    """One output leaf across the batch: stacked along ``out_dim``, or, for None, the
    value itself (which must be the same for every element)."""
    name = _get_name(func)
    if out_dim is None:
        first = values[0]
        if any(not _same_value(first, v) for v in values[1:]):
            raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                             "when out_dim is None")
        return first
    if not all(isinstance(v, Tensor) for v in values):
        bad = next(v for v in values if not isinstance(v, Tensor))
        raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                         f"{type(bad)}. Did you mean to set out_dims= to None for output?")
    return combine(values, out_dim)



def _finish_batched(func, got: tuple, out_dims: out_dims_t, size: int) -> Any:
    """The outputs of a batched replay with the batch dim moved to ``out_dims``: a value
    that does not depend on the mapped inputs is expanded along it (as PyTorch does), or,
    for ``out_dims=None``, returned as it is."""
    values, out_spec = got
    shaped = tree_unflatten([Tensor.__new__(Tensor) for _ in values], out_spec)
    dims = _flat_out_dims(shaped, out_spec, out_dims, func)
    res = []
    for v, d in zip(values, dims):
        if d is None:
            if v.batched:
                name = _get_name(func)
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                                 "when out_dim is None")
            res.append(v.t)
        elif v.batched:
            res.append(v.t if d in (0, -v.t.dim()) else v.t.movedim(0, d))
        else:
            u = v.t.unsqueeze(d)
            shape = list(u.shape)
            shape[d % u.dim()] = size
            res.append(u.expand(shape))
    return tree_unflatten(res, out_spec)
