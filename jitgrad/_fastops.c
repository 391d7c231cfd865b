/* jitgrad._fastops: the eager arithmetic operators' common case in C (and ``renamer``, the
 * forwarding that lets functions take NumPy's argument names, near the end).
 *
 * ``x + y``, ``x - y``, ``x * y``, ``x / y`` (and ``other - x``) on a CPU tensor of float32 or
 * float64, C-contiguous and aligned, fewer than HOT_MIN_SIZE elements, with a tensor of
 * the same shape and dtype or a Python float/int: the case that jitgrad/ops/eager_fast.py's
 * Python operator computes inline (there for one dimension; the general path computes any
 * other shape with the same flat kernel and records the same node), building the same
 * output tensor and backward node (the same slots, edges, saved entries and versions, the
 * next sequence number). Anything else -- and every case this file is unsure of -- goes to that
 * Python operator, which is the reference (``fallback``).
 *
 * The arithmetic: each of these ops is one IEEE-754 operation per element, correctly rounded,
 * so this loop gives the bits of the op's generated Numba kernel (tested bit for bit).
 * Numbers are converted as the Python path converts them: a float to float32 by rounding
 * (values beyond float32's range, which C leaves undefined, go to the fallback), an int only
 * where the float type holds it exactly (|v| <= 2^24 / 2^53), else the fallback.
 *
 * Objects are made as ``object.__new__`` makes them (the type's tp_alloc) and their
 * ``__slots__`` set through the slot offsets read from the classes' member descriptors.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <float.h>
#include <math.h>
#include <stddef.h>

#define NPY_NO_DEPRECATED_API NPY_1_20_API_VERSION
#include <numpy/arrayobject.h>

/* ------------------------------------------------------------------ module state */
static PyTypeObject *tensor_type;                      /* jitgrad.Tensor */
static Py_ssize_t off_data, off_rg, off_gfn, off_grad, off_vc;
static PyObject *grad_off, *tracing, *hooks_open;      /* _thread_modes lists, node._HOOKS_OPEN */
static PyObject *grad_state, *next_seq;                /* grad_mode.STATE, node.next_seq */
static PyObject *str_enabled, *str_output_nr;
static PyArray_Descr *descr_f32, *descr_f64;
static npy_intp par_min = -1;                          /* -1: setup() not called */

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* unary ops: op -> (node class, save input, save output, has vjp, param names), registered
 * from Python */
static PyObject *unary_info, *unary_fallback, *str_fast_kernels;
static unsigned long long unary_hits, operator_hits;  /* calls computed here (tests, stats) */
static PyTypeObject *opnode_type;  /* every op's node class derives it, with its layout */
static Py_ssize_t noff_edges, noff_saved, noff_seq, noff_meta, noff_op, noff_params;

enum { K_ADD, K_SUB, K_RSUB, K_MUL, K_DIV, K_COUNT };

static int
slot_offset(PyObject *cls, const char *name, Py_ssize_t *off)
{
    PyObject *d = PyObject_GetAttrString(cls, name);
    if (d == NULL)
        return -1;
    if (Py_TYPE(d) != &PyMemberDescr_Type) {
        PyErr_Format(PyExc_TypeError, "_fastops: %R.%s is not a slot", cls, name);
        Py_DECREF(d);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "_fastops: %R.%s is not an object slot", cls, name);
        Py_DECREF(d);
        return -1;
    }
    *off = m->offset;
    Py_DECREF(d);
    return 0;
}

/* ------------------------------------------------------------------ the operator type */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int kind, save_a, save_b;
    PyTypeObject *node_type;
    PyObject *op;          /* the OpDef the node records */
    PyObject *fallback;    /* the Python operator(self, other) */
    PyObject *dict;        /* __name__, __doc__... */
} FastOp;

/* 1 true, 0 false, -1 unknown (unset slot or an error): the caller falls back */
static inline int
truth(PyObject *o)
{
    if (o == Py_True)
        return 1;
    if (o == Py_False)
        return 0;
    if (o == NULL)
        return -1;
    int r = PyObject_IsTrue(o);
    if (r < 0)
        PyErr_Clear();
    return r;
}

/* an ndarray (exactly) of dtype ``want``, C-contiguous and aligned, of shape (nd, dims) */
static inline int
plain_array(PyObject *d, PyArray_Descr *want, int nd, const npy_intp *dims)
{
    if (!PyArray_CheckExact(d))
        return 0;
    PyArrayObject *a = (PyArrayObject *)d;
    if (PyArray_DESCR(a) != want || PyArray_NDIM(a) != nd ||
        (PyArray_FLAGS(a) & (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED)) !=
            (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED))
        return 0;
    const npy_intp *ad = PyArray_DIMS(a);
    for (int i = 0; i < nd; i++)
        if (ad[i] != dims[i])
            return 0;
    return 1;
}

#define LOOP(T, EXPR)                                                                   \
    do {                                                                                \
        const T *restrict x = (const T *)pa;                                            \
        T *restrict o = (T *)po;                                                        \
        if (pb != NULL) {                                                               \
            const T *restrict y = (const T *)pb;                                        \
            for (npy_intp i = 0; i < n; i++) { T a_ = x[i], b_ = y[i]; o[i] = EXPR; }   \
        } else {                                                                        \
            const T b_ = (T)s;                                                          \
            for (npy_intp i = 0; i < n; i++) { T a_ = x[i]; o[i] = EXPR; }              \
        }                                                                               \
    } while (0)

#define KINDS(T)                                       \
    switch (kind) {                                    \
    case K_ADD:  LOOP(T, a_ + b_); break;              \
    case K_SUB:  LOOP(T, a_ - b_); break;              \
    case K_RSUB: LOOP(T, b_ - a_); break;              \
    case K_MUL:  LOOP(T, a_ * b_); break;              \
    default:     LOOP(T, a_ / b_); break;              \
    }

/* not inlined: on its own GCC vectorises each loop (inlined into fast() it left them scalar:
 * x * y at 16K float32 took 9.2 us, NumPy's multiply 2.3) */
__attribute__((noinline)) static void
compute(int kind, int f32, npy_intp n, const char *pa, const char *pb, double s, char *po)
{
    if (f32) {
        KINDS(float)
    } else {
        KINDS(double)
    }
}

/* the edge to input t: t itself (a leaf) or (grad_fn, output_nr); NULL on error */
static PyObject *
edge_of(PyObject *t)
{
    PyObject *fn = SLOT(t, off_gfn);
    if (fn == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_grad_fn");
        return NULL;
    }
    if (fn == Py_None) {
        Py_INCREF(t);
        return t;
    }
    PyObject *nr = PyObject_GetAttr(t, str_output_nr);
    if (nr == NULL)
        return NULL;
    PyObject *e = PyTuple_Pack(2, fn, nr);
    Py_DECREF(nr);
    return e;
}

/* (tensor, its version now); NULL on error */
static PyObject *
saved_entry(PyObject *t)
{
    PyObject *vc = SLOT(t, off_vc);
    if (vc == NULL || !PyList_CheckExact(vc) || PyList_GET_SIZE(vc) < 1) {
        PyErr_SetString(PyExc_RuntimeError, "_fastops: a tensor without a version counter");
        return NULL;
    }
    return PyTuple_Pack(2, t, PyList_GET_ITEM(vc, 0));
}

/* whether grad mode is on for this thread: 1, 0, or -1 (unknown: the caller falls back) */
static int
grad_enabled(void)
{
    if (PyList_GET_SIZE(grad_off) == 0)
        return 1;
    PyObject *en = PyObject_GetAttr(grad_state, str_enabled);
    if (en == NULL) {
        PyErr_Clear();
        return -1;
    }
    int r = truth(en);
    Py_DECREF(en);
    return r;
}

/* A new tensor holding ``arr`` (a new reference, stolen), version 0, no .grad; its
 * requires_grad and grad_fn slots are left for the caller. NULL on error. */
static PyObject *
new_tensor(PyObject *arr)
{
    PyObject *vc = PyList_New(1);
    PyObject *out = vc == NULL ? NULL : tensor_type->tp_alloc(tensor_type, 0);
    if (out == NULL) {
        Py_XDECREF(vc);
        Py_DECREF(arr);
        return NULL;
    }
    PyList_SET_ITEM(vc, 0, PyLong_FromLong(0));
    SLOT(out, off_data) = arr;
    SLOT(out, off_grad) = Py_NewRef(Py_None);
    SLOT(out, off_vc) = vc;
    return out;
}

/* A node of class ``type`` (an OpNode subclass: OpNode's slots) with ``edges`` and
 * ``saved`` (stolen, also on error), the next sequence number, ``op`` and ``params``, made
 * ``out``'s grad_fn. 0, or -1 on error. */
static int
attach_node(PyObject *out, PyTypeObject *type, PyObject *edges, PyObject *saved, PyObject *op,
            PyObject *params)
{
    PyObject *seq = PyObject_CallNoArgs(next_seq);
    PyObject *node = seq == NULL ? NULL : type->tp_alloc(type, 0);
    if (node == NULL) {
        Py_XDECREF(seq);
        Py_DECREF(edges);
        Py_DECREF(saved);
        return -1;
    }
    SLOT(node, noff_edges) = edges;
    SLOT(node, noff_saved) = saved;
    SLOT(node, noff_meta) = Py_NewRef(Py_None);
    SLOT(node, noff_seq) = seq;
    SLOT(node, noff_op) = Py_NewRef(op);
    SLOT(node, noff_params) = Py_NewRef(params);
    SLOT(out, off_rg) = Py_NewRef(Py_True);
    SLOT(out, off_gfn) = node;
    return 0;
}

/* The node of out = op(self, other); 0 on success (slots of out set), -1 on error. */
static int
record(FastOp *f, PyObject *out, PyObject *self, PyObject *other, int ra, int rb, int b_tensor)
{
    PyObject *ea = NULL, *eb = NULL, *edges = NULL, *saved = NULL, *sa = NULL, *sb = NULL;

    if (ra) {
        if ((ea = edge_of(self)) == NULL)
            goto fail;
    } else {
        ea = Py_NewRef(Py_None);
    }
    if (rb) {
        if ((eb = edge_of(other)) == NULL)
            goto fail;
    } else {
        eb = Py_NewRef(Py_None);
    }
    if ((edges = PyTuple_Pack(2, ea, eb)) == NULL)
        goto fail;
    /* save_a/save_b: 1 saved; 2 saved when the other operand requires grad (OpDef.save_for) */
    int sva = f->save_a == 1 || (f->save_a == 2 && rb);
    int svb = f->save_b == 1 || (f->save_b == 2 && ra);
    if (!(sva || svb)) {
        saved = Py_NewRef(Py_None);
    } else {
        if (sva) {
            if ((sa = saved_entry(self)) == NULL)
                goto fail;
        } else {
            sa = Py_NewRef(Py_None);
        }
        if (svb) {
            if (b_tensor) {
                if ((sb = saved_entry(other)) == NULL)
                    goto fail;
            } else {
                sb = Py_NewRef(other);
            }
        } else {
            sb = Py_NewRef(Py_None);
        }
        if ((saved = PyTuple_Pack(2, sa, sb)) == NULL)
            goto fail;
    }
    Py_DECREF(ea);
    Py_DECREF(eb);
    Py_XDECREF(sa);
    Py_XDECREF(sb);
    return attach_node(out, f->node_type, edges, saved, f->op, Py_None);
fail:
    Py_XDECREF(ea);
    Py_XDECREF(eb);
    Py_XDECREF(sa);
    Py_XDECREF(sb);
    Py_XDECREF(edges);
    Py_XDECREF(saved);
    return -1;
}

/* 1: *res is the result (or NULL with an error set); 0: not this case, nothing done */
static int
fast(FastOp *f, PyObject *self, PyObject *other, PyObject **res)
{
    if (Py_TYPE(self) != tensor_type || PyList_GET_SIZE(tracing) != 0)
        return 0;
    PyObject *ad = SLOT(self, off_data);
    if (ad == NULL || !PyArray_CheckExact(ad))
        return 0;
    PyArray_Descr *dt = PyArray_DESCR((PyArrayObject *)ad);
    int f32;
    if (dt == descr_f32)
        f32 = 1;
    else if (dt == descr_f64)
        f32 = 0;
    else
        return 0;
    int nd = PyArray_NDIM((PyArrayObject *)ad);
    const npy_intp *dims = PyArray_DIMS((PyArrayObject *)ad);
    npy_intp n = PyArray_SIZE((PyArrayObject *)ad);
    if (n >= par_min || !plain_array(ad, dt, nd, dims))
        return 0;

    const char *pb = NULL;
    double s = 0.0;
    int rb = 0, b_tensor = 0;
    if (Py_TYPE(other) == tensor_type) {
        PyObject *bd = SLOT(other, off_data);
        if (bd == NULL || !plain_array(bd, dt, nd, dims))
            return 0;
        if ((rb = truth(SLOT(other, off_rg))) < 0)
            return 0;
        pb = PyArray_BYTES((PyArrayObject *)bd);
        b_tensor = 1;
    } else if (PyFloat_CheckExact(other)) {
        s = PyFloat_AS_DOUBLE(other);
        if (f32 && isfinite(s) && fabs(s) > FLT_MAX)
            return 0;
    } else if (PyLong_CheckExact(other)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(other, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        long long lim = f32 ? (1LL << 24) : (1LL << 53);
        if (overflow || v > lim || v < -lim)
            return 0;
        s = (double)v;
    } else {
        return 0;
    }
    int ra = truth(SLOT(self, off_rg));
    if (ra < 0)
        return 0;
    int grad = (ra || rb) ? grad_enabled() : 0;
    if (grad < 0)
        return 0;
    if (grad && (f->save_a || f->save_b)) {
        /* saved-tensor hooks open somewhere: the Python path packs through them */
        int open = truth(PyList_GET_ITEM(hooks_open, 0));
        if (open != 0)
            return 0;
    }

    PyObject *arr = PyArray_SimpleNew(nd, (npy_intp *)dims, f32 ? NPY_FLOAT : NPY_DOUBLE);
    if (arr == NULL) {
        *res = NULL;
        return 1;
    }
    compute(f->kind, f32, n, PyArray_BYTES((PyArrayObject *)ad), pb, s,
            PyArray_BYTES((PyArrayObject *)arr));
    PyObject *out = new_tensor(arr);
    if (out == NULL) {
        *res = NULL;
        return 1;
    }
    if (grad) {
        if (record(f, out, self, other, ra, rb, b_tensor) < 0) {
            Py_DECREF(out);
            *res = NULL;
            return 1;
        }
    } else {
        SLOT(out, off_rg) = Py_NewRef(Py_False);
        SLOT(out, off_gfn) = Py_NewRef(Py_None);
    }
    *res = out;
    return 1;
}

static PyObject *
fastop_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastOp *f = (FastOp *)callable;
    if (PyVectorcall_NARGS(nargsf) == 2 && kwnames == NULL) {
        PyObject *res;
        if (fast(f, args[0], args[1], &res)) {
            operator_hits++;
            return res;
        }
    }
    return PyObject_Vectorcall(f->fallback, args, nargsf, kwnames);
}

static PyObject *
fastop_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static int
fastop_traverse(FastOp *f, visitproc visit, void *arg)
{
    Py_VISIT(f->node_type);
    Py_VISIT(f->op);
    Py_VISIT(f->fallback);
    Py_VISIT(f->dict);
    return 0;
}

static int
fastop_clear(FastOp *f)
{
    Py_CLEAR(f->node_type);
    Py_CLEAR(f->op);
    Py_CLEAR(f->fallback);
    Py_CLEAR(f->dict);
    return 0;
}

static void
fastop_dealloc(FastOp *f)
{
    PyObject_GC_UnTrack(f);
    fastop_clear(f);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static PyObject *
fastop_repr(FastOp *f)
{
    return PyUnicode_FromFormat("<jitgrad operator %R (C fast path)>", f->fallback);
}

static PyTypeObject FastOpType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jitgrad._fastops.operator",
    .tp_doc = "An eager arithmetic operator: the common case in C, the rest in Python.",
    .tp_basicsize = sizeof(FastOp),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(FastOp, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = fastop_get,
    .tp_dictoffset = offsetof(FastOp, dict),
    .tp_traverse = (traverseproc)fastop_traverse,
    .tp_clear = (inquiry)fastop_clear,
    .tp_dealloc = (destructor)fastop_dealloc,
    .tp_repr = (reprfunc)fastop_repr,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
};

/* ------------------------------------------------------------------ NumPy's names
 * PyTorch's argument parser takes NumPy's names for some parameters (``axis`` for ``dim``,
 * ``keepdims`` for ``keepdim``). A ``renamer`` holds a function and a dict of such names
 * ({"axis": "dim", ...}) and calls the function with the keywords renamed; a call without
 * keywords goes straight through (one vectorcall). Like the operators it is a method
 * descriptor, so ``x.sum(1)`` calls it with ``x`` first and no bound method. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fn;       /* the function called */
    PyObject *names;    /* {NumPy's name: PyTorch's name} */
    PyObject *dict;     /* __name__, __doc__, __wrapped__... */
} Renamer;

static PyObject *
renamer_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Renamer *r = (Renamer *)callable;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *renamed = NULL;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        PyObject *to = PyDict_GetItemWithError(r->names, name);
        if (to == NULL) {
            if (PyErr_Occurred()) {
                Py_XDECREF(renamed);
                return NULL;
            }
            continue;
        }
        /* both spellings given: PyTorch's parser rejects NumPy's name */
        int both = PySequence_Contains(kwnames, to);
        if (both != 0) {
            if (both > 0) {
                PyObject *qn = PyObject_GetAttrString(callable, "__name__");
                if (qn != NULL) {
                    PyErr_Format(PyExc_TypeError, "%U() got an unexpected keyword argument '%U'",
                                 qn, name);
                    Py_DECREF(qn);
                }
            }
            Py_XDECREF(renamed);
            return NULL;
        }
        if (renamed == NULL) {
            renamed = PyTuple_New(nkw);
            if (renamed == NULL)
                return NULL;
            for (Py_ssize_t j = 0; j < nkw; j++)
                PyTuple_SET_ITEM(renamed, j, Py_NewRef(PyTuple_GET_ITEM(kwnames, j)));
        }
        Py_SETREF(((PyTupleObject *)renamed)->ob_item[i], Py_NewRef(to));
    }
    if (renamed == NULL)
        return PyObject_Vectorcall(r->fn, args, nargsf, kwnames);
    PyObject *res = PyObject_Vectorcall(r->fn, args, nargsf, renamed);
    Py_DECREF(renamed);
    return res;
}

static int
renamer_traverse(Renamer *r, visitproc visit, void *arg)
{
    Py_VISIT(r->fn);
    Py_VISIT(r->names);
    Py_VISIT(r->dict);
    return 0;
}

static int
renamer_clear(Renamer *r)
{
    Py_CLEAR(r->fn);
    Py_CLEAR(r->names);
    Py_CLEAR(r->dict);
    return 0;
}

static void
renamer_dealloc(Renamer *r)
{
    PyObject_GC_UnTrack(r);
    renamer_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *
renamer_repr(Renamer *r)
{
    return PyUnicode_FromFormat("<jitgrad function %R (also NumPy's argument names)>", r->fn);
}

static PyGetSetDef renamer_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RenamerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jitgrad._fastops.renamer",
    .tp_doc = "A function that also takes NumPy's names for some arguments (axis=, keepdims=).",
    .tp_basicsize = sizeof(Renamer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(Renamer, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = fastop_get,
    .tp_dictoffset = offsetof(Renamer, dict),
    .tp_traverse = (traverseproc)renamer_traverse,
    .tp_clear = (inquiry)renamer_clear,
    .tp_dealloc = (destructor)renamer_dealloc,
    .tp_repr = (reprfunc)renamer_repr,
    .tp_getset = renamer_getset,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
};

static PyObject *
make_renamer(PyObject *mod, PyObject *args)
{
    PyObject *fn, *names;
    if (!PyArg_ParseTuple(args, "OO!:renamer", &fn, &PyDict_Type, &names))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "_fastops.renamer: fn must be callable");
        return NULL;
    }
    Renamer *r = PyObject_GC_New(Renamer, &RenamerType);
    if (r == NULL)
        return NULL;
    r->vectorcall = renamer_vectorcall;
    r->fn = Py_NewRef(fn);
    r->names = PyDict_Copy(names);
    r->dict = NULL;
    if (r->names == NULL) {
        Py_DECREF(r);
        return NULL;
    }
    PyObject_GC_Track(r);
    return (PyObject *)r;
}

/* whether nodes of ``type`` can be filled by OpNode's slot offsets (a subclass without
 * another layout); raises TypeError if not */
static int
same_layout(PyTypeObject *type)
{
    if (PyType_IsSubtype(type, opnode_type) && type->tp_basicsize == opnode_type->tp_basicsize)
        return 1;
    PyErr_Format(PyExc_TypeError, "_fastops: %R does not share %R's layout", type, opnode_type);
    return 0;
}

/* ------------------------------------------------------------------ unary ops */
/* 1: *res is the result (or NULL with an error set); 0: not this case, nothing done.
 * The case of dispatch.unary's fast path without params: the op's flat kernel through its
 * compiled entry point (op.fast_kernels[dtype][3], loaded by the Python path's first call)
 * over a flat view, then dispatch._finish's tensor and node. */
#define MAX_PARAMS 4

static int
unary_fast(PyObject *op, PyObject *a, PyObject *params, PyObject **res)
{
    if (Py_TYPE(a) != tensor_type || PyList_GET_SIZE(tracing) != 0)
        return 0;
    PyObject *info = PyDict_GetItemWithError(unary_info, op);  /* borrowed */
    if (info == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *ad = SLOT(a, off_data);
    if (ad == NULL || !PyArray_CheckExact(ad))
        return 0;
    PyArrayObject *arr_a = (PyArrayObject *)ad;
    PyArray_Descr *dt = PyArray_DESCR(arr_a);
    if (dt != descr_f32 && dt != descr_f64)
        return 0;
    int nd = PyArray_NDIM(arr_a);
    npy_intp n = PyArray_SIZE(arr_a);
    if (n >= par_min || !plain_array(ad, dt, nd, PyArray_DIMS(arr_a)))
        return 0;
    /* (read before the kernel releases the GIL: another thread may re-register the op) */
    PyTypeObject *node_type = (PyTypeObject *)PyTuple_GET_ITEM(info, 0);
    int save_in = PyTuple_GET_ITEM(info, 1) == Py_True;
    int save_out = PyTuple_GET_ITEM(info, 2) == Py_True;
    int has_vjp = PyTuple_GET_ITEM(info, 3) == Py_True;
    /* params: the op's declared ones, in order, as the kernel's number arguments (floats,
     * ints exact in a double); the node keeps the dict itself */
    PyObject *names = PyTuple_GET_ITEM(info, 4);
    Py_ssize_t np_ = PyTuple_GET_SIZE(names);
    double pv[MAX_PARAMS];
    if (params != NULL) {
        if (!PyDict_CheckExact(params) || np_ > MAX_PARAMS)
            return 0;
        for (Py_ssize_t k = 0; k < np_; k++) {
            PyObject *v = PyDict_GetItemWithError(params, PyTuple_GET_ITEM(names, k));
            if (v == NULL) {
                PyErr_Clear();
                return 0;
            }
            if (PyFloat_CheckExact(v)) {
                pv[k] = PyFloat_AS_DOUBLE(v);
            } else if (PyLong_CheckExact(v)) {
                int overflow = 0;
                long long iv = PyLong_AsLongLongAndOverflow(v, &overflow);
                if ((iv == -1 && PyErr_Occurred()) || overflow || iv > (1LL << 53) ||
                    iv < -(1LL << 53)) {
                    PyErr_Clear();
                    return 0;
                }
                pv[k] = (double)iv;
            } else {
                return 0;
            }
            if (dt == descr_f32 && isfinite(pv[k]) && fabs(pv[k]) > FLT_MAX)
                return 0;  /* (the Python path's float32 of it: inf; C leaves it undefined) */
        }
    } else if (np_ != 0) {
        return 0;  /* an op that needs its params, called without */
    }

    int ra = truth(SLOT(a, off_rg));
    if (ra < 0)
        return 0;
    int grad = (ra && has_vjp) ? grad_enabled() : 0;
    if (grad < 0)
        return 0;
    if (grad && (save_in || save_out) && truth(PyList_GET_ITEM(hooks_open, 0)) != 0)
        return 0;  /* saved-tensor hooks open: the Python path packs through them */

    PyObject *entry;
    {
        PyObject *fk = PyObject_GetAttr(op, str_fast_kernels);
        if (fk == NULL) {
            PyErr_Clear();
            return 0;
        }
        PyObject *ks = PyDict_Check(fk) ? PyDict_GetItemWithError(fk, (PyObject *)dt) : NULL;
        if (ks == NULL || !PyList_CheckExact(ks) || PyList_GET_SIZE(ks) < 4 ||
            PyList_GET_ITEM(ks, 2) != (PyObject *)dt || PyList_GET_ITEM(ks, 3) == Py_None) {
            PyErr_Clear();
            Py_DECREF(fk);
            return 0;
        }
        entry = Py_NewRef(PyList_GET_ITEM(ks, 3));
        Py_DECREF(fk);
    }
    Py_INCREF(node_type);

    PyObject *arr = PyArray_SimpleNew(nd, PyArray_DIMS(arr_a), dt == descr_f32 ? NPY_FLOAT
                                                                              : NPY_DOUBLE);
    PyObject *fa = NULL, *fo = NULL, *lo = NULL, *parts = NULL, *nn = NULL, *r = NULL;
    PyObject *out = NULL;
    PyObject *pobj[MAX_PARAMS] = {NULL};
    if (arr == NULL)
        goto fail;
    if (nd == 1) {
        fa = Py_NewRef(ad);
        fo = Py_NewRef(arr);
    } else {
        fa = PyArray_Ravel(arr_a, NPY_CORDER);
        fo = fa == NULL ? NULL : PyArray_Ravel((PyArrayObject *)arr, NPY_CORDER);
        if (fo == NULL)
            goto fail;
    }
    lo = PyLong_FromLong(0);
    parts = PyLong_FromSsize_t((n + 16383) >> 14);
    nn = PyLong_FromSsize_t(n);
    if (lo == NULL || parts == NULL || nn == NULL)
        goto fail;
    for (Py_ssize_t k = 0; k < np_; k++)
        if ((pobj[k] = PyFloat_FromDouble(pv[k])) == NULL)
            goto fail;
    {
        PyObject *argv[5 + MAX_PARAMS] = {lo, parts, nn, fa};
        for (Py_ssize_t k = 0; k < np_; k++)
            argv[4 + k] = pobj[k];
        argv[4 + np_] = fo;
        r = PyObject_Vectorcall(entry, argv, (size_t)(5 + np_), NULL);
    }
    if (r == NULL)
        goto fail;
    Py_CLEAR(r);
    if ((out = new_tensor(Py_NewRef(arr))) == NULL)
        goto fail;
    if (!grad) {
        SLOT(out, off_rg) = Py_NewRef(Py_False);
        SLOT(out, off_gfn) = Py_NewRef(Py_None);
    } else {
        PyObject *ea = edge_of(a), *edges = NULL, *saved = NULL;
        if (ea == NULL)
            goto fail;
        edges = PyTuple_Pack(1, ea);
        Py_DECREF(ea);
        if (edges == NULL)
            goto fail;
        if (!(save_in || save_out)) {
            saved = Py_NewRef(Py_None);
        } else {
            saved = PyTuple_New(1 + save_out);
            if (saved != NULL) {
                PyObject *s0 = save_in ? saved_entry(a) : Py_NewRef(Py_None);
                PyTuple_SET_ITEM(saved, 0, s0);  /* (NULL on error: the tuple is dropped) */
                if (s0 == NULL) {
                    Py_CLEAR(saved);
                } else if (save_out) {
                    /* node.save_output: (None, array, version counter, version, output_nr,
                     * requires_grad), the output marked as requiring grad first */
                    PyObject *ovc = SLOT(out, off_vc);
                    PyObject *version = PyList_GET_ITEM(ovc, 0);  /* 0, a new tensor's */
                    PyObject *output_nr = version;  /* 0 too: the class default */
                    PyObject *so = PyTuple_Pack(6, Py_None, arr, ovc, version, output_nr,
                                                Py_True);
                    PyTuple_SET_ITEM(saved, 1, so);
                    if (so == NULL)
                        Py_CLEAR(saved);
                }
            }
        }
        if (saved == NULL) {
            Py_DECREF(edges);
            goto fail;
        }
        if (attach_node(out, node_type, edges, saved, op, params != NULL ? params : Py_None) < 0)
            goto fail;
    }
    for (Py_ssize_t k = 0; k < np_; k++)
        Py_DECREF(pobj[k]);
    Py_DECREF(node_type);
    Py_DECREF(entry);
    Py_DECREF(arr);
    Py_DECREF(fa);
    Py_DECREF(fo);
    Py_DECREF(lo);
    Py_DECREF(parts);
    Py_DECREF(nn);
    *res = out;
    return 1;
fail:
    for (Py_ssize_t k = 0; k < np_; k++)
        Py_XDECREF(pobj[k]);
    Py_DECREF(node_type);
    Py_DECREF(entry);
    Py_XDECREF(arr);
    Py_XDECREF(fa);
    Py_XDECREF(fo);
    Py_XDECREF(lo);
    Py_XDECREF(parts);
    Py_XDECREF(nn);
    Py_XDECREF(out);
    *res = NULL;
    return 1;
}

static PyObject *
unary(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (unary_fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_fastops.unary: call setup_unary() first");
        return NULL;
    }
    if (nargs == 2 || nargs == 3) {
        PyObject *res;
        PyObject *params = nargs == 3 && args[2] != Py_None ? args[2] : NULL;
        if (unary_fast(args[0], args[1], params, &res)) {
            unary_hits++;
            return res;
        }
    }
    return PyObject_Vectorcall(unary_fallback, args, nargs, NULL);
}

static PyObject *
setup_unary(PyObject *mod, PyObject *args)
{
    PyObject *info, *fallback;
    if (!PyArg_ParseTuple(args, "O!O:setup_unary", &PyDict_Type, &info, &fallback))
        return NULL;
    if (par_min < 0) {
        PyErr_SetString(PyExc_RuntimeError, "_fastops.setup_unary: call setup() first");
        return NULL;
    }
    Py_XSETREF(unary_info, Py_NewRef(info));
    Py_XSETREF(unary_fallback, Py_NewRef(fallback));
    Py_RETURN_NONE;
}

static PyObject *
register_unary(PyObject *mod, PyObject *args)
{
    PyObject *op, *node_type, *param_names;
    int save_in, save_out, has_vjp;
    if (!PyArg_ParseTuple(args, "OO!pppO!:register_unary", &op, &PyType_Type, &node_type,
                          &save_in, &save_out, &has_vjp, &PyTuple_Type, &param_names))
        return NULL;
    if (PyTuple_GET_SIZE(param_names) > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "_fastops.register_unary: too many params");
        return NULL;
    }
    if (unary_info == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_fastops.register_unary: call setup_unary() first");
        return NULL;
    }
    if (!same_layout((PyTypeObject *)node_type))
        return NULL;
    PyObject *info = Py_BuildValue("(OOOOO)", node_type, save_in ? Py_True : Py_False,
                                   save_out ? Py_True : Py_False, has_vjp ? Py_True : Py_False,
                                   param_names);
    if (info == NULL)
        return NULL;
    int rc = PyDict_SetItem(unary_info, op, info);
    Py_DECREF(info);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ module functions */
static PyObject *
setup(PyObject *mod, PyObject *args)
{
    PyObject *tensor, *opnode, *g_off, *trc, *hooks, *state, *seq;
    Py_ssize_t pmin;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OOn:setup", &PyType_Type, &tensor, &PyType_Type,
                          &opnode, &PyList_Type, &g_off, &PyList_Type, &trc, &PyList_Type,
                          &hooks, &state, &seq, &pmin))
        return NULL;
    if (PyList_GET_SIZE(hooks) < 1) {
        PyErr_SetString(PyExc_ValueError, "_fastops.setup: hooks_open must hold one item");
        return NULL;
    }
    if (slot_offset(tensor, "_data", &off_data) < 0 ||
        slot_offset(tensor, "_requires_grad", &off_rg) < 0 ||
        slot_offset(tensor, "_grad_fn", &off_gfn) < 0 ||
        slot_offset(tensor, "_grad", &off_grad) < 0 ||
        slot_offset(tensor, "_vc", &off_vc) < 0 ||
        slot_offset(opnode, "next_edges", &noff_edges) < 0 ||
        slot_offset(opnode, "saved", &noff_saved) < 0 ||
        slot_offset(opnode, "seq", &noff_seq) < 0 ||
        slot_offset(opnode, "in_meta", &noff_meta) < 0 ||
        slot_offset(opnode, "op", &noff_op) < 0 ||
        slot_offset(opnode, "params", &noff_params) < 0)
        return NULL;
    Py_XSETREF(tensor_type, (PyTypeObject *)Py_NewRef(tensor));
    Py_XSETREF(opnode_type, (PyTypeObject *)Py_NewRef(opnode));
    Py_XSETREF(grad_off, Py_NewRef(g_off));
    Py_XSETREF(tracing, Py_NewRef(trc));
    Py_XSETREF(hooks_open, Py_NewRef(hooks));
    Py_XSETREF(grad_state, Py_NewRef(state));
    Py_XSETREF(next_seq, Py_NewRef(seq));
    par_min = pmin;
    Py_RETURN_NONE;
}

static PyObject *
make_operator(PyObject *mod, PyObject *args)
{
    const char *kind_name;
    PyObject *op, *node_type, *fallback;
    int save_a, save_b;
    if (!PyArg_ParseTuple(args, "sOO!iiO:operator", &kind_name, &op, &PyType_Type, &node_type,
                          &save_a, &save_b, &fallback))
        return NULL;
    if (par_min < 0) {
        PyErr_SetString(PyExc_RuntimeError, "_fastops.operator: call setup() first");
        return NULL;
    }
    static const char *names[K_COUNT] = {"add", "sub", "rsub", "mul", "div"};
    int kind = -1;
    for (int k = 0; k < K_COUNT; k++)
        if (strcmp(kind_name, names[k]) == 0)
            kind = k;
    if (kind < 0) {
        PyErr_Format(PyExc_ValueError, "_fastops.operator: no C loop for %s", kind_name);
        return NULL;
    }
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "_fastops.operator: fallback must be callable");
        return NULL;
    }
    if (!same_layout((PyTypeObject *)node_type))
        return NULL;
    FastOp *f = PyObject_GC_New(FastOp, &FastOpType);
    if (f == NULL)
        return NULL;
    f->vectorcall = fastop_vectorcall;
    f->kind = kind;
    f->save_a = save_a;
    f->save_b = save_b;
    f->node_type = (PyTypeObject *)Py_NewRef(node_type);
    f->op = Py_NewRef(op);
    f->fallback = Py_NewRef(fallback);
    f->dict = NULL;
    PyObject_GC_Track(f);
    return (PyObject *)f;
}

static PyObject *
hits(PyObject *mod, PyObject *unused)
{
    return Py_BuildValue("{sKsK}", "operator", operator_hits, "unary", unary_hits);
}

static PyMethodDef methods[] = {
    {"hits", hits, METH_NOARGS,
     "hits() -> {'operator': n, 'unary': n}: calls computed in C since the module loaded"},
    {"setup", setup, METH_VARARGS,
     "setup(Tensor, OpNode, GRAD_OFF, TRACING, HOOKS_OPEN, grad_state, next_seq, "
     "parallel_min)"},
    {"operator", make_operator, METH_VARARGS,
     "operator(kind, op, node_class, save_a, save_b, fallback) -> the C operator (save_a, "
     "save_b: 0 nothing, 1 saved, 2 saved when the other operand requires grad)"},
    {"renamer", make_renamer, METH_VARARGS,
     "renamer(fn, {numpy_name: name}) -> fn, also taking NumPy's names for its keywords"},
    {"setup_unary", setup_unary, METH_VARARGS,
     "setup_unary(info_dict, fallback): unary(op, a[, params]) falls back to "
     "fallback(op, a[, params])"},
    {"register_unary", register_unary, METH_VARARGS,
     "register_unary(op, node_class, save_input, save_output, has_vjp, param_names)"},
    {"unary", (PyCFunction)(void (*)(void))unary, METH_FASTCALL,
     "unary(op, a, params=None): dispatch.unary's common case in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastops",
    "The eager arithmetic operators' common case in C (see jitgrad/ops/eager_fast.py).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__fastops(void)
{
    import_array();
    if (PyType_Ready(&FastOpType) < 0 || PyType_Ready(&RenamerType) < 0)
        return NULL;
    str_enabled = PyUnicode_InternFromString("enabled");
    str_output_nr = PyUnicode_InternFromString("_output_nr");
    str_fast_kernels = PyUnicode_InternFromString("fast_kernels");
    descr_f32 = PyArray_DescrFromType(NPY_FLOAT);
    descr_f64 = PyArray_DescrFromType(NPY_DOUBLE);
    if (str_enabled == NULL || str_output_nr == NULL || str_fast_kernels == NULL ||
        descr_f32 == NULL || descr_f64 == NULL)
        return NULL;
    return PyModule_Create(&module);
}
