#!/usr/bin/env bash
# `lockstep replay --nccl` on a few corpus scenarios, each with its expected verdict, as one
# table (docs/replay.md, "Evidence from a GPU"): head-to-head sends at 64 MiB and the grouped
# fix, uneven batches and the join fix, and the two-communicator launch order under
# CUDA_DEVICE_MAX_CONNECTIONS=1 with and without NCCL_LAUNCH_ORDER_IMPLICIT=1.
# The ctest gpu.nccl_replay (label gpu) and gpu_validation/device-check.sh run it.
# Usage: nccl_replay_check.sh LOCKSTEP (from the repository root). Exit 77 (skipped) without a
# GPU; 1 when a verdict differs from the expected one.
set -uo pipefail
lockstep=${1:?usage: nccl_replay_check.sh LOCKSTEP}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no GPU (nvidia-smi finds none); the NCCL replay needs one"
  exit 77
fi
timeout_s=${LOCKSTEP_NCCL_TIMEOUT:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$lockstep" check scenarios/corpus/head-to-head-sends.yaml scenarios/corpus/uneven-batches.yaml \
  scenarios/corpus/comm-launch-order.yaml scenarios/corpus/comm-launch-order-no-implicit.yaml \
  --cex-dir "$work" --quiet >/dev/null
failed=0
printf '%-38s %-44s %-5s %-5s %5s  %s\n' input environment want got secs verdict
row() {  # row WANT_EXIT "ENV=VALUE ..." INPUT
  local want=$1 vars=$2 input=$3 start=$SECONDS got
  env $vars "$lockstep" replay "$input" --nccl --timeout "$timeout_s" >"$work/out.txt" 2>&1
  got=$?
  printf '%-38s %-44s %-5s %-5s %5d  %s\n' "$(basename "$input")" "${vars:--}" "$want" "$got" $((SECONDS - start)) \
    "$(sed -n 2p "$work/out.txt" | cut -c1-100)"
  if [ "$got" != "$want" ]; then failed=1; sed 's/^/    /' "$work/out.txt"; fi
}
row 1 "" "$work/head-to-head-sends-1.json"
row 0 "" scenarios/corpus/head-to-head-sends-fixed.yaml
row 1 "" "$work/uneven-batches-1.json"
row 0 "" scenarios/corpus/uneven-batches-join.yaml
row 1 "CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_LAUNCH_ORDER_IMPLICIT=1" "$work/comm-launch-order-1.json"
row 1 "CUDA_DEVICE_MAX_CONNECTIONS=1" "$work/comm-launch-order-no-implicit-1.json"
row 0 "CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_LAUNCH_ORDER_IMPLICIT=1" scenarios/corpus/comm-launch-order-fixed.yaml
row 0 "CUDA_DEVICE_MAX_CONNECTIONS=1" scenarios/corpus/comm-launch-order-fixed.yaml
exit $failed
