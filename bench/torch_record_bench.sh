#!/usr/bin/env bash
# Recording overhead of `lockstep record --torch`: CALLS calls of a torch.distributed
# function (bench/torch_record_loop.py, one rank, gloo on CPU) run plain, recorded (gloo), and
# recorded with --fake (no communication: the recorder and the Python wrapper alone), REPEATS
# times each; the best CPU ns per call of each (the calling thread's CPU time, so that a loaded
# machine does not inflate it), what recording adds to a call, and the bytes each record takes.
#
#   bench/torch_record_bench.sh [CALLS] [REPEATS] [OP]     (defaults: 100000 3 all_reduce;
#                                                            OP: all_reduce, broadcast, async_wait)
#
# Needs Debian's python3-torch (scripts/setup) and a build of lockstep (BUILD=path, default
# build/release; build/dev works as well: the recorder's cost is Python's).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
calls=${1:-100000}
repeats=${2:-3}
op=${3:-all_reduce}
build=${BUILD:-$root/build/release}
lockstep=$build/bin/lockstep
python=${PYTHON:-/usr/bin/python3}
[ -x "$lockstep" ] || { echo "torch_record_bench: no $lockstep (build a preset first, or give BUILD=)" >&2; exit 2; }
"$python" -c 'import torch.distributed' 2>/dev/null || { echo "torch_record_bench: $python has no torch (scripts/setup)" >&2; exit 2; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
loop="$root/bench/torch_record_loop.py"

ns_of() { sed -n 's/.*: \([0-9.]*\) ns CPU per call.*/\1/p' "$1"; }
lesser() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a < b) ? a : b }'; }

plain="" recorded="" fake="" bytes=""
for _ in $(seq "$repeats"); do
  RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) \
    "$python" "$loop" --calls "$calls" --op "$op" > "$dir/plain.txt"
  plain=$(lesser "$(ns_of "$dir/plain.txt")" "$plain")
  rm -rf "$dir/rec"
  "$lockstep" record --torch -o "$dir/rec" --nproc 1 --quiet -- "$python" "$loop" --calls "$calls" --op "$op" > /dev/null
  recorded=$(lesser "$(ns_of "$dir/rec/logs/rank-0.txt")" "$recorded")
  raw=$(ls "$dir"/rec/raw/torch.*.jsonl)
  bytes=$(awk -v b="$(wc -c < "$raw")" -v n="$(wc -l < "$raw")" 'BEGIN { printf "%.0f", b / n }')
  rm -rf "$dir/rec"
  "$lockstep" record --torch --fake -o "$dir/rec" --nproc 1 --quiet -- "$python" "$loop" --calls "$calls" --op "$op" > /dev/null
  fake=$(lesser "$(ns_of "$dir/rec/logs/rank-0.txt")" "$fake")
done
printf '%-28s %10s\n' "calls ($op)" "$calls"
printf '%-28s %10.0f\n' "plain CPU ns/call" "$plain"
printf '%-28s %10.0f\n' "recorded CPU ns/call" "$recorded"
printf '%-28s %10.0f\n' "overhead CPU ns/call" "$(awk -v a="$recorded" -v b="$plain" 'BEGIN { print a - b }')"
printf '%-28s %10.0f\n' "--fake CPU ns/call" "$fake"
printf '%-28s %10s\n' "bytes per record" "$bytes"
