"""API declarations: every op declares the functions that run it (``@api`` in
``jitgrad.ops.api``), the ``Tensor`` methods and ``jitgrad`` exports derived from them are the
ones installed, and no name is declared twice or both with an op and by hand."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import jitgrad
import jitgrad.ops
from jitgrad.ops import REGISTRY, methods
from jitgrad.ops.api import Api, api, declarations, export_table, method_table
from jitgrad.ops.numpy_names import numpy_names
from jitgrad.ops.registry import ELEMENTWISE, OpDef

#: public functions of op modules that run no op of their own (so declare none)
NOT_OPS = {
    "jitgrad.ops.inplace.apply_inplace",         # helpers of in-place methods
    "jitgrad.ops.inplace.check_inplace_allowed",
    "jitgrad.ops.inplace.write_out",             # the out= argument of ops
    "jitgrad.ops.arrangements.broadcast_shapes",  # shapes only (exported by hand)
}


def _op_modules() -> list:
    """The modules under jitgrad.ops that hold registered ops (their own, or re-exported: the
    functions checked are those defined in the module). ``complex_functions``' ops are not
    registered (complex-only; tests/test_complex.py covers them)."""
    out = []
    for info in pkgutil.walk_packages(jitgrad.ops.__path__, "jitgrad.ops."):
        mod = importlib.import_module(info.name)
        if any(isinstance(v, OpDef) and REGISTRY.get(v.name) is v for v in vars(mod).values()):
            out.append(mod)
    return out


def test_every_op_declares_the_functions_that_run_it():
    missing = sorted(n for n, op in REGISTRY.items() if not op.api)
    assert not missing, f"ops with no @api declaration: {missing}"
    for name, op in REGISTRY.items():
        for rec in op.api:
            assert isinstance(rec, Api) and op in rec.ops, name


def test_every_public_function_of_an_op_module_is_declared():
    """A function in an op module's ``__all__`` runs ops: it says which (and its names)."""
    declared = {id(r.fn) for r in declarations()}
    undeclared = []
    for mod in _op_modules():
        for n in getattr(mod, "__all__", ()):
            fn = getattr(mod, n)
            where = f"{mod.__name__}.{n}"
            if (isinstance(fn, types.FunctionType) and fn.__module__ == mod.__name__
                    and id(fn) not in declared and where not in NOT_OPS):
                undeclared.append(where)
    assert not undeclared


def test_functions_named_after_an_op_declare_it():
    """``tanh`` declares TANH, ``tanh_backward`` TANH_BACKWARD... (not only some other op)."""
    for rec in declarations():
        op = REGISTRY.get(rec.fn.__name__)
        if op is not None:
            assert op in rec.ops, rec.fn.__qualname__


def _all_names(rec: Api) -> list:
    return [*rec.methods, *rec.inplace]


def test_no_name_declared_twice():
    method_names = [n for rec in declarations() for n in _all_names(rec)]
    dup = sorted({n for n in method_names if method_names.count(n) > 1})
    assert not dup, f"Tensor names declared twice: {dup}"
    exports = [n for rec in declarations() for n in rec.exports]
    dup = sorted({n for n in exports if exports.count(n) > 1})
    assert not dup, f"jitgrad names declared twice: {dup}"


def test_declared_methods_do_not_clash_with_hand_written_ones():
    """(``import jitgrad`` checks the same for the exports.)"""
    assert not set(method_table()) & set(methods.METHODS)
    assert methods.all_methods().keys() == set(method_table()) | set(methods.METHODS)


def test_name_shapes():
    for rec in declarations():
        for n in rec.methods + rec.inplace + rec.exports:
            assert n.isidentifier(), n
        for n in rec.inplace:  # x.add_(y), x += y
            assert n.endswith("_") and (not n.startswith("__") or n.startswith("__i")), n
        for n in rec.exports:
            assert not n.startswith("_"), n
        if rec.methods or rec.inplace:  # the tensor is the first argument
            params = list(inspect.signature(rec.fn).parameters.values())
            assert params and params[0].kind in (params[0].POSITIONAL_ONLY,
                                                 params[0].POSITIONAL_OR_KEYWORD), rec.fn


def test_installed_methods_are_the_declared_ones():
    for rec in declarations():
        for n in rec.methods:
            # (the function itself, or its form taking NumPy's axis=/keepdims= too)
            assert jitgrad.Tensor.__dict__[n] is numpy_names(rec.fn), n
        for n in rec.inplace:
            m = jitgrad.Tensor.__dict__[n]
            assert m.__name__ == n and m.__doc__ == f"In-place :func:`{rec.fn.__name__}`."


def test_exports_are_the_declared_ones():
    for name, fn in export_table().items():
        assert getattr(jitgrad, name) is numpy_names(fn), name
        assert name in jitgrad.__all__, name


def test_elementwise_math_has_methods():
    """Element-wise ops with a public function also have a method (PyTorch has one for each),
    except the fused backward ops, which are jitgrad's own, the activations PyTorch has
    only as functions (gelu, elu) and the functions only ``torch.special`` has (i0e, ndtri...)."""
    def special_only(op):
        return all(not rec.exports and getattr(jitgrad.special, rec.fn.__name__, None) is rec.fn
                   for rec in op.api)

    for name, op in REGISTRY.items():
        if op.kind == ELEMENTWISE and not name.endswith("_backward") and not name.startswith(
                ("pow_", "rpow_", "gelu", "elu")) and not special_only(op):
            assert any(rec.methods for rec in op.api), name


def test_inplace_method_runs_in_place():
    x = jitgrad.tensor([0.5, -1.0])
    y = x.tanh_()
    assert y is x and x.tolist() == pytest.approx([0.46211715, -0.76159416])
    x += 1.0
    assert x.tolist() == pytest.approx([1.46211715, 0.23840584])


def test_a_name_declared_twice_is_an_error(monkeypatch):
    op = OpDef(name="_test_dup", kind=ELEMENTWISE, node=None, inputs=("a",), ref=abs)
    monkeypatch.setitem(REGISTRY, op.name, op)

    @api(op, method="tanh", export="tanh")
    def fake(input):
        return input

    with pytest.raises(ValueError, match="'tanh' is declared twice"):
        method_table()
    with pytest.raises(ValueError, match="'tanh' is declared twice"):
        export_table()


def test_api_needs_ops():
    with pytest.raises(TypeError):
        api("tanh")
