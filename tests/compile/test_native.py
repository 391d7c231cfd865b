"""Native objects of large fused kernels: exported on the first compilation, loaded by a new
process without importing Numba, bit-identical results; every failure falls back to Numba."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import w2_step

from jitgrad.compiler import native

pytestmark = pytest.mark.skipif(not native.native_enabled() or native.host_id() is None
                                or native._compiler() is None,
                                reason="native objects need Linux and a C compiler")

# the W2 step compiled whole (helpers.w2_step, defined in the program from its source)
_PROGRAM = r"""
import sys
import numpy as np
import jitgrad as jg
n = int(sys.argv[1])
rng = np.random.default_rng(0)
x, w, b = (jg.tensor(rng.standard_normal(n), dtype=jg.float32, requires_grad=True)
           for _ in range(3))
""" + inspect.getsource(w2_step) + r"""
step = jg.compile(w2_step)
step(x, w, b)
loss = step(x, w, b)
np.save(sys.argv[2], np.concatenate([[loss.item()], x.grad.numpy(), w.grad.numpy(),
                                     b.grad.numpy()]))
import resource
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step(x, w, b)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / 5)
print("numba" in sys.modules)
"""
N_LARGE = 600_000   # x GroupBinding.cost (~23) is above NATIVE_MIN_WORK
N_SMALL = 20_000


def _run(tmp_path, n, tag, **env):
    out = tmp_path / f"{tag}.npy"
    e = dict(os.environ, JITGRAD_CACHE_DIR=str(tmp_path / "cache"), **env)
    r = subprocess.run([sys.executable, "-c", _PROGRAM, str(n), str(out)],
                       capture_output=True, text=True, env=e, timeout=600)
    assert r.returncode == 0, r.stderr
    _run.faults_per_step = float(r.stdout.split()[-2])
    return r.stdout.split()[-1] == "True", np.load(out)


def _artifacts(tmp_path):
    return sorted((tmp_path / "cache" / "kernels").glob("jg_*.so")), \
        sorted((tmp_path / "cache" / "kernels").glob("jg_*.native.json"))


def test_warm_process_runs_the_native_object_without_numba(tmp_path):
    numba_cold, cold = _run(tmp_path, N_LARGE, "cold")
    sos, metas = _artifacts(tmp_path)
    assert numba_cold and len(sos) == len(metas) == 1
    numba_warm, warm = _run(tmp_path, N_LARGE, "warm")
    assert not numba_warm, "the warm process imported Numba"
    np.testing.assert_array_equal(warm, cold)
    # fresh outputs reuse freed heap blocks: the allocator is tuned by plans too, not only
    # by eager kernels, which a native-only process never loads (3 x 2.4 MB outputs a step
    # page-faulted ~600 times without it)
    assert _run.faults_per_step < 50, _run.faults_per_step
    _, off = _run(tmp_path, N_LARGE, "off", JITGRAD_NATIVE="0")
    np.testing.assert_array_equal(off, cold)


def test_small_kernels_are_not_exported(tmp_path):
    _run(tmp_path, N_SMALL, "small")
    assert _artifacts(tmp_path) == ([], [])


def test_a_corrupt_or_foreign_object_is_not_loaded(tmp_path):
    _, cold = _run(tmp_path, N_LARGE, "cold")
    (so,), (meta,) = _artifacts(tmp_path)
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0xFF
    so.write_bytes(bytes(data))
    numba_used, again = _run(tmp_path, N_LARGE, "corrupt")
    assert numba_used  # the digest did not match: the Numba dispatcher ran...
    np.testing.assert_array_equal(again, cold)
    assert so.read_bytes() != bytes(data)  # ...and the object was rebuilt
    numba_used, again = _run(tmp_path, N_LARGE, "rebuilt")
    assert not numba_used
    np.testing.assert_array_equal(again, cold)
    m = json.loads(meta.read_text())
    module = str(so).rsplit(".", 2)[0] + ".py"
    assert native.load(module, m["layout"]) is not None
    f64 = [k.replace("<f4", "<f8").replace("f32", "f64") for k in m["layout"]]
    assert native.load(module, f64) is None  # compiled for float32 only
    meta.write_text(json.dumps(dict(m, host="another cpu")))
    assert native.load(module, m["layout"]) is None
    meta.write_text(json.dumps(m))
    assert native.load(module, m["layout"]) is not None
    meta.write_text(json.dumps(dict(m, kernels="other vmath sources")))
    assert native.load(module, m["layout"]) is None  # built with other inlined sources:
    assert not meta.exists() and not so.exists()     # discarded, rebuilt by the next export
    meta.write_text("{not json")
    assert native.load(module, m["layout"]) is None
    assert not meta.exists() and not so.exists()  # an unreadable sidecar: discarded


def test_no_c_compiler_means_no_native_object(tmp_path):
    numba_used, res = _run(tmp_path, N_LARGE, "nocc", CC="/nonexistent/cc",
                           PATH=os.path.dirname(sys.executable))
    assert numba_used and _artifacts(tmp_path) == ([], [])
    assert np.isfinite(res).all()


def test_native_object_equals_the_dispatcher_and_runs_on_threads(tmp_path, monkeypatch, rng):
    """In-process: the exported object computes the same bits as the Numba dispatcher, also
    with several threads calling it at once (ctypes releases the GIL)."""
    import threading

    import jitgrad as jg
    from jitgrad.compiler import cache

    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    f = jg.compile(jg.value_and_grad(lambda x, w: (jg.tanh(x * w) * jg.sigmoid(x)).sum(),
                                     argnums=(0, 1)))
    x, w = (jg.tensor(rng.standard_normal(N_LARGE), dtype=jg.float32) for _ in range(2))
    f(x, w)
    f(x, w)  # compiled: the first kernel call exported the object
    (entry,) = (e for es in f._entries.values() for e in es)
    (gr,) = entry.plan.group_runners
    disp = cache.load_module(gr.source).kernel
    kern = native.load(cache.module_path(gr.source), native.layout_of(gr._arg_kinds()))
    assert kern is not None
    n = gr.n
    assert gr.desc.mode == "flat"  # every non-scalar operand is a full-length array
    ins = [np.dtype(v.dtype).type(0.75) if op.pattern == "scalar" else
           rng.standard_normal(n).astype(v.dtype)
           for v, op in zip(gr.binding.operands, gr.desc.operands)]
    scalars = [np.dtype(dt).type(v) for v, dt in gr.binding.scalars]
    outs = {}
    for name, k in (("numba", disp), ("native", kern)):
        o = [np.empty(n, np.float32) for _ in gr.binding.outputs]
        r = [np.empty(gr.parts) for _ in gr.binding.reductions]
        k(0, gr.parts, n, *ins, *scalars, *o, *r)
        outs[name] = o + r
    for p, q in zip(outs["numba"], outs["native"]):
        np.testing.assert_array_equal(p, q)
    results, errors = [], []

    def call():
        try:
            o = [np.empty(n, np.float32) for _ in gr.binding.outputs]
            r = [np.empty(gr.parts) for _ in gr.binding.reductions]
            kern(0, gr.parts, n, *ins, *scalars, *o, *r)
            results.append(o + r)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4
    for res in results:
        for p, q in zip(outs["numba"], res):
            np.testing.assert_array_equal(p, q)


def test_one_kernel_source_for_two_dtypes_gets_two_objects(tmp_path, monkeypatch):
    import jitgrad as jg
    from jitgrad.compiler import cache

    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    f = jg.compile(lambda x, y: x * y + x)   # no literals, no sums: dtype-free source
    n = 2_600_000                             # x (3 arrays + 2 equations / 2) > 10M
    srcs = set()
    for dt in (jg.float32, jg.float64):
        x, y = jg.ones(n, dtype=dt), jg.full((n,), 2.0, dtype=dt)
        f(x, y)
        out = f(x, y)
        assert out.dtype == dt and float(out[0]) == 3.0
        (entry,) = f._entries[next(k for k in f._entries if k[1][0][1] == x._data.dtype)]
        (gr,) = entry.plan.group_runners
        srcs.add(gr.source)
    assert len(srcs) == 1  # the same module...
    (src,) = srcs
    base = cache.module_path(src)[:-3]
    assert len(list((tmp_path / "kernels").glob(base.rsplit("/", 1)[1] + ".*.so"))) == 2


def test_a_native_call_with_other_dtypes_is_refused_not_reinterpreted(tmp_path, monkeypatch):
    import jitgrad as jg
    from jitgrad.compiler import cache

    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    f = jg.compile(lambda x, y: x * y + x)
    n = 2_600_000
    x, y = jg.ones(n, dtype=jg.float32), jg.ones(n, dtype=jg.float32)
    f(x, y)
    f(x, y)
    (entry,) = (e for es in f._entries.values() for e in es)
    (gr,) = entry.plan.group_runners
    kern = native.load(cache.module_path(gr.source), native.layout_of(gr._arg_kinds()))
    a64 = np.ones(n)
    o = np.empty(n, np.float32)
    with pytest.raises(native.LayoutMismatch):
        kern(0, gr.parts, n, a64, a64, o)
