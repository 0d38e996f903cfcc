#!/usr/bin/env bash
# rpi beside pi 1.6 on the same mcp.json (the official reference servers
# from npm: server-everything and server-filesystem, their tools exposed
# directly) and the same scripted model: a local fake OpenAI-compatible
# server records every request, and answers the first with calls of MCP
# tools, the second with text. The script prints, for each program, the
# MCP tools declared in the model's first request (each with its
# description and parameters) and the content of each tool result sent
# back in its second, then the differences (none: PASS).
#
# Needs go, python3, node and npm (node 22.19+ is fetched from npm when the
# machine's node is older). Not part of CI: it downloads packages. Run from
# the repo root:
#   bash scripts/mcp-compat.sh
# PI_COMPAT_CACHE=DIR keeps the npm installs in DIR between runs (shared
# with scripts/pi-compat.sh). Everything else lives in a mktemp -d folder,
# removed on exit.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$repo/go.mod" ] || { echo "run from rpi's repo root" >&2; exit 2; }
. "$repo/scripts/compat-work.sh"   # sets work, pkgdir; cleans up on exit
if [ ! -f "$pkgdir/node_modules/@earendil-works/pi-coding-agent/package.json" ] ||
   [ ! -f "$pkgdir/node_modules/@modelcontextprotocol/server-everything/package.json" ] ||
   [ ! -f "$pkgdir/node_modules/@modelcontextprotocol/server-filesystem/package.json" ]; then
  echo "installing pi 1.6.0 and the MCP reference servers ..."
  npm install --prefix "$pkgdir" --save --ignore-scripts --loglevel=error \
    @earendil-works/pi-coding-agent@1.6.0 @modelcontextprotocol/server-everything@2026.8.31 \
    @modelcontextprotocol/server-filesystem@2026.8.31 >/dev/null
fi
. "$repo/scripts/node22.sh"   # sets nodebin
export PATH="$nodebin:$PATH"
(cd "$repo" && CGO_ENABLED=0 go build -o "$work/rpi" .)

# ---------------------------------------------------------------- the model
cat > "$work/fake.py" <<'PY'
import http.server, json, sys, threading
log = open(sys.argv[2], "a")
lock = threading.Lock()
calls = [("everything", "echo", {"message": "hello from the model"}),
         ("everything", "get_sum", {"a": 2, "b": 3}),
         ("everything", "get_structured_content", {"location": "New York"}),
         ("fs", "read_text_file", {"path": sys.argv[3] + "/notes.txt"})]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with lock:
            log.write(json.dumps(body) + "\n"); log.flush()
        first = not any(m.get("role") == "tool" for m in body.get("messages", []))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        def chunk(delta, finish=None):
            c = {"id": "c", "object": "chat.completion.chunk", "model": "fake-model",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            self.wfile.write(("data: " + json.dumps(c) + "\n\n").encode())
        if first:
            names = {t["function"]["name"] for t in body.get("tools", [])}
            for i, (server, tool, args) in enumerate(calls):
                name = "mcp__%s__%s" % (server, tool)
                if name in names:
                    chunk({"tool_calls": [{"index": i, "id": "call_%d" % i, "type": "function",
                                           "function": {"name": name, "arguments": json.dumps(args)}}]})
            chunk({}, "tool_calls")
        else:
            chunk({"content": "done"})
            chunk({}, "stop")
        self.wfile.write(b"data: [DONE]\n\n")
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

# ---------------------------------------------------------------- one run
run() { # name command...: a prompt through the program's rpc mode; its requests in $work/$name.requests
  local name=$1; shift
  local agent="$work/$name-agent" cwd="$work/$name-cwd"
  mkdir -p "$agent" "$cwd"
  echo "remember the milk" > "$cwd/notes.txt"
  cat > "$agent/models.json" <<JSON
{"providers": {"fake": {"baseUrl": "http://127.0.0.1:$port/v1", "api": "openai-completions", "apiKey": "none",
  "models": [{"id": "fake-model", "name": "Fake", "reasoning": false, "input": ["text"], "contextWindow": 100000, "maxTokens": 4096,
              "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}}}
JSON
  cat > "$agent/mcp.json" <<JSON
{"mcpServers": {
  "everything": {"command": "$pkgdir/node_modules/.bin/mcp-server-everything", "args": ["stdio"], "exposure": "direct"},
  "fs": {"command": "$pkgdir/node_modules/.bin/mcp-server-filesystem", "args": ["$cwd"], "exposure": "direct"}}}
JSON
  python3 "$work/fake.py" "$port" "$work/$name.requests" "$cwd" & fake_pid=$!
  sleep 0.5
  # The prompt, then stdin held open until the turn has ended (the end of
  # its input ends either program).
  { printf '%s\n' '{"id":"p","type":"prompt","message":"use the tools"}'
    for _ in $(seq 1 1200); do grep -q '"agent_end"' "$work/$name.out" 2>/dev/null && break; sleep 0.1; done
  } | (cd "$cwd" && HOME="$work/$name-home" PI_CODING_AGENT_DIR="$agent" timeout 150 "$@" --mode rpc \
         --provider fake --model fake-model > "$work/$name.out" 2> "$work/$name.err") || true
  kill "$fake_pid" 2>/dev/null || true; wait "$fake_pid" 2>/dev/null || true; fake_pid=
}
run pi "$nodebin/node" "$pkgdir/node_modules/@earendil-works/pi-coding-agent/dist/cli.js"
run rpi "$work/rpi"

# ---------------------------------------------------------------- compare
summary() { # requests cwd: the MCP tools declared first, then each tool result's content, the cwd written $CWD
  python3 - "$1" "$2" <<'PY'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
cwd = sys.argv[2]
if not reqs:
    print("no request reached the model"); sys.exit()
tools = sorted((t["function"] for t in reqs[0].get("tools", []) if t["function"]["name"].startswith("mcp__")), key=lambda f: f["name"])
print("requests to the model:", len(reqs))
print("tools declared:", " ".join(f["name"] for f in tools))
for f in tools:  # each declaration whole: its description and parameters
    print("  %s: %s" % (f["name"], json.dumps({k: f.get(k) for k in ("description", "parameters")}, sort_keys=True).replace(cwd, "$CWD")))
for r in reqs[1:2]:
    for m in r["messages"]:
        if m.get("role") == "tool":
            print("result of %s: %s" % (m.get("tool_call_id"), json.dumps(m.get("content")).replace(cwd, "$CWD")))
PY
}
summary "$work/pi.requests" "$work/pi-cwd" > "$work/pi.summary"
summary "$work/rpi.requests" "$work/rpi-cwd" > "$work/rpi.summary"
echo "== pi 1.6"; cat "$work/pi.summary"
echo "== rpi"; cat "$work/rpi.summary"
if diff -u "$work/pi.summary" "$work/rpi.summary" > "$work/diff"; then
  echo "PASS: the same tools and the same results"
else
  echo "FAIL: the differences (pi 1.6 -, rpi +)"; cat "$work/diff"
  echo "-- pi's stderr"; tail -20 "$work/pi.err"; echo "-- rpi's stderr"; tail -20 "$work/rpi.err"
  echo "-- rpi's events of retries, errors and tools"
  grep -E '"(auto_retry_start|auto_retry_end|tool_execution_end|agent_end)"|"stopReason":"error"' "$work/rpi.out" | cut -c1-400 || true
  exit 1
fi
