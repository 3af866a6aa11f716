#!/usr/bin/env bash
# The fidelity table (docs/fidelity.md): every corpus bug and fix, and the semantic probes that
# decide the model's defaults, replayed on real ranks; one row each with the model's verdict
# (`lockstep check`), the outcome through MPI on CPU and through NCCL on a GPU, and seconds.
# gpu_validation/device-check.sh runs it after building; the ctests gpu.nccl_replay and
# gpu_validation.fidelity_cpu run parts of it.
#
# usage: fidelity_table.sh [--bin DIR] [--cpu] [--backends mpi,nccl] [--rows REGEX] [--redo REGEX]
#                          [--fresh] [--state DIR] [--corpus DIR] [--jobs N] [--deadline EPOCH_S]
#                          [--list]
# Run from the repository root. Outcomes per backend cell:
#   CONFIRMED       the hardware did what the model says: a bug's counterexample replays
#                   CONFIRMED at the predicted ops, a correct scenario (a fix) completes with
#                   correct data
#   NOT REPRODUCED  it did something else: a bug's replay completes, a fix hangs or fails
#   UNDECIDED       neither (replay UNDECIDED, a rank never reported, a row's time limit)
#   CANNOT EXPRESS  the backend cannot express the scenario (the reason is listed)
#   SKIPPED         the backend is not available here (no GPU, no mpirun)
#   n/a             the row has no cell on that backend (a probe that is a CUDA program)
# Rows are resumable: each decided cell (CONFIRMED, NOT REPRODUCED, CANNOT EXPRESS) is kept in
# the state folder and not run again; UNDECIDED and missing ones are. --fresh forgets them all,
# --redo forgets the matching rows'. State from other sources (model, backends, scenarios) is
# forgotten too.
# Exit: 0 every selected cell decided and every corpus cell CONFIRMED (or CANNOT EXPRESS);
# 1 a corpus cell NOT REPRODUCED (the hardware disagrees with the model); 3 cells UNDECIDED or
# not run (the budget ran out: run again to finish); 77 no selected backend available; 2 usage.
set -uo pipefail

usage() { sed -n '7,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

bin=build/release/bin
corpus=scenarios/corpus
probes=gpu_validation/probes
state=${LOCKSTEP_DEVICE_STATE:-build/device-check}
backends=""
force_cpu=0
rows_regex=""
redo_regex=""
fresh=0
jobs=""
deadline=""
list_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=${2:?}; shift ;;
    --cpu) force_cpu=1 ;;
    --backends) backends=${2:?}; shift ;;
    --rows) rows_regex=${2:?}; shift ;;
    --redo) redo_regex=${2:?}; shift ;;
    --fresh) fresh=1 ;;
    --state) state=${2:?}; shift ;;
    --corpus) corpus=${2:?}; shift ;;
    --jobs) jobs=${2:?}; shift ;;
    --deadline) deadline=${2:?}; shift ;;
    --list) list_only=1 ;;
    -h|--help) usage ;;
    *) echo "fidelity_table.sh: unknown option '$1'" >&2; usage ;;
  esac
  shift
done
lockstep=$bin/lockstep
stream_probe=$bin/lockstep-thread-stream-probe
# The workers' watchdog (replay --timeout): MPI replays are compacted (LOCKSTEP_REPLAY_COMPACT)
# and fast; NCCL ones keep the model's sizes, and ranks share the GPU.
timeout_mpi=${LOCKSTEP_FIDELITY_TIMEOUT_MPI:-3}
timeout_nccl=${LOCKSTEP_FIDELITY_TIMEOUT_NCCL:-5}
for t in "$timeout_mpi" "$timeout_nccl" "${jobs:-1}" "${deadline:-0}"; do
  [[ "$t" =~ ^[0-9]+$ ]] || { echo "fidelity_table.sh: '$t' is not a whole number (watchdogs, --jobs, --deadline)" >&2; exit 2; }
done

# --- the machine -------------------------------------------------------------------------------
gpu_reason=""
if [ "$force_cpu" = 1 ]; then
  gpu_reason="--cpu"
elif ! command -v nvidia-smi >/dev/null 2>&1; then
  gpu_reason="no GPU: nvidia-smi not found"
elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  gpu_reason="no GPU: nvidia-smi finds none"
fi
# By default a GPU machine runs the NCCL column, and a machine without one the MPI column, its
# NCCL cells SKIPPED.
if [ -z "$backends" ]; then
  if [ -z "$gpu_reason" ]; then backends=nccl; else backends=mpi,nccl; fi
fi
[ -z "$jobs" ] && { if [ -z "$gpu_reason" ]; then jobs=2; else jobs=4; fi; }
[ "$jobs" -ge 1 ] || { echo "fidelity_table.sh: --jobs takes 1 or more" >&2; exit 2; }
want_mpi=0; want_nccl=0
case ",$backends," in *,mpi,*) want_mpi=1 ;; esac
case ",$backends," in *,nccl,*) want_nccl=1 ;; esac
[ "$want_mpi$want_nccl" = 00 ] && { echo "fidelity_table.sh: --backends takes mpi, nccl or both" >&2; exit 2; }
skip_mpi=""; skip_nccl=""
if [ "$want_mpi" = 1 ]; then
  if ! command -v mpirun >/dev/null 2>&1; then skip_mpi="no mpirun"
  elif [ ! -x "$bin/lockstep-mpi-replay" ]; then skip_mpi="no $bin/lockstep-mpi-replay"; fi
fi
if [ "$want_nccl" = 1 ]; then
  if [ -n "$gpu_reason" ]; then skip_nccl=$gpu_reason
  elif [ ! -x "$bin/lockstep-nccl-replay" ]; then skip_nccl="no $bin/lockstep-nccl-replay (built with LOCKSTEP_GPU and CUDA/NCCL)"; fi
fi
if [ ! -x "$lockstep" ] && [ "$list_only" = 0 ]; then
  echo "fidelity_table.sh: no $lockstep (build it, or give --bin DIR)" >&2
  exit 2
fi

# --- the rows ----------------------------------------------------------------------------------
# Parallel arrays, one entry per row, in table order: the corpus' bugs and their fixes (by
# name), the probes, then the corpus' other correct scenarios.
# ROW_SLUG: the ID as a file name in the state ("/" -> "__").
ROW_ID=() ROW_SLUG=() ROW_KIND=() ROW_INPUT=() ROW_PARAMS=() ROW_ENV=() ROW_TOOL=() ROW_INFORMS=()
ROW_YES=() ROW_NO=()
add_row() {  # ID KIND INPUT PARAMS ENV TOOL INFORMS READING_IF_CONFIRMED READING_IF_NOT
  ROW_ID+=("$1") ROW_SLUG+=("${1//\//__}") ROW_KIND+=("$2") ROW_INPUT+=("$3") ROW_PARAMS+=("$4")
  ROW_ENV+=("$5") ROW_TOOL+=("$6")
  ROW_INFORMS+=("$7") ROW_YES+=("$8") ROW_NO+=("$9")
}

# What the rows need of a scenario file, read with the shell's builtins (a table of some 70 rows
# is set up on every run; a process per question would take seconds): its `expect:` value, and
# the NCCL environment its semantics stand for (comm_concurrency K is
# CUDA_DEVICE_MAX_CONNECTIONS=K, launch_order_implicit: true is NCCL_LAUNCH_ORDER_IMPLICIT=1),
# from the `semantics:` key, flow or block style, to the next top-level key.
read_scenario() {  # FILE -> sets expect, nccl_env
  local line k="" implicit=0 in=0
  expect=""
  while IFS= read -r line || [ -n "$line" ]; do
    [[ -z $expect && $line =~ ^expect:[[:space:]]*([a-z]*) ]] && expect=${BASH_REMATCH[1]}
    case $in in  # 0: before the block, 1: in it, 2: its last line (the next key), 3: after it
      0) [[ $line == semantics:* ]] && in=1 ;;
      1) [[ $line =~ ^[a-z] ]] && in=2 ;;
      2) in=3 ;;
    esac
    if [ "$in" = 1 ] || [ "$in" = 2 ]; then
      [[ -z $k && $line =~ comm_concurrency:[[:space:]]*([0-9]+) ]] && k=${BASH_REMATCH[1]}
      [[ $line =~ launch_order_implicit:[[:space:]]*true ]] && implicit=1
    fi
  done <"$1"
  nccl_env=${k:+CUDA_DEVICE_MAX_CONNECTIONS=$k}
  [ "$implicit" = 1 ] && nccl_env="${nccl_env:+$nccl_env }NCCL_LAUNCH_ORDER_IMPLICIT=1"
  return 0
}

# Readings of the corpus rows that are also launch-order probes (docs/fidelity.md).
corpus_reading() {  # NAME -> "INFORMS|IF_CONFIRMED|IF_NOT" or nothing
  case "$1" in
    comm-launch-order) echo "launch_order_implicit|opposite launch orders deadlock under one connection even with NCCL_LAUNCH_ORDER_IMPLICIT=1, as the model says|opposite launch orders complete under one connection with NCCL_LAUNCH_ORDER_IMPLICIT=1: the model's rule for them is too strict" ;;
    comm-launch-order-fixed) echo "launch_order_implicit|one launch order with NCCL_LAUNCH_ORDER_IMPLICIT=1 completes under one connection, as the model says|one launch order hangs under one connection even with NCCL_LAUNCH_ORDER_IMPLICIT=1: launch_order_implicit does not make it safe" ;;
    comm-launch-order-no-implicit) echo "launch_order_implicit|without NCCL_LAUNCH_ORDER_IMPLICIT the GPU ran the kernels out of launch order and deadlocked: the default launch_order_implicit: false is needed|without NCCL_LAUNCH_ORDER_IMPLICIT the kernels ran in launch order in this run: the model's reordering stays possible (one run cannot refute a may-deadlock)" ;;
  esac
}

bugs=() fixes=() oks=()
# By name, so that a bug comes before its fixes (C order: "x" < "x-fixed").
declare -A expect_of=() nccl_env_of=()
corpus_names=$(for f in "$corpus"/*.yaml; do
                 [ -f "$f" ] && f=${f##*/} && printf '%s\n' "${f%.yaml}"
               done | LC_ALL=C sort)
for name in $corpus_names; do
  read_scenario "$corpus/$name.yaml"
  expect_of[$name]=$expect nccl_env_of[$name]=$nccl_env
  case "$expect" in
    deadlock|hang|mismatch) bugs+=("$name") ;;
    *) oks+=("$name") ;;
  esac
done
# A fix is a correct scenario named after a bug: its name less its last word ("-fixed",
# "-join", "-ordered") is a bug's name or the start of one ("new-group" for new-group-order).
for name in "${oks[@]}"; do
  stem=${name%-*}
  for b in "${bugs[@]}"; do
    case "$b" in "$stem"|"$stem"-*) fixes+=("$name"); break ;; esac
  done
done
is_fix() { local n; for n in "${fixes[@]}"; do [ "$n" = "$1" ] && return 0; done; return 1; }
for name in $corpus_names; do
  f=$corpus/$name.yaml
  kind=ok
  case "${expect_of[$name]}" in deadlock|hang|mismatch) kind=bug ;; esac
  if [ "$kind" = ok ]; then is_fix "$name" || continue; kind=fix; fi
  IFS='|' read -r informs yes no <<<"$(corpus_reading "$name")"
  add_row "corpus/$name" "$kind" "$f" "" "${nccl_env_of[$name]}" replay \
    "${informs:-}" "${yes:-}" "${no:-}"
done

cold=$probes/p2p-head-to-head-cold.yaml warm=$probes/p2p-head-to-head-warm.yaml
add_row probe/p2p-cold-4KiB probe "$cold" size=4KiB "" replay "p2p connection" \
  "a pair's first exchange hangs head to head even at 4 KiB: connecting a pair is itself a rendezvous" \
  "a pair's first exchange completes head to head at 4 KiB: connecting a pair is no rendezvous"
for size in 4KiB 64KiB 256KiB 1MiB 4MiB 16MiB 64MiB; do
  add_row "probe/p2p-warm-$size" probe "$warm" "size=$size" "" replay "p2p eager_limit" \
    "rendezvous at $size: a send waits for its receiver" "eager at $size: a send completes without its receiver"
done
add_row probe/launch-opposite-no-implicit probe "$probes/launch-opposite-no-implicit.yaml" "" CUDA_DEVICE_MAX_CONNECTIONS=1 replay \
  "comm_concurrency" \
  "opposite launch orders deadlock under CUDA_DEVICE_MAX_CONNECTIONS=1, as comm_concurrency: 1 says" \
  "opposite launch orders complete under CUDA_DEVICE_MAX_CONNECTIONS=1: it does not run one communication kernel at a time"
add_row probe/launch-opposite-concurrent probe "$probes/launch-opposite-concurrent.yaml" "" "" replay "comm_concurrency" \
  "with CUDA's default connections both communicators' kernels run at once: the default (unlimited) stands" \
  "opposite launch orders hang with CUDA's default connections: the default comm_concurrency must be bounded"
add_row probe/thread-stream-legacy probe "$probes/thread-shared-stream.yaml" "" "" stream:legacy "threads' current stream" \
  "two host threads on the legacy default stream chain their collectives and deadlock: the model's shared current stream stands" \
  "two host threads on the legacy default stream do not chain: the model's shared current stream is too strict"
add_row probe/thread-stream-per-thread probe "$probes/thread-own-stream.yaml" "" "" stream:per-thread "threads' current stream" \
  "with a per-thread default stream the threads' collectives do not chain (a thread with a stream of its own in the model: threads: {T: {stream: S, do: [...]}})" \
  "the threads' collectives hang even on per-thread default streams: something else chains them"
for size in 2 64MiB; do
  label=$size; [ "$size" = 2 ] && label=1elem
  add_row "probe/barrier-after-allreduce-$label" probe "$probes/barrier-after-unmatched.yaml" "size=$size" "" replay \
    "barrier vs an unmatched collective" \
    "the ranks fail or hang at the barrier/all-reduce pair, where the model reports the mismatch" \
    "every rank completed: the barrier passed for rank 0's all-reduce and nothing hung"
done

for name in "${oks[@]}"; do
  is_fix "$name" && continue
  add_row "corpus/$name" ok "$corpus/$name.yaml" "" "${nccl_env_of[$name]}" replay "" "" ""
done

selected=()
for i in "${!ROW_ID[@]}"; do
  if [ -z "$rows_regex" ] || [[ ${ROW_ID[$i]} =~ $rows_regex ]]; then selected+=("$i"); fi
done
if [ "$list_only" = 1 ]; then
  for i in "${selected[@]}"; do
    printf '%-46s %-5s %s%s%s\n' "${ROW_ID[$i]}" "${ROW_KIND[$i]}" "${ROW_INPUT[$i]}" \
      "${ROW_PARAMS[$i]:+ -D ${ROW_PARAMS[$i]}}" "${ROW_ENV[$i]:+ (nccl: ${ROW_ENV[$i]})}"
  done
  exit 0
fi
[ ${#selected[@]} -eq 0 ] && { echo "fidelity_table.sh: no row matches --rows '$rows_regex'" >&2; exit 2; }

# --- the state ---------------------------------------------------------------------------------
# What decides an outcome: the model, the backends and the scenarios. State made from other
# sources is forgotten.
stamp=$( { find sim checker gpu_validation "$corpus" "$probes" -type f \
             \( -name '*.cc' -o -name '*.h' -o -name '*.yaml' -o -name '*.jsonl' \) 2>/dev/null | LC_ALL=C sort -u |
           xargs -r sha256sum | sed 's/ .*//'; } | sha256sum | cut -c1-16)
mkdir -p "$state"
if [ "$fresh" = 1 ]; then
  rm -rf "$state/cells" "$state/model" "$state/logs"
elif [ -f "$state/stamp" ] && [ "$(cat "$state/stamp")" != "$stamp" ]; then
  echo "fidelity table: the state in $state is from other sources (stamp $(cat "$state/stamp"), now $stamp): starting over"
  rm -rf "$state/cells" "$state/model" "$state/logs"
fi
echo "$stamp" >"$state/stamp"
mkdir -p "$state/cells" "$state/model" "$state/logs"
if [ -n "$redo_regex" ]; then
  for i in "${selected[@]}"; do
    if [[ ${ROW_ID[$i]} =~ $redo_regex ]]; then rm -f "$state/cells/${ROW_SLUG[$i]}".*; fi
  done
fi

# A cell's file: OUTCOME<TAB>SECONDS<TAB>DETAIL. Kept across runs when decided.
cell_file() { printf '%s/cells/%s.%s' "$state" "${ROW_SLUG[$1]}" "$2"; }
cell_field() {  # ROW BACKEND FIELD(1-3)
  local f=$state/cells/${ROW_SLUG[$1]}.$2 o s d
  [ -f "$f" ] || return 0
  IFS=$'\t' read -r o s d <"$f"
  case "$3" in 1) printf '%s' "$o" ;; 2) printf '%s' "$s" ;; *) printf '%s' "$d" ;; esac
}
decided() {
  case "$(cell_field "$1" "$2" 1)" in CONFIRMED|NOT_REPRODUCED|CANNOT_EXPRESS) return 0 ;; esac
  return 1
}
write_cell() {  # ROW BACKEND OUTCOME SECONDS DETAIL
  local f; f=$(cell_file "$1" "$2")
  printf '%s\t%s\t%s\n' "$3" "$4" "$5" >"$f.tmp" && mv "$f.tmp" "$f"
}

# --- the model's verdicts ----------------------------------------------------------------------
# `lockstep check` on each row (with its parameters); a bug's first counterexample is what the
# backends replay. Kept in DIR/model/ROW: VERDICT<TAB>COUNTEREXAMPLE (its name in ROW.cex/).
params_args() { local p; for p in $1; do printf -- '-D\n%s\n' "$p"; done; }
model_of() {  # ROW -> sets model_verdict, model_cex
  local i=$1 dir m args
  m=$state/model/${ROW_SLUG[$i]}
  if [ ! -f "$m" ]; then
    dir=$state/model/${ROW_SLUG[$i]}.cex
    rm -rf "$dir" && mkdir -p "$dir"
    mapfile -t args < <(params_args "${ROW_PARAMS[$i]}")
    timeout -k 5 120 "$lockstep" check "${ROW_INPUT[$i]}" "${args[@]}" --time-budget 60 --cex-dir "$dir" \
      --json "$dir/report.json" --quiet >"$dir/check.txt" 2>&1
    local verdict cex
    verdict=$(grep -m1 -o '"verdict": *"[a-z]*"' "$dir/report.json" 2>/dev/null | sed 's/.*"\([a-z]*\)"$/\1/')
    cex=$(find "$dir" -maxdepth 1 -name '*-1.json' -printf '%f\n' | LC_ALL=C sort | head -1)
    printf '%s\t%s\n' "${verdict:-error}" "$cex" >"$m"
  fi
  model_verdict=$(cut -f1 "$m")
  model_cex=$(cut -f2 "$m")
  [ -n "$model_cex" ] && model_cex=$state/model/${ROW_SLUG[$i]}.cex/$model_cex
}
is_bug() { case "$1" in deadlock|hang|mismatch|timeout) return 0 ;; esac; return 1; }

skip_reason() { if [ "$1" = mpi ]; then printf '%s' "$skip_mpi"; else printf '%s' "$skip_nccl"; fi; }
# The longest cell I may take on BACKEND: a replay's own bound (30 + 4 x its watchdog) and 20 s
# for the launch and the teardown; the stream probe's setup limit, its watchdog and teardown.
limit_of() {
  local t=$timeout_mpi
  [ "$2" = nccl ] && t=$timeout_nccl
  if [ "${ROW_TOOL[$1]}" = replay ]; then echo $((30 + 4 * t + 20)); else echo $((60 + t + 30)); fi
}

# --- one cell ----------------------------------------------------------------------------------
now_s() { printf '%s' "${EPOCHREALTIME:-$(date +%s.%N)}"; }
seconds_since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

# Runs row I on BACKEND (mpi or nccl) and writes its cell; its own process group, killed whole.
run_cell() {
  local i=$1 backend=$2 log input start rc line outcome detail s limit
  local -a args envs cmd
  log=$state/logs/${ROW_SLUG[$i]}.$backend.log
  model_of "$i"
  start=$(now_s)
  if [ "${ROW_TOOL[$i]}" = replay ]; then
    if is_bug "$model_verdict"; then
      input=$model_cex
      args=()
      if [ -z "$input" ]; then
        write_cell "$i" "$backend" UNDECIDED 0.0 "the model found $model_verdict but wrote no counterexample"
        return
      fi
    elif [ "$model_verdict" = ok ]; then
      input=${ROW_INPUT[$i]}
      mapfile -t args < <(params_args "${ROW_PARAMS[$i]}")
    else
      write_cell "$i" "$backend" UNDECIDED 0.0 "the model's verdict is $model_verdict: nothing to replay"
      return
    fi
    local t=$timeout_mpi
    envs=(-u CUDA_DEVICE_MAX_CONNECTIONS -u NCCL_LAUNCH_ORDER_IMPLICIT -u LOCKSTEP_REPLAY_COMPACT)
    if [ "$backend" = mpi ]; then
      envs+=(LOCKSTEP_REPLAY_COMPACT=1)
    elif [ -n "$skip_nccl" ]; then
      # No GPU: a dry pass with a worker that does nothing, for what NCCL cannot express
      # (lockstep says so before it launches anything).
      t=1
      envs+=(LOCKSTEP_NCCL_WORKER=/bin/true)
    else
      t=$timeout_nccl
      # shellcheck disable=SC2206
      envs+=(${ROW_ENV[$i]})
    fi
    limit=$(limit_of "$i" "$backend")
    cmd=(env "${envs[@]}" "$lockstep" replay "$input" "${args[@]}" "--$backend" --timeout "$t")
  else
    limit=$(limit_of "$i" "$backend")
    cmd=("$stream_probe" --stream "${ROW_TOOL[$i]#stream:}" --timeout "$timeout_nccl")
  fi
  {
    echo "# ${ROW_ID[$i]} on $backend; model: $model_verdict"
    echo "# ${cmd[*]}"
  } >"$log"
  timeout -k 10 "$limit" "${cmd[@]}" >>"$log" 2>&1 &
  local pid=$!
  wait "$pid"
  rc=$?
  kill -KILL -- -"$pid" 2>/dev/null  # timeout's process group: anything a worker left behind
  s=$(seconds_since "$start")
  echo "# exit $rc after $s s" >>"$log"
  if [ "${ROW_TOOL[$i]}" = replay ]; then
    line=$(grep -m1 -E '^(CONFIRMED|NOT REPRODUCED|UNDECIDED) \(' "$log")
  else
    line=$(grep -m1 -E '^(completed|hung|undecided|SKIP):' "$log")
  fi
  detail=${line:-"exit $rc, no verdict line (see the log)"}
  outcome=UNDECIDED
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    detail="killed at the row's limit of $limit s"
  elif [[ "$line" == *"cannot express: "* ]]; then
    outcome=CANNOT_EXPRESS
    detail=${line#*cannot express: }
  elif [ "$backend" = nccl ] && [ -n "$skip_nccl" ]; then
    outcome=SKIPPED
    detail=$skip_nccl
  elif [ "${ROW_TOOL[$i]}" != replay ]; then
    case "$rc:$model_verdict" in
      77:*) outcome=SKIPPED ;;
      1:deadlock|0:ok) outcome=CONFIRMED ;;
      0:deadlock|1:ok) outcome=NOT_REPRODUCED ;;
    esac
  elif is_bug "$model_verdict"; then
    case "$rc" in 1) outcome=CONFIRMED ;; 0) outcome=NOT_REPRODUCED ;; esac
  else
    # A correct scenario: completing is what the model says; ranks stuck, or failing at an op
    # (not in their setup: no device, NCCL's initialisation), are not.
    if [ "$rc" = 0 ]; then outcome=CONFIRMED
    elif [[ "$line" == *"the model predicted completion"* ]]; then
      if [[ "$line" == *"): hung elsewhere: "* ]] || { [[ "$line" == *" failed: "* ]] && [[ "$line" != *" setup on "* ]]; }; then
        outcome=NOT_REPRODUCED
      fi
    fi
  fi
  write_cell "$i" "$backend" "$outcome" "$s" "$detail"
}

# --- run ---------------------------------------------------------------------------------------
backend_list=()
[ "$want_mpi" = 1 ] && backend_list+=(mpi)
[ "$want_nccl" = 1 ] && backend_list+=(nccl)
has_cell() {  # ROW BACKEND: whether the row has a cell on that backend at all
  [ "$2" = mpi ] && [ "${ROW_TOOL[$1]}" != replay ] && return 1
  return 0
}

started_at=$SECONDS
echo "fidelity table: ${#selected[@]} rows, backends $backends, $jobs at once, watchdog mpi ${timeout_mpi} s, nccl ${timeout_nccl} s, state $state"
[ "$want_nccl" = 1 ] && [ -n "$skip_nccl" ] && echo "fidelity table: NCCL cells SKIPPED: $skip_nccl"
[ "$want_mpi" = 1 ] && [ -n "$skip_mpi" ] && echo "fidelity table: MPI cells SKIPPED: $skip_mpi"

# The model's verdict of every row first, one at a time (cheap next to a replay).
for i in "${selected[@]}"; do model_of "$i"; done
# Without a GPU the NCCL replays still say what they cannot express (a dry pass, at once).
dry() { [ "$2" = nccl ] && [ -n "$skip_nccl" ] && [ "${ROW_TOOL[$1]}" = replay ]; }
todo=() kept=0
for i in "${selected[@]}"; do
  for b in "${backend_list[@]}"; do
    has_cell "$i" "$b" || continue
    if decided "$i" "$b"; then kept=$((kept + 1))
    elif dry "$i" "$b"; then run_cell "$i" "$b"
    elif [ -z "$(skip_reason "$b")" ]; then todo+=("$i:$b"); fi
  done
done
[ "$kept" -gt 0 ] && echo "fidelity table: $kept cells decided in an earlier run, kept (--fresh or --redo REGEX to run them again)"

declare -A running=()
done_count=0 not_run=0
finish_one() {
  local pid cell i b
  wait -n -p pid "${!running[@]}" 2>/dev/null
  cell=${running[$pid]:-}
  [ -z "$cell" ] && return
  unset "running[$pid]"
  i=${cell%%:*} b=${cell#*:}
  done_count=$((done_count + 1))
  printf '[%2d/%d] %-44s %-4s %-14s %6s s   (total %d s%s)\n' "$done_count" "${#todo[@]}" "${ROW_ID[$i]}" "$b" \
    "$(cell_field "$i" "$b" 1 | tr _ ' ')" "$(cell_field "$i" "$b" 2)" $((SECONDS - started_at)) \
    "${deadline:+, deadline in $((deadline - $(date +%s))) s}"
}
for cell in "${todo[@]}"; do
  i=${cell%%:*} b=${cell#*:}
  while [ ${#running[@]} -ge "$jobs" ]; do finish_one; done
  if [ -n "$deadline" ] && [ $(($(date +%s) + $(limit_of "$i" "$b"))) -gt "$deadline" ]; then
    not_run=$((not_run + 1))
    continue
  fi
  rm -f "$(cell_file "$i" "$b")"
  run_cell "$i" "$b" &
  running[$!]=$cell
done
while [ ${#running[@]} -gt 0 ]; do finish_one; done
[ "$not_run" -gt 0 ] && echo "fidelity table: $not_run cells not run: the deadline was too near for their time limit; run the same command again to finish them"

# --- the table ---------------------------------------------------------------------------------
shown() {  # ROW BACKEND -> outcome text, seconds
  local o s
  if ! has_cell "$1" "$2"; then printf 'n/a\t-'; return; fi
  if ! printf '%s\n' "${backend_list[@]}" | grep -qx "$2"; then printf -- '-\t-'; return; fi
  o=$(cell_field "$1" "$2" 1) s=$(cell_field "$1" "$2" 2)
  if [ -n "$(skip_reason "$2")" ] && [ "$o" != CANNOT_EXPRESS ]; then printf 'SKIPPED\t-'; return; fi
  [ -z "$o" ] && { printf 'not run\t-'; return; }
  printf '%s\t%s' "${o//_/ }" "$s"
}
exit_code=0 undecided=0 disagree=0 ran=0
md=$state/table.md
# What the table was measured with: the GPU, the NCCL library the worker loads, the sources.
gpu_name=$( [ -z "$gpu_reason" ] && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
nccl_lib=$( [ -x "$bin/lockstep-nccl-replay" ] && ldd "$bin/lockstep-nccl-replay" 2>/dev/null | awk '/libnccl/ { print $3 }' | head -1)
nccl_lib=$( [ -f "$nccl_lib" ] && grep -a -o -m1 'NCCL version [0-9][0-9.]*[+a-z0-9.]*' "$nccl_lib" | sed 's/^NCCL version //')
commit=$(git rev-parse --short HEAD 2>/dev/null)
[ -n "$commit" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit+changes"
mpi_version=$(mpirun --version 2>/dev/null | head -1)
context="$(date -u '+%Y-%m-%d %H:%M UTC'); GPU: ${gpu_name:-none ($gpu_reason)}; NCCL ${nccl_lib:-not built}${skip_nccl:+ (cells SKIPPED: $skip_nccl)}; ${mpi_version:-no mpirun}${skip_mpi:+ (cells SKIPPED: $skip_mpi)}; lockstep ${commit:-(no git)}, sources $stamp; watchdog mpi ${timeout_mpi} s, nccl ${timeout_nccl} s; $jobs rows at once"
echo
echo "$context"
{
  echo "$context"
  echo
  echo "| # | row | kind | model | mpi | s | nccl | s |"
  echo "|---:|---|---|---|---|---:|---|---:|"
} >"$md"
notes=()
printf '\n%3s  %-46s %-5s %-9s %-15s %6s  %-15s %6s\n' "#" row kind model mpi s nccl s
n=0
for i in "${selected[@]}"; do
  n=$((n + 1))
  m=$state/model/${ROW_SLUG[$i]}
  model=$( [ -f "$m" ] && cut -f1 "$m" || echo "-")
  IFS=$'\t' read -r mpi_o mpi_s <<<"$(shown "$i" mpi)"
  IFS=$'\t' read -r nccl_o nccl_s <<<"$(shown "$i" nccl)"
  printf '%3d  %-46s %-5s %-9s %-15s %6s  %-15s %6s\n' "$n" "${ROW_ID[$i]}" "${ROW_KIND[$i]}" "$model" "$mpi_o" "$mpi_s" "$nccl_o" "$nccl_s"
  printf '| %d | %s | %s | %s | %s | %s | %s | %s |\n' "$n" "${ROW_ID[$i]}" "${ROW_KIND[$i]}" "$model" "$mpi_o" "$mpi_s" "$nccl_o" "$nccl_s" >>"$md"
  for b in "${backend_list[@]}"; do
    has_cell "$i" "$b" || continue
    o=$(cell_field "$i" "$b" 1)
    if [ -n "$(skip_reason "$b")" ]; then [ "$o" = CANNOT_EXPRESS ] || continue; fi
    case "$o" in
      "") undecided=$((undecided + 1)) ;;
      UNDECIDED|SKIPPED) undecided=$((undecided + 1)); ran=1 ;;
      NOT_REPRODUCED) ran=1; [ "${ROW_KIND[$i]}" != probe ] && disagree=1 ;;
      *) ran=1 ;;
    esac
    case "$o" in
      UNDECIDED|NOT_REPRODUCED|CANNOT_EXPRESS|SKIPPED)
        d=$(cell_field "$i" "$b" 3)
        case "$d" in
          "CONFIRMED ("*|"NOT REPRODUCED ("*|"UNDECIDED ("*) notes+=("${ROW_ID[$i]} ($b): $d") ;;
          *) notes+=("${ROW_ID[$i]} ($b): ${o//_/ }: $d") ;;
        esac ;;
    esac
  done
done

# What the probes decide, from the NCCL cells (docs/fidelity.md).
readings=()
eager_max="" rendezvous_min="" monotone=1
for i in "${selected[@]}"; do
  [ -n "${ROW_INFORMS[$i]}" ] || continue
  o=$(cell_field "$i" nccl 1)
  case "$o" in
    CONFIRMED) readings+=("${ROW_INFORMS[$i]}: ${ROW_ID[$i]}: ${ROW_YES[$i]}") ;;
    NOT_REPRODUCED) readings+=("${ROW_INFORMS[$i]}: ${ROW_ID[$i]}: ${ROW_NO[$i]}") ;;
    *) readings+=("${ROW_INFORMS[$i]}: ${ROW_ID[$i]}: ${o:-not run}${o:+ (the notes say why)}") ;;
  esac
  if [ "${ROW_INFORMS[$i]}" = "p2p eager_limit" ]; then
    size=${ROW_PARAMS[$i]#size=}
    if [ "$o" = NOT_REPRODUCED ]; then
      [ -n "$rendezvous_min" ] && monotone=0
      eager_max=$size
    elif [ "$o" = CONFIRMED ] && [ -z "$rendezvous_min" ]; then
      rendezvous_min=$size
    fi
  fi
done
if [ -n "$eager_max$rendezvous_min" ]; then
  if [ "$monotone" = 0 ]; then
    readings+=("p2p eager_limit: not monotone in size (a larger send completed after a smaller one hung): see the rows")
  elif [ -z "$rendezvous_min" ]; then
    readings+=("p2p eager_limit: every size probed completes head to head (up to $eager_max): p2p: eager, eager_limit at least $eager_max")
  elif [ -z "$eager_max" ]; then
    readings+=("p2p eager_limit: no size probed completes head to head (from $rendezvous_min): the default p2p: rendezvous stands")
  else
    readings+=("p2p eager_limit: head-to-head sends complete up to $eager_max and hang from $rendezvous_min: p2p: eager with eager_limit at least $eager_max, below $rendezvous_min")
  fi
fi

{
  echo
  if [ ${#notes[@]} -gt 0 ]; then
    echo "Notes (the replay's or probe's own line; logs in $state/logs):"
    for line in "${notes[@]}"; do echo "- $line"; done
    echo
  fi
  if [ "$want_nccl" = 0 ] || [ -n "$skip_nccl" ]; then
    echo "Probes: no NCCL cell ran (${skip_nccl:-not selected}); the settings they decide stay as docs/semantics.md has them."
  else
    echo "Probes (from the NCCL cells):"
    for line in "${readings[@]}"; do echo "- $line"; done
  fi
} | tee -a "$md"

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/device-check"
  cp "$md" "$OUT/fidelity-table.md"
  cp -r "$state/cells" "$state/model" "$state/logs" "$state/stamp" "$OUT/device-check/" 2>/dev/null
  find "$OUT/device-check/model" -name '*.json' -size +256k -delete 2>/dev/null
  echo "fidelity table: written to $OUT/fidelity-table.md (state and logs in $OUT/device-check)"
fi

if [ "$ran" = 0 ] && [ "$undecided" = 0 ]; then
  echo "fidelity table: no cell could run here (mpi: ${skip_mpi:-none selected}; nccl: ${skip_nccl:-none selected})"
  exit 77
fi
[ "$undecided" -gt 0 ] && exit_code=3
[ "$disagree" = 1 ] && exit_code=1
case "$exit_code" in
  0) meaning="every corpus cell as the model says" ;;
  1) meaning="the hardware disagrees with the model: NOT REPRODUCED above" ;;
  *) meaning="cells UNDECIDED or not run: run again to finish them" ;;
esac
echo "fidelity table: done in $((SECONDS - started_at)) s; exit $exit_code ($meaning)"
exit "$exit_code"
