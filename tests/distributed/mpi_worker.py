"""Run by test_mpi.py under ``mpiexec -n 2 python -m mpi4py mpi_worker.py CHECK``: each rank
asserts its results (an uncaught AssertionError aborts the job, a nonzero exit) and prints
``OK <check> <rank>`` at the end."""

from __future__ import annotations

import datetime
import sys
import time

import numpy as np

import jitgrad
import jitgrad.distributed as dist
from jitgrad.utils.data import DataLoader, DistributedSampler, TensorDataset


def rank_data(rank: int, shape=(3, 4)) -> np.ndarray:
    """Rank ``rank``'s operand: different on every rank, reproducible on all."""
    return np.random.default_rng(100 + rank).standard_normal(shape)


def check_collectives(rank: int, size: int) -> None:
    every = np.stack([rank_data(r) for r in range(size)])
    expected = {dist.ReduceOp.SUM: every.sum(0), dist.ReduceOp.AVG: every.sum(0) / size,
                dist.ReduceOp.MAX: every.max(0), dist.ReduceOp.MIN: every.min(0),
                dist.ReduceOp.PRODUCT: every.prod(0)}
    for op, want in expected.items():
        t = jitgrad.tensor(rank_data(rank))
        dist.all_reduce(t, op=op)
        np.testing.assert_allclose(t.numpy(), want, rtol=1e-15, err_msg=str(op))
    # float32, non-contiguous (a transposed view written back through its base), async
    base = jitgrad.tensor(rank_data(rank).astype(np.float32))
    work = dist.all_reduce(base.t(), op=dist.ReduceOp.SUM, async_op=True)
    work.wait()
    np.testing.assert_allclose(base.numpy(), every.astype(np.float32).sum(0), rtol=1e-6)
    ints = jitgrad.tensor([rank, 10 * rank + 1])
    dist.all_reduce(ints, op=dist.ReduceOp.MAX)
    assert ints.tolist() == [size - 1, 10 * (size - 1) + 1]
    flags = jitgrad.tensor([rank == 0, True])
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)
    assert flags.tolist() == [size == 1, True]
    for src in range(size):
        t = jitgrad.tensor(rank_data(rank, (5,)))
        dist.broadcast(t, src=src)
        np.testing.assert_array_equal(t.numpy(), rank_data(src, (5,)))
    out = [jitgrad.zeros(2, 3, dtype=jitgrad.float64) for _ in range(size)]
    dist.all_gather(out, jitgrad.tensor(rank_data(rank, (2, 3))))
    for r in range(size):
        np.testing.assert_array_equal(out[r].numpy(), rank_data(r, (2, 3)))
    dist.barrier()
    # a rank that is late past the timeout: the waiting rank raises, naming the operation;
    # the collective stays pending and a second wait finishes it
    if rank == 1:
        time.sleep(1.0)
    work = dist.all_reduce(jitgrad.ones(1), async_op=True)
    if rank == 0:
        try:
            work.wait(timeout=datetime.timedelta(seconds=0.2))
        except RuntimeError as e:
            assert "collective operation timeout: ALLREDUCE" in str(e), e
        else:
            raise AssertionError("no timeout")
    work.wait()


def check_sampler(rank: int, size: int) -> None:
    n = 11
    ds = TensorDataset(jitgrad.arange(n))
    sampler = DistributedSampler(ds, seed=5)
    assert (sampler.num_replicas, sampler.rank) == (size, rank)
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        mine = [i for (batch,) in DataLoader(ds, batch_size=4, sampler=sampler)
                for i in batch.tolist()]
        assert len(mine) == len(sampler) == -(-n // size)
        out = [jitgrad.zeros(len(mine), dtype=jitgrad.int64) for _ in range(size)]
        dist.all_gather(out, jitgrad.tensor(mine))
        seen = np.concatenate([o.numpy() for o in out])
        # every index once, plus the padding: the first indices of the epoch's order
        assert sorted(set(seen.tolist())) == list(range(n)), seen
        assert len(seen) - n == (-n) % size
        epochs.append(seen.tolist())
    assert epochs[0] != epochs[1] != epochs[2]


def mlp(seed: int) -> jitgrad.nn.Module:
    jitgrad.manual_seed(seed)
    return jitgrad.nn.Sequential(jitgrad.nn.Linear(4, 8), jitgrad.nn.Tanh(),
                                 jitgrad.nn.Linear(8, 3)).double()


def flat_params(model: jitgrad.nn.Module) -> np.ndarray:
    return np.concatenate([p.detach().numpy().reshape(-1) for p in model.parameters()])


def flat_grads(model: jitgrad.nn.Module) -> np.ndarray:
    return np.concatenate([p.grad.numpy().reshape(-1) for p in model.parameters()])


def same_on_every_rank(values: np.ndarray, size: int) -> bool:
    out = [jitgrad.zeros(values.size, dtype=jitgrad.float64) for _ in range(size)]
    dist.all_gather(out, jitgrad.tensor(values))
    return all(np.array_equal(o.numpy(), values) for o in out)


def check_ddp(rank: int, size: int) -> None:
    from jitgrad.nn.parallel import DistributedDataParallel as DDP

    cross_entropy = jitgrad.nn.functional.cross_entropy
    data = np.random.default_rng(0)
    x = jitgrad.tensor(data.standard_normal((8 * size, 4)))
    y = jitgrad.tensor(data.integers(0, 3, 8 * size))
    reference = mlp(0)  # rank 0's initial parameters, trained in one process on every batch
    model = DDP(mlp(rank), bucket_cap_mb=1e-4)  # ~100-byte buckets: several per step
    assert len(model._buckets) > 1
    assert np.array_equal(flat_params(model.module), flat_params(reference))
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = jitgrad.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(5):
        batch = slice(8 * step % (8 * size), 8 * step % (8 * size) + 8)
        xs, ys = x[batch], y[batch]
        shard = slice(rank * 8 // size, (rank + 1) * 8 // size)
        opt.zero_grad()
        cross_entropy(model(xs[shard]), ys[shard]).backward()
        opt.step()
        ref_opt.zero_grad()
        cross_entropy(reference(xs), ys).backward()
        ref_opt.step()
        np.testing.assert_allclose(flat_grads(model.module), flat_grads(reference),
                                   rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(flat_params(model.module), flat_params(reference),
                                   rtol=1e-10)
        assert same_on_every_rank(flat_params(model.module), size)
    # no_sync: the first micro-batch's gradients stay local, the second backward averages
    # the accumulated sum
    opt.zero_grad()
    reference.zero_grad()
    micro = [(x[4 * k:4 * k + 4], y[4 * k:4 * k + 4]) for k in range(2)]
    with model.no_sync():
        xs, ys = micro[0]
        cross_entropy(model(xs[2 * rank:2 * rank + 2]), ys[2 * rank:2 * rank + 2]).backward()
    assert not same_on_every_rank(flat_grads(model.module), size)
    xs, ys = micro[1]
    cross_entropy(model(xs[2 * rank:2 * rank + 2]), ys[2 * rank:2 * rank + 2]).backward()
    for xs, ys in micro:
        cross_entropy(reference(xs), ys).backward()
    np.testing.assert_allclose(flat_grads(model.module), flat_grads(reference), rtol=1e-10,
                               atol=1e-14)
    assert same_on_every_rank(flat_grads(model.module), size)
    # buffers: rank 0's at construction and before every forward
    norm = jitgrad.nn.BatchNorm1d(3).double()
    norm.running_mean.fill_(float(rank))
    wrapped = DDP(norm)
    assert norm.running_mean.tolist() == [0.0, 0.0, 0.0]
    with jitgrad.no_grad():
        norm.running_mean.fill_(float(rank + 1))
        wrapped.eval()
        wrapped(jitgrad.ones(2, 3, dtype=jitgrad.float64))
    assert norm.running_mean.tolist() == [1.0, 1.0, 1.0]


def check_abort(rank: int, size: int) -> None:
    """Rank 1 raises while rank 0 waits in a barrier: ``python -m mpi4py`` aborts the job."""
    if rank == 1:
        raise RuntimeError("rank 1 fails on purpose")
    dist.barrier()


CHECKS = {"collectives": check_collectives, "sampler": check_sampler, "ddp": check_ddp,
          "abort": check_abort}

if __name__ == "__main__":
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=30))
    rank, size = dist.get_rank(), dist.get_world_size()
    assert size == 2, size
    for name in sys.argv[1:]:
        CHECKS[name](rank, size)
        print(f"OK {name} {rank}", flush=True)
    dist.destroy_process_group()
