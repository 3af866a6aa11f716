#!/usr/bin/env bash
# Report-at-scale benchmark: a 4,096-rank 3D-parallel hang (tp 8, pp 4, dp 128, 1F1B over 4
# microbatches, ZeRO reduce-scatter and all-gather; rank 4095 skips its last dp all-reduce) and
# the 64-rank checkpoint-thread mismatch, as a plain `lockstep check` runs them.
#
#   bench/scale_bench.sh            (LOCKSTEP=path overrides build/release/bin/lockstep)
#
# Prints, for the 4,096-rank hang: check's seconds, the longest report line, the counterexample's
# bytes, explain's seconds, the DOT graph's nodes, run's lines; for the 64-rank mismatch: check's
# seconds and executions. Goals (docs/cli.md): under 2 s, lines under 200 characters, a
# counterexample under 1 MB, under 100 DOT nodes; the mismatch under 10 s.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
lockstep=${LOCKSTEP:-$root/build/release/bin/lockstep}
[ -x "$lockstep" ] || { echo "scale_bench: no $lockstep (build the release preset first)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

sed -e 's/^scenario: 3d-parallel$/scenario: 3d-parallel-4096-skip/' -e 's/^expect: ok$/expect: hang/' \
    -e 's/^mesh: .*/mesh: {tp: 8, pp: 4, dp: 128}/' -e 's/^params: {microbatches: 8,/params: {microbatches: 4,/' \
    "$root/scenarios/examples/3d-parallel.yaml" > "$dir/hang-4096.yaml"
cat >> "$dir/hang-4096.yaml" <<'Y'
  - if: "rank != 4095"                          # one rank skips its last dp all-reduce
    then:
      - allreduce: {group: dp, size: 4KiB}
Y

seconds() { local start end; start=$(date +%s.%N); "$@" > "$dir/out" 2>&1 || true; end=$(date +%s.%N); echo "$end - $start" | bc; }

check_s=$(seconds "$lockstep" check "$dir/hang-4096.yaml" --cex-dir "$dir/cex")
longest=$(awk '{ if (length > n) n = length } END { print n }' "$dir/out")
cex=$(ls "$dir"/cex/*.json)
cex_bytes=$(stat -c %s "$cex")
explain_s=$(seconds "$lockstep" explain "$cex" --dot "$dir/graph.dot")
nodes=$(grep -c '^[0-9]*\[label=' "$dir/graph.dot")
"$lockstep" run "$dir/hang-4096.yaml" > "$dir/run" 2>&1 || true
run_lines=$(wc -l < "$dir/run")
run_longest=$(awk '{ if (length > n) n = length } END { print n }' "$dir/run")
printf 'hang-4096: check %.2f s, longest line %d, cex %d bytes, explain %.2f s, dot %d nodes, run %d lines (longest %d)\n' \
  "$check_s" "$longest" "$cex_bytes" "$explain_s" "$nodes" "$run_lines" "$run_longest"

mismatch_s=$(seconds "$lockstep" check "$root/tests/scale/checkpoint-thread-64.yaml")
executions=$(head -1 "$dir/out" | sed -E 's/.*\[([0-9]+) executions.*/\1/')
printf 'checkpoint-thread-64: check %.2f s, %s executions (%s)\n' "$mismatch_s" "$executions" \
  "$(head -1 "$dir/out" | sed -E 's/.*, (bound hit: [^]]*|exhaustive)\]/\1/')"
