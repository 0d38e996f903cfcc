#!/usr/bin/env bash
# Drives `rpi acp` (docs/acp.md) with the official ACP SDK 2.4's client app
# (npm @agentclientprotocol/sdk@2.4.0, its `/unstable` v1 entrypoint:
# client(), ClientContext, buildSession → ActiveSession) over stdio, through
# what issue 34 added to rpi's ACP: initialize with 2.4's client capabilities,
# authenticate's error, session/new with additionalDirectories, usage in the
# prompt's answer, session/set_title, session/fork, the legacy
# session/set_model, $/cancel_request of a running prompt (sent by the SDK
# itself when the prompt's AbortSignal aborts), and bash in the editor's
# terminal (terminal/create, wait_for_exit, output, kill, release, served by
# this client running the command). Each step prints PASS or FAIL with what
# it saw (and, on FAIL, the wire lines of that step), then
# `RESULT: N passed, M failed`; the exit status is 1 when any step failed.
#
# Every message rpi writes is also checked against the SDK 2.4's own zod
# schemas (the unstable v1 set), strictly: what the SDK's lenient parse would
# drop or replace fails the step. The SDK validates the requests rpi sends
# the client (terminal/*, fs/*) before its handlers run; it does not validate
# responses, so this client does. session/set_model is not in the 2.4 SDK
# (ACP dropped it): it goes as a raw request through the SDK's
# ClientContext.request, and its `{}` is checked here.
#
# A local fake OpenAI-compatible server (python) plays the model: the tag
# [[name]] in the prompt picks its script; [[hold]] streams one chunk and then
# waits until the client creates a release file.
#
# Needs go, python3, node 20+ and npm. Not part of CI: it downloads packages.
# Run from the repo root:
#   bash scripts/acp-v1-compat.sh
# ACP_COMPAT_CACHE=DIR keeps the SDK's npm install in DIR between runs (2.4.0 is
# installed there when missing; use another DIR than scripts/acp-compat.sh's,
# which holds 0.26.0). Everything else, the agent's HOME and
# PI_CODING_AGENT_DIR included, lives in a mktemp -d folder removed on exit.
set -euo pipefail

case "${1:-}" in
  "") ;;
  *) echo "usage: bash scripts/acp-v1-compat.sh" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$repo/go.mod" ] || repo=$PWD
[ -f "$repo/go.mod" ] || { echo "run from rpi's repo root" >&2; exit 2; }
. "$repo/scripts/compat-work.sh"   # sets work, pkgdir; cleans up (the fake model too) on exit

# ---------------------------------------------------------------- installs
sdkdir=${ACP_COMPAT_CACHE:-$work/acp}/sdk-2.4.0   # one folder a version: the two scripts share the cache
mkdir -p "$sdkdir"
sdkdir=$(cd "$sdkdir" && pwd)
sdk="$sdkdir/node_modules/@agentclientprotocol/sdk"
if ! grep -q '"version": "2.4.0"' "$sdk/package.json" 2>/dev/null || [ ! -f "$sdkdir/node_modules/zod/package.json" ]; then
  echo "installing @agentclientprotocol/sdk 2.4.0 ..."
  npm install --prefix "$sdkdir" --no-save --ignore-scripts --loglevel=error @agentclientprotocol/sdk@2.4.0 >/dev/null
fi
if ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null; then
  . "$repo/scripts/node22.sh"   # sets nodebin
  export PATH="$nodebin:$PATH"
fi
echo "node $(node --version), @agentclientprotocol/sdk $(node -p "require('$sdk/package.json').version")"

# ---------------------------------------------------------------- rpi
(cd "$repo" && CGO_ENABLED=0 go build -o "$work/rpi" .)
echo "target: rpi acp ($("$work/rpi" --version))"

# ---------------------------------------------------------------- fake model
cat > "$work/fake.py" <<'EOF'
# A scripted OpenAI chat-completions SSE server. The tag [[name]] in the last
# user message picks the script; the n-th model call of that prompt's turn
# (n = assistant messages after that user message) gets its n-th answer.
# Every request is logged as one JSON line. Each answer ends with a usage
# chunk (1200 prompt tokens, 40 completion tokens) when the request asked
# for it (stream_options.include_usage).
import json, os, re, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
portfile, log, release = sys.argv[1], sys.argv[2], sys.argv[3]
n = [0]
def text_of(c):
    if isinstance(c, str): return c
    if isinstance(c, list): return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return ""
def bash(args): return {"tools": [("bash", args)]}
def echo(results): return {"text": ["The tool said: ", (results[-1] if results else "").split("\n")[0]]}
SCRIPTS = {
    "default": [{"text": ["Hello ", "from the ", "fake model."]}],
    "hold": [{"text": ["Holding ", "on"], "hold": True}],
    "bash": [bash({"command": "printf 'term one\\n'; echo term two >&2"}), echo],
    "timeout": [bash({"command": "sleep 30", "timeout": 1}), echo],
    "ask": [{"tools": [("ask_user", {"question": "What name goes on the release?", "placeholder": "a name"})]}, echo],
}
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        body = b'{"object":"list","data":[{"id":"fake-model","object":"model"}]}'
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try: req = json.loads(raw)
        except Exception: req = {}
        n[0] += 1
        msgs = req.get("messages") or []
        ui = max([i for i, m in enumerate(msgs) if m.get("role") == "user"] or [-1])
        user = text_of(msgs[ui].get("content")) if ui >= 0 else ""
        m = re.search(r"\[\[([a-z]+)\]\]", user)
        tag = m.group(1) if m else "default"
        call = sum(1 for x in msgs[ui + 1:] if x.get("role") == "assistant")
        results = [text_of(x.get("content")) for x in msgs[ui + 1:] if x.get("role") == "tool"]
        system = "\n".join(text_of(x.get("content")) for x in msgs if x.get("role") in ("system", "developer"))
        with open(log, "a") as f:
            f.write(json.dumps({"n": n[0], "tag": tag, "call": call, "model": req.get("model"), "stream_options": req.get("stream_options"),
                                "system": system, "toolResults": results}) + "\n")
        script = SCRIPTS.get(tag, SCRIPTS["default"])
        turn = script[call] if call < len(script) else {"text": ["Done."]}
        if callable(turn): turn = turn(results)
        self.send_response(200); self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache"); self.send_header("Connection", "close"); self.end_headers()
        base = {"id": "chatcmpl-fake%d" % n[0], "object": "chat.completion.chunk", "created": int(time.time()), "model": req.get("model") or "fake-model"}
        def sse(obj):
            self.wfile.write(("data: %s\n\n" % (obj if isinstance(obj, str) else json.dumps(obj))).encode()); self.wfile.flush()
            time.sleep(0.005)
        def chunk(delta, finish=None): sse(dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}]))
        try:
            chunk({"role": "assistant", "content": ""})
            texts = turn.get("text", [])
            for i, p in enumerate(texts):
                chunk({"content": p})
                if turn.get("hold") and i == 0:
                    deadline = time.time() + 30
                    while not os.path.exists(release) and time.time() < deadline: time.sleep(0.05)
            for i, (name, args) in enumerate(turn.get("tools", [])):
                chunk({"tool_calls": [{"index": i, "id": "call_%s_%d_%d" % (tag, call, i), "type": "function", "function": {"name": name, "arguments": ""}}]})
                chunk({"tool_calls": [{"index": i, "function": {"arguments": json.dumps(args)}}]})
            chunk({}, "tool_calls" if turn.get("tools") else "stop")
            if (req.get("stream_options") or {}).get("include_usage"):
                sse(dict(base, choices=[], usage={"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240}))
            sse("[DONE]")
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True
srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
with open(portfile + ".tmp", "w") as f: f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
EOF
python3 "$work/fake.py" "$work/fake.port" "$work/model-requests.jsonl" "$work/release" & fake_pid=$!
for _ in $(seq 100); do [ -s "$work/fake.port" ] && break; sleep 0.05; done
[ -s "$work/fake.port" ] || { echo "the fake model did not start" >&2; exit 1; }
port=$(cat "$work/fake.port")

# An agent dir with two models (models.json) and the default one, a HOME, a
# project and two other directories for additionalDirectories.
mkdir -p "$work/agent" "$work/home" "$work/proj" "$work/lib-a" "$work/lib-b"
cat > "$work/agent/models.json" <<EOF
{"providers":{"fake":{"name":"Fake","baseUrl":"http://127.0.0.1:$port/v1","api":"openai-completions","apiKey":"dummy-key","models":[
 {"id":"fake-model","name":"Fake Model","reasoning":true,"input":["text"],"contextWindow":128000,"maxTokens":4096,"cost":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0}},
 {"id":"fake-plain","name":"Fake Plain","reasoning":false,"input":["text"],"contextWindow":32000,"maxTokens":2048,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0}}]}}}
EOF
echo '{"defaultProvider":"fake","defaultModel":"fake-model"}' > "$work/agent/settings.json"

# ---------------------------------------------------------------- the client
cat > "$work/client.mjs" <<'EOF'
// An ACP editor on the SDK 2.4 client app. See scripts/acp-v1-compat.sh.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import util from "node:util";
import { StringDecoder } from "node:string_decoder";
import { pathToFileURL } from "node:url";

const E = process.env;
const SDK = E.ACP_SDK, WORK = E.ACP_WORK;
const acp = await import(pathToFileURL(path.join(SDK, "dist/v1/unstable/acp.js")).href);
const Z = await import(pathToFileURL(path.join(SDK, "dist/v1/unstable/schema/zod.gen.js")).href);
const PROJ = path.join(WORK, "proj"), LIB_A = path.join(WORK, "lib-a"), LIB_B = path.join(WORK, "lib-b");
const MODEL_LOG = path.join(WORK, "model-requests.jsonl"), RELEASE = path.join(WORK, "release");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const J = (v) => JSON.stringify(v);
const short = (v, n = 300) => { const s = typeof v === "string" ? v : J(v); return s && s.length > n ? s.slice(0, n) + "…" : s; };
function fail(msg) { throw new Error(msg); }
function ok(cond, msg) { if (!cond) fail(msg); }
const canon = (v) => J(v, (k, x) => x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.keys(x).sort().map((key) => [key, x[key]])) : x);
function eq(got, want, what) { if (canon(got) !== canon(want)) fail(`${what}: got ${short(got)}, want ${short(want)}`); }
function withTimeout(p, ms, what) {
  let t; return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms); })]).finally(() => clearTimeout(t));
}
const errText = (e) => e?.code !== undefined ? `error ${e.code}: ${e.message}${e.data !== undefined ? " " + short(e.data, 200) : ""}` : String(e?.message ?? e);
const modelRequests = () => fs.existsSync(MODEL_LOG) ? fs.readFileSync(MODEL_LOG, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)) : [];

// The SDK logs what it drops with console.error: keep it for the step's report.
const sdkLog = [];
let SEQ = 0;
console.error = (...a) => sdkLog.push({ seq: SEQ, text: util.format(...a) });

// ---------------------------------------------------------------- the wire, judged
const log = []; // {seq, dir: "<" from rpi | ">" to rpi | "#", line, msg}
const sent = new Map(); // id → method, of the client's requests
const violations = [];
const waiters = new Set();
const RESPONSE = {
  initialize: Z.zInitializeResponse, authenticate: Z.zAuthenticateResponse, "session/new": Z.zNewSessionResponse,
  "session/fork": Z.zForkSessionResponse, "session/set_title": Z.zSetSessionTitleResponse, "session/close": Z.zCloseSessionResponse,
  "session/set_config_option": Z.zSetSessionConfigOptionResponse, "session/prompt": Z.zPromptResponse,
};
const REQUEST = {
  "session/request_permission": Z.zRequestPermissionRequest, "fs/read_text_file": Z.zReadTextFileRequest, "fs/write_text_file": Z.zWriteTextFileRequest,
  "terminal/create": Z.zCreateTerminalRequest, "terminal/output": Z.zTerminalOutputRequest, "terminal/wait_for_exit": Z.zWaitForTerminalExitRequest,
  "terminal/kill": Z.zKillTerminalRequest, "terminal/release": Z.zReleaseTerminalRequest, "elicitation/create": Z.zCreateElicitationRequest,
};
// lost lists what the SDK's lenient parse dropped from raw: invalid array
// items it skipped, invalid values it replaced (unknown fields are allowed).
function lost(raw, parsed, where) {
  if (Array.isArray(raw)) {
    if (!Array.isArray(parsed)) return [`${where}: not a valid array`];
    if (raw.length !== parsed.length) return [`${where}: ${raw.length - parsed.length} of ${raw.length} items are invalid (the SDK drops them): ${short(raw, 200)}`];
    return raw.flatMap((v, i) => lost(v, parsed[i], `${where}[${i}]`));
  }
  if (raw && typeof raw === "object") {
    if (!parsed || typeof parsed !== "object") return [`${where}: invalid ${short(raw, 120)}`];
    return Object.keys(raw).flatMap((k) => !(k in parsed) ? [] : parsed[k] === undefined && raw[k] != null ? [`${where}.${k}: invalid value ${short(raw[k], 120)} (the SDK drops it)`] : lost(raw[k], parsed[k], `${where}.${k}`));
  }
  return raw === parsed || parsed === undefined ? [] : [`${where}: ${short(raw, 80)} became ${short(parsed, 80)}`];
}
function schemaProblems(schema, value, where) {
  const r = schema.safeParse(value);
  if (!r.success) return [`${where}: ${r.error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")} in ${short(value, 200)}`];
  return lost(value, r.data, where);
}
function judge(m, line) {
  if (!m || typeof m !== "object" || Array.isArray(m)) return [`stdout line is not a JSON-RPC message: ${short(line, 200)}`];
  const out = m.jsonrpc === "2.0" ? [] : [`jsonrpc is ${J(m.jsonrpc)}, not "2.0"`];
  if (typeof m.method === "string" && "id" in m) {
    const schema = REQUEST[m.method];
    if (!schema) return [...out, `the agent called ${m.method}, which is not a client method`];
    return [...out, ...schemaProblems(schema, m.params, m.method)];
  }
  if (typeof m.method === "string") {
    // rpi withdraws a request of its own it stops waiting for (a timed-out
    // terminal's wait_for_exit, a cancelled turn's permission request).
    if (m.method === "$/cancel_request") return [...out, ...schemaProblems(Z.zCancelRequestNotification, m.params, m.method)];
    if (m.method !== "session/update") return [...out, `unknown notification ${m.method}`];
    return [...out, ...schemaProblems(Z.zSessionNotification, m.params, `session/update ${m.params?.update?.sessionUpdate}`)];
  }
  if ("id" in m) {
    const method = sent.get(m.id);
    if (!method) return [...out, `a response to id ${J(m.id)}, which was never sent`];
    if ("error" in m) return Number.isInteger(m.error?.code) && typeof m.error?.message === "string" ? out : [...out, `malformed error object ${short(m.error)}`];
    if (!("result" in m)) return [...out, "a response without result or error"];
    return RESPONSE[method] ? [...out, ...schemaProblems(RESPONSE[method], m.result, `${method} result`)] : out;
  }
  return [...out, `neither request, notification nor response: ${short(m)}`];
}
function record(dir, line) {
  const e = { seq: ++SEQ, t: Date.now(), dir, line };
  if (dir !== "#") { try { e.msg = JSON.parse(line); } catch {} }
  log.push(e);
  if (dir === ">" && e.msg?.method && "id" in e.msg) sent.set(e.msg.id, e.msg.method);
  if (dir === "<") for (const p of judge(e.msg, line)) violations.push({ seq: e.seq, text: p });
  for (const w of [...waiters]) w(e);
}
function waitFor(pred, ms, what, from = 0) {
  const seen = log.find((e) => e.seq > from && pred(e)); if (seen) return Promise.resolve(seen);
  return new Promise((resolve, reject) => {
    const w = (e) => { if (pred(e)) { clearTimeout(t); waiters.delete(w); resolve(e); } };
    const t = setTimeout(() => { waiters.delete(w); reject(new Error(`no ${what} within ${ms} ms`)); }, ms);
    waiters.add(w);
  });
}
const updates = (sid, from = 0, to = Infinity) => log.filter((e) => e.seq > from && e.seq < to && e.dir === "<" && e.msg?.method === "session/update" && e.msg.params?.sessionId === sid).map((e) => ({ seq: e.seq, ...e.msg.params.update }));
const nextUpdate = (sid, k, from, ms = 5000) => waitFor((e) => e.dir === "<" && e.msg?.method === "session/update" && e.msg.params?.sessionId === sid && e.msg.params.update?.sessionUpdate === k, ms, k, from);
const sentReq = (method, from) => log.find((e) => e.seq > from && e.dir === ">" && e.msg?.method === method && "id" in e.msg);
const responseTo = (id) => log.find((e) => e.dir === "<" && e.msg && !("method" in e.msg) && e.msg.id === id);
const rpiRequests = (method, from = 0) => log.filter((e) => e.seq > from && e.dir === "<" && e.msg?.method === method && "id" in e.msg);

// ---------------------------------------------------------------- rpi over stdio
const CHILD_ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_API_KEY$|^ACP_/.test(k)));
Object.assign(CHILD_ENV, { HOME: path.join(WORK, "home"), PI_CODING_AGENT_DIR: path.join(WORK, "agent") });
let stderr = "", exit;
const child = spawn(E.ACP_RPI, ["acp"], { cwd: PROJ, env: CHILD_ENV, stdio: ["pipe", "pipe", "pipe"] });
child.stderr.on("data", (d) => { stderr += d; });
child.stdin.on("error", () => {});
const exited = new Promise((r) => child.on("exit", (code, signal) => { exit = { code, signal }; record("#", `exit code=${code} signal=${signal}`); r(exit); }));
const inDec = new StringDecoder("utf8"), outDec = new StringDecoder("utf8");
let inBuf = "", outBuf = "";
const readable = new ReadableStream({ start: (c) => {
  child.stdout.on("data", (d) => {
    inBuf += inDec.write(d); let i;
    while ((i = inBuf.indexOf("\n")) >= 0) { record("<", inBuf.slice(0, i)); inBuf = inBuf.slice(i + 1); }
    c.enqueue(new Uint8Array(d));
  });
  child.stdout.on("end", () => { if (inBuf) record("<", inBuf); try { c.close(); } catch {} });
} });
const writable = new WritableStream({ write: (chunk) => new Promise((r) => {
  outBuf += outDec.write(chunk); let i;
  while ((i = outBuf.indexOf("\n")) >= 0) { record(">", outBuf.slice(0, i)); outBuf = outBuf.slice(i + 1); }
  if (!child.stdin.writable) return r();
  child.stdin.write(chunk, () => r());
}) });

// ---------------------------------------------------------------- the editor's side: terminals, files, permissions
// A terminal runs its command here, as an editor's would: its own process
// group, stdout and stderr together, the start cut when past outputByteLimit.
const terminals = new Map();
const termOps = []; // {method, terminalId}
let termN = 0;
function terminal(id, method) {
  termOps.push({ method, terminalId: id });
  const t = terminals.get(id);
  if (!t) throw acp.RequestError.invalidParams({ terminalId: id }, "no such terminal");
  return t;
}
function killTerminal(t) { if (!t.exit) { try { process.kill(-t.child.pid, "SIGKILL"); } catch {} } }
const elicitations = []; // the elicitation/create params rpi sent
const app = acp.client({ name: "rpi-acp-v1-compat" })
  .onNotification(acp.methods.client.session.update, () => {})
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    const o = params.options.find((x) => x.kind === "allow_once");
    return o ? { outcome: { outcome: "selected", optionId: o.optionId } } : { outcome: { outcome: "cancelled" } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => ({ content: fs.readFileSync(params.path, "utf8") }))
  .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => { fs.writeFileSync(params.path, params.content); return {}; })
  .onRequest(acp.methods.client.elicitation.create, ({ params }) => {
    elicitations.push(params);
    return { action: "accept", content: { answer: "Ada" } };
  })
  .onRequest(acp.methods.client.terminal.create, ({ params }) => {
    const id = `term-${++termN}`;
    termOps.push({ method: "terminal/create", terminalId: id, params });
    const env = { ...CHILD_ENV, ...Object.fromEntries((params.env ?? []).map((v) => [v.name, v.value])) };
    const c = spawn(params.command, params.args ?? [], { cwd: params.cwd ?? PROJ, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const t = { child: c, out: Buffer.alloc(0), truncated: false, exit: null, limit: params.outputByteLimit ?? Infinity };
    const add = (d) => {
      t.out = Buffer.concat([t.out, d]);
      if (t.out.length > t.limit) { t.out = t.out.subarray(t.out.length - t.limit); t.truncated = true; }
    };
    c.stdout.on("data", add); c.stderr.on("data", add);
    t.exited = new Promise((r) => c.on("close", (code, signal) => { t.exit = { exitCode: code, signal }; r(t.exit); }));
    c.on("error", (e) => { add(Buffer.from(`${e.message}\n`)); t.exit = { exitCode: 127, signal: null }; });
    terminals.set(id, t);
    return { terminalId: id };
  })
  .onRequest(acp.methods.client.terminal.waitForExit, async ({ params }) => {
    const t = terminal(params.terminalId, "terminal/wait_for_exit");
    return await t.exited;
  })
  .onRequest(acp.methods.client.terminal.output, ({ params }) => {
    const t = terminal(params.terminalId, "terminal/output");
    return { output: t.out.toString("utf8"), truncated: t.truncated, exitStatus: t.exit ?? null };
  })
  .onRequest(acp.methods.client.terminal.kill, ({ params }) => { killTerminal(terminal(params.terminalId, "terminal/kill")); return {}; })
  .onRequest(acp.methods.client.terminal.release, ({ params }) => {
    const t = terminal(params.terminalId, "terminal/release");
    killTerminal(t); terminals.delete(params.terminalId); return {};
  });
const conn = app.connect(acp.ndJsonStream(writable, readable));
const ctx = conn.agent; // ClientContext

// ---------------------------------------------------------------- steps
const counts = { PASS: 0, FAIL: 0 };
async function step(name, fn, ms = 30000) {
  const from = SEQ, logFrom = sdkLog.length;
  let outcome = "PASS", detail = "";
  try { detail = (await withTimeout(fn(), ms, "the step")) ?? ""; }
  catch (e) { outcome = "FAIL"; detail = String(e?.message ?? e).replace(/\n/g, "\\n"); }
  await sleep(100); // let the step's last lines arrive before judging them
  const bad = violations.filter((v) => v.seq > from);
  violations.splice(0, violations.length, ...violations.filter((v) => v.seq <= from));
  if (bad.length && outcome === "PASS") { outcome = "FAIL"; detail = `not valid against the SDK 2.4 schema: ${bad[0].text}${bad.length > 1 ? ` (+${bad.length - 1} more)` : ""}`; }
  counts[outcome]++;
  console.log(`${outcome} ${name}${detail ? ": " + detail : ""}`);
  if (outcome === "FAIL") {
    for (const v of bad.slice(0, 5)) console.log(`    schema: ${v.text}`);
    for (const l of sdkLog.slice(logFrom, logFrom + 5)) console.log(`    sdk: ${short(l.text, 300)}`);
    for (const e of log.filter((x) => x.seq > from).slice(-20)) console.log(`    ${e.dir} ${short(e.line, 400)}`);
    if (exit) console.log(`    rpi exited (${J(exit)}); stderr: ${short(stderr.trim(), 400)}`);
  }
}

let sid, sess, fork;
await step("1 initialize (fs, terminal, elicitation.form, session.notices/compaction)", async () => {
  const r = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true, elicitation: { form: {} }, session: { notices: {}, compaction: {} } },
    clientInfo: { name: "acp-v1-compat", title: "SDK 2.4 client", version: "2.4.0" },
  });
  eq(r.protocolVersion, 1, "protocolVersion");
  const sc = r.agentCapabilities?.sessionCapabilities ?? {};
  const want = ["list", "close", "resume", "delete", "additionalDirectories", "fork", "title"];
  const missing = want.filter((k) => !sc[k]);
  ok(!missing.length, `sessionCapabilities lacks ${missing.join(", ")}: ${J(sc)}`);
  eq(r.authMethods, [], "authMethods");
  return `protocol 1, sessionCapabilities ${Object.keys(sc).join("/")}, authMethods []`;
});

await step("2 authenticate → -32602 saying where keys come from", async () => {
  let err;
  try { const r = await ctx.request(acp.methods.agent.authenticate, { methodId: "oauth" }); fail(`answered ${short(r)}, want an error`); }
  catch (e) { err = e; if (e?.code === undefined) throw e; }
  eq(err.code, -32602, "error code");
  for (const w of ["ANTHROPIC_API_KEY", "auth.json", "models.json"]) ok(err.message.includes(w), `the message does not name ${w}: ${err.message}`);
  return `${err.code} "${short(err.message, 140)}"`;
});

await step("3 session/new with additionalDirectories (SessionBuilder → ActiveSession)", async () => {
  const from = SEQ;
  sess = await ctx.buildSession(PROJ).withAdditionalDirectories([LIB_A, LIB_B]).start();
  sid = sess.sessionId;
  ok(typeof sid === "string" && sid, "no sessionId");
  const req = sentReq("session/new", from);
  eq(req?.msg?.params?.additionalDirectories, [LIB_A, LIB_B], "additionalDirectories sent by the SDK");
  const raw = responseTo(req.msg.id)?.msg?.result ?? {};
  const ids = (raw.configOptions ?? []).map((o) => o.id);
  for (const id of ["model", "thought_level", "approvals", "shell"]) ok(ids.includes(id), `configOptions lacks ${id}: ${J(ids)}`);
  ok(raw.modes?.currentModeId && raw.modes.availableModes?.length, `modes: ${short(raw.modes)}`);
  eq(raw.models?.currentModelId, "fake/fake-model", "models.currentModelId (legacy field)");
  eq((raw.models?.availableModels ?? []).map((m) => m.modelId), ["fake/fake-model", "fake/fake-plain"], "models.availableModels");
  eq(sess.modes?.currentModeId, raw.modes.currentModeId, "ActiveSession.modes");
  return `session ${sid}, configOptions ${ids.join("/")}, mode ${raw.modes.currentModeId}, models ${raw.models.availableModels.map((m) => m.modelId).join(", ")}`;
});

await step("4 session/prompt → end_turn with usage", async () => {
  const before = modelRequests().length;
  const r = await sess.prompt("Say hello");
  eq(r.stopReason, "end_turn", "stopReason");
  eq(r.usage, { inputTokens: 1200, outputTokens: 40, totalTokens: 1240 }, "usage (the fake model reported 1200 in, 40 out)");
  const reqs = modelRequests().slice(before);
  eq(reqs.length, 1, "model requests");
  eq(reqs[0].stream_options, { include_usage: true }, "stream_options rpi asked for");
  for (const d of [LIB_A, LIB_B]) ok(reqs[0].system.includes(`- ${d}`), `the system prompt does not name the additional directory ${d}`);
  const text = await (async () => { let s = ""; for (;;) { const m = await sess.nextUpdate(); if (m.kind === "stop") return s; if (m.update.sessionUpdate === "agent_message_chunk" && m.update.content.type === "text") s += m.update.content.text; } })();
  eq(text, "Hello from the fake model.", "the answer read through ActiveSession.nextUpdate");
  return `stopReason ${r.stopReason}, usage ${J(r.usage)}, stream_options ${J(reqs[0].stream_options)}, the system prompt names both additional directories`;
});

await step("5a session/set_title (unstable) → {title}", async () => {
  const from = SEQ;
  const r = await ctx.request(acp.methods.agent.session.setTitle, { sessionId: sid, title: "  Compat title  " });
  eq(r, { title: "Compat title" }, "answer");
  const u = await nextUpdate(sid, "session_info_update", from, 2000);
  eq(u.msg.params.update.title, "Compat title", "session_info_update title");
  return `${J(r)}, then session_info_update`;
});

await step("5b session/fork (unstable) → a new session", async () => {
  const from = SEQ;
  fork = await ctx.request(acp.methods.agent.session.fork, { sessionId: sid, cwd: PROJ, mcpServers: [], additionalDirectories: [LIB_A] });
  ok(typeof fork.sessionId === "string" && fork.sessionId && fork.sessionId !== sid, `sessionId ${J(fork.sessionId)} (source ${sid})`);
  ok((fork.configOptions ?? []).some((o) => o.id === "model"), "no model config option");
  const raw = responseTo(sentReq("session/fork", from).msg.id).msg.result;
  ok(raw.models?.currentModelId, "no legacy models field");
  return `forked ${sid} → ${fork.sessionId}`;
});

await step("5c session/set_model (legacy, raw request through ClientContext.request) → {} and config_option_update", async () => {
  const from = SEQ;
  const r = await ctx.request("session/set_model", { sessionId: sid, modelId: "fake/fake-plain" });
  eq(r, {}, "answer");
  const u = await nextUpdate(sid, "config_option_update", from, 2000);
  const m = u.msg.params.update.configOptions.find((o) => o.id === "model");
  eq(m?.currentValue, "fake/fake-plain", "model in config_option_update");
  return `{} then config_option_update model=${m.currentValue}`;
});

await step("6 $/cancel_request of a running prompt (the SDK's cancellationSignal) → cancelled", async () => {
  const from = SEQ, ac = new AbortController();
  const p = sess.prompt("[[hold]] then stop", { cancellationSignal: ac.signal });
  p.catch(() => {});
  await nextUpdate(sid, "agent_message_chunk", from, 10000);
  const t0 = Date.now();
  ac.abort();
  let r;
  try { r = await withTimeout(p, 5000, "the cancelled prompt"); }
  finally { fs.writeFileSync(RELEASE, ""); }
  const ms = Date.now() - t0;
  const req = sentReq("session/prompt", from);
  const cancel = log.find((e) => e.seq > from && e.dir === ">" && e.msg?.method === "$/cancel_request");
  ok(cancel, "the SDK sent no $/cancel_request");
  eq(cancel.msg.params?.requestId, req.msg.id, "$/cancel_request's requestId");
  ok(!log.some((e) => e.seq > from && e.dir === ">" && e.msg?.method === "session/cancel"), "session/cancel was sent too");
  eq(r.stopReason, "cancelled", "stopReason");
  ok(ms < 1000, `answered after ${ms} ms (want < 1 s)`);
  return `$/cancel_request {requestId: ${J(req.msg.id)}} → stopReason ${r.stopReason} in ${ms} ms`;
});

// oneCall collects the one tool call of a turn: its updates in order.
function oneCall(us) {
  const tc = us.filter((u) => u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update");
  const ids = [...new Set(tc.map((u) => u.toolCallId))];
  eq(ids.length, 1, `tool call ids ${J(ids)}`);
  const last = tc.filter((u) => u.status).at(-1);
  return { tc, last, terminalUpdates: tc.filter((u) => (u.content ?? []).some((c) => c.type === "terminal")) };
}

await step("7a the editor's terminal: shell=editor, bash → terminal/create, wait_for_exit, output, release", async () => {
  const r = await ctx.request(acp.methods.agent.session.setConfigOption, { sessionId: sid, configId: "shell", value: "editor" });
  eq(r.configOptions.find((o) => o.id === "shell")?.currentValue, "editor", "shell after set_config_option");
  const from = SEQ, opsFrom = termOps.length, before = modelRequests().length;
  const pr = await sess.prompt("[[bash]] run it in the editor");
  eq(pr.stopReason, "end_turn", "stopReason");
  const create = rpiRequests("terminal/create", from)[0]?.msg?.params;
  ok(create, "rpi sent no terminal/create");
  eq([create.command, create.args, create.cwd], ["bash", ["-c", "printf 'term one\\n'; echo term two >&2"], PROJ], "terminal/create command, args, cwd");
  const ops = termOps.slice(opsFrom);
  const id = ops[0]?.terminalId;
  eq(ops.map((o) => o.method), ["terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/release"], "the terminal requests, in order");
  ok(ops.every((o) => o.terminalId === id), `terminal ids ${J(ops.map((o) => o.terminalId))}`);
  const c = oneCall(updates(sid, from));
  ok(c.terminalUpdates.length, "no tool_call_update carries the terminal");
  eq(c.terminalUpdates[0].content, [{ type: "terminal", terminalId: id }], "the card's terminal content");
  eq(c.last.status, "completed", "the call's last status");
  const out = J(c.last.rawOutput ?? "");
  ok(out.includes("term one") && out.includes("term two"), `rawOutput lacks the output: ${short(c.last.rawOutput)}`);
  const tool = modelRequests().slice(before).find((q) => q.call === 1)?.toolResults?.[0] ?? "";
  ok(tool.includes("term one\n") && tool.includes("term two"), `the model got ${J(tool)}`);
  return `${id}: ${ops.map((o) => o.method.replace("terminal/", "")).join(" → ")}; card {type: "terminal", terminalId: "${id}"}; completed; the model got ${J(tool)}`;
});

await step("7b the editor's terminal: a bash timeout → terminal/kill, output, release", async () => {
  const from = SEQ, opsFrom = termOps.length, before = modelRequests().length;
  const pr = await sess.prompt("[[timeout]] sleep in the editor");
  eq(pr.stopReason, "end_turn", "stopReason");
  const ops = termOps.slice(opsFrom);
  const methods = ops.map((o) => o.method);
  eq(methods[0], "terminal/create", "the first terminal request");
  const kill = methods.indexOf("terminal/kill"), rel = methods.indexOf("terminal/release");
  ok(kill > 0 && rel > kill, `want terminal/kill before terminal/release: ${J(methods)}`);
  ok(methods.indexOf("terminal/output") > kill, `want terminal/output after the kill: ${J(methods)}`);
  const c = oneCall(updates(sid, from));
  eq(c.last.status, "failed", "the call's last status");
  const tool = modelRequests().slice(before).find((q) => q.call === 1)?.toolResults?.[0] ?? "";
  ok(/timed out after 1 seconds?/.test(tool), `the model got ${J(tool)}`);
  return `${methods.map((m) => m.replace("terminal/", "")).join(" → ")}; failed; the model got ${J(tool)}`;
});

await step("9 elicitation/create: the model's free-text ask_user as a form, answered", async () => {
  const before = modelRequests().length, asked = elicitations.length;
  const pr = await sess.prompt("[[ask]] ask me");
  eq(pr.stopReason, "end_turn", "stopReason");
  const e = elicitations[asked];
  ok(e, "rpi sent no elicitation/create");
  eq([e.sessionId, e.mode, e.message], [sid, "form", "What name goes on the release?"], "elicitation/create sessionId, mode, message");
  ok(typeof e.toolCallId === "string" && e.toolCallId.startsWith("call_ask_"), `toolCallId ${J(e.toolCallId)}`);
  eq(e.requestedSchema?.properties?.answer?.type, "string", "the form's one field");
  const tool = modelRequests().slice(before).find((q) => q.call === 1)?.toolResults?.[0] ?? "";
  ok(tool.includes("Ada"), `the model got ${J(tool)}`);
  return `form for ${e.toolCallId}, accepted "Ada": the model got ${J(tool)}`;
});

await step("8 session/close of both sessions, then EOF → exit 0", async () => {
  for (const s of [sid, fork?.sessionId].filter(Boolean)) eq(await ctx.request(acp.methods.agent.session.close, { sessionId: s }), {}, `session/close ${s}`);
  sess.dispose();
  child.stdin.end();
  const x = await withTimeout(exited, 5000, "rpi's exit");
  eq(x, { code: 0, signal: null }, "exit");
  const left = [...terminals.keys()];
  eq(left, [], "terminals not released");
  return "closed, exit 0, no terminal left unreleased";
});

if (!exit) { child.kill("SIGKILL"); await exited; }
for (const t of terminals.values()) killTerminal(t);
conn.close();
console.log(`RESULT: ${counts.PASS} passed, ${counts.FAIL} failed`);
process.exit(counts.FAIL ? 1 : 0);
EOF

# ---------------------------------------------------------------- run
status=0
ACP_SDK="$sdk" ACP_RPI="$work/rpi" ACP_WORK="$work" \
  node "$work/client.mjs" 2>"$work/stderr.log" | tee "$work/out.txt" || status=1
grep -q '^RESULT' "$work/out.txt" || { status=1; echo "the client died:"; tail -n 30 "$work/stderr.log" | sed 's/^/    /'; }
exit $status
