#!/usr/bin/env bash
# rpi side by side with pi 1.6 itself, in one run on this machine
# (docs/performance.md); prints the raw lines, the medians, then each
# target with its ratio and whether it is met. Needs go, node and npm;
# not part of CI: it downloads pi (@earendil-works/pi-coding-agent@1.6.0)
# and, when the machine's node is older than 22.19, node 22. Run from the
# repo root:
#   bash scripts/bench-pi.sh             # pipelined get_state: rpi, its floor
#                                        # (one plain write per line) and pi
#   bash scripts/bench-pi.sh session     # a generated 256 MiB session opened
#                                        # with --session, then get_messages and
#                                        # export_html, rpi and pi by turns
#                                        # (RPI_BENCH_SESSION_MIB=N: N MiB)
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
export RPI_BENCH_PI="'$nodebin/node' '$pi16/dist/bundle/cli.js'"
case "${1:-}" in
  "")
    go test -run '^$' -bench '^BenchmarkGetStatePipelined' -benchtime 3x -count 3 . | tee "$raw"
    echo
    medians "$raw"
    echo
    targets "$raw" <<'TARGETS'
pipelined get_state, rpi / pi 1.6|BenchmarkGetStatePipelined get_state/s|BenchmarkGetStatePipelinedPi get_state/s|>=|5|x
pipelined get_state, rpi / floor (one plain write a line)|BenchmarkGetStatePipelinedRatio rpi/floor||>=|2|x
TARGETS
    ;;
  session)
    go test -run '^$' -bench '^BenchmarkBigSession$' -benchtime 3x -timeout 1h . | tee "$raw"
    echo
    targets "$raw" <<'TARGETS'
exec -> get_state answered on the session, rpi / pi 1.6|BenchmarkBigSession rpi/pi-open||<=|0.33|x
get_messages, rpi / pi 1.6|BenchmarkBigSession rpi/pi-messages||<=|0.5|x
export_html, rpi / pi 1.6|BenchmarkBigSession rpi/pi-export||<=|0.5|x
resident memory after the open, / the file|BenchmarkBigSession rpi-rss/file||<=|1.5|x
peak resident memory over all three, / the file|BenchmarkBigSession rpi-peak/file||<=|2.5|x
TARGETS
    ;;
  *) echo "usage: bash scripts/bench-pi.sh [session]" >&2; exit 2 ;;
esac
