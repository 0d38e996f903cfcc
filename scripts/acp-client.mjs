// An ACP editor in one file: drives an agent (rpi acp, or pi-acp over rpi's
// pi mode) with the official SDK's ClientSideConnection
// (@agentclientprotocol/sdk 0.26.0) through a whole session, step by step,
// and judges each step against docs/acp.md. Run by scripts/acp-compat.sh, which
// sets:
//   ACP_SDK     the SDK's package folder (…/node_modules/@agentclientprotocol/sdk)
//   ACP_TARGET  the agent's argv as JSON, e.g. ["/tmp/x/rpi","acp","--confirm","write,edit,bash,process"]
//   ACP_LABEL   what the target is, for the report
//   ACP_WORK    a scratch folder (agent dir, HOME, project, sessions go there)
// Prints one PASS, FAIL (with the wire lines of that step) or SKIP line a
// step and `RESULT: N passed, M failed, K skipped`; exits 1 on any FAIL.
//
// The model is a local OpenAI Chat Completions server started here: every
// prompt carries a tag such as [[read]], and the server answers the n-th
// model call of that prompt's turn with SCRIPTS[tag][n] (text, thinking,
// tool calls with given arguments), streamed as OpenAI's SSE.
//
// Every message the agent writes is also checked against the SDK's own zod
// schemas (the SDK silently drops invalid array items and values; here they
// fail the step), and the client only does what ACP lets a client do: it
// advertises fs.readTextFile/writeTextFile (served from an in-memory editor
// buffer, so a test can tell the buffer from the disk) and Zed's
// _meta.terminal_output, answers permission requests as each step scripts,
// and sends malformed input only on a raw pipe (the SDK cannot).
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import util from "node:util";
import { StringDecoder } from "node:string_decoder";
import { pathToFileURL } from "node:url";

const SDK = process.env.ACP_SDK;
const TARGET = JSON.parse(process.env.ACP_TARGET);
const LABEL = process.env.ACP_LABEL ?? TARGET.join(" ");
const WORK = process.env.ACP_WORK;
const acp = await import(pathToFileURL(path.join(SDK, "dist/acp.js")).href);
const Z = await import(pathToFileURL(path.join(SDK, "dist/schema/zod.gen.js")).href);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const J = (v) => JSON.stringify(v);
const short = (v, n = 300) => { const s = typeof v === "string" ? v : J(v); return s && s.length > n ? s.slice(0, n) + "…" : s; };
class Skip extends Error {}
function fail(msg) { throw new Error(msg); }
function ok(cond, msg) { if (!cond) fail(msg); }
// canon is JSON with object keys sorted: key order on the wire is not part of the protocol.
const canon = (v) => J(v, (k, x) => x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.keys(x).sort().map((key) => [key, x[key]])) : x);
function eq(got, want, what) { if (canon(got) !== canon(want)) fail(`${what}: got ${short(got)}, want ${short(want)}`); }
function need(value, why) { if (!value) throw new Skip(why); return value; }
function withTimeout(p, ms, what) {
  let t; return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms); })]).finally(() => clearTimeout(t));
}

// The SDK logs what it drops (invalid JSON, invalid notifications) with
// console.error; keep it, and show it with the step it happened in.
const sdkLog = [];
let SEQ = 0; // one counter for every wire line of every agent: orders them all
console.error = (...a) => sdkLog.push({ seq: SEQ, text: util.format(...a) });

// ---------------------------------------------------------------- the scratch world
const AGENT_DIR = path.join(WORK, "agent"), HOME = path.join(WORK, "home");
const PROJ = path.join(WORK, "proj"), MANY = path.join(WORK, "many");
const P = (name) => path.join(PROJ, name);
for (const d of [AGENT_DIR, HOME, PROJ, MANY, path.join(AGENT_DIR, "prompts"), path.join(AGENT_DIR, "skills", "tidy")]) fs.mkdirSync(d, { recursive: true });
const DISK = {
  "hello.txt": "hello from the disk\nsecond line\n",
  "notes.txt": "saved line\n",
  "plain.txt": "alpha\nbeta\ngamma\n",
  "link.txt": "link text on disk\n",
};
for (const [f, text] of Object.entries(DISK)) fs.writeFileSync(P(f), text);
fs.writeFileSync(path.join(AGENT_DIR, "prompts", "greet.md"), "---\ndescription: Greet someone by name\n---\nSay hello to $1 in one sentence.\n");
fs.writeFileSync(path.join(AGENT_DIR, "skills", "tidy", "SKILL.md"), "---\nname: tidy\ndescription: Tidy up the code\n---\nTidy the code without changing what it does.\n");
fs.writeFileSync(path.join(AGENT_DIR, "settings.json"), J({ defaultProvider: "fake", defaultModel: "fake-model", compaction: { keepRecentTokens: 50 } }));

// The editor's buffers: what an editor shows, unsaved edits included. Files
// not open are read from disk; writes stay in the buffer (the editor's
// review decides about the disk), so the disk tells who wrote what.
const editor = new Map([[P("notes.txt"), "unsaved line\nsecond unsaved line\n"], [P("link.txt"), "link text in the buffer\n"]]);
const editorView = (file) => editor.has(file) ? editor.get(file) : fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined;

// ---------------------------------------------------------------- the fake model
const echo = (r) => ({ text: ["The tool said: ", (r.toolResults.at(-1) ?? "").split("\n")[0]] });
const SCRIPTS = {
  default: [{ text: ["Hello ", "from the ", "fake model."] }],
  // 100 ms between deltas: updates lets deltas that arrive within a few tens of ms merge.
  hello: [{ text: ["Hello ", "from the ", "fake model."], delay: 100 }],
  think: [{ think: ["Let me ", "think ", "about it."], text: ["Thought ", "it through."], delay: 100 }],
  read: [{ text: ["Reading it."], tools: [["read", { path: "hello.txt" }]] }, echo],
  readbuf: [{ tools: [["read", { path: "notes.txt" }]] }, echo],
  // edit's {path, oldText, newText}: the shape every rpi takes (pi 1.6's edits[] is newer).
  edit: [{ tools: [["edit", { path: "plain.txt", oldText: "beta", newText: "BETA" }]] }, { text: ["Edited."] }],
  editbuf: [{ tools: [["edit", { path: "notes.txt", oldText: "second unsaved line", newText: "second edited line" }]] }, { text: ["Edited the buffer."] }],
  reject: [{ tools: [["write", { path: "denied.txt", content: "must not exist\n" }]] }, echo],
  create: [{ tools: [["write", { path: "created.txt", content: "brand new\n" }]] }, { text: ["Created."] }],
  always: [{ tools: [["bash", { command: "echo first" }]] }, { tools: [["bash", { command: "echo second" }]] }, { text: ["Ran both."] }],
  term: [{ tools: [["bash", { command: "printf 'out one\\n'; sleep 0.3; printf 'out two\\n'" }]] }, { text: ["Ran it."] }],
  plainbash: [{ tools: [["bash", { command: "printf 'plain one\\nplain two\\n'" }]] }, { text: ["Ran it."] }],
  plan: [
    { tools: [["todo", { op: "init", list: [{ phase: "Build", items: ["Write the code", "Test the code"] }, { phase: "Ship", items: ["Tag a release"] }] }]] },
    { tools: [["todo", { op: "done", task: "Write the code" }]] },
    { tools: [["todo", { op: "drop", task: "Tag a release" }]] },
    { text: ["Planned."] }],
  autowrite: [{ tools: [["write", { path: "auto.txt", content: "written without asking\n" }]] }, { text: ["Wrote."] }],
  context: [{ text: ["Got the context."] }],
  fail: [{ status: 400, error: "fake bad request" }],
  // Cut at the model's whole maxTokens: a genuine max_tokens end (one cut below it is
  // compacted away and run again, as pi 1.6 recovers a truncated answer).
  long: [{ text: ["This answer is cut"], finish: "length", outputTokens: 4096 }],
  medium: [{ text: ["one ", "two ", "three ", "four "], delay: 150 }],
  slow: [{ text: Array.from({ length: 60 }, (_, i) => `slow${i} `), delay: 200 }],
};
const model = { requests: [], port: 0 };
const textOf = (c) => typeof c === "string" ? c : Array.isArray(c) ? c.map((p) => p?.type === "text" ? p.text : "").join("") : "";
const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (d) => { body += d; });
  req.on("end", () => {
    if (req.method === "GET") { res.writeHead(200, { "Content-Type": "application/json" }); res.end(J({ object: "list", data: [{ id: "fake-model", object: "model" }] })); return; }
    let q = {}; try { q = JSON.parse(body); } catch {}
    const msgs = q.messages ?? [];
    let ui = msgs.length - 1; while (ui >= 0 && msgs[ui].role !== "user") ui--;
    const user = msgs[ui] ?? {};
    const tag = /\[\[([a-z]+)\]\]/.exec(textOf(user.content))?.[1] ?? "default";
    const call = msgs.slice(ui + 1).filter((m) => m.role === "assistant").length;
    const r = { n: model.requests.length + 1, tag, call, model: q.model, user: textOf(user.content), userContent: user.content,
      toolResults: msgs.slice(ui + 1).filter((m) => m.role === "tool").map((m) => textOf(m.content)), messages: msgs };
    model.requests.push(r);
    const script = SCRIPTS[tag] ?? SCRIPTS.default;
    let turn = call < script.length ? script[call] : { text: ["Done."] };
    if (typeof turn === "function") turn = turn(r);
    if (turn.status) { res.writeHead(turn.status, { "Content-Type": "application/json" }); res.end(J({ error: { message: turn.error, type: "invalid_request_error" } })); return; }
    streamAnswer(res, r, turn);
  });
});
// streamAnswer writes one answer as OpenAI's chat.completion.chunk SSE
// events: role, reasoning_content deltas, content deltas, tool call deltas
// (id and name first, then the arguments in two pieces), the finish
// reason, a usage chunk, [DONE].
async function streamAnswer(res, r, turn) {
  let closed = false; res.on("close", () => { closed = true; });
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "close" });
  const base = { id: `chatcmpl-fake${r.n}`, object: "chat.completion.chunk", created: 1760000000 + r.n, model: r.model ?? "fake-model" };
  const sse = async (obj) => { if (closed) return; res.write(`data: ${typeof obj === "string" ? obj : J(obj)}\n\n`); await sleep(turn.delay ?? 5); };
  const chunk = (delta, finish = null) => sse({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] });
  await chunk({ role: "assistant", content: "" });
  for (const p of turn.think ?? []) await chunk({ reasoning_content: p });
  for (const p of turn.text ?? []) await chunk({ content: p });
  for (const [i, [name, args]] of (turn.tools ?? []).entries()) {
    await chunk({ tool_calls: [{ index: i, id: `call_${r.tag}_${r.call}_${i}`, type: "function", function: { name, arguments: "" } }] });
    const a = J(args), half = Math.floor(a.length / 2);
    for (const piece of [a.slice(0, half), a.slice(half)]) await chunk({ tool_calls: [{ index: i, function: { arguments: piece } }] });
  }
  await chunk({}, turn.finish ?? (turn.tools ? "tool_calls" : "stop"));
  await sse({ ...base, choices: [], usage: { prompt_tokens: 1000 + 100 * r.call, completion_tokens: turn.outputTokens ?? 10, total_tokens: 1000 + 100 * r.call + (turn.outputTokens ?? 10) } });
  await sse("[DONE]");
  res.end();
}
await new Promise((r) => server.listen(0, "127.0.0.1", r));
model.port = server.address().port;
fs.writeFileSync(path.join(AGENT_DIR, "models.json"), J({ providers: { fake: { name: "Fake", baseUrl: `http://127.0.0.1:${model.port}/v1`, api: "openai-completions", apiKey: "dummy-key", models: [
  { id: "fake-model", name: "Fake Model", reasoning: true, input: ["text", "image"], contextWindow: 128000, maxTokens: 4096, cost: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 } },
  { id: "fake-plain", name: "Fake Plain", reasoning: false, input: ["text"], contextWindow: 32000, maxTokens: 2048, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 } }] } } }));
const modelCallsSince = (n) => model.requests.slice(n);

// 55 sessions of another project, in pi's session format, for session/list's pages.
const MANY_IDS = [];
{
  const dir = path.join(AGENT_DIR, "sessions", `--${MANY.replace(/^\//, "").replace(/[/\\:]/g, "-")}--`);
  fs.mkdirSync(dir, { recursive: true });
  for (let i = 0; i < 55; i++) {
    const id = `0199${String(i).padStart(4, "0")}-0000-7000-8000-${String(i).padStart(12, "0")}`;
    const ts = new Date(Date.UTC(2025, 0, 1, 0, i)).toISOString();
    const line = (o) => J(o) + "\n";
    const text = i === 7 ? `${"a long first line ".repeat(8)}\nand a second line` : `many session ${i}\nsecond line`;
    fs.writeFileSync(path.join(dir, `${ts.replace(/[:.]/g, "-")}_${id}.jsonl`),
      line({ type: "session", version: 3, id, timestamp: ts, cwd: MANY }) +
      line({ type: "message", id: "e0000001", parentId: null, timestamp: ts, message: { role: "user", content: [{ type: "text", text }], timestamp: Date.parse(ts) } }) +
      line({ type: "message", id: "e0000002", parentId: "e0000001", timestamp: ts, message: { role: "assistant", content: [{ type: "text", text: "ok" }], api: "openai-completions", provider: "fake", model: "fake-model",
        usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } }, stopReason: "stop", timestamp: Date.parse(ts) } }));
    fs.utimesSync(path.join(dir, `${ts.replace(/[:.]/g, "-")}_${id}.jsonl`), new Date(ts), new Date(ts)); // mtime = the last entry's time
    MANY_IDS.push(id);
  }
}
function sessionFileOf(id) { // the .jsonl under the agent dir whose header has this id
  const walk = (d) => fs.existsSync(d) ? fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => e.isDirectory() ? walk(path.join(d, e.name)) : e.name.endsWith(".jsonl") ? [path.join(d, e.name)] : []) : [];
  for (const f of walk(path.join(AGENT_DIR, "sessions"))) {
    try { if (JSON.parse(fs.readFileSync(f, "utf8").split("\n")[0]).id === id) return f; } catch {}
  }
  return undefined;
}

// ---------------------------------------------------------------- checking what the agent writes
const violations = []; // {seq, who, text}
const RESPONSE = {
  initialize: Z.zInitializeResponse, "session/new": Z.zNewSessionResponse, "session/load": Z.zLoadSessionResponse,
  "session/resume": Z.zResumeSessionResponse, "session/list": Z.zListSessionsResponse, "session/delete": Z.zDeleteSessionResponse,
  "session/close": Z.zCloseSessionResponse, "session/set_mode": Z.zSetSessionModeResponse,
  "session/set_config_option": Z.zSetSessionConfigOptionResponse, "session/prompt": Z.zPromptResponse,
};
// lost lists what the SDK's lenient parse dropped from raw: invalid array
// items it skipped and invalid values it replaced (unknown fields, which it
// strips, are allowed).
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
// The variant of each session/update, for a precise message when the union rejects one.
const VARIANT = { user_message_chunk: Z.zContentChunk, agent_message_chunk: Z.zContentChunk, agent_thought_chunk: Z.zContentChunk,
  tool_call: Z.zToolCall, tool_call_update: Z.zToolCallUpdate, plan: Z.zPlan, available_commands_update: Z.zAvailableCommandsUpdate,
  current_mode_update: Z.zCurrentModeUpdate, config_option_update: Z.zConfigOptionUpdate, session_info_update: Z.zSessionInfoUpdate, usage_update: Z.zUsageUpdate };
function schemaProblems(schema, value, where) {
  let r = schema.safeParse(value);
  if (!r.success) {
    const v = schema === Z.zSessionNotification && VARIANT[value?.update?.sessionUpdate];
    if (v && !v.safeParse(value.update).success) r = v.safeParse(value.update);
    else if (schema === Z.zSessionNotification && !v) return [`${where}: unknown or unstable sessionUpdate ${J(value?.update?.sessionUpdate)}`];
    return [`${where}: ${r.error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")} in ${short(value, 200)}`];
  }
  return lost(value, r.data, where);
}

// ---------------------------------------------------------------- an agent behind the SDK's ClientSideConnection
const CHILD_ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_API_KEY$|^ACP_/.test(k)));
Object.assign(CHILD_ENV, { HOME, PI_CODING_AGENT_DIR: AGENT_DIR });
const agents = [];
class Agent {
  // caps: {fs, terminalOutput}: what this editor advertises.
  constructor(name, caps) {
    this.name = name; this.caps = caps; this.log = []; this.stderr = ""; this.decisions = []; this.sent = new Map(); this.waiters = new Set();
    agents.push(this);
    this.child = spawn(TARGET[0], TARGET.slice(1), { cwd: PROJ, env: CHILD_ENV, stdio: ["pipe", "pipe", "pipe"] });
    this.child.stderr.on("data", (d) => { this.stderr += d; });
    this.child.stdin.on("error", () => {});
    this.child.on("error", (e) => { this.stderr += `spawn error: ${e.message}\n`; });
    this.exited = new Promise((r) => this.child.on("exit", (code, signal) => { this.exit = { code, signal, t: Date.now() }; this.record("#", `exit code=${code} signal=${signal}`); r(this.exit); }));
    const inDec = new StringDecoder("utf8"), outDec = new StringDecoder("utf8");
    let inBuf = "", outBuf = "";
    const readable = new ReadableStream({ start: (c) => {
      this.child.stdout.on("data", (d) => {
        inBuf += inDec.write(d); let i;
        while ((i = inBuf.indexOf("\n")) >= 0) { this.record("<", inBuf.slice(0, i)); inBuf = inBuf.slice(i + 1); }
        c.enqueue(new Uint8Array(d));
      });
      this.child.stdout.on("end", () => { if (inBuf) this.record("<", inBuf); try { c.close(); } catch {} });
    } });
    const writable = new WritableStream({ write: (chunk) => new Promise((r) => {
      outBuf += outDec.write(chunk); let i;
      while ((i = outBuf.indexOf("\n")) >= 0) { this.record(">", outBuf.slice(0, i)); outBuf = outBuf.slice(i + 1); }
      if (!this.child.stdin.writable) return r();
      this.child.stdin.write(chunk, () => r());
    }) });
    this.conn = new acp.ClientSideConnection(() => this.handler(), acp.ndJsonStream(writable, readable));
  }
  // handler is the editor's side: updates (judged from the wire log), permission answers as scripted, the fs buffer.
  handler() {
    const h = { sessionUpdate: async () => {}, requestPermission: async (p) => this.answerPermission(p) };
    if (this.caps.fs) {
      h.readTextFile = async ({ path: file, line, limit }) => {
        if (!path.isAbsolute(file)) throw acp.RequestError.invalidParams({ path: file }, "path must be absolute");
        const text = editorView(file);
        if (text === undefined) throw acp.RequestError.resourceNotFound(pathToFileURL(file).href);
        const lines = text.split(/(?<=\n)/), from = Math.max((line ?? 1) - 1, 0);
        return { content: lines.slice(from, limit != null ? from + limit : undefined).join("") };
      };
      h.writeTextFile = async ({ path: file, content }) => {
        if (!path.isAbsolute(file)) throw acp.RequestError.invalidParams({ path: file }, "path must be absolute");
        editor.set(file, content); return {};
      };
    }
    return h;
  }
  // answerPermission picks the option whose kind the step scripted (allow_once by default).
  answerPermission(p) {
    const decision = this.decisions.shift() ?? "allow";
    if (decision === "cancel") return { outcome: { outcome: "cancelled" } };
    const kind = { allow: "allow_once", allow_always: "allow_always", reject: "reject_once" }[decision];
    const opt = p.options.find((o) => o.kind === kind) ?? (decision === "allow_always" ? p.options.find((o) => o.kind === "allow_once") : undefined);
    return opt ? { outcome: { outcome: "selected", optionId: opt.optionId } } : { outcome: { outcome: "cancelled" } };
  }
  // record logs one wire line ("<" from the agent, ">" to it) and checks what the agent wrote.
  record(dir, line) {
    const e = { seq: ++SEQ, t: Date.now(), dir, line };
    if (dir !== "#") { try { e.msg = JSON.parse(line); } catch {} }
    this.log.push(e);
    if (dir === ">" && e.msg?.method && "id" in e.msg) this.sent.set(e.msg.id, e.msg.method);
    if (dir === "<") for (const p of this.judge(e)) violations.push({ seq: e.seq, who: this.name, text: p });
    for (const w of [...this.waiters]) w(e);
  }
  judge(e) {
    const m = e.msg;
    if (!m || typeof m !== "object" || Array.isArray(m)) return [`stdout line is not a JSON-RPC message: ${short(e.line, 200)}`];
    const out = m.jsonrpc === "2.0" ? [] : [`jsonrpc is ${J(m.jsonrpc)}, not "2.0"`];
    if (typeof m.method === "string" && "id" in m) {
      const gated = { "fs/read_text_file": this.caps.fs, "fs/write_text_file": this.caps.fs, "session/request_permission": true }[m.method];
      if (!gated) return [...out, `the agent called ${m.method}, which this client did not advertise`];
      const schema = { "fs/read_text_file": Z.zReadTextFileRequest, "fs/write_text_file": Z.zWriteTextFileRequest, "session/request_permission": Z.zRequestPermissionRequest }[m.method];
      return [...out, ...schemaProblems(schema, m.params, m.method)];
    }
    if (typeof m.method === "string") {
      if (m.method !== "session/update") return [...out, `unknown notification ${m.method}`];
      return [...out, ...schemaProblems(Z.zSessionNotification, m.params, `session/update ${m.params?.update?.sessionUpdate}`)];
    }
    if ("id" in m) {
      const method = this.sent.get(m.id);
      if (!method) return [...out, `a response to id ${J(m.id)}, which was never sent`];
      if ("error" in m) return Number.isInteger(m.error?.code) && typeof m.error?.message === "string" ? out : [...out, `malformed error object ${short(m.error)}`];
      if (!("result" in m)) return [...out, `a response without result or error`];
      return RESPONSE[method] ? [...out, ...schemaProblems(RESPONSE[method], m.result, `${method} result`)] : out;
    }
    return [...out, `neither request, notification nor response: ${short(m)}`];
  }
  waitFor(pred, ms, what, from = 0) {
    const seen = this.log.find((e) => e.seq > from && pred(e)); if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const w = (e) => { if (pred(e)) { clearTimeout(t); this.waiters.delete(w); resolve(e); } };
      const t = setTimeout(() => { this.waiters.delete(w); reject(new Error(`no ${what} within ${ms} ms`)); }, ms);
      this.waiters.add(w);
    });
  }
  // nextUpdate waits for the session's next update of a kind after wire line `from`.
  nextUpdate(sid, k, from, ms = 3000) {
    return this.waitFor((e) => e.msg?.method === "session/update" && e.msg.params?.sessionId === sid && e.msg.params.update?.sessionUpdate === k, ms, k, from);
  }
  // busy sends a prompt and, once its first chunk has arrived, resolves to {done}: the call, still running.
  async busy(sid, text) {
    const from = SEQ;
    const done = this.call("session/prompt", { sessionId: sid, prompt: [{ type: "text", text }] });
    await this.nextUpdate(sid, "agent_message_chunk", from, 10000);
    return { done };
  }
  // call sends one request through the SDK; returns {result | error, req, res} with the wire entries.
  async call(method, params, ms = 20000) {
    const fn = { initialize: "initialize", "session/new": "newSession", "session/load": "loadSession", "session/resume": "resumeSession",
      "session/list": "listSessions", "session/delete": "deleteSession", "session/close": "closeSession", "session/set_mode": "setSessionMode",
      "session/set_config_option": "setSessionConfigOption", "session/prompt": "prompt" }[method];
    const from = SEQ, r = {};
    try { r.result = await withTimeout(this.conn[fn](params), ms, method); } catch (e) { r.error = e; }
    r.req = this.log.find((e) => e.seq > from && e.dir === ">" && e.msg?.method === method && J(e.msg.params) === J(params));
    r.res = r.req && this.log.find((e) => e.dir === "<" && e.msg && !("method" in e.msg) && e.msg.id === r.req.msg.id);
    return r;
  }
  async ok(method, params, ms) { // call that must succeed
    const r = await this.call(method, params, ms);
    if (r.error) fail(`${method}: ${errText(r.error)}${this.exit ? ` (agent exited: code ${this.exit.code}; stderr: ${short(this.stderr.trim(), 300)})` : ""}`);
    return r;
  }
  // turn runs one session/prompt and collects the session's updates from its request until SETTLE ms after its answer.
  async turn(sid, prompt, ms = 20000) {
    const blocks = typeof prompt === "string" ? [{ type: "text", text: prompt }] : prompt;
    const calls = model.requests.length;
    const r = await this.call("session/prompt", { sessionId: sid, prompt: blocks }, ms);
    await sleep(SETTLE);
    const from = r.req?.seq ?? Infinity, end = r.res?.seq ?? Infinity;
    r.all = this.updates(sid, from);
    r.us = r.all.filter((u) => u.seq < end);
    r.late = r.all.filter((u) => u.seq > end);
    r.models = modelCallsSince(calls);
    return r;
  }
  updates(sid, from = 0, to = Infinity) {
    return this.log.filter((e) => e.seq > from && e.seq < to && e.dir === "<" && e.msg?.method === "session/update" && e.msg.params?.sessionId === sid)
      .map((e) => ({ seq: e.seq, t: e.t, ...e.msg.params.update }));
  }
  requests(method, from = 0) { return this.log.filter((e) => e.seq > from && e.dir === "<" && e.msg?.method === method && "id" in e.msg); }
  async end(ms = 5000) { // EOF, then kill what has not exited
    this.ending = true; this.child.stdin.end();
    await Promise.race([this.exited, sleep(ms)]);
    if (!this.exit) { this.child.kill("SIGKILL"); await this.exited; }
    return this.exit;
  }
}
const SETTLE = 250;
const errText = (e) => e instanceof Error || e?.code !== undefined ? (e.code !== undefined ? `error ${e.code}: ${e.message}${e.data !== undefined ? " " + short(e.data, 200) : ""}` : e.message) : `no error but ${short(e)}`;
const kind = (k) => (u) => u.sessionUpdate === k;
const chunkText = (us, k = "agent_message_chunk") => us.filter(kind(k)).map((u) => u.content?.type === "text" ? u.content.text : "").join("");
// toolCalls groups a turn's tool updates by id, in order.
function toolCalls(us) {
  const m = new Map();
  for (const u of us) {
    if (u.sessionUpdate !== "tool_call" && u.sessionUpdate !== "tool_call_update") continue;
    if (!m.has(u.toolCallId)) m.set(u.toolCallId, { id: u.toolCallId, events: [] });
    m.get(u.toolCallId).events.push(u);
  }
  for (const c of m.values()) {
    c.calls = c.events.filter(kind("tool_call"));
    c.first = c.events[0];
    c.statuses = c.events.map((u) => u.status).filter(Boolean);
    c.final = c.statuses.at(-1);
    c.last = c.events.at(-1);
    c.content = c.events.filter((u) => u.content != null).map((u) => u.content).at(-1); // content replaces the array
  }
  return [...m.values()];
}
function oneToolCall(us, what) {
  const cs = toolCalls(us);
  eq(cs.length, 1, `tool calls for ${what} (ids ${J(cs.map((c) => c.id))})`);
  const c = cs[0];
  eq(c.first.sessionUpdate, "tool_call", "the first update for the id");
  eq(c.calls.length, 1, "tool_call updates for the id (one, then tool_call_update)");
  return c;
}
const textContent = (content) => (content ?? []).map((c) => c.type === "content" && c.content?.type === "text" ? c.content.text : "").join("");
const rfc3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

// ---------------------------------------------------------------- steps
const counts = { PASS: 0, FAIL: 0, SKIP: 0 };
// step runs one check; clause is the part of docs/acp.md it judges. A message
// the agent wrote during the step that the SDK's schema rejects fails it.
async function step(name, clause, fn, ms = 40000) {
  const from = SEQ, logFrom = sdkLog.length;
  let outcome = "PASS", detail = "";
  try { detail = (await withTimeout(fn(), ms, "the step")) ?? ""; }
  catch (e) { outcome = e instanceof Skip ? "SKIP" : "FAIL"; detail = String(e?.message ?? e).replace(/\n/g, "\\n"); }
  const vs = violations.filter((v) => v.seq > from && v.seq <= SEQ);
  if (outcome === "PASS" && vs.length) { outcome = "FAIL"; detail = `invalid message: ${vs[0].text}`; }
  else if (outcome === "FAIL" && vs.length) detail += ` (also invalid: ${vs[0].text})`;
  counts[outcome]++;
  console.log(`${outcome} ${name} [${clause}]${detail ? " — " + detail : ""}`);
  if (outcome === "FAIL") dump(from, logFrom);
}
function dump(from, logFrom) {
  let lines = agents.flatMap((a) => a.log.filter((e) => e.seq > from).map((e) => ({ seq: e.seq, text: `[${a.name}] ${e.dir} ${e.line}` })))
    .sort((x, y) => x.seq - y.seq).map((x) => x.text).filter((l) => l.length < 600 || !/_chunk"/.test(l));
  if (lines.length > 40) lines = [...lines.slice(0, 16), `… ${lines.length - 40} more lines …`, ...lines.slice(-24)];
  for (const l of lines) console.log("      " + short(l, 500));
  for (const s of sdkLog.slice(logFrom).slice(0, 5)) console.log("      [sdk] " + short(s.text.replace(/\s+/g, " "), 300));
  for (const a of agents) if (a.exit && !a.ending && a.stderr && !a.stderrShown) { a.stderrShown = true; console.log(`      [${a.name} stderr] ` + short(a.stderr.trim().replace(/\n/g, " | "), 600)); }
}

const S = {}; // what steps hand on to later steps
const CLIENT_INFO = { name: "acp-compat", title: "rpi's ACP compatibility check", version: "1.0.0" };
const initParams = (caps) => ({ protocolVersion: 1, clientInfo: CLIENT_INFO, clientCapabilities: {
  fs: { readTextFile: caps.fs, writeTextFile: caps.fs }, terminal: false, ...(caps.terminalOutput ? { _meta: { terminal_output: true } } : {}) } });

console.log(`== ${LABEL} ==`);
const A = new Agent("A", { fs: true, terminalOutput: true });

// wire: rpi writes nothing until the client speaks. initialize: initialize's answer.
await step("initialize", "wire, initialize", async () => {
  await sleep(300);
  eq(A.log.filter((e) => e.dir === "<").map((e) => e.line), [], "stdout before the client spoke");
  const r = await A.ok("initialize", initParams(A.caps));
  S.init = r.result; const res = r.result;
  eq(r.res.msg.id, 0, "id (the SDK's first request is id 0)");
  eq(res.protocolVersion, 1, "protocolVersion");
  eq([res.agentInfo?.name, res.agentInfo?.title, typeof res.agentInfo?.version], ["rpi", "rpi", "string"], "agentInfo name/title/version");
  eq(res.authMethods, [], "authMethods");
  const c = res.agentCapabilities ?? {};
  eq(c.loadSession, true, "loadSession");
  eq(c.promptCapabilities, { image: true, audio: false, embeddedContext: true }, "promptCapabilities");
  eq(c.mcpCapabilities, { http: true, sse: false }, "mcpCapabilities");
  eq(c.sessionCapabilities, { list: {}, close: {}, resume: {}, delete: {}, additionalDirectories: {}, fork: {}, title: {} }, "sessionCapabilities");
  return `${res.agentInfo.name} ${res.agentInfo.version}`;
});
const caps = () => S.init?.agentCapabilities ?? {};

// sessions session/new; model, thinking, commands configOptions (model, thought_level, approvals: every field) and modes mirroring approvals.
await step("session/new: configOptions and modes", "sessions, approvals, model, thinking, commands", async () => {
  const r = await A.ok("session/new", { cwd: PROJ, mcpServers: [] });
  S.sid = r.result.sessionId; S.newRes = r;
  S.fileAtAnswer = sessionFileOf(S.sid); // sessions: written before the answer (judged below)
  ok(typeof S.sid === "string" && S.sid, "no sessionId");
  const opts = r.result.configOptions; ok(Array.isArray(opts), "no configOptions");
  for (const o of opts) for (const f of ["id", "name", "category", "type", "currentValue", "options"]) ok(o[f] !== undefined && o[f] !== null, `configOption ${o.id} lacks ${f}`);
  for (const o of opts) for (const v of o.options) ok(typeof v.value === "string" && typeof v.name === "string" && v.name, `option ${J(v)} of ${o.id} lacks value or name`);
  const byId = Object.fromEntries(opts.map((o) => [o.id, o]));
  eq(opts.map((o) => o.id).sort(), ["approvals", "model", "thought_level"], "configOption ids");
  const m = byId.model;
  eq([m.category, m.type, m.currentValue], ["model", "select", "fake/fake-model"], "model category/type/currentValue");
  eq(m.options.map((o) => [o.value, o.name]).sort(), [["fake/fake-model", "Fake Model"], ["fake/fake-plain", "Fake Plain"]], "model options (value <provider>/<id>, name the model's name)");
  const t = byId.thought_level;
  eq([t.category, t.type], ["thought_level", "select"], "thought_level category/type");
  ok(t.options.some((o) => o.value === t.currentValue) && t.options.some((o) => o.value === "high"), `thought_level ${t.currentValue} among ${J(t.options.map((o) => o.value))}`);
  const a = byId.approvals;
  eq([a.category, a.type, a.currentValue], ["mode", "select", "ask"], "approvals category/type/currentValue (--confirm write,edit,bash,process)");
  eq(a.options.map((o) => o.value).sort(), ["ask", "auto", "edits"], "approvals values");
  const modes = r.result.modes;
  eq(modes?.currentModeId, "ask", "modes.currentModeId");
  eq(modes?.availableModes?.map((x) => x.id).sort(), ["ask", "auto", "edits"], "modes.availableModes ids (the approval values)");
  ok(modes.availableModes.every((x) => typeof x.name === "string" && x.name), "a mode without a name");
  return `session ${S.sid}`;
});

// sessions: session/new writes the session file (its header id = sessionId) before it answers.
await step("session file on disk at the answer", "sessions", async () => {
  need(S.sid, "no session");
  ok(S.fileAtAnswer, `no session file with header id ${S.sid} under ${AGENT_DIR}/sessions when session/new answered`);
  const header = JSON.parse(fs.readFileSync(S.fileAtAnswer, "utf8").split("\n")[0]);
  eq([header.type, header.id, header.cwd], ["session", S.sid, PROJ], "header type/id/cwd");
  return path.relative(AGENT_DIR, S.fileAtAnswer);
});

// sessions: available_commands_update and usage_update come right after the response, none before;
// model, thinking, commands: templates (input hint when they take arguments), skills, /compact and /name, names without the slash.
await step("available_commands_update and usage_update after session/new", "sessions, model, thinking, commands", async () => {
  need(S.sid, "no session");
  const { req, res } = S.newRes;
  const ac = await A.nextUpdate(S.sid, "available_commands_update", req.seq, 3000);
  const uu = await A.nextUpdate(S.sid, "usage_update", req.seq, 3000);
  eq(A.updates(S.sid, req.seq, res.seq).map((u) => u.sessionUpdate), [], "updates before the session/new response");
  ok(ac.seq > res.seq && uu.seq > res.seq, "after the response");
  const cmds = ac.msg.params.update.availableCommands, by = Object.fromEntries(cmds.map((c) => [c.name, c]));
  ok(cmds.every((c) => !c.name.startsWith("/") && typeof c.description === "string"), `names with a slash or no description: ${short(cmds)}`);
  for (const n of ["greet", "skill:tidy", "compact", "name"]) ok(by[n], `no ${n} among ${J(cmds.map((c) => c.name))}`);
  eq(by.greet.description, "Greet someone by name", "greet's description");
  ok(by.greet.input?.hint && by.name.input?.hint && by.compact.input?.hint, `input hints of greet/name/compact: ${short([by.greet.input, by.name.input, by.compact.input])}`);
  const u = uu.msg.params.update;
  ok(Number.isSafeInteger(u.used) && u.used >= 0, `used ${J(u.used)}`); eq(u.size, 128000, "size (fake-model's context window)");
  return cmds.map((c) => c.name).join(" ");
});

// updates: answer text as agent_message_chunk deltas, forwarded as they arrive (never the whole text again); end_turn.
await step("prompt: streamed agent_message_chunk deltas", "prompt turn, updates", async () => {
  need(S.sid, "no session");
  const r = await A.turn(S.sid, "[[hello]] Say hello\nin two lines"); S.first = r;
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "end_turn", "stopReason");
  const cs = r.us.filter(kind("agent_message_chunk"));
  eq(chunkText(r.us), "Hello from the fake model.", "the chunks' text");
  ok(cs.length >= 2, `${cs.length} chunk(s): the answer came whole, not as deltas`);
  ok(cs.every((c) => c.content?.type === "text"), "a chunk that is not text");
  eq(r.models.length, 1, "model calls");
  return `${cs.length} chunks`;
});

// prompt turn: every update a turn causes is written before that turn's response.
await step("every update of a turn before its response", "prompt turn", async () => {
  const r = need(S.first?.res && S.first, "no answered prompt");
  eq(r.late.map((u) => u.sessionUpdate), [], `updates after the response (within ${SETTLE} ms)`);
  return `${r.us.length} updates, then the response`;
});

// updates: thinking deltas → agent_thought_chunk, before the answer's text.
await step("prompt: agent_thought_chunk deltas", "updates", async () => {
  need(S.sid, "no session");
  const r = await A.turn(S.sid, "[[think]] Think first"); S.think = r;
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "end_turn", "stopReason");
  eq(chunkText(r.us, "agent_thought_chunk"), "Let me think about it.", "thought text");
  eq(chunkText(r.us), "Thought it through.", "answer text");
  const th = r.us.filter(kind("agent_thought_chunk")), tx = r.us.filter(kind("agent_message_chunk"));
  ok(th.length >= 2, "the thinking came whole, not as deltas");
  ok(th.at(-1).seq < tx[0].seq, "thought chunks after the text");
  return `${th.length} thought chunks, ${tx.length} text chunks`;
});

// updates: chunks carry messageId: one per message, the same on every chunk of it, a new one for the next message.
await step("messageId on message and thought chunks", "updates", async () => {
  const a = need(S.first?.us, "no prompt").filter(kind("agent_message_chunk"));
  const b = need(S.think?.us, "no thinking prompt").filter((u) => /agent_(message|thought)_chunk/.test(u.sessionUpdate));
  const ids = (cs) => [...new Set(cs.map((c) => c.messageId))];
  ok([...a, ...b].every((c) => typeof c.messageId === "string" && c.messageId), `chunks without messageId: ${short([...a, ...b].filter((c) => !c.messageId).map((c) => c.content?.text))}`);
  eq(ids(a).length, 1, "messageIds in the first answer");
  ok(!ids(b).includes(ids(a)[0]), "the second answer reuses the first's messageId");
  return `${J(ids(a))} then ${J(ids(b))}`;
});

// updates: the first prompt's line becomes the title: session_info_update {title, updatedAt}.
await step("session_info_update from the first prompt", "updates", async () => {
  const r = need(S.first?.all, "no prompt");
  const u = r.find((x) => x.sessionUpdate === "session_info_update" && x.title);
  ok(u, `no session_info_update with a title: ${short(r.map((x) => x.sessionUpdate))}`);
  eq(u.title, "[[hello]] Say hello", "title (the first line of the first prompt)");
  ok(rfc3339.test(u.updatedAt ?? ""), `updatedAt ${J(u.updatedAt)}`);
  return J(u.title);
});

// updates: each turn ends with usage_update {used, size, cost: {amount, currency: "USD"}}.
await step("usage_update at the end of a turn", "updates", async () => {
  const r = need(S.first?.us, "no prompt");
  const u = r.filter(kind("usage_update")).at(-1); ok(u, "no usage_update in the turn");
  ok(Number.isSafeInteger(u.used) && u.used > 0 && u.used <= u.size, `used ${J(u.used)}`);
  eq(u.size, 128000, "size");
  ok(u.cost && typeof u.cost.amount === "number" && u.cost.amount > 0, `cost ${J(u.cost)} (fake-model has prices)`);
  eq(u.cost.currency, "USD", "currency");
  return `used ${u.used} of ${u.size}, $${u.cost.amount}`;
});

// updates: a tool call → one tool_call {toolCallId, title, kind, status: pending, rawInput, locations (absolute)},
// then tool_call_updates in_progress → completed with content and rawOutput; never a second tool_call.
await step("tool call: one tool_call, then tool_call_updates", "updates", async () => {
  need(S.sid, "no session");
  const r = await A.turn(S.sid, "[[read]] Read hello.txt"); S.read = r;
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "end_turn", "stopReason");
  const c = oneToolCall(r.us, "read");
  eq([c.first.kind, c.first.status], ["read", "pending"], "tool_call kind/status");
  eq(c.first.rawInput, { path: "hello.txt" }, "tool_call rawInput");
  eq(c.first.locations, [{ path: P("hello.txt") }], "tool_call locations (absolute)");
  eq(c.statuses.filter((s, i) => s !== c.statuses[i - 1]), ["pending", "in_progress", "completed"], "statuses");
  ok(textContent(c.content).includes("hello from the disk"), `content ${short(c.content)}`);
  ok(c.events.some((u) => u.rawOutput !== undefined), "no rawOutput");
  eq(chunkText(r.us), "Reading it.The tool said: hello from the disk", "the answer around the tool");
  eq(r.late.map((u) => u.sessionUpdate), [], "updates after the response");
  return `${c.id}: ${c.statuses.join(" → ")}`;
});

// editor's files: with fs.readTextFile advertised, read goes through fs/read_text_file: the model sees the unsaved buffer.
await step("fs/read_text_file: read sees the editor's buffer", "editor's files", async () => {
  need(S.sid, "no session");
  const from = SEQ;
  const r = await A.turn(S.sid, "[[readbuf]] Read notes.txt");
  if (r.error) fail(errText(r.error));
  const reads = A.requests("fs/read_text_file", from);
  ok(reads.length, "no fs/read_text_file request");
  eq([reads[0].msg.params.sessionId, reads[0].msg.params.path], [S.sid, P("notes.txt")], "fs/read_text_file sessionId/path");
  eq(r.models[1]?.toolResults?.[0]?.split("\n")[0], "unsaved line", "what the model got from read (the buffer, not the disk)");
  eq(chunkText(r.us), "The tool said: unsaved line", "answer");
  return `${reads.length} fs/read_text_file`;
});

// approvals: a call that needs approval sends its tool_call (pending) first, then session/request_permission
// tied to its id with options allow/allow_always/reject; allow runs it.
await step("permission request tied to the tool call, allowed", "approvals", async () => {
  need(S.sid, "no session");
  const from = SEQ; A.decisions = ["allow"];
  const r = await A.turn(S.sid, "[[edit]] Edit plain.txt"); S.edit = r;
  if (r.error) fail(errText(r.error));
  const perms = A.requests("session/request_permission", from);
  eq(perms.length, 1, "permission requests");
  const p = perms[0].msg.params, c = oneToolCall(r.us, "edit");
  eq(p.sessionId, S.sid, "sessionId");
  eq(p.toolCall.toolCallId, c.id, "toolCall.toolCallId (the tool_call's id)");
  ok(c.first.seq < perms[0].seq, "the tool_call came after the permission request");
  eq([p.toolCall.kind, p.toolCall.status], ["edit", "pending"], "toolCall kind/status");
  ok(p.toolCall.title && p.toolCall.rawInput, "toolCall without title or rawInput");
  eq(p.options.map((o) => [o.optionId, o.kind]), [["allow", "allow_once"], ["allow_always", "allow_always"], ["reject", "reject_once"]], "options");
  ok(p.options.every((o) => typeof o.name === "string" && o.name), "an option without a name");
  eq(c.final, "completed", "final status");
  eq(editorView(P("plain.txt")), "alpha\nBETA\ngamma\n", "plain.txt after the edit");
  return `${c.id} allowed`;
});

// updates: edit/write end with {type: diff, path (absolute), oldText, newText} — whole files; approvals: the pending tool_call carries it too;
// locations: the edit's first changed line.
await step("edit: diff content", "updates, approvals", async () => {
  const r = need(S.edit?.us, "no edit");
  const c = oneToolCall(r, "edit");
  const diff = { type: "diff", path: P("plain.txt"), oldText: "alpha\nbeta\ngamma\n", newText: "alpha\nBETA\ngamma\n" };
  eq(c.content, [diff], "final content");
  eq(c.first.content, [diff], "the pending tool_call's content");
  eq(c.first.locations, [{ path: P("plain.txt"), line: 2 }], "locations (first changed line)");
  return "diff of the whole file";
});

// editor's files: with fs.writeTextFile, edit reads and writes through the editor: the buffer changes, the disk does not.
await step("fs delegation: edit works on the editor's buffer", "editor's files", async () => {
  need(S.sid, "no session");
  const from = SEQ;
  const r = await A.turn(S.sid, "[[editbuf]] Edit notes.txt");
  if (r.error) fail(errText(r.error));
  const writes = A.requests("fs/write_text_file", from), reads = A.requests("fs/read_text_file", from);
  ok(reads.some((e) => e.msg.params.path === P("notes.txt")), "notes.txt not read through fs/read_text_file");
  eq(writes.map((e) => [e.msg.params.sessionId, e.msg.params.path, e.msg.params.content]), [[S.sid, P("notes.txt"), "unsaved line\nsecond edited line\n"]], "fs/write_text_file requests");
  eq(fs.readFileSync(P("notes.txt"), "utf8"), DISK["notes.txt"], "notes.txt on disk");
  const c = oneToolCall(r.us, "edit");
  eq(c.content?.[0]?.oldText, "unsaved line\nsecond unsaved line\n", "diff oldText (the buffer)");
  eq(fs.readFileSync(P("plain.txt"), "utf8"), DISK["plain.txt"], "plain.txt on disk (the earlier edit went to the buffer too)");
  return "buffer edited, disk untouched";
});

// approvals: reject → the call fails with "Denied by user", and the turn goes on (the model gets the denial).
await step("permission rejected: Denied by user, the turn goes on", "approvals", async () => {
  need(S.sid, "no session");
  const from = SEQ; A.decisions = ["reject"];
  const r = await A.turn(S.sid, "[[reject]] Write denied.txt"); S.reject = r;
  if (r.error) fail(errText(r.error));
  eq(A.requests("session/request_permission", from).length, 1, "permission requests");
  const c = oneToolCall(r.us, "write");
  eq(c.final, "failed", "final status");
  ok(textContent(c.content).includes("Denied by user"), `content ${short(c.content)}`);
  eq(r.models.length, 2, "model calls (the turn went on after the denial)");
  ok(r.models[1].toolResults[0]?.includes("Denied by user"), `the model got ${short(r.models[1].toolResults)}`);
  eq(r.result.stopReason, "end_turn", "stopReason");
  ok(!fs.existsSync(P("denied.txt")) && !editor.has(P("denied.txt")), "denied.txt was written");
  return "failed, then the answer";
});

// updates/editor's files: write of a new file: diff oldText null, written through fs/write_text_file.
await step("write: new file, oldText null, through the editor", "updates, editor's files", async () => {
  need(S.sid, "no session");
  const from = SEQ;
  const r = await A.turn(S.sid, "[[create]] Write created.txt");
  if (r.error) fail(errText(r.error));
  const c = oneToolCall(r.us, "write");
  eq(c.final, "completed", "final status");
  eq(c.content, [{ type: "diff", path: P("created.txt"), oldText: null, newText: "brand new\n" }], "content");
  eq(A.requests("fs/write_text_file", from).map((e) => e.msg.params.path), [P("created.txt")], "fs/write_text_file paths");
  eq([editor.get(P("created.txt")), fs.existsSync(P("created.txt"))], ["brand new\n", false], "buffer / on disk");
  return "oldText null";
});

// approvals: allow_always runs the call and stops asking for that tool for the session.
await step("allow_always remembered", "approvals", async () => {
  need(S.sid, "no session");
  const from = SEQ; A.decisions = ["allow_always"];
  const r = await A.turn(S.sid, "[[always]] Run two commands");
  if (r.error) fail(errText(r.error));
  const perms = A.requests("session/request_permission", from);
  ok(perms[0]?.msg.params.options.some((o) => o.kind === "allow_always"), `no allow_always option: ${short(perms[0]?.msg.params.options)}`);
  eq(perms.length, 1, "permission requests for two bash calls after allow_always");
  eq(toolCalls(r.us).map((c) => c.final), ["completed", "completed"], "statuses");
  return "asked once";
});

// updates: with clientCapabilities._meta.terminal_output, bash is Zed's display-only terminal:
// tool_call content [{type: terminal, terminalId: id}] + _meta.terminal_info {terminal_id, cwd},
// output in _meta.terminal_output {terminal_id, data}, the last update _meta.terminal_exit and no content.
await step("bash output by the _meta.terminal_* convention", "updates", async () => {
  need(S.sid, "no session");
  const r = await A.turn(S.sid, "[[term]] Run a command"); S.term = r;
  if (r.error) fail(errText(r.error));
  const c = oneToolCall(r.us, "bash");
  // The title is the command with its control characters and backslashes escaped (a title cannot
  // show one thing and run another): its \n is written \\n.
  eq([c.first.kind, c.first.title], ["execute", "printf 'out one\\\\n'; sleep 0.3; printf 'out two\\\\n'"], "kind/title (the command)");
  eq(c.first.content, [{ type: "terminal", terminalId: c.id }], "tool_call content");
  eq(c.first._meta?.terminal_info, { terminal_id: c.id, cwd: PROJ }, "_meta.terminal_info");
  const outs = c.events.map((u) => u._meta?.terminal_output).filter(Boolean);
  ok(outs.every((o) => o.terminal_id === c.id), "terminal_output for another id");
  ok(outs.map((o) => o.data).join("").includes("out one\nout two\n"), `output ${short(outs.map((o) => o.data).join(""))}`);
  ok(outs.length >= 2, `${outs.length} terminal_output update(s): the output was not streamed`);
  eq(c.last._meta?.terminal_exit, { terminal_id: c.id, exit_code: 0, signal: null }, "the last update's terminal_exit");
  eq([c.last.status, c.last.content], ["completed", undefined], "the last update's status/content");
  return `${outs.length} output updates`;
});

// updates: the todo plan → plan {entries: [{content, status, priority: medium}]}, in full after every change, abandoned left out;
// the todo call is kind think, "Update plan".
await step("plan from the todo tool", "updates", async () => {
  need(S.sid, "no session");
  const r = await A.turn(S.sid, "[[plan]] Plan the work");
  if (r.error) fail(errText(r.error));
  const plans = r.us.filter(kind("plan")).map((u) => u.entries.map((e) => [e.content, e.status, e.priority]));
  const m = "medium";
  eq(plans, [
    [["Write the code", "in_progress", m], ["Test the code", "pending", m], ["Tag a release", "pending", m]],
    [["Write the code", "completed", m], ["Test the code", "in_progress", m], ["Tag a release", "pending", m]],
    [["Write the code", "completed", m], ["Test the code", "in_progress", m]]], "plans");
  const cs = toolCalls(r.us);
  eq(cs.map((c) => [c.first.kind, c.first.title]), Array(3).fill(["think", "Update plan"]), "todo tool calls' kind/title");
  return `${plans.length} plans`;
});

// prompt turn: text as is, an embedded resource as a fenced block headed by its URI, a file:// link read
// (through the editor, editor's files) and inlined like a resource — one user message.
await step("prompt with an embedded resource and a file link", "prompt turn, editor's files", async () => {
  need(S.sid, "no session");
  const pc = caps().promptCapabilities ?? {};
  const uri = pathToFileURL(P("embedded.txt")).href;
  const blocks = [{ type: "text", text: "[[context]] Look at these:" }];
  if (pc.embeddedContext) blocks.push({ type: "resource", resource: { uri, mimeType: "text/plain", text: "embedded resource text\n" } }); // a client sends one only then
  blocks.push({ type: "resource_link", uri: pathToFileURL(P("link.txt")).href, name: "link.txt" });
  const r = await A.turn(S.sid, blocks);
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "end_turn", "stopReason");
  eq(r.models.length, 1, "model calls");
  const text = r.models[0].user;
  ok(text.startsWith("[[context]] Look at these:"), `user text ${short(text)}`);
  ok(text.includes("link text in the buffer") && !text.includes("link text on disk"), `the link's file (from the editor's buffer) not inlined: ${short(text, 600)}`);
  ok(pc.embeddedContext, `the agent does not take embedded resources (${J(pc)})`);
  // "a fenced block headed by its URI": the URI on the line before the fence, or in its info string.
  const ls = text.split("\n"), fence = /^(`{3,}|~{3,})/;
  const fenced = ls.some((l, i) => l.includes(uri) && [i, i + 1].some((j) => fence.test(ls[j] ?? "") && (j === i + 1 || l.startsWith(ls[j].match(fence)[1])) &&
    ls[j + 1] === "embedded resource text" && /^(`{3,}|~{3,})\s*$/.test(ls[j + 2] ?? "")));
  ok(fenced, `no fenced block headed by the resource's URI in ${short(text, 600)}`);
  return "fenced resource, inlined link";
});

// prompt turn: an image block reaches the model as an image, in the same user message as the text.
await step("prompt with an image", "prompt turn", async () => {
  need(S.sid, "no session");
  need(caps().promptCapabilities?.image, "the agent does not advertise promptCapabilities.image");
  const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";
  const r = await A.turn(S.sid, [{ type: "text", text: "[[context]] What is in this image?" }, { type: "image", mimeType: "image/png", data: png }]);
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "end_turn", "stopReason");
  eq(r.models.length, 1, "model calls");
  const m = r.models[0];
  eq(m.user, "[[context]] What is in this image?", "the user message's text");
  ok(Array.isArray(m.userContent) && m.userContent.some((p) => p.type === "image_url" && p.image_url?.url === `data:image/png;base64,${png}`), `no image in the user message: ${short(m.userContent)}`);
  return "image_url in the user message";
});

// prompt turn/model, thinking, commands: a prompt starting with /<template> expands as in rpc mode.
await step("prompt template /greet expands", "prompt turn, model, thinking, commands", async () => {
  need(S.sid, "no session");
  const r = await A.turn(S.sid, "/greet Bob");
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "end_turn", "stopReason");
  eq(r.models.map((m) => m.user), ["Say hello to Bob in one sentence."], "what the model got");
  return "Say hello to Bob in one sentence.";
});

// model, thinking, commands: /name <title> is answered in-band: session_info_update, an agent_message_chunk, end_turn; no model call.
await step("/name answered in-band", "updates, model, thinking, commands", async () => {
  need(S.sid, "no session");
  const r = await A.turn(S.sid, "/name Demo Session");
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "end_turn", "stopReason");
  eq(r.us.find((u) => u.sessionUpdate === "session_info_update" && u.title)?.title, "Demo Session", "session_info_update title");
  ok(chunkText(r.us).length > 0, "no agent_message_chunk");
  eq(r.models.length, 0, "model calls");
  return J(chunkText(r.us));
});

// prompt turn: a turn that ends on a provider error sends the error text as its last agent_message_chunk, then end_turn.
await step("provider error: last agent_message_chunk, end_turn", "prompt turn", async () => {
  need(S.sid, "no session");
  const r = await A.turn(S.sid, "[[fail]] This fails");
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "end_turn", "stopReason");
  const last = r.us.filter(kind("agent_message_chunk")).at(-1);
  ok(last?.content?.text?.includes("fake bad request"), `last agent_message_chunk ${short(last?.content)}`);
  return short(last.content.text, 100);
});

// prompt turn: the last answer stopped on length → stopReason max_tokens.
await step("stopReason max_tokens", "prompt turn", async () => {
  need(S.sid, "no session");
  const r = await A.turn(S.sid, "[[long]] A long answer");
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "max_tokens", "stopReason");
  return "max_tokens";
});

// prompt turn: a prompt while the turn runs is queued as a follow-up and answered when its own turn ends.
await step("a prompt during a turn is queued", "prompt turn", async () => {
  need(S.sid, "no session");
  const calls = model.requests.length;
  const p1 = (await A.busy(S.sid, "[[medium]] first")).done;
  const p2 = A.call("session/prompt", { sessionId: S.sid, prompt: [{ type: "text", text: "[[hello]] second" }] });
  const [r1, r2] = await Promise.all([p1, p2]);
  if (r1.error || r2.error) fail(errText(r1.error ?? r2.error));
  eq([r1.result.stopReason, r2.result.stopReason], ["end_turn", "end_turn"], "stopReasons");
  ok(r1.res.seq < r2.res.seq, "the second prompt answered first");
  ok(/one .*two .*three .*four /s.test(chunkText(A.updates(S.sid, r1.req.seq, r1.res.seq))), "the first turn's text not before its answer");
  ok(chunkText(A.updates(S.sid, r1.res.seq, r2.res.seq)).includes("Hello from the fake model."), "the second turn's text after the first answer");
  eq(modelCallsSince(calls).map((m) => m.user), ["[[medium]] first", "[[hello]] second"], "model calls");
  return "answered in order";
});

// prompt turn: session/cancel → the running prompt answers cancelled within 1 s, queued prompts answer cancelled (and never run).
await step("session/cancel", "prompt turn", async () => {
  need(S.sid, "no session");
  const calls = model.requests.length;
  const p1 = (await A.busy(S.sid, "[[slow]] cancel me")).done;
  const p2 = A.call("session/prompt", { sessionId: S.sid, prompt: [{ type: "text", text: "[[hello]] queued, then cancelled" }] });
  await sleep(200);
  const t0 = Date.now();
  await A.conn.cancel({ sessionId: S.sid });
  const r1 = await p1; const ms = Date.now() - t0;
  const r2 = await p2;
  if (r1.error || r2.error) fail(errText(r1.error ?? r2.error));
  eq([r1.result.stopReason, r2.result.stopReason], ["cancelled", "cancelled"], "stopReasons (running, queued)");
  ok(ms <= 1000, `the running prompt answered ${ms} ms after session/cancel`);
  eq(modelCallsSince(calls).map((m) => m.user), ["[[slow]] cancel me"], "model calls (the queued prompt must not run)");
  const again = await A.turn(S.sid, "[[hello]] after cancel");
  eq(again.result?.stopReason, "end_turn", "the next prompt's stopReason");
  return `cancelled after ${ms} ms`;
});

// model, thinking, commands: set_config_option model → answers the full list (the same ids), sends config_option_update with it.
await step("set_config_option model", "model, thinking, commands", async () => {
  need(S.sid, "no session");
  const ids = need(S.newRes?.result?.configOptions, "no configOptions").map((o) => o.id).sort();
  const from = SEQ;
  const r = await A.ok("session/set_config_option", { sessionId: S.sid, configId: "model", value: "fake/fake-plain" });
  const list = r.result.configOptions;
  eq(list.map((o) => o.id).sort(), ids, "ids answered (the full list)");
  eq(list.find((o) => o.id === "model").currentValue, "fake/fake-plain", "model");
  const t = list.find((o) => o.id === "thought_level");
  ok(t.options.some((o) => o.value === t.currentValue), `thought_level ${t.currentValue} not among ${J(t.options.map((o) => o.value))} (fake-plain has no reasoning)`);
  const upd = await A.nextUpdate(S.sid, "config_option_update", from, 2000);
  eq(upd.msg.params.update.configOptions, list, "config_option_update's list (= the answer)");
  await A.ok("session/set_config_option", { sessionId: S.sid, configId: "model", value: "fake/fake-model" });
  const m = (await A.turn(S.sid, "[[hello]] which model")).models[0];
  eq(m?.model, "fake-model", "the model the next prompt used");
  return "fake-plain, then back";
});

// model, thinking, commands: set_config_option thought_level.
await step("set_config_option thought_level", "model, thinking, commands", async () => {
  need(S.sid, "no session");
  const from = SEQ;
  const r = await A.ok("session/set_config_option", { sessionId: S.sid, configId: "thought_level", value: "high" });
  eq(r.result.configOptions.find((o) => o.id === "thought_level")?.currentValue, "high", "thought_level");
  await A.nextUpdate(S.sid, "config_option_update", from, 2000);
  return "high";
});

// model, thinking, commands: set_config_option checks id and value: -32602 naming the allowed values.
await step("set_config_option: bad id or value → -32602", "model, thinking, commands", async () => {
  need(S.sid, "no session");
  const a = await A.call("session/set_config_option", { sessionId: S.sid, configId: "nope", value: "x" });
  eq(a.error?.code, -32602, `unknown configId: ${errText(a.error ?? a.result)}`);
  ok(["model", "thought_level", "approvals"].every((id) => a.error.message.includes(id)), `message ${J(a.error.message)} does not name the ids`);
  const b = await A.call("session/set_config_option", { sessionId: S.sid, configId: "approvals", value: "sometimes" });
  eq(b.error?.code, -32602, `bad approvals value: ${errText(b.error ?? b.result)}`);
  ok(["ask", "edits", "auto"].every((v) => b.error.message.includes(v)), `message ${J(b.error.message)} does not name ask/edits/auto`);
  return J(b.error.message);
});

// approvals: approvals as a config option: auto runs write without asking; edits and ask set back.
await step("approvals config option", "approvals, model, thinking, commands", async () => {
  need(S.sid, "no session");
  const set = async (v) => {
    const from = SEQ;
    const r = await A.ok("session/set_config_option", { sessionId: S.sid, configId: "approvals", value: v });
    eq(r.result.configOptions.find((o) => o.id === "approvals")?.currentValue, v, "approvals");
    const u = await A.nextUpdate(S.sid, "config_option_update", from, 2000);
    eq(u.msg.params.update.configOptions, r.result.configOptions, "config_option_update's list (= the answer)");
  };
  await set("auto");
  const from = SEQ;
  const r = await A.turn(S.sid, "[[autowrite]] Write auto.txt");
  eq(A.requests("session/request_permission", from).length, 0, "permission requests under auto");
  eq(toolCalls(r.us).map((c) => c.final), ["completed"], "write status");
  await set("edits");
  await set("ask");
  return "auto, edits, ask";
});

// model, thinking, commands: modes offer the approval values; set_mode sets them (current_mode_update after).
await step("set_mode mirrors approvals", "approvals, model, thinking, commands", async () => {
  need(S.sid, "no session");
  const from = SEQ;
  const r = await A.ok("session/set_mode", { sessionId: S.sid, modeId: "edits" });
  eq(r.result, {}, "result");
  const u = await A.nextUpdate(S.sid, "current_mode_update", from, 2000);
  eq(u.msg.params.update.currentModeId, "edits", "currentModeId");
  const t = await A.ok("session/set_config_option", { sessionId: S.sid, configId: "thought_level", value: "low" });
  eq(t.result.configOptions.find((o) => o.id === "approvals")?.currentValue, "edits", "approvals after set_mode edits");
  await A.ok("session/set_mode", { sessionId: S.sid, modeId: "ask" });
  return "edits, then ask";
});

// updates: kinds and titles of every tool call the session made: read → read "Read <path>", edit → edit "Edit <path>",
// write → edit "Write <path>", bash → execute (the command), todo → think "Update plan"; paths absolute.
await step("tool kinds and titles", "updates", async () => {
  need(S.sid, "no session");
  const firsts = toolCalls(A.updates(S.sid)).map((c) => c.first);
  const want = { read: ["read", `Read ${P("hello.txt")}`], edit: ["edit", `Edit ${P("plain.txt")}`], write: ["edit", `Write ${P("created.txt")}`], bash: ["execute", "echo first"], todo: ["think", "Update plan"] };
  const byInput = (f) => firsts.find(f);
  const got = {
    read: byInput((u) => u.rawInput?.path === "hello.txt"), edit: byInput((u) => u.rawInput?.path === "plain.txt"),
    write: byInput((u) => u.rawInput?.path === "created.txt"), bash: byInput((u) => u.rawInput?.command === "echo first"), todo: byInput((u) => u.rawInput?.op === "init"),
  };
  for (const [k, w] of Object.entries(want)) { ok(got[k], `no tool_call for ${k} (by its rawInput)`); eq([got[k].kind, got[k].title], w, `${k} kind/title`); }
  return "read, edit, write, bash, todo";
});

// sessions: session/list {cwd}: {sessionId, cwd, title (the name, else the first line of the first prompt, ≤ 80), updatedAt (RFC 3339)}, newest first.
await step("session/list: title, cwd, updatedAt", "sessions", async () => {
  need(S.sid, "no session");
  need(caps().sessionCapabilities?.list, "the agent does not advertise sessionCapabilities.list");
  const r2 = await A.ok("session/new", { cwd: PROJ, mcpServers: [] }); S.sid2 = r2.result.sessionId;
  await A.turn(S.sid2, "[[hello]] second session\nwith a second line");
  const r = await A.ok("session/list", { cwd: PROJ });
  const by = Object.fromEntries(r.result.sessions.map((s) => [s.sessionId, s]));
  ok(by[S.sid] && by[S.sid2], `listed: ${short(r.result.sessions.map((s) => s.sessionId))}`);
  eq([by[S.sid].cwd, by[S.sid].title], [PROJ, "Demo Session"], "the first session's cwd/title (its name)");
  eq(by[S.sid2].title, "[[hello]] second session", "the second session's title (the first line of its first prompt)");
  const many = (await A.ok("session/list", { cwd: MANY })).result.sessions;
  const long = many.find((s) => s.sessionId === MANY_IDS[7])?.title ?? "";
  ok(long.length <= 80 && "a long first line ".repeat(8).startsWith(long.replace(/…$/, "").trimEnd()), `a long first line's title ${J(long)} (≤ 80 chars of the first line)`);
  ok(r.result.sessions.every((s) => s.cwd === PROJ && rfc3339.test(s.updatedAt ?? "")), `cwd/updatedAt ${short(r.result.sessions.map((s) => [s.cwd, s.updatedAt]))}`);
  const times = r.result.sessions.map((s) => Date.parse(s.updatedAt));
  ok(times.every((t, i) => i === 0 || times[i - 1] >= t), "not newest first");
  return `${r.result.sessions.length} sessions`;
});

// sessions: several sessions may be open, and their turns run at once, up to --max-running
// (default 8): a prompt to another session while one runs is not held behind it (no "Waiting for a
// free slot" note) and ends while the first still runs; the first is then cancelled.
await step("two sessions' turns run at once", "sessions", async () => {
  need(S.sid && S.sid2, "no two sessions");
  const p1 = (await A.busy(S.sid, "[[slow]] keep busy")).done;
  let p1done = false; p1.then(() => { p1done = true; });
  const from = SEQ;
  const r2 = await A.call("session/prompt", { sessionId: S.sid2, prompt: [{ type: "text", text: "[[hello]] while another runs" }] });
  const text = chunkText(A.updates(S.sid2, from));
  ok(!text.includes("Waiting for a free slot"), `the other session's prompt waited: ${J(text)}`);
  eq(r2.result?.stopReason, "end_turn", `the other session's prompt: ${errText(r2.error ?? r2.result)}`);
  ok(!p1done, "the first session's turn ended before the other's (they did not overlap)");
  await A.conn.cancel({ sessionId: S.sid });
  const r1 = await p1;
  eq(r1.result?.stopReason, "cancelled", "the running prompt, cancelled");
  return `the other session answered ${J(text)} while the first still ran`;
});

// sessions: session/list pages by 50 with an opaque nextCursor, newest first (55 sessions written in pi's format).
await step("session/list: pages", "sessions", async () => {
  need(caps().sessionCapabilities?.list, "the agent does not advertise sessionCapabilities.list");
  const p1 = (await A.ok("session/list", { cwd: MANY })).result;
  eq(p1.sessions.length, 50, "sessions on the first page");
  ok(typeof p1.nextCursor === "string" && p1.nextCursor, `nextCursor ${J(p1.nextCursor)}`);
  const p2 = (await A.ok("session/list", { cwd: MANY, cursor: p1.nextCursor })).result;
  eq(p2.sessions.length, 5, "sessions on the second page");
  ok(p2.nextCursor == null, `a nextCursor on the last page: ${J(p2.nextCursor)}`);
  const all = [...p1.sessions, ...p2.sessions];
  eq(all.map((s) => s.sessionId), [...MANY_IDS].reverse(), "ids, newest first");
  return "50 + 5";
});

// sessions: session/close forgets the session (a prompt to it is -32602) and releases it for other processes.
await step("session/close", "sessions", async () => {
  need(S.sid, "no session");
  need(caps().sessionCapabilities?.close, "the agent does not advertise sessionCapabilities.close");
  const r = await A.ok("session/close", { sessionId: S.sid });
  eq(r.result, {}, "result");
  const p = await A.call("session/prompt", { sessionId: S.sid, prompt: [{ type: "text", text: "[[hello]] to a closed session" }] });
  eq(p.error?.code, -32602, `prompt to the closed session: ${errText(p.error ?? p.result)}`);
  ok(p.error.message.includes("sessionId") || p.error.message.includes(S.sid), `message ${J(p.error.message)} names neither the field nor the id`);
  S.closed = true;
  return "closed";
});

// A second editor, in a new process, without fs or terminal_output (while A, which closed the session, still runs).
const B = new Agent("B", { fs: false, terminalOutput: false });
const bInit = await B.call("initialize", initParams(B.caps));
const bFrom = SEQ;

// sessions: session/load in a new process replays the current branch before answering: user text as user_message_chunk,
// answers as chunks, every tool call as one tool_call ending completed or failed; then available_commands_update and usage_update.
await step("session/load in a new process: replay", "sessions", async () => {
  need(S.sid, "no session");
  if (bInit.error) fail(`initialize: ${errText(bInit.error)}`);
  need(bInit.result.agentCapabilities?.loadSession, "the agent does not advertise loadSession");
  const r = await B.ok("session/load", { sessionId: S.sid, cwd: PROJ, mcpServers: [] }); S.load = r;
  ok(Array.isArray(r.result.configOptions) && r.result.modes, "the answer lacks configOptions or modes");
  const us = B.updates(S.sid, r.req.seq, r.res.seq);
  const users = us.filter(kind("user_message_chunk")).map((u) => u.content?.text);
  ok(users.includes("[[hello]] Say hello\nin two lines") && users.includes("[[read]] Read hello.txt"), `user_message_chunks ${short(users)}`);
  ok(chunkText(us).includes("Reading it.") && chunkText(us).includes("The tool said: hello from the disk"), "answers not replayed");
  const cs = toolCalls(us);
  ok(cs.length >= 10, `${cs.length} tool calls replayed`);
  for (const c of cs) { eq(c.first.sessionUpdate, "tool_call", `${c.id}'s first update`); eq(c.calls.length, 1, `tool_calls for ${c.id}`); ok(["completed", "failed"].includes(c.final), `${c.id} ends ${c.final}`); }
  const denied = cs.find((c) => J(c.events).includes("denied.txt")) ?? cs.find((c) => textContent(c.content).includes("Denied by user"));
  eq(denied?.final, "failed", "the rejected write's final status");
  const ac = await B.nextUpdate(S.sid, "available_commands_update", r.res.seq, 3000);
  const uu = await B.nextUpdate(S.sid, "usage_update", r.res.seq, 3000);
  ok(ac && uu, "no available_commands_update/usage_update after the answer");
  return `${users.length} user messages, ${cs.length} tool calls`;
});

// sessions: the replay includes the plan.
await step("session/load replays the plan", "sessions", async () => {
  const r = need(S.load, "no load");
  const plan = B.updates(S.sid, r.req.seq, r.res.seq).filter(kind("plan")).at(-1);
  ok(plan, "no plan replayed");
  eq(plan.entries.map((e) => [e.content, e.status]), [["Write the code", "completed"], ["Test the code", "in_progress"]], "entries");
  return "the last plan";
});

// sessions: a prompt after load is appended to the same session file, with the history.
await step("prompt after load appends to the session", "sessions", async () => {
  need(S.load, "no load");
  const file = need(sessionFileOf(S.sid), "no session file");
  const before = fs.statSync(file).size;
  const r = await B.turn(S.sid, "[[hello]] after load");
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "end_turn", "stopReason");
  ok(fs.statSync(file).size > before, "the session file did not grow");
  ok(r.models[0].messages.some((m) => textOf(m.content).includes("Say hello\nin two lines")), "the model did not get the history");
  return path.basename(file);
});

// updates: without _meta.terminal_output, bash ends with one fenced text content; editor's files: no fs/* calls to a client that did not offer them.
await step("bash output without terminal_output; no fs calls", "updates, editor's files", async () => {
  need(S.load, "no load");
  const r = await B.turn(S.sid, "[[plainbash]] Run a command");
  if (r.error) fail(errText(r.error));
  const c = oneToolCall(r.us, "bash");
  eq(c.final, "completed", "status");
  eq(c.content?.length, 1, `content items: ${short(c.content)}`);
  ok(/^```[^\n]*\n[\s\S]*plain one\nplain two\n[\s\S]*```\s*$/.test(textContent(c.content)), `not one fenced text: ${short(c.content)}`);
  ok(!J(c.events).includes("terminal_"), "terminal _meta sent to a client without terminal_output");
  eq(B.log.filter((e) => e.seq > bFrom && /^fs\//.test(e.msg?.method ?? "")).length, 0, "fs/* requests to a client without fs");
  return "one fenced text";
});

// model, thinking, commands: /compact [instructions] is answered in-band: an agent_message_chunk, then end_turn (in B, after the
// load steps, so that the replay above saw the whole history).
await step("/compact answered in-band", "model, thinking, commands", async () => {
  need(S.load, "no loaded session");
  const r = await B.turn(S.sid, "/compact keep it short");
  if (r.error) fail(errText(r.error));
  eq(r.result.stopReason, "end_turn", "stopReason");
  ok(chunkText(r.us).length > 0, "no agent_message_chunk");
  ok(r.models.length >= 1, "no summary was asked of the model");
  return short(chunkText(r.us).split("\n")[0], 80);
});

// ending: stdin EOF → exit 0 within 2 s.
await step("EOF: exit 0 within 2 s", "ending", async () => {
  const t0 = Date.now();
  const exit = await A.end(5000);
  const ms = exit.t - t0;
  eq([exit.code, exit.signal], [0, null], "exit code/signal");
  ok(ms <= 2000, `exited ${ms} ms after EOF`);
  return `${ms} ms`;
});

// sessions: session/resume: the same as load without the replay (A, which had the session open, has exited).
await step("session/resume", "sessions", async () => {
  need(S.sid2, "no second session");
  need(bInit.result?.agentCapabilities?.sessionCapabilities?.resume, "the agent does not advertise sessionCapabilities.resume");
  const r = await B.ok("session/resume", { sessionId: S.sid2, cwd: PROJ, mcpServers: [] });
  ok(Array.isArray(r.result.configOptions) && r.result.modes, "the answer lacks configOptions or modes");
  eq(B.updates(S.sid2, r.req.seq, r.res.seq).filter((u) => /chunk|tool_call/.test(u.sessionUpdate)).length, 0, "replayed updates");
  await B.nextUpdate(S.sid2, "available_commands_update", r.res.seq, 3000);
  const t = await B.turn(S.sid2, "[[hello]] after resume");
  eq(t.result?.stopReason, "end_turn", "stopReason");
  ok(t.models[0].messages.some((m) => textOf(m.content).includes("second session")), "the model did not get the history");
  return "resumed, no replay";
});

// sessions: session/delete removes the file; the session is gone from session/list.
await step("session/delete", "sessions", async () => {
  need(caps().sessionCapabilities?.delete, "the agent does not advertise sessionCapabilities.delete");
  const id = MANY_IDS[0], file = sessionFileOf(id);
  const r = await B.ok("session/delete", { sessionId: id });
  eq(r.result, {}, "result");
  ok(!fs.existsSync(file), "the file is still there");
  const l = await B.ok("session/list", { cwd: MANY });
  ok(!l.result.sessions.some((s) => s.sessionId === id), "still listed");
  return path.basename(file);
});

// sessions: a session open in this process cannot be deleted: -32602 naming it.
await step("session/delete of an open session → -32602", "sessions", async () => {
  need(S.load, "no loaded session");
  need(caps().sessionCapabilities?.delete, "the agent does not advertise sessionCapabilities.delete");
  const r = await B.call("session/delete", { sessionId: S.sid });
  eq(r.error?.code, -32602, `delete of the open session: ${errText(r.error ?? r.result)}`);
  ok(r.error.message.includes(S.sid), `message ${J(r.error.message)} does not name the session`);
  ok(sessionFileOf(S.sid), "the file is gone");
  return J(r.error.message);
});
await B.end();

// ---------------------------------------------------------------- raw pipe: what the SDK would never send
class Raw {
  constructor(name, env = CHILD_ENV) {
    this.name = name; this.log = []; this.queue = []; this.waiter = null; this.stderr = "";
    agents.push(this);
    this.child = spawn(TARGET[0], TARGET.slice(1), { cwd: PROJ, env, stdio: ["pipe", "pipe", "pipe"] });
    this.child.stdin.on("error", () => {}); this.child.on("error", () => {});
    this.child.stderr.on("data", (d) => { this.stderr += d; });
    this.exited = new Promise((r) => this.child.on("exit", (code, signal) => { this.exit = { code, signal }; this.push("#", `exit code=${code} signal=${signal}`); r(); }));
    const dec = new StringDecoder("utf8"); let buf = "";
    this.child.stdout.on("data", (d) => { buf += dec.write(d); let i; while ((i = buf.indexOf("\n")) >= 0) { this.push("<", buf.slice(0, i)); buf = buf.slice(i + 1); } });
  }
  push(dir, line) {
    const e = { seq: ++SEQ, dir, line }; try { e.msg = JSON.parse(line); } catch {}
    this.log.push(e);
    if (dir !== ">") { this.queue.push(e); this.waiter?.(); }
  }
  send(line) { this.push(">", line); this.child.stdin.write(line + "\n"); }
  // response waits for the next line that is a response (no method), skipping notifications and agent requests.
  async response(ms = 3000) {
    const end = Date.now() + ms;
    for (;;) {
      const e = this.queue.shift();
      if (e) { if (e.dir === "#") return { none: `the agent exited (${e.line}): ${short(this.stderr.trim(), 300)}` }; if (e.msg && !("method" in e.msg)) return e.msg; if (!e.msg) return { none: `a non-JSON line: ${short(e.line)}` }; continue; }
      if (this.exit) return { none: `the agent has exited (code ${this.exit.code})` };
      if (Date.now() >= end) return { none: `no answer within ${ms} ms` };
      await new Promise((r) => { this.waiter = r; setTimeout(r, Math.max(end - Date.now(), 1)); }); this.waiter = null;
    }
  }
  async ask(obj, ms) { this.send(typeof obj === "string" ? obj : J(obj)); return this.response(ms); }
}
const rpcErr = (r, code, id, what) => {
  if (r.none) fail(`${what}: ${r.none}`);
  eq([r.jsonrpc, r.id, r.error?.code], ["2.0", id, code], `${what}: jsonrpc/id/error.code of ${short(r)}`);
  ok(typeof r.error.message === "string" && r.error.message, `${what}: no error message`);
  return r.error.message;
};
const C = new Raw("C");
const initLine = { jsonrpc: "2.0", id: 0, method: "initialize", params: initParams({ fs: false, terminalOutput: false }) };
// probe: a valid request answered proves the connection survived.
const probe = async (id) => { const r = await C.ask({ jsonrpc: "2.0", id, method: "session/list", params: { cwd: PROJ } }); ok(r.id === id && r.result, `the connection did not survive (probe ${J(id)}: ${short(r)})`); };

// wire: a request other than initialize before initialize → -32600; initialize then works.
await step("request before initialize → -32600", "wire", async () => {
  rpcErr(await C.ask({ jsonrpc: "2.0", id: 1, method: "session/list", params: {} }), -32600, 1, "session/list before initialize");
  const r = await C.ask(initLine);
  ok(r.id === 0 && r.result?.protocolVersion === 1, `initialize after it: ${short(r)}`);
  return "then initialize answered";
});
if (!C.log.some((e) => e.msg?.id === 0 && e.msg.result)) await C.ask(initLine); // whatever the step found, go on initialized

// wire: not JSON → -32700 with id null; the connection survives.
await step("not JSON → -32700, id null", "wire", async () => {
  rpcErr(await C.ask("this is not json"), -32700, null, "a line of text");
  rpcErr(await C.ask('{"jsonrpc":"2.0","id":3,"method":'), -32700, null, "truncated JSON");
  await probe("p1");
  return "twice, and the connection survived";
});

// wire: JSON that is not a request/notification/response → -32600 (with its id when usable).
await step("not a request → -32600", "wire", async () => {
  rpcErr(await C.ask(`[${J({ jsonrpc: "2.0", id: 5, method: "session/list", params: {} })}]`), -32600, null, "a batch");
  rpcErr(await C.ask({ jsonrpc: "1.0", id: 6, method: "session/list", params: {} }), -32600, 6, "jsonrpc 1.0");
  rpcErr(await C.ask({ jsonrpc: "2.0", id: 7, params: {} }), -32600, 7, "no method");
  await probe("p2");
  return "batch, jsonrpc 1.0, no method";
});

// wire: unknown method with an id → -32601; an unknown notification is ignored (nothing written).
await step("unknown method → -32601, unknown notification ignored", "wire", async () => {
  rpcErr(await C.ask({ jsonrpc: "2.0", id: "abc", method: "nope/nothing", params: {} }), -32601, "abc", "unknown method");
  C.send(J({ jsonrpc: "2.0", method: "nope/notify", params: {} }));
  await probe("p3"); // the next answer is the probe's: nothing came for the notification
  return "ok";
});

// wire: missing or wrongly typed params, a relative cwd, an unknown sessionId, an unsupported content block → -32602 naming the field.
await step("bad params → -32602 naming the field", "wire", async () => {
  const names = (msg, field, what) => ok(msg.includes(field), `${what}: message ${J(msg)} does not name ${field}`);
  names(rpcErr(await C.ask({ jsonrpc: "2.0", id: 10, method: "session/new", params: { mcpServers: [] } }), -32602, 10, "no cwd"), "cwd", "no cwd");
  names(rpcErr(await C.ask({ jsonrpc: "2.0", id: 11, method: "session/new", params: { cwd: 42, mcpServers: [] } }), -32602, 11, "cwd 42"), "cwd", "cwd 42");
  names(rpcErr(await C.ask({ jsonrpc: "2.0", id: 12, method: "session/new", params: { cwd: "proj", mcpServers: [] } }), -32602, 12, "relative cwd"), "cwd", "relative cwd");
  names(rpcErr(await C.ask({ jsonrpc: "2.0", id: 13, method: "session/prompt", params: { sessionId: "no-such-session", prompt: [{ type: "text", text: "hi" }] } }), -32602, 13, "unknown sessionId"), "sessionId", "unknown sessionId");
  const s = await C.ask({ jsonrpc: "2.0", id: 14, method: "session/new", params: { cwd: PROJ, mcpServers: [] } }, 10000);
  ok(s.result?.sessionId, `session/new: ${short(s)}`);
  const calls = model.requests.length;
  const audio = rpcErr(await C.ask({ jsonrpc: "2.0", id: 15, method: "session/prompt", params: { sessionId: s.result.sessionId, prompt: [{ type: "audio", mimeType: "audio/wav", data: "UklGRg==" }] } }, 5000), -32602, 15, "audio block");
  ok(/audio|prompt/.test(audio), `audio block: message ${J(audio)} names neither prompt nor audio`);
  eq(model.requests.length, calls, "model calls for the audio prompt");
  await probe("p4");
  return "cwd missing/42/relative, unknown sessionId, audio";
});

// wire: unknown fields and _meta in params are ignored; ids (numbers, strings) are echoed exactly.
await step("unknown fields and _meta ignored, ids echoed", "wire", async () => {
  const r = await C.ask({ jsonrpc: "2.0", id: "s-1", method: "session/list", params: { cwd: PROJ, extra: true, _meta: { x: 1 } } });
  ok(r.id === "s-1" && Array.isArray(r.result?.sessions), `session/list with extra fields: ${short(r)}`);
  const n = await C.ask({ jsonrpc: "2.0", id: 9007199254740991, method: "session/list", params: { cwd: PROJ } });
  eq(n.id, 9007199254740991, "a large numeric id");
  return "ok";
});
C.child.stdin.end();
await Promise.race([C.exited, sleep(3000)]);
if (!C.exit) { C.child.kill("SIGKILL"); await C.exited; }

// wire: no usable model → -32000 (Zed's login view) from session/new or the prompt, with a message.
await step("no usable model → -32000", "wire", async () => {
  const dir = path.join(WORK, "no-models"); fs.mkdirSync(path.join(dir, "home"), { recursive: true });
  const D = new Raw("D", { ...CHILD_ENV, HOME: path.join(dir, "home"), PI_CODING_AGENT_DIR: path.join(dir, "agent") });
  try {
    const i = await D.ask(initLine); ok(i.result, `initialize: ${short(i)}`);
    let r = await D.ask({ jsonrpc: "2.0", id: 1, method: "session/new", params: { cwd: PROJ, mcpServers: [] } }, 10000);
    if (r.result?.sessionId) r = await D.ask({ jsonrpc: "2.0", id: 2, method: "session/prompt", params: { sessionId: r.result.sessionId, prompt: [{ type: "text", text: "hi" }] } }, 10000);
    if (r.none) fail(r.none);
    eq(r.error?.code, -32000, `${r.id === 1 ? "session/new" : "session/prompt"}: ${short(r)}`);
    ok(r.error.message, "no message");
    return `${r.id === 1 ? "session/new" : "session/prompt"}: ${short(r.error.message, 120)}`;
  } finally { D.child.stdin.end(); await Promise.race([D.exited, sleep(3000)]); if (!D.exit) { D.child.kill("SIGKILL"); await D.exited; } }
});

server.close(); server.closeAllConnections?.();
console.log(`RESULT: ${counts.PASS} passed, ${counts.FAIL} failed, ${counts.SKIP} skipped`);
process.exit(counts.FAIL ? 1 : 0);
