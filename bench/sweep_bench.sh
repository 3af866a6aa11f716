#!/usr/bin/env bash
# Sweep benchmark: points per second of `lockstep sweep` on the interleaved pipeline's 231
# layouts (pp 2..8, chunks 2..4, microbatches 1..16 where microbatches > pp), with --jobs 1 and 2.
#
#   bench/sweep_bench.sh            (LOCKSTEP=path overrides build/release/bin/lockstep)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lockstep=${LOCKSTEP:-$root/build/release/bin/lockstep}
[ -x "$lockstep" ] || { echo "sweep_bench: no $lockstep (build the release preset first)" >&2; exit 2; }
cd "$root"
TIMEFORMAT='%R %U %S'
for jobs in 1 2; do
  measured=$( { time "$lockstep" sweep scenarios/examples/pipeline-interleaved-sweep.yaml -D pp=2..8 -D chunks=2..4 \
      -D microbatches=1..16 --where "microbatches > pp" --jobs "$jobs" > /dev/null || [ $? -eq 1 ]; } 2>&1 )
  read -r wall user sys <<< "$measured"
  printf 'jobs %s: 231 points in %s s wall (%s s CPU): %.0f points/s\n' "$jobs" "$wall" \
      "$(echo "$user + $sys" | bc)" "$(echo "231 / $wall" | bc -l)"
done
