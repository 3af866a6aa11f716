# A small data-parallel training script, written for GPUs (backend nccl), to try
# `lockstep record --torch` on (README.md, docs/record.md):
#
#   lockstep record --torch -o rec --nproc 4 -- python3 record/examples/train.py
#   lockstep check rec/trace.jsonl
#
# Each rank trains on its shard of a dataset of 10 samples in batches of 2. 10 samples do not
# split evenly over 4 ranks: ranks 0 and 1 get 3 samples (2 batches), ranks 2 and 3 get 2 (1
# batch). The ranks with more batches wait in the gradient all-reduce of their last batch for
# ranks that left the loop: under NCCL, a hang until the watchdog kills the job. `--even` drops
# the samples that do not split (as DistributedSampler(drop_last=True) does): every rank runs
# the same number of steps.
import argparse

import torch
import torch.distributed as dist

SAMPLES = 10
BATCH = 2


def shard(rank, world, even):
    indices = list(range(SAMPLES))
    if even:
        indices = indices[: SAMPLES - SAMPLES % world]
    return indices[rank::world]


def average_gradients(model, world):
    for parameter in model.parameters():
        dist.all_reduce(parameter.grad)
        parameter.grad /= world


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--even", action="store_true", help="drop the samples that do not split evenly")
    args = parser.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", rank) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
    dist.broadcast(model[0].weight.data, src=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(SAMPLES, 16)
    target = torch.randn(SAMPLES, 1)
    mine = shard(rank, world, args.even)
    for start in range(0, len(mine), BATCH):
        batch = mine[start : start + BATCH]
        x, y = data[batch].to(device), target[batch].to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        average_gradients(model, world)
        optimizer.step()
    if rank == 0:
        print("trained", len(mine), "samples on rank 0")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
