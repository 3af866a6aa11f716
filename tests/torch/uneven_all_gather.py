# Sequence parallelism with variable-length batches: rank r holds 2 + r % 3 tokens and gathers
# everyone's with all_gather of unequal tensors (on NCCL a broadcast from each rank). Every rank
# sizes the parts from the same counts, so the gather agrees. With --stale, the last rank sizes
# rank 0's part from a count it kept from the step before (one token more): that pair's
# broadcast disagrees. Gloo refuses unequal parts: record it with --fake.
# Expected: ok; with --stale, mismatch.
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    counts = [2 + r % 3 for r in range(world)]
    if "--stale" in sys.argv and rank == world - 1:
        counts[0] += 1
    hidden = 16
    local = torch.ones(counts[rank], hidden)
    parts = [torch.empty(n, hidden) for n in counts]
    dist.all_gather(parts, local)
    dist.all_reduce(torch.ones(4))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
