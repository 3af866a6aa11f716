# A metric all-reduced on rank 0 only: rank 0 calls all_reduce(loss) inside `if rank == 0`, the
# other ranks go on to the next step's gradient all-reduce. The k-th all-reduces of the ranks
# then differ in size. Expected: mismatch.
import torch
import torch.distributed as dist


def log_loss(loss):
    total = loss.detach().clone()
    dist.all_reduce(total)  # only rank 0 gets here
    print("loss", total.item() / dist.get_world_size())


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    model = torch.nn.Linear(16, 16)
    for step in range(2):
        loss = model(torch.randn(2, 16)).pow(2).mean()
        loss.backward()
        dist.all_reduce(model.weight.grad)
        if rank == 0:
            log_loss(loss)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
