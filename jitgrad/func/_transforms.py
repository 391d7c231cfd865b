"""``torch.func``'s autodiff transforms (``grad``, ``grad_and_value``, ``vjp``, ``jvp``,
``jacrev``, ``jacfwd``, ``hessian``) on jitgrad's reverse-mode engine.

Each call differentiates with respect to fresh copies of the chosen arguments: a detached
leaf, or -- when the argument itself requires grad (an outer transform's input, or a
tensor of the user's graph) and grad mode is on -- a ``view_as`` of it, so the result stays
differentiable with respect to it. Gradients are built with ``create_graph=True`` only when
something outside the transform needs them to be differentiable: an argument that requires
grad, a captured tensor that requires grad (found by walking the output's graph), or a
cotangent / tangent that requires grad. Results that depend on nothing outside are returned
detached, as functorch's "unwrapped" results are. Nesting (``grad(grad(f))``,
``jacrev(jacrev(f))``, ``vmap(grad(f))``) therefore composes as in PyTorch.

There is no forward-mode AD in jitgrad: ``jvp`` is the double-backward trick (a vjp with a
dummy cotangent that requires grad, differentiated with respect to that cotangent), and
``jacfwd`` computes the Jacobian by rows, as ``jacrev`` (same values and layout).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..autograd import grad_mode
from ..autograd.engine import grad as _engine_grad
from ..creation import zeros_like
from ..tensor import Tensor
from ._pytree import tree_flatten, tree_map, tree_unflatten, treespec_pprint

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian"]

argnums_t = int | tuple[int, ...]


# ----------------------------------------------------------------------- argument helpers
def _validate_argnum(argnum: int, num_args: int) -> int:
    if not isinstance(argnum, int):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if 0 <= argnum < num_args:
        return argnum
    if -num_args <= argnum < 0:
        return argnum + num_args
    raise RuntimeError(f"Got argnum={argnum}, but only {num_args} positional inputs")


def _normalize_argnums(argnums: argnums_t, num_args: int) -> argnums_t:
    if not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if isinstance(argnums, int):
        return _validate_argnum(argnums, num_args)
    argnums = tuple(_validate_argnum(a, num_args) for a in argnums)
    if len(argnums) == 0:
        raise RuntimeError("argnums must be non-empty")
    if len(set(argnums)) != len(argnums):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return argnums


def _slice_argnums(args: tuple, argnums: argnums_t) -> Any:
    """The differentiated arguments: ``args[argnums]`` for an int, a tuple for a tuple."""
    if isinstance(argnums, int):
        return args[argnums]
    return tuple(args[i] for i in argnums)


def _replace_args(args: tuple, new: Any, argnums: argnums_t) -> tuple:
    if isinstance(argnums, int):
        return tuple(new if i == argnums else a for i, a in enumerate(args))
    return tuple(new[argnums.index(i)] if i in argnums else a for i, a in enumerate(args))


def _fresh(x: Any, connect: bool) -> Tensor:
    """A new tensor for differentiating with respect to ``x``: connected to ``x`` (a view)
    when ``connect`` and ``x`` requires grad, else a detached leaf requiring grad."""
    if not isinstance(x, Tensor):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
    if connect and x.requires_grad:
        return x.view_as(x)
    return x.detach().requires_grad_(True)


def _depends_on_outside(roots, fresh_ids: set) -> bool:
    """Whether the graph of any tensor in ``roots`` reaches a tensor that requires grad
    other than the fresh leaves ``fresh_ids`` (ids): something outside the transform."""
    stack = []
    for t in roots:
        if isinstance(t, Tensor) and t._requires_grad:
            fn = t._grad_fn
            if fn is None:
                if id(t) not in fresh_ids:
                    return True
            else:
                stack.append(fn)
    seen: set = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for e in getattr(node, "next_edges", ()):
            if e is None:
                continue
            if type(e) is tuple:
                stack.append(e[0])
            elif id(e) not in fresh_ids:  # a leaf
                return True
    return False


class _Level:
    """One transform call: its fresh inputs and whether an outer graph is being built."""

    def __init__(self, flat_inputs: list) -> None:
        self.outer = grad_mode.is_grad_enabled()
        # an input that requires grad is differentiated through (view_as): the outer graph
        # then needs this level's gradients
        self.connected = self.outer and any(isinstance(x, Tensor) and x.requires_grad
                                            for x in flat_inputs)
        self.fresh = [_fresh(x, self.outer) for x in flat_inputs]
        self.fresh_ids = {id(t) for t in self.fresh}

    def needs_graph(self, tensors) -> bool:
        """Whether gradients of ``tensors`` must be built differentiably."""
        return self.outer and (self.connected or _depends_on_outside(tensors, self.fresh_ids))

    def unwrap(self, tree: Any, keep: bool, aux: bool = False) -> Any:
        """``tree`` with its tensors detached, unless ``keep`` and the tensor depends on
        something outside this level. ``aux``: every leaf must be a tensor (PyTorch's
        check on auxiliary outputs)."""
        def one(x):
            if not isinstance(x, Tensor):
                if aux:
                    raise RuntimeError(f"Expected tensors, got unsupported type {type(x)}")
                return x
            if not x._requires_grad:
                return x
            if keep and _depends_on_outside((x,), self.fresh_ids):
                return x
            return x.detach()
        return tree_map(one, tree)


def _autograd_grad(outputs, inputs, grad_outputs=None, retain_graph: bool = False,
                   create_graph: bool = False) -> tuple:
    """Gradients of the outputs that require grad; zeros for an input they do not reach."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        return tuple(zeros_like(x) for x in inputs)
    outs, gos = zip(*pairs)
    with grad_mode.enable_grad():
        res = _engine_grad(outs, inputs, gos, retain_graph=retain_graph,
                           create_graph=create_graph, allow_unused=True)
    return tuple(zeros_like(x) if g is None else g for g, x in zip(res, inputs))


def _assert_tensor_outputs(flat: list, api: str) -> None:
    if len(flat) < 1 or (len(flat) == 1 and flat[0] is None):
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output "
                           f"(got output = {flat})")
    for o in flat:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got "
                               f"unsupported type {type(o)}")


def _split_aux(out: Any, has_aux: bool, api: str) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if "
                           "has_aux is True")
    return out


# ---------------------------------------------------------------------------- grad
def grad_and_value(func: Callable[..., Any], argnums: argnums_t = 0,
                   has_aux: bool = False) -> Callable[..., tuple[Any, Any]]:
    """A function computing ``(gradient, value)`` of scalar ``func`` (``torch.func``'s).

    The gradient is with respect to argument(s) ``argnums`` (an int, or a tuple giving a
    tuple of gradients); an argument may be a nested tuple / list / dict of tensors (its
    gradient has the same structure). With ``has_aux``, ``func`` returns ``(output, aux)``
    and the value is ``(output, aux)``.

    >>> import jitgrad
    >>> from jitgrad.func import grad_and_value
    >>> grad_and_value(lambda x: (x ** 2).sum())(jitgrad.tensor([1.0, 2.0]))
    (tensor([2., 4.]), tensor(5.))
    """
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return _grad_and_value(func, argnums, has_aux, args, kwargs)
    return wrapper


def grad(func: Callable[..., Any], argnums: argnums_t = 0,
         has_aux: bool = False) -> Callable[..., Any]:
    """The gradient function of scalar ``func`` (``torch.func.grad``): ``grad(f)(*args)``
    is the gradient of ``f(*args)`` with respect to ``args[argnums]``.

    Composes with itself (``grad(grad(f))``: second derivatives), with :func:`vmap`
    (``vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)``: per-sample gradients) and
    with ``jitgrad.autograd``. Gradient mode inside ``func`` is on whatever it is outside
    (a ``no_grad`` inside ``func`` is respected). ``has_aux``: ``func`` returns
    ``(output, aux)``, and the result is ``(gradient, aux)``.

    >>> import jitgrad
    >>> from jitgrad.func import grad
    >>> grad(grad(lambda x: x ** 3))(jitgrad.tensor(2.0))
    tensor(12.)
    """
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        g, value = _grad_and_value(func, argnums, has_aux, args, kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def _grad_and_value(func, argnums, has_aux, args, kwargs):
    api = "grad_and_value(f)(*args)"
    argnums = _normalize_argnums(argnums, len(args))
    diff = _slice_argnums(args, argnums)
    flat_diff, spec = tree_flatten(diff)
    level = _Level(flat_diff)
    args = _replace_args(args, tree_unflatten(level.fresh, spec), argnums)
    with grad_mode.enable_grad():
        output = func(*args, **kwargs)
        output, aux = _split_aux(output, has_aux, api)
        if not isinstance(output, Tensor):
            raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got "
                               f"{type(output)}")
        if output.dim() != 0:
            raise RuntimeError(
                f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with "
                f"{output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
        keep = level.needs_graph((output,))
        # (an outer graph shares this one's forward nodes: keep them when it is built)
        grads = _autograd_grad((output,), level.fresh, retain_graph=keep, create_graph=keep)
    g = level.unwrap(tree_unflatten(list(grads), spec), keep)
    output = level.unwrap(output, keep)
    if has_aux:
        return g, (output, level.unwrap(aux, keep, aux=True))
    return g, output


# ----------------------------------------------------------------------------- vjp
def vjp(func: Callable[..., Any], *primals: Any,
        has_aux: bool = False) -> tuple[Any, Callable[..., Any]] | tuple[Any, Callable, Any]:
    """``(func(*primals), vjp_fn)`` (``torch.func.vjp``): ``vjp_fn(cotangents)`` returns the
    vector-Jacobian products, one per primal (a tuple shaped as ``primals``); the
    cotangents have the structure of ``func``'s output. ``vjp_fn`` may be called many times
    (``retain_graph=True`` by default); its ``create_graph`` defaults to the grad mode.
    With ``has_aux``, ``func`` returns ``(output, aux)`` and so does the call, then aux
    last.

    >>> import jitgrad
    >>> from jitgrad.func import vjp
    >>> out, vjp_fn = vjp(jitgrad.sin, jitgrad.tensor([0.0, 1.0]))
    >>> vjp_fn(jitgrad.ones(2))
    (tensor([1.0000, 0.5403]),)
    """
    api = "vjp(f, *primals)"
    flat, spec = tree_flatten(primals)
    level = _Level(flat)
    with grad_mode.enable_grad():
        out = func(*tree_unflatten(level.fresh, spec))
        out, aux = _split_aux(out, has_aux, api)
        flat_out, out_spec = tree_flatten(out)
        _assert_tensor_outputs(flat_out, api)
        for o in flat_out:
            if not o.is_floating_point():
                raise RuntimeError("vjp(f, ...): All outputs of f must be floating-point or "
                                   f"complex Tensors, got Tensor with dtype {o.dtype}")
    keep = level.needs_graph(flat_out)

    def vjp_fn(cotangents: Any, retain_graph: bool = True,
               create_graph: bool | None = None) -> tuple:
        if create_graph is None:
            create_graph = grad_mode.is_grad_enabled()
        flat_cot, cot_spec = tree_flatten(cotangents)
        if cot_spec != out_spec:
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure "
                f"of outputs to the function. cotangents: {treespec_pprint(cot_spec)}, "
                f"primal output: {treespec_pprint(out_spec)}")
        graph = create_graph and (keep or any(isinstance(c, Tensor) and c.requires_grad
                                              for c in flat_cot))
        res = _autograd_grad(flat_out, level.fresh, flat_cot,
                             retain_graph=retain_graph or graph, create_graph=graph)
        return level.unwrap(tree_unflatten(list(res), spec), graph)

    results = level.unwrap(out, keep)
    if has_aux:
        return results, vjp_fn, level.unwrap(aux, keep, aux=True)
    return results, vjp_fn


# ----------------------------------------------------------------------------- jvp
_JVP = "jvp(f, primals, tangents)"


def _check_tensor_list(items: list, argname: str) -> None:
    if len(items) == 0:
        raise RuntimeError(f"{_JVP}: Expected {argname} to contain at least one Tensor.")
    for x in items:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"{_JVP}: Expected {argname} to only contain Tensors, got "
                               f"{type(x)}")


def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False) -> tuple[Any, Any] | tuple[Any, Any, Any]:
    """``(func(*primals), J @ tangents)`` (``torch.func.jvp``): ``primals`` is a tuple of
    arguments (nested containers allowed), ``tangents`` has its structure.

    Computed with the double-backward trick (jitgrad has no forward-mode AD): one forward
    and two backward passes, so ``func`` must be twice differentiable. ``strict``: an output
    that does not depend on the primals is an error instead of a zero tangent.

    >>> import jitgrad
    >>> from jitgrad.func import jvp
    >>> jvp(lambda x: x ** 2, (jitgrad.tensor([1.0, 2.0]),), (jitgrad.tensor([1.0, 1.0]),))
    (tensor([1., 4.]), tensor([2., 4.]))
    """
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{_JVP}: Expected primals to be a tuple. E.g. it should be valid "
                           "to call f(*primals).")
    flat_p, p_spec = tree_flatten(primals)
    flat_t, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(
            f"{_JVP}: Expected primals and tangents to have the same python structure. For "
            "example, if primals is a tuple of 3 tensors, tangents also must be. Got primals "
            f"with structure {p_spec} and tangents with structure {t_spec}")
    _check_tensor_list(flat_p, "primals")
    _check_tensor_list(flat_t, "tangents")
    for p, t in zip(flat_p, flat_t):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(
                "Trying to set a forward gradient that has a different size than that of the "
                f"original Tensor, this is not supported. Tensor is of size {list(p.shape)} "
                f"while the given forward gradient is of size {list(t.shape)}.")
    level = _Level(flat_p)
    with grad_mode.enable_grad():
        out = func(*tree_unflatten(level.fresh, p_spec))
        out, aux = _split_aux(out, has_aux, _JVP)
        flat_out, out_spec = tree_flatten(out)
        _assert_tensor_outputs(flat_out, _JVP)
        tangents_out = _double_backward(level, flat_out, flat_t)
    for t in tangents_out:
        if t is None and strict:
            raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is "
                               "independent of the inputs. This is not allowed with "
                               "strict=True.")
    tangents_out = [zeros_like(o) if t is None else t for o, t in zip(flat_out, tangents_out)]
    keep = level.needs_graph(flat_out)
    keep_t = level.outer and (keep or any(t.requires_grad for t in flat_t))
    primals_out = level.unwrap(tree_unflatten(flat_out, out_spec), keep)
    tangents_out = level.unwrap(tree_unflatten(tangents_out, out_spec), keep_t)
    if has_aux:
        return primals_out, tangents_out, level.unwrap(aux, keep, aux=True)
    return primals_out, tangents_out


def _double_backward(level: _Level, flat_out: list, flat_t: list) -> list:
    """``J t`` per output (None for an output that does not depend on the inputs): the
    gradient of ``u -> J^T u`` with respect to a dummy ``u``, at ``t``."""
    idx = [i for i, o in enumerate(flat_out) if o.requires_grad and o.is_floating_point()]
    res: list = [None] * len(flat_out)
    if not idx:
        return res
    dummies = [zeros_like(flat_out[i]).requires_grad_(True) for i in idx]
    gin = _engine_grad([flat_out[i] for i in idx], level.fresh, dummies, retain_graph=True,
                       create_graph=True, allow_unused=True)
    pairs = [(g, t.to(g.dtype) if t.dtype != g.dtype else t)
             for g, t in zip(gin, flat_t) if g is not None and g.requires_grad]
    if not pairs:
        return res
    gs, ts = zip(*pairs)
    graph = level.outer and (level.needs_graph(flat_out) or any(t.requires_grad for t in ts))
    jt = _engine_grad(gs, dummies, ts, retain_graph=graph, create_graph=graph,
                      allow_unused=True)
    for i, g in zip(idx, jt):
        res[i] = g if g is not None else zeros_like(flat_out[i])
    return res


# ----------------------------------------------------------------------- jacobians
def jacrev(func: Callable[..., Any], argnums: argnums_t = 0, *, has_aux: bool = False,
           chunk_size: int | None = None,
           _preallocate_and_copy: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``func`` with respect to argument(s) ``argnums``, in reverse mode
    (``torch.func.jacrev``): the vector-Jacobian product mapped over the identity's rows
    with :func:`vmap` -- one backward pass traced, replayed on every row at once (where
    ``vmap`` cannot batch it, one backward pass per output element).

    For an output of shape ``O`` and an argument of shape ``I`` the Jacobian has shape
    ``O + I``; several outputs or arguments (or nested containers) give the nested
    structure PyTorch's has (outputs outside, arguments inside). ``chunk_size``: rows per
    batched replay (``vmap``'s, bounding memory).

    >>> import jitgrad
    >>> from jitgrad.func import jacrev
    >>> jacrev(lambda x: x ** 2)(jitgrad.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args: Any) -> Any:
        return _jacobian(func, argnums, has_aux, args, "vjp(f, *primals)", forward=False,
                         chunk_size=chunk_size)
    return wrapper


def jacfwd(func: Callable[..., Any], argnums: argnums_t = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable[..., Any]:
    """The Jacobian of ``func`` with respect to argument(s) ``argnums``
    (``torch.func.jacfwd``): the same values, shapes and nesting as :func:`jacrev`.

    jitgrad has no forward-mode AD: this computes the Jacobian by rows in reverse mode too
    (one forward pass, and the backward pass batched over the output elements as in
    :func:`jacrev`) -- for functions with many more outputs than inputs that does more work
    than PyTorch's forward mode. ``randomness``:
    ``'error'`` (the default) raises vmap's error when ``func`` draws random numbers;
    ``'same'`` / ``'different'`` allow it (``func`` runs once, so every column sees the
    same draw).

    >>> import jitgrad
    >>> from jitgrad.func import jacfwd
    >>> jacfwd(lambda x: x.sin())(jitgrad.tensor([0.0]))
    tensor([[1.]])
    """
    @functools.wraps(func)
    def wrapper(*args: Any) -> Any:
        from ._vmap import _check_randomness_arg, _RandomnessGuard

        _check_randomness_arg(randomness)
        if randomness != "error":
            return _jacobian(func, argnums, has_aux, args, _JVP, forward=True)
        guard = _RandomnessGuard()
        res = _jacobian(func, argnums, has_aux, args, _JVP, forward=True)
        guard.check()
        return res
    return wrapper


def hessian(func: Callable[..., Any], argnums: argnums_t = 0) -> Callable[..., Any]:
    """The Hessian of scalar ``func`` with respect to argument(s) ``argnums``
    (``torch.func.hessian``): ``jacfwd(jacrev(func, argnums), argnums)``, so an argument of
    shape ``I`` gives ``I + I``.

    >>> import jitgrad
    >>> from jitgrad.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(jitgrad.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)


def _jacobian_rows(o: Tensor, inputs: list, keep: bool, chunk_size: int | None = None
                   ) -> list:
    """Per input, the rows of ``o``'s Jacobian stacked (``o.numel()`` first), or None when
    ``o`` has no element or does not require grad: the vector-Jacobian product mapped over
    the identity's rows with :func:`vmap` (as ``torch.func.jacrev``), so one traced backward
    pass runs on all seeds at once where ``vmap`` can batch it (else one pass per row)."""
    from ._vmap import vmap

    n = o.nelement()
    if not o.requires_grad or n == 0:
        return [None] * len(inputs)

    def row(seed: Tensor) -> tuple:
        return _autograd_grad((o,), inputs, (seed.view(o.shape),), retain_graph=True,
                              create_graph=keep)

    from ..creation import eye

    return list(vmap(row, chunk_size=chunk_size)(eye(n, dtype=o.dtype, device=o.device)))


def _jacobian(func, argnums, has_aux: bool, args: tuple, api: str, forward: bool,
              chunk_size: int | None = None):
    argnums = _normalize_argnums(argnums, len(args))
    diff = _slice_argnums(args, argnums)
    primals = (diff,) if isinstance(argnums, int) else diff
    flat_p, p_spec = tree_flatten(primals)
    level = _Level(flat_p)
    new = tree_unflatten(level.fresh, p_spec)
    args = _replace_args(args, new[0] if isinstance(argnums, int) else new, argnums)
    with grad_mode.enable_grad():
        out = func(*args)
        out, aux = _split_aux(out, has_aux, api)
        flat_out, out_spec = tree_flatten(out)
        _assert_tensor_outputs(flat_out, api)
        if not forward:
            for o in flat_out:
                if not o.is_floating_point():
                    raise RuntimeError("vjp(f, ...): All outputs of f must be floating-point "
                                       f"or complex Tensors, got Tensor with dtype {o.dtype}")
    keep = level.needs_graph(flat_out)
    per_output = []
    for o in flat_out:
        rows = _jacobian_rows(o, level.fresh, keep, chunk_size)
        jacs = []
        for r, p in zip(rows, level.fresh):
            shape = tuple(o.shape) + tuple(p.shape)
            if r is None:  # no element, or an output that does not depend on the arguments
                jacs.append(p.new_zeros(shape) if not forward else o.new_zeros(shape))
            else:
                jacs.append(r.reshape(shape))
        per_in = tree_unflatten(jacs, p_spec)
        per_output.append(per_in[0] if isinstance(argnums, int) else per_in)
    res = level.unwrap(tree_unflatten(per_output, out_spec), keep)
    if has_aux:
        return res, level.unwrap(aux, keep, aux=True)
    return res
