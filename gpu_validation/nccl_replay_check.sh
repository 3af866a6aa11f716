#!/usr/bin/env bash
# ctest gpu.nccl_replay (label gpu): the NCCL column of the fidelity table (docs/fidelity.md) on
# the corpus rows the NCCL backend was written against: head-to-head sends and the grouped and
# ordered fixes, uneven batches and the join fix, and the two-communicator launch orders under
# CUDA_DEVICE_MAX_CONNECTIONS=1 with and without NCCL_LAUNCH_ORDER_IMPLICIT=1. The whole table
# is gpu_validation/device-check.sh.
# Usage: nccl_replay_check.sh LOCKSTEP (from the repository root). Exit 77 (skipped) without a
# GPU; otherwise fidelity_table.sh's: 0 every row as the model says, 1 the hardware disagrees,
# 3 undecided.
set -uo pipefail
lockstep=${1:?usage: nccl_replay_check.sh LOCKSTEP}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no GPU (nvidia-smi finds none); the NCCL replay needs one"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$(dirname "$0")/fidelity_table.sh" --bin "$(dirname "$lockstep")" --backends nccl --state "$work" --fresh \
  --rows '^corpus/(head-to-head-sends(-fixed|-ordered)?|uneven-batches(-join)?|comm-launch-order(-fixed|-no-implicit)?)$'
