"""Native objects of large fused kernels: exported on the first compilation, loaded by a new
process without importing Numba, bit-identical results; every failure falls back to Numba."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from jitgrad.compiler import native

pytestmark = pytest.mark.skipif(not native.native_enabled() or native.host_id() is None
                                or native._compiler() is None,
                                reason="native objects need Linux and a C compiler")

_PROGRAM = r"""
import sys
import numpy as np
import jitgrad as jg
n = int(sys.argv[1])
rng = np.random.default_rng(0)
x, w, b = (jg.tensor(rng.standard_normal(n), dtype=jg.float32, requires_grad=True)
           for _ in range(3))
@jg.compile
def step(x, w, b):
    x.grad = w.grad = b.grad = None
    loss = (jg.tanh(x * w + b) ** 2 * jg.sigmoid(x)).sum()
    loss.backward()
    return loss
step(x, w, b)
loss = step(x, w, b)
np.save(sys.argv[2], np.concatenate([[loss.item()], x.grad.numpy(), w.grad.numpy(),
                                     b.grad.numpy()]))
print("numba" in sys.modules)
"""
N_LARGE = 600_000   # x GroupCode.cost (~23) is above NATIVE_MIN_WORK
N_SMALL = 20_000


def _run(tmp_path, n, tag, **env):
    out = tmp_path / f"{tag}.npy"
    e = dict(os.environ, JITGRAD_CACHE_DIR=str(tmp_path / "cache"), **env)
    r = subprocess.run([sys.executable, "-c", _PROGRAM, str(n), str(out)],
                       capture_output=True, text=True, env=e, timeout=600)
    assert r.returncode == 0, r.stderr
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
    meta.write_text(json.dumps(dict(m, host="another cpu")))
    assert native.load(str(meta).replace(".native.json", ".py")) is None
    meta.write_text("{not json")
    assert native.load(str(meta).replace(".native.json", ".py")) is None
    assert not meta.exists() and not so.exists()  # an unreadable sidecar: discarded


def test_no_c_compiler_means_no_native_object(tmp_path):
    numba_used, res = _run(tmp_path, N_LARGE, "nocc", CC="/nonexistent/cc",
                           PATH=os.path.dirname(sys.executable))
    assert numba_used and _artifacts(tmp_path) == ([], [])
    assert np.isfinite(res).all()
