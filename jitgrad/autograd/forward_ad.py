"""PyTorch's ``torch.autograd.forward_ad``: dual tensors and Jacobian-vector products.

>>> import jitgrad
>>> import jitgrad.autograd.forward_ad as fwAD
>>> with fwAD.dual_level():
...     x = fwAD.make_dual(jitgrad.tensor([1.0, 2.0]), jitgrad.tensor([1.0, 0.0]))
...     fwAD.unpack_dual(x ** 2).tangent
tensor([2., 0.])

jitgrad has no forward-mode rules: a dual tensor is a tensor recorded by autograd, and
``unpack_dual(y).tangent`` is ``J t`` computed from the recorded graph with the
double-backward trick (the gradient of ``u -> J^T u`` at the tangents; two backward passes,
so the computation must be twice differentiable -- as :func:`jitgrad.func.jvp`). What this
means for a user:

* tangents propagate through the ops autograd records: grad mode must be on for them. An
  op run without grad mode (``no_grad``, ``inference_mode``) on a dual or on a result with a
  graph, while a level is open, makes :func:`unpack_dual` raise rather than return a tangent
  that misses it (ops on other tensors -- a module's initialisation -- are fine). While a
  level is open every op takes jitgrad's Python paths (slower);
* a custom ``autograd.Function`` carries tangents through its recorded node: its forward's
  own ops run without grad mode but lose none, and its tangent comes from its ``backward``
  (its ``jvp`` staticmethod is not called, so the two must agree, as PyTorch's gradcheck
  with ``check_forward_ad`` requires);
* a dual tensor requires grad (PyTorch's does only when its primal does);
* ``unpack_dual`` of a tensor no dual reaches gives ``tangent=None``, as PyTorch's.
"""

from __future__ import annotations

from collections import namedtuple

from .._thread_modes import TRACING
from ..tensor import Tensor
from . import grad_mode

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])
_SLOW_PATH = "forward AD"  # what an open level puts in _thread_modes.TRACING


class _DualLevel:
    """An open level: its dual tensors and their tangents."""

    def __init__(self) -> None:
        self.duals: list[Tensor] = []
        self.tangents: list[Tensor] = []
        self.ids: dict[int, int] = {}  # id(dual) -> its index
        self.grad_was_off = False


def enter_dual_level() -> int:
    """Open the (one) forward-AD level; returns its index, 0."""
    if grad_mode.DUAL_LEVEL[0] is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    grad_mode.DUAL_LEVEL[0] = _DualLevel()
    TRACING.append(_SLOW_PATH)  # (every op through the paths that note untracked ops)
    return 0


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the level: its dual tensors lose their tangents."""
    if grad_mode.DUAL_LEVEL[0] is None:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    grad_mode.DUAL_LEVEL[0] = None
    if _SLOW_PATH in TRACING:
        TRACING.remove(_SLOW_PATH)


class dual_level:
    """Context manager (or decorator) of a forward-AD level: ``make_dual`` inside it."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> None:
        exit_dual_level()

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)
        return wrapper


def _current(what: str) -> _DualLevel:
    level = grad_mode.DUAL_LEVEL[0]
    if level is None:
        raise RuntimeError(f"Trying to {what} for forward AD but no level exists, make sure "
                           "to enter_dual_level() first.")
    return level


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """``tensor`` carrying ``tangent`` (of its shape) in the open level: ops on it record,
    and :func:`unpack_dual` of their results gives their tangents."""
    lvl = _current("create a dual Tensor")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual expects Tensors for its primal and tangent")
    if not tensor.is_floating_point():
        raise ValueError(f"Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not tangent.is_floating_point():
        raise ValueError(f"Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if tuple(tensor.shape) != tuple(tangent.shape):
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}.")
    if not grad_mode.is_grad_enabled():
        raise RuntimeError("jitgrad's forward AD computes tangents from the graph autograd "
                           "records: make_dual needs grad mode on (not under no_grad or "
                           "inference_mode)")
    dual = tensor.view_as(tensor) if tensor.requires_grad else \
        tensor.detach().requires_grad_(True)
    lvl.ids[id(dual)] = len(lvl.duals)
    lvl.duals.append(dual)
    lvl.tangents.append(tangent.detach() if not tangent.requires_grad else tangent)
    return dual


def unpack_dual(tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor`` in the open level: the tangent is ``J t`` over
    every dual tensor ``tensor`` depends on (None when it depends on none, or no level is
    open)."""
    lvl = grad_mode.DUAL_LEVEL[0]
    if lvl is None or not isinstance(tensor, Tensor):
        return UnpackedDualTensor(tensor, None)
    k = lvl.ids.get(id(tensor))
    if k is not None and lvl.duals[k] is tensor:
        return UnpackedDualTensor(_primal(tensor, lvl), lvl.tangents[k])
    if lvl.grad_was_off and tensor.is_floating_point():
        raise RuntimeError(
            "an op ran without grad mode (no_grad, inference_mode) on a tensor carrying a "
            "tangent in this forward AD level: jitgrad computes tangents by differentiating "
            "the graph autograd records, so that op's tangent would be missing. Keep grad "
            "mode on for the computation between make_dual and unpack_dual")
    if not tensor.requires_grad:
        return UnpackedDualTensor(tensor, None)
    with grad_mode.enable_grad():
        tangent = _tangent(tensor, lvl)
    return UnpackedDualTensor(_primal(tensor, lvl), tangent)


def _tangent(y: Tensor, lvl: _DualLevel) -> Tensor | None:
    """``J t`` for ``y``: the gradient, with respect to a dummy ``u``, of ``<J^T u, t>``."""
    from ..creation import zeros_like
    from .engine import grad

    if not y.is_floating_point():
        return None
    u = zeros_like(y).requires_grad_(True)
    vjps = grad([y], lvl.duals, [u], retain_graph=True, create_graph=True, allow_unused=True)
    pairs = [(g, t if t.dtype == g.dtype else t.to(g.dtype))
             for g, t in zip(vjps, lvl.tangents) if g is not None]
    if not pairs:
        return None
    linear = [(g, t) for g, t in pairs if g.requires_grad]
    if not linear:  # J^T u does not depend on u: J is zero on this path
        return zeros_like(y)
    gs, ts = zip(*linear)
    keep = any(t.requires_grad for t in ts)
    (jt,) = grad(list(gs), [u], list(ts), retain_graph=True, create_graph=keep,
                 allow_unused=True)
    return zeros_like(y) if jt is None else jt


def _primal(t: Tensor, lvl: _DualLevel) -> Tensor:
    """``t`` without its dual history: detached unless it depends on a tensor that requires
    grad outside the level (then reverse mode through it still works)."""
    from ..func._transforms import _depends_on_outside

    if _depends_on_outside((t,), {id(d) for d in lvl.duals if d._grad_fn is None}):
        return t
    return t.detach()
