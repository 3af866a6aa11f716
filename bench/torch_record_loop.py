# The loop bench/torch_record_bench.sh times: CALLS calls of one torch.distributed function on a
# 16-float tensor, in a world of one rank (init_process_group("gloo") from RANK, WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT), after 1,000 calls of warm-up. Prints the loop's thread CPU time and
# wall time per call. Run plain, or under `lockstep record --torch` (which arms the recorder).
import argparse
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100000)
    parser.add_argument("--op", choices=["all_reduce", "broadcast", "async_wait"], default="all_reduce")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    tensor = torch.ones(16)

    def call():
        if args.op == "all_reduce":
            dist.all_reduce(tensor)
        elif args.op == "broadcast":
            dist.broadcast(tensor, src=0)
        else:
            dist.all_reduce(tensor, async_op=True).wait()

    for _ in range(1000):
        call()
    cpu0, wall0 = time.thread_time_ns(), time.perf_counter_ns()
    for _ in range(args.calls):
        call()
    cpu1, wall1 = time.thread_time_ns(), time.perf_counter_ns()
    print("%d calls of %s: %.1f ns CPU per call, %.1f ns wall per call" %
          (args.calls, args.op, (cpu1 - cpu0) / args.calls, (wall1 - wall0) / args.calls))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
