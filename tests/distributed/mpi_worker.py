"""Run by test_mpi.py under ``mpiexec -n 2 python -m mpi4py mpi_worker.py CHECK``: each rank
asserts its results (an uncaught AssertionError aborts the job, a nonzero exit) and prints
``OK <check> <rank>`` at the end."""

from __future__ import annotations

import datetime
import os
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


def reference_step_and_compare(model, reference, ref_opt, xs, ys, size: int) -> None:
    """One SGD step of the one-process reference on the whole batch ``xs, ys``; the DDP
    replica (stepped on its shard) must then hold its gradients and parameters (rtol 1e-10),
    the same bits on every rank."""
    ref_opt.zero_grad()
    jitgrad.nn.functional.cross_entropy(reference(xs), ys).backward()
    ref_opt.step()
    np.testing.assert_allclose(flat_grads(model.module), flat_grads(reference), rtol=1e-10,
                               atol=1e-14)
    np.testing.assert_allclose(flat_params(model.module), flat_params(reference), rtol=1e-10)
    assert same_on_every_rank(flat_params(model.module), size)


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
        reference_step_and_compare(model, reference, ref_opt, xs, ys, size)
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


def check_ddp_views_and_overlap(rank: int, size: int) -> None:
    """Gradients are views into the bucket buffers (accumulated there in place, reduced in
    place: the same .grad objects step after step); a bucket's allreduce starts during the
    backward pass, before the first layer's gradients are computed, and is waited at its
    end."""
    from jitgrad.nn.parallel import DistributedDataParallel as DDP
    from jitgrad.nn.parallel import distributed as ddp_module

    model = DDP(mlp(0), bucket_cap_mb=1e-4)
    first = model.module[0]
    log = []
    started = ddp_module.all_reduce_array

    def logged(buf, *args, **kwargs):
        log.append(("start", kwargs["what"].split(" (")[0]))
        return started(buf, *args, **kwargs)

    ddp_module.all_reduce_array = logged
    try:
        x = jitgrad.tensor(rank_data(rank, (4, 4)))
        grads = None
        for step in range(2):
            model.zero_grad(set_to_none=step == 0)
            h = first(x)
            h.register_hook(lambda g: log.append(("first layer's output gradient",)))
            out = model.module[2](model.module[1](h))
            model._prepare(True)  # (the forward went around the wrapper's forward)
            out.sum().backward()
            expected = [("start", f"DistributedDataParallel bucket {k} of {len(model._buckets)}")
                        for k in range(len(model._buckets))]
            hook_at = log.index(("first layer's output gradient",))
            assert log[:hook_at] == expected[:hook_at] and hook_at >= 2, log
            assert log[hook_at + 1:] == expected[hook_at:], log
            log.clear()
            for b in model._buckets:
                for p, view in zip(b.params, b.views):
                    assert p.grad._data is view and np.shares_memory(view, b.flat)
            if grads is not None:  # zero_grad(set_to_none=False): the same tensors
                assert [p.grad for p in model.parameters()] == grads
            grads = [p.grad for p in model.parameters()]
        assert same_on_every_rank(flat_grads(model.module), size)
    finally:
        ddp_module.all_reduce_array = started


def check_ddp_compiled(rank: int, size: int) -> None:
    """A compiled training step (forward, backward with DDP's averaging, SGD step) on two
    ranks in float64 equals one process training on the whole batch; ranks bit-identical;
    the plan holds the collectives as effect ops, each wait before the optimizer's reads."""
    from jitgrad.nn.parallel import DistributedDataParallel as DDP

    cross_entropy = jitgrad.nn.functional.cross_entropy
    data = np.random.default_rng(1)
    x = jitgrad.tensor(data.standard_normal((8 * size, 4)))
    y = jitgrad.tensor(data.integers(0, 3, 8 * size))
    reference = mlp(0)
    model = DDP(mlp(rank), bucket_cap_mb=1e-4)
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = jitgrad.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)

    @jitgrad.compile(fullgraph=True)
    def step(xs, ys):
        opt.zero_grad()
        loss = cross_entropy(model(xs), ys)
        loss.backward()
        opt.step()
        return loss.detach()

    shard = slice(rank * 8 // size, (rank + 1) * 8 // size)
    for k in range(5):
        xs, ys = x[8 * k % (8 * size):][:8], y[8 * k % (8 * size):][:8]
        step(xs[shard].contiguous(), ys[shard].contiguous())
        reference_step_and_compare(model, reference, ref_opt, xs, ys, size)
    # the first step traces, the second (momentum buffers now exist) too; then plans only
    assert step.stats["traces"] == 2 and step.stats["cache_hits"] == 3, step.stats
    # no copy in or out: the plan computed every gradient in its bucket view (the bucket's
    # allreduce found them there) and .grad is the bucket's view tensor, as in eager mode
    for b in model._buckets:
        assert b.site.copied == 0, b.what
        for p, g, view in zip(b.params, b.grads, b.views):
            assert p.grad is g and g._data is view and np.shares_memory(view, b.flat)
    graph = step.lower(xs[shard].contiguous(), ys[shard].contiguous()).graph
    lines = graph.splitlines()
    starts = [i for i, ln in enumerate(lines) if "allreduce_start" in ln]
    waits = [i for i, ln in enumerate(lines) if "allreduce_wait" in ln]
    n = len(model._buckets)
    assert len(starts) == len(waits) == n > 1, graph
    # every start comes before every wait: the backward runs between them
    assert max(starts) < min(waits), graph
    for k, i in enumerate(starts):
        assert f"bucket {k} of {n}" in lines[i], lines[i]
    # compile(model) of the wrapper: the compiled forward's plan tells DDP at every call
    # that the eager backward which follows synchronises
    reference, wrapped = mlp(0), DDP(mlp(rank), bucket_cap_mb=1e-4)
    compiled = jitgrad.compile(wrapped)
    for k in range(3):
        xs, ys = x[8 * k % (8 * size):][:8], y[8 * k % (8 * size):][:8]
        for m, inputs, targets in ((compiled, xs[shard], ys[shard]), (reference, xs, ys)):
            m.zero_grad()
            cross_entropy(m(inputs), targets).backward()
        np.testing.assert_allclose(flat_grads(wrapped.module), flat_grads(reference),
                                   rtol=1e-10, atol=1e-14)
    assert compiled.forward.stats["traces"] == 1, compiled.forward.stats
    for as_view in (True, False):
        check_ddp_compiled_one_bucket(rank, size, x, y, as_view)


def sgd_step(model, opt, xs, ys):
    """One training step: forward, cross-entropy, backward, optimizer step."""
    opt.zero_grad()
    loss = jitgrad.nn.functional.cross_entropy(model(xs), ys)
    loss.backward()
    opt.step()
    return loss.detach()


def check_ddp_compiled_one_bucket(rank: int, size: int, x, y, as_view: bool) -> None:
    """The default bucket size: every gradient in one bucket, each computed into its view of
    the one flat buffer (matmuls, fused sums); compiled == eager DDP == one process. With
    ``gradient_as_bucket_view=False`` gradients are tensors of their own, copied in and out
    (compiled and eager), with the same results."""
    from jitgrad.nn.parallel import DistributedDataParallel as DDP

    model, eager = (DDP(mlp(rank), gradient_as_bucket_view=as_view) for _ in range(2))
    reference = mlp(0)
    opts = [jitgrad.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
            for m in (model, eager, reference)]
    assert len(model._buckets) == 1
    opt = opts[0]

    @jitgrad.compile(fullgraph=True)
    def step(xs, ys):
        return sgd_step(model, opt, xs, ys)

    shard = slice(rank * 8 // size, (rank + 1) * 8 // size)
    for k in range(4):
        xs, ys = x[8 * k % (8 * size):][:8], y[8 * k % (8 * size):][:8]
        step(xs[shard].contiguous(), ys[shard].contiguous())
        sgd_step(eager, opts[1], xs[shard], ys[shard])
        sgd_step(reference, opts[2], xs, ys)
        got = flat_params(model.module)
        np.testing.assert_allclose(got, flat_params(reference), rtol=1e-10)
        np.testing.assert_allclose(got, flat_params(eager.module), rtol=1e-10)
        np.testing.assert_allclose(flat_grads(model.module), flat_grads(reference),
                                   rtol=1e-10, atol=1e-14)
        assert same_on_every_rank(got, size)
    assert step.stats["traces"] == 2, step.stats
    bucket = model._buckets[0]
    assert bucket.site.copied == (0 if as_view else len(bucket.params))
    for m in (model, eager):
        grads = [p.grad for p in m._buckets[0].params]
        assert all((g is view) == as_view for g, view in zip(grads, m._buckets[0].grads))
        assert all(np.shares_memory(g._data, m._buckets[0].flat) == as_view
                   for g in grads)


def check_ddp_compiled_buffers(rank: int, size: int) -> None:
    """broadcast_buffers=True inside a compiled step: rank 0's buffers (BatchNorm's running
    statistics) are broadcast at the start of every forward, as in eager mode (PyTorch
    broadcasts them before each forward). The ranks set different running statistics before
    each step and train on the same batch, so their buffers after the step are the same bits
    only if the forward used rank 0's; compiled == eager."""
    from jitgrad.nn.parallel import DistributedDataParallel as DDP

    nn = jitgrad.nn

    def net() -> nn.Module:
        jitgrad.manual_seed(3)
        return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Tanh(),
                             nn.Linear(6, 3)).double()

    data = np.random.default_rng(2)
    x = jitgrad.tensor(data.standard_normal((8, 4)))
    y = jitgrad.tensor(data.integers(0, 3, 8))
    model, eager = DDP(net()), DDP(net())
    assert model.broadcast_buffers and eager.broadcast_buffers
    opt, eager_opt = (jitgrad.optim.SGD(m.parameters(), lr=0.1) for m in (model, eager))

    @jitgrad.compile(fullgraph=True)
    def step():
        return sgd_step(model, opt, x, y)

    for k in range(4):
        for m in (model, eager):
            norm = m.module[1]
            with jitgrad.no_grad():
                norm.running_mean.fill_(10.0 * rank + k)
                norm.running_var.fill_(1.0 + rank + k)
                norm.num_batches_tracked.fill_(100 * rank + k)
        step()
        sgd_step(eager, eager_opt, x, y)
        state = [np.concatenate([b.detach().numpy().reshape(-1).astype(np.float64)
                                 for b in m.module.buffers()]) for m in (model, eager)]
        np.testing.assert_allclose(state[0], state[1], rtol=1e-12)
        assert same_on_every_rank(state[0], size), state
        assert model.module[1].num_batches_tracked.item() == k + 1
        np.testing.assert_allclose(flat_params(model.module), flat_params(eager.module),
                                   rtol=1e-10)
    assert step.stats["traces"] == 1, step.stats


def check_ddp_timeout(rank: int, size: int) -> None:
    """Rank 1 skips the gradient allreduce (its backward runs under no_sync) and then waits
    in a barrier: each rank's wait times out after the group's timeout (2 s) and raises,
    naming its operation (rank 0: the DDP bucket)."""
    from jitgrad.nn.parallel import DistributedDataParallel as DDP

    model = DDP(mlp(0), bucket_cap_mb=1e-4)
    x = jitgrad.tensor(rank_data(rank, (4, 4)))
    start = time.monotonic()
    try:
        if rank == 0:
            model(x).sum().backward()
        else:
            with model.no_sync():
                model(x).sum().backward()
            dist.barrier()
    except RuntimeError as e:
        waited = time.monotonic() - start
        assert 1.9 < waited < 10, waited
        print(f"TIMEOUT {rank}: {e}", flush=True)
    else:
        raise AssertionError("no timeout")


def check_abort(rank: int, size: int) -> None:
    """Rank 1 raises while rank 0 waits in a barrier: ``python -m mpi4py`` aborts the job."""
    if rank == 1:
        raise RuntimeError("rank 1 fails on purpose")
    dist.barrier()


CHECKS = {"collectives": check_collectives, "sampler": check_sampler, "ddp": check_ddp,
          "ddp_views": check_ddp_views_and_overlap, "ddp_compiled": check_ddp_compiled,
          "ddp_compiled_buffers": check_ddp_compiled_buffers,
          "ddp_timeout": check_ddp_timeout, "abort": check_abort}

if __name__ == "__main__":
    timeout = 2 if "ddp_timeout" in sys.argv else 30
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=timeout))
    rank, size = dist.get_rank(), dist.get_world_size()
    assert size == 2, size
    for name in sys.argv[1:]:
        CHECKS[name](rank, size)
        print(f"OK {name} {rank}", flush=True)
    if "ddp_timeout" in sys.argv:
        # collectives stay pending on both ranks (MPI_Finalize would wait for them): meet on
        # COMM_WORLD itself (jitgrad's groups use duplicates of it) and leave without it
        from mpi4py import MPI

        MPI.COMM_WORLD.Barrier()
        os._exit(0)
    dist.destroy_process_group()
