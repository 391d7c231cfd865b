"""jitgrad: PyTorch-style autograd for NumPy arrays, made fast by compiling to Numba.

Code written for PyTorch's autograd subset runs with ``import jitgrad as torch``.

>>> import jitgrad as torch
>>> x = torch.tensor(5.0, requires_grad=True)
>>> z = torch.log(x ** 3)
>>> z.backward()
>>> x.grad
tensor(0.6000)
"""

from __future__ import annotations

import builtins as _builtins
import sys

from . import (  # ops first: attaches Tensor methods
    accelerator,
    amp,
    autograd,
    backends,
    cpu,
    cuda,
    distributed,
    linalg,
    nn,  # noqa: E402,I001 - needs the ops above
    ops,
    optim,
    special,
    utils,
)
from ._tensor_str import get_printoptions, set_printoptions
from .amp.autocast_mode import (
    autocast,
    autocast_decrement_nesting,
    autocast_increment_nesting,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .amp.grad_scaler import GradScaler

# no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled and
# is_inference_mode_enabled: grad_mode's __all__ is the one list of them
from .autograd.grad_mode import *  # noqa: F403
from .backends import get_float32_matmul_precision, set_float32_matmul_precision
from .constants import e, inf, nan, newaxis, pi
from .creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    linspace,
    logspace,
    multinomial,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    scalar_tensor,
    tensor,
    zeros,
    zeros_like,
)
from .creation_extra import frombuffer, range, to_dlpack  # noqa: A004 - PyTorch's name
from .cuda import OutOfMemoryError
from .denormals import set_flush_denormal
from .determinism import (
    are_deterministic_algorithms_enabled,
    get_deterministic_debug_mode,
    is_deterministic_algorithms_warn_only_enabled,
    set_deterministic_debug_mode,
    use_deterministic_algorithms,
)
from .devices import device, get_default_device, set_default_device
from .dtypes import (
    DType as dtype,
)
from .dtypes import (
    bfloat16,
    complex32,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    result_type,
    set_default_dtype,
    uint8,
)
from .dtypes import bool_ as bool  # noqa: A001 - PyTorch's name
from .jit import compile, explain, grad, value_and_grad
from .kernels.blas_core import choose_blas_core as _choose_blas_core
from .lowrank import pca_lowrank, svd_lowrank
from .memory_format import (
    channels_last,
    channels_last_3d,
    contiguous_format,
    legacy_contiguous_format,
    memory_format,
    preserve_format,
)
from .ops import complex_functions as _complex_functions
from .ops import legacy_linalg as _legacy_linalg
from .ops import nn_namespace as _nn_namespace
from .ops import spectral as _spectral
from .ops import torch_namespace as _torch_namespace
from .ops import view_copies as _view_copies
from .ops.api import export_table as _export_table
from .ops.arrangements import broadcast_shapes  # shapes only, no op: exported by hand
from .ops.as_strided import as_strided

# PyTorch's top-level names written with existing ops (not ops of their own): each module's
# __all__ is the one list of them -- cholesky, triangular_solve, nuclear_norm...; conv2d,
# dropout, layer_norm, embedding...; asarray, mode, exp_, strided, gradient...; t_copy...
from .ops.complex_functions import *  # noqa: F403
from .ops.legacy_linalg import *  # noqa: F403
from .ops.nn_namespace import *  # noqa: F403
from .ops.numpy_names import accept_numpy_names as _accept_numpy_names
from .ops.spectral import *  # noqa: F403
from .ops.tensor_extras import detach, is_nonzero, is_same_size, is_signed, nonzero
from .ops.torch_namespace import *  # noqa: F403
from .ops.view_copies import *  # noqa: F403
from .random import Generator, default_generator, initial_seed, manual_seed, seed
from .rng_state import get_rng_state, set_rng_state
from .storage import is_storage
from .symbolic import sym_float, sym_int, sym_ite, sym_max, sym_min, sym_not, sym_sqrt, sym_sum
from .tensor import Size, Tensor
from .tensor_types import (
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
    set_default_tensor_type,
)
from .threads import (
    get_num_interop_threads,
    get_num_threads,
    set_num_interop_threads,
    set_num_threads,
)
from .type_info import can_cast, finfo, iinfo, promote_types

# NumPy's OpenBLAS kernel set for this CPU, before jitgrad runs any product (eager and
# compiled then run the same kernels): kernels/blas_core.py
_choose_blas_core()

float = float32  # noqa: A001 - PyTorch's aliases
double = float64
half = float16
cfloat = complex64
cdouble = complex128
chalf = complex32
int = int32  # noqa: A001
long = int64
short = int16

__version__ = "0.1.0"


def is_tensor(obj) -> _builtins.bool:
    """Whether ``obj`` is a jitgrad Tensor."""
    return isinstance(obj, Tensor)


def is_inference(input: Tensor) -> _builtins.bool:
    """Whether ``input`` is an inference tensor (``Tensor.is_inference``): always False in
    jitgrad, whose ``inference_mode`` makes ordinary tensors."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_inference(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return input.is_inference()


def get_device_module(device: device | str | None = None):
    """The module of a device type: ``jitgrad.cuda`` for ``"cuda"`` / ``device("cuda:0")``,
    ``jitgrad.cpu`` for the CPU; None: the current accelerator's (CUDA when available), else
    the CPU's."""
    if isinstance(device, globals()["device"]):
        name = device.type
    elif isinstance(device, str):
        name = globals()["device"](device).type
    elif device is None:
        acc = accelerator.current_accelerator()
        name = "cpu" if acc is None else acc.type
    else:
        raise RuntimeError(f"Invalid value of device '{device}', expect torch.device, str, or "
                           f"None")
    module = globals().get(name)
    if not isinstance(module, type(sys)):
        raise RuntimeError(f"Device '{name}' does not have a corresponding module registered "
                           f"as 'torch.{name}'.")
    return module


def is_floating_point(input: Tensor) -> _builtins.bool:
    """Whether ``input`` has a floating dtype."""
    return input.is_floating_point()


def numel(input: Tensor) -> _builtins.int:
    """Number of elements."""
    return input.numel()


def allclose(input: Tensor, other: Tensor, rtol: _builtins.float = 1e-5,
             atol: _builtins.float = 1e-8, equal_nan: _builtins.bool = False) -> _builtins.bool:
    """Whether all elements are close (as ``numpy.allclose``)."""
    return input.allclose(other, rtol=rtol, atol=atol, equal_nan=equal_nan)


def equal(input: Tensor, other: Tensor) -> _builtins.bool:
    """Same shape and elements."""
    return input.equal(other)


def isnan(input: Tensor) -> Tensor:
    """Element-wise NaN test (bool)."""
    return input.isnan()


def isinf(input: Tensor) -> Tensor:
    """Element-wise infinity test (bool)."""
    return input.isinf()


def isfinite(input: Tensor) -> Tensor:
    """Element-wise finiteness test (bool)."""
    return input.isfinite()


# every op's public function, under the names declared with it (``@api(..., export=...)``,
# see jitgrad.ops.api): tanh, add, cat, matmul, softmax...
_OP_EXPORTS = _export_table()
_clash = sorted(set(_OP_EXPORTS) & set(globals()))
if _clash:
    raise ImportError(f"jitgrad names declared as op exports and by hand: {_clash}")
globals().update(_OP_EXPORTS)
# jitgrad.sum(x, axis=1, keepdims=True): NumPy's names, as PyTorch's parser takes them
_accept_numpy_names(globals())


class _TracePackage(type(sys)):
    """``jitgrad.trace`` is both the tracer's package and PyTorch's ``torch.trace(matrix)``:
    the package module is callable."""

    def __call__(self, input):
        """The sum of a matrix's main diagonal (``Tensor.trace``)."""
        from .ops.triangular import trace as matrix_trace

        return matrix_trace(input)


sys.modules[__name__ + ".trace"].__class__ = _TracePackage

#: subpackages imported on first use, not by ``import jitgrad``
_LAZY_SUBMODULES = frozenset({"distributions", "func", "serialization", "testing", "_dynamo",
                               "version", "multiprocessing", "profiler", "fft",
                               "_inductor", "signal"})


def __getattr__(name: str):
    """``jitgrad.distributions``, ``jitgrad.func``, ``jitgrad.version``,
    ``jitgrad.multiprocessing``, ``jitgrad.profiler``, ``jitgrad.fft``, ``jitgrad.signal``
    (the lazily loaded subpackages), ``jitgrad.empty_permuted`` / ``cond`` (from
    ``jitgrad._extra_names``),
    ``jitgrad.vmap`` (``torch.vmap``, from ``jitgrad.func``), ``jitgrad.save`` / ``load``
    (from ``jitgrad.serialization``) and the ``jitgrad._foreach_*`` functions (from
    ``jitgrad.ops.foreach``), imported on first use."""
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name == "vmap":
        from .func import vmap

        return vmap
    if name in ("empty_permuted", "cond"):  # jitgrad._extra_names: loaded on first use
        from . import _extra_names

        return getattr(_extra_names, name)
    if name in ("save", "load"):  # jitgrad.serialization: loaded on first use
        from . import serialization

        return getattr(serialization, name)
    if name.startswith("_foreach_"):  # torch._foreach_*: jitgrad.ops.foreach, on first use
        from .ops import foreach

        if name in foreach.__all__:
            globals().update({n: getattr(foreach, n) for n in foreach.__all__})
            return getattr(foreach, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "Tensor", "Size", "dtype", "device", "get_default_device", "set_default_device",
    "memory_format", "contiguous_format", "channels_last", "channels_last_3d",
    "preserve_format", "legacy_contiguous_format",
    "accelerator", "amp", "backends", "cpu", "cuda", "autograd", "autocast",
    "is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype",
    "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
    "autocast_increment_nesting", "autocast_decrement_nesting", "get_autocast_gpu_dtype",
    "get_autocast_cpu_dtype", "is_autocast_cpu_enabled", "set_autocast_cpu_enabled",
    "distributed", "linalg", "nn", "ops", "optim", "special",
    "get_float32_matmul_precision", "set_float32_matmul_precision", "bfloat16",
    "utils", "Generator", "default_generator",
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
    "float", "double", "half", "int", "long", "short", "complex64", "complex128", "cfloat",
    "cdouble", "complex32", "chalf",
    "get_default_dtype", "set_default_dtype", "result_type", "set_printoptions",
    "get_printoptions", *autograd.grad_mode.__all__, "manual_seed", "seed", "initial_seed",
    "tensor", "as_tensor", "from_numpy", "from_dlpack", "scalar_tensor", "zeros", "ones", "full",
    "empty",
    "eye", "arange", "linspace", "logspace", "rand", "randn", "randint", "randperm", "normal",
    "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
    "randint_like", "multinomial",
    "is_tensor", "is_floating_point", "numel", "allclose", "equal", "isnan", "isinf",
    "isfinite", "broadcast_shapes", "__version__", "compile", "explain", "grad", "value_and_grad",
    "set_num_threads", "get_num_threads", "FloatTensor", "DoubleTensor", "HalfTensor",
    "LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
    "finfo", "iinfo", "promote_types", "can_cast", "get_rng_state", "set_rng_state",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
    "get_deterministic_debug_mode", "nonzero", "detach", "as_strided", "is_nonzero", "is_same_size",
    "is_signed", "pi", "e", "inf", "nan", "newaxis", "is_inference", "GradScaler",
    "OutOfMemoryError", "range", "set_default_tensor_type", "frombuffer", "to_dlpack",
    "set_flush_denormal", "get_num_interop_threads", "set_num_interop_threads", "is_storage",
    "get_device_module", "sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_ite",
    "sym_sqrt", "sym_sum", "svd_lowrank", "pca_lowrank",
    "empty_permuted", "cond",  # noqa: F405 - loaded on first use (module __getattr__)
    *_complex_functions.__all__, *_spectral.__all__, *_legacy_linalg.__all__,
    *_nn_namespace.__all__,
    *_torch_namespace.__all__,
    *_view_copies.__all__,
    *_OP_EXPORTS,
]
