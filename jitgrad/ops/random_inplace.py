"""The in-place samplers PyTorch's tensors have beyond ``uniform_`` / ``normal_``:
``random_`` (integers from a range), ``exponential_``, ``log_normal_``, ``cauchy_`` and
``geometric_``, drawing from jitgrad's generator (or ``generator=``), with PyTorch's
argument checks and errors.

The draws are NumPy's (PCG64, NumPy's transforms), so they follow the same distributions as
PyTorch's but not its numbers. ``random_()`` with no range draws ``[0, 2 ** mantissa]`` for
floats (so every value is exact) and ``[0, max]`` for integer dtypes, as PyTorch.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from .. import dtypes

__all__ = ["sampler_methods"]



def _g(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _floating(self, what: str) -> None:
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"{what} distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified "
                           f"{self.dtype.tensor_type[:-len('Tensor')]}")


def _digits(dt) -> int:
    return {"float16": 11, "float32": 24, "float64": 53}[dt.name]


def _range(self, args: tuple, kwargs: dict) -> tuple[int, int]:
    """``random_``'s inclusive ``(low, high)`` from ``(to)``, ``(from, to)`` or keywords."""
    lo = kwargs.pop("from_", kwargs.pop("from", None))
    to = kwargs.pop("to", None)
    if kwargs:
        raise TypeError(f"random_() got unexpected keyword arguments {sorted(kwargs)}")
    if len(args) == 1 and lo is None and to is None:
        lo, to = 0, args[0]
    elif args:
        lo = args[0]
        if len(args) > 1:
            to = args[1]
    lo = 0 if lo is None else int(lo)
    dt = self.dtype
    name = dt.cpp_name
    if dt.is_floating_point:
        top = 2 ** _digits(dt)
        info_lo, info_hi = -top, top
    elif dt is dtypes.bool_:
        info_lo, info_hi = 0, 1
    else:
        info = np.iinfo(dt.np)
        info_lo, info_hi = int(info.min), int(info.max)
    if to is None:
        high = info_hi
    else:
        to = int(to)
        if lo >= to:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                               f"from={lo} >= to={to}")
        high = to - 1
    for v, which in ((lo, "from"), (high, "to - 1")):
        if info_lo <= v <= info_hi:
            continue
        if not dt.is_floating_point or dt is dtypes.float16 and abs(v) > 65504:
            raise RuntimeError(f"{which} is out of bounds for {name}")
        warnings.warn(f"{which} is out of bounds [-(2^{_digits(dt)}), 2^{_digits(dt)}]. Due to "
                      f"precision limitations {name} can support discrete uniform "
                      f"distribution only within this range. This warning will become an "
                      f"error in version 1.7 release, please fix the code in advance",
                      UserWarning, stacklevel=3)
    return lo, high


def sampler_methods(make: Callable) -> dict:
    """The sampler methods, each made by ``make(sampler)`` (``methods._random_inplace``:
    the draws, the write into the tensor, tracing) after its own checks."""
    integers = make(lambda r, s, lo, hi: r.integers(lo, hi, s, endpoint=True))
    exponential = make(lambda r, s, lambd: r.exponential(1.0 / lambd, s))
    log_normal = make(lambda r, s, mean, std: np.exp(r.normal(mean, std, s)))
    cauchy = make(lambda r, s, median, sigma: median + sigma * r.standard_cauchy(s))
    geometric = make(lambda r, s, p: r.geometric(p, s))

    def random_(self, *args, generator=None, **kwargs):
        """Integers drawn uniformly from ``[from, to)`` (``random_(to)``: from 0; no ``to``:
        up to the dtype's largest exact integer), in place."""
        lo, hi = _range(self, args, dict(kwargs))
        return integers(self, lo, hi, generator=generator)

    def exponential_(self, lambd: float = 1.0, *, generator=None):
        """Draws of the exponential distribution of rate ``lambd``, in place."""
        if not lambd > 0:
            raise RuntimeError(f"exponential_ expects lambda > 0.0, but found "
                               f"lambda={_g(lambd)}")
        _floating(self, "Exponential")
        return exponential(self, float(lambd), generator=generator)

    def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator=None):
        """Draws of ``exp(N(mean, std ** 2))``, in place."""
        if not std > 0:
            raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_g(std)}")
        if not self.dtype.is_floating_point:
            raise NotImplementedError(f"\"log_normal_cpu\" not implemented for "
                                      f"'{self.dtype.tensor_type[:-len('Tensor')]}'")
        return log_normal(self, float(mean), float(std), generator=generator)

    def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator=None):
        """Draws of the Cauchy distribution at ``median`` of scale ``sigma``, in place."""
        if not sigma > 0:
            raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_g(sigma)}")
        if not self.dtype.is_floating_point:
            raise RuntimeError(f"Cauchy distribution is a continuous probability "
                               f"distribution. dtype must be a floating point but you "
                               f"specified {self.dtype.cpp_name}")
        return cauchy(self, float(median), float(sigma), generator=generator)

    def geometric_(self, p: float, *, generator=None):
        """Draws of the number of Bernoulli(``p``) trials up to the first success (1, 2,
        ...), in place."""
        if not 0 < p < 1:
            raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_g(p)}")
        return geometric(self, float(p), generator=generator)

    return {"random_": random_, "exponential_": exponential_, "log_normal_": log_normal_,
            "cauchy_": cauchy_, "geometric_": geometric_}
