#!/usr/bin/env bash
# Recorder overhead: MILLIONS million ncclAllReduce calls on one rank against the fake
# libnccl (record/fake_nccl.cc, returns at once), without and with liblockstep_record.so
# preloaded, REPEATS times each; the best CPU ns per call of each (the calling thread's user and
# system time, so that a loaded machine does not inflate it), and their difference: what the
# recorder adds to one NCCL call (the record, the JSON written when a buffer fills, the write).
#
#   bench/record_bench.sh [MILLIONS] [REPEATS] [GAP_NS]     (defaults: 2 3 0)
#
# GAP_NS > 0 spins that long between calls (host work, as in a training step): the recorder's
# background thread then writes the records, and the calling thread pays only the append. With
# GAP_NS = 0 the loop outruns the background thread and every record is formatted and written by
# the calling thread: the worst case.
#
# Needs the Release build (cmake --preset release && cmake --build --preset release);
# BUILD=path overrides it. Each recorded run writes about 150 bytes per call to a temporary
# folder (300 MB for 2 million), removed after.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
millions=${1:-2}
repeats=${2:-3}
gap=${3:-0}
build=${BUILD:-$root/build/release}
demo=$build/bin/lockstep_record_demo
lib=$build/lib/liblockstep_record.so
[ -x "$demo" ] && [ -f "$lib" ] || { echo "record_bench: no $demo or $lib (build the release preset first)" >&2; exit 2; }
calls=$((millions * 1000000))

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

best() {  # best ns/call of REPEATS runs of "$@"
  local b=""
  for _ in $(seq "$repeats"); do
    rm -rf "$dir/raw" && mkdir -p "$dir/raw"
    ns=$("$@" | sed -n 's/.* \([0-9.]*\) ns CPU per call$/\1/p')
    b=$(awk -v a="$ns" -v b="$b" 'BEGIN { print (b == "" || a < b) ? a : b }')
  done
  echo "$b"
}

plain=$(best "$demo" bench "$calls" "$gap")
recorded=$(best env LD_PRELOAD="$lib" LOCKSTEP_RECORD_DIR="$dir/raw" "$demo" bench "$calls" "$gap")
bytes=$(du -sb "$dir/raw" | cut -f1)
printf '%-22s %12s\n' calls "$calls"
printf '%-22s %12s\n' "gap ns" "$gap"
printf '%-22s %12s\n' "plain CPU ns/call" "$plain"
printf '%-22s %12s\n' "recorded CPU ns/call" "$recorded"
printf '%-22s %12s\n' "overhead CPU ns/call" "$(awk -v a="$recorded" -v b="$plain" 'BEGIN { printf "%.1f", a - b }')"
printf '%-22s %12s\n' "bytes written/call" "$(awk -v a="$bytes" -v c="$calls" 'BEGIN { printf "%.0f", a / c }')"
