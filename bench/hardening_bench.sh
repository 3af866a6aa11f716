#!/usr/bin/env bash
# The hardening bench: what the bounds and the scale of docs/engine-performance.md ("Scale and
# bounds") rest on, measured on the build given (default build/release), each row one process
# (bench/measure.py: wall and CPU seconds, peak RSS).
#
#   bench/hardening_bench.sh [BUILD_DIR]
#
# Rows, each input generated into a temporary folder:
#   run-131k, check-131k  one step of scenarios/examples/3d-parallel.yaml on tp=8, pp=16,
#                         dp=1,024: 131,072 ranks, one fiber each (slab stacks, no mapping
#                         per rank); the bound is 4 GiB of peak RSS
#   repeat-deadline       repeat 99999999 of one all-reduce on 2 ranks, the engine alone
#                         (lockstep_engine_timer, as check runs it) with a deadline of 3 s:
#                         the time from start to the LIMIT end
#   repeat-memory         the same with a resident-memory bound of 1,000 MiB
#   validate-40k-params   40,000 unused params in one flow map: time and bytes of warnings
#   csv-2x200k            a pipeline CSV of 2 rows x 200,000 cells: import time
#   pickle-none-64m       a Flight Recorder pickle of 64 MiB of None opcodes: peak RSS (refused
#                         as malformed after reading)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
lockstep=$build/bin/lockstep
timer=$build/bin/lockstep_engine_timer
for tool in "$lockstep" "$timer"; do
  [ -x "$tool" ] || { echo "hardening_bench: no $tool (build the Release targets first)" >&2; exit 2; }
done
measure=$root/bench/measure.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

sed -e "s/^scenario: .*/scenario: 3d-131k/" -e "s/^mesh: .*/mesh: {tp: 8, pp: 16, dp: 1024}/" \
  "$root/scenarios/examples/3d-parallel.yaml" > "$dir/3d-131k.yaml"
grep -q "dp: 1024}" "$dir/3d-131k.yaml" || { echo "hardening_bench: the 3d-parallel example has no mesh line" >&2; exit 2; }
cat > "$dir/repeat.yaml" <<'YAML'
scenario: repeat
world: 2
program:
  - repeat: 99999999
    do: [{allreduce: {size: 4}}]
YAML
python3 - "$dir" <<'PY'
import sys
d = sys.argv[1]
params = ", ".join(f"p{i}: 1" for i in range(40000))
open(f"{d}/params.yaml", "w").write(f"scenario: params\nworld: 2\nparams: {{{params}}}\nprogram:\n  - barrier: world\n")
rows = [[], []]
for m in range(100000):
    rows[0] += [f"0F{m}", f"0SEND_F{m}"]
    rows[1] += [f"1RECV_F{m}", f"1F{m}"]
open(f"{d}/wide.csv", "w").write(",".join(rows[0]) + "\n" + ",".join(rows[1]) + "\n")
open(f"{d}/nccl_trace_rank_0", "wb").write(b"\x80\x02" + b"N" * (64 << 20) + b".")
PY

printf '%-22s %8s %8s %10s %s\n' row wall_s cpu_s peak_mib note
row() {  # row NAME NOTE -- CMD...
  local name=$1 note=$2
  shift 3
  read -r wall cpu peak status < <(python3 "$measure" 600 "$dir/out" -- "$@")
  printf '%-22s %8.2f %8.2f %10.0f %s (exit %s)\n' "$name" "$wall" "$cpu" "$((peak / 1024))" "$note" "$status"
}
row run-131k "lockstep run" -- "$lockstep" run "$dir/3d-131k.yaml" --quiet
row check-131k "lockstep check" -- "$lockstep" check "$dir/3d-131k.yaml" --quiet
for bound in "repeat-deadline --deadline-s 3" "repeat-memory --max-memory-mib 1000"; do
  read -r name flag value <<< "$bound"
  "$timer" "$dir/repeat.yaml" check "$flag" "$value" > "$dir/limit" 2>&1 || true
  read -r _ wall cpu peak _ < "$dir/limit"
  printf '%-22s %8.2f %8.2f %10s %s\n' "$name" "$wall" "$cpu" "${peak%:}" "$(cut -d: -f2- "$dir/limit" | cut -c1-70)"
done
row validate-40k-params "$(stat -c %s "$dir/params.yaml") bytes in" -- "$lockstep" validate "$dir/params.yaml"
echo "  warnings printed: $(wc -c < "$dir/out") bytes"
row csv-2x200k "import pipeline-csv" -- "$lockstep" import pipeline-csv "$dir/wide.csv" -o "$dir/wide.jsonl" --quiet
row pickle-none-64m "import flight-recorder" -- "$lockstep" import flight-recorder "$dir/nccl_trace_rank_0" -o "$dir/none.jsonl"
