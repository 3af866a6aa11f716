#!/usr/bin/env python3
"""Inputs for bench/import_bench.sh: RANKS Flight Recorder JSON dumps of RECORDS entries each
(an SPMD step loop: all_gather on a tp pair, all_reduce on the world, a send/recv pair on pp,
states completed), or one NCCL INFO log with RANKS x RECORDS COLL lines, ranks interleaved.

  gen_import.py DIR flight-recorder|nccl-log RANKS RECORDS
"""
import json
import os
import sys


def fr(out, ranks, records):
    os.makedirs(out, exist_ok=True)
    for rank in range(ranks):
        tp = rank // 2
        pp_peer = rank ^ 1
        groups = {"0": {"name": "0", "desc": "default_pg", "ranks": "[" + ", ".join(map(str, range(ranks))) + "]"},
                  str(1 + tp): {"name": str(1 + tp), "desc": "tp", "ranks": f"[{2 * tp}, {2 * tp + 1}]"}}
        parts = []
        seq = {"0": 0, "tp": 0}
        p2p = 0
        for i in range(records):
            kind = i % 3
            if kind == 0:
                seq["tp"] += 1
                pg, name, size, s, isp = [str(1 + tp), "tp"], "nccl:all_gather", 4096, seq["tp"], "false"
            elif kind == 1:
                seq["0"] += 1
                pg, name, size, s, isp = ["0", "default_pg"], "nccl:all_reduce", 1048576, seq["0"], "false"
            else:
                p2p += 1
                local = rank % 2
                # even ranks send first, odd ranks receive first: alternating keeps them matched
                send = (p2p + local) % 2 == 0
                name = f"nccl:send {local}->{1 - local}" if send else f"nccl:recv {local}<-{1 - local}"
                pg, size, s, isp = [str(1 + tp), "tp"], 65536, seq["tp"], "true"
            parts.append(
                '{"collective_seq_id":%d,"input_dtypes":["Float"],"input_sizes":[[%d]],"is_p2p":%s,"op_id":%d,'
                '"output_dtypes":["Float"],"output_sizes":[[%d]],"p2p_seq_id":%d,"pg_id":%s,"process_group":["%s","%s"],'
                '"profiling_name":"%s","record_id":%d,"retired":true,"state":"completed","time_created_ns":%d,'
                '"time_discovered_completed_ns":%d,"time_discovered_started_ns":%d,"timeout_ms":600000}'
                % (s, size, isp, i + 1, size, p2p, pg[0], pg[0], pg[1], name, i,
                   1700000000000000000 + i, 1700000000000000900 + i, 1700000000000000500 + i))
        text = '{"entries":[' + ",".join(parts) + '],"pg_config":' + json.dumps(groups, separators=(",", ":")) + \
               ',"pg_status":{},"version":"2.10"}'
        with open(f"{out}/nccl_trace_rank_{rank}.json", "w") as f:
            f.write(text)


def nccl(out, ranks, records):
    os.makedirs(out, exist_ok=True)
    with open(f"{out}/job.txt", "w") as f:
        for r in range(ranks):
            f.write(f"node{r // 8}:{1000 + r}:{2000 + r} [{r % 8}] NCCL INFO comm 0x{0x5500 + r:x} rank {r} nranks {ranks} "
                    f"cudaDev {r % 8} nvmlDev {r % 8} busId 18000 commId 0xc0ffee - Init COMPLETE\n")
        for i in range(records):
            lines = []
            for r in range(ranks):
                lines.append(f"node{r // 8}:{1000 + r}:{1000 + r} [{r % 8}] NCCL INFO AllReduce: opCount {i:x} sendbuff 0x7f00 "
                             f"recvbuff 0x7f00 count {1024 + i % 7} datatype 7 op 0 root 0 comm 0x{0x5500 + r:x} [nranks={ranks}] "
                             f"stream 0x5600\n")
            f.write("".join(lines))


if __name__ == "__main__":
    out, kind, ranks, records = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    (fr if kind == "flight-recorder" else nccl)(out, ranks, records)
