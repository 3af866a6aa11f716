#!/usr/bin/env bash
# Checker benchmark: reduction and speed of `lockstep check`, Release build.
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
#   jobs             dfs on gather-10 (362,880 executions) with --jobs 1 and --jobs 2, and on
#                    skewed-10 (362,886), whose work sits in one of its 7 parts
#   corpus           lockstep check scenarios/ (every bundled scenario), pinned to one core
# Then the rows of the host-thread workloads (docs/semantics.md, "Exploration"), each beside its
# goal: a checkpoint thread (as first written: per-op `stream:`, sharing the current stream; and
# with a stream of its own), a dataloader thread on 4 and 64 ranks, 64 ranks with wildcard
# receives and four two-threaded ranks, --jobs 2 on a large search, and the gather beside SPIN
# (with and without --symmetry; bench/spin_bench.sh times SPIN on it).
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
# skewed-10: 362,886 executions, all but six in one of the 7 parts the tree cuts into, which
# --jobs 2 shares out as the other thread runs dry.
. "$root/bench/skewed.sh"
skewed 10 "$dir/skewed-10.yaml"
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
row jobs1-skewed-10-dfs "$dir/skewed-10.yaml" --strategy dfs --jobs 1
row jobs2-skewed-10-dfs "$dir/skewed-10.yaml" --strategy dfs --jobs 2

# Executions per second on small scenarios (target: 100,000 on 4 ranks x 20 ops), by CPU time:
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

# ---------------------------------------------------------------------------------------------
# Host threads: each row beside its goal.
main_thread() {  # the training loop every rank's main thread runs: `steps` of compute + all-reduce
  echo "threads:"
  echo "  main:"
  echo "    - repeat: steps"
  echo "      do:"
  echo "        - compute: 20ms"
  echo "        - allreduce: {size: 128MiB}"
}
ckpt() {  # name, steps, thread header (the ckpt thread's first lines)
  {
    echo "scenario: $1"
    echo "world: 4"
    echo "params: {steps: $2}"
    echo "groups: {ckpt: [0, 1, 2, 3]}"
    main_thread
    echo "  ckpt:"
    if [ "$3" = shared ]; then
      # Per-op streams: the kernels go to ckpt_s, but the thread's current stream is the rank's
      # main, which its collectives chain with (as PyTorch's default stream, shared by threads).
      echo "    - sleep: 25ms"
      echo "    - allgather: {group: ckpt, size: 16MiB, stream: ckpt_s, async: ag}"
      echo "    - allreduce: {group: ckpt, size: 4B, stream: ckpt_s, async: bar}"
      echo "    - sync: ckpt_s"
    else
      echo "    stream: ckpt_s"
      echo "    do:"
      echo "      - sleep: 25ms"
      echo "      - allgather: {group: ckpt, size: 16MiB, async: ag}"
      echo "      - allreduce: {group: ckpt, size: 4B, async: bar}"
      echo "      - wait: ag"
      echo "      - wait: bar"
      echo "      - sync: ckpt_s"
    fi
  } > "$dir/$1.yaml"
}
loader() {  # ranks, steps
  {
    echo "scenario: loader-$1x$2"
    echo "world: $1"
    echo "params: {steps: $2}"
    echo "groups: {loader: [$(seq -s ', ' 0 $(($1 - 1)))]}"
    main_thread
    echo "  loader:"
    echo "    stream: loader_s"
    echo "    do:"
    echo "      - repeat: steps"
    echo "        do:"
    echo "          - sleep: 5ms"
    echo "          - allreduce: {group: loader, size: 4KiB, async: batch}"
    echo "          - compute: 1ms"
    echo "          - wait: batch"
  } > "$dir/loader-$1x$2.yaml"
}
# 64 ranks, 20 all-reduces each; rank 0 first takes three wildcard receives from ranks 1-3;
# ranks 0-3 have a second thread (two short sleeps). A trace: only those ranks have the thread.
python3 - "$dir/wildcard-64.jsonl" <<'P'
import json, sys
lines = [{"lockstep_trace": 1, "scenario": "wildcard-64", "world": 64, "expect": "ok"}]
for r in range(64):
    if r == 0:
        lines += [{"rank": 0, "op": "recv", "from": "any", "size": 4}] * 3
    elif r <= 3:
        lines.append({"rank": r, "op": "send", "to": 0, "size": 4})
    lines += [{"rank": r, "op": "allreduce", "size": 4}] * 20
    if r <= 3:
        lines += [{"rank": r, "thread": "bg", "op": "sleep", "duration_ns": d} for d in (1000, 2000)]
open(sys.argv[1], "w").write("".join(json.dumps(l) + "\n" for l in lines))
P
for steps in 1 2 3; do ckpt "ckpt-shared-$steps" "$steps" shared; ckpt "ckpt-own-$steps" "$steps" own; done
loader 4 2
loader 64 6
gather 14
gather 16

goal() {  # name, goal, file, options...: executions, sleep-blocked, seconds (check's), verdict
  local name=$1 want=$2 file=$3
  shift 3
  "$lockstep" check "$file" --json "$dir/out.json" --quiet "$@" > /dev/null || true
  python3 - "$name" "$want" "$dir/out.json" <<'P'
import json, sys
name, want, path = sys.argv[1:4]
r = json.load(open(path))
s = r["stats"]
state = "exhaustive" if r["exhaustive"] else "inconclusive (" + r.get("bound_hit", "") + ")"
print(f"{name:24} {r['verdict']:5} {state:13} {s['executions']:>9,} executions {s.get('sleep_blocked', 0):>4} blocked "
      f"{s['seconds']:7.3f} s   goal: {want}")
P
}
echo
# Written with a per-op `stream:` the checkpoint thread shares the current stream `main`: every
# order of the two threads' issues is a GPU schedule of its own, one execution each, none
# sleep-blocked (docs/semantics.md, "Decision (the checkpoint thread without a stream of its
# own)"). The goals for a checkpoint thread are the ckpt-own rows': a stream of its own.
goal ckpt-shared-1 "one per schedule: 6^4 = 1,296, 0 blocked" "$dir/ckpt-shared-1.yaml"
goal ckpt-shared-2 "one per schedule: 15^4 = 50,625, 0 blocked" "$dir/ckpt-shared-2.yaml"
goal ckpt-shared-3 "one per schedule: 28^4 = 614,656, 0 blocked" "$dir/ckpt-shared-3.yaml"
goal ckpt-own-1 "<= 20 executions" "$dir/ckpt-own-1.yaml"
goal ckpt-own-2 "exhaustive, <= 100 executions, < 0.1 s" "$dir/ckpt-own-2.yaml"
goal ckpt-own-3 "exhaustive, <= 100 executions, < 0.1 s" "$dir/ckpt-own-3.yaml"
goal loader-4x2 "exhaustive, < 0.1 s" "$dir/loader-4x2.yaml"
goal loader-64x6 "exhaustive, < 5 s" "$dir/loader-64x6.yaml"
goal wildcard-64 "exhaustive, < 10 s" "$dir/wildcard-64.jsonl"
goal gather-14 "fewer executions than SPIN's states, faster (bench/spin_bench.sh)" "$dir/gather-14.yaml"
goal gather-14-symmetry "the same" "$dir/gather-14.yaml" --symmetry
goal gather-16 "the same" "$dir/gather-16.yaml"
goal gather-16-symmetry "the same" "$dir/gather-16.yaml" --symmetry

# --jobs 2 against --jobs 1 on the largest of them (614,656 executions): wall and CPU seconds of
# the whole process, the fastest of 5 runs each, the two taken in turn (this machine's speed
# drifts by a fifth within minutes; runs side by side in time see the same machine). Then the
# same for odpor, whose wakeup trees tie a branch to what its siblings find (docs/semantics.md,
# "Parallel exploration").
jobs_row() {  # name, goal, options...
  local name=$1 want=$2
  shift 2
  local -A wall=() cpu=()
  for _ in 1 2 3 4 5; do
    for jobs in 1 2; do
      read -r w c _ < <(python3 "$root/bench/measure.py" 600 /dev/null -- "$lockstep" check "$dir/ckpt-shared-3.yaml" \
        --quiet --jobs "$jobs" "$@")
      if [ -z "${wall[$jobs]:-}" ] || [ "$(echo "$w < ${wall[$jobs]}" | bc -l)" = 1 ]; then wall[$jobs]=$w; cpu[$jobs]=$c; fi
    done
  done
  printf '%-24s --jobs 1 %.2f s wall %.2f s CPU, --jobs 2 %.2f s wall %.2f s CPU: %.2fx faster at %.2fx the CPU   goal: %s\n' \
    "$name" "${wall[1]}" "${cpu[1]}" "${wall[2]}" "${cpu[2]}" "$(echo "${wall[1]} / ${wall[2]}" | bc -l)" \
    "$(echo "${cpu[2]} / ${cpu[1]}" | bc -l)" "$want"
}
jobs_row jobs-ckpt-shared-3 ">= 1.7x at <= 1.2x"
jobs_row jobs-ckpt-shared-3-odpor "(none: odpor for comparison)" --strategy odpor

# The whole bundled corpus (target: under 30 s on one core).
start=$(date +%s.%N)
(cd "$root" && taskset -c 0 "$lockstep" check scenarios/ --quiet > /dev/null) || true
end=$(date +%s.%N)
printf '%-24s %s inputs in %.3f s (one core, wall)\n' corpus "$(find "$root/scenarios" -name '*.yaml' -o -name '*.jsonl' | wc -l)" \
  "$(echo "$end - $start" | bc -l)"
