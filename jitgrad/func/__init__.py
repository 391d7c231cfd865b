"""``torch.func`` (functorch's composable transforms) for jitgrad.

``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian`` are built on
the reverse-mode engine (``jvp`` and ``jacfwd`` too: jitgrad has no forward-mode AD, see
``_transforms``); ``vmap`` is a loop over the batch (no batching rules: correct for any
function, per-sample speed); ``functional_call`` / ``stack_module_state`` run modules with
given parameters; ``linearize``, ``functionalize`` and ``replace_all_batch_norm_modules_``
are in ``_misc_transforms``. They nest: ``vmap(grad(loss), in_dims=(None, 0, 0))(params, x,
y)`` gives per-sample gradients, ``jacrev(jacrev(f))`` a Hessian.

Loaded on first use (``jitgrad.func``, ``jitgrad.vmap``), not by ``import jitgrad``.

>>> import jitgrad
>>> from jitgrad.func import grad, vmap
>>> vmap(grad(lambda x: (x ** 2).sum()))(jitgrad.tensor([[1.0, 2.0], [3.0, 4.0]]))
tensor([[2., 4.],
        [6., 8.]])
"""

from ._functional_call import functional_call, stack_module_state
from ._misc_transforms import functionalize, linearize, replace_all_batch_norm_modules_
from ._transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from ._vmap import vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "functional_call", "stack_module_state", "linearize", "functionalize",
           "replace_all_batch_norm_modules_"]
