#!/bin/sh
# ctest gpu_validation.id_exchange_mpi: lockstep-id-exchange-check under mpirun -np 2; every rank
# must receive rank 0's 128-byte blob (the NCCL unique id's exchange, no GPU needed).
# Exit 77 (skipped) without mpirun.
check=$1
if ! command -v mpirun >/dev/null 2>&1; then
  echo "skipped: mpirun not found (scripts/setup installs openmpi-bin libopenmpi-dev)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 ASAN_OPTIONS=detect_leaks=0
out=$(timeout 60 mpirun -np 2 --oversubscribe --bind-to none "$check" 2>&1)
code=$?
echo "$out"
[ $code -eq 0 ] || { echo "FAILED: mpirun exited $code"; exit 1; }
for r in 0 1; do
  echo "$out" | grep -q "^rank $r of 2: id received$" || { echo "FAILED: rank $r did not receive the id"; exit 1; }
done
echo "ok: both ranks received the 128-byte id by MPI_Bcast"
