#!/usr/bin/env python3
"""Writes the Flight Recorder samples of tests/import/ (run from the repository root).

The dumps follow the documented layout of PyTorch's Flight Recorder (torch/csrc/distributed/c10d/
FlightRecorder*): a dict with version, pg_config, pg_status and entries; JSON as written by
_dump_nccl_trace_json (keys sorted, no spaces), pickle as the dump on timeout writes it.
"""
import json
import os
import pickle

OUT = "tests/import"


def entry(record_id, pg, seq, p2p_seq, op_id, name, sizes, dtype, state, is_p2p=False, out_sizes=None):
    done = state == "completed"
    started = state in ("completed", "started")
    return {
        "record_id": record_id,
        "pg_id": int(pg[0]),
        "process_group": list(pg),
        "collective_seq_id": seq,
        "p2p_seq_id": p2p_seq,
        "op_id": op_id,
        "profiling_name": name,
        "time_created_ns": 1700000000000000000 + record_id * 1000,
        "input_sizes": sizes,
        "input_dtypes": [dtype] * len(sizes),
        "output_sizes": out_sizes if out_sizes is not None else sizes,
        "output_dtypes": [dtype] * len(out_sizes if out_sizes is not None else sizes),
        "state": state,
        "time_discovered_started_ns": 1700000000000000500 + record_id * 1000 if started else 0,
        "time_discovered_completed_ns": 1700000000000000900 + record_id * 1000 if done else 0,
        "retired": done,
        "timeout_ms": 600000,
        "is_p2p": is_p2p,
    }


def pg_config(groups):
    return {name: {"name": name, "desc": desc, "ranks": "[" + ", ".join(map(str, ranks)) + "]"}
            for name, desc, ranks in groups}


def write_json(path, version, groups, entries):
    dump = {"version": version, "pg_config": pg_config(groups),
            "pg_status": {}, "entries": entries}
    with open(path, "w") as f:
        f.write(json.dumps(dump, sort_keys=True, separators=(",", ":")))


def write_pickle(path, version, groups, entries, protocol):
    for e in entries:  # the pickle dump holds tuples for process_group
        e["process_group"] = tuple(e["process_group"])
    dump = {"version": version, "pg_config": pg_config(groups), "pg_status": {}, "entries": entries}
    with open(path, "wb") as f:
        pickle.dump(dump, f, protocol=protocol)


def fr_hang():
    """4 ranks, DP over world plus two 'tp' pairs: rank 2 never joins all_reduce #5 on world."""
    d = f"{OUT}/fr-hang"
    os.makedirs(d, exist_ok=True)
    world = ("0", "default_pg")
    groups = [("0", "default_pg", [0, 1, 2, 3]), ("1", "tp", [0, 1]), ("2", "tp", [2, 3])]
    for rank in range(4):
        tp = ("1", "tp") if rank < 2 else ("2", "tp")
        es, rid = [], 0
        for step in range(1, 6):
            if rank == 2 and step == 5:
                break  # rank 2 left the loop one step early
            # In step 5 rank 3's all_gather waits for rank 2 (started), so its all_reduce never
            # starts; ranks 0 and 1 finish their all_gather and wait in the all_reduce.
            gather_state = "completed" if step < 5 or rank < 2 else "started"
            es.append(entry(rid, tp, step, 0, rid + 1, "nccl:all_gather", [[4096]], "BFloat16",
                            gather_state, out_sizes=[[8192]]))
            rid += 1
            state = "completed" if step < 5 else ("started" if rank < 2 else "scheduled")
            es.append(entry(rid, world, step, 0, rid + 1, "nccl:all_reduce", [[1048576]], "Float", state))
            rid += 1
        mine = [g for g in groups if rank in g[2]]
        write_json(f"{d}/nccl_trace_rank_{rank}.json", "2.10", mine, es)


def fr_size_mismatch():
    """2 ranks, pickle (protocol 2, as torch's pickler): all_reduce #3 has 1024 vs 2048 floats."""
    d = f"{OUT}/fr-size-mismatch"
    os.makedirs(d, exist_ok=True)
    world = ("0", "default_pg")
    for rank in range(2):
        es = []
        for step in range(1, 4):
            n = 2048 if (rank == 1 and step == 3) else 1024
            state = "completed" if step < 3 else "started"
            es.append(entry(step - 1, world, step, 0, step, "nccl:all_reduce", [[n]], "Float", state))
        write_pickle(f"{d}/nccl_trace_rank_{rank}", "2.4", [("0", "default_pg", [0, 1])], es, 2)


def fr_p2p_cycle():
    """2 ranks on a 'pp' group: each sends to the other before receiving: a wait-for cycle."""
    d = f"{OUT}/fr-p2p-cycle"
    os.makedirs(d, exist_ok=True)
    world = ("0", "default_pg")
    pp = ("1", "pp")
    groups = [("0", "default_pg", [0, 1]), ("1", "pp", [0, 1])]
    for rank in range(2):
        peer = 1 - rank
        es = [entry(0, world, 1, 0, 1, "nccl:broadcast", [[16]], "Long", "completed"),
              entry(1, pp, 0, 1, 2, f"nccl:send {rank}->{peer}", [[65536]], "BFloat16", "started", True, []),
              entry(2, pp, 0, 2, 3, f"nccl:recv {rank}<-{peer}", [], "BFloat16", "scheduled", True, [[65536]])]
        for e in es[2:]:
            e["input_dtypes"] = []
        es[1]["output_dtypes"] = []
        write_pickle(f"{d}/nccl_trace_rank_{rank}.pkl", "2.2", groups, es, 4)


def fr_batched_p2p():
    """The fix of fr-p2p-cycle: batch_isend_irecv coalesces send and recv (an NCCL group): ok."""
    d = f"{OUT}/fr-batched-p2p"
    os.makedirs(d, exist_ok=True)
    pp = ("1", "pp")
    groups = [("0", "default_pg", [0, 1]), ("1", "pp", [0, 1])]
    for rank in range(2):
        peer = 1 - rank
        es = [entry(0, pp, 0, 1, 1, f"nccl:send {rank}->{peer}", [[65536]], "BFloat16", "completed", True, []),
              entry(1, pp, 0, 1, 2, f"nccl:recv {rank}<-{peer}", [], "BFloat16", "completed", True, [[65536]]),
              entry(2, pp, 0, 1, 3, "nccl:coalesced", [], "BFloat16", "completed", True, [])]
        write_json(f"{d}/nccl_trace_rank_{rank}.json", "2.7", groups, es)


def fr_moe(name, outputs):
    """3 ranks routing tokens (all_to_all_single with split sizes, recorded as nccl:all_to_all of
    each rank's whole input and output), then an all_reduce. Inputs 6, 3 and 9 Ki floats."""
    d = f"{OUT}/{name}"
    os.makedirs(d, exist_ok=True)
    world = ("0", "default_pg")
    consistent = sum(outputs) == 18
    for rank in range(3):
        inp, out = [6, 3, 9][rank] * 1024, outputs[rank] * 1024
        state = "completed" if consistent else "started"
        es = [entry(0, world, 1, 0, 1, "nccl:all_to_all", [[inp, 1]], "Float", state, out_sizes=[[out, 1]]),
              entry(1, world, 2, 0, 2, "nccl:all_reduce", [[1024]], "Float", "completed" if consistent else "scheduled")]
        write_json(f"{d}/nccl_trace_rank_{rank}.json", "2.10", [("0", "default_pg", [0, 1, 2])], es)


def fr_uneven_all_gather(name, counts_seen_by_last):
    """3 ranks gathering 2, 3 and 4 Ki floats each with all_gather of unequal tensors, which
    PyTorch runs as a coalesced group of broadcasts, one from each rank (an entry each since
    2.7, then nccl:coalesced, all under one collective_seq_id), then an all_reduce. The last
    rank sizes the parts from `counts_seen_by_last`."""
    d = f"{OUT}/{name}"
    os.makedirs(d, exist_ok=True)
    world = ("0", "default_pg")
    consistent = counts_seen_by_last == [2, 3, 4]
    for rank in range(3):
        counts = counts_seen_by_last if rank == 2 else [2, 3, 4]
        state = "completed" if consistent else "started"
        es = [entry(i, world, 1, 0, 1, "nccl:_broadcast_oop", [[n * 1024, 1]], "Float", state)
              for i, n in enumerate(counts)]
        es.append(entry(3, world, 1, 0, 1, "nccl:coalesced", [], "Float", state))
        es.append(entry(4, world, 2, 0, 2, "nccl:all_reduce", [[1024]], "Float", "completed" if consistent else "scheduled"))
        write_json(f"{d}/nccl_trace_rank_{rank}.json", "2.10", [("0", "default_pg", [0, 1, 2])], es)


if __name__ == "__main__":
    fr_uneven_all_gather("fr-uneven-all-gather", [2, 3, 4])
    fr_uneven_all_gather("fr-uneven-all-gather-stale", [3, 3, 4])
    fr_moe("fr-moe-uneven", [4, 8, 6])
    fr_moe("fr-moe-totals-differ", [4, 8, 7])
    fr_hang()
    fr_size_mismatch()
    fr_p2p_cycle()
    fr_batched_p2p()
