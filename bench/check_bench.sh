#!/usr/bin/env bash
# Checker benchmark (issue 5): reduction and speed of `lockstep check`, Release build.
#
#   bench/check_bench.sh            (LOCKSTEP=path overrides build/release/bin/lockstep)
#
# Prints one line per workload: executions (pruned), states, seconds, executions per second.
#   ring-1024        1,024 ranks that send right then receive left: deadlock, 1 execution
#   gather-N         N-1 senders to rank 0's N-1 wildcard receives: ok; dfs needs (N-1)!
#   two-threads      4 ranks, 2 threads each issuing collectives on one group
#   wildcard-threads rank 0's three wildcard receives against ranks 1-3, each with a second
#                    thread: every interleaving of the matches with those threads is offered,
#                    and sleep sets keep the ones that commute from being run again
#   small-4x20       4 ranks x 20 ops, four rounds of three wildcard receives (executions/s)
#   small-4x20-wide  4 ranks x 20 ops, 100,000 of its millions of executions: executions per CPU s
#   jobs             dfs on gather-10 (362,880 executions) with --jobs 1 and --jobs 2
#   corpus           lockstep check scenarios/ (every bundled scenario), pinned to one core
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
lockstep=${LOCKSTEP:-$root/build/release/bin/lockstep}
[ -x "$lockstep" ] || { echo "check_bench: no $lockstep (build the release preset first)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

cat > "$dir/ring-1024.yaml" <<'Y'
scenario: ring-1024
world: 1024
program:
  - send: {to: "(rank + 1) % world", size: 4KiB}
  - recv: {from: "(rank + world - 1) % world", size: 4KiB}
Y
gather() {
  cat > "$dir/gather-$1.yaml" <<Y
scenario: gather-$1
world: $1
program:
  - if: "rank == 0"
    then:
      - repeat: "world - 1"
        do: [{recv: {from: any, size: 4KiB}}]
    else:
      - send: {to: 0, size: 4KiB}
Y
}
gather 8
gather 10
gather 12
cat > "$dir/two-threads.yaml" <<'Y'
scenario: two-threads
world: 4
threads:
  main: [{allreduce: {size: 4}}, {allreduce: {size: 4}}]
  bg: [{allreduce: {size: 4}}]
Y
cat > "$dir/wildcard-threads.yaml" <<'Y'
scenario: wildcard-threads
world: 4
threads:
  main:
    - if: "rank == 0"
      then:
        - repeat: 3
          do: [{recv: {from: any, size: 4}}]
      else:
        - {send: {to: 0, size: 4}}
  bg:
    - if: "rank == 0"
      then: [{compute: 1us}]
      else: [{compute: 2us}, {compute: 1us}]
Y
# 4 ranks x 20 ops: four rounds in which rank 0 takes three wildcard receives (6 match orders
# each, 6^4 = 1,296 executions for dfs) and everyone joins an all-reduce.
{
  echo "scenario: small-4x20"
  echo "world: 4"
  echo "program:"
  echo "  - repeat: 4"
  echo "    do:"
  echo "      - if: \"rank == 0\""
  echo "        then: [{recv: {from: any, size: 4}}, {recv: {from: any, size: 4}}, {recv: {from: any, size: 4}}, {compute: 1us}]"
  echo "        else: [{send: {to: 0, size: 4}}, {compute: 1us}, {compute: 2us}, {compute: 3us}]"
  echo "      - allreduce: {size: 4}"
} > "$dir/small-4x20.yaml"

row() {  # name, file, options...
  local name=$1 file=$2
  shift 2
  local start end
  start=$(date +%s.%N)
  "$lockstep" check "$file" --json "$dir/out.json" --quiet "$@" > /dev/null || true
  end=$(date +%s.%N)
  python3 - "$name" "$dir/out.json" "$(echo "$end - $start" | bc -l)" <<'P'
import json, sys
name, path, wall = sys.argv[1], sys.argv[2], float(sys.argv[3])
r = json.load(open(path))
s = r["stats"]
rate = s["executions"] / s["seconds"] if s["seconds"] > 0 else 0
print(f"{name:24} {r['verdict']:9} {s['strategy']:5} {s['executions']:>9} {s.get('pruned', '-'):>9} "
      f"{s.get('states', '-'):>8} {s['seconds']:9.3f} {wall:8.3f} {rate:12.0f}")
P
}

printf '%-24s %-9s %-5s %9s %9s %8s %9s %8s %12s\n' workload verdict strat executions pruned states check_s wall_s exec_per_s
row ring-1024 "$dir/ring-1024.yaml"
row gather-8-dfs "$dir/gather-8.yaml" --strategy dfs
row gather-8 "$dir/gather-8.yaml"
row gather-10 "$dir/gather-10.yaml"
row gather-12 "$dir/gather-12.yaml"
row two-threads "$dir/two-threads.yaml"
row two-threads-dfs "$dir/two-threads.yaml" --strategy dfs
row wildcard-threads "$dir/wildcard-threads.yaml"
row small-4x20 "$dir/small-4x20.yaml"
row small-4x20-dfs "$dir/small-4x20.yaml" --strategy dfs
row jobs1-gather-10-dfs "$dir/gather-10.yaml" --strategy dfs --jobs 1
row jobs2-gather-10-dfs "$dir/gather-10.yaml" --strategy dfs --jobs 2

# Executions per second on small scenarios (issue 5: 100,000 on 4 ranks x 20 ops), by CPU time:
# small-4x20-wide (rank 0 takes 18 wildcard receives from three senders, each rank 20 ops) has
# millions of executions; dfs runs 100,000 of them. Rate = 99,999 / (CPU of that run - CPU of a
# run of one execution, which is start-up and load), best of 3, pinned to one core.
cat > "$dir/small-4x20-wide.yaml" <<'Y'
scenario: small-4x20-wide
world: 4
program:
  - repeat: 6
    do:
      - if: "rank == 0"
        then: [{recv: {from: any, size: 4}}, {recv: {from: any, size: 4}}, {recv: {from: any, size: 4}}]
        else: [{send: {to: 0, size: 4}}, {compute: 1us}, {compute: 1us}]
  - compute: 1us
  - compute: 1us
Y
pin=()
if command -v taskset > /dev/null; then pin=(taskset -c 0); fi
best_cpu() {  # best CPU seconds of 3 runs of: lockstep check small-4x20-wide ARGS...
  local best=""
  for _ in 1 2 3; do
    local cpu
    cpu=$(python3 "$root/bench/measure.py" 120 /dev/null -- "${pin[@]}" "$lockstep" check "$dir/small-4x20-wide.yaml" \
      --strategy dfs --quiet "$@" | awk '{print $2}')
    if [ -z "$best" ] || [ "$(echo "$cpu < $best" | bc -l)" = 1 ]; then best=$cpu; fi
  done
  echo "$best"
}
full=$(best_cpu --max-executions 100000)
one=$(best_cpu --max-executions 1)
printf '%-24s 100,000 executions in %.3f s CPU, one in %.3f s: %.0f executions per CPU second\n' \
  small-4x20-wide "$full" "$one" "$(echo "99999 / ($full - $one)" | bc -l)"

# The whole bundled corpus (issue 6: under 30 s on one core).
start=$(date +%s.%N)
(cd "$root" && taskset -c 0 "$lockstep" check scenarios/ --quiet > /dev/null) || true
end=$(date +%s.%N)
printf '%-24s %s inputs in %.3f s (one core, wall)\n' corpus "$(find "$root/scenarios" -name '*.yaml' -o -name '*.jsonl' | wc -l)" \
  "$(echo "$end - $start" | bc -l)"
