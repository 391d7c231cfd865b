"""``torch.func.linearize``, ``torch.func.functionalize`` and
``torch.func.replace_all_batch_norm_modules_``.

``linearize`` records ``func``'s graph once and answers each ``jvp_fn(*tangents)`` with one
backward pass of the double-backward trick (``jvp``'s, see ``_transforms``): the graph of
``u -> J^T u`` for a dummy cotangent ``u`` is built once, and ``J t`` is its gradient with
respect to ``u`` at ``t``, so ``func`` runs twice in all (as PyTorch's, which evaluates it
once for the output and once to trace the JVP graph), whatever the number of tangents.

``functionalize``: PyTorch's transform removes the mutations and views *inside* ``func``
from the graph it traces; jitgrad's tensors carry no functionalization layer, and its
compiler sees the ops themselves, so the transform has nothing to rewrite. It gives
PyTorch's observable results: ``func`` runs on copies of the tensor arguments, arguments
that ``func`` mutated get the new values (copied back), and the outputs never alias the
arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..autograd import grad_mode
from ..autograd.engine import grad as _engine_grad
from ..creation import zeros_like
from ..tensor import Tensor
from ._pytree import tree_flatten, tree_map, tree_unflatten
from ._transforms import _Level

__all__ = ["linearize", "functionalize", "replace_all_batch_norm_modules_"]


def linearize(func: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """``(func(*primals), jvp_fn)`` where ``jvp_fn(*tangents)`` is the Jacobian-vector
    product of ``func`` at ``primals`` (``torch.func.linearize``): ``tangents`` has the
    structure, shapes, dtypes and devices of ``primals``, and the result the structure of
    ``func``'s output. ``func`` is evaluated twice here and not again by ``jvp_fn``.

    >>> import jitgrad
    >>> from jitgrad.func import linearize
    >>> out, jvp_fn = linearize(lambda x: x.sin(), jitgrad.zeros(3))
    >>> jvp_fn(jitgrad.ones(3))
    tensor([1., 1., 1.])
    """
    output = func(*primals)
    _, out_spec = tree_flatten(output)
    flat_p, p_spec = tree_flatten(primals)
    for i, p in enumerate(flat_p):
        if not isinstance(p, Tensor):
            raise RuntimeError(f"linearize: expected primal {i} to be a Tensor, got "
                               f"{type(p).__name__}")
    level = _Level(flat_p)
    with grad_mode.enable_grad():
        flat_out, _ = tree_flatten(func(*tree_unflatten(level.fresh, p_spec)))
        idx = [i for i, o in enumerate(flat_out) if isinstance(o, Tensor) and o.requires_grad
               and o.is_floating_point()]
        dummies = [zeros_like(flat_out[i]).requires_grad_(True) for i in idx]
        gin = (_engine_grad([flat_out[i] for i in idx], level.fresh, dummies,
                            retain_graph=True, create_graph=True, allow_unused=True)
               if idx else [None] * len(flat_p))
    shapes = [tuple(p.shape) for p in flat_p]
    devices = [p.device for p in flat_p]
    dtypes = [p.dtype for p in flat_p]
    zeros = [zeros_like(o) if isinstance(o, Tensor) else o for o in flat_out]

    def jvp_fn(*tangents: Any) -> Any:
        flat_t, t_spec = tree_flatten(tangents)
        if t_spec != p_spec:
            raise RuntimeError(f"Expected the tangents {t_spec} to have the same argspec as "
                               f"the primals {p_spec}")
        for i, t in enumerate(flat_t):
            for what, got, want in (("shape", t.shape, shapes[i]), ("device", t.device,
                                                                     devices[i]),
                                    ("dtype", t.dtype, dtypes[i])):
                if (tuple(got) if what == "shape" else got) != want:
                    want_s = type(t.shape)(want) if what == "shape" else want
                    raise RuntimeError(f"tangent:{i} with {what} {got} in flattened pytree "
                                       f"doesn't match the {what} {want_s} of the "
                                       "corresponding primal.")
        res = list(zeros)
        pairs = [(g, t) for g, t in zip(gin, flat_t) if g is not None and g.requires_grad]
        if pairs:
            gs, ts = zip(*pairs)
            graph = grad_mode.is_grad_enabled() and any(t.requires_grad for t in ts)
            with grad_mode.enable_grad():
                jt = _engine_grad(gs, dummies, ts, retain_graph=True, create_graph=graph,
                                  allow_unused=True)
            for i, g in zip(idx, jt):
                if g is not None:
                    res[i] = g
        return tree_unflatten(res, out_spec)

    return output, jvp_fn


_REMOVE_ERROR = (
    "functionalize(f, remove='mutations'): received invalid argument for remove={}. Valid "
    "options are:\n     remove='mutations': all inplace and out= operators will be removed "
    "from the program, and replaced with their out-of-place equivalents.\n     "
    "remove='mutations_and_views': In addition to the above, all aliasing operators {{view}} "
    "will be replaced with their non-aliasing counterparts, {{view}}_copy.\n")


def functionalize(func: Callable[..., Any], *, remove: str = "mutations"
                  ) -> Callable[..., Any]:
    """``func`` with PyTorch's ``torch.func.functionalize`` results: it runs on copies of
    its tensor arguments, an argument it mutates receives the new values afterwards, and
    its outputs never share memory with the arguments. (jitgrad has no functionalization
    layer to remove mutations and views from a traced graph: its compiler traces the ops
    themselves, so nothing else changes.) ``remove``: ``"mutations"`` or
    ``"mutations_and_views"``.

    >>> import jitgrad
    >>> from jitgrad.func import functionalize
    >>> def f(a):
    ...     a.add_(1)
    ...     return a * 2
    >>> x = jitgrad.zeros(2)
    >>> functionalize(f)(x), x
    (tensor([2., 2.]), tensor([1., 1.]))
    """
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(_REMOVE_ERROR.format(remove))

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        originals: list = []
        copies: list = []

        def copy(x):
            if not isinstance(x, Tensor):
                return x
            c = x.clone()
            originals.append(x)
            copies.append((c, c._version))
            return c
        out = func(*tree_map(copy, args), **tree_map(copy, kwargs))
        for x, (c, version) in zip(originals, copies):
            if c._version != version:  # mutated by func: the mutation reaches the argument
                x.copy_(c)
        return out  # (computed from the copies: it shares no memory with the arguments)

    return wrapped


def replace_all_batch_norm_modules_(root):
    """In place, every batch norm module of ``root`` (``root`` included) that tracks
    running statistics stops doing so: ``running_mean``, ``running_var`` and
    ``num_batches_tracked`` become None and ``track_running_stats`` False (so it normalises
    with the batch's statistics, also in eval mode, and can run under ``vmap``). Returns
    ``root`` (``torch.func.replace_all_batch_norm_modules_``)."""
    from ..nn.normalization import _BatchNorm

    for module in root.modules():
        if isinstance(module, _BatchNorm) and module.track_running_stats:
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root
