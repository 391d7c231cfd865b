/* jitgrad._nativepool: the thread pool's launch path without the GIL.
 *
 * A parallel kernel is a sequential Numba function over parts, ``kernel(lo, hi, *args)``
 * (kernels/pool.py). The Python pool hands a share to a worker that wakes on a lock and takes
 * the GIL to call the Numba dispatcher: ~60 us per launch on the 2-core project machine, as
 * long as a 1e6-element multiply's whole share. Here the workers are C threads that call the
 * kernel's machine code (the native function Numba compiled for these argument types, its
 * address read from the compiled overload) with the arguments flattened as Numba's calling
 * convention passes them; between kernels they spin a short while (as OpenMP's workers do),
 * so a launch that follows another costs a store and a cache-line transfer.
 *
 * Numba's native functions are ``int32 fn(void *retptr, void *excinfo, args...)`` with each
 * argument flattened to its data model's members (an array: meminfo, parent, nitems, itemsize,
 * data, shape[ndim], strides[ndim]; a number: its value). On x86-64 System V every one of
 * those members is an integer-class word except float/double numbers, which travel in xmm0-7
 * in order whatever their position among the words; the caller cleans the stack, so calling
 * through a type with more integer parameters than the function takes passes its words in
 * the right registers and stack slots and the extra ones are never read. So one function
 * type -- MAX_WORDS words, then MAX_FLOATS doubles -- calls every kernel of at most that many
 * words and 8 numbers (a float32 number is passed as the low half of its double slot, where
 * the callee reads it). Elsewhere (another ABI) ``run`` answers UNSUPPORTED and the Python
 * pool runs the kernel.
 *
 * ``run`` returns 0 when the kernel ran on the pool, BUSY when another thread holds the pool
 * (the caller runs the kernel itself, as the Python pool does), UNSUPPORTED for arguments it
 * cannot flatten (another spec), or the first non-success status a share returned (the caller
 * runs the kernel through Numba again to raise its exception). A ``hot_only`` launch (a
 * kernel too small to pay a worker's wake-up from sleep, ~60 us here) runs only when the
 * workers it needs are spinning; otherwise it returns COLD at once -- the caller runs the
 * kernel itself -- after sending the sleeping workers a wake-up, so that a run of such kernels
 * goes parallel from its second.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_1_20_API_VERSION
#include <numpy/arrayobject.h>

#define RUN_OK 0
#define RUN_BUSY 1000
#define RUN_UNSUPPORTED 1001
#define RUN_COLD 1002

#if defined(__linux__) && defined(__x86_64__)
#define NATIVE_POOL 1
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <immintrin.h>

#define MAX_WORDS 192      /* retptr, excinfo, lo, hi, then the arguments' words */
#define MAX_FLOATS 8
#define MAX_THREADS 256

#define W4(b) int64_t, int64_t, int64_t, int64_t
#define W16(b) W4(b), W4(b), W4(b), W4(b)
#define W64(b) W16(b), W16(b), W16(b), W16(b)
typedef int32_t (*native_fn)(W64(0), W64(0), W64(0),
                             double, double, double, double, double, double, double, double);
#define A4(i) w[i], w[i + 1], w[i + 2], w[i + 3]
#define A16(i) A4(i), A4(i + 4), A4(i + 8), A4(i + 12)
#define A64(i) A16(i), A16(i + 16), A16(i + 32), A16(i + 48)

typedef struct {
    native_fn fn;
    int nwords;                 /* words after retptr, excinfo, lo, hi */
    int64_t words[MAX_WORDS];
    double floats[MAX_FLOATS];
} task_t;

static int32_t
call_share(const task_t *t, int64_t lo, int64_t hi)
{
    int64_t w[MAX_WORDS] = {0};
    int64_t ret[4] = {0, 0, 0, 0};
    void *exc = NULL;
    w[0] = (int64_t)(intptr_t)ret;
    w[1] = (int64_t)(intptr_t)&exc;
    w[2] = lo;
    w[3] = hi;
    memcpy(w + 4, t->words, sizeof(int64_t) * (size_t)t->nwords);
    /* the words past the kernel's own are passed and never read */
    const double *f = t->floats;
    return t->fn(A64(0), A64(64), A64(128), f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]);
}

/* ------------------------------------------------------------------ futex and time */
static void
futex_wait(_Atomic uint32_t *addr, uint32_t expected)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void
futex_wake(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Wait until (*word == value) == equal: spin for spin_ns, then sleep on the futex
 * (``sleeping`` tells the waker to call futex_wake; the seq_cst store/load pairs make one of
 * the two sides see the other). */
static void
await_word(_Atomic uint32_t *word, uint32_t value, int equal, _Atomic uint32_t *sleeping,
           int64_t spin_ns)
{
#define READY(x) (((x) == value) == equal)
    if (READY(atomic_load_explicit(word, memory_order_acquire)))
        return;
    int64_t until = now_ns() + spin_ns;
    for (unsigned k = 1;; k++) {
        _mm_pause();
        if (READY(atomic_load_explicit(word, memory_order_acquire)))
            return;
        if ((k & 63) == 0 && now_ns() > until)
            break;
    }
    for (;;) {
        uint32_t x = atomic_load(word);
        if (READY(x))
            return;
        atomic_store(sleeping, 1);
        if (atomic_load(word) == x)
            futex_wait(word, x);
        atomic_store(sleeping, 0);
    }
#undef READY
}

static void
announce(_Atomic uint32_t *word, uint32_t value, _Atomic uint32_t *sleeping)
{
    atomic_store(word, value);
    if (atomic_load(sleeping))
        futex_wake(word);
}

/* ------------------------------------------------------------------ the pool */
typedef struct pool pool_t;

/* OpenBLAS's job runner (``exec_threads``), handed to its threads callback */
typedef void (*blas_job_fn)(int thread_num, void *jobdata, int dojob_data);

typedef struct {
    _Alignas(64) _Atomic uint32_t go;        /* generation to run */
    _Atomic uint32_t go_sleeping;
    _Alignas(64) _Atomic uint32_t done;      /* generation finished */
    _Atomic uint32_t done_sleeping;
    int64_t lo, hi;
    int noop;                                 /* a wake-up only: run nothing */
    int32_t status;
    pool_t *pool;
    blas_job_fn blas_job;                     /* an OpenBLAS job instead of a share */
    void *blas_data;
    int blas_num, blas_arg;
} worker_t;

struct pool {
    int threads;                              /* including the caller */
    int64_t spin_ns;
    _Atomic int busy;
    _Atomic int quit;
    uint32_t generation;
    task_t task;
    worker_t *workers;                        /* threads - 1 */
};

/* Set under ``creating`` (the GIL does not cover OpenBLAS's callback); read atomically. */
static _Atomic(pool_t *) the_pool;
static _Atomic int creating;
static unsigned long long launches;           /* kernels run on the pool (tests, stats) */
static _Atomic unsigned long long blas_runs;  /* OpenBLAS job sets run on the pool */
static _Atomic unsigned long long blas_spawned; /* ... on threads started for them instead */

static void *
worker_main(void *arg)
{
    worker_t *w = (worker_t *)arg;
    pool_t *p = w->pool;
    uint32_t seen = 0;
    for (;;) {
        await_word(&w->go, seen, 0, &w->go_sleeping, p->spin_ns);
        seen = atomic_load_explicit(&w->go, memory_order_acquire);
        if (atomic_load(&p->quit))
            return NULL;                      /* the pool was replaced; its memory stays */
        if (w->noop) {
        } else if (w->blas_job != NULL) {
            w->blas_job(w->blas_num, w->blas_data, w->blas_arg);
            w->blas_job = NULL;
            w->status = 0;
        } else {
            w->status = call_share(&p->task, w->lo, w->hi);
        }
        announce(&w->done, seen, &w->done_sleeping);
    }
}

static void reset_blas_slots(void);

static void
after_fork_child(void)
{
    /* the parent's workers do not exist here: the next launch starts a new pool */
    the_pool = NULL;
    atomic_store(&creating, 0);
    reset_blas_slots();
}

static pool_t *
pool_for_locked(int threads, int64_t spin_ns)
{
    pool_t *p = the_pool;
    if (p != NULL && p->threads == threads) {
        p->spin_ns = spin_ns;
        return p;
    }
    if (p != NULL) {
        if (atomic_exchange(&p->busy, 1))
            return NULL;                      /* in use by another thread right now */
        atomic_store(&p->quit, 1);
        for (int k = 0; k < p->threads - 1; k++)
            announce(&p->workers[k].go, ++p->generation, &p->workers[k].go_sleeping);
        the_pool = NULL;                      /* its workers exit; the memory is kept */
    }
    p = calloc(1, sizeof(pool_t));
    if (p == NULL)
        return NULL;
    p->threads = threads;
    p->spin_ns = spin_ns;
    p->workers = aligned_alloc(64, sizeof(worker_t) * (size_t)(threads > 1 ? threads - 1 : 1));
    if (p->workers == NULL) {
        free(p);
        return NULL;
    }
    memset(p->workers, 0, sizeof(worker_t) * (size_t)(threads > 1 ? threads - 1 : 1));
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int k = 0; k < threads - 1; k++) {
        pthread_t th;
        p->workers[k].pool = p;
        if (pthread_create(&th, &attr, worker_main, &p->workers[k]) != 0) {
            /* fewer threads than asked: stop the ones started, give up the native path */
            atomic_store(&p->quit, 1);
            for (int j = 0; j < k; j++)
                announce(&p->workers[j].go, 1, &p->workers[j].go_sleeping);
            pthread_attr_destroy(&attr);
            return NULL;
        }
    }
    pthread_attr_destroy(&attr);
    the_pool = p;
    return p;
}

/* The pool of ``threads`` threads (the caller's included), made or remade as needed; NULL
 * when it cannot be had now (threads failed to start, or the old pool is in use). */
static pool_t *
pool_for(int threads, int64_t spin_ns)
{
    while (atomic_exchange(&creating, 1))
        _mm_pause();
    pool_t *p = pool_for_locked(threads, spin_ns);
    atomic_store(&creating, 0);
    return p;
}

/* Flatten ``args`` into the task's words and floats as ``kinds`` says: 'a' an array, 'i' an
 * int64 word, 'b' a bool word, 'd' a double, 'f' a float32. 0, or -1 when they do not fit. */
static int
flatten(task_t *t, const char *kinds, Py_ssize_t nk, PyObject *args)
{
    int nw = 0, nf = 0;
    if (PyTuple_GET_SIZE(args) != nk)
        return -1;
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *o = PyTuple_GET_ITEM(args, k);
        switch (kinds[k]) {
        case 'a': {
            if (!PyArray_Check(o))
                return -1;
            PyArrayObject *a = (PyArrayObject *)o;
            int nd = PyArray_NDIM(a);
            if (nw + 5 + 2 * nd > MAX_WORDS - 4)
                return -1;
            t->words[nw++] = 0;                            /* meminfo: none (borrowed) */
            t->words[nw++] = 0;                            /* parent */
            t->words[nw++] = (int64_t)PyArray_SIZE(a);
            t->words[nw++] = (int64_t)PyArray_ITEMSIZE(a);
            t->words[nw++] = (int64_t)(intptr_t)PyArray_DATA(a);
            for (int d = 0; d < nd; d++)
                t->words[nw++] = (int64_t)PyArray_DIMS(a)[d];
            for (int d = 0; d < nd; d++)
                t->words[nw++] = (int64_t)PyArray_STRIDES(a)[d];
            break;
        }
        case 'i':
        case 'b': {
            if (nw + 1 > MAX_WORDS - 4)
                return -1;
            long long v = PyLong_AsLongLong(o);
            if (v == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                return -1;
            }
            t->words[nw++] = (int64_t)v;
            break;
        }
        case 'd':
        case 'f': {
            if (nf + 1 > MAX_FLOATS)
                return -1;
            double v = PyFloat_AsDouble(o);
            if (v == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return -1;
            }
            if (kinds[k] == 'f') {
                union { double d; float f[2]; } u;
                u.d = 0.0;
                u.f[0] = (float)v;                         /* exact: o is a float32 */
                v = u.d;
            }
            t->floats[nf++] = v;
            break;
        }
        default:
            return -1;
        }
    }
    t->nwords = nw;
    for (; nf < MAX_FLOATS; nf++)
        t->floats[nf] = 0.0;
    return 0;
}

static int
is_success(int32_t status)
{
    return status == 0 || status == -2;       /* Numba's RETCODE_OK and RETCODE_NONE */
}
#endif /* NATIVE_POOL */

/* Whether the first n - 1 workers are awake and idle (spinning for the next launch). The
 * sleeping ones, and only those, are sent a wake-up so that the next launch finds them
 * spinning (a worker still on a wake-up is not idle: its fields are not rewritten before it
 * has finished). */
static int
workers_hot(pool_t *p, int n)
{
    int hot = 1;
    for (int k = 1; k < n; k++) {
        worker_t *w = &p->workers[k - 1];
        uint32_t go = atomic_load(&w->go);
        if (atomic_load(&w->done) != go) {
            hot = 0;                          /* still waking up */
        } else if (atomic_load(&w->go_sleeping)) {
            hot = 0;
            w->noop = 1;
            announce(&w->go, ++p->generation, &w->go_sleeping);
        }
    }
    return hot;
}

/* run(address, kinds, parts, args, threads, spin_us, hot_only) -> 0 / BUSY / UNSUPPORTED /
 * COLD (hot_only and a worker was asleep: nothing ran, the sleepers were woken) / status */
static PyObject *
run(PyObject *mod, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "run(address, kinds, parts, args, threads, spin_us, hot_only)");
        return NULL;
    }
#ifndef NATIVE_POOL
    return PyLong_FromLong(RUN_UNSUPPORTED);
#else
    void *addr = PyLong_AsVoidPtr(argv[0]);
    if (addr == NULL && PyErr_Occurred())
        return NULL;
    if (!PyBytes_Check(argv[1]) || !PyTuple_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "run: kinds must be bytes and args a tuple");
        return NULL;
    }
    long long parts = PyLong_AsLongLong(argv[2]);
    long threads = PyLong_AsLong(argv[4]);
    double spin_us = PyFloat_AsDouble(argv[5]);
    int hot_only = PyObject_IsTrue(argv[6]);
    if (PyErr_Occurred())
        return NULL;
    if (addr == NULL || threads < 2 || threads > MAX_THREADS || parts < 2)
        return PyLong_FromLong(RUN_UNSUPPORTED);
    pool_t *p = pool_for((int)threads, (int64_t)(spin_us * 1000.0));
    if (p == NULL)
        return PyLong_FromLong(RUN_BUSY);
    if (atomic_exchange(&p->busy, 1))
        return PyLong_FromLong(RUN_BUSY);
    int n = (int)(threads < parts ? threads : parts);
    if (hot_only && !workers_hot(p, n)) {
        atomic_store(&p->busy, 0);
        return PyLong_FromLong(RUN_COLD);
    }
    task_t *t = &p->task;
    if (flatten(t, PyBytes_AS_STRING(argv[1]), PyBytes_GET_SIZE(argv[1]), argv[3]) < 0) {
        atomic_store(&p->busy, 0);
        return PyLong_FromLong(RUN_UNSUPPORTED);
    }
    t->fn = (native_fn)addr;
    uint32_t gen = ++p->generation;
    int32_t status = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int k = 1; k < n; k++) {
        worker_t *w = &p->workers[k - 1];
        /* a worker still on a wake-up finishes it before its fields are rewritten */
        await_word(&w->done, atomic_load(&w->go), 1, &w->done_sleeping, p->spin_ns);
        w->noop = 0;
        w->lo = (int64_t)(parts * k / n);
        w->hi = (int64_t)(parts * (k + 1) / n);
        announce(&w->go, gen, &w->go_sleeping);
    }
    status = call_share(t, 0, (int64_t)(parts / n));
    for (int k = 1; k < n; k++) {
        worker_t *w = &p->workers[k - 1];
        await_word(&w->done, gen, 1, &w->done_sleeping, p->spin_ns);
        if (is_success(status))
            status = w->status;
    }
    Py_END_ALLOW_THREADS
    atomic_store(&p->busy, 0);
    launches++;
    return PyLong_FromLong(is_success(status) ? RUN_OK : (long)status);
#endif
}

/* ------------------------------------------------------------------ OpenBLAS's threads
 * OpenBLAS (0.3.27+) hands its parallel work to a callback when one is set, instead of waking
 * its own threads: ``callback(sync, job, n, size, jobs, arg)`` must run ``job(k, jobs + k *
 * size, arg)`` for k < n concurrently (a GEMM's jobs wait for each other's packed panels) and
 * return when all have finished. Its own workers spin for ~0.1 s after each threaded call
 * (``sched_yield``), holding a core that a parallel kernel launched meanwhile waits for; run
 * on this pool instead, a GEMM leaves the pool's workers spinning for the next kernel, and no
 * other thread competes. The split of the work is OpenBLAS's own, so the bits are too.
 * Job 0 runs on the calling thread, the next ones on the pool's workers; jobs beyond the
 * pool's threads, or all of them while another thread holds the pool, run on threads started
 * for them (correct, and slower: ~tens of microseconds each). */
#ifdef NATIVE_POOL
typedef struct {
    blas_job_fn job;
    void *data;
    int num, arg;
} spawned_job_t;

static void *
spawned_main(void *a)
{
    spawned_job_t *j = (spawned_job_t *)a;
    j->job(j->num, j->data, j->arg);
    return NULL;
}

static int route_threads;                     /* the pool's threads when routing began */
static int64_t route_spin_ns;

/* OpenBLAS's job runner takes a thread slot: the per-thread packing buffer of that index and
 * the status word of its own worker of that index (set to "busy" while the job runs; an awake
 * worker of OpenBLAS spins while its word says so). Jobs running at the same time need
 * distinct slots (two callers' jobs would otherwise pack into one buffer), and slots past
 * OpenBLAS's own workers keep those asleep: slots are taken from [workers, max) first.
 * ``blas_workers`` points at OpenBLAS's ``blas_num_threads`` (its workers are that minus 1). */
#define MAX_SLOTS 64
#define MAX_BLAS_LIBS 4                       /* OpenBLAS copies routed (NumPy's, SciPy's...) */
typedef struct {
    void *setter;                             /* its openblas_set_threads_callback_function */
    const int *workers;
    int max_slots;
    _Atomic uint64_t slots_used;
} blas_lib_t;
static blas_lib_t blas_libs[MAX_BLAS_LIBS];

/* after fork: the slots of jobs running in other threads, which the child does not have */
static void
reset_blas_slots(void)
{
    for (int i = 0; i < MAX_BLAS_LIBS; i++)
        atomic_store(&blas_libs[i].slots_used, 0);
}

static void
take_slots(blas_lib_t *lib, int n, int *slot)
{
    for (;;) {
        int first = lib->workers != NULL ? *lib->workers - 1 : 0;
        if (first < 0 || first >= lib->max_slots)
            first = 0;
        uint64_t used = atomic_load(&lib->slots_used), mine = 0;
        int got = 0;
        for (int pass = 0; pass < 2 && got < n; pass++) {
            int lo = pass == 0 ? first : 0, hi = pass == 0 ? lib->max_slots : first;
            for (int i = lo; i < hi && got < n; i++) {
                if (!(used & (1ULL << i))) {
                    mine |= 1ULL << i;
                    slot[got++] = i;
                }
            }
        }
        if (got == n && atomic_compare_exchange_weak(&lib->slots_used, &used, used | mine))
            return;
        sched_yield();                        /* taken meanwhile, or all in use: retry */
    }
}

static void
give_slots(blas_lib_t *lib, int n, const int *slot)
{
    uint64_t mine = 0;
    for (int k = 0; k < n; k++)
        mine |= 1ULL << slot[k];
    atomic_fetch_and(&lib->slots_used, ~mine);
}

static void
blas_threads_run(blas_lib_t *lib, int sync, blas_job_fn job, int numjobs, size_t size,
                 void *jobs, int arg)
{
    (void)sync;                               /* always run to completion */
    char *data = (char *)jobs;
    int slot[MAX_SLOTS];
    if (numjobs > lib->max_slots) {           /* never: OpenBLAS's jobs fit its tables */
        for (int k = 0; k < numjobs; k++)
            job(k, data + (size_t)k * size, arg);
        return;
    }
    take_slots(lib, numjobs, slot);
    pool_t *p = the_pool;
    if (p == NULL && route_threads > 1)
        p = pool_for(route_threads, route_spin_ns);   /* e.g. first GEMM after a fork */
    if (p != NULL && (atomic_load(&p->quit) || atomic_exchange(&p->busy, 1)))
        p = NULL;                             /* replaced, or in use by another thread */
    int on_pool = p == NULL ? 1 : (numjobs < p->threads ? numjobs : p->threads);
    uint32_t gen = 0;
    if (p != NULL) {
        gen = ++p->generation;
        for (int k = 1; k < on_pool; k++) {
            worker_t *w = &p->workers[k - 1];
            await_word(&w->done, atomic_load(&w->go), 1, &w->done_sleeping, p->spin_ns);
            w->noop = 0;
            w->blas_job = job;
            w->blas_data = data + (size_t)k * size;
            w->blas_num = slot[k];
            w->blas_arg = arg;
            announce(&w->go, gen, &w->go_sleeping);
        }
    }
    int extra = numjobs - on_pool;
    pthread_t *threads = NULL;
    spawned_job_t *spawned = NULL;
    int started = 0;
    if (extra > 0) {
        threads = malloc(sizeof(pthread_t) * (size_t)extra);
        spawned = malloc(sizeof(spawned_job_t) * (size_t)extra);
        if (threads != NULL && spawned != NULL) {
            for (int e = 0; e < extra; e++) {
                int k = on_pool + e;
                spawned[e] = (spawned_job_t){job, data + (size_t)k * size, slot[k], arg};
                if (pthread_create(&threads[e], NULL, spawned_main, &spawned[e]) != 0)
                    break;
                started++;
            }
        }
        atomic_fetch_add(&blas_spawned, 1);
    }
    job(slot[0], data, arg);
    /* no thread could be started for these: run them here (a GEMM's jobs that wait for
     * each other could then wait forever; OpenBLAS itself exits when it cannot start its
     * threads, so this is only reached where it would have failed too) */
    for (int e = started; e < extra; e++)
        job(slot[on_pool + e], data + (size_t)(on_pool + e) * size, arg);
    if (p != NULL) {
        for (int k = 1; k < on_pool; k++) {
            worker_t *w = &p->workers[k - 1];
            await_word(&w->done, gen, 1, &w->done_sleeping, p->spin_ns);
        }
        atomic_store(&p->busy, 0);
        atomic_fetch_add(&blas_runs, 1);
    }
    for (int e = 0; e < started; e++)
        pthread_join(threads[e], NULL);
    free(threads);
    free(spawned);
    give_slots(lib, numjobs, slot);
}

/* one callback per routed library (the callback is not told which library calls it) */
#define BLAS_CALLBACK(i)                                                                    \
    static void blas_callback_##i(int sync, blas_job_fn job, int n, size_t size, void *jobs, \
                                  int arg)                                                   \
    {                                                                                        \
        blas_threads_run(&blas_libs[i], sync, job, n, size, jobs, arg);                      \
    }
BLAS_CALLBACK(0)
BLAS_CALLBACK(1)
BLAS_CALLBACK(2)
BLAS_CALLBACK(3)
static void *const blas_callbacks[MAX_BLAS_LIBS] = {
    (void *)blas_callback_0, (void *)blas_callback_1, (void *)blas_callback_2,
    (void *)blas_callback_3};
#endif /* NATIVE_POOL */

typedef void (*blas_setter_fn)(void *callback);

/* route_blas(setter, threads, spin_us, workers, max_slots) -> bool: make OpenBLAS run its
 * parallel work on this pool (``setter``: the address of its
 * ``openblas_set_threads_callback_function``; ``workers``: of its ``blas_num_threads``, or 0;
 * ``max_slots``: its MAX_THREADS), starting the pool now; threads < 2 gives OpenBLAS its own
 * threads back. */
static PyObject *
route_blas(PyObject *mod, PyObject *args)
{
    PyObject *addr, *workers;
    int threads, max_slots;
    double spin_us;
    if (!PyArg_ParseTuple(args, "OidOi", &addr, &threads, &spin_us, &workers, &max_slots))
        return NULL;
    void *workers_addr = PyLong_AsVoidPtr(workers);
    if (PyErr_Occurred())
        return NULL;
    blas_setter_fn setter = (blas_setter_fn)PyLong_AsVoidPtr(addr);
    if (setter == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "route_blas: null setter");
        return NULL;
    }
#ifndef NATIVE_POOL
    Py_RETURN_FALSE;
#else
    if (threads < 2) {
        setter(NULL);                         /* its own threads again; the entry stays */
        Py_RETURN_FALSE;
    }
    int i = 0;
    while (i < MAX_BLAS_LIBS && blas_libs[i].setter != NULL && blas_libs[i].setter != setter)
        i++;
    /* (an OpenBLAS with tables past MAX_SLOTS could hand more jobs than slots: not routed) */
    if (i == MAX_BLAS_LIBS || threads > MAX_THREADS || max_slots < 1 || max_slots > MAX_SLOTS ||
            pool_for(threads, (int64_t)(spin_us * 1000.0)) == NULL)
        Py_RETURN_FALSE;
    blas_libs[i].workers = (const int *)workers_addr;
    blas_libs[i].max_slots = max_slots;
    blas_libs[i].setter = (void *)setter;
    route_threads = threads;
    route_spin_ns = (int64_t)(spin_us * 1000.0);
    setter(blas_callbacks[i]);
    Py_RETURN_TRUE;
#endif
}

static PyObject *
blas_counts(PyObject *mod, PyObject *unused)
{
#ifdef NATIVE_POOL
    return Py_BuildValue("KK", (unsigned long long)atomic_load(&blas_runs),
                         (unsigned long long)atomic_load(&blas_spawned));
#else
    return Py_BuildValue("KK", 0ULL, 0ULL);
#endif
}

/* key(args) -> bytes naming each argument's Numba type as the dispatcher types it (an array's
 * dtype, ndim, contiguity, writability, alignment; a Python int, bool or float; a NumPy
 * float32/float64 number), or None for an argument the native path does not pass. */
static PyObject *
key(PyObject *mod, PyObject *args)
{
    if (!PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "key: args must be a tuple");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    char buf[4 * 64];
    Py_ssize_t len = 0;
    if (n > 64)
        Py_RETURN_NONE;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *o = PyTuple_GET_ITEM(args, k);
        if (PyArray_CheckExact(o)) {
            PyArrayObject *a = (PyArrayObject *)o;
            PyArray_Descr *d = PyArray_DESCR(a);
            int tn = d->type_num;
            if (PyArray_ISBYTESWAPPED(a) || tn > NPY_CLONGDOUBLE || tn == NPY_LONGDOUBLE ||
                    tn == NPY_CLONGDOUBLE)
                Py_RETURN_NONE;
            int flags = PyArray_FLAGS(a);
            buf[len++] = 'A';
            buf[len++] = (char)(tn + 1);
            buf[len++] = (char)(PyArray_NDIM(a) + 1);
            buf[len++] = (char)(1 + ((flags & NPY_ARRAY_C_CONTIGUOUS) ? 1 : 0) +
                                ((flags & NPY_ARRAY_F_CONTIGUOUS) ? 2 : 0) +
                                ((flags & NPY_ARRAY_WRITEABLE) ? 4 : 0) +
                                ((flags & NPY_ARRAY_ALIGNED) ? 8 : 0));
        } else if (PyBool_Check(o)) {
            buf[len++] = 'b';
        } else if (PyLong_CheckExact(o)) {
            buf[len++] = 'i';
        } else if (PyFloat_CheckExact(o)) {
            buf[len++] = 'd';
        } else if (PyArray_IsScalar(o, Double)) {
            buf[len++] = 'D';
        } else if (PyArray_IsScalar(o, Float)) {
            buf[len++] = 'f';
        } else {
            Py_RETURN_NONE;
        }
    }
    return PyBytes_FromStringAndSize(buf, len);
}

static PyObject *
launch_count(PyObject *mod, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(launches);
}

static PyObject *
supported(PyObject *mod, PyObject *unused)
{
#ifdef NATIVE_POOL
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL,
     "run(address, kinds, parts, args, threads, spin_us, hot_only): a kernel's native "
     "function over [0, parts) split across the C pool; 0, BUSY, UNSUPPORTED, COLD or the "
     "failing status."},
    {"key", key, METH_O, "key(args): bytes naming the arguments' types, or None."},
    {"launches", launch_count, METH_NOARGS, "Kernels run on the C pool so far."},
    {"route_blas", route_blas, METH_VARARGS,
     "route_blas(setter_address, threads, spin_us, workers_address, max_threads): OpenBLAS's "
     "parallel work on the C pool (threads < 2: on its own threads again); whether routed."},
    {"blas_counts", blas_counts, METH_NOARGS,
     "(OpenBLAS job sets run on the pool, sets that started threads of their own)."},
    {"supported", supported, METH_NOARGS, "Whether this platform has the native pool."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_nativepool",
    "The thread pool's launch path without the GIL (see jitgrad/_nativepool.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__nativepool(void)
{
    import_array();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
#ifdef NATIVE_POOL
    pthread_atfork(NULL, NULL, after_fork_child);
#endif
    if (PyModule_AddIntConstant(m, "BUSY", RUN_BUSY) < 0 ||
        PyModule_AddIntConstant(m, "COLD", RUN_COLD) < 0 ||
        PyModule_AddIntConstant(m, "UNSUPPORTED", RUN_UNSUPPORTED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
