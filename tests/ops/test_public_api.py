"""The public names: everything ``jitgrad.X``, ``tensor.X`` and the op modules gave before the
method table and the exports were derived from the registry (names saved as data, taken from
``dir()`` at that point) must still be there, bound the same way.

When a name is added on purpose, nothing here needs to change; when one is removed on
purpose, remove it from the snapshot in the same commit."""

from __future__ import annotations

import types

import pytest

import jitgrad

# ---------------------------------------------------------------------------- snapshot
JITGRAD_NAMES = """
Generator Size Tensor __all__ __builtins__ __cached__ __doc__ __file__ __loader__ __name__
__package__ __path__ __spec__ __version__ _builtins _tensor_str abs absolute add addcdiv
addcmul addmm allclose amax amin annotations arange argmax argmin as_tensor autograd bmm
bool cat chunk clamp clip clone compile compiler concatenate config cos creation
default_generator div divide dot double dtype dtypes empty empty_like enable_grad eq equal
erf exp expand explain expm1 eye flatten float float16 float32 float64 from_numpy full full_like
ge get_default_dtype get_num_threads get_printoptions grad gt half inference_mode
initial_seed int int16 int32 int64 int8 is_floating_point is_grad_enabled
is_inference_mode_enabled is_tensor isfinite isinf isnan jit kernels le lerp linspace log
log1p log_softmax logical_and logical_not logical_or logical_xor logspace logsumexp long lt
manual_seed masked_fill matmul max maximum mean min minimum mm movedim mul multiply mv
narrow ne neg negative nn no_grad normal numel ones ones_like ops optim outer permute pow
prod rand rand_like randint randint_like randn randn_like random randperm reciprocal relu
reshape result_type rsqrt rsub scalar_tensor seed select set_default_dtype set_grad_enabled
set_num_threads set_printoptions shapes short sigmoid sign sin softmax split sqrt square
squeeze stack std sub subtract sum swapaxes t tanh tensor threads trace transpose
true_divide uint8 unbind unflatten unsqueeze utils value_and_grad var where zeros zeros_like
""".split()

TENSOR_NAMES = """
T __abs__ __add__ __and__ __array__ __array_priority__ __bool__ __class__ __deepcopy__
__delattr__ __dict__ __dir__ __doc__ __eq__ __float__ __floordiv__ __format__ __ge__
__getattribute__ __getitem__ __getstate__ __gt__ __hash__ __iadd__ __imul__ __index__
__init__ __init_subclass__ __int__ __invert__ __ipow__ __isub__ __iter__ __itruediv__ __le__
__len__ __lt__ __matmul__ __mod__ __module__ __mul__ __ne__ __neg__ __new__ __or__ __pos__
__pow__ __radd__ __rand__ __reduce__ __reduce_ex__ __repr__ __rfloordiv__ __rmatmul__
__rmod__ __rmul__ __ror__ __rpow__ __rsub__ __rtruediv__ __rxor__ __setattr__ __setitem__
__sizeof__ __slots__ __str__ __sub__ __subclasshook__ __truediv__ __weakref__ __xor__
_accumulator _base _data _grad _grad_fn _hooks _is_param _output_nr _post_acc_hooks
_requires_grad _retains_grad _vc _version abs abs_ add add_ addcdiv addcdiv_ addcmul
addcmul_ all allclose amax amin any argmax argmin backward bmm bool chunk clamp clamp_ clip
clip_ clone contiguous copy_ cos cos_ cpu data data_ptr detach detach_ device dim div div_
divide dot double dtype element_size eq equal erf erf_ exp exp_ expand expand_as expm1 fill_ flatten
float ge grad grad_fn gt half int is_contiguous is_cuda is_floating_point is_leaf isfinite
isinf isnan item itemsize le lerp lerp_ log log1p log_ log_softmax logical_and logical_not
logical_or logical_xor logsumexp long lt mT masked_fill masked_fill_ matmul max maximum mean
min minimum mm movedim mul mul_ multiply mv narrow ndim ndimension ne neg neg_ negative
nelement new_empty new_full new_ones new_tensor new_zeros nonzero normal_ numel numpy outer
permute pow pow_ prod reciprocal reciprocal_ register_hook
register_post_accumulate_grad_hook relu relu_ requires_grad requires_grad_ reshape
reshape_as retain_grad retains_grad rsqrt select shape sigmoid sigmoid_ sign sin sin_ size
softmax split sqrt sqrt_ square square_ squeeze std stride sub sub_ subtract sum swapaxes t
tanh tanh_ to tolist transpose true_divide type type_as unbind unflatten uniform_ unsqueeze
var view view_as where zero_
""".split()

ELEMENTWISE_NAMES = """
ABS ADD CLAMP CLAMP_BACKWARD COS DIV EQ EXP EXPM1 GE GT LE LOG LOG1P LOGICAL_AND LOGICAL_NOT
LOGICAL_OR LOGICAL_XOR LT MASKED_FILL MAXIMUM MINIMUM MUL NE NEG POW POW_BACKWARD POW_SCALAR
RECIPROCAL RELU RPOW_SCALAR RSQRT RSUB SIGMOID SIGMOID_BACKWARD SIGN SIN SQRT SUB TANH
TANH_BACKWARD THRESHOLD_BACKWARD WHERE abs add binary clamp clamp_backward clip cos div eq
exp expm1 ge gt le log log1p logical_and logical_not logical_or logical_xor lt masked_fill
maximum minimum mul ne neg pow pow_backward reciprocal relu rsqrt rsub sigmoid
sigmoid_backward sign sin sqrt square sub tanh tanh_backward threshold_backward true_divide
unary where
""".split()

MOVEMENT_NAMES = """
CAT CLONE EXPAND GETITEM GETITEM_BACKWARD PERMUTE RESHAPE STACK T TO_DTYPE cat chunk clone
concatenate contiguous expand expand_as flatten getitem movedim narrow permute reshape
select split squeeze stack swapaxes t to_dtype transpose unbind unflatten unsqueeze view
""".split()

REDUCE_NAMES = """
AMAX AMIN ARGMAX ARGMIN LOGSUMEXP LOG_SOFTMAX LOG_SOFTMAX_BACKWARD MAX_DIM MEAN MIN_DIM
SOFTMAX SOFTMAX_BACKWARD STD SUM VAR amax amin argmax argmin log_softmax
log_softmax_backward logsumexp max mean min prod return_max return_min softmax
softmax_backward std sum var
""".split()

JITGRAD_ALIASES = {'absolute': 'abs',
 'clip': 'clamp',
 'concatenate': 'cat',
 'divide': 'div',
 'multiply': 'mul',
 'negative': 'neg',
 'subtract': 'sub',
 'swapaxes': 'transpose',
 'true_divide': 'div'}

# (== and != are not jitgrad.eq / ne: they compare only tensors, numbers and arrays)
TENSOR_SAME_AS_JITGRAD = {'__abs__': 'abs',
 '__ge__': 'ge',
 '__gt__': 'gt',
 '__le__': 'le',
 '__lt__': 'lt',
 '__matmul__': 'matmul',
 '__neg__': 'neg',
 'abs': 'abs',
 'add': 'add',
 'addcdiv': 'addcdiv',
 'addcmul': 'addcmul',
 'amax': 'amax',
 'amin': 'amin',
 'argmax': 'argmax',
 'argmin': 'argmin',
 'bmm': 'bmm',
 'chunk': 'chunk',
 'clamp': 'clamp',
 'clip': 'clamp',
 'cos': 'cos',
 'div': 'div',
 'divide': 'div',
 'dot': 'dot',
 'eq': 'eq',
 'exp': 'exp',
 'expand': 'expand',
 'expm1': 'expm1',
 'flatten': 'flatten',
 'ge': 'ge',
 'gt': 'gt',
 'le': 'le',
 'lerp': 'lerp',
 'log': 'log',
 'log1p': 'log1p',
 'logical_and': 'logical_and',
 'logical_not': 'logical_not',
 'logical_or': 'logical_or',
 'logical_xor': 'logical_xor',
 'logsumexp': 'logsumexp',
 'lt': 'lt',
 'masked_fill': 'masked_fill',
 'matmul': 'matmul',
 'max': 'max',
 'maximum': 'maximum',
 'mean': 'mean',
 'min': 'min',
 'minimum': 'minimum',
 'mm': 'mm',
 'movedim': 'movedim',
 'mul': 'mul',
 'multiply': 'mul',
 'mv': 'mv',
 'narrow': 'narrow',
 'ne': 'ne',
 'neg': 'neg',
 'negative': 'neg',
 'outer': 'outer',
 'permute': 'permute',
 'pow': 'pow',
 'prod': 'prod',
 'reciprocal': 'reciprocal',
 'relu': 'relu',
 'reshape': 'reshape',
 'rsqrt': 'rsqrt',
 'select': 'select',
 'sigmoid': 'sigmoid',
 'sign': 'sign',
 'sin': 'sin',
 'split': 'split',
 'sqrt': 'sqrt',
 'square': 'square',
 'squeeze': 'squeeze',
 'std': 'std',
 'sub': 'sub',
 'subtract': 'sub',
 'sum': 'sum',
 'swapaxes': 'transpose',
 't': 't',
 'tanh': 'tanh',
 'transpose': 'transpose',
 'true_divide': 'div',
 'unbind': 'unbind',
 'unflatten': 'unflatten',
 'unsqueeze': 'unsqueeze',
 'var': 'var'}


# ------------------------------------------------------------------------------- tests
def test_jitgrad_names_still_exist():
    missing = sorted(n for n in JITGRAD_NAMES if not hasattr(jitgrad, n))
    assert not missing, f"gone from jitgrad: {missing}"


def test_tensor_names_still_exist():
    missing = sorted(n for n in TENSOR_NAMES if not hasattr(jitgrad.Tensor, n))
    assert not missing, f"gone from jitgrad.Tensor: {missing}"


@pytest.mark.parametrize("module, names", [
    ("jitgrad.ops.elementwise", ELEMENTWISE_NAMES),
    ("jitgrad.ops.movement", MOVEMENT_NAMES),
    ("jitgrad.ops.reduce", REDUCE_NAMES),
])
def test_op_module_import_paths(module, names):
    """Code importing from the op modules by their old paths keeps working after the split."""
    import importlib

    m = importlib.import_module(module)
    missing = sorted(n for n in names if not hasattr(m, n))
    assert not missing, f"gone from {module}: {missing}"


def test_all_lists_only_existing_names():
    assert not [n for n in jitgrad.__all__ if not hasattr(jitgrad, n)]
    assert len(jitgrad.__all__) == len(set(jitgrad.__all__))


def test_aliases_bind_the_same_function():
    for alias, name in JITGRAD_ALIASES.items():
        assert getattr(jitgrad, alias) is getattr(jitgrad, name), alias


def test_methods_bind_the_public_function():
    """``tensor.tanh`` is ``jitgrad.tanh`` itself (not a wrapper), as before."""
    for method, name in TENSOR_SAME_AS_JITGRAD.items():
        assert jitgrad.Tensor.__dict__[method] is getattr(jitgrad, name), method


def test_from_import():
    from jitgrad import cat, clip, log_softmax, max, tanh, true_divide, where  # noqa: F401

    assert isinstance(tanh, types.FunctionType)
    x = jitgrad.tensor([1.0, -2.0])
    assert tanh(x).tolist() == jitgrad.tanh(x).tolist()
