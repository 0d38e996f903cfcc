#!/usr/bin/env bash
# Pipelined get_state side by side: rpi, its floor (one plain write per
# line) and pi 1.6 itself, in one run on this machine (docs/performance.md);
# prints the raw lines, the medians, then each target with its ratio and
# whether it is met.
# Needs go, node and npm; not part of CI: it downloads pi
# (@earendil-works/pi-coding-agent@1.6.0) and, when the machine's node is
# older than 22.19, node 22. Run from the repo root:
#   bash scripts/bench-pi.sh
# PI_COMPAT_CACHE=DIR keeps the npm installs in DIR between runs (the same
# cache scripts/pi-compat.sh uses). Everything else lives in a mktemp -d
# folder, removed on exit.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
. "$repo/scripts/pi16.sh"     # sets pkgdir and pi16

. "$repo/scripts/node22.sh"   # sets nodebin

cd "$repo"
. scripts/bench-targets.sh
raw="$work/bench.txt"
RPI_BENCH_PI="'$nodebin/node' '$pi16/dist/bundle/cli.js'" \
  go test -run '^$' -bench '^BenchmarkGetStatePipelined' -benchtime 3x -count 3 . | tee "$raw"
echo
medians "$raw"
echo
targets "$raw" <<'TARGETS'
pipelined get_state, rpi / pi 1.6|BenchmarkGetStatePipelined get_state/s|BenchmarkGetStatePipelinedPi get_state/s|>=|5|x
pipelined get_state, rpi / floor (one plain write a line)|BenchmarkGetStatePipelinedRatio rpi/floor||>=|2|x
TARGETS
