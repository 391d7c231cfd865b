"""The examples in jitgrad.distributions' docstrings run and print what they show; every
public class and function has a docstring."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest

import jitgrad
import jitgrad.distributions as jd

MODULES = sorted(m.name for m in pkgutil.iter_modules(jd.__path__, "jitgrad.distributions."))


@pytest.mark.parametrize("module", ["jitgrad.distributions", *MODULES])
def test_docstring_examples(module):
    jitgrad.manual_seed(0)
    mod = importlib.import_module(module)
    assert doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0


def test_public_api_is_documented():
    for name in jd.__all__:
        obj = getattr(jd, name)
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and callable(member):
                    assert inspect.getdoc(member), f"{name}.{attr}"
