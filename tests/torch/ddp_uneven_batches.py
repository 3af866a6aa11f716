# DistributedDataParallel with uneven batches: the last rank runs one step fewer. DDP all-reduces
# the gradients from C++ (its Reducer) inside loss.backward(); under --fake those calls reach
# lockstep's process group and are recorded. Expected (--fake): hang, the other ranks waiting in
# the gradient all-reduce of their last backward.
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3 - (rank == world - 1)):
        loss = model(torch.randn(2, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
