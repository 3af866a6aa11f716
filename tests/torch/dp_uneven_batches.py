# Data parallel with uneven batches: the last rank's shard holds one batch fewer, so it leaves
# the training loop early while the others wait in the gradient all-reduce of their last batch.
# Expected: hang (ranks 0..N-2 wait in allreduce; rank N-1 never issued it).
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = 3 - (rank == world - 1)  # 10 samples over 4 ranks: the last shard is short
    for step in range(batches):
        x = torch.randn(4, 8)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
