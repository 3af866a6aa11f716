#!/usr/bin/env bash
# Engine benchmark: simulated events per second and peak memory of one execution.
#
#   bench/engine_bench.sh [BUILD_DIR] [WORKLOAD ...]     (default build/release; all workloads)
#
# Workloads, generated into a temporary folder:
#   loop-1k, loop-4k, loop-16k  a data-parallel loop (compute 1ms; allreduce 100MiB on world),
#                               iterations scaled so that each runs about 6 M events: the cost
#                               per event should not change with the number of ranks
#   3d-1k, 3d-4k, 3d-16k        one step of scenarios/examples/3d-parallel.yaml (1F1B, 8
#                               microbatches) on a mesh tp=8, pp=8, dp=16/64/256
#
# Each workload is measured four ways, each in its own process, on one core (taskset -c 0 when
# available), best of REPEATS runs (default 3; by CPU seconds):
#   run, check          `lockstep run --quiet` / `lockstep check --quiet` end to end: load,
#                       engine, analysis and report; wall and CPU (user + sys) seconds and peak
#                       RSS by /usr/bin/time
#   engine-run/-check   bench/engine_timer.cc: the engine alone, as run (ops recorded) and as
#                       check (not recorded) use it; wall and thread CPU seconds, peak RSS by
#                       getrusage
# Then, for each loop measured, the cost of an event apart from the cost of an execution: the
# engine alone at the loop's iterations and at half of them, runs alternated, best of REPEATS
# each by CPU seconds; the marginal cost of an event is the difference of CPU seconds over the
# difference of events, and what is left at zero events is the execution's fixed cost (per
# rank: starting its fiber, first touches of its state; docs/engine-performance.md).
# events = ExecutionResult::events (issued ops + kernel starts + completions); events/s is per
# CPU second, which a busy shared machine does not distort as it does wall time. CPU seconds are
# also given as user and system: the system part is mostly the first touch of the memory that
# kernels take (page clearing), slow and variable in a virtual machine, the same per event at
# any number of ranks; the user part is the engine's own work.
# Needs a Release build: cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release &&
# ninja -C build/release lockstep lockstep_engine_timer
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
shift || true
lockstep=$build/bin/lockstep
timer=$build/bin/lockstep_engine_timer
for tool in "$lockstep" "$timer"; do
  [ -x "$tool" ] || { echo "engine_bench: no $tool (build the Release targets first)" >&2; exit 2; }
done
pin=()
if command -v taskset > /dev/null; then pin=(taskset -c 0); fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

loop() {  # loop NAME WORLD ITERATIONS
  cat > "$dir/$1.yaml" <<EOF
scenario: $1
world: $2
params: {iterations: $3}
program:
  - repeat: iterations
    do:
      - compute: 1ms
      - allreduce: {size: 100MiB}
EOF
}
three_d() {  # three_d NAME DP
  sed -e "s/^scenario: .*/scenario: $1/" -e "s/^mesh: .*/mesh: {tp: 8, pp: 8, dp: $2}/" \
    "$root/scenarios/examples/3d-parallel.yaml" > "$dir/$1.yaml"
  grep -q "dp: $2}" "$dir/$1.yaml" || { echo "engine_bench: the 3d-parallel example has no mesh line" >&2; exit 2; }
}
loop loop-1k 1024 1000
loop loop-4k 4096 250
loop loop-16k 16384 63
three_d 3d-1k 16
three_d 3d-4k 64
three_d 3d-16k 256

workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(loop-1k loop-4k loop-16k 3d-1k 3d-4k 3d-16k)

# wall seconds and peak RSS (KiB) of a command, from /usr/bin/time -v
timed() {
  "${pin[@]}" /usr/bin/time -v "$@" > "$dir/out" 2> "$dir/time" || {
    echo "engine_bench: failed: $*" >&2
    tail -5 "$dir/out" "$dir/time" >&2
    exit 1
  }
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$dir/time")
  user=$(awk -F': ' '/User time/ {print $2}' "$dir/time")
  sys=$(awk -F': ' '/System time/ {print $2}' "$dir/time")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$dir/time" |
    awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
  rss_kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time")
}

repeats=${REPEATS:-3}
# best_of COMMAND...: runs `timed COMMAND` REPEATS times, keeps the run with the least CPU time
best_of() {
  local best_cpu='' best_wall='' best_rss='' best_user='' best_sys=''
  for _ in $(seq "$repeats"); do
    timed "$@"
    if [ -z "$best_cpu" ] || [ "$(echo "$cpu < $best_cpu" | bc -l)" = 1 ]; then
      best_cpu=$cpu best_wall=$wall best_rss=$rss_kib best_user=$user best_sys=$sys
      cp "$dir/out" "$dir/best"
    fi
  done
  cpu=$best_cpu wall=$best_wall rss_kib=$best_rss user=$best_user sys=$best_sys
}

row() {  # row NAME RANKS MODE EVENTS WALL CPU RSS_MIB USER SYS
  local rate=-
  [ "$4" = - ] || rate=$(printf '%.0f' "$(echo "$4 / $6" | bc -l)")
  printf '%-9s %6s %-12s %10s %8.3f %8.3f %12s %9.0f %7.3f %7.3f\n' "$1" "$2" "$3" "$4" "$5" "$6" "$rate" "$7" "$8" "$9"
}

printf '%-9s %6s %-12s %10s %8s %8s %12s %9s %7s %7s\n' workload ranks mode events wall_s cpu_s events/s rss_MiB user_s sys_s
for name in "${workloads[@]}"; do
  file=$dir/$name.yaml
  [ -f "$file" ] || { echo "engine_bench: unknown workload $name" >&2; exit 2; }
  ranks=$(awk '/^world: / {print $2}' "$file")
  if [ -z "$ranks" ]; then
    ranks=$(sed -n 's/^mesh: {tp: \([0-9]*\), pp: \([0-9]*\), dp: \([0-9]*\)}/\1 \2 \3/p' "$file" | awk '{print $1 * $2 * $3}')
  fi
  for mode in run check; do
    best=''
    for _ in $(seq "$repeats"); do
      line=$("${pin[@]}" "$timer" "$file" "$mode")
      read -r _ _ c _ _ <<< "$line"
      if [ -z "$best" ] || [ "$(echo "$c < $(echo "$best" | awk '{print $3}')" | bc -l)" = 1 ]; then best=$line; fi
    done
    read -r events wall cpu _ rss_mib user sys <<< "$best"
    row "$name" "$ranks" "engine-$mode" "$events" "$wall" "$cpu" "$rss_mib" "$user" "$sys"
  done
  best_of "$lockstep" run --quiet "$file"
  events=$(sed -n 's/.*ranks, \([0-9]*\) events$/\1/p' "$dir/best" | head -1)
  row "$name" "$ranks" run "$events" "$wall" "$cpu" "$(echo "$rss_kib / 1024" | bc -l)" "$user" "$sys"
  best_of "$lockstep" check --quiet "$file"
  row "$name" "$ranks" check - "$wall" "$cpu" "$(echo "$rss_kib / 1024" | bc -l)" "$user" "$sys"
done

# The marginal cost of an event and the fixed cost of an execution (see the header).
least() {  # least BEST LINE: of two engine_timer lines (BEST may be empty), the one of less CPU
  if [ -z "$1" ] || [ "$(echo "$(echo "$2" | awk '{print $3}') < $(echo "$1" | awk '{print $3}')" | bc -l)" = 1 ]; then
    echo "$2"
  else
    echo "$1"
  fi
}
loops=()
for name in "${workloads[@]}"; do
  case $name in loop-*) loops+=("$name") ;; esac
done
[ ${#loops[@]} -gt 0 ] || exit 0
printf '\n%-9s %6s %-12s %10s %10s %11s %11s %9s %13s\n' workload ranks mode events half_evts \
  ns/event marginal_ns fixed_ms fixed_us/rank
for name in "${loops[@]}"; do
  file=$dir/$name.yaml
  ranks=$(awk '/^world: / {print $2}' "$file")
  iterations=$(sed -n 's/^params: {iterations: \([0-9]*\)}/\1/p' "$file")
  half=$dir/$name-half.yaml
  sed "s/^params: {iterations: [0-9]*}/params: {iterations: $(( (iterations + 1) / 2 ))}/" "$file" > "$half"
  for mode in run check; do
    best_full='' best_half=''
    for _ in $(seq "$repeats"); do
      best_full=$(least "$best_full" "$("${pin[@]}" "$timer" "$file" "$mode")")
      best_half=$(least "$best_half" "$("${pin[@]}" "$timer" "$half" "$mode")")
    done
    read -r e1 _ c1 _ <<< "$best_full"
    read -r e2 _ c2 _ <<< "$best_half"
    marginal=$(echo "($c1 - $c2) / ($e1 - $e2) * 1000000000" | bc -l)
    fixed=$(echo "($c1 - $marginal * $e1 / 1000000000) * 1000" | bc -l)
    printf '%-9s %6s %-12s %10s %10s %11.1f %11.1f %9.1f %13.2f\n' "$name" "$ranks" "engine-$mode" "$e1" "$e2" \
      "$(echo "$c1 / $e1 * 1000000000" | bc -l)" "$marginal" "$fixed" "$(echo "$fixed * 1000 / $ranks" | bc -l)"
  done
done
