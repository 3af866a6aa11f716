#!/usr/bin/env bash
# JSON benchmark: the trace loader (its own line scanner, docs/trace-format.md) against simdjson's
# On-Demand parser walking the same file, on one recorded schedule of RANKS x OPS operations
# (bench/gen_recorded.py).
#
#   bench/json_bench.sh [RANKS] [OPS] [REPEATS]     (defaults: 1024 1000 5)
#
# Needs the Release build with simdjson installed (Debian: libsimdjson-dev), which builds
# build/release/bin/lockstep_json_timer. Prints each repeat: the whole load, and simdjson's walk.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
ranks=${1:-1024}
ops=${2:-1000}
repeats=${3:-5}
timer=${JSON_TIMER:-$root/build/release/bin/lockstep_json_timer}
[ -x "$timer" ] || { echo "json_bench: no $timer (install libsimdjson-dev, build the release preset)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 "$root/bench/gen_recorded.py" "$dir" --ranks "$ranks" --ops "$ops"
echo "trace: $ranks ranks x $ops ops, $(stat -c %s "$dir/recorded.jsonl") bytes"
"$timer" "$dir/recorded.jsonl" "$repeats"
