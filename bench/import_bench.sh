#!/usr/bin/env bash
# Import benchmark: RANKS x RECORDS recorded operations imported by the Release binary.
#
#   bench/import_bench.sh [RANKS] [RECORDS] [FORMAT...]   (defaults: 1024 10000 flight-recorder nccl-log)
#
# Generates the inputs with bench/gen_import.py (Flight Recorder: one JSON dump per rank; NCCL:
# one log, ranks interleaved), then times `lockstep import FORMAT ... -o OUT.jsonl` once and prints
# format, input bytes, records, wall/user/system seconds, records per second and the output's
# size. Needs /usr/bin/time (Debian: time) and
# build/release/bin/lockstep; LOCKSTEP=path overrides it. KEEP=DIR generates the inputs once into
# DIR/FORMAT-RANKS-RECORDS and reuses them in later runs. The inputs need about 0.45 KB (Flight
# Recorder) or 0.16 KB (NCCL) per record on disk, under $TMPDIR.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
ranks=${1:-1024}
records=${2:-10000}
shift $(( $# > 2 ? 2 : $# ))
formats=("$@")
[ ${#formats[@]} -gt 0 ] || formats=(flight-recorder nccl-log)
lockstep=${LOCKSTEP:-$root/build/release/bin/lockstep}
[ -x "$lockstep" ] || { echo "import_bench: no $lockstep (build the release preset first)" >&2; exit 2; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '%-16s %14s %10s %8s %8s %8s %14s %12s\n' format input_bytes records wall_s user_s sys_s records_per_s output_bytes
for format in "${formats[@]}"; do
  inputs="$dir/$format"
  [ -z "${KEEP:-}" ] || inputs="$KEEP/$format-$ranks-$records"
  [ -d "$inputs" ] || python3 "$root/bench/gen_import.py" "$inputs" "$format" "$ranks" "$records"
  bytes=$(du -sb "$inputs" | cut -f1)
  # Wall, user and system seconds of the import alone (the machine may be shared: user + sys is
  # the CPU it needed).
  /usr/bin/time -f '%e %U %S' -o "$dir/time" "$lockstep" import "$format" "$inputs"/* -o "$dir/out.jsonl" --quiet
  read -r seconds user sys < "$dir/time"
  total=$((ranks * records))
  printf '%-16s %14d %10d %8.2f %8.2f %8.2f %14.0f %12d\n' "$format" "$bytes" "$total" "$seconds" "$user" "$sys" \
    "$(echo "$total / $seconds" | bc -l)" "$(stat -c %s "$dir/out.jsonl")"
  rm -rf "$dir/$format" "$dir/out.jsonl" "$dir/time"  # (KEEP's inputs stay)
done
