#!/usr/bin/env bash
# Records pi 1.6's own RPC output for the scenarios under testdata/pi16/
# (each folder with in.jsonl and model.jsonl gets a new out.jsonl), which
# TestPiTranscripts compares rpi's with. Run from the repo root:
#   bash scripts/pi-transcripts.sh [SCENARIO ...]
# Needs node and npm (pi 1.6 and, when the machine's node is older than
# 22.19, node 22 are installed from npm unless PI_COMPAT_CACHE=DIR already
# holds them). Everything else lives in a mktemp -d folder, removed on exit.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$repo/scripts/pi16.sh"    # sets pkgdir, pi16
. "$repo/scripts/node22.sh"  # sets nodebin
"$nodebin/node" "$repo/scripts/pi-transcripts.mjs" "$pi16/dist/bundle/cli.js" "$repo/testdata/pi16" "$@"
