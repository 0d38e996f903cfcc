#!/usr/bin/env bash
# Sends one conversation per API through pi 1.6 and through rpi, against a
# local capture server that plays each provider (Chat Completions, with a
# local server's, DeepSeek's, OpenRouter's and Fireworks' quirks; Anthropic Messages;
# OpenAI Responses; Gemini 2.5 and 3), and prints where the HTTP requests
# they sent differ, request by request: each body field and header whose
# value differs, with pi's value and rpi's. The conversation: set_model,
# set_thinking_level high, a prompt answered with thinking and a `read`
# tool call, then text; a second prompt; a prompt with an image.
# Differences rpi keeps by design (the system prompt's text, some tool
# descriptions) show too: see docs/models.md and docs/pi-compat.md.
#
# Needs go, python3, node and npm (as scripts/pi-compat.sh). Not part of CI:
# it downloads pi 1.6. Run from the repo root:
#   bash scripts/request-compare.sh              # every model
#   bash scripts/request-compare.sh gpt-5.1,google  # those models or providers
# PI_COMPAT_CACHE=DIR keeps the npm installs in DIR between runs;
# REQUEST_COMPARE_KEEP=1 keeps the captured requests (requests-*.json),
# printing the folder instead of removing it.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$repo/go.mod" ] || { echo "run from rpi's repo root" >&2; exit 2; }
. "$repo/scripts/compat-work.sh"   # sets work, pkgdir; cleans up on exit
if [ -n "${REQUEST_COMPARE_KEEP:-}" ]; then trap - EXIT; echo "keeping $work"; fi
. "$repo/scripts/pi16.sh"           # sets pi16
. "$repo/scripts/node22.sh"         # sets nodebin
(cd "$repo" && CGO_ENABLED=0 go build -o "$work/rpi" .)
python3 "$repo/scripts/request-compare.py" "$work" \
  "[\"$nodebin/node\",\"$pi16/dist/bundle/cli.js\"]" \
  "[\"$work/rpi\",\"--compat\",\"pi\"]" "${1:-}"
