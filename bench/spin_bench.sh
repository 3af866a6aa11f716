#!/usr/bin/env bash
# lockstep against SPIN (docs/spin.md): the same workloads checked by lockstep (dpor, dpor
# with --symmetry, and dfs, Release build) and by SPIN on the model `lockstep export promela` writes (with its
# partial-order reduction and without: -DNOREDUCE). Prints one row per workload and tool:
# verdict, states (SPIN) or executions (lockstep), wall and CPU seconds, peak resident MiB, and
# the lockstep/SPIN CPU time ratio to the same verdict (below 0.1 meets the target of
# 10x): SPIN (with its reduction) stops at the first error, so on a workload with a bug the ratio
# takes lockstep dpor with --max-bugs 1, and elsewhere dpor exploring the whole space.
#
#   bench/spin_bench.sh [WORKLOAD_PREFIX...]    e.g. `bench/spin_bench.sh ring` for the rings only
#
# LOCKSTEP=path overrides build/release/bin/lockstep (the checker timed); EXPORTER=path the
# lockstep binary that writes the models (default: LOCKSTEP; it needs the `export` verb).
# Each run is capped at LIMIT_S seconds (default 60) and MEM_MIB of memory (default 2048): pan
# is compiled with -DMEMLIM, lockstep gets --max-memory and --time-budget. SPIN's compile time
# (spin -a, gcc -O2) is reported apart and not counted in its wall time.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
lockstep=${LOCKSTEP:-$root/build/release/bin/lockstep}
limit=${LIMIT_S:-60}
mem=${MEM_MIB:-2048}
only=("$@")
exporter=${EXPORTER:-$lockstep}
[ -x "$lockstep" ] || { echo "spin_bench: no $lockstep (cmake --preset release && cmake --build --preset release -j2)" >&2; exit 2; }
command -v spin >/dev/null || { echo "spin_bench: spin not found (scripts/setup installs it)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# ---- workloads ---------------------------------------------------------------------------
ring() {  # N ranks that send right then receive left: a deadlock under rendezvous
  cat > "$dir/ring-$1.yaml" <<Y
scenario: ring-$1
world: $1
program:
  - send: {to: "(rank + 1) % world", size: 4KiB}
  - recv: {from: "(rank + world - 1) % world", size: 4KiB}
Y
}
gather() {  # N-1 senders to rank 0's N-1 wildcard receives: ok
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
gather_named() {  # the same, with rank 0's last receive named (from 1): a deadlock when a
  # wildcard took rank 1's message
  cat > "$dir/gather-named-$1.yaml" <<Y
scenario: gather-named-$1
world: $1
program:
  - if: "rank == 0"
    then:
      - repeat: "world - 2"
        do: [{recv: {from: any, size: 4KiB}}]
      - recv: {from: 1, size: 4KiB}
    else:
      - send: {to: 0, size: 4KiB}
Y
}
two_threads() {  # N ranks, two host threads each issuing all-reduces on one group: a mismatch
  cat > "$dir/two-threads-$1.yaml" <<Y
scenario: two-threads-$1
world: $1
threads:
  main:
    - repeat: 2
      do: [{allreduce: {size: 4KiB}}]
  ckpt:
    - allreduce: {size: 8KiB}
Y
}

workloads=()
for n in 4 8 16 64 1024; do ring "$n"; workloads+=("$dir/ring-$n.yaml"); done
for n in 4 5 6 7 8 9 10 14 16; do gather "$n"; workloads+=("$dir/gather-$n.yaml"); done
for n in 4 6 8 10; do gather_named "$n"; workloads+=("$dir/gather-named-$n.yaml"); done
for p in pipeline-1f1b-pp2-mb4 pipeline-interleaved-pp3-v3-mb6 pipeline-interleaved-pp4-v2-mb8 pipeline-1f1b-pp4-mb8; do
  workloads+=("$root/scenarios/corpus/$p.yaml")
done
for n in 2 3 4; do two_threads "$n"; workloads+=("$dir/two-threads-$n.yaml"); done

# ---- measurement ---------------------------------------------------------------------------
# measure OUT CMD...: runs CMD under the time limit (bench/measure.py), REPEAT times (default 3)
# when a run takes under 5 s, keeping the run with the least CPU time; OUT.time holds
# "wall_seconds cpu_seconds peak_kib status" of it. CPU time (user + system, at microseconds'
# resolution) is what the ratio uses: both tools run on one thread, so on an idle machine it
# equals the wall time, and on a loaded one it is not inflated by waiting for a core.
measure() {
  local out=$1; shift
  local best="" i wall cpu kib status
  for ((i = 0; i < ${REPEAT:-3}; ++i)); do
    read -r wall cpu kib status < <(python3 "$root/bench/measure.py" "$limit" "$out.try" -- "$@")
    if [ -z "$best" ] || [ "$(echo "$cpu < $best" | bc -l)" = 1 ]; then
      best=$cpu
      mv "$out.try" "$out"
      echo "$wall $cpu $kib $status" > "$out.time"
    fi
    [ "$(echo "$wall < 5" | bc -l)" = 1 ] || break
  done
}

printf '%-34s %-19s %-15s %14s %9s %9s %9s %10s\n' workload tool verdict states/execs wall_s cpu_s peak_MiB lockstep/SPIN
row() { printf '%-34s %-19s %-15s %14s %9s %9s %9s %10s\n' "$@"; }

for w in "${workloads[@]}"; do
  name=$(basename "$w" .yaml)
  if [ ${#only[@]} -gt 0 ]; then
    keep=0
    for prefix in "${only[@]}"; do [[ "$name" == "$prefix"* ]] && keep=1; done
    [ "$keep" = 1 ] || continue
  fi
  # lockstep: dpor listing every bug, dfs, and where there is a bug dpor stopping at the first
  # one (--max-bugs 1), which is what SPIN does: the ratio compares that run with SPIN's.
  ratio_cpu=""
  for variant in dpor dpor-symmetry dfs dpor-first; do
    strategy=${variant%-first}
    strategy=${strategy%-symmetry}
    extra=()
    [ "$variant" = dpor-symmetry ] && extra=(--symmetry)
    # dfs on the largest gathers: (N-1)! executions, past any time limit.
    [ "$variant" = dfs ] && [[ "$name" == gather-1[4-9] ]] && continue
    if [ "$variant" = dpor-first ]; then
      [ -n "$ratio_cpu" ] && continue  # no bug: the full dpor run is the comparison
      extra=(--max-bugs 1)
    fi
    measure "$dir/ls" "$lockstep" check "$w" --strategy "$strategy" --json "$dir/ls.json" --quiet \
      --time-budget "$limit" --max-memory "$mem" --max-executions 100000000 "${extra[@]}"
    read -r secs cpu kib status < "$dir/ls.time" || true
    secs=${secs:-0}; cpu=${cpu:-0}; kib=${kib:-0}
    verdict=$(python3 -c 'import json,sys
try:
  r=json.load(open(sys.argv[1] + ".json")); print(r["verdict"] if r.get("exhaustive", True) or r["verdict"]!="ok" else "inconclusive", r["stats"]["executions"])
except Exception: print("error -")' "$dir/ls" 2>/dev/null || echo "error -")
    [ "$status" = 124 ] && verdict="timeout -"
    if [ "$variant" = dpor ]; then
      case ${verdict% *} in ok|inconclusive|timeout|error) ratio_cpu=$cpu ;; esac
    fi
    [ "$variant" = dpor-first ] && ratio_cpu=$cpu
    row "$name" "lockstep-$variant" ${verdict% *} ${verdict#* } "$(printf %.3f "$secs")" "$(printf %.3f "$cpu")" "$((kib / 1024))" ""
  done
  if ! "$exporter" export promela "$w" -o "$dir/model.pml" > "$dir/export.txt" 2>&1; then
    row "$name" "spin" "not exported" "-" "-" "-" "-" ""
    sed 's/^/    /' "$dir/export.txt" | head -2
    continue
  fi
  vs=$(sed 's/.*VECTORSZ=//' "$dir/export.txt")
  for variant in por nopor; do
    flags="-DSAFETY -DNOFAIR -DVECTORSZ=$vs -DMEMLIM=$mem"
    [ "$variant" = nopor ] && flags="$flags -DNOREDUCE"
    cstart=$(date +%s.%N)
    (cd "$dir" && spin -a model.pml > spin.txt 2>&1 && gcc -O2 -w $flags -o pan pan.c > gcc.txt 2>&1) || {
      row "$name" "spin-$variant" "build failed" "-" "-" "-" "-" ""; continue; }
    compile=$(echo "$(date +%s.%N) - $cstart" | bc -l)
    # In $dir: pan writes its counterexample trail (model.pml.trail) beside the model.
    (cd "$dir" && measure "$dir/pan.out" "$dir/pan" -m1000000 -w24)
    read -r secs cpu kib status < "$dir/pan.out.time" || true
    secs=${secs:-0}; cpu=${cpu:-0}; kib=${kib:-0}
    states=$(grep -m1 "states, stored" "$dir/pan.out" | awk '{print $1}' || true)
    if grep -q "^pan:1: invalid end state" "$dir/pan.out"; then verdict=deadlock/hang
    elif grep -q "^pan:1: assertion violated" "$dir/pan.out"; then verdict=mismatch
    elif grep -q "out of memory\|memory limit\|MEMLIM" "$dir/pan.out"; then verdict=out-of-memory
    elif grep -q "max search depth too small" "$dir/pan.out"; then verdict=depth-bound
    elif [ "$status" = 124 ]; then verdict=timeout
    elif grep -q "errors: 0" "$dir/pan.out"; then verdict=ok
    else verdict=unknown
    fi
    ratio=""
    if [ "$variant" = por ] && [ -n "$ratio_cpu" ] && [[ "$verdict" != timeout && "$verdict" != out-of-memory ]]; then
      ratio=$(printf %.4f "$(echo "$ratio_cpu / $cpu" | bc -l)")
    fi
    row "$name" "spin-$variant" "$verdict" "${states:--}" "$(printf %.3f "$secs")" "$(printf %.3f "$cpu")" "$((kib / 1024))" "$ratio"
    printf '%-34s %-19s (spin -a + gcc -O2: %.1f s)\n' "" "" "$compile"
  done
done
