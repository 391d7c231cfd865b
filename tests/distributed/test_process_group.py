"""jitgrad.distributed in one process (a world of size 1): the group's life cycle, PyTorch's
errors, collectives writing in place (version bumps, copies back for non-contiguous
tensors), autograd's in-place rules. The multi-rank checks are in test_mpi.py."""

from __future__ import annotations

import datetime
import subprocess
import sys

import numpy as np
import pytest

import jitgrad
import jitgrad.distributed as dist

pytest.importorskip("mpi4py")

NOT_INIT = "Default process group has not been initialized"


@pytest.fixture
def group():
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=30))
    yield
    dist.destroy_process_group()


def test_import_jitgrad_does_not_import_mpi():
    code = "import sys, jitgrad, jitgrad.distributed; print(int('mpi4py' in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "0"
    assert jitgrad.distributed is dist


@pytest.mark.parametrize("call", [dist.get_rank, dist.get_world_size, dist.get_local_rank,
                                  dist.barrier, dist.destroy_process_group, dist.get_backend,
                                  lambda: dist.all_reduce(jitgrad.ones(2)),
                                  lambda: dist.broadcast(jitgrad.ones(2), 0)])
def test_not_initialized_errors(call):
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match=NOT_INIT):
        call()


def test_life_cycle(group):
    assert dist.is_available() and dist.is_mpi_available() and dist.is_initialized()
    assert (dist.get_rank(), dist.get_world_size(), dist.get_local_rank()) == (0, 1, 0)
    assert dist.get_backend() == "mpi"
    with pytest.raises(ValueError, match="twice"):
        dist.init_process_group("mpi")
    dist.destroy_process_group()
    assert not dist.is_initialized()
    dist.init_process_group()  # again, after destroy
    assert dist.get_world_size() == 1


def test_init_arguments():
    with pytest.raises(ValueError, match="Invalid backend: 'nccl'"):
        dist.init_process_group("nccl")
    with pytest.raises(TypeError, match="datetime.timedelta"):
        dist.init_process_group("mpi", timeout=30)
    with pytest.raises(ValueError, match="world_size=4 but MPI gives 1"):
        dist.init_process_group("mpi", world_size=4, rank=0)
    assert not dist.is_initialized()


@pytest.mark.parametrize("op", list(dist.ReduceOp))
def test_all_reduce_world_of_one(group, op):
    t = jitgrad.tensor([[1.5, -2.0], [3.0, 4.0]], dtype=jitgrad.float64)
    before, v = t.numpy().copy(), t._version
    assert dist.all_reduce(t, op=op) is None
    np.testing.assert_array_equal(t.numpy(), before)
    assert t._version == v + 1


def test_all_reduce_dtypes_and_layouts(group):
    i = jitgrad.tensor([3, -1], dtype=jitgrad.int64)
    dist.all_reduce(i, op=dist.ReduceOp.MAX)
    assert i.tolist() == [3, -1]
    with pytest.raises(RuntimeError, match="AVG needs a floating point tensor"):
        dist.all_reduce(i, op=dist.ReduceOp.AVG)
    b = jitgrad.tensor([True, False])
    dist.all_reduce(b)
    assert b.tolist() == [True, False]
    s = jitgrad.tensor(2.0)  # zero-dim
    dist.all_reduce(s)
    assert s.item() == 2.0
    base = jitgrad.arange(6.0).reshape(2, 3)
    col = base.t()  # non-contiguous view: reduced in a copy, written back
    dist.all_reduce(col, op=dist.ReduceOp.AVG)
    assert base.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(TypeError, match="ReduceOp"):
        dist.all_reduce(base, op="sum")
    with pytest.raises(ValueError, match="group=None"):
        dist.all_reduce(base, group=object())


def test_grad_rules(group):
    w = jitgrad.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        dist.all_reduce(w)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        dist.broadcast(w, 0)
    with pytest.raises(RuntimeError, match="has a grad_fn"):
        dist.all_reduce(w * 2)
    with jitgrad.no_grad():
        dist.broadcast(w, 0)
        dist.all_reduce(w)
    assert w.tolist() == [1.0, 1.0, 1.0]


def test_broadcast_all_gather_barrier(group):
    t = jitgrad.arange(4.0)
    v = t._version
    dist.broadcast(t, src=0)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0] and t._version == v + 1
    with pytest.raises(ValueError, match="src 1"):
        dist.broadcast(t, src=1)
    out = [jitgrad.zeros(2, 2)]
    dist.all_gather(out, jitgrad.eye(2))
    assert out[0].tolist() == [[1.0, 0.0], [0.0, 1.0]] and out[0]._version == 1
    with pytest.raises(ValueError, match="tensor_list has 2 tensors; the world size is 1"):
        dist.all_gather([jitgrad.zeros(2), jitgrad.zeros(2)], jitgrad.ones(2))
    with pytest.raises(ValueError, match="must match the input tensor"):
        dist.all_gather([jitgrad.zeros(3)], jitgrad.ones(2))
    with pytest.raises(RuntimeError, match="read-only"):
        dist.broadcast(jitgrad.ones(1).expand(3), 0)
    assert dist.barrier() is None


def test_async_work(group):
    t = jitgrad.tensor([1.0, 2.0])
    work = dist.all_reduce(t, op=dist.ReduceOp.SUM, async_op=True)
    assert isinstance(work, dist.Work)
    assert work.wait() is True and work.is_completed()
    assert t._version == 1
    assert dist.barrier(async_op=True).wait(timeout=datetime.timedelta(seconds=5))
