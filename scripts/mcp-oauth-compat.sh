#!/usr/bin/env bash
# rpi and pi 1.6 sharing one stored MCP sign-in (mcp-auth.json, as
# `pi mcp login` leaves it) whose access token has expired, against a
# local OAuth-protected MCP server whose authorization server rotates
# refresh tokens: a refresh token used twice is refused (invalid_grant)
# and drops the grant, as real servers do. Three rounds, each from an
# expired token: rpi and pi started at the same moment (their locks must
# let one refresh and the other use its tokens), then pi alone, then rpi
# alone (each reading the file the other wrote). PASS when every run
# connected, no refresh token was spent twice, and nothing was refused.
#
# Needs go, python3, node and npm (node 22.19+ is fetched from npm when the
# machine's node is older). Not part of CI: it downloads packages. Run from
# the repo root:
#   bash scripts/mcp-oauth-compat.sh
# PI_COMPAT_CACHE=DIR keeps the npm installs in DIR between runs (shared
# with scripts/pi-compat.sh). Everything else lives in a mktemp -d folder,
# removed on exit.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$repo/go.mod" ] || { echo "run from rpi's repo root" >&2; exit 2; }
. "$repo/scripts/compat-work.sh"   # sets work, pkgdir; cleans up on exit
if [ ! -f "$pkgdir/node_modules/@earendil-works/pi-coding-agent/package.json" ]; then
  echo "installing pi 1.6.0 ..."
  npm install --prefix "$pkgdir" --save --ignore-scripts --loglevel=error \
    @earendil-works/pi-coding-agent@1.6.0 >/dev/null
fi
. "$repo/scripts/node22.sh"   # sets nodebin
export PATH="$nodebin:$PATH"
(cd "$repo" && CGO_ENABLED=0 go build -o "$work/rpi" .)

# ------------------------------------------- the server and its sign-in
cat > "$work/server.py" <<'PY'
import http.server, json, sys, threading, urllib.parse
log = open(sys.argv[2], "a")
lock = threading.Lock()
state = {"n": 1, "access": "at-1", "refresh": "rt-1", "spent": set()}
def note(line):
    log.write(line + "\n"); log.flush()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def answer(self, code, body=None, headers=()):
        self.send_response(code)
        for k, v in headers: self.send_header(k, v)
        data = json.dumps(body).encode() if body is not None else b""
        if body is not None: self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers(); self.wfile.write(data)
    def do_DELETE(self): self.answer(200)
    def do_GET(self): self.answer(405)
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with lock:
            if self.path == "/token":
                form = urllib.parse.parse_qs(body.decode())
                rt = form.get("refresh_token", [""])[0]
                if rt in state["spent"] or rt != state["refresh"]:
                    note("REFUSED refresh with %s (spent before)" % rt)
                    return self.answer(400, {"error": "invalid_grant"})
                state["spent"].add(rt)
                state["n"] += 1
                state["access"], state["refresh"] = "at-%d" % state["n"], "rt-%d" % state["n"]
                note("refresh %s -> %s (client_id %s)" % (rt, state["refresh"], form.get("client_id", ["?"])[0]))
                return self.answer(200, {"access_token": state["access"], "token_type": "Bearer",
                                         "expires_in": 3600, "refresh_token": state["refresh"]})
            if self.headers.get("Authorization") != "Bearer " + state["access"]:
                return self.answer(401, headers=[("WWW-Authenticate", 'Bearer error="invalid_token"')])
            msg = json.loads(body)
            if "id" not in msg: return self.answer(202)
            if msg["method"] == "initialize":
                note("connected with %s" % state["access"])
                result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                          "serverInfo": {"name": "oauth-test", "version": "1"}}
            elif msg["method"] == "tools/list":
                result = {"tools": [{"name": "hello", "description": "Says hello", "inputSchema": {"type": "object"}}]}
            else:
                result = {}
            self.answer(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$work/server.py" "$port" "$work/server.log" & fake_pid=$!
base="http://127.0.0.1:$port"
agent="$work/agent"
mkdir -p "$agent" "$work/cwd"
cat > "$agent/mcp.json" <<JSON
{"mcpServers": {"web": {"url": "$base/mcp", "exposure": "direct"}}}
JSON
cat > "$agent/models.json" <<JSON
{"providers": {"fake": {"baseUrl": "$base/v1", "api": "openai-completions", "apiKey": "none",
  "models": [{"id": "fake-model", "name": "Fake", "reasoning": false, "input": ["text"], "contextWindow": 100000, "maxTokens": 4096}]}}}
JSON
python3 - "$agent/mcp-auth.json" "$base" <<'PY'
import json, sys
path, base = sys.argv[1], sys.argv[2]
meta = {"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
        "response_types_supported": ["code"], "token_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"], "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True}
state = {"serverUrl": base + "/mcp",
         "discovery": {"authorizationServerUrl": base, "authorizationServerMetadata": meta,
                       "resourceMetadata": {"resource": base + "/mcp", "authorization_servers": [base]}},
         "tokens": {"access_token": "at-1", "token_type": "Bearer", "refresh_token": "rt-1"}}
json.dump({"mcp__web|" + base + "/mcp": state}, open(path, "w"), indent=2)
PY
expire() { # the stored access token expires, as if an hour had passed
  python3 - "$agent/mcp-auth.json" <<'PY'
import json, sys
states = json.load(open(sys.argv[1]))
for s in states.values(): s["tokensExpireAt"] = 1000
json.dump(states, open(sys.argv[1], "w"), indent=2)
PY
}

# ------------------------------------------------------------ the runs
start() { # name command...: the program's rpc mode, open for 6 s (its MCP servers connect meanwhile)
  local name=$1; shift
  (sleep 6 | (cd "$work/cwd" && HOME="$work/home" PI_CODING_AGENT_DIR="$agent" timeout 60 "$@" --mode rpc \
     --provider fake --model fake-model > "$work/$name.out" 2> "$work/$name.err") || true) &
}
pi_cmd=("$nodebin/node" "$pkgdir/node_modules/@earendil-works/pi-coding-agent/dist/cli.js")
connected() { grep -c "^connected" "$work/server.log" || true; }

expire
echo "round 1: rpi and pi at once"
start pi "${pi_cmd[@]}"; start rpi "$work/rpi"; wait_both=$(jobs -p | grep -v "^$fake_pid$" || true)
for pid in $wait_both; do wait "$pid" || true; done
[ "$(connected)" -ge 2 ] || { echo "round 1: $(connected) of 2 connected"; }
expire
echo "round 2: pi alone"
start pi "${pi_cmd[@]}"; wait $! || true
expire
echo "round 3: rpi alone"
start rpi "$work/rpi"; wait $! || true

echo "== the server's log"; cat "$work/server.log"
refused=$(grep -c "^REFUSED" "$work/server.log" || true)
if [ "$(connected)" -ge 4 ] && [ "$refused" = 0 ]; then
  echo "PASS: $(connected) connections, $(grep -c '^refresh' "$work/server.log") refreshes, no refresh token spent twice"
else
  echo "FAIL: $(connected) connections (want 4), $refused refusals (want 0)"
  echo "-- pi's stderr"; tail -20 "$work/pi.err"; echo "-- rpi's stderr"; tail -20 "$work/rpi.err"
  exit 1
fi
