# Two pipeline stages that both send before they receive (the activation forward, the gradient
# back, each posted before the other's receive). Under NCCL a send waits for its receive:
# neither send can complete. Gloo buffers small messages, so the run itself finishes.
# Expected: deadlock.
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    peer = 1 - rank
    outgoing = torch.full((1024,), float(rank))
    incoming = torch.empty(1024)
    for microbatch in range(2):
        dist.send(outgoing, dst=peer)
        dist.recv(incoming, src=peer)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
