#!/usr/bin/env bash
# Load benchmark: one recorded schedule of RANKS x OPS operations, generated in both
# formats by bench/gen_recorded.py, validated REPEATS times each by the Release binary.
#
#   bench/load_bench.sh [RANKS] [OPS] [REPEATS]     (defaults: 1024 1000 5)
#
# Prints a table: format, file size, best and median wall seconds of `lockstep validate`, the
# least user and user+system CPU seconds of a run (what to compare on a loaded machine),
# operations per second (from the best wall time); then how many times faster the trace loads.
# Needs build/release/bin/lockstep (cmake --preset release && cmake --build --preset release);
# LOCKSTEP=path overrides it.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
ranks=${1:-1024}
ops=${2:-1000}
repeats=${3:-5}
lockstep=${LOCKSTEP:-$root/build/release/bin/lockstep}
[ -x "$lockstep" ] || { echo "load_bench: no $lockstep (build the release preset first)" >&2; exit 2; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 "$root/bench/gen_recorded.py" "$dir" --ranks "$ranks" --ops "$ops"
total=$((ranks * ops))
# Large inputs pass the default 64 MiB file bound only when told.
limit=(--max-file-bytes $((1 << 30)))

printf '%-6s %12s %10s %10s %10s %10s %14s\n' format bytes best_s median_s user_s cpu_s ops_per_s
TIMEFORMAT='%R %U %S'
# Each format's runs one after another, as in the numbers docs/trace-format.md gives. (Alternating them,
# on a virtual machine that hands free memory back to its host, slows the trace's runs: each
# follows a YAML load that freed hundreds of MB, and the trace's pages then come slowly.)
declare -A best median
for file in "$dir/recorded.yaml" "$dir/recorded.jsonl"; do
  times=()
  users=()
  cpus=()
  for _ in $(seq "$repeats"); do
    if ! measured=$( { time "$lockstep" validate "${limit[@]}" --quiet "$file" > "$dir/out" 2>&1; } 2>&1 ); then
      echo "load_bench: lockstep validate failed on $file:" >&2
      head -5 "$dir/out" >&2
      exit 1
    fi
    read -r real user sys <<< "$measured"
    times+=("$real")
    users+=("$user")
    cpus+=("$(echo "$user + $sys" | bc -l)")
  done
  sorted=$(printf '%s\n' "${times[@]}" | sort -g)
  best[$file]=$(echo "$sorted" | head -1)
  median[$file]=$(echo "$sorted" | sed -n "$(( (repeats + 1) / 2 ))p")
  user=$(printf '%s\n' "${users[@]}" | sort -g | head -1)
  cpu=$(printf '%s\n' "${cpus[@]}" | sort -g | head -1)
  printf '%-6s %12d %10.3f %10.3f %10.3f %10.3f %14.0f\n' "${file##*.}" "$(stat -c %s "$file")" "${best[$file]}" \
    "${median[$file]}" "$user" "$cpu" "$(echo "$total / ${best[$file]}" | bc -l)"
done
printf 'the trace loads %.1fx faster: best against best; %.1fx median against median\n' \
  "$(echo "${best[$dir/recorded.yaml]} / ${best[$dir/recorded.jsonl]}" | bc -l)" \
  "$(echo "${median[$dir/recorded.yaml]} / ${median[$dir/recorded.jsonl]}" | bc -l)"
