#!/usr/bin/env bash
# Pipelined get_state side by side: rpi, its floor (one plain write per
# line) and pi 1.6 itself, in one run on this machine (docs/performance.md).
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

node_ok() { command -v node >/dev/null && node -e '
  const [a, b] = process.versions.node.split(".").map(Number);
  process.exit(a > 22 || (a === 22 && b >= 19) ? 0 : 1)'; }
if node_ok; then
  nodebin=$(dirname "$(command -v node)")
else
  case "$(uname -m)" in x86_64|amd64) arch=x64 ;; aarch64|arm64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
  os=$(uname -s | tr '[:upper:]' '[:lower:]')
  if [ ! -x "$pkgdir/node22/package/bin/node" ]; then
    echo "fetching node-$os-$arch@22.23.5 ..."
    mkdir -p "$pkgdir/node22"
    (cd "$pkgdir/node22" && npm pack --silent "node-$os-$arch@22.23.5" >/dev/null && tar xzf node-"$os"-"$arch"-22.23.5.tgz && rm -f ./*.tgz)
  fi
  nodebin="$pkgdir/node22/package/bin"
fi

cd "$repo"
RPI_BENCH_PI="'$nodebin/node' '$pi16/dist/bundle/cli.js'" \
  go test -run '^$' -bench '^BenchmarkGetStatePipelined' -benchtime 3x -count 3 .
