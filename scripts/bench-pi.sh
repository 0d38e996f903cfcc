#!/usr/bin/env bash
# rpi side by side with pi 1.6 itself, in one run on this machine
# (docs/performance.md). Needs go, node and npm; not part of CI: it
# downloads pi (@earendil-works/pi-coding-agent@1.6.0) and, when the
# machine's node is older than 22.19, node 22. Run from the repo root:
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
export npm_config_cache="$work/npm-cache" npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
mkdir -p "$work/tmp" && export TMPDIR="$work/tmp"

pkgdir=${PI_COMPAT_CACHE:-$work/pkgs}
mkdir -p "$pkgdir"
pkgdir=$(cd "$pkgdir" && pwd)
if [ ! -f "$pkgdir/node_modules/@earendil-works/pi-coding-agent/package.json" ]; then
  echo "installing pi 1.6.0 ..."
  npm install --prefix "$pkgdir" --no-save --ignore-scripts --loglevel=error @earendil-works/pi-coding-agent@1.6.0 >/dev/null
fi
pi16="$pkgdir/node_modules/@earendil-works/pi-coding-agent"

. "$repo/scripts/node22.sh"   # sets nodebin

cd "$repo"
export RPI_BENCH_PI="'$nodebin/node' '$pi16/dist/bundle/cli.js'"
case "${1:-}" in
  "") go test -run '^$' -bench '^BenchmarkGetStatePipelined' -benchtime 3x -count 3 . ;;
  session) go test -run '^$' -bench '^BenchmarkBigSession$' -benchtime 3x -timeout 1h . ;;
  *) echo "usage: bash scripts/bench-pi.sh [session]" >&2; exit 2 ;;
esac
