"""``torch.autograd.functional``: Jacobian and Hessian products of a function at a point.

Each function calls ``func`` on fresh copies of ``inputs`` (new tensors that require
gradient, so the inputs need not require grad beforehand, and tensors ``func`` captures are
told apart from the inputs) and differentiates with :func:`jitgrad.autograd.grad`.
Everything is reverse mode: forward-mode products (``jvp``, ``hvp``) use the double-backward
trick, as PyTorch's do. Results are detached unless ``create_graph=True``; with it they are
differentiable with respect to ``inputs`` (a second derivative through a Jacobian or
Hessian). Argument nesting, ``strict`` checks and error messages are PyTorch's.

>>> import jitgrad
>>> from jitgrad.autograd.functional import jacobian
>>> jacobian(lambda x: x ** 2, jitgrad.tensor([1.0, 2.0]))
tensor([[2., 0.],
        [0., 4.]])
"""

from __future__ import annotations

from collections.abc import Callable

from ..creation import zeros_like
from ..tensor import Tensor
from . import grad_mode
from .engine import grad as _grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]

Tensors = Tensor | tuple[Tensor, ...]


# ------------------------------------------------------------------------------ helpers
def _as_tuple(inp, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    """``(was a tuple, inp as a tuple of Tensors)``; PyTorch's TypeError otherwise."""
    is_tuple = isinstance(inp, tuple)
    items = inp if is_tuple else (inp,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = f"value at index {i}" if is_tuple else f"given {arg_name}"
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                f"Tensors but the {where} has type {type(el)}."
            )
    return is_tuple, items


def _tuple_postprocess(res, to_unpack):
    """Undo :func:`_as_tuple` on a result: ``to_unpack`` is one flag, or two for a
    result nested twice (outputs, then inputs)."""
    if isinstance(to_unpack, tuple):
        outer, inner = to_unpack
        if not inner:
            res = tuple(el[0] for el in res)
        if not outer:
            res = res[0]
        return res
    return res if to_unpack else res[0]


def _grad_preprocess(inputs: tuple, create_graph: bool, need_graph: bool) -> tuple:
    """A new tensor per input: differentiably connected to it when ``create_graph`` and
    it requires grad (``view_as``), else detached (requiring grad when ``need_graph``)."""
    return tuple(inp.view_as(inp) if create_graph and inp.requires_grad
                 else inp.detach().requires_grad_(need_graph) for inp in inputs)


def _grad_postprocess(res: tuple, create_graph: bool) -> tuple:
    """``res`` (tensors, or tuples of them) detached unless ``create_graph``."""
    if create_graph:
        return res
    if res and isinstance(res[0], Tensor):
        return tuple(r.detach() for r in res)
    return tuple(_grad_postprocess(r, create_graph) for r in res)


def _validate_v(v: tuple, other: tuple, is_other_tuple: bool) -> None:
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.size() != el_other.size():
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {el_other.size()} "
                               f"but got {el_v.size()}.")


_NOT_REQUIRING = {
    "outputs": ("Output {i} of the user-provided function does not require gradients. The "
                "outputs must be computed in a differentiable manner from the input when "
                "running in strict mode."),
    "grad_inputs": ("The gradient with respect to input {i} is independent of the inputs of "
                    "the user-provided function. This is not allowed in strict mode."),
    "jacobian": ("While computing the hessian, found that the jacobian of the user-provided "
                 "function with respect to input {i} is independent of the input. This is not "
                 "allowed in strict mode. You should ensure that your function is twice "
                 "differentiable and that the jacobian depends on the inputs (this would be "
                 "violated by a linear function for example)."),
    "hessian": ("The hessian of the user-provided function with respect to input {i} is "
                "independent of the input. This is not allowed in strict mode. You should "
                "ensure that your function is thrice differentiable and that the hessian "
                "depends on the inputs."),
}


def _check_requires_grad(tensors: tuple, input_type: str, strict: bool) -> None:
    """In strict mode, PyTorch's error for the first entry that is None or does not
    require grad."""
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:  # only gradients can be None
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if not t.requires_grad:
            raise RuntimeError(_NOT_REQUIRING[input_type].format(i=i))


def _autograd_grad(outputs: tuple, inputs: tuple, grad_outputs: tuple | None = None,
                   create_graph: bool = False, retain_graph: bool | None = None) -> tuple:
    """``autograd.grad`` over the outputs that require grad (None for an input no output
    depends on; all None when no output requires grad)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    outs, gouts = zip(*pairs)
    return _grad(outs, inputs, gouts, retain_graph=retain_graph, create_graph=create_graph,
                 allow_unused=True)


_ZERO_STRICT = {
    "back": ("The output of the user-provided function is independent of input {i}. This is "
             "not allowed in strict mode."),
    "back_trick": ("The gradient with respect to the input is independent of entry {i} in the "
                   "grad_outputs when using the double backward trick to compute forward mode "
                   "gradients. This is not allowed in strict mode."),
    "double_back": ("The jacobian of the user-provided function is independent of input {i}. "
                    "This is not allowed in strict mode."),
    "double_back_trick": ("The hessian of the user-provided function is independent of entry "
                          "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                          "prevents from using the double backward trick to replace forward "
                          "mode AD."),
}


def _fill_in_zeros(grads: tuple, refs: tuple, strict: bool, create_graph: bool,
                   stage: str) -> tuple:
    """Zeros shaped as ``refs[i]`` for each None gradient (PyTorch's errors instead in strict
    mode, and for a gradient that does not require grad under ``create_graph``)."""
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_ZERO_STRICT[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               "create_graph=True.")
        res.append(g)
    return tuple(res)


def _call(func: Callable, inputs: tuple, fn_name: str, strict: bool) -> tuple[bool, tuple]:
    outputs = func(*inputs)
    is_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    return is_tuple, outputs


def _prepare_v(v, ref: tuple, is_ref_tuple: bool, fn_name: str, create_graph: bool,
               none_message: str) -> tuple | None:
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, ref, is_ref_tuple)
        return v
    if len(ref) != 1 or ref[0].nelement() != 1:
        raise RuntimeError(none_message)
    return None


_V_NONE_INPUT = ("The vector v can only be None if the input to the user-provided function "
                 "is a single Tensor with a single element.")


def _scalar_output(outputs: tuple, is_tuple: bool, fn_name: str) -> None:
    if is_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].nelement() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should "
                           "contain a single element")


# ------------------------------------------------------------------------------- public
def vjp(func: Callable[..., Tensors], inputs: Tensors, v: Tensors | None = None,
        create_graph: bool = False, strict: bool = False) -> tuple[Tensors, Tensors]:
    """``(func(*inputs), v^T J)``: the vector-Jacobian product of ``func`` at ``inputs``.

    ``v`` has the shape of ``func``'s output(s); it may be omitted when ``func`` returns one
    one-element tensor. The product has the nesting and shapes of ``inputs`` (zeros for an
    input the outputs do not depend on, or an error when ``strict``). With
    ``create_graph=True`` both results are differentiable.

    >>> import jitgrad
    >>> from jitgrad.autograd.functional import vjp
    >>> out, g = vjp(lambda x: x ** 2, jitgrad.tensor([1.0, 3.0]), jitgrad.tensor([1.0, 1.0]))
    >>> g
    tensor([2., 6.])
    """
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        is_outputs_tuple, outputs = _call(func, inputs, "vjp", strict)
        v = _prepare_v(v, outputs, is_outputs_tuple, "vjp", create_graph,
                       "The vector v can only be None if the user-provided function returns "
                       "a single Tensor with a single element.")
    with grad_mode.set_grad_enabled(True if create_graph else grad_mode.is_grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_inputs_tuple))


def jvp(func: Callable[..., Tensors], inputs: Tensors, v: Tensors | None = None,
        create_graph: bool = False, strict: bool = False) -> tuple[Tensors, Tensors]:
    """``(func(*inputs), J v)``: the Jacobian-vector product of ``func`` at ``inputs``.

    ``v`` has the shape of ``inputs``; it may be omitted when the input is one one-element
    tensor. Computed with the double-backward trick (a backward pass with a dummy gradient
    that requires grad, differentiated again with respect to that gradient), as PyTorch's
    ``autograd.functional.jvp``; it needs ``func``'s ops to be twice differentiable.

    >>> import jitgrad
    >>> from jitgrad.autograd.functional import jvp
    >>> out, t = jvp(lambda x: x ** 2, jitgrad.tensor([1.0, 3.0]), jitgrad.tensor([1.0, 0.0]))
    >>> t
    tensor([2., 0.])
    """
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _prepare_v(v, inputs, is_inputs_tuple, "jvp", create_graph, _V_NONE_INPUT)
        is_outputs_tuple, outputs = _call(func, inputs, "jvp", strict)
        # the backward is linear in its gradient: any finite value will do
        grad_outputs = tuple(zeros_like(out).requires_grad_(True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    with grad_mode.set_grad_enabled(True if create_graph else grad_mode.is_grad_enabled()):
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_outputs_tuple))


def jacobian(func: Callable[..., Tensors], inputs: Tensors, create_graph: bool = False,
             strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode") -> Tensors | tuple[tuple[Tensor, ...], ...]:
    """The Jacobian of ``func`` at ``inputs``.

    One input and one output: a tensor of shape ``output.shape + input.shape``. With a
    tuple of either, a tuple; with tuples of both, ``J[i][j]`` is the Jacobian of output
    ``i`` with respect to input ``j``. Rows are computed one backward pass each (reverse
    mode). ``vectorize=True`` runs the same loop (jitgrad has no batched gradients), and
    ``strategy="forward-mode"`` (which PyTorch allows only with ``vectorize=True``) gives
    the same values, also computed in reverse mode, nested as PyTorch's forward mode nests
    them (lists where there are several inputs).

    >>> import jitgrad
    >>> from jitgrad.autograd.functional import jacobian
    >>> jacobian(lambda x, y: x * y, (jitgrad.tensor([2.0]), jitgrad.tensor([3.0])))
    (tensor([[3.]]), tensor([[2.]]))
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "jitgrad.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `create_graph=False` or `strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError(
                "jitgrad.autograd.functional.jacobian: `strict=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `strict=False` or `strategy="reverse-mode"`.')
        is_inputs_tuple, _ = _as_tuple(inputs, "inputs", "jacobian")
        if not vectorize:
            raise NotImplementedError(
                "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                "only implemented for `vectorize=True`.")
        # no forward-mode AD in jitgrad: the same Jacobian, by rows, nested as PyTorch's
        # forward mode nests it (lists where there are several inputs)
        res = jacobian(func, inputs)
        if is_inputs_tuple:
            return [list(r) for r in res] if isinstance(res[0], tuple) else list(res)
        return res

    with grad_mode.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        is_outputs_tuple, outputs = _call(func, inputs, "jacobian", strict)
        if vectorize and strict:
            raise RuntimeError(
                "jitgrad.autograd.functional.jacobian: `strict=True` and `vectorized=True` are "
                "not supported together. Please either set `strict=False` or "
                "`vectorize=False`.")
        jac = []
        for i, out in enumerate(outputs):
            rows: tuple[list, ...] = tuple([] for _ in inputs)
            flat = out.reshape(-1)
            for k in range(out.nelement()):
                vj = _autograd_grad((flat[k],), inputs, retain_graph=True,
                                    create_graph=create_graph)
                for j, (row, g, inp) in enumerate(zip(rows, vj, inputs)):
                    if g is not None:
                        if strict and create_graph and not g.requires_grad:
                            # (PyTorch's message names the output's index here)
                            raise RuntimeError(
                                "The jacobian of the user-provided function is independent "
                                f"of input {i}. This is not allowed in strict mode when "
                                "create_graph=True.")
                        row.append(g)
                    else:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is independent of "
                                f"input {j}. This is not allowed in strict mode.")
                        row.append(zeros_like(inp))
            jac.append(tuple(_stack_rows(row, out, inp) for row, inp in zip(rows, inputs)))
        jac = _grad_postprocess(tuple(jac), create_graph)
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def _stack_rows(rows: list, out: Tensor, inp: Tensor) -> Tensor:
    from ..ops.concat import stack

    shape = tuple(out.shape) + tuple(inp.shape)
    if not rows:  # an output with no elements
        return inp.new_zeros(shape)
    return stack(rows, 0).view(shape)


def hessian(func: Callable[..., Tensor], inputs: Tensors, create_graph: bool = False,
            strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode") -> Tensor | tuple[tuple, ...]:
    """The Hessian of scalar ``func`` at ``inputs``: the Jacobian of its gradient.

    One input: a tensor of shape ``input.shape + input.shape``; a tuple of inputs: ``H[i][j]``
    of shape ``inputs[i].shape + inputs[j].shape``. ``vectorize`` and
    ``outer_jacobian_strategy`` as in :func:`jacobian` (same values).

    >>> import jitgrad
    >>> from jitgrad.autograd.functional import hessian
    >>> hessian(lambda x: (x ** 3).sum(), jitgrad.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.nelement() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _first_derivative(func, inputs, v, name: str, create_graph: bool, strict: bool):
    """What vhp and hvp share: the inputs and ``v`` checked and prepared, the scalar output
    of ``func`` and its gradient (with a graph, to differentiate again)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    v = _prepare_v(v, inputs, is_inputs_tuple, name, create_graph, _V_NONE_INPUT)
    is_outputs_tuple, outputs = _call(func, inputs, name, strict)
    _scalar_output(outputs, is_outputs_tuple, name)
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac


def _value_and_product(outputs, is_outputs_tuple: bool, res, is_inputs_tuple: bool,
                       create_graph: bool) -> tuple:
    """``(func's value, the product)`` nested as the caller gave them."""
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_inputs_tuple))


def vhp(func: Callable[..., Tensor], inputs: Tensors, v: Tensors | None = None,
        create_graph: bool = False, strict: bool = False) -> tuple[Tensor, Tensors]:
    """``(func(*inputs), v^T H)``: vector-Hessian product of scalar ``func`` at ``inputs``
    (``v`` shaped as ``inputs``; optional for one one-element input). Two backward passes.

    >>> import jitgrad
    >>> from jitgrad.autograd.functional import vhp
    >>> vhp(lambda x: (x ** 3).sum(), jitgrad.tensor([1.0, 2.0]), jitgrad.tensor([1.0, 1.0]))[1]
    tensor([ 6., 12.])
    """
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _first_derivative(
            func, inputs, v, "vhp", create_graph, strict)
    with grad_mode.set_grad_enabled(True if create_graph else grad_mode.is_grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    return _value_and_product(outputs, is_outputs_tuple, res, is_inputs_tuple, create_graph)


def hvp(func: Callable[..., Tensor], inputs: Tensors, v: Tensors | None = None,
        create_graph: bool = False, strict: bool = False) -> tuple[Tensor, Tensors]:
    """``(func(*inputs), H v)``: Hessian-vector product of scalar ``func`` at ``inputs``,
    by the double-backward trick (three backward passes; for a twice continuously
    differentiable ``func``, :func:`vhp` gives the same values with two).

    >>> import jitgrad
    >>> from jitgrad.autograd.functional import hvp
    >>> hvp(lambda x: (x ** 3).sum(), jitgrad.tensor([1.0, 2.0]), jitgrad.tensor([1.0, 1.0]))[1]
    tensor([ 6., 12.])
    """
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _first_derivative(
            func, inputs, v, "hvp", create_graph, strict)
        grad_jac = tuple(zeros_like(inp).requires_grad_(True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict)
    with grad_mode.set_grad_enabled(True if create_graph else grad_mode.is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
    return _value_and_product(outputs, is_outputs_tuple, res, is_inputs_tuple, create_graph)
