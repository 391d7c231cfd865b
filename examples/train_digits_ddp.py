"""Data-parallel training of the digits MLP (``train_digits.py``) on MPI: one process per
rank, each on its shard of every batch (``DistributedSampler``), gradients averaged by
``DistributedDataParallel`` during the backward pass -- plain PyTorch DDP code with
``import jitgrad as torch``.

    mpiexec -n 2 -bind-to core python -m mpi4py examples/train_digits_ddp.py
    mpiexec -n 2 -bind-to core python -m mpi4py examples/train_digits_ddp.py --mode eager

(``-m mpi4py``: a rank that raises aborts the whole job instead of leaving the others
waiting; ``-bind-to core``: each rank on a core of its own, and jitgrad's thread pool sized to
it.) Rank 0 prints each epoch's loss (averaged over the ranks), the steady-state steps per
second, the test accuracy and whether every rank ended with the same parameters. Without
``mpiexec`` it trains in one process.
"""

from __future__ import annotations

import argparse
import datetime
import time

import numpy as np
from train_digits import load_data, make_step, mlp  # the digits demo beside this file

import jitgrad as torch
import jitgrad.distributed as dist
from jitgrad.nn.parallel import DistributedDataParallel as DDP
from jitgrad.utils.data import DataLoader, DistributedSampler, TensorDataset


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["eager", "compiled"], default="compiled")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64, help="global batch (all ranks)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--train-size", type=int, default=None, help="use the first N examples")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    dist.init_process_group("mpi", timeout=datetime.timedelta(minutes=5))
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} is not a multiple of the "
                         f"{world} ranks")
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"{world} rank(s), {torch.get_num_threads()} kernel thread(s) on rank 0, "
        f"mode {args.mode}")

    xtr, ytr, xte, yte = load_data(args.seed)
    if args.train_size:
        xtr, ytr = xtr[:args.train_size], ytr[:args.train_size]
    dataset = TensorDataset(xtr, ytr)
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(dataset, batch_size=args.batch_size // world, sampler=sampler,
                        drop_last=True)

    torch.manual_seed(args.seed + rank)  # DDP broadcasts rank 0's initial parameters
    model = DDP(mlp(), bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    step = make_step(model, opt)
    if args.mode == "compiled":
        step = torch.compile(step)

    start, steps = None, 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle of the shards each epoch
        total = torch.zeros(2, dtype=torch.float64)
        for x, y in loader:
            loss = step(x, y)
            total += torch.tensor([loss.item(), 1.0], dtype=torch.float64)
            if start is None:
                start = time.perf_counter()  # after the first step (tracing, compiling)
            else:
                steps += 1
        dist.all_reduce(total)  # the epoch's loss, averaged over every rank's steps
        say(f"epoch {epoch + 1:2d}/{args.epochs}: loss {total[0].item() / total[1].item():.4f}")
    elapsed = time.perf_counter() - start if start is not None else 0.0
    steps_per_s = steps / elapsed if elapsed > 0 else float("nan")

    model.eval()
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    mine = np.concatenate([q.detach().numpy().ravel() for q in model.parameters()])
    every = [torch.zeros(mine.size, dtype=torch.float32) for _ in range(world)]
    dist.all_gather(every, torch.tensor(mine))
    same = all(np.array_equal(e.numpy(), mine) for e in every)
    say(f"test accuracy {acc:.4f}, {steps_per_s:.1f} steps/s (global batch "
        f"{args.batch_size}), parameters identical on every rank: {same}")
    dist.destroy_process_group()
    return {"accuracy": acc, "steps_per_s": steps_per_s, "same": same}


if __name__ == "__main__":
    main()
