#!/usr/bin/env bash
# The one short script to run on a machine with a GPU (see docs/ARCHITECTURE.md): builds the
# release tree with gpu_validation, runs the NCCL probe and every test labelled `gpu`.
# Prints what it measured; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
scripts/setup
cmake --preset release -DLOCKSTEP_GPU=ON >/dev/null
cmake --build --preset release -j "$(nproc)"
build/release/bin/lockstep-nccl-probe
ctest --test-dir build/release -L gpu -E gpu.nccl_replay --output-on-failure

# --- NCCL replay (issue 7, docs/replay.md) ---------------------------------------------------
# One table: each row a replay with its expected exit code (1 CONFIRMED, 0 NOT REPRODUCED).
# About 8 x (NCCL init + 10 s watchdog for the hangs): under 3 minutes on one GPU, with both
# ranks of each replay on it (NCCL_HOSTID per process, sockets on lo).
replay_status=0
gpu_validation/nccl_replay_check.sh build/release/bin/lockstep || replay_status=$?

# --- The NCCL recorder (issue 8, docs/record.md) -------------------------------------------
# The probe again, with liblockstep_record.so preloaded around the real libnccl: the trace must
# hold one rank per GPU (ncclCommInitAll, then a grouped all-reduce) and check ok.
record_dir=$(mktemp -d)
build/release/bin/lockstep record -o "$record_dir" --name nccl-probe --timeout 300 -- build/release/bin/lockstep-nccl-probe
head -c 2000 "$record_dir/trace.jsonl"
build/release/bin/lockstep check "$record_dir/trace.jsonl"
rm -rf "$record_dir"

exit "$replay_status"  # the NCCL replay table above: 0 when every row was as expected
