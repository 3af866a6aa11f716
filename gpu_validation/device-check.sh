#!/usr/bin/env bash
# The one command for a machine with a GPU (docs/fidelity.md), from the repository root:
#
#   gpu_validation/device-check.sh [--fresh] [--rows REGEX] [--redo REGEX] [--cpu] [--backends mpi,nccl] [--jobs N]
#
# Builds what it needs (the release tree with LOCKSTEP_GPU=ON, only the targets used), checks
# that NCCL runs on this machine (lockstep-nccl-probe), then prints the fidelity table
# (gpu_validation/fidelity_table.sh, which takes the options above): every corpus bug and fix and
# the semantic probes replayed through NCCL, ranks sharing the GPU (a host id per process).
# Without a GPU it runs the MPI column instead and the NCCL cells are SKIPPED.
#
# Time: LOCKSTEP_DEVICE_BUDGET_S (default 420) from the start, build included; no row is started
# that could end after it. Rows are resumable: running the command again finishes what an earlier
# run left (UNDECIDED or not run) and keeps what it decided; the state is in build/device-check
# (LOCKSTEP_DEVICE_STATE to put it elsewhere). When $OUT is set, the table goes to
# $OUT/fidelity-table.md, the state and the logs to $OUT/device-check/, and this output to
# $OUT/device-check.log. LOCKSTEP_DEVICE_BUILD=0 skips the build (build/release as it is).
#
# Exit: fidelity_table.sh's (0 every corpus cell as the model says, 1 the hardware disagrees,
# 3 cells UNDECIDED or not run: run again), 2 when the build fails.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
if [ -n "${OUT:-}" ] && [ -z "${LOCKSTEP_DEVICE_TEED:-}" ]; then
  mkdir -p "$OUT"
  LOCKSTEP_DEVICE_TEED=1 "$0" "$@" 2>&1 | tee "$OUT/device-check.log"
  exit "${PIPESTATUS[0]}"
fi
start=$(date +%s)
budget=${LOCKSTEP_DEVICE_BUDGET_S:-420}
deadline=$((start + budget))
elapsed() { echo $(($(date +%s) - start)); }
bin=build/release/bin

echo "== machine"
gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  gpu=1
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv,noheader
  # Ranks share the GPU as separate processes: an exclusive compute mode admits one.
  nvidia-smi --query-gpu=compute_mode --format=csv,noheader | grep -qi exclusive &&
    echo "device-check: the GPU's compute mode is exclusive: replays of several ranks cannot share it (expect UNDECIDED)"
else
  echo "no GPU (nvidia-smi finds none): the NCCL cells are SKIPPED, the MPI column runs"
fi
for arg in "$@"; do [ "$arg" = --cpu ] && gpu=0; done
echo "$(nproc) CPUs; budget $budget s"

echo "== build ($(elapsed) s)"
if [ "${LOCKSTEP_DEVICE_BUILD:-1}" != 0 ]; then
  scripts/setup || exit 2
  cmake --preset release -DLOCKSTEP_GPU=ON >/dev/null || { echo "device-check: cmake --preset release failed"; exit 2; }
  wanted=(lockstep lockstep-mpi-replay lockstep-nccl-replay lockstep-nccl-probe lockstep-thread-stream-probe lockstep_record)
  available=$(cmake --build --preset release --target help 2>/dev/null)
  targets=()
  for t in "${wanted[@]}"; do
    if grep -q "^$t:" <<<"$available"; then targets+=("$t"); else echo "device-check: target $t not configured here (no MPI, CUDA or NCCL?)"; fi
  done
  cmake --build --preset release -j "$(nproc)" --target "${targets[@]}" >build/device-check-build.log 2>&1 ||
    { tail -40 build/device-check-build.log; echo "device-check: the build failed (build/device-check-build.log)"; exit 2; }
fi
echo "built in $(elapsed) s"

if [ "$gpu" = 1 ]; then
  echo "== NCCL on this machine ($(elapsed) s)"
  timeout -k 5 120 "$bin/lockstep-nccl-probe" || echo "device-check: lockstep-nccl-probe failed (exit $?): expect the NCCL cells UNDECIDED"
fi

echo "== the fidelity table ($(elapsed) s)"
gpu_validation/fidelity_table.sh --bin "$bin" --deadline "$deadline" "$@"
table=$?

# The NCCL recorder (docs/record.md) around the real libnccl, when time is left: the probe again
# with liblockstep_record.so preloaded; the trace must hold one rank per GPU and check ok.
if [ "$gpu" = 1 ] && [ $((deadline - $(date +%s))) -ge 60 ]; then
  echo "== the NCCL recorder ($(elapsed) s)"
  record_dir=$(mktemp -d)
  if timeout -k 5 50 "$bin/lockstep" record -o "$record_dir" --name nccl-probe --timeout 40 -- "$bin/lockstep-nccl-probe"; then
    head -c 1000 "$record_dir/trace.jsonl"
    echo
    "$bin/lockstep" check "$record_dir/trace.jsonl"
  else
    echo "device-check: lockstep record around lockstep-nccl-probe failed"
  fi
  [ -n "${OUT:-}" ] && cp "$record_dir/trace.jsonl" "$OUT/nccl-probe-trace.jsonl" 2>/dev/null
  rm -rf "$record_dir"
fi

echo "== done in $(elapsed) s of $budget (fidelity table: exit $table)"
exit "$table"
