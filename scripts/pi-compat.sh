#!/usr/bin/env bash
# Checks, with pi's own code, that session files cross between rpi and pi:
# rpi writes a session that pi's SessionManager opens, and pi writes one
# that rpi opens. Needs node and npm (not part of CI). Run from the repo:
#   bash scripts/pi-compat.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $fake 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
npm install --silent --no-audit --no-fund @mariozechner/pi-coding-agent@0.58.3 >/dev/null
(cd "$repo" && CGO_ENABLED=0 go build -o "$work/rpi" .)

# A one-answer OpenAI-compatible server for rpi to talk to.
cat > fake.py <<'EOF'
import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers['Content-Length']))
        self.send_response(200); self.send_header('Content-Type', 'text/event-stream'); self.end_headers()
        for chunk in ({"choices": [{"index": 0, "delta": {"content": "Hello from the model"}, "finish_reason": None}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}):
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 18765), H).serve_forever()
EOF
python3 fake.py & fake=$!
sleep 0.5
mkdir -p agent rpi-sessions
echo '{"providers":{"fake":{"baseUrl":"http://127.0.0.1:18765/v1","api":"openai-completions","models":[{"id":"m"}]}}}' > agent/models.json

# 1. rpi writes a session.
(printf '{"id":"b","type":"bash","command":"echo from rpi"}\n'; sleep 0.3
 printf '{"id":"p","type":"prompt","message":"Hi pi"}\n'; sleep 1
 printf '{"id":"n","type":"set_session_name","name":"rpi wrote this"}\n') |
  PI_CODING_AGENT_DIR="$work/agent" ./rpi rpc --session-dir rpi-sessions --cwd "$work" >/dev/null

# 2. pi reads it, and writes one of its own.
cat > check.mjs <<'EOF'
import { SessionManager } from "@mariozechner/pi-coding-agent";
import { readdirSync } from "fs";
const file = "rpi-sessions/" + readdirSync("rpi-sessions").find(f => f.endsWith(".jsonl"));
const sm = SessionManager.open(file, "rpi-sessions");
const ctx = sm.buildSessionContext();
const got = JSON.stringify({ name: sm.getSessionName(), roles: ctx.messages.map(m => m.role) });
const want = JSON.stringify({ name: "rpi wrote this", roles: ["bashExecution", "user", "assistant"] });
if (got !== want) { console.error("pi read rpi's file as " + got + ", want " + want); process.exit(1); }
const w = SessionManager.create(process.cwd(), "pi-sessions");
w.appendModelChange("fake", "m");
w.appendMessage({ role: "user", content: [{ type: "text", text: "written by pi" }], timestamp: Date.now() });
w.appendMessage({ role: "assistant", content: [{ type: "text", text: "pi's answer" }], api: "openai-completions", provider: "fake",
  model: "m", usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } }, stopReason: "stop", timestamp: Date.now() });
w.appendSessionInfo("pi wrote this");
console.log(w.getSessionFile());
EOF
pifile=$(node check.mjs)

# 3. rpi reads pi's file.
out=$(printf '{"id":"m","type":"get_messages"}\n{"id":"s","type":"get_state"}\n' |
  PI_CODING_AGENT_DIR="$work/agent" ./rpi rpc --session "$pifile" --cwd "$work")
grep -q '"text":"written by pi"' <<<"$out" && grep -q '"text":"pi'"'"'s answer"' <<<"$out" && grep -q '"sessionName":"pi wrote this"' <<<"$out" ||
  { echo "rpi read pi's file as: $out"; exit 1; }
echo "ok: pi reads rpi's session files and rpi reads pi's"
