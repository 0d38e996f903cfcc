// Records what pi 1.6 writes in RPC mode for each scenario folder under
// testdata/pi16/ that holds in.jsonl and model.jsonl, into its out.jsonl.
// Run by scripts/pi-transcripts.sh, which finds node and pi:
//   node pi-transcripts.mjs PI_CLI_JS TESTDATA_PI16 [SCENARIO ...]
//
// model.jsonl is the script of a local OpenAI-compatible fake model, one
// answer a line, in the format of the test suite's fake model
// (scriptedResponse in model_test.go: text, thinking, toolCalls, usage,
// status, body, delayMs), so that TestPiTranscripts serves rpi the same
// answers. in.jsonl is what is written to pi's stdin, one line at a time;
// a line "#wait N TEXT" instead waits until pi's output holds TEXT N times.
// pi runs as `pi --mode rpc --no-session` in a cwd holding hello.txt, with
// its own HOME and agent dir (models.json naming the fake model,
// settings.json with a 1 ms retry delay), the way the test runs rpi.
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";

const [cli, root, ...only] = process.argv.slice(2);
const scenarios = only.length ? only : fs.readdirSync(root).filter((d) =>
  fs.existsSync(path.join(root, d, "in.jsonl")) && fs.existsSync(path.join(root, d, "model.jsonl"))).sort();

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// fakeModel serves the scripted answers in order, as model_test.go's
// openAIStream writes them.
function fakeModel(script) {
  let next = 0;
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", async () => {
      if (req.method === "GET") { res.writeHead(200, { "Content-Type": "application/json" }); res.end('{"object":"list","data":[{"id":"fake-model"}]}'); return; }
      const r = script[next++];
      if (!r) { res.writeHead(418); res.end("the fake model has no more scripted answers"); return; }
      if (r.status) { res.writeHead(r.status, { "Content-Type": "text/plain" }); res.end((r.body ?? "") + "\n"); return; }
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
      let gone = false;
      res.on("close", () => (gone = true));
      const send = (data) => res.write(`data: ${data}\n\n`);
      const chunk = (delta, finish = null) => JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1700000000,
        model: "fake-model", choices: [{ index: 0, delta, finish_reason: finish }] });
      const pause = async () => { if (r.delayMs) await sleep(r.delayMs); return !gone; };
      send(chunk({ role: "assistant", content: "" }));
      for (const t of r.thinking ?? []) { if (!(await pause())) return; send(chunk({ reasoning_content: t })); }
      for (const t of r.text ?? []) { if (!(await pause())) return; send(chunk({ content: t })); }
      for (const [i, tc] of (r.toolCalls ?? []).entries()) {
        send(chunk({ tool_calls: [{ index: i, id: tc.id, type: "function", function: { name: tc.name, arguments: "" } }] }));
        for (const a of tc.args ?? []) { if (!(await pause())) return; send(chunk({ tool_calls: [{ index: i, function: { arguments: a } }] })); }
      }
      send(chunk({}, r.finish ?? (r.toolCalls?.length ? "tool_calls" : "stop")));
      if (r.usage) {
        const u = { input: 0, output: 0, cacheRead: 0, ...r.usage };
        send(JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", created: 1700000000, model: "fake-model", choices: [],
          usage: { prompt_tokens: u.input + u.cacheRead, completion_tokens: u.output, total_tokens: u.input + u.cacheRead + u.output,
            prompt_tokens_details: { cached_tokens: u.cacheRead } } }));
      }
      send("[DONE]");
      res.end();
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

async function record(name) {
  const dir = path.join(root, name);
  const lines = (f) => fs.readFileSync(path.join(dir, f), "utf8").split("\n").filter((l) => l.trim() !== "");
  const script = lines("model.jsonl").map((l) => JSON.parse(l));
  const server = await fakeModel(script);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "pi16-"));
  const agent = path.join(work, "agent"), home = path.join(work, "home"), cwd = path.join(work, "cwd");
  for (const d of [agent, home, cwd]) fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(path.join(cwd, "hello.txt"), "hello from the file\n");
  fs.writeFileSync(path.join(agent, "models.json"), JSON.stringify({ providers: { fake: { baseUrl: `http://127.0.0.1:${server.address().port}/v1`,
    api: "openai-completions", apiKey: "dummy-key", models: [{ id: "fake-model", name: "Fake Model", reasoning: true, input: ["text", "image"],
      contextWindow: 100000, maxTokens: 4096, cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 } }] } } }));
  fs.writeFileSync(path.join(agent, "settings.json"), JSON.stringify({ defaultProvider: "fake", defaultModel: "fake-model",
    retry: { baseDelayMs: 1 }, compaction: { keepRecentTokens: 1 } }));
  const pi = spawn(process.execPath, [cli, "--mode", "rpc", "--no-session"], { cwd, stdio: ["pipe", "pipe", "pipe"],
    env: { PATH: process.env.PATH, HOME: home, TMPDIR: work, PI_CODING_AGENT_DIR: agent, PI_OFFLINE: "1", PI_TELEMETRY: "0" } });
  let out = "", err = "";
  pi.stdout.on("data", (d) => (out += d));
  pi.stderr.on("data", (d) => (err += d));
  const exited = new Promise((r) => pi.on("close", r));
  const count = (text) => out.split(text).length - 1;
  for (const line of lines("in.jsonl")) {
    const m = line.match(/^#wait (\d+) (.*)$/);
    if (!m) { pi.stdin.write(line + "\n"); continue; }
    for (let waited = 0; count(m[2]) < Number(m[1]); waited += 10) {
      if (waited > 30000) throw new Error(`${name}: never saw ${m[2]} ${m[1]} times in:\n${out}\n${err}`);
      await sleep(10);
    }
  }
  pi.stdin.end();
  const killer = setTimeout(() => pi.kill(), 10000);
  await exited;
  clearTimeout(killer);
  server.close();
  fs.rmSync(work, { recursive: true, force: true });
  fs.writeFileSync(path.join(dir, "out.jsonl"), out);
  console.log(`${name}: ${out.split("\n").length - 1} lines${err.trim() ? " (stderr: " + err.trim().split("\n")[0] + ")" : ""}`);
}

for (const s of scenarios) await record(s);
