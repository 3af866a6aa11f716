# Sourced by the benchmarks: skewed WORLD FILE writes a scenario whose dfs tree holds its work in
# one part. Rank 0 decides six times whether to take its WORLD-1 receives in order; only when it
# never does are they wildcard receives from the WORLD-1 senders ((WORLD-1)! orders), so the top
# of the tree cuts into 7 parts of which one holds all but six executions.
skewed() {
  local world=$1 file=$2 n=$(($1 - 1))
  local program="[{repeat: $n, do: [recv: {from: any, size: 1KiB}]}]"
  for _ in 1 2 3 4 5 6; do
    program="[{choose: {in_order: [{repeat: $n, as: i, do: [recv: {from: \"i + 1\", size: 1KiB}]}], any_order: $program}}]"
  done
  cat > "$file" <<Y
scenario: skewed-$world
world: $world
program:
  - if: "rank == 0"
    then: $program
    else: [send: {to: 0, size: 1KiB}]
Y
}
