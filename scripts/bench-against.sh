#!/usr/bin/env bash
# Runs one benchmark here and at another commit by turns, so that the
# machine's other work weighs on both alike: is a missed target the code's
# doing or the machine's?
#   bash scripts/bench-against.sh COMMIT BENCHMARK [BENCHTIME] [ROUNDS]
# e.g. bash scripts/bench-against.sh 5c17acf BenchmarkStartupRatio 100x 3
# prints each round's metrics for this checkout ("here") and for COMMIT.
set -euo pipefail
cd "$(dirname "$0")/.."
commit=$1 bench=$2 benchtime=${3:-1x} rounds=${4:-3}
other=$(mktemp -d)
trap 'git worktree remove --force "$other" >/dev/null 2>&1 || rm -rf "$other"' EXIT
git worktree add -q --detach "$other" "$commit"
for round in $(seq "$rounds"); do
  for side in here "$commit"; do
    dir=.
    [ "$side" = here ] || dir=$other
    metrics=$(cd "$dir" && go test -run '^$' -bench "^$bench\$" -benchtime "$benchtime" -count 1 . |
      awk -v b="$bench" '$1 ~ "^"b"(-[0-9]+)?$" { for (i = 3; i < NF; i += 2) printf "%s %s  ", $(i+1), $i }')
    echo "round $round  $side  $metrics"
  done
done
