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
ctest --test-dir build/release -L gpu --output-on-failure

# --- The NCCL recorder (issue 8, docs/record.md) -------------------------------------------
# The probe again, with liblockstep_record.so preloaded around the real libnccl: the trace must
# hold one rank per GPU (ncclCommInitAll, then a grouped all-reduce) and check ok.
record_dir=$(mktemp -d)
build/release/bin/lockstep record -o "$record_dir" --name nccl-probe --timeout 300 -- build/release/bin/lockstep-nccl-probe
head -c 2000 "$record_dir/trace.jsonl"
build/release/bin/lockstep check "$record_dir/trace.jsonl"
rm -rf "$record_dir"
