"""Matrix decompositions (``torch.linalg``'s), differentiable: ``svd`` / ``svdvals`` (and the
old ``torch.svd``), ``qr`` (and ``torch.qr``), ``eigh`` / ``eigvalsh``, ``cholesky_ex`` and
``inv_ex`` (their failures in ``info``); what is built on them: ``pinv`` (``pinverse``),
``lstsq``, ``matrix_rank``; and ``solve_triangular``, ``matrix_exp``. Real inputs (float32,
float64), batched over leading dims, on the array library's LAPACK calls (NumPy's; CuPy's
on a GPU through the same calls).

Several outputs, one decomposition
----------------------------------
A registry op has one output. A decomposition with ``k`` outputs is ``k + 1`` ops:

* ``svd_factors`` (``qr_factors``, ``eigh_factors``) makes the LAPACK call, once per call
  of the public function. Its one output *packs* the factors: each flattened over its
  matrix dims, side by side along one last dim (``U | S | Vh``). It has no gradient and no
  node (as ``sort_indices``, whose positions ``gather`` reads).
* one op per output (``svd_u``, ``svd_s``, ``svd_vh``; ``qr_q``, ``qr_r``; ``eigh_values``,
  ``eigh_vectors``; ``cholesky_ex_l``, ``cholesky_ex_info``...) takes ``(A, factors)``: its
  forward copies its factor out of the packed array (its NumPy reference computes it from
  ``A`` afresh), and its VJP rule gives ``A`` the gradient of *that* output: PyTorch's
  backward formula (``svd_backward``, ``linalg_qr_backward``, ``linalg_eig_backward``'s
  Hermitian case, in torch/csrc/autograd/FunctionsManual.cpp) with only that output's
  gradient defined.

All are ordinary single-output ops, so the eager engine, ``create_graph`` (the rules are
written with jitgrad ops, the factors among them, so they are differentiable again) and
``jitgrad.compile`` (one equation per op: the plan makes the LAPACK call once and copies the
factors out) need nothing new. The gradient of a loss of several outputs
(``U.sum() + S.sum()``) is the sum of their nodes' gradients, which is PyTorch's joint
formula: that formula is linear in the output gradients. An output the loss does not use
runs no rule, exactly as PyTorch leaves its gradient undefined: a loss of the singular
values alone takes ``U diag(gS) Vh`` (PyTorch's ``svdvals`` path, finite where singular
values repeat or vanish), never ``0 / 0``.

The gradients are PyTorch's, with its assumptions: distinct singular values (eigenvalues)
for a loss that uses ``U`` / ``Vh`` (eigenvectors), a full-rank input for a rectangular one;
the singular (eigen) vectors are defined up to sign, so only losses that do not depend on
the sign are meaningful (``U @ diag(S) @ Vh``, ``U.abs()``...). With ``full_matrices=True``
the gradient ignores the columns of ``U`` (rows of ``Vh``) past ``min(m, n)``, as PyTorch's.
``eigh`` reads one triangle (``UPLO``) but its gradient is PyTorch's symmetric one.

``pinv`` is an op of its own with PyTorch's ``pinv_backward`` (its node
``LinalgPinvBackward0``), computed through the SVD (``hermitian``: the eigendecomposition)
with PyTorch's ``atol`` / ``rtol`` rule; ``lstsq``'s solution is ``pinv(A) @ B``, whose
gradient is PyTorch's ``linalg_lstsq_backward``. ``solve_triangular`` is an op on LAPACK's
general solver applied to the triangle, which for an upper triangle is back substitution
(a lower one is solved reversed, which makes it upper); a zero on the diagonal gives
``inf`` / ``nan`` as PyTorch's ``trsm`` does. ``matrix_exp`` is an op (scaling and squaring
with Higham's degree-13 Pade approximant in float64) whose gradient is PyTorch's: the
exponential of a block matrix of twice the size.
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np

from ..autograd import grad_mode
from ..devices import array_namespace
from ..tensor import Tensor
from ..trace.tracer import needs_value
from . import samples as S
from .api import api
from .dispatch import as_tensor_arg, call
from .linalg import MATMUL
from .registry import OPAQUE, defop
from .truth_reductions import any_true

__all__ = ["linalg_svd", "svdvals", "svd", "linalg_qr", "qr", "eigh", "eigvalsh", "pinv",
           "pinverse", "lstsq", "matrix_rank", "solve_triangular", "matrix_exp", "cholesky_ex",
           "inv_ex", "svd_backward", "qr_backward", "eigh_backward", "pinv_backward",
           "LinAlgError", "return_linalg_svd", "return_svd", "return_linalg_qr", "return_qr",
           "return_linalg_eigh", "return_linalg_lstsq", "return_linalg_cholesky_ex",
           "return_linalg_inv_ex"]


class _LinAlgError(RuntimeError):
    """A decomposition that could not be computed (``torch.linalg.LinAlgError``). Named as
    PyTorch names it (``torch._C._LinAlgError``), so ``type(e).__name__`` reads the same."""


LinAlgError = _LinAlgError


def _return_type(name: str, fields: tuple[str, ...]) -> type:
    """A tuple with named fields shown as PyTorch shows ``torch.return_types.<name>`` (a
    plain tuple subclass: ``collections.namedtuple`` costs a millisecond each at import)."""
    def __new__(cls, *values):
        if len(values) != len(fields):
            raise TypeError(f"return_{name} takes {len(fields)} values, got {len(values)}")
        return tuple.__new__(cls, values)

    def __repr__(self) -> str:
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self))
        return f"torch.return_types.{name}(\n{body})"

    def __getnewargs__(self):
        return tuple(self)

    namespace = {"__slots__": (), "__new__": __new__, "__repr__": __repr__,
                 "__getnewargs__": __getnewargs__, "_fields": fields, "__module__": __name__,
                 "__qualname__": "return_" + name}
    for i, f in enumerate(fields):
        namespace[f] = property(itemgetter(i), doc=f"Field {i}: ``{f}``.")
    return type("return_" + name, (tuple,), namespace)


return_linalg_svd = _return_type("linalg_svd", ("U", "S", "Vh"))
return_svd = _return_type("svd", ("U", "S", "V"))
return_linalg_qr = _return_type("linalg_qr", ("Q", "R"))
return_qr = _return_type("qr", ("Q", "R"))
return_linalg_eigh = _return_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
return_linalg_lstsq = _return_type("linalg_lstsq", ("solution", "residuals", "rank",
                                                    "singular_values"))
return_linalg_cholesky_ex = _return_type("linalg_cholesky_ex", ("L", "info"))
return_linalg_inv_ex = _return_type("linalg_inv_ex", ("inverse", "info"))


# ------------------------------------------------------------------------------ checks
def _type_name(a: Tensor) -> str:
    return a.dtype.tensor_type.replace("Tensor", "")


def _check(name: str, A: Tensor, kernel: str | None, *, square: bool = False,
           int_error: str = "runtime", complex_ok: bool = False) -> None:
    """PyTorch's checks of a decomposition's input, in its order: at least 2 dims, square
    matrices (``square``), a float32/float64 dtype (or complex, with ``complex_ok``).
    Integers and bools raise PyTorch's ``RuntimeError`` (``int_error="not_implemented"``:
    its missing-kernel error, as ``linalg.eigh``), float16 its missing-kernel
    ``NotImplementedError``."""
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if A.dtype.is_floating_point and (A.dtype.np.itemsize >= 4 or kernel is None):
        return  # (no kernel: float16 too)
    if A.dtype.is_complex:
        if complex_ok:
            return
        raise RuntimeError(f"{name}: complex matrices are not supported by jitgrad")
    if A.dtype.is_floating_point or int_error == "not_implemented":
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_type_name(A)}'")
    raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                       f"Got {_type_name(A)}")


def _check_driver(driver) -> None:
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")


def _needs_grad(A: Tensor) -> bool:
    """Whether a gradient may flow back to ``A`` (PyTorch's ``_may_require_fw_or_bw_grad``):
    ``svdvals``/``eigvalsh`` then compute the vectors their gradient needs."""
    return grad_mode.STATE.enabled and A.requires_grad


def _write_outs(out, results: tuple, name: str) -> tuple:
    """The ``out=`` argument of a function with several results: a tuple of tensors."""
    from .inplace import write_out

    if not isinstance(out, (tuple, list)) or len(out) != len(results):
        raise TypeError(f"{name}(): argument 'out' must be tuple of {len(results)} Tensors")
    return tuple(write_out(o, r, name) for o, r in zip(out, results))


# ---------------------------------------------------------------------------- packing
def _pack(xp, lead: tuple, *parts):
    """``parts`` (arrays with the batch dims ``lead``) flattened over their other dims and
    put side by side along one last dim: the output of a ``*_factors`` op."""
    flat = [p.reshape(lead + (int(np.prod(p.shape[len(lead):], dtype=np.int64)),))
            for p in parts]
    return xp.asarray(xp.concatenate(flat, axis=-1))  # (the simulator's linalg: host arrays)


def _unpack(a, factors, where: tuple | None):
    """The factor at ``where`` (``(offset, matrix shape)``) of a packed array, copied (a
    view could be written in place while the packed array is saved for backward); ``None``:
    a factor not computed, an empty 1-D array (``qr``'s ``Q`` in mode ``'r'``)."""
    xp = array_namespace(factors)
    if where is None:
        return xp.empty((0,), dtype=factors.dtype)
    lo, shape = where
    size = int(np.prod(shape, dtype=np.int64))
    lead = tuple(a.shape[:-2])
    return xp.array(factors[..., lo:lo + size], copy=True).reshape(lead + tuple(shape))


def _part_op(name: str, node: str | None, factors_op, field: str, layout, vjp, samples,
             dtype=None):
    """The op taking ``(A, factors)`` to the factor ``field`` of ``factors_op``'s packing
    (``layout(shape, **params) -> {field: (offset, shape)}``), cast to ``dtype`` if given."""
    def fwd(a, factors, **p):
        r = _unpack(a, factors, layout(a.shape, **p)[field])
        return r if dtype is None else r.astype(dtype)

    def ref(a, factors=None, **p):  # computed from A itself (the packed input is a cache)
        return fwd(a, factors_op.ref(a, **p), **p)

    fwd.__name__, ref.__name__ = f"_{name}_fwd", f"_{name}_ref"
    return defop(name=name, kind=OPAQUE, inputs=("a", "factors"), params=factors_op.params,
                 node=node, ref=ref, fwd=fwd, vjp=vjp, save=(0, 1) if vjp else (),
                 samples=samples, doc=f"the {field} of ``{factors_op.name}``")


def _parts(ops, a: Tensor, factors: Tensor, p: dict) -> list:
    """The factors as tensors: differentiable functions of ``a`` when grad mode is on (a VJP
    rule under ``create_graph``)."""
    return [call(op, (a, factors), p) for op in ops]


# -------------------------------------------------------------------------------- SVD
def _svd_layout(shape, full_matrices: bool = True, compute_uv: bool = True) -> dict:
    m, n = shape[-2:]
    k = min(m, n)
    if not compute_uv:
        return {"S": (0, (k,))}
    ku, kv = (m, n) if full_matrices else (k, k)
    return {"U": (0, (m, ku)), "S": (m * ku, (k,)), "Vh": (m * ku + k, (kv, n))}


def _svd_error(xp, a) -> LinAlgError:
    if not bool(xp.isfinite(a).all()):
        return LinAlgError("linalg.svd: The algorithm failed to converge because the input "
                           "matrix contained non-finite values.")
    return LinAlgError("linalg.svd: The algorithm failed to converge because the input matrix "
                       "is ill-conditioned or has too many repeated singular values.")


def _svd_factors_ref(a, full_matrices: bool = True, compute_uv: bool = True):
    xp = array_namespace(a)
    try:
        if not compute_uv:
            return xp.asarray(xp.linalg.svd(a, compute_uv=False).astype(a.dtype, copy=False))
        u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    except np.linalg.LinAlgError:
        raise _svd_error(xp, a) from None
    return _pack(xp, tuple(a.shape[:-2]), u, s.astype(a.dtype, copy=False), vh)


SVD_FACTORS = defop(name="svd_factors", kind=OPAQUE, inputs=("a",),
                    params=("full_matrices", "compute_uv"), node=None, ref=_svd_factors_ref,
                    samples=S.svd_factors,
                    doc="``U | S | Vh`` of each matrix, packed along one last dim (``S`` "
                        "alone without ``compute_uv``); no gradient")


def svd_backward(gU, gS, gVh, U: Tensor, S: Tensor, Vh: Tensor):
    """PyTorch's ``svd_backward`` (real case): the gradient of ``A = U diag(S) Vh`` (reduced:
    ``U`` m x k, ``Vh`` k x n) for the gradients ``gU``, ``gS``, ``gVh`` of its factors,
    each ``None`` where the loss does not use that factor."""
    from ..creation import eye
    from .diagonals import diag_embed

    if gU is None and gVh is None:
        if gS is None:
            return None
        m, n = U.shape[-2], Vh.shape[-1]
        return U @ (gS.unsqueeze(-1) * Vh) if m >= n else (U * gS.unsqueeze(-2)) @ Vh
    m, n, k = U.shape[-2], Vh.shape[-1], S.shape[-1]
    S2 = S * S
    # E_jk = S_k^2 - S_j^2 off the diagonal, 1 on it (0 / 1 there: skew matrices)
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye(k, dtype=S.dtype, device=S.device)
    UhgU = VhgV = None
    if gU is not None:
        UhgU = U.mT @ gU
        UhgU = UhgU - UhgU.mT
    if gVh is not None:
        VhgV = Vh @ gVh.mT
        VhgV = VhgV - VhgV.mT
    if UhgU is not None and VhgV is not None:
        ret = (UhgU * S.unsqueeze(-2) + S.unsqueeze(-1) * VhgV) / E
    elif UhgU is not None:
        ret = (UhgU / E) * S.unsqueeze(-2)
    else:
        ret = S.unsqueeze(-1) * (VhgV / E)
    if gS is not None:
        ret = ret + diag_embed(gS)
    if m > n and gU is not None:  # + (I - U U^T) gU S^-1 Vh
        gA = U @ ret
        gUSinv = gU / S.unsqueeze(-2)
        gA = gA + gUSinv - U @ (U.mT @ gUSinv)
        return gA @ Vh
    if m < n and gVh is not None:  # + U S^-1 gVh (I - V Vh)
        gA = ret @ Vh
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = gA + SinvgVh - (SinvgVh @ Vh.mT) @ Vh
        return U @ gA
    return U @ (ret @ Vh) if m >= n else (U @ ret) @ Vh


def _svd_vjp(field: str):
    def vjp(g, ins, out, p, n):
        a, factors = ins
        if not n[0]:
            return (None, None)
        if not p["compute_uv"]:  # (not recorded so: svdvals computes U, Vh when A needs grad)
            p = {"full_matrices": False, "compute_uv": True}
            factors = call(SVD_FACTORS, (a,), p)
        U, S_, Vh = _parts((SVD_U, SVD_S, SVD_VH), a, factors, p)
        k = S_.shape[-1]
        if p["full_matrices"]:  # the columns past k are any basis: not differentiated
            U, Vh = U.narrow(-1, 0, k), Vh.narrow(-2, 0, k)
            if field == "U":
                g = g.narrow(-1, 0, k)
            elif field == "Vh":
                g = g.narrow(-2, 0, k)
        grads = {"U": None, "S": None, "Vh": None}
        grads[field] = g
        return (svd_backward(grads["U"], grads["S"], grads["Vh"], U, S_, Vh), None)
    return vjp


SVD_U = _part_op("svd_u", "LinalgSvdBackward0", SVD_FACTORS, "U", _svd_layout, _svd_vjp("U"),
                 S.svd_part("U"))
SVD_S = _part_op("svd_s", "LinalgSvdBackward0", SVD_FACTORS, "S", _svd_layout, _svd_vjp("S"),
                 S.svd_part("S"))
SVD_VH = _part_op("svd_vh", "LinalgSvdBackward0", SVD_FACTORS, "Vh", _svd_layout,
                  _svd_vjp("Vh"), S.svd_part("Vh"))
api(SVD_U, SVD_S, SVD_VH)(svd_backward)  # their rule (no public names: jitgrad's own)


@api(SVD_FACTORS)
def svd_factors(A: Tensor, full_matrices: bool = True, compute_uv: bool = True) -> Tensor:
    """The packed output of ``svd_factors`` (what the public functions split)."""
    return call(SVD_FACTORS, (A,), {"full_matrices": bool(full_matrices),
                                    "compute_uv": bool(compute_uv)})


@api(SVD_FACTORS, SVD_U, SVD_S, SVD_VH)
def linalg_svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None,
               out=None) -> return_linalg_svd:
    """``(U, S, Vh)`` with ``A = U @ diag(S) @ Vh`` for each matrix of ``A``
    (``torch.linalg.svd``): ``S`` descending, ``U`` m x m and ``Vh`` n x n
    (``full_matrices``) or m x k and k x n, ``k = min(m, n)``.

    Differentiable as PyTorch's (see the module doc: distinct singular values, losses that
    do not depend on the singular vectors' signs).

    >>> import jitgrad
    >>> jitgrad.linalg.svd(jitgrad.tensor([[3.0, 0.0], [0.0, -2.0]])).S
    tensor([3., 2.])
    """
    A = as_tensor_arg(A, "A")
    _check("linalg.svd", A, "linalg_svd_cpu")
    _check_driver(driver)
    p = {"full_matrices": bool(full_matrices), "compute_uv": True}
    f = call(SVD_FACTORS, (A,), p)
    r = return_linalg_svd(*_parts((SVD_U, SVD_S, SVD_VH), A, f, p))
    if out is not None:
        return return_linalg_svd(*_write_outs(out, r, "linalg.svd"))
    return r


@api(SVD_FACTORS, SVD_S)
def svdvals(A: Tensor, *, driver: str | None = None, out=None) -> Tensor:
    """The singular values of each matrix of ``A``, descending (``torch.linalg.svdvals``);
    the singular vectors are computed too when ``A`` requires grad (the gradient needs
    them: ``U diag(gS) Vh``)."""
    A = as_tensor_arg(A, "A")
    _check("linalg.svd", A, "linalg_svd_cpu")
    _check_driver(driver)
    p = {"full_matrices": False, "compute_uv": _needs_grad(A)}
    r = call(SVD_S, (A, call(SVD_FACTORS, (A,), p)), p)
    if out is not None:
        from .inplace import write_out

        return write_out(out, r, "linalg.svdvals")
    return r


@api(SVD_FACTORS, SVD_U, SVD_S, SVD_VH, method="svd", export="svd")
def svd(input: Tensor, some: bool = True, compute_uv: bool = True, *, out=None) -> return_svd:
    """The old ``torch.svd``: ``(U, S, V)`` with ``input = U @ diag(S) @ V.mT`` (``some``:
    the reduced factors); without ``compute_uv``, ``U`` and ``V`` are zero m x m and n x n
    matrices and ``S`` is :func:`svdvals`'s."""
    from ..creation import zeros

    input = as_tensor_arg(input, "input")
    if input.ndim < 2:
        raise RuntimeError(f"linalg.svd: input should have at least 2 dimensions, but has "
                           f"{input.ndim} dimensions instead")
    if compute_uv:
        U, S_, Vh = linalg_svd(input, full_matrices=not some)
        r = return_svd(U, S_, Vh.mT)
    else:
        m, n = input.shape[-2:]
        lead = tuple(input.shape[:-2])
        S_ = svdvals(input)
        r = return_svd(zeros(*lead, m, m, dtype=input.dtype, device=input.device), S_,
                       zeros(*lead, n, n, dtype=input.dtype, device=input.device))
    if out is not None:
        return return_svd(*_write_outs(out, r, "svd"))
    return r


# --------------------------------------------------------------------------------- QR
_QR_MODES = ("reduced", "complete", "r")


def _qr_layout(shape, mode: str = "reduced") -> dict:
    m, n = shape[-2:]
    k = min(m, n)
    if mode == "r":
        return {"Q": None, "R": (0, (k, n))}
    kq = m if mode == "complete" else k
    return {"Q": (0, (m, kq)), "R": (m * kq, (kq, n))}


def _qr_factors_ref(a, mode: str = "reduced"):
    xp = array_namespace(a)
    lead = tuple(a.shape[:-2])
    if mode == "r":
        return _pack(xp, lead, xp.linalg.qr(a, mode="r"))
    q, r = xp.linalg.qr(a, mode=mode)
    return _pack(xp, lead, q, r)


QR_FACTORS = defop(name="qr_factors", kind=OPAQUE, inputs=("a",), params=("mode",), node=None,
                   ref=_qr_factors_ref, samples=S.qr_factors,
                   doc="``Q | R`` of each matrix, packed along one last dim (``R`` alone in "
                       "mode ``'r'``); no gradient")


def qr_backward(gQ, gR, Q: Tensor, R: Tensor, mode: str = "reduced"):
    """PyTorch's ``linalg_qr_backward`` (real case): the gradient of ``A = Q R`` for the
    gradients ``gQ``, ``gR`` of its factors (each ``None`` where unused)."""
    from .padding import pad

    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when "
                           "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going "
                           "to differentiate through linalg.qr.")
    m, n = Q.shape[-2], R.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and "
                           "nrows > ncols.")
    if gQ is None and gR is None:
        return None
    if gQ is not None:
        gA = gR @ R.mT - Q.mT @ gQ if gR is not None else -(Q.mT @ gQ)
    else:
        gA = gR @ R.mT
    if m >= n:
        X = gA.triu()
        # syminvadj: X + X^T with the diagonal halved (X's own diagonal)
        gA = Q @ (X + X.mT - X.diagonal(0, -2, -1).diag_embed())
        if gQ is not None:
            gA = gA + gQ
        return solve_triangular(R.mT, gA, upper=False, left=False)
    X = -gA
    gA = Q @ (X - X.mT).tril()
    gA = solve_triangular(R.narrow(-1, 0, m).mT, gA, upper=False, left=False)
    gA = pad(gA, (0, n - m))
    if gR is not None:
        gA = gA + Q @ gR
    return gA


def _qr_vjp(field: str):
    def vjp(g, ins, out, p, n):
        a, factors = ins
        if not n[0]:
            return (None, None)
        if p["mode"] == "r":
            qr_backward(None, g, None, None, "r")  # raises PyTorch's error
        Q, R = _parts((QR_Q, QR_R), a, factors, p)
        grads = {"Q": None, "R": None}
        grads[field] = g
        return (qr_backward(grads["Q"], grads["R"], Q, R, p["mode"]), None)
    return vjp


QR_Q = _part_op("qr_q", "LinalgQrBackward0", QR_FACTORS, "Q", _qr_layout, _qr_vjp("Q"),
                S.qr_part("Q"))
QR_R = _part_op("qr_r", "LinalgQrBackward0", QR_FACTORS, "R", _qr_layout, _qr_vjp("R"),
                S.qr_part("R"))
api(QR_Q, QR_R)(qr_backward)


@api(QR_FACTORS)
def qr_factors(A: Tensor, mode: str = "reduced") -> Tensor:
    """The packed output of ``qr_factors`` (what the public functions split)."""
    return call(QR_FACTORS, (A,), {"mode": mode})


@api(QR_FACTORS, QR_Q, QR_R)
def linalg_qr(A: Tensor, mode: str = "reduced", *, out=None) -> return_linalg_qr:
    """``(Q, R)`` with ``A = Q @ R``, ``Q`` with orthonormal columns and ``R`` upper
    triangular, for each matrix of ``A`` (``torch.linalg.qr``); ``mode``: ``'reduced'``
    (``Q`` m x k, ``R`` k x n, ``k = min(m, n)``), ``'complete'`` (``Q`` m x m, ``R`` m x n)
    or ``'r'`` (``R`` alone, ``Q`` empty; not differentiable). LAPACK's Householder signs
    (``R``'s diagonal may be negative), as PyTorch's.

    >>> import jitgrad
    >>> jitgrad.linalg.qr(jitgrad.tensor([[2.0, 1.0], [0.0, 3.0]])).R.abs()
    tensor([[2., 1.],
            [0., 3.]])
    """
    A = as_tensor_arg(A, "A")
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'")
    _check("linalg.qr", A, "geqrf_cpu")
    p = {"mode": mode}
    f = call(QR_FACTORS, (A,), p)
    r = return_linalg_qr(*_parts((QR_Q, QR_R), A, f, p))
    if out is not None:
        return return_linalg_qr(*_write_outs(out, r, "linalg.qr"))
    return r


@api(QR_FACTORS, QR_Q, QR_R, method="qr", export="qr")
def qr(input: Tensor, some: bool = True, *, out=None) -> return_qr:
    """The old ``torch.qr``: :func:`linalg_qr` with ``mode='reduced'`` (``some``) or
    ``'complete'``."""
    Q, R = linalg_qr(input, "reduced" if some else "complete")
    r = return_qr(Q, R)
    if out is not None:
        return return_qr(*_write_outs(out, r, "qr"))
    return r


# ------------------------------------------------------------------------------- eigh
def _eigh_layout(shape, UPLO: str = "L", compute_v: bool = True) -> dict:
    n = shape[-1]
    if not compute_v:
        return {"eigenvalues": (0, (n,))}
    return {"eigenvalues": (0, (n,)), "eigenvectors": (n, (n, n))}


def _eigh_factors_ref(a, UPLO: str = "L", compute_v: bool = True):  # noqa: N803 - PyTorch's
    xp = array_namespace(a)
    try:
        if not compute_v:
            return xp.asarray(xp.linalg.eigvalsh(a, UPLO=UPLO).astype(a.dtype, copy=False))
        w, v = xp.linalg.eigh(a, UPLO=UPLO)
    except np.linalg.LinAlgError:
        raise LinAlgError("linalg.eigh: The algorithm failed to converge because the input "
                          "matrix is ill-conditioned or has too many repeated eigenvalues."
                          ) from None
    return _pack(xp, tuple(a.shape[:-2]), w.astype(a.dtype, copy=False), v)


EIGH_FACTORS = defop(name="eigh_factors", kind=OPAQUE, inputs=("a",),
                     params=("UPLO", "compute_v"), node=None, ref=_eigh_factors_ref,
                     samples=S.eigh_factors,
                     doc="``eigenvalues | eigenvectors`` of each symmetric matrix (its "
                         "``UPLO`` triangle), packed along one last dim (the eigenvalues "
                         "alone without ``compute_v``); no gradient")


def eigh_backward(gL, gV, L: Tensor, V: Tensor):
    """PyTorch's ``linalg_eig_backward`` for a real symmetric matrix: the gradient of
    ``A = V diag(L) V^T`` for the gradients ``gL``, ``gV`` of the eigenvalues and
    eigenvectors (each ``None`` where unused)."""
    from ..creation import eye
    from .diagonals import diag_embed

    if gV is None:
        if gL is None:
            return None
        return (V * gL.unsqueeze(-2)) @ V.mT
    VhgV = V.mT @ gV
    VhgV = 0.5 * (VhgV - VhgV.mT)
    n = L.shape[-1]
    E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye(n, dtype=L.dtype, device=L.device)
    ret = VhgV / E
    if gL is not None:  # (ret's diagonal is 0: gL is PyTorch's diagonal)
        ret = ret + diag_embed(gL)
    return V @ (ret @ V.mT)


def _eigh_vjp(field: str):
    def vjp(g, ins, out, p, n):
        a, factors = ins
        if not n[0]:
            return (None, None)
        if not p["compute_v"]:  # (not recorded so: eigvalsh computes V when A needs grad)
            p = {"UPLO": p["UPLO"], "compute_v": True}
            factors = call(EIGH_FACTORS, (a,), p)
        L, V = _parts((EIGH_VALUES, EIGH_VECTORS), a, factors, p)
        if field == "eigenvalues":
            return (eigh_backward(g, None, L, V), None)
        return (eigh_backward(None, g, L, V), None)
    return vjp


EIGH_VALUES = _part_op("eigh_values", "LinalgEighBackward0", EIGH_FACTORS, "eigenvalues",
                       _eigh_layout, _eigh_vjp("eigenvalues"), S.eigh_part("eigenvalues"))
EIGH_VECTORS = _part_op("eigh_vectors", "LinalgEighBackward0", EIGH_FACTORS, "eigenvectors",
                        _eigh_layout, _eigh_vjp("eigenvectors"), S.eigh_part("eigenvectors"))
api(EIGH_VALUES, EIGH_VECTORS)(eigh_backward)


def _uplo(UPLO: str) -> str:  # noqa: N803 - PyTorch's name
    u = UPLO.upper() if isinstance(UPLO, str) else UPLO
    if u not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return u


@api(EIGH_FACTORS)
def eigh_factors(A: Tensor, UPLO: str = "L", compute_v: bool = True) -> Tensor:  # noqa: N803
    """The packed output of ``eigh_factors`` (what the public functions split)."""
    return call(EIGH_FACTORS, (A,), {"UPLO": UPLO, "compute_v": bool(compute_v)})


@api(EIGH_FACTORS, EIGH_VALUES, EIGH_VECTORS)
def eigh(A: Tensor, UPLO: str = "L", *, out=None) -> return_linalg_eigh:  # noqa: N803
    """``(eigenvalues, eigenvectors)`` of each symmetric matrix of ``A``, read from its
    lower (``UPLO='L'``) or upper triangle (``torch.linalg.eigh``): the eigenvalues
    ascending, the eigenvectors the columns of an orthogonal matrix (each up to sign).
    Differentiable as PyTorch's (distinct eigenvalues for a loss of the eigenvectors).

    >>> import jitgrad
    >>> jitgrad.linalg.eigh(jitgrad.tensor([[2.0, 1.0], [1.0, 2.0]])).eigenvalues
    tensor([1., 3.])
    """
    A = as_tensor_arg(A, "A")
    _check("linalg.eigh", A, "linalg_eigh_cpu", square=True, int_error="not_implemented")
    p = {"UPLO": _uplo(UPLO), "compute_v": True}
    f = call(EIGH_FACTORS, (A,), p)
    r = return_linalg_eigh(*_parts((EIGH_VALUES, EIGH_VECTORS), A, f, p))
    if out is not None:
        return return_linalg_eigh(*_write_outs(out, r, "linalg.eigh"))
    return r


@api(EIGH_FACTORS, EIGH_VALUES)
def eigvalsh(A: Tensor, UPLO: str = "L", *, out=None) -> Tensor:  # noqa: N803
    """The eigenvalues of each symmetric matrix of ``A``, ascending
    (``torch.linalg.eigvalsh``); the eigenvectors are computed too when ``A`` requires grad
    (the gradient needs them: ``V diag(gL) V^T``)."""
    A = as_tensor_arg(A, "A")
    _check("linalg.eigh", A, "linalg_eigh_cpu", square=True, int_error="not_implemented")
    p = {"UPLO": _uplo(UPLO), "compute_v": _needs_grad(A)}
    r = call(EIGH_VALUES, (A, call(EIGH_FACTORS, (A,), p)), p)
    if out is not None:
        from .inplace import write_out

        return write_out(out, r, "linalg.eigvalsh")
    return r


# ------------------------------------------------------------------------ triangular
def _substitute(t, b):
    """``t^-1 b`` for upper triangular ``t`` by back substitution, row by row (a zero on
    the diagonal: ``inf`` / ``nan``, as BLAS ``trsm``)."""
    xp = array_namespace(t, b)
    lead = np.broadcast_shapes(t.shape[:-2], b.shape[:-2])
    n, k = t.shape[-1], b.shape[-1]
    t = xp.broadcast_to(t, lead + (n, n))
    b = xp.broadcast_to(b, lead + (n, k))
    x = xp.empty(lead + (n, k), dtype=b.dtype)
    with np.errstate(all="ignore"):
        for i in range(n - 1, -1, -1):
            s = b[..., i, :] - (t[..., i, i + 1:, None] * x[..., i + 1:, :]).sum(-2)
            x[..., i, :] = s / t[..., i, i, None]
    return x


def _solve_triangular_ref(a, b, upper: bool, left: bool = True, unitriangular: bool = False):
    xp = array_namespace(a, b)
    if not left:  # X A = B: A^T X^T = B^T
        return xp.swapaxes(_solve_triangular_ref(xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2),
                                                 not upper, True, unitriangular), -1, -2)
    t = xp.triu(a) if upper else xp.tril(a)
    if unitriangular:
        i = xp.arange(a.shape[-1])
        t[..., i, i] = 1
    b = b.astype(a.dtype, copy=False)
    if not upper:  # reversed rows and columns, a lower triangle is an upper one
        t, b = t[..., ::-1, ::-1], b[..., ::-1, :]
    try:
        # LU with partial pivoting exchanges no rows of an upper triangle: back substitution
        x = xp.linalg.solve(t, b)
    except np.linalg.LinAlgError:  # a zero on the diagonal
        x = _substitute(t, b)
    x = x if upper else x[..., ::-1, :]
    return xp.ascontiguousarray(x)


def _solve_triangular_vjp(g, ins, out, p, n):
    a, _ = ins
    upper, left, unit = p["upper"], p["left"], p["unitriangular"]
    gb = solve_triangular(a.mT, g, upper=not upper, left=left, unitriangular=unit)
    ga = None
    if n[0]:
        ga = -(gb @ out.mT) if left else -(out.mT @ gb)
        ga = ga.triu(int(unit)) if upper else ga.tril(-int(unit))
    return (ga, gb if n[1] else None)


SOLVE_TRIANGULAR = defop(name="solve_triangular", kind=OPAQUE, inputs=("a", "b"),
                         params=("upper", "left", "unitriangular"),
                         node="LinalgSolveTriangularBackward0", ref=_solve_triangular_ref,
                         vjp=_solve_triangular_vjp, save=(0,), save_out=True, cast_grads=True,
                         samples=S.solve_triangular)


@api(SOLVE_TRIANGULAR)
def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False, out=None) -> Tensor:
    """``X`` with ``A X = B`` (``left``) or ``X A = B``, reading only the upper (``upper``)
    or lower triangle of ``A`` (and taking its diagonal as ones: ``unitriangular``); batch
    dims broadcast (``torch.linalg.solve_triangular``). The gradient of ``A`` is on that
    triangle, as PyTorch's."""
    A, B = as_tensor_arg(A, "A"), as_tensor_arg(B, "B")
    if A.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor A must have at least 2 "
                           "dimensions.")
    if B.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 "
                           "dimensions.")
    if not (A.dtype.is_floating_point and A.dtype.np.itemsize >= 4):
        raise NotImplementedError(f"\"triangular_solve_cpu\" not implemented for "
                                  f"'{_type_name(A)}'")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.solve_triangular: A must be batches of square matrices, "
                           f"but they are {A.shape[-2]} by {A.shape[-1]} matrices")
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the "
                           f"equation {'AX = B' if left else 'XA = B'} ({n}x{n} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    np.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))  # PyTorch's error if not
    if B.dtype != A.dtype:
        B = B.to(A.dtype)  # (PyTorch's result has A's dtype)
    r = call(SOLVE_TRIANGULAR, (A, B), {"upper": bool(upper), "left": bool(left),
                                        "unitriangular": bool(unitriangular)})
    if out is not None:
        from .inplace import write_out

        return write_out(out, r, "linalg.solve_triangular")
    return r


# ------------------------------------------------------------------------------- pinv
def _tolerances(xp, a, atol, rtol):
    """PyTorch's ``atol`` / ``rtol`` of ``pinv`` and ``matrix_rank`` as arrays of the batch
    shape: no ``atol`` is 0; no ``rtol`` is ``eps * max(m, n)`` where ``atol`` is not
    positive, else 0."""
    m, n = a.shape[-2:]
    real = np.dtype(a.dtype)
    lead = tuple(a.shape[:-2])
    atol = xp.zeros(lead, real) if atol is None else xp.broadcast_to(
        xp.asarray(atol, dtype=real), lead)
    if rtol is None:
        default = np.finfo(real).eps * max(m, n)
        rtol = xp.where(atol > 0, real.type(0), real.type(default))
    else:
        rtol = xp.broadcast_to(xp.asarray(rtol, dtype=real), lead)
    return atol, rtol


def _pinv_ref(a, atol=None, rtol=None, hermitian: bool = False):
    xp = array_namespace(a)
    m, n = a.shape[-2:]
    if a.size == 0:
        return xp.zeros(tuple(a.shape[:-2]) + (n, m), a.dtype)
    atol, rtol = _tolerances(xp, a, atol, rtol)
    with np.errstate(divide="ignore"):
        if hermitian:
            w, v = (xp.asarray(x) for x in xp.linalg.eigh(a))  # (the simulator's: host)
            s = xp.abs(w)
            tol = xp.maximum(atol[..., None], rtol[..., None] * s.max(-1, keepdims=True))
            winv = xp.where(s > tol, 1 / w, 0).astype(a.dtype, copy=False)
            return xp.asarray((v * winv[..., None, :]) @ xp.swapaxes(v, -1, -2))
        try:
            u, s, vh = (xp.asarray(x) for x in xp.linalg.svd(a, full_matrices=False))
        except np.linalg.LinAlgError:
            raise _svd_error(xp, a) from None
        tol = xp.maximum(atol[..., None], rtol[..., None] * s[..., :1])
        sinv = xp.where(s > tol, 1 / s, 0).astype(a.dtype, copy=False)
    return xp.asarray((xp.swapaxes(vh, -1, -2) * sinv[..., None, :]) @ xp.swapaxes(u, -1, -2))


def pinv_backward(g: Tensor, pinvA: Tensor, A: Tensor) -> Tensor:  # noqa: N803 - PyTorch's
    """PyTorch's ``pinv_backward``: the gradient of ``A`` from that of ``pinv(A)``
    (exact where the rank is constant around ``A``)."""
    m, n = A.shape[-2:]
    pinvAh, gh = pinvA.mT, g.mT
    if m <= n:
        K = gh @ pinvA
        KpinvAh = K @ pinvAh
        return (-(pinvA @ K).mT + KpinvAh - (A @ pinvA) @ KpinvAh
                + (pinvAh @ pinvA) @ (gh - K @ A))
    K = pinvA @ gh
    pinvAhK = pinvAh @ K
    return (-(K @ pinvA).mT + (gh - A @ K) @ pinvA @ pinvAh + pinvAhK
            - pinvAhK @ pinvA @ A)


PINV = defop(name="pinv", kind=OPAQUE, inputs=("a", "atol", "rtol"), params=("hermitian",),
             node="LinalgPinvBackward0", ref=_pinv_ref, save=(0,), save_out=True,
             vjp=lambda g, ins, out, p, n: (pinv_backward(g, out, ins[0]), None, None),
             samples=S.pinv)
api(PINV)(pinv_backward)


def _tol_tensor(x, A: Tensor) -> Tensor:
    from ..creation import tensor

    if isinstance(x, Tensor):
        return x.detach().to(A.dtype)
    return tensor(float(x), dtype=A.dtype, device=A.device)


@api(PINV)
def pinv(A: Tensor, rcond=None, hermitian: bool = False, *, atol=None, rtol=None,
         out=None) -> Tensor:
    """The pseudo-inverse of each matrix of ``A`` (``torch.linalg.pinv``): through its SVD
    (``hermitian``: the eigendecomposition of its lower triangle), singular values not above
    ``max(atol, rtol * largest)`` taken as zero; no ``atol`` is 0, no ``rtol``
    ``eps * max(m, n)`` (0 where ``atol`` is positive); ``rcond`` is the old name of
    ``rtol``. The gradient is PyTorch's ``pinv_backward``."""
    A = as_tensor_arg(A, "A")
    if A.ndim < 2 or not (A.dtype.is_floating_point and A.dtype.np.itemsize >= 4):
        raise RuntimeError(f"linalg.pinv({_type_name(A)}{{{list(A.shape)}}}): expected a tensor "
                           f"with 2 or more dimensions of float, double, cfloat or cdouble "
                           f"types")
    if rcond is not None:
        if rtol is not None:
            raise RuntimeError("linalg.pinv: rcond and rtol are the same argument; give one")
        rtol = rcond
    if hermitian:
        _check("linalg.eigh", A, "linalg_eigh_cpu", square=True)
    m, n = A.shape[-2:]
    atol_t = _tol_tensor(0.0 if atol is None else atol, A)
    if rtol is not None:
        rtol_t = _tol_tensor(rtol, A)
    else:
        default = float(np.finfo(A.dtype.np).eps) * max(m, n)
        rtol_t = _tol_tensor(default, A)
        if atol is not None:
            from .selection import where

            rtol_t = where(atol_t > 0, 0.0, rtol_t)
    r = call(PINV, (A, atol_t, rtol_t), {"hermitian": bool(hermitian)})
    if out is not None:
        from .inplace import write_out

        return write_out(out, r, "linalg.pinv")
    return r


@api(PINV, method="pinverse", export="pinverse")
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: :func:`pinv` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond)


# ----------------------------------------------------------------- rank and lstsq
def _not_float(A: Tensor) -> bool:
    return not (A.dtype.is_floating_point and A.dtype.np.itemsize >= 4)


def _rank_from(S_: Tensor, atol, rtol, A: Tensor) -> Tensor:
    """The number of singular values above ``max(atol, rtol * largest)`` (PyTorch's
    defaults: see :func:`_tolerances`), as int64."""
    from .selection import maximum, where

    m, n = A.shape[-2:]
    if S_.shape[-1] == 0:
        return (S_ > 0).sum(-1)
    atol_t = _tol_tensor(0.0 if atol is None else atol, A)
    if rtol is None:
        rtol_t = _tol_tensor(float(np.finfo(A.dtype.np).eps) * max(m, n), A)
        if atol is not None:
            rtol_t = where(atol_t > 0, 0.0, rtol_t)
    else:
        rtol_t = _tol_tensor(rtol, A)
    tol = maximum(atol_t.unsqueeze(-1), rtol_t.unsqueeze(-1) * S_.amax(-1, keepdim=True))
    return (S_ > tol).sum(-1)


@api(SVD_FACTORS, SVD_S, EIGH_FACTORS, EIGH_VALUES)
def matrix_rank(A: Tensor, tol=None, hermitian: bool = False, *, atol=None, rtol=None,
                out=None) -> Tensor:
    """The numerical rank of each matrix of ``A`` (``torch.linalg.matrix_rank``, int64):
    its singular values (``hermitian``: the absolute eigenvalues) above
    ``max(atol, rtol * largest)``, with :func:`pinv`'s defaults; ``tol`` is the old name of
    ``atol`` (with ``rtol`` 0)."""
    from ..autograd.grad_mode import no_grad

    A = as_tensor_arg(A, "A")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least "
                           "2 dimensions.")
    if _not_float(A):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if tol is not None:
        if atol is not None or rtol is not None:
            raise RuntimeError("torch.linalg.matrix_rank: tol is the old name of atol; give "
                               "atol and rtol instead")
        atol, rtol = tol, 0.0
    with no_grad():
        S_ = eigvalsh(A).abs() if hermitian else svdvals(A)
        r = _rank_from(S_, atol, rtol, A)
    if out is not None:
        from .inplace import write_out

        return write_out(out, r, "linalg.matrix_rank")
    return r


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@api(PINV, MATMUL, SVD_FACTORS, SVD_S)
def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *,
          driver: str | None = None) -> return_linalg_lstsq:
    """The least-squares solution ``X`` of ``A X = B`` for each matrix of ``A``, the minimum
    norm one where ``A`` is rank deficient (``torch.linalg.lstsq``; ``B`` a vector (batch)
    where it has one dim less than ``A``). Returns ``(solution, residuals, rank,
    singular_values)`` as PyTorch's CPU drivers do: ``residuals`` (``||A X - B||^2`` per
    column) for a tall ``A`` of full rank with drivers other than ``'gelsy'`` (the
    default), ``rank`` but for ``'gels'``, ``singular_values`` for ``'gelsd'`` /
    ``'gelss'``; ``rcond`` (default ``eps * max(m, n)``) sets the rank.

    The solution is ``pinv(A) @ B`` (its rank cut as ``rcond`` says; ``'gels'``: none), so
    its gradient is PyTorch's (``pinv_backward``); its node is the product's."""
    from ..autograd.grad_mode import no_grad
    from ..creation import empty
    from .linalg import matmul

    A, B = as_tensor_arg(A, "input"), as_tensor_arg(B, "other")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if B.ndim < 1:
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    if _not_float(A):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if A.dtype != B.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same "
                           f"dtype, but got input's dtype {_type_name(A)} and other's dtype "
                           f"{_type_name(B)}")
    if not (A.ndim >= B.ndim and A.ndim - B.ndim <= 1):
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to "
                           "other.dim() and (input.dim() - other.dim()) <= 1")
    vector = B.ndim == A.ndim - 1
    if A.shape[-2] != (B.shape[-1] if vector else B.shape[-2]):
        raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match "
                           f"other.size({-1 if vector else -2})")
    if driver is None:
        driver = "gelsy" if A.device.type == "cpu" else "gels"
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, "
                           "gelsy, gelsd, gelss)")
    m, n = A.shape[-2:]
    b = B.unsqueeze(-1) if vector else B
    cut = 0.0 if driver == "gels" else rcond if rcond is not None and rcond > 0 else None
    X = matmul(pinv(A, rtol=cut), b)
    with no_grad():
        S_ = svdvals(A) if driver != "gels" else None
        rank = _rank_from(S_, None, rcond if rcond is not None and rcond > 0 else None, A) \
            if S_ is not None else empty(0, dtype=_int64(), device=A.device)
    residuals = empty(0, dtype=A.dtype, device=A.device)
    if m > n and driver != "gelsy" and driver != "gels":
        needs_value(rank, "lstsq's rank (residuals are returned for full-rank inputs only)")
    if m > n and driver != "gelsy" and (
            driver == "gels" or not any_true(rank != min(m, n))):
        residuals = ((matmul(A, X) - b) ** 2).sum(-2)  # (a vector B: one column, kept)
    sv = S_ if driver in ("gelsd", "gelss") else empty(0, dtype=A.dtype, device=A.device)
    return return_linalg_lstsq(X.squeeze(-1) if vector else X, residuals, rank, sv)


def _int64():
    from .. import dtypes

    return dtypes.int64


# -------------------------------------------------------------------------- matrix_exp
#: Higham's degree-13 Pade approximant (Higham 2005, "The scaling and squaring method for
#: the matrix exponential revisited"): its coefficients and the 1-norm it is accurate to
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
           1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
           33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _matrix_exp_ref(a):
    """``exp(a)`` of each matrix by scaling and squaring with the degree-13 Pade
    approximant, in float64 / complex128 (rounded to ``a``'s dtype once)."""
    xp = array_namespace(a)
    n = a.shape[-1]
    if a.size == 0:
        return xp.asarray(xp.zeros(a.shape, a.dtype))
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    x = a.astype(wide)
    with np.errstate(all="ignore"):
        norm = xp.abs(x).sum(-2).max(-1)  # the 1-norm of each matrix
        finite = xp.isfinite(norm)
        scale = xp.ceil(xp.log2(xp.where(finite, norm, 0.0) / _THETA13))
        s = xp.where(finite & (scale > 0), scale, 0.0).astype(np.int64)
        x = x / (2.0 ** s)[..., None, None]
        b = _PADE13
        eye = xp.eye(n, dtype=wide)
        x2 = x @ x
        x4 = x2 @ x2
        x6 = x4 @ x2
        u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4
                 + b[3] * x2 + b[1] * eye)
        v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 \
            + b[0] * eye
        try:
            r = xp.linalg.solve(v - u, v + u)
        except np.linalg.LinAlgError:  # (non-finite input)
            r = xp.full(x.shape, np.nan)
        top = int(s.max()) if s.size else 0
        for i in range(top):  # each matrix squared its own number of times
            r = xp.where((s > i)[..., None, None], r @ r, r)
        r = xp.where(finite[..., None, None], r, np.nan)
    return xp.asarray(r.astype(a.dtype))


def _matrix_exp_vjp(g, ins, out, p, n):
    """PyTorch's ``linalg_matrix_exp_differential`` (adjoint): the top-right block of
    ``exp([[A^T, g], [0, A^T]])`` (Mathias 1996)."""
    from ..creation import zeros_like
    from .concat import cat

    at = ins[0].mT
    k = at.shape[-1]
    big = cat([cat([at, g], -1), cat([zeros_like(at), at], -1)], -2)
    return (matrix_exp(big).narrow(-2, 0, k).narrow(-1, k, k),)


MATRIX_EXP = defop(name="matrix_exp", kind=OPAQUE, inputs=("a",),
                   node="LinalgMatrixExpBackward0", ref=_matrix_exp_ref, vjp=_matrix_exp_vjp,
                   save=(0,), samples=S.matrix_exp, complex="holomorphic")


@api(MATRIX_EXP, method="matrix_exp", export="matrix_exp")
def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential of each square matrix of ``A`` (``torch.linalg.matrix_exp``):
    scaling and squaring with Higham's degree-13 Pade approximant, in float64 (complex128
    for complex matrices). Its gradient is PyTorch's: the exponential of a block matrix
    twice the size (of ``A^H`` for complex ``A``: the holomorphic rule runs on ``conj(A)``)."""
    A = as_tensor_arg(A, "A")
    _check("linalg.matrix_exp", A, None, square=True, complex_ok=True)
    return call(MATRIX_EXP, (A,))


# ---------------------------------------------------------- cholesky_ex and inv_ex
def _batch_str(a, i: int) -> str:
    return f"(Batch element {i}): " if a.ndim > 2 else ""


def _positive_definite(xp, m) -> bool:
    try:
        return bool(xp.isfinite(xp.linalg.cholesky(m)).all())  # (CuPy gives NaNs, no error)
    except np.linalg.LinAlgError:
        return False


def _cholesky_ex_ref(a, upper: bool = False):
    """``L | info`` of each matrix: its Cholesky factor (``upper``: transposed) and LAPACK's
    ``info``, the order of the first leading minor that is not positive-definite (0: none).
    ``L`` of a failing matrix is its lower triangle with the factor of the leading minors
    that are (PyTorch's ``L`` is LAPACK's partial work there: garbage either way)."""
    xp = array_namespace(a)
    n = a.shape[-1]
    lead = tuple(a.shape[:-2])
    try:
        low = xp.linalg.cholesky(a)
        info = xp.zeros(lead, a.dtype)
        ok = bool(xp.isfinite(low).all())  # (CuPy: NaNs, no error; NaN inputs: no error)
    except np.linalg.LinAlgError:
        ok = False
    if not ok:
        flat = a.reshape((-1, n, n))
        low = xp.tril(flat)
        info = xp.zeros(flat.shape[0], a.dtype)
        for i in range(flat.shape[0]):
            if _positive_definite(xp, flat[i]):
                low[i] = xp.linalg.cholesky(flat[i])
                continue
            lo, hi = 0, n  # the order-lo minor is positive-definite, the order-hi one is not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if _positive_definite(xp, flat[i][:mid, :mid]) else (lo, mid)
            if lo:
                low[i][:lo, :lo] = xp.linalg.cholesky(flat[i][:lo, :lo])
            info[i] = hi
        low, info = low.reshape(a.shape), info.reshape(lead)
    if upper:
        low = xp.swapaxes(low, -1, -2)
    return _pack(xp, lead, xp.asarray(low), xp.asarray(info))


def _cholesky_error(a, name: str) -> LinAlgError | None:
    """PyTorch's error for matrices that are not all positive-definite: the first failing
    one's batch element and the order of its first leading minor that is not (None: all
    are)."""
    n = a.shape[-1]
    info = [int(v) for v in np.asarray(_cholesky_ex_ref(a)[..., n * n].tolist()).reshape(-1)]
    i = next((j for j, k in enumerate(info) if k), None)
    if i is None:
        return None
    return LinAlgError(f"{name}: {_batch_str(a, i)}The factorization could not be completed "
                       f"because the input is not positive-definite (the leading minor of "
                       f"order {info[i]} is not positive-definite).")


def _lu_info(xp, m) -> int:
    """LAPACK ``getrf``'s ``info`` of a matrix LAPACK found singular: the (1-based) column of
    the first zero pivot of its LU factorisation with partial pivoting
    (:func:`jitgrad.ops.lu.singular_info`)."""
    from .lu import singular_info

    return singular_info(m)[0]


def _try_inv(xp, a):
    """``a``'s inverse, or None where LAPACK finds it singular (NumPy raises; CuPy gives
    non-finite values for a finite input)."""
    try:
        with np.errstate(all="ignore"):
            r = xp.linalg.inv(a)
    except np.linalg.LinAlgError:
        return None
    if not bool(xp.isfinite(r).all()) and bool(xp.isfinite(a).all()):
        return None
    return r


def _inv_ex_ref(a):
    """``inverse | info`` of each matrix: its inverse and LAPACK's ``info`` (the first zero
    pivot of its LU factorisation, 0: none); a singular matrix's inverse is NaN (PyTorch's is
    LAPACK's partial work: garbage either way)."""
    xp = array_namespace(a)
    n = a.shape[-1]
    lead = tuple(a.shape[:-2])
    inv_ = _try_inv(xp, a)
    info = xp.zeros(lead, a.dtype)
    if inv_ is None:
        flat = a.reshape((-1, n, n))
        inv_ = xp.full(flat.shape, np.nan, dtype=a.dtype)
        info = xp.zeros(flat.shape[0], a.dtype)
        for i in range(flat.shape[0]):
            r = _try_inv(xp, flat[i])
            if r is None:
                info[i] = _lu_info(xp, flat[i])
            else:
                inv_[i] = r
        inv_, info = inv_.reshape(a.shape), info.reshape(lead)
    return _pack(xp, lead, xp.asarray(inv_), xp.asarray(info))


def _ex_layout(shape, upper: bool = False) -> dict:
    n = shape[-1]
    return {"factor": (0, (n, n)), "info": (n * n, ())}


CHOLESKY_EX_FACTORS = defop(name="cholesky_ex_factors", kind=OPAQUE, inputs=("a",), node=None,
                            params=("upper",), ref=_cholesky_ex_ref,
                            samples=S.cholesky_ex_part(False, packed=True),
                            doc="``L | info`` of each matrix, packed along one last dim; no "
                                "gradient")
INV_EX_FACTORS = defop(name="inv_ex_factors", kind=OPAQUE, inputs=("a",), node=None,
                       ref=_inv_ex_ref, samples=S.square_matrices(2.0),
                       doc="``inverse | info`` of each matrix, packed along one last dim; no "
                           "gradient")


def _cholesky_ex_vjp(g, ins, out, p, n):
    from .matrix_functions import _cholesky_vjp

    a, factors = ins
    if not n[0]:
        return (None, None)
    low = call(CHOLESKY_EX_L, (a, factors), p)
    if p["upper"]:
        low, g = low.mT, g.mT
    return (_cholesky_vjp(g, (a,), low, p, n)[0], None)


def _inv_ex_vjp(g, ins, out, p, n):
    a, factors = ins
    if not n[0]:
        return (None, None)
    x = call(INV_EX_INVERSE, (a, factors)).mT
    return (-(x @ g @ x), None)


CHOLESKY_EX_L = _part_op("cholesky_ex_l", "LinalgCholeskyExBackward0", CHOLESKY_EX_FACTORS,
                         "factor", _ex_layout, _cholesky_ex_vjp,
                         S.cholesky_ex_part(False))
CHOLESKY_EX_INFO = _part_op("cholesky_ex_info", None, CHOLESKY_EX_FACTORS, "info",
                            _ex_layout, None, S.cholesky_ex_part(True),
                            dtype=np.int32)
INV_EX_INVERSE = _part_op("inv_ex_inverse", "LinalgInvExBackward0", INV_EX_FACTORS, "factor",
                          _ex_layout, _inv_ex_vjp, S.inv_ex_part(False))
INV_EX_INFO = _part_op("inv_ex_info", None, INV_EX_FACTORS, "info",
                       _ex_layout, None, S.inv_ex_part(True),
                       dtype=np.int32)


def _raise_for_info(info: Tensor, A: Tensor, message) -> None:
    """``check_errors``: PyTorch's error for the first matrix whose ``info`` is not 0 (reads
    the values: a graph break under ``jitgrad.compile``)."""
    flat = info.reshape(-1).tolist()
    for i, code in enumerate(flat):
        if code:
            raise LinAlgError(message(_batch_str(A, i), code))


@api(CHOLESKY_EX_FACTORS, CHOLESKY_EX_L, CHOLESKY_EX_INFO)
def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False,
                out=None) -> return_linalg_cholesky_ex:
    """``(L, info)``: the Cholesky factor of each symmetric positive-definite matrix of ``A``
    (``upper``: ``L^T``) and LAPACK's ``info`` (int32: 0, or the order of the first leading
    minor that is not positive-definite, where ``L`` is garbage) without raising, unless
    ``check_errors`` (``torch.linalg.cholesky_ex``). Differentiable as ``cholesky``."""
    A = as_tensor_arg(A, "A")
    _check("linalg.cholesky", A, "cholesky_cpu", square=True)
    p = {"upper": bool(upper)}
    f = call(CHOLESKY_EX_FACTORS, (A,), p)
    r = return_linalg_cholesky_ex(call(CHOLESKY_EX_L, (A, f), p),
                                  call(CHOLESKY_EX_INFO, (A, f), p))
    if check_errors:
        _raise_for_info(r.info, A, lambda where, k: (
            f"linalg.cholesky_ex: {where}The factorization could not be completed because the "
            f"input is not positive-definite (the leading minor of order {k} is not "
            f"positive-definite)."))
    if out is not None:
        return return_linalg_cholesky_ex(*_write_outs(out, r, "linalg.cholesky_ex"))
    return r


@api(INV_EX_FACTORS, INV_EX_INVERSE, INV_EX_INFO)
def inv_ex(A: Tensor, *, check_errors: bool = False, out=None) -> return_linalg_inv_ex:
    """``(inverse, info)``: the inverse of each square matrix of ``A`` and LAPACK's
    ``info`` (int32: 0, or the first zero pivot of its LU factorisation, where the inverse is
    garbage) without raising, unless ``check_errors`` (``torch.linalg.inv_ex``).
    Differentiable as ``inv``."""
    A = as_tensor_arg(A, "A")
    if A.ndim >= 2 and A.dtype.is_floating_point and A.dtype.np.itemsize < 4:
        raise RuntimeError(f"linalg.inv: Low precision dtypes not supported. Got "
                           f"{_type_name(A)}")
    _check("linalg.inv", A, None, square=True)
    f = call(INV_EX_FACTORS, (A,))
    r = return_linalg_inv_ex(call(INV_EX_INVERSE, (A, f)), call(INV_EX_INFO, (A, f)))
    if check_errors:
        _raise_for_info(r.info, A, lambda where, k: (
            f"linalg.inv_ex: {where}The diagonal element {k} is zero, the inversion could not "
            f"be completed because the input matrix is singular."))
    if out is not None:
        return return_linalg_inv_ex(*_write_outs(out, r, "linalg.inv_ex"))
    return r
