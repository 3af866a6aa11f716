#!/usr/bin/env bash
# Event-log benchmark: the cost of `lockstep run --log-level info|debug` on the
# 1,024-rank loop of bench/engine_bench.sh (compute 1ms; allreduce 100MiB on world).
#
#   bench/log_bench.sh [BUILD_DIR] [ITERATIONS]     (default build/release; 1000 iterations)
#
# Three runs of `lockstep run --quiet`, each best of REPEATS (default 3) by CPU seconds, on one
# core (taskset -c 0 when available): no log, --log-level info and --log-level debug, the log
# written to a file in a temporary folder. It prints CPU seconds, log lines and bytes, and the
# ratio debug / info (target: at most 3) and info / off.
# Needs a Release build: cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release &&
# ninja -C build/release lockstep
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
iterations=${2:-1000}
lockstep=$build/bin/lockstep
[ -x "$lockstep" ] || { echo "log_bench: no $lockstep (build the Release target first)" >&2; exit 2; }
pin=()
if command -v taskset > /dev/null; then pin=(taskset -c 0); fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/loop-1k.yaml" <<YAML
scenario: loop-1k
world: 1024
params: {iterations: $iterations}
program:
  - repeat: iterations
    do:
      - compute: 1ms
      - allreduce: {size: 100MiB}
YAML

repeats=${REPEATS:-3}
# cpu_of ARGS...: the least CPU seconds (user + sys) of REPEATS runs of `lockstep run ARGS`
cpu_of() {
  local best=''
  for _ in $(seq "$repeats"); do
    rm -f "$dir/log"
    "${pin[@]}" /usr/bin/time -f '%U %S' -o "$dir/time" "$lockstep" run --quiet "$dir/loop-1k.yaml" "$@" > /dev/null
    local cpu
    cpu=$(awk '{print $1 + $2}' "$dir/time")
    if [ -z "$best" ] || [ "$(echo "$cpu < $best" | bc -l)" = 1 ]; then best=$cpu; fi
  done
  echo "$best"
}

off=$(cpu_of)
info=$(cpu_of --log-level info --log "$dir/log")
info_lines=$(wc -l < "$dir/log")
info_bytes=$(stat -c %s "$dir/log")
debug=$(cpu_of --log-level debug --log "$dir/log")
debug_lines=$(wc -l < "$dir/log")
debug_bytes=$(stat -c %s "$dir/log")

printf '%-6s %8s %12s %14s\n' log cpu_s lines bytes
printf '%-6s %8.3f %12s %14s\n' off "$off" - -
printf '%-6s %8.3f %12s %14s\n' info "$info" "$info_lines" "$info_bytes"
printf '%-6s %8.3f %12s %14s\n' debug "$debug" "$debug_lines" "$debug_bytes"
printf 'debug / info = %.2f (at most 3), info / off = %.2f\n' "$(echo "$debug / $info" | bc -l)" "$(echo "$info / $off" | bc -l)"
