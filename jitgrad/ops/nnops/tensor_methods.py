"""Tensor methods added for ``jitgrad.nn``: what makes a tensor flagged as a parameter
(``Tensor._is_param``, see :class:`jitgrad.nn.Parameter`) print as ``Parameter containing:``
and stay a parameter through ``copy.deepcopy`` and pickling. (The optimizers' fused updates,
``addcdiv_``, ``lerp_``..., are declared with their ops in ``pointwise.py``.)"""

from __future__ import annotations

from ...tensor import Tensor

__all__: list[str] = []


_repr = Tensor.__repr__
_deepcopy = Tensor.__deepcopy__


def _param_repr(self) -> str:
    r = _repr(self)
    return "Parameter containing:\n" + r if self._is_param else r


def _param_deepcopy(self, memo):
    t = _deepcopy(self, memo)
    if self._is_param:
        t._is_param = True
    return t


_reduce_ex = Tensor.__reduce_ex__


def _param_reduce_ex(self, protocol):
    if not self._is_param:
        return _reduce_ex(self, protocol)
    return (_rebuild_param, (self._data.copy(), self._requires_grad))


def _rebuild_param(data, requires_grad):
    from ...tensor import wrap

    t = wrap(data)
    t._is_param = True
    t._requires_grad = requires_grad
    return t


def _install() -> None:
    Tensor.__repr__ = Tensor.__str__ = _param_repr
    Tensor.__deepcopy__ = _param_deepcopy
    Tensor.__reduce_ex__ = _param_reduce_ex


_install()
