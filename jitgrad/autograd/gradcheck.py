"""Numerical gradient checks: ``gradcheck`` and ``gradgradcheck`` (central differences, float64).

>>> import jitgrad
>>> x = jitgrad.tensor([0.3, 1.2], dtype=jitgrad.float64, requires_grad=True)
>>> jitgrad.autograd.gradcheck(lambda t: (t.sin() * t).sum(), (x,))
True
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor, wrap
from .engine import grad as autograd_grad

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck when analytical and numerical gradients disagree."""


def _outputs(fn, inputs):
    out = fn(*inputs)
    return (out,) if isinstance(out, Tensor) else tuple(o for o in out if isinstance(o, Tensor))


def _numerical_jacobian(fn, inputs, out_index, eps):
    """Jacobian blocks d out[out_index] / d input[i] by central differences."""
    jac = []
    # evaluated with grad mode on: gradgradcheck's function calls autograd.grad
    for x in inputs:
        if not (isinstance(x, Tensor) and x._requires_grad):
            jac.append(None)
            continue
        flat = x._data.reshape(-1)  # a view: perturb in place
        if flat.size and not np.shares_memory(flat, x._data):  # (empty: nothing to perturb)
            raise GradcheckError("gradcheck needs contiguous inputs")
        out0 = _outputs(fn, inputs)[out_index]._data
        J = np.zeros((out0.size, flat.size))
        for k in range(flat.size):
            orig = flat[k]
            flat[k] = orig + eps
            plus = _outputs(fn, inputs)[out_index]._data.astype(np.float64).reshape(-1)
            flat[k] = orig - eps
            minus = _outputs(fn, inputs)[out_index]._data.astype(np.float64).reshape(-1)
            flat[k] = orig
            J[:, k] = (plus - minus) / (2 * eps)
        jac.append(J)
    return jac


def _analytical_jacobian(fn, inputs, out_index, create_graph=False):
    diff_inputs = [x for x in inputs if isinstance(x, Tensor) and x._requires_grad]
    out = _outputs(fn, inputs)[out_index]
    rows = []
    n = out._data.size
    for j in range(n):
        go = np.zeros(out._data.shape, dtype=out._data.dtype)
        go.reshape(-1)[j] = 1.0
        if not out._requires_grad:
            rows.append([np.zeros(x._data.size) for x in diff_inputs])
            continue
        gs = autograd_grad(out, diff_inputs, grad_outputs=wrap(go), retain_graph=True,
                           allow_unused=True)
        rows.append([np.zeros(x._data.size) if g is None else
                     g._data.astype(np.float64).reshape(-1) for g, x in zip(gs, diff_inputs)])
    jac = []
    k = 0
    for x in inputs:
        if not (isinstance(x, Tensor) and x._requires_grad):
            jac.append(None)
            continue
        jac.append(np.stack([r[k] for r in rows]) if rows else np.zeros((0, x._data.size)))
        k += 1
    return jac


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, **unused) -> bool:
    """Compare analytical gradients with central finite differences (use float64 inputs)."""
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x._requires_grad and x._data.dtype != np.float64:
            import warnings

            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision "
                "floating point. This check will likely fail if all the inputs are not of double "
                "precision floating point.", UserWarning, stacklevel=2)
    n_out = len(_outputs(func, inputs))
    for oi in range(n_out):
        num = _numerical_jacobian(func, inputs, oi, eps)
        ana = _analytical_jacobian(func, inputs, oi)
        for i, (a, b) in enumerate(zip(ana, num)):
            if a is None:
                continue
            if not np.allclose(a, b, rtol=rtol, atol=atol):
                err = np.max(np.abs(a - b))
                msg = (f"Jacobian mismatch for output {oi} with respect to input {i},\n"
                       f"numerical:{b}\nanalytical:{a}\nmax abs difference {err:.3e}")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, raise_exception: bool = True, **unused) -> bool:
    """Check second derivatives: gradcheck of the first-order VJP built with create_graph."""
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            wrap(rng.standard_normal(o._data.shape).astype(o._data.dtype), requires_grad=True)
            for o in outs)
    else:
        grad_outputs = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(
            grad_outputs)
    n_in = len(inputs)

    def vjp(*args):
        xs, gos = args[:n_in], args[n_in:]
        diff = [x for x in xs if isinstance(x, Tensor) and x._requires_grad]
        os_ = _outputs(func, xs)
        used = [(o, g) for o, g in zip(os_, gos) if o._requires_grad]
        gs = autograd_grad([o for o, _ in used], diff, grad_outputs=[g for _, g in used],
                           create_graph=True, allow_unused=True, materialize_grads=True)
        return tuple(gs)

    return gradcheck(vjp, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
