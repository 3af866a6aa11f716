#!/usr/bin/env bash
# ctest gpu_validation.fidelity_cpu: gpu_validation/fidelity_table.sh in its CPU mode (--cpu) on
# a few rows of each kind, through MPI: the table's shape and order, every MPI outcome as the
# model says (each corpus bug CONFIRMED, each fix completing, the broken launch CANNOT EXPRESS on
# both backends from the NCCL dry pass), NCCL cells SKIPPED, the Markdown under $OUT; a second
# run keeps every decided cell and runs none; --redo runs one row again; a scenario whose MPI
# replay completes where the model says deadlock makes the script exit 1 (NOT REPRODUCED); a
# deadline that leaves no time runs nothing and exits 3; where nvidia-smi lists a GPU that CUDA
# cannot see, the NCCL cells are UNDECIDED, never NOT REPRODUCED.
# usage: fidelity_table_test.sh BIN_DIR (from the repository root). Exit 77 (skipped) without
# mpirun or the MPI worker.
set -uo pipefail
bin=${1:?usage: fidelity_table_test.sh BIN_DIR}
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$bin/lockstep-mpi-replay" ]; then
  echo "SKIP: no mpirun or no $bin/lockstep-mpi-replay; the table's MPI column needs them"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
table() { "$(dirname "$0")/fidelity_table.sh" --cpu --bin "$bin" --jobs 4 "$@"; }
# The Markdown table's rows less their seconds: # | row | kind | model | mpi | nccl.
rows_of() { grep -E '^\| [0-9]+ \|' "$1" | awk -F' \\| ' '{ print $1 " | " $2 " | " $3 " | " $4 " | " $5 " | " $7 }' | sed 's/^| //'; }

rows='^corpus/(allreduce-size-differs|comm-launch-order|head-to-head-sends|head-to-head-sends-fixed|init-missing-process|uneven-batches|uneven-batches-join)$|^probe/(p2p-warm-4KiB|thread-stream-legacy|barrier-after-allreduce-1elem)$'
expected="1 | corpus/allreduce-size-differs | bug | mismatch | CONFIRMED | SKIPPED
2 | corpus/comm-launch-order | bug | deadlock | CONFIRMED | SKIPPED
3 | corpus/head-to-head-sends | bug | deadlock | CONFIRMED | SKIPPED
4 | corpus/head-to-head-sends-fixed | fix | ok | CONFIRMED | SKIPPED
5 | corpus/init-missing-process | bug | hang | CANNOT EXPRESS | CANNOT EXPRESS
6 | corpus/uneven-batches | bug | hang | CONFIRMED | SKIPPED
7 | corpus/uneven-batches-join | fix | ok | CONFIRMED | SKIPPED
8 | probe/p2p-warm-4KiB | probe | deadlock | CONFIRMED | SKIPPED
9 | probe/thread-stream-legacy | probe | deadlock | n/a | SKIPPED
10 | probe/barrier-after-allreduce-1elem | probe | mismatch | CONFIRMED | SKIPPED"

# 1. The CPU mode, from scratch.
start=$SECONDS
OUT=$work/out table --rows "$rows" --state "$work/state" --fresh >"$work/run1.txt" 2>&1
code=$?
echo "first run: exit $code in $((SECONDS - start)) s"
[ "$code" = 0 ] || fail "the first run exits $code, not 0"
[ -f "$work/out/fidelity-table.md" ] || fail "no \$OUT/fidelity-table.md"
[ -f "$work/out/device-check/logs/corpus__uneven-batches.mpi.log" ] || fail "no log of corpus/uneven-batches under \$OUT/device-check/logs"
got=$(rows_of "$work/out/fidelity-table.md")
[ "$got" = "$expected" ] || fail "the table's rows differ; expected:
$expected
got:
$got"
grep -qx '| # | row | kind | model | mpi | s | nccl | s |' "$work/out/fidelity-table.md" || fail "the Markdown table's header differs"
grep -Eq '^  #  row +kind +model +mpi +s  nccl +s$' "$work/run1.txt" || fail "the printed table's header differs"
# The printed table lists the same rows in the same order, with the seconds of every MPI replay.
printed=$(grep -E '^ +[0-9]+  (corpus|probe)/' "$work/run1.txt" | awk '{ print $2 }')
[ "$printed" = "$(printf '%s\n' "$expected" | awk -F' [|] ' '{ print $2 }')" ] || fail "the printed rows differ from the Markdown ones"
seconds=$(grep -E '^\| [0-9]+ \|' "$work/out/fidelity-table.md" | awk -F' \\| ' '$5 == "CONFIRMED" { print $6 }')
[ "$(grep -cE '^[0-9]+\.[0-9]$' <<<"$seconds")" = 8 ] || fail "not every CONFIRMED MPI cell has its seconds: $seconds"
grep -q '^fidelity table: NCCL cells SKIPPED: --cpu$' "$work/run1.txt" || fail "the run does not say why the NCCL cells are SKIPPED"
grep -q '^- corpus/init-missing-process (nccl): CANNOT EXPRESS: a broken launch: no process is started for rank 3; the nccl replay' \
  "$work/out/fidelity-table.md" || fail "the NCCL dry pass's reason for init-missing-process is not in the notes"
[ "$(grep -c '^\[ *[0-9]*/9\] ' "$work/run1.txt")" = 9 ] || fail "not one progress line per MPI cell (9)"

# 2. Resumed: every decided cell kept, none run, the same rows.
start=$SECONDS
table --rows "$rows" --state "$work/state" >"$work/run2.txt" 2>&1
code=$?
echo "second run: exit $code in $((SECONDS - start)) s"
[ "$code" = 0 ] || fail "the second run exits $code"
grep -q '^fidelity table: 10 cells decided in an earlier run, kept' "$work/run2.txt" || fail "the second run does not keep the 10 decided cells"
grep -q '^\[' "$work/run2.txt" && fail "the second run ran cells: $(grep '^\[' "$work/run2.txt")"
[ "$(rows_of "$work/state/table.md")" = "$expected" ] || fail "the second run's rows differ"

# 3. --redo runs the matching row again, and only it.
table --rows "$rows" --state "$work/state" --redo '^corpus/uneven-batches$' >"$work/run3.txt" 2>&1
if [ "$(grep -c '^\[' "$work/run3.txt")" != 1 ] || ! grep -q '^\[ 1/1\] corpus/uneven-batches  .* mpi  CONFIRMED' "$work/run3.txt"; then
  fail "--redo did not run exactly corpus/uneven-batches again: $(grep '^\[' "$work/run3.txt")"
fi

# 4. The canary: the model says deadlock, OpenMPI completes the root's 4-byte broadcast at once
# and everything completes (docs/replay.md): NOT REPRODUCED, exit 1.
mkdir -p "$work/canary"
cat >"$work/canary/early-broadcast.yaml" <<'EOF'
scenario: early-broadcast
expect: deadlock
world: 2
program:
  - if: "rank == 0"
    then:
      - broadcast: {root: 0, size: 4}
      - send: {to: 1, size: 4}
    else:
      - recv: {from: 0, size: 4}
      - broadcast: {root: 0, size: 4}
EOF
table --corpus "$work/canary" --rows '^corpus/' --state "$work/canary-state" >"$work/run4.txt" 2>&1
code=$?
[ "$code" = 1 ] || fail "a bug the MPI replay does not reproduce exits $code, not 1"
grep -q '^| 1 | corpus/early-broadcast | bug | deadlock | NOT REPRODUCED | ' "$work/canary-state/table.md" ||
  fail "the canary's row is not NOT REPRODUCED: $(grep early-broadcast "$work/canary-state/table.md")"

# 5. A deadline that leaves no time: nothing runs, the cells say so, exit 3.
table --rows '^corpus/uneven-batches$' --state "$work/late-state" --deadline "$(date +%s)" >"$work/run5.txt" 2>&1
code=$?
[ "$code" = 3 ] || fail "a run past its deadline exits $code, not 3"
grep -q '^fidelity table: 1 cells not run' "$work/run5.txt" || fail "a run past its deadline does not say what it left"
grep -q '^| 1 | corpus/uneven-batches | bug | hang | not run | - | SKIPPED | - |$' "$work/late-state/table.md" ||
  fail "the row left by the deadline is not 'not run'"

# 6. The GPU mode where nvidia-smi lists a GPU that CUDA cannot see (a stand-in nvidia-smi, only
# where the real one finds none): the NCCL column alone; each worker fails its setup (no CUDA
# device visible): UNDECIDED, never NOT REPRODUCED, even for a fix; the stream probe SKIPPED.
if [ -x "$bin/lockstep-nccl-replay" ] && [ -x "$bin/lockstep-thread-stream-probe" ] &&
   ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }; then
  mkdir -p "$work/fake-gpu"
  printf '#!/bin/sh\necho "GPU 0: stand-in (UUID: GPU-none)"\n' >"$work/fake-gpu/nvidia-smi"
  chmod +x "$work/fake-gpu/nvidia-smi"
  PATH=$work/fake-gpu:$PATH "$(dirname "$0")/fidelity_table.sh" --bin "$bin" --state "$work/gpu-state" \
    --rows '^corpus/(uneven-batches-join|init-missing-process)$|^probe/thread-stream-legacy$' >"$work/run6.txt" 2>&1
  code=$?
  [ "$code" = 3 ] || fail "the NCCL column on a GPU CUDA cannot see exits $code, not 3"
  gpu_expected="1 | corpus/init-missing-process | bug | hang | - | CANNOT EXPRESS
2 | corpus/uneven-batches-join | fix | ok | - | UNDECIDED
3 | probe/thread-stream-legacy | probe | deadlock | n/a | SKIPPED"
  got=$(rows_of "$work/gpu-state/table.md")
  [ "$got" = "$gpu_expected" ] || fail "the NCCL column's rows differ; expected:
$gpu_expected
got:
$got"
  grep -q '^- corpus/uneven-batches-join (nccl): UNDECIDED (nccl): rank 0 setup on world (op 0) failed: no CUDA device visible' \
    "$work/gpu-state/table.md" || fail "the notes do not give the worker's setup failure"
  grep -q '^- threads.* current stream: probe/thread-stream-legacy: SKIPPED' "$work/gpu-state/table.md" ||
    fail "the probes' readings do not list the stream probe as SKIPPED"
else
  echo "the NCCL column's test skipped: no NCCL worker built, or a GPU is visible"
fi

if [ "$failures" -gt 0 ]; then
  for f in "$work"/run*.txt; do echo "--- $f"; cat "$f"; done
  exit 1
fi
echo "PASS: the fidelity table's CPU mode"
