#!/usr/bin/env bash
# Drives `rpi acp` (docs/acp.md) with the official ACP SDK's ClientSideConnection
# (npm @agentclientprotocol/sdk@0.26.0), as an editor would, through a whole
# session: initialize, session/new, prompts with streamed chunks, tool calls,
# permission requests, the editor's files, bash output, the plan, cancel,
# config options, list, load in a new process, resume, close, delete, bad
# input on a raw pipe, EOF. The steps are in scripts/acp-client.mjs, each
# naming the docs/acp.md clause it checks; each prints PASS, FAIL (with the wire
# lines of that step) or SKIP, then `RESULT: N passed, M failed, K skipped`.
# The exit status is 1 when any step failed. A local fake OpenAI-compatible
# server plays the model, scripted step by step.
#
# Needs go, node 20+ and npm. Not part of CI: it downloads packages. Run from
# the repo root:
#   bash scripts/acp-compat.sh                   # the steps against rpi acp
#   bash scripts/acp-compat.sh --against pi-acp  # the same steps against pi-acp 0.0.34
#                                                # over rpi's pi mode (checks the checks;
#                                                # pi-acp lacks much of docs/acp.md, so many fail)
# ACP_COMPAT_CACHE=DIR keeps the SDK's npm install in DIR between runs;
# PI_COMPAT_CACHE=DIR is where pi-acp is (or gets) installed, as for
# scripts/pi-compat.sh. Everything else, the agent's HOME and
# PI_CODING_AGENT_DIR included, lives in a mktemp -d folder removed on exit.
set -euo pipefail

target=rpi
case "${1:-}" in
  "") ;;
  --against) [ "${2:-}" = pi-acp ] || { echo "usage: bash scripts/acp-compat.sh [--against pi-acp]" >&2; exit 2; }; target=pi-acp ;;
  *) echo "usage: bash scripts/acp-compat.sh [--against pi-acp]" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$repo/go.mod" ] || repo=$PWD
[ -f "$repo/go.mod" ] || { echo "run from rpi's repo root" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

export npm_config_cache="$work/npm-cache" npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
mkdir -p "$work/tmp" && export TMPDIR="$work/tmp"

# ---------------------------------------------------------------- installs
pkgdir=${PI_COMPAT_CACHE:-$work/pkgs}
sdkdir=${ACP_COMPAT_CACHE:-$work/acp}/sdk-0.26.0   # one folder a version: the two scripts share the cache
mkdir -p "$pkgdir" "$sdkdir"
pkgdir=$(cd "$pkgdir" && pwd) sdkdir=$(cd "$sdkdir" && pwd)
sdk="$sdkdir/node_modules/@agentclientprotocol/sdk"
if ! grep -q '"version": "0.26.0"' "$sdk/package.json" 2>/dev/null; then
  echo "installing @agentclientprotocol/sdk 0.26.0 ..."
  npm install --prefix "$sdkdir" --no-save --ignore-scripts --loglevel=error @agentclientprotocol/sdk@0.26.0 >/dev/null
fi
if [ "$target" = pi-acp ] && [ ! -f "$pkgdir/node_modules/pi-acp/package.json" ]; then
  echo "installing pi-acp 0.0.34 ..."
  npm install --prefix "$pkgdir" --save --ignore-scripts --loglevel=error pi-acp@0.0.34 >/dev/null
fi
if ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null; then
  . "$repo/scripts/node22.sh"   # sets nodebin
  export PATH="$nodebin:$PATH"
fi
echo "node $(node --version)"

# ---------------------------------------------------------------- the agent
# Both targets get the same approvals: --confirm write,edit,bash,process
# (approvals's "ask"). rpi in pi mode asks through extension_ui confirm
# dialogs, which pi-acp turns into session/request_permission.
(cd "$repo" && CGO_ENABLED=0 go build -o "$work/rpi" .)
confirm=write,edit,bash,process
if [ "$target" = rpi ]; then
  target_json="[\"$work/rpi\",\"acp\",\"--confirm\",\"$confirm\"]"
  label="rpi acp"
else
  # pi-acp runs PI_ACP_PI_COMMAND (and `pi --version` from PATH): rpi in
  # pi mode. It looks for a newer pi with `npm view`: an npm that knows
  # nothing keeps it offline.
  mkdir -p "$work/bin"
  printf '#!/bin/sh\nRPI_COMPAT=pi exec "%s" --confirm %s "$@"\n' "$work/rpi" "$confirm" > "$work/bin/pi"
  printf '#!/bin/sh\nexit 1\n' > "$work/bin/npm"
  chmod +x "$work/bin/pi" "$work/bin/npm"
  export PATH="$work/bin:$PATH" PI_ACP_PI_COMMAND="$work/bin/pi"
  target_json="[\"$(command -v node)\",\"$pkgdir/node_modules/pi-acp/dist/index.js\"]"
  label="pi-acp $(node -p "require('$pkgdir/node_modules/pi-acp/package.json').version") over $("$work/rpi" --version) in pi mode"
fi

# ---------------------------------------------------------------- run
status=0
ACP_SDK="$sdk" ACP_TARGET="$target_json" ACP_LABEL="$label" ACP_WORK="$work/run" \
  node "$repo/scripts/acp-client.mjs" 2>"$work/stderr.log" | tee "$work/out.txt" || status=1
grep -q '^RESULT' "$work/out.txt" || { status=1; echo "the client died:"; tail -n 30 "$work/stderr.log" | sed 's/^/    /'; }
exit $status
