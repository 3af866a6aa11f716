# A correct job that uses most of torch.distributed: groups made by every rank, a data-parallel
# gradient all-reduce, async collectives waited for, a pipeline exchange by batch_isend_irecv,
# isend/irecv pairs, an object all-gather, broadcast, reduce_scatter (which gloo lacks: the
# recorder runs it as an all-reduce) and all_to_all_single with uneven splits.
# Expected: ok.
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    metrics = dist.new_group(list(range(world)))

    model = torch.nn.Linear(4, 4)
    model(torch.randn(2, 4)).sum().backward()
    handles = [dist.all_reduce(p.grad, async_op=True) for p in model.parameters()]
    for handle in handles:
        handle.wait()

    nxt, prv = (rank + 1) % world, (rank - 1) % world
    send, recv = torch.ones(8), torch.empty(8)
    requests = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)])
    for request in requests:
        request.wait()

    if rank % 2 == 0:
        out = dist.isend(send, dst=(rank + 1) % world)
    else:
        out = dist.irecv(recv, src=(rank - 1) % world)
    out.wait()

    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank})
    dist.broadcast(torch.zeros(3), src=0)
    if rank % 2 == 0:
        dist.all_reduce(torch.ones(2), group=evens)
    shard = torch.empty(2)
    dist.reduce_scatter(shard, [torch.ones(2) for _ in range(world)])
    splits = [1 + r for r in range(world)]  # peer r gets r+1 elements from every rank
    output = torch.empty(sum([1 + rank] * world))
    dist.all_to_all_single(output, torch.ones(sum(splits)), output_split_sizes=[1 + rank] * world,
                           input_split_sizes=splits)
    dist.all_reduce(torch.tensor([float(rank)]), group=metrics)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
