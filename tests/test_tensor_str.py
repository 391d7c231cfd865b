"""Tests for ``jitgrad._tensor_str``: PyTorch-identical tensor reprs.

Part 1 checks literal expected strings (no torch needed). Part 2 is an oracle: when torch is
installed, ``format_tensor`` must equal ``repr(torch.tensor(...))`` (with ``torch.`` spelled
``jitgrad.``) over hypothesis-generated arrays and print options.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import sys
import timeit
from pathlib import Path

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _load_module():
    """Load jitgrad/_tensor_str.py by path, so these tests never need the package importable."""
    if "jitgrad._tensor_str" in sys.modules:
        return sys.modules["jitgrad._tensor_str"]
    path = Path(__file__).resolve().parents[1] / "jitgrad" / "_tensor_str.py"
    spec = importlib.util.spec_from_file_location("jitgrad_tensor_str_by_path", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ts = _load_module()
format_tensor = ts.format_tensor


@pytest.fixture(autouse=True)
def _default_options():
    ts.set_printoptions(profile="default")
    yield
    ts.set_printoptions(profile="default")


# ---------------------------------------------------------------------------------------------
# Part 1: literal expected strings (generated once from torch 2.13, then written out)

CASES = [
    ('scalar_requires_grad', 'np.array(5.0, np.float32)',
     dict(suffixes=['requires_grad=True']), {},
     'tensor(5., requires_grad=True)'),
    ('scalar_grad_fn', 'np.array(125.0, np.float32)',
     dict(suffixes=['grad_fn=<PowBackward0>']), {},
     'tensor(125., grad_fn=<PowBackward0>)'),
    ('scalar_fraction', 'np.array(0.6, np.float32)',
     dict(), {},
     'tensor(0.6000)'),
    ('scalar_negative_zero', 'np.array(-0.0, np.float32)',
     dict(), {},
     'tensor(-0.)'),
    ('scalar_nan', 'np.array(np.nan, np.float32)',
     dict(), {},
     'tensor(nan)'),
    ('scalar_neg_inf', 'np.array(-np.inf, np.float32)',
     dict(), {},
     'tensor(-inf)'),
    ('scalar_tiny', 'np.array(1e-5, np.float32)',
     dict(), {},
     'tensor(1.0000e-05)'),
    ('scalar_huge', 'np.array(1e10, np.float32)',
     dict(), {},
     'tensor(1.0000e+10)'),
    ('scalar_big_integer', 'np.array(123456789.0, np.float32)',
     dict(), {},
     'tensor(1.2346e+08)'),
    ('scalar_int', 'np.array(-7, np.int64)',
     dict(), {},
     'tensor(-7)'),
    ('scalar_bool', 'np.array(False)',
     dict(), {},
     'tensor(False)'),
    ('scalar_float64', 'np.array(np.pi)',
     dict(dtype_suffix='dtype=jitgrad.float64'), {},
     'tensor(3.1416, dtype=jitgrad.float64)'),
    ('ones_requires_grad', 'np.ones((2, 2), np.float32)',
     dict(suffixes=['requires_grad=True']), {},
     'tensor([[1., 1.],\n'
     '        [1., 1.]], requires_grad=True)'),
    ('mixed_signs', 'np.array([2.1899, -0.041], np.float32)',
     dict(), {},
     'tensor([ 2.1899, -0.0410])'),
    ('sci_ratio', 'np.array([1e-5, 1e5], np.float32)',
     dict(), {},
     'tensor([1.0000e-05, 1.0000e+05])'),
    ('sci_ratio_just_over', 'np.array([1.0, 1000.5], np.float32)',
     dict(), {},
     'tensor([1.0000e+00, 1.0005e+03])'),
    ('sci_big_integers', 'np.array([1e9, 1.0], np.float32)',
     dict(), {},
     'tensor([1.0000e+09, 1.0000e+00])'),
    ('sci_three_digit_exponent', 'np.array([1e100, 1.0])',
     dict(dtype_suffix='dtype=jitgrad.float64'), {},
     'tensor([1.0000e+100,  1.0000e+00], dtype=jitgrad.float64)'),
    ('negative_zero_int_mode', 'np.array([-0.0, 1.0, 2.0], np.float32)',
     dict(), {},
     'tensor([-0., 1., 2.])'),
    ('nan_inf_int_mode', 'np.array([np.nan, 1.0, np.inf], np.float32)',
     dict(), {},
     'tensor([nan, 1., inf])'),
    ('nan_inf_fraction', 'np.array([np.nan, 1.5, -np.inf], np.float32)',
     dict(), {},
     'tensor([   nan, 1.5000,   -inf])'),
    ('only_nonfinite', 'np.array([np.nan, np.inf], np.float32)',
     dict(), {},
     'tensor([nan, inf])'),
    ('zeros', 'np.zeros(3, np.float32)',
     dict(), {},
     'tensor([0., 0., 0.])'),
    ('rounding_widens', 'np.array([9.99996, 0.5], np.float32)',
     dict(), {},
     'tensor([10.0000,  0.5000])'),
    ('float16', 'np.array([0.1, 65504.0], np.float16)',
     dict(dtype_suffix='dtype=jitgrad.float16'), {},
     'tensor([9.9976e-02, 6.5504e+04], dtype=jitgrad.float16)'),
    ('float64_requires_grad', 'np.array([1.5, 2.5])',
     dict(dtype_suffix='dtype=jitgrad.float64', suffixes=['requires_grad=True']), {},
     'tensor([1.5000, 2.5000], dtype=jitgrad.float64, requires_grad=True)'),
    ('int32', 'np.array([1, 2, 3], np.int32)',
     dict(dtype_suffix='dtype=jitgrad.int32'), {},
     'tensor([1, 2, 3], dtype=jitgrad.int32)'),
    ('int64_matrix', 'np.arange(12).reshape(3, 4)',
     dict(), {},
     'tensor([[ 0,  1,  2,  3],\n'
     '        [ 4,  5,  6,  7],\n'
     '        [ 8,  9, 10, 11]])'),
    ('int8_negative', 'np.array([-100, 5, 7], np.int8)',
     dict(dtype_suffix='dtype=jitgrad.int8'), {},
     'tensor([-100,    5,    7], dtype=jitgrad.int8)'),
    ('uint8', 'np.array([0, 255], np.uint8)',
     dict(dtype_suffix='dtype=jitgrad.uint8'), {},
     'tensor([  0, 255], dtype=jitgrad.uint8)'),
    ('bool_vector', 'np.array([True, False])',
     dict(), {},
     'tensor([ True, False])'),
    ('bool_all_true', 'np.array([True, True])',
     dict(), {},
     'tensor([True, True])'),
    ('bool_column', 'np.array([[True], [False]])',
     dict(), {},
     'tensor([[ True],\n'
     '        [False]])'),
    ('empty_float', 'np.zeros(0, np.float32)',
     dict(), {},
     'tensor([])'),
    ('empty_matrix', 'np.zeros((0, 3), np.float32)',
     dict(), {},
     'tensor([], size=(0, 3))'),
    ('empty_int64', 'np.zeros(0, np.int64)',
     dict(), {},
     'tensor([], dtype=jitgrad.int64)'),
    ('empty_bool', 'np.zeros((2, 0), np.bool_)',
     dict(), {},
     'tensor([], size=(2, 0), dtype=jitgrad.bool)'),
    ('empty_float64', 'np.zeros((0, 2, 1))',
     dict(dtype_suffix='dtype=jitgrad.float64'), {},
     'tensor([], size=(0, 2, 1), dtype=jitgrad.float64)'),
    ('empty_requires_grad', 'np.zeros((0, 3), np.float32)',
     dict(suffixes=['requires_grad=True']), {},
     'tensor([], size=(0, 3), requires_grad=True)'),
    ('blocks_3d', 'np.arange(12.0, dtype=np.float32).reshape(2, 2, 3)',
     dict(), {},
     'tensor([[[ 0.,  1.,  2.],\n'
     '         [ 3.,  4.,  5.]],\n'
     '\n'
     '        [[ 6.,  7.,  8.],\n'
     '         [ 9., 10., 11.]]])'),
    ('blocks_4d', 'np.arange(16).reshape(2, 2, 2, 2)',
     dict(), {},
     'tensor([[[[ 0,  1],\n'
     '          [ 2,  3]],\n'
     '\n'
     '         [[ 4,  5],\n'
     '          [ 6,  7]]],\n'
     '\n'
     '\n'
     '        [[[ 8,  9],\n'
     '          [10, 11]],\n'
     '\n'
     '         [[12, 13],\n'
     '          [14, 15]]]])'),
    ('wrapped_row', 'np.arange(30, dtype=np.float32) / np.float32(3)',
     dict(), {},
     'tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n'
     '        3.0000, 3.3333, 3.6667, 4.0000, 4.3333, 4.6667, 5.0000, 5.3333, 5.6667,\n'
     '        6.0000, 6.3333, 6.6667, 7.0000, 7.3333, 7.6667, 8.0000, 8.3333, 8.6667,\n'
     '        9.0000, 9.3333, 9.6667])'),
    ('wrapped_ints', 'np.arange(40) * 1000',
     dict(), {},
     'tensor([    0,  1000,  2000,  3000,  4000,  5000,  6000,  7000,  8000,  9000,\n'
     '        10000, 11000, 12000, 13000, 14000, 15000, 16000, 17000, 18000, 19000,\n'
     '        20000, 21000, 22000, 23000, 24000, 25000, 26000, 27000, 28000, 29000,\n'
     '        30000, 31000, 32000, 33000, 34000, 35000, 36000, 37000, 38000, 39000])'),
    ('summarized_1d', 'np.arange(2000)',
     dict(), {},
     'tensor([   0,    1,    2,  ..., 1997, 1998, 1999])'),
    ('summarized_2d', 'np.arange(2000.0, dtype=np.float32).reshape(40, 50)',
     dict(), {},
     'tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,\n'
     '         4.9000e+01],\n'
     '        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,\n'
     '         9.9000e+01],\n'
     '        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,\n'
     '         1.4900e+02],\n'
     '        ...,\n'
     '        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,\n'
     '         1.8990e+03],\n'
     '        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,\n'
     '         1.9490e+03],\n'
     '        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,\n'
     '         1.9990e+03]])'),
    ('summarized_3d', 'np.arange(1200).reshape(12, 10, 10)',
     dict(), {},
     'tensor([[[   0,    1,    2,  ...,    7,    8,    9],\n'
     '         [  10,   11,   12,  ...,   17,   18,   19],\n'
     '         [  20,   21,   22,  ...,   27,   28,   29],\n'
     '         ...,\n'
     '         [  70,   71,   72,  ...,   77,   78,   79],\n'
     '         [  80,   81,   82,  ...,   87,   88,   89],\n'
     '         [  90,   91,   92,  ...,   97,   98,   99]],\n'
     '\n'
     '        [[ 100,  101,  102,  ...,  107,  108,  109],\n'
     '         [ 110,  111,  112,  ...,  117,  118,  119],\n'
     '         [ 120,  121,  122,  ...,  127,  128,  129],\n'
     '         ...,\n'
     '         [ 170,  171,  172,  ...,  177,  178,  179],\n'
     '         [ 180,  181,  182,  ...,  187,  188,  189],\n'
     '         [ 190,  191,  192,  ...,  197,  198,  199]],\n'
     '\n'
     '        [[ 200,  201,  202,  ...,  207,  208,  209],\n'
     '         [ 210,  211,  212,  ...,  217,  218,  219],\n'
     '         [ 220,  221,  222,  ...,  227,  228,  229],\n'
     '         ...,\n'
     '         [ 270,  271,  272,  ...,  277,  278,  279],\n'
     '         [ 280,  281,  282,  ...,  287,  288,  289],\n'
     '         [ 290,  291,  292,  ...,  297,  298,  299]],\n'
     '\n'
     '        ...,\n'
     '\n'
     '        [[ 900,  901,  902,  ...,  907,  908,  909],\n'
     '         [ 910,  911,  912,  ...,  917,  918,  919],\n'
     '         [ 920,  921,  922,  ...,  927,  928,  929],\n'
     '         ...,\n'
     '         [ 970,  971,  972,  ...,  977,  978,  979],\n'
     '         [ 980,  981,  982,  ...,  987,  988,  989],\n'
     '         [ 990,  991,  992,  ...,  997,  998,  999]],\n'
     '\n'
     '        [[1000, 1001, 1002,  ..., 1007, 1008, 1009],\n'
     '         [1010, 1011, 1012,  ..., 1017, 1018, 1019],\n'
     '         [1020, 1021, 1022,  ..., 1027, 1028, 1029],\n'
     '         ...,\n'
     '         [1070, 1071, 1072,  ..., 1077, 1078, 1079],\n'
     '         [1080, 1081, 1082,  ..., 1087, 1088, 1089],\n'
     '         [1090, 1091, 1092,  ..., 1097, 1098, 1099]],\n'
     '\n'
     '        [[1100, 1101, 1102,  ..., 1107, 1108, 1109],\n'
     '         [1110, 1111, 1112,  ..., 1117, 1118, 1119],\n'
     '         [1120, 1121, 1122,  ..., 1127, 1128, 1129],\n'
     '         ...,\n'
     '         [1170, 1171, 1172,  ..., 1177, 1178, 1179],\n'
     '         [1180, 1181, 1182,  ..., 1187, 1188, 1189],\n'
     '         [1190, 1191, 1192,  ..., 1197, 1198, 1199]]])'),
    ('summarized_short_rows', 'np.arange(1002).reshape(501, 2)',
     dict(), {},
     'tensor([[   0,    1],\n'
     '        [   2,    3],\n'
     '        [   4,    5],\n'
     '        ...,\n'
     '        [ 996,  997],\n'
     '        [ 998,  999],\n'
     '        [1000, 1001]])'),
    ('suffix_fits', 'np.full(12, 0.5, np.float32)',
     dict(suffixes=['requires_grad=True']), {},
     'tensor([0.5000, 0.5000, 0.5000, 0.5000, 0.5000, 0.5000, 0.5000, 0.5000, 0.5000,\n'
     '        0.5000, 0.5000, 0.5000], requires_grad=True)'),
    ('suffix_wraps', 'np.arange(11, dtype=np.float32) * 2 + 1',
     dict(suffixes=['grad_fn=<MulBackward0>']), {},
     'tensor([ 1.,  3.,  5.,  7.,  9., 11., 13., 15., 17., 19., 21.],\n'
     '       grad_fn=<MulBackward0>)'),
    ('matrix_grad_fn', 'np.array([[0.1, 0.2], [0.3, 0.4]], np.float32)',
     dict(suffixes=['grad_fn=<MulBackward0>']), {},
     'tensor([[0.1000, 0.2000],\n'
     '        [0.3000, 0.4000]], grad_fn=<MulBackward0>)'),
    ('precision_2', 'np.array([1.12345, -2.5], np.float32)',
     dict(), {'precision': 2},
     'tensor([ 1.12, -2.50])'),
    ('precision_0', 'np.array([1.5, 2.25], np.float32)',
     dict(), {'precision': 0},
     'tensor([2, 2])'),
    ('sci_forced', 'np.array([1.5, 2.0], np.float32)',
     dict(), {'sci_mode': True},
     'tensor([1.5000e+00, 2.0000e+00])'),
    ('sci_forced_zero_scalar', 'np.array(0.0, np.float32)',
     dict(), {'sci_mode': True},
     'tensor(0.)'),
    ('sci_disabled', 'np.array([1e-5, 1e5], np.float32)',
     dict(), {'sci_mode': False},
     'tensor([     0.0000, 100000.0000])'),
    ('threshold_5', 'np.arange(10)',
     dict(), {'threshold': 5},
     'tensor([0, 1, 2,  ..., 7, 8, 9])'),
    ('edgeitems_1', 'np.arange(24).reshape(4, 6)',
     dict(), {'threshold': 5, 'edgeitems': 1},
     'tensor([[ 0,  ...,  5],\n'
     '        ...,\n'
     '        [18,  ..., 23]])'),
    ('edgeitems_0_summarized', 'np.arange(24).reshape(4, 6)',
     dict(), {'threshold': 5, 'edgeitems': 0},
     'tensor([...], size=(4, 6))'),
    ('edgeitems_0_vector', 'np.arange(10.0, dtype=np.float32)',
     dict(), {'threshold': 5, 'edgeitems': 0},
     'tensor([...], size=(10,))'),
    ('edgeitems_0_not_summarized', 'np.array([1, 2])',
     dict(), {'edgeitems': 0},
     'tensor([1, 2], size=(2,))'),
    ('edgeitems_0_scalar', 'np.array(1.5, np.float32)',
     dict(), {'edgeitems': 0},
     'tensor(1.5000, size=())'),
    ('linewidth_30', 'np.arange(12, dtype=np.float32) / np.float32(7)',
     dict(suffixes=['requires_grad=True']), {'linewidth': 30},
     'tensor([0.0000, 0.1429,\n'
     '        0.2857, 0.4286,\n'
     '        0.5714, 0.7143,\n'
     '        0.8571, 1.0000,\n'
     '        1.1429, 1.2857,\n'
     '        1.4286, 1.5714],\n'
     '       requires_grad=True)'),
    ('linewidth_tiny', 'np.arange(4).reshape(2, 2)',
     dict(), {'linewidth': 1},
     'tensor([[0,\n'
     '         1],\n'
     '        [2,\n'
     '         3]])'),
    ('profile_short', 'np.arange(12, dtype=np.float32).reshape(3, 4) / np.float32(3)',
     dict(), {'profile': 'short', 'threshold': 5},
     'tensor([[0.00, 0.33, 0.67, 1.00],\n'
     '        [1.33, 1.67, 2.00, 2.33],\n'
     '        [2.67, 3.00, 3.33, 3.67]])'),
    ('profile_full', 'np.arange(1100)',
     dict(), {'profile': 'full', 'linewidth': 85},
     'tensor([   0,    1,    2,    3,    4,    5,    6,    7,    8,    9,   10,   11,   12,\n'
     '          13,   14,   15,   16,   17,   18,   19,   20,   21,   22,   23,   24,   25,\n'
     '          26,   27,   28,   29,   30,   31,   32,   33,   34,   35,   36,   37,   38,\n'
     '          39,   40,   41,   42,   43,   44,   45,   46,   47,   48,   49,   50,   51,\n'
     '          52,   53,   54,   55,   56,   57,   58,   59,   60,   61,   62,   63,   64,\n'
     '          65,   66,   67,   68,   69,   70,   71,   72,   73,   74,   75,   76,   77,\n'
     '          78,   79,   80,   81,   82,   83,   84,   85,   86,   87,   88,   89,   90,\n'
     '          91,   92,   93,   94,   95,   96,   97,   98,   99,  100,  101,  102,  103,\n'
     '         104,  105,  106,  107,  108,  109,  110,  111,  112,  113,  114,  115,  116,\n'
     '         117,  118,  119,  120,  121,  122,  123,  124,  125,  126,  127,  128,  129,\n'
     '         130,  131,  132,  133,  134,  135,  136,  137,  138,  139,  140,  141,  142,\n'
     '         143,  144,  145,  146,  147,  148,  149,  150,  151,  152,  153,  154,  155,\n'
     '         156,  157,  158,  159,  160,  161,  162,  163,  164,  165,  166,  167,  168,\n'
     '         169,  170,  171,  172,  173,  174,  175,  176,  177,  178,  179,  180,  181,\n'
     '         182,  183,  184,  185,  186,  187,  188,  189,  190,  191,  192,  193,  194,\n'
     '         195,  196,  197,  198,  199,  200,  201,  202,  203,  204,  205,  206,  207,\n'
     '         208,  209,  210,  211,  212,  213,  214,  215,  216,  217,  218,  219,  220,\n'
     '         221,  222,  223,  224,  225,  226,  227,  228,  229,  230,  231,  232,  233,\n'
     '         234,  235,  236,  237,  238,  239,  240,  241,  242,  243,  244,  245,  246,\n'
     '         247,  248,  249,  250,  251,  252,  253,  254,  255,  256,  257,  258,  259,\n'
     '         260,  261,  262,  263,  264,  265,  266,  267,  268,  269,  270,  271,  272,\n'
     '         273,  274,  275,  276,  277,  278,  279,  280,  281,  282,  283,  284,  285,\n'
     '         286,  287,  288,  289,  290,  291,  292,  293,  294,  295,  296,  297,  298,\n'
     '         299,  300,  301,  302,  303,  304,  305,  306,  307,  308,  309,  310,  311,\n'
     '         312,  313,  314,  315,  316,  317,  318,  319,  320,  321,  322,  323,  324,\n'
     '         325,  326,  327,  328,  329,  330,  331,  332,  333,  334,  335,  336,  337,\n'
     '         338,  339,  340,  341,  342,  343,  344,  345,  346,  347,  348,  349,  350,\n'
     '         351,  352,  353,  354,  355,  356,  357,  358,  359,  360,  361,  362,  363,\n'
     '         364,  365,  366,  367,  368,  369,  370,  371,  372,  373,  374,  375,  376,\n'
     '         377,  378,  379,  380,  381,  382,  383,  384,  385,  386,  387,  388,  389,\n'
     '         390,  391,  392,  393,  394,  395,  396,  397,  398,  399,  400,  401,  402,\n'
     '         403,  404,  405,  406,  407,  408,  409,  410,  411,  412,  413,  414,  415,\n'
     '         416,  417,  418,  419,  420,  421,  422,  423,  424,  425,  426,  427,  428,\n'
     '         429,  430,  431,  432,  433,  434,  435,  436,  437,  438,  439,  440,  441,\n'
     '         442,  443,  444,  445,  446,  447,  448,  449,  450,  451,  452,  453,  454,\n'
     '         455,  456,  457,  458,  459,  460,  461,  462,  463,  464,  465,  466,  467,\n'
     '         468,  469,  470,  471,  472,  473,  474,  475,  476,  477,  478,  479,  480,\n'
     '         481,  482,  483,  484,  485,  486,  487,  488,  489,  490,  491,  492,  493,\n'
     '         494,  495,  496,  497,  498,  499,  500,  501,  502,  503,  504,  505,  506,\n'
     '         507,  508,  509,  510,  511,  512,  513,  514,  515,  516,  517,  518,  519,\n'
     '         520,  521,  522,  523,  524,  525,  526,  527,  528,  529,  530,  531,  532,\n'
     '         533,  534,  535,  536,  537,  538,  539,  540,  541,  542,  543,  544,  545,\n'
     '         546,  547,  548,  549,  550,  551,  552,  553,  554,  555,  556,  557,  558,\n'
     '         559,  560,  561,  562,  563,  564,  565,  566,  567,  568,  569,  570,  571,\n'
     '         572,  573,  574,  575,  576,  577,  578,  579,  580,  581,  582,  583,  584,\n'
     '         585,  586,  587,  588,  589,  590,  591,  592,  593,  594,  595,  596,  597,\n'
     '         598,  599,  600,  601,  602,  603,  604,  605,  606,  607,  608,  609,  610,\n'
     '         611,  612,  613,  614,  615,  616,  617,  618,  619,  620,  621,  622,  623,\n'
     '         624,  625,  626,  627,  628,  629,  630,  631,  632,  633,  634,  635,  636,\n'
     '         637,  638,  639,  640,  641,  642,  643,  644,  645,  646,  647,  648,  649,\n'
     '         650,  651,  652,  653,  654,  655,  656,  657,  658,  659,  660,  661,  662,\n'
     '         663,  664,  665,  666,  667,  668,  669,  670,  671,  672,  673,  674,  675,\n'
     '         676,  677,  678,  679,  680,  681,  682,  683,  684,  685,  686,  687,  688,\n'
     '         689,  690,  691,  692,  693,  694,  695,  696,  697,  698,  699,  700,  701,\n'
     '         702,  703,  704,  705,  706,  707,  708,  709,  710,  711,  712,  713,  714,\n'
     '         715,  716,  717,  718,  719,  720,  721,  722,  723,  724,  725,  726,  727,\n'
     '         728,  729,  730,  731,  732,  733,  734,  735,  736,  737,  738,  739,  740,\n'
     '         741,  742,  743,  744,  745,  746,  747,  748,  749,  750,  751,  752,  753,\n'
     '         754,  755,  756,  757,  758,  759,  760,  761,  762,  763,  764,  765,  766,\n'
     '         767,  768,  769,  770,  771,  772,  773,  774,  775,  776,  777,  778,  779,\n'
     '         780,  781,  782,  783,  784,  785,  786,  787,  788,  789,  790,  791,  792,\n'
     '         793,  794,  795,  796,  797,  798,  799,  800,  801,  802,  803,  804,  805,\n'
     '         806,  807,  808,  809,  810,  811,  812,  813,  814,  815,  816,  817,  818,\n'
     '         819,  820,  821,  822,  823,  824,  825,  826,  827,  828,  829,  830,  831,\n'
     '         832,  833,  834,  835,  836,  837,  838,  839,  840,  841,  842,  843,  844,\n'
     '         845,  846,  847,  848,  849,  850,  851,  852,  853,  854,  855,  856,  857,\n'
     '         858,  859,  860,  861,  862,  863,  864,  865,  866,  867,  868,  869,  870,\n'
     '         871,  872,  873,  874,  875,  876,  877,  878,  879,  880,  881,  882,  883,\n'
     '         884,  885,  886,  887,  888,  889,  890,  891,  892,  893,  894,  895,  896,\n'
     '         897,  898,  899,  900,  901,  902,  903,  904,  905,  906,  907,  908,  909,\n'
     '         910,  911,  912,  913,  914,  915,  916,  917,  918,  919,  920,  921,  922,\n'
     '         923,  924,  925,  926,  927,  928,  929,  930,  931,  932,  933,  934,  935,\n'
     '         936,  937,  938,  939,  940,  941,  942,  943,  944,  945,  946,  947,  948,\n'
     '         949,  950,  951,  952,  953,  954,  955,  956,  957,  958,  959,  960,  961,\n'
     '         962,  963,  964,  965,  966,  967,  968,  969,  970,  971,  972,  973,  974,\n'
     '         975,  976,  977,  978,  979,  980,  981,  982,  983,  984,  985,  986,  987,\n'
     '         988,  989,  990,  991,  992,  993,  994,  995,  996,  997,  998,  999, 1000,\n'
     '        1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1013,\n'
     '        1014, 1015, 1016, 1017, 1018, 1019, 1020, 1021, 1022, 1023, 1024, 1025, 1026,\n'
     '        1027, 1028, 1029, 1030, 1031, 1032, 1033, 1034, 1035, 1036, 1037, 1038, 1039,\n'
     '        1040, 1041, 1042, 1043, 1044, 1045, 1046, 1047, 1048, 1049, 1050, 1051, 1052,\n'
     '        1053, 1054, 1055, 1056, 1057, 1058, 1059, 1060, 1061, 1062, 1063, 1064, 1065,\n'
     '        1066, 1067, 1068, 1069, 1070, 1071, 1072, 1073, 1074, 1075, 1076, 1077, 1078,\n'
     '        1079, 1080, 1081, 1082, 1083, 1084, 1085, 1086, 1087, 1088, 1089, 1090, 1091,\n'
     '        1092, 1093, 1094, 1095, 1096, 1097, 1098, 1099])'),
]


@pytest.mark.parametrize(
    "name, expr, kwargs, options, expected", CASES, ids=[c[0] for c in CASES]
)
def test_literal(name, expr, kwargs, options, expected):
    data = eval(expr, {"np": np})
    ts.set_printoptions(**options)
    assert format_tensor(data, **kwargs) == expected


def test_custom_prefix_sets_indent():
    data = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    assert format_tensor(data, prefix="MyTensor(") == (
        "MyTensor([[0., 1.],\n"
        "          [2., 3.]])"
    )


def test_several_suffixes_wrap_one_by_one():
    data = np.arange(9, dtype=np.float32) + np.float32(0.5)
    got = format_tensor(
        data, dtype_suffix="dtype=jitgrad.float16", suffixes=["grad_fn=<AddBackward0>"]
    )
    assert got == (
        "tensor([0.5000, 1.5000, 2.5000, 3.5000, 4.5000, 5.5000, 6.5000, 7.5000, 8.5000],\n"
        "       dtype=jitgrad.float16, grad_fn=<AddBackward0>)"
    )


def test_set_and_get_printoptions():
    assert ts.get_printoptions() == {
        "precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None
    }
    ts.set_printoptions(profile="short", sci_mode=True)
    assert ts.get_printoptions() == {
        "precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80, "sci_mode": True
    }
    ts.set_printoptions(precision=6)  # any call without sci_mode resets it, as in PyTorch
    assert ts.get_printoptions()["sci_mode"] is None
    assert ts.get_printoptions()["precision"] == 6
    ts.set_printoptions(profile="full")
    assert ts.get_printoptions()["threshold"] == math.inf
    with ts.printoptions(precision=1):
        assert format_tensor(np.array(0.25, np.float32)) == "tensor(0.2)"
    assert ts.get_printoptions()["precision"] == 4


def test_dtype_helpers():
    assert not ts.dtype_suffix_needed(np.float32)
    assert not ts.dtype_suffix_needed(np.int64)
    assert not ts.dtype_suffix_needed(np.bool_)
    for d in (np.float16, np.float64, np.int8, np.int16, np.int32, np.uint8):
        assert ts.dtype_suffix_needed(d)
    assert ts.dtype_suffix_needed(np.float32, default_float=np.float64)
    assert not ts.dtype_suffix_needed(np.float64, default_float=np.float64)
    assert ts.dtype_suffix(np.float64) == "dtype=jitgrad.float64"
    assert ts.dtype_suffix(np.bool_) == "dtype=jitgrad.bool"


def test_default_float64_empty():
    empty = np.zeros(0, np.float32)
    assert format_tensor(empty, default_float=np.float64) == "tensor([], dtype=jitgrad.float32)"
    assert format_tensor(np.zeros(0), default_float=np.float64) == "tensor([])"


def test_unsupported_dtype():
    with pytest.raises(TypeError):
        format_tensor(np.array(["a"]))


def test_input_is_not_modified():
    data = np.array([[1.5, np.nan], [-0.0, 3.0]], np.float32)
    before = data.copy()
    format_tensor(data)
    np.testing.assert_array_equal(data, before)


def test_scalar_is_fast():
    data = np.array(0.123, np.float32)
    per_call = min(timeit.repeat(
        lambda: format_tensor(data, suffixes=["requires_grad=True"]), number=2000, repeat=5
    )) / 2000
    assert per_call < 50e-6


# ---------------------------------------------------------------------------------------------
# Part 2: oracle against torch

_FLOAT_DTYPES = [np.float16, np.float32, np.float64]
_INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8]

_SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5, 1e-4, 9.99995e-5, 1e8,
            100000001.0, 1e-5, 1e5, 999.5, 1000.0, 9.99995, 0.99995, 99.99995, 9999.99995,
            0.00005, 1e-45, 1e-300, 1e300, 65504.0, 123456789.0, 2.0**24 + 1]
_BOUNDARY = [9.99995, 0.99995, 99.99995, 999.99995, 9999.5, 0.00005, 9.9999e-5, 1e-4, 1e8,
             99999999.5, 1e3, 1e-3, 0.5, 2.5, 1e16, 1e-16]

_ELEMENTS = [
    st.integers(-20, 20).map(float),
    st.integers(-(10**9), 10**9).map(float),
    st.floats(-100, 100),
    st.floats(-1, 1),
    st.floats(1e3, 1e10) | st.floats(-1e10, -1e3),
    st.floats(1e-8, 1e-3) | st.floats(-1e-3, -1e-8),
    st.sampled_from(_BOUNDARY) | st.sampled_from(_BOUNDARY).map(lambda x: -x),
    st.sampled_from(_SPECIAL) | st.floats(-1e4, 1e4),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(_SPECIAL) | st.integers(-5, 5).map(float) | st.floats(-3, 3),
]
_SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=8)


@st.composite
def float_arrays(draw):
    dtype = draw(st.sampled_from(_FLOAT_DTYPES))
    elements = draw(st.sampled_from(_ELEMENTS))
    data = draw(hnp.arrays(np.float64, _SHAPES, elements=elements))
    with np.errstate(over="ignore", under="ignore"):
        return data.astype(dtype)


@st.composite
def int_arrays(draw):
    dtype = draw(st.sampled_from(_INT_DTYPES))
    info = np.iinfo(dtype)
    elements = draw(st.sampled_from([
        st.integers(max(info.min, -20), 20),
        st.integers(int(info.min), int(info.max)),
    ]))
    return draw(hnp.arrays(dtype, _SHAPES, elements=elements))


any_arrays = st.one_of(
    float_arrays(), int_arrays(), hnp.arrays(np.bool_, _SHAPES)
)


@st.composite
def big_arrays(draw):
    """Arrays of 1001..~3000 elements in 1-4 dims (summarised by default)."""
    ndim = draw(st.integers(1, 4))
    dims = [draw(st.integers(1, 12)) for _ in range(ndim - 1)]
    rest = math.prod(dims)
    lo = -(-1001 // rest)
    last = draw(st.integers(lo, max(lo, 3000 // rest)))
    shape = dims + [last]
    shape.insert(draw(st.integers(0, ndim - 1)), shape.pop())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["randn", "int", "mixed", "bool", "intdtype", "nan"]))
    n = math.prod(shape)
    if kind == "bool":
        return rng.random(n).reshape(shape) < 0.5
    if kind == "intdtype":
        dtype = draw(st.sampled_from(_INT_DTYPES))
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True).reshape(shape)
    if kind == "randn":
        data = rng.standard_normal(n) * 10.0 ** draw(st.integers(-6, 9))
    elif kind == "int":
        data = rng.integers(-1000, 1000, n).astype(np.float64)
    elif kind == "mixed":
        data = rng.standard_normal(n) * 10.0 ** rng.integers(-10, 10, n)
    else:
        data = rng.standard_normal(n)
        data[rng.random(n) < 0.2] = np.nan
        data[rng.random(n) < 0.1] = np.inf
        data[rng.random(n) < 0.1] = 0.0
    dtype = draw(st.sampled_from(_FLOAT_DTYPES))
    with np.errstate(over="ignore", under="ignore"):
        return data.reshape(shape).astype(dtype)


print_options = st.fixed_dictionaries({}, optional={
    "profile": st.sampled_from(["default", "short", "full"]),
    "precision": st.integers(0, 8),
    "threshold": st.sampled_from([0, 1, 5, 20, 100, 1000, math.inf]),
    "edgeitems": st.integers(0, 4),
    "linewidth": st.integers(1, 160),
    "sci_mode": st.sampled_from([None, True, False]),
})

_SETTINGS = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@contextlib.contextmanager
def _both_options(torch, options):
    ts.set_printoptions(**options)
    torch.set_printoptions(**options)
    try:
        assert ts.get_printoptions() == torch._tensor_str.get_printoptions()
        yield
    finally:
        ts.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")


def _check(torch, data, grad="none", default_float=np.float32):
    t = torch.from_numpy(np.array(data, copy=True))
    suffixes = []
    if grad != "none" and data.dtype.kind == "f":
        t.requires_grad_()
        suffixes = ["requires_grad=True"]
        if grad == "grad_fn":
            t = t.clone()
            suffixes = ["grad_fn=<CloneBackward0>"]
    expected = repr(t).replace("torch.", "jitgrad.")
    dtype_suffix = None
    if ts.dtype_suffix_needed(data.dtype, default_float=default_float):
        dtype_suffix = ts.dtype_suffix(data.dtype)
    got = format_tensor(
        data, suffixes=suffixes, dtype_suffix=dtype_suffix, default_float=default_float
    )
    assert got == expected, f"\n{data.dtype} {data.shape}\n{got}\n!=\n{expected}"


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@settings(_SETTINGS, max_examples=400)
@given(data=any_arrays)
def test_oracle_default_options(torch, data):
    _check(torch, data)


@settings(_SETTINGS, max_examples=400)
@given(data=any_arrays, options=print_options)
def test_oracle_print_options(torch, data, options):
    with _both_options(torch, options):
        _check(torch, data)


@settings(_SETTINGS, max_examples=200)
@given(data=float_arrays(), options=print_options,
       grad=st.sampled_from(["requires_grad", "grad_fn"]))
def test_oracle_suffixes(torch, data, options, grad):
    with _both_options(torch, options):
        _check(torch, data, grad=grad)


@settings(_SETTINGS, max_examples=60)
@given(data=big_arrays(), options=print_options | st.just({}),
       grad=st.sampled_from(["none", "requires_grad"]))
def test_oracle_big_arrays(torch, data, options, grad):
    with _both_options(torch, options):
        _check(torch, data, grad=grad)


@settings(_SETTINGS, max_examples=100)
@given(data=any_arrays)
def test_oracle_default_dtype_float64(torch, data):
    torch.set_default_dtype(torch.float64)
    try:
        _check(torch, data, default_float=np.float64)
    finally:
        torch.set_default_dtype(torch.float32)


def test_oracle_subclass_prefix(torch):
    class MyTensor(torch.Tensor):
        pass

    data = np.arange(30, dtype=np.float32).reshape(3, 10) / np.float32(7)
    t = torch.from_numpy(data.copy()).as_subclass(MyTensor)
    assert format_tensor(data, prefix="MyTensor(") == repr(t)
