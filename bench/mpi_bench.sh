#!/usr/bin/env bash
# MPI benchmark: a dfs search of 3,628,800 executions (rank 0's ten wildcard receives against ten
# senders) by `lockstep check --mpi` under mpirun -np 1 and -np 2, and by one plain process;
# then a skewed dfs search of 3,628,806 executions (rank 0 decides six times whether to take
# its ten receives in order; only when it never does are they wildcard receives, 10! orders:
# one of the 7 parts the tree cuts into holds nearly all, which ranks that run dry share by
# taking what it has yet to run); then a sweep of the interleaved pipeline's 303 correct layouts (pp 2..8, chunks 2..4,
# microbatches a multiple of pp up to 64: each point ok, as mpirun takes seconds to wind down a
# job whose exit code is 1) the same three ways; then eight inputs of one folder, each a dpor
# search of 50,625 executions (a checkpoint thread on the training stream, 2 steps), spread over
# the ranks; then one dpor search of 614,656 executions (the same, 3 steps), whose branches
# rank 0's search gives to the ranks that wait for work. Executions (points) per second, and
# -np 2 against -np 1.
#
#   bench/mpi_bench.sh            (LOCKSTEP=path overrides build/release/bin/lockstep)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lockstep=${LOCKSTEP:-$root/build/release/bin/lockstep}
[ -x "$lockstep" ] || { echo "mpi_bench: no $lockstep (build the release preset first)" >&2; exit 2; }
command -v mpirun > /dev/null || { echo "mpi_bench: no mpirun (scripts/setup installs OpenMPI)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1
dir=$(mktemp -d)
# shellcheck source=bench/skewed.sh
. "$root/bench/skewed.sh"
trap 'rm -rf "$dir"' EXIT
cat > "$dir/gather-11.yaml" <<'Y'
scenario: gather-11
world: 11
program:
  - if: "rank == 0"
    then: [{repeat: 10, do: [recv: {from: any, size: 1KiB}]}]
    else: [send: {to: 0, size: 1KiB}]
Y
skewed 11 "$dir/skewed-11.yaml"
mkdir "$dir/inputs"
for i in 1 2 3 4 5 6 7 8; do
  cat > "$dir/inputs/ckpt-$i.yaml" <<Y
scenario: ckpt-$i
world: 4
params: {steps: 2}
groups: {ckpt: [0, 1, 2, 3]}
threads:
  main:
    - repeat: steps
      do:
        - compute: 20ms
        - allreduce: {size: 128MiB}
  ckpt:
    - sleep: 25ms
    - allgather: {group: ckpt, size: 16MiB, stream: ckpt_s, async: ag}
    - allreduce: {group: ckpt, size: 4B, stream: ckpt_s, async: bar}
    - sync: ckpt_s
Y
done
sed 's/steps: 2/steps: 3/' "$dir/inputs/ckpt-1.yaml" > "$dir/ckpt-3.yaml"
cd "$root"
wall() {  # wall seconds of a command whose exit code 0 or 1 is a verdict
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null 2>&1 || [ $? -le 1 ]
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}
search=(check "$dir/gather-11.yaml" --strategy dfs --max-executions 4000000 --quiet)
skewed=(check "$dir/skewed-11.yaml" --strategy dfs --max-executions 4000000 --quiet)
sweep=(sweep scenarios/examples/pipeline-interleaved-sweep.yaml -D pp=2..8 -D chunks=2..4 -D microbatches=1..64
       --where "microbatches > pp && microbatches % pp == 0" --quiet)
inputs=(check "$dir/inputs" --quiet)
dpor=(check "$dir/ckpt-3.yaml" --quiet)
for what in search skewed sweep inputs dpor; do
  case $what in
    search) args=("${search[@]}"); units=3628800; unit=executions ;;
    skewed) args=("${skewed[@]}"); units=3628806; unit=executions ;;
    sweep) args=("${sweep[@]}"); units=303; unit=points ;;
    inputs) args=("${inputs[@]}"); units=405000; unit=executions ;;  # 8 x 50,625
    dpor) args=("${dpor[@]}"); units=614656; unit=executions ;;  # one process's; spread, within 0.5%
  esac
  plain=$(wall "$lockstep" "${args[@]}")
  np1=$(wall mpirun -np 1 "$lockstep" "${args[@]}" --mpi)
  np2=$(wall mpirun -np 2 "$lockstep" "${args[@]}" --mpi)
  printf '%-6s one process %.2f s (%.0f %s/s); mpirun -np 1 %.2f s (%.0f/s); -np 2 %.2f s (%.0f/s): %.2fx -np 1\n' \
    "$what" "$plain" "$(echo "$units / $plain" | bc -l)" "$unit" "$np1" "$(echo "$units / $np1" | bc -l)" \
    "$np2" "$(echo "$units / $np2" | bc -l)" "$(echo "$np1 / $np2" | bc -l)"
done
