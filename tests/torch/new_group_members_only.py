# new_group called by its members only. PyTorch requires every rank of the default group to call
# new_group (the others get GroupMember.NON_GROUP_MEMBER); ranks 0 and 1 wait for rank 2 in it,
# rank 2 waits in the final barrier. Expected: hang.
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    if rank in (0, 1):
        pair = dist.new_group([0, 1])
        dist.all_reduce(torch.ones(4), group=pair)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
